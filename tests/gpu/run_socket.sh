#!/bin/bash
# gpuslot on an NVIDIA GPU without the module: gpuslotd's socket transport
# with the NVIDIA planner, under MPS (docs/results-nvidia.md, "Socket
# transport"). Needs a bundle from bundle.sh; writes into OUT.
#
#  1. k = 1, two processes x 2 threads x 300 one-millisecond jobs through
#     libgpuslot: kernels of different holds never overlap in time (the
#     release rule); then the same with GPUSLOT_RELEASE_NO_SYNC, the
#     control that shows they would.
#  2. k = 2: A and B hold slots 0 and 1 and run side by side; C, started
#     last, is granted only when one of them released.
#  3. k = 1: D holds (a 6 s kernel), E waits; D is SIGKILLed: E is
#     granted at once, and its kernel runs when D's has ended.
#
# usage: run_socket.sh BUNDLE OUT [PARTS: any of 1 2 3; default all]
set -u
b=$(cd "$1" && pwd) out=$2
parts=${3:-123}
mkdir -p "$out"
run() { "$b/ld-linux-x86-64.so.2" --library-path "$b" "$@"; }
nvidia-smi -L >"$out/device.txt" 2>&1
nvidia-cuda-mps-control -d && echo "MPS control daemon started" >>"$out/device.txt"
work=$(mktemp -d)
export GPUSLOT_TRANSPORT=socket GPUSLOT_SOCKET_DIR=$work/run
daemon=
start_daemon() {
	printf '[default]\nk = %s\n' "$1" >"$work/gpuslotd.conf"
	run "$b/gpuslotd" --transport socket --socket-dir "$work/run" --socket-group '' \
		--config "$work/gpuslotd.conf" --state-dir "$work" >>"$out/gpuslotd.log" 2>&1 &
	daemon=$!
	for _ in $(seq 100); do [ -S "$work/run/gpu0.sock" ] && return 0; sleep 0.1; done
	echo "gpuslotd did not start" >>"$out/gpuslotd.log"
	return 1
}
stop_daemon() { kill "$daemon"; wait "$daemon"; }

if [[ $parts == *1* ]]; then
start_daemon 1
for mode in release-waits nosync; do
	flag=; [ "$mode" = nosync ] && flag=nosync
	run "$b/slot_jobs" jobs 2 300 $flag >"$work/p1.$mode" 2>>"$out/jobs.log" &
	p1=$!
	run "$b/slot_jobs" jobs 2 300 $flag >"$work/p2.$mode" 2>>"$out/jobs.log" &
	p2=$!
	wait $p1 $p2
	python3 "$b/socket_results.py" overlap "$mode" "$work/p1.$mode" "$work/p2.$mode" \
		>>"$out/results.txt"
done
stop_daemon
fi

if [[ $parts == *2* ]]; then
start_daemon 2
run "$b/slot_jobs" hold 1000 A >"$work/A" 2>>"$out/jobs.log" &
a=$!
sleep 0.5
run "$b/slot_jobs" hold 1000 B >"$work/B" 2>>"$out/jobs.log" &
bb=$!
sleep 0.5
run "$b/slot_jobs" hold 200 C >"$work/C" 2>>"$out/jobs.log" &
c=$!
wait $a $bb $c
cat "$work/A" "$work/B" "$work/C" >"$work/abc"
python3 "$b/socket_results.py" fifo "$work/abc" >>"$out/results.txt"
stop_daemon
fi

if [[ $parts == *3* ]]; then
start_daemon 1
run "$b/slot_jobs" hold 6000 D >"$work/D" 2>>"$out/jobs.log" &
d=$!
sleep 2
run "$b/slot_jobs" hold 100 E >"$work/E" 2>>"$out/jobs.log" &
e=$!
sleep 2
date +%s%N >"$work/killed"
kill -9 $d
wait $e
python3 "$b/socket_results.py" kill "$work/killed" 6000 "$work/E" >>"$out/results.txt"
stop_daemon
fi
cat "$out/results.txt"
