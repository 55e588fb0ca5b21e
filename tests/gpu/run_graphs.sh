#!/bin/bash
# CUDA graphs on gpuslot slots and the lock's per-job cost on an NVIDIA GPU
# (graph_probe.py; issue 32): gpuslotd (socket transport, NVIDIA planner,
# k = 2 of 30 % and 70 % of the SMs) under MPS.
#
# usage: run_graphs.sh BUNDLE OUT     (BUNDLE from bundle.sh)
set -u
b=$(cd "$1" && pwd) out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
nvidia-smi -L >"$out/device.txt" 2>&1
nvidia-cuda-mps-control -d && echo "MPS control daemon started" >>"$out/device.txt"
work=$(mktemp -d)
export GPUSLOT_TRANSPORT=socket GPUSLOT_SOCKET_DIR=$work/run
export GPUSLOT_LIBRARY=$b/libgpuslot.so.1 PYTHONPATH=$here/../../python
printf '[default]\nk = 2\nsizes = 30%%,70%%\n' >"$work/gpuslotd.conf"
"$b/ld-linux-x86-64.so.2" --library-path "$b" "$b/gpuslotd" --transport socket \
	--socket-dir "$work/run" --socket-group '' --config "$work/gpuslotd.conf" \
	--state-dir "$work" >"$out/gpuslotd.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do [ -S "$work/run/gpu0.sock" ] && break; sleep 0.1; done
for what in sm_ids lock_cost medium; do
	python3 "$here/graph_probe.py" $what 2>>"$out/python.log"
done | tee "$out/results.jsonl"
kill "$daemon"
wait "$daemon"
echo quit | nvidia-cuda-mps-control
