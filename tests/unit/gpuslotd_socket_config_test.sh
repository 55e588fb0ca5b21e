#!/bin/bash
# gpuslotd's socket transport applies the boost settings of gpuslotd.conf
# (issue 28 item 7): the config's boost_priority is the domain's (and a
# config with max_boost_share is accepted; the attribute's effect is the
# socket suite's Boost.ABoostHasABudgetAcrossHolds), gpuslotd's serving
# thread runs SCHED_FIFO one above the boost, and a boost_priority nothing
# could preempt (99) is refused with its line. As root (the boost needs CAP_SYS_NICE); skipped (77) otherwise.
# Usage: gpuslotd_socket_config_test.sh GPUSLOTD GPUSLOTCTL FIXTURE
set -euo pipefail
gpuslotd=$1 gpuslotctl=$2 fixture=$3
[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root for the boost"; exit 77; }
dir=$(mktemp -d)
pid=
trap '[ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }; rm -rf "$dir"' EXIT

printf '[default]\nk = 2\nboost_priority = 70\nmax_boost_share = 30\nsizes = all,50%%\npriorities = 1,0\n' \
	>"$dir/gpuslotd.conf"
"$gpuslotd" --transport socket --socket-dir "$dir" --state-dir "$dir" --socket-group '' \
	--topology "$fixture" --dri "" --config "$dir/gpuslotd.conf" >"$dir/gpuslotd.log" 2>&1 &
pid=$!
for _ in $(seq 200); do [ -S "$dir/gpu0.sock" ] && break; sleep 0.05; done
[ -S "$dir/gpu0.sock" ] || { echo "gpuslotd did not start:"; cat "$dir/gpuslotd.log"; exit 1; }

status=$("$gpuslotctl" status --transport socket --socket-dir "$dir" --topology "$fixture" --dri "")
grep -q "boost SCHED_FIFO 70" <<<"$status" ||
	{ echo "the config's boost_priority 70 is not the domain's:"; echo "$status"; exit 1; }
# The config's slot priorities are in the layout it serves (issue 32).
grep -q "A slot 0  whole GPU                   priority 1" <<<"$status" &&
	grep -q "B slot 1  30 CUs .*priority 0" <<<"$status" ||
	{ echo "the config's sizes all,50% and priorities 1,0 are not the domain's:"; echo "$status"; exit 1; }
# The serving thread (gpuslotd has one) runs above every boost it grants.
read -r policy prio < <(ps -o cls=,rtprio= -p "$pid")
[ "$policy" = FF ] && [ "$prio" -eq 71 ] ||
	{ echo "gpuslotd runs $policy $prio, not FF 71 (one above boost_priority 70)"; exit 1; }

printf '[default]\nboost_priority = 99\n' >"$dir/bad.conf"
if out=$("$gpuslotd" --check-config --config "$dir/bad.conf" --topology "$fixture" --dri "" 2>&1); then
	echo "boost_priority 99 was accepted:"; echo "$out"; exit 1
fi
grep -q "bad.conf:2" <<<"$out" && grep -q "98" <<<"$out" ||
	{ echo "the refusal of boost_priority 99 names neither its line nor the limit:"; echo "$out"; exit 1; }
echo "gpuslotd's socket transport applies the config's boost settings: ok"
