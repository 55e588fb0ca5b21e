#!/bin/bash
# The chapter-6 experiments with gpuslot on an NVIDIA GPU (issues 18, 32;
# docs/results-ch6.md): gpuslotd (socket transport, NVIDIA planner) under
# MPS, tasks written with the Python package running torchvision networks
# with random weights, each on a worker process on a CPU core of its own
# (kept from scenario to scenario); the runner, gpuslotd, the MPS daemons
# and the monitors on the first CPU.
#
# By default issue 32's comparison: the "only" experiment with and without
# CUDA graphs for the priority task and the camera pipeline at 85 % and
# 130 % of the GPU, each under every technique (unmanaged, stream
# priorities, MPS limits, gpuslot's earlier layout, its priority layouts,
# the hybrid), 5 repetitions of 60 s, interleaved in a seeded random order.
# One invocation is one run into OUT (OUT/schedule.json says what it is);
# when a call has a time limit, --budget SECONDS stops it before a
# repetition that may not fit, and the same command with --resume goes on
# with the pending ones (refused if the tree is not the commit OUT was
# started at). Each call ends with the report of what is done so far:
# OUT/tables.md, runs.csv (a line per repetition), techniques.csv, the plots
# (they need matplotlib; without it, run `python3 -m ch6 report OUT` where
# it is).
#
# usage: ch6.sh BUNDLE OUT [ch6 run OPTIONS...]
#        ch6.sh BUNDLE OUT --resume [--budget SECONDS]
#        ch6.sh BUNDLE OUT EXPERIMENTS [SECONDS [ch6 run OPTIONS...]]   (as before)
#   BUNDLE  gpuslotd and libgpuslot.so.1 from tests/gpu/bundle.sh
#   OPTIONS --experiments, --reps, --duration, --budget, --suspects, ...:
#           PYTHONPATH=tests/gpu python3 -m ch6 run --help
#   GPUSLOT_COMMIT  the commit this tree is (a copy of the tree may carry a
#           stale .git); default: git rev-parse --short HEAD
set -euo pipefail
b=$(cd "$1" && pwd) out=$2
shift 2
positional=()
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
	positional=(--experiments "$1")
	shift
	if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
		positional+=(--duration "$1")
		shift
	fi
fi
here=$(cd "$(dirname "$0")" && pwd)
commit=${GPUSLOT_COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)}
mkdir -p "$out"
housekeeping=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
{ echo "== call at $(date -u +%FT%TZ): ch6.sh ${positional[*]} $*"
  nvidia-smi -L || true
  nvidia-smi --query-gpu=driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv || true
  python3 -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)' || true
  echo "commit $commit"
  echo "CPUs $(nproc), housekeeping CPU $housekeeping; $(grep -m1 'model name' /proc/cpuinfo)"
} >>"$out/env.txt" 2>&1
# The MPS daemons off the tasks' CPUs too (the server inherits the affinity).
pin=()
command -v taskset >/dev/null && pin=(taskset -c "$housekeeping")
"${pin[@]}" nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS control daemon started" >>"$out/env.txt"
trap 'echo quit | nvidia-cuda-mps-control 2>/dev/null || true' EXIT
run="$b/ld-linux-x86-64.so.2 --library-path $b"
export GPUSLOT_LIBRARY=$b/libgpuslot.so.1
# Issue 39/40's techniques: gpuslot-run and its interposer from the same
# release build (bundle.sh's preload/: gpuslot's libraries only, for the
# host's own loader), XSched's install (bundle.sh XSCHED_DIR=...).
if [ -x "$b/preload/gpuslot-run" ]; then
	export CH6_GPUSLOT_RUN=$b/preload/gpuslot-run GPUSLOT_RUN_LIBRARY=$b/preload/libgpuslot-run.so
fi
if [ -x "$b/xsched/bin/xserver" ]; then
	export CH6_XSCHED_DIR=$b/xsched
fi
export PYTHONPATH=$here:$here/../../python${PYTHONPATH:+:$PYTHONPATH}
python3 -m ch6 run --out "$out" --commit "$commit" "${positional[@]}" \
	--gpuslotd "$run $b/gpuslotd" --gpuslotctl "$run $b/gpuslotctl" "$@"
python3 -m ch6 report "$out" || echo "ch6: no report here: run 'python3 -m ch6 report $out'"
