#!/bin/bash
# CUDA graphs on gpuslot slots and the lock's per-job cost on an NVIDIA GPU
# (graph_probe.py; issue 32): gpuslotd (socket transport, NVIDIA planner,
# k = 2 of 30 % and 70 % of the SMs) under MPS.
#
# usage: run_graphs.sh BUNDLE OUT     (BUNDLE from bundle.sh)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/slot_host.sh"
slot_host_start "$1" "$2" 30%,70%
for what in sm_ids lock_cost medium; do
	python3 "$here/graph_probe.py" $what 2>>"$out/python.log"
done | tee "$out/results.jsonl"
slot_host_stop
