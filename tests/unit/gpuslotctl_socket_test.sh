#!/bin/bash
# gpuslotctl on the socket transport: gpuslotd serves the bundled Radeon VII
# on sockets in a fresh directory (no module); status, set-k and
# set-partitions go through them and say so.
# Usage: gpuslotctl_socket_test.sh GPUSLOTD GPUSLOTCTL FIXTURE
set -euo pipefail
gpuslotd=$1 gpuslotctl=$2 fixture=$3
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
"$gpuslotd" --transport socket --socket-dir "$dir" --state-dir "$dir" --topology "$fixture" \
	--dri "" --config "$dir/none.conf" >"$dir/gpuslotd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$dir/gpu0.sock" ] && break; sleep 0.05; done
ctl() { "$gpuslotctl" "$@" --sysfs-root "$dir/no-sysfs" --socket-dir "$dir" \
	--topology "$fixture" --dri "" --state-dir "$dir"; }
expect() { # expect TEXT OUTPUT: OUTPUT contains TEXT
	grep -qF -- "$1" <<<"$2" || { echo "expected '$1' in:"; echo "$2"; exit 1; }
}

out=$(ctl status)
expect "k 1, generation" "$out"
# An admin (this test runs as root) reads the debug/ tables too.
if [ "$(id -u)" -eq 0 ]; then
	expect "(read from gpuslotd's sockets in $dir (with its debug/ tables))" "$out"
else
	expect "(read from gpuslotd's sockets in $dir)" "$out"
fi
expect "A slot 0  60 CUs 0xfffffffffffffff    priority 0  free" "$out"

# An admin's k: gpuslotd re-plans it (two SE-packed halves), as on the device.
out=$(ctl set-k 2)
expect "gpu0: k 2 through gpuslotd's sockets in $dir" "$out"
out=$(ctl status)
expect "k 2, generation" "$out"
expect "A slot 0  30 CUs 0x333333333333333" "$out"
expect "k 2 written outside gpuslotd: re-planned" "$(cat "$dir/gpuslotd.log")"

# An admin's partitions are kept.
out=$(ctl set-partitions 0xccccccccccccccc 0x333333333333333)
expect "partitions set through gpuslotd's sockets" "$out"
out=$(ctl status --json)
expect '"k": 2' "$out"
expect "A slot 0  30 CUs 0xccccccccccccccc" "$(ctl status)"
expect "partitions set outside gpuslotd" "$(cat "$dir/gpuslotd.log")"

# Every slot on the whole GPU, set by an admin, is kept too: not taken
# for a k write (the server knows which attribute was written).
out=$(ctl set-partitions all all)
expect "partitions set through gpuslotd's sockets" "$out"
expect "B slot 1  whole GPU" "$(ctl status)"
expect "keeping them: every slot on the whole GPU, so 2 jobs share all of it at once" \
	"$(cat "$dir/gpuslotd.log")"
out=$(ctl set-partitions 0xccccccccccccccc 0x333333333333333)

# Priorities (issue 32) go in with the partitions, as one change: a slot on
# the whole GPU beside a confined one, at different priorities.
out=$(ctl set-partitions all 0x333333333333333 --priorities 1,0)
expect "partitions set through gpuslotd's sockets" "$out"
expect "A slot 0  whole GPU                   priority 1" "$(ctl status)"
expect '"priority": 1' "$(ctl status --json)"
out=$(ctl set-partitions 0xccccccccccccccc 0x333333333333333 --priorities 0,0)

# Bad input changes nothing, and says what was wrong.
if ctl set-k 65 2>"$dir/err"; then echo "set-k 65 was taken"; exit 1; fi
expect "set-k takes one k, a whole number from 1 to 64" "$(cat "$dir/err")"
if ctl set-partitions 0x3 0x3 --force 2>"$dir/err"; then echo "overlap was taken"; exit 1; fi
expect "gpu0.sock: commit: Invalid argument (partitions must not overlap at the same priority" \
	"$(cat "$dir/err")"
if ctl set-partitions all 0x3 --priorities 16,0 2>"$dir/err"; then echo "priority 16 was taken"; exit 1; fi
expect "--priorities '16,0': priority '16' is not 0 to 15" "$(cat "$dir/err")"
expect "0xccccccccccccccc" "$(ctl status)"
if ctl status --transport bogus 2>"$dir/err"; then echo "bogus transport was taken"; exit 1; fi
expect "use device, socket or auto" "$(cat "$dir/err")"
echo "gpuslotctl over the socket: ok"
