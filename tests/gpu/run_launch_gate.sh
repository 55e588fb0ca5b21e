#!/bin/bash
# libgpuslot's launch gate on an NVIDIA GPU (launch_gate_probe.py; issue
# 40): gpuslotd (socket transport, NVIDIA planner, k = 2: slot 0 on the
# whole GPU at priority 5, slot 1 on 75 % of the SMs at 0) under MPS.
#
# usage: run_launch_gate.sh BUNDLE OUT     (BUNDLE from bundle.sh)
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/slot_host.sh"
slot_host_start "$1" "$2" all,75% "priorities = 5,0"
for what in bound suspend cost torch; do
	python3 "$here/launch_gate_probe.py" $what 2>>"$out/python.log"
done | tee "$out/results.jsonl"
slot_host_stop
