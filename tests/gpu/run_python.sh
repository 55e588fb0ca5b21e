#!/bin/bash
# The Python package on an NVIDIA GPU: gpuslotd (socket transport, NVIDIA
# planner, k = 2 of 25 % and 75 % of the SMs) under MPS, and
# torch_slots.py's measurements (docs/results-nvidia.md section 5).
# Needs a bundle from bundle.sh (gpuslotd and libgpuslot.so.1) and the
# host's python3 with PyTorch, torchvision and CuPy.
#
# usage: run_python.sh BUNDLE OUT
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/slot_host.sh"
slot_host_start "$1" "$2" 25%,75%
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
slot_host_stop
cat "$out/results.jsonl"
