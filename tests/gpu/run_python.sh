#!/bin/bash
# The Python package on an NVIDIA GPU: gpuslotd (socket transport, NVIDIA
# planner, k = 2 of 25 % and 75 % of the SMs) under MPS, and
# torch_slots.py's measurements (docs/results-nvidia.md section 5).
# Needs a bundle from bundle.sh (gpuslotd and libgpuslot.so.1) and the
# host's python3 with PyTorch, torchvision and CuPy.
#
# usage: run_python.sh BUNDLE OUT
set -u
b=$(cd "$1" && pwd) out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvidia-smi -L >"$out/device.txt" 2>&1
nvidia-cuda-mps-control -d && echo "MPS control daemon started" >>"$out/device.txt"
work=$(mktemp -d)
export GPUSLOT_TRANSPORT=socket GPUSLOT_SOCKET_DIR=$work/run
export GPUSLOT_LIBRARY=$b/libgpuslot.so.1 PYTHONPATH=$here/../../python
printf '[default]\nk = 2\nsizes = 25%%,75%%\n' >"$work/gpuslotd.conf"
"$b/ld-linux-x86-64.so.2" --library-path "$b" "$b/gpuslotd" --transport socket \
	--socket-dir "$work/run" --socket-group '' --config "$work/gpuslotd.conf" \
	--state-dir "$work" >"$out/gpuslotd.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$work/run/gpu0.sock" ] && break; sleep 0.1; done
"$b/ld-linux-x86-64.so.2" --library-path "$b" "$b/gpuslotctl" status --transport socket \
	>"$out/status.txt" 2>&1
py() { python3 "$here/torch_slots.py" "$@" 2>>"$out/python.log"; }
{
	py sm_ids
	py throughput
	py pair 0 10 &
	p0=$!
	py pair 1 10 &
	p1=$!
	wait $p0 $p1
} >"$out/results.jsonl"
kill "$daemon"
wait "$daemon"
echo quit | nvidia-cuda-mps-control
cat "$out/results.jsonl"
