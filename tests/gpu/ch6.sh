#!/bin/bash
# The dissertation's chapter-6 experiments with gpuslot on an NVIDIA GPU
# (issue 18; docs/results-ch6.md): gpuslotd (socket transport, NVIDIA
# planner) under MPS, tasks written with the Python package running
# torchvision networks with random weights, each on a worker process on a
# CPU core of its own (kept from scenario to scenario). "calibrate" first
# measures the GPU-busy share of candidate sizes alone (torch.profiler,
# CUPTI) into OUT/calibration.csv, and 6.1c runs Table 6.1 again on the
# sizes nearest the dissertation's shares. Writes OUT/jobs.csv (every job),
# OUT/summary.csv, OUT/tables.md and the CDF plots (the plots need
# matplotlib; without it, run `python3 -m ch6 report OUT` where it is).
#
# usage: ch6.sh BUNDLE OUT [EXPERIMENTS [SECONDS [MORE ch6 run OPTIONS...]]]
#   BUNDLE       gpuslotd and libgpuslot.so.1 from tests/gpu/bundle.sh
#   EXPERIMENTS  comma-separated, of calibrate, 6.1, 6.1c, 6.3, only, camera
#                (default: all of them, one run)
#   SECONDS      of jobs per scenario after warm-up (default 20)
set -euo pipefail
b=$(cd "$1" && pwd) out=$2
experiments=${3:-calibrate,6.1,6.1c,6.3,only,camera} seconds=${4:-20}
shift $(($# < 4 ? $# : 4))
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
  python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)'
  # A copy of the tree may carry a stale .git: GPUSLOT_COMMIT names it.
  echo "commit ${GPUSLOT_COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null)}"
} >"$out/env.txt" 2>&1
nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS control daemon started" >>"$out/env.txt"
trap 'echo quit | nvidia-cuda-mps-control 2>/dev/null || true' EXIT
run="$b/ld-linux-x86-64.so.2 --library-path $b"
export GPUSLOT_LIBRARY=$b/libgpuslot.so.1
export PYTHONPATH=$here:$here/../../python${PYTHONPATH:+:$PYTHONPATH}
python3 -m ch6 run --experiments "$experiments" --duration "$seconds" --out "$out" \
	--gpuslotd "$run $b/gpuslotd" --gpuslotctl "$run $b/gpuslotctl" "$@"
python3 -m ch6 report "$out" || echo "ch6: no report here (matplotlib?): run 'python3 -m ch6 report $out'"
