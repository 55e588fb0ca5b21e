#!/bin/bash
# The per-launch cost of gpuslot-run's launch queue on an NVIDIA GPU host
# (issue 40): launch_rate (launch_rate.cu, nvcc alone) launching empty
# kernels back to back, interleaved REPS times:
#   plain        without gpuslot-run
#   no-preempt   under gpuslot-run --slot 1 --hold --no-preempt (the queue,
#                no throttle)
#   idle         under gpuslot-run --slot 1 --hold (the throttle armed,
#                nothing preempting; slot 1 is outranked, so every launch
#                is also marked and at most 4 are unfinished)
#   idle-nobound the same with --inflight 0 (one look at the work state
#                per launch, no marker)
#   throttled-N  --inflight N while work_holder holds slot 0 (priority 3,
#                above slot 1's 0) with work reported: nothing is sent while
#                it preempts, so this is the rate its preemption budget
#                leaves (preempt_share, 25 % by default), not a per-launch
#                cost
# against gpuslotd's lock server on the socket transport (run_lock_server,
# k = 2). Needs a libgpuslot and lock server with the work state (issue 40's
# lock side): without it the throttled runs are not throttled, and
# work_holder fails (its error is in OUT/holder.log).
#
# usage: [REPS=5 LAUNCHES=200000 INFLIGHT="4 1"] run_launch_cost.sh BUNDLE OUT
#        (BUNDLE: bundle_run.sh's, which builds launch_rate and work_holder;
#        with RELEASE_BUILD_DIR set there, the release interposer is measured)
set -euo pipefail
b=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
ld=("$b/ld-linux-x86-64.so.2" --library-path "$b")
nvidia-smi -L >"$out/device.txt" 2>&1 || true
work=$(mktemp -d)
export GPUSLOT_TRANSPORT=socket GPUSLOT_SOCKET_DIR=$work/run
export GPUSLOT_RUN_LIBRARY=$b/libgpuslot-run.so
export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0
# A release build's gpuslot-run and interposer (the bundle's preload/, from
# RELEASE_BUILD_DIR) on the host's own loader where there is one: ASan's
# cost is not the queue's. Else the bundle's, ASan and all, and said so.
if [ -d "$b/preload" ]; then
	rate_ld=()
	run_cmd=(env LD_LIBRARY_PATH="$b/preload" GPUSLOT_RUN_LIBRARY="$b/preload/libgpuslot-run.so" "$b/preload/gpuslot-run")
	echo "build: release (preload/)" >>"$out/device.txt"
else
	rate_ld=("${ld[@]}")
	asan=
	if grep -qa libasan.so "$b/gpuslot-run"; then
		asan=$(ls "$b"/libasan.so.* | head -1)
	fi
	run_cmd=(env ${asan:+LD_PRELOAD="$asan"} "${ld[@]}" "$b/gpuslot-run")
	echo "build: the bundle (ASan: ${asan:-none}; with ASan the costs include it)" >>"$out/device.txt"
fi
mkdir -p "$work/run"
"${ld[@]}" "$b/run_lock_server" "$work/run" 2 3,0 >"$out/lock_server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q serving "$out/lock_server.log" && break; sleep 0.1; done
reps=${REPS:-5} launches=${LAUNCHES:-200000} inflights=${INFLIGHT:-4 1}
rate=("${rate_ld[@]}" "$b/launch_rate" "$launches")
under() { "${run_cmd[@]}" --slot 1 --hold "$@" -- "${rate[@]}"; }
: >"$out/runs.txt"
for r in $(seq "$reps"); do
	echo "plain $r $("${rate[@]}")" >>"$out/runs.txt"
	echo "no-preempt $r $(under --no-preempt)" >>"$out/runs.txt"
	echo "idle $r $(under)" >>"$out/runs.txt"
	# Slot 1 is outranked by slot 0: "idle" has the bound (every command
	# marked, at most 4 unfinished); this, the throttle armed without it.
	echo "idle-nobound $r $(under --inflight 0)" >>"$out/runs.txt"
	if [ ! -x "$b/work_holder" ]; then
		echo "no work_holder in the bundle: no throttled runs" >>"$out/holder.log"
		continue
	fi
	for n in $inflights; do
		# The higher slot's work, for this run only.
		coproc holder { exec "${ld[@]}" "$b/work_holder" 0 2>>"$out/holder.log"; }
		read -r ready <&"${holder[0]}" || ready=
		echo "holder: $ready" >>"$out/holder.log"
		# No work reported (the lock has no work state): not a throttled run.
		case $ready in
		working*) echo "throttled-$n $r $(under --inflight "$n")" >>"$out/runs.txt" ;;
		esac
		eval "exec ${holder[1]}>&-"
		wait "$holder_PID" || true
	done
done
# The median of each case's launches per second and microseconds per launch.
median() { sort -n | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
field() { awk -v c="$1" -v f="$2" '$1 == c {for (i = 3; i < NF; i++) if ($i == f) print $(i + 1)}' "$out/runs.txt"; }
for c in $(awk '{print $1}' "$out/runs.txt" | sort -u); do
	r=$(field "$c" launches_per_s | median)
	u=$(field "$c" us_per_launch | median)
	n=$(field "$c" launches_per_s | wc -l)
	echo "$c: launches/s p50 $r, us/launch p50 $u, $n runs"
done | tee "$out/summary.txt"
