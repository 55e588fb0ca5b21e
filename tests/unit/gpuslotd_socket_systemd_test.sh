#!/bin/bash
# gpuslotd's socket transport under systemd's protocols, without systemd:
# the watchdog (WatchdogSec: WATCHDOG=1 from the serving loop, at half of
# WATCHDOG_USEC), and a second gpuslotd on the same sockets refused.
# Usage: gpuslotd_socket_systemd_test.sh GPUSLOTD FIXTURE
set -euo pipefail
gpuslotd=$1 fixture=$2
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$dir"' EXIT

# A notify socket that collects what gpuslotd says for 2 s.
/usr/bin/python3 - "$dir/notify" "$dir/said" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(0.1)
end = time.monotonic() + 30
said = []
start = None
while time.monotonic() < end:
    try:
        said.append(s.recv(4096).decode())
    except socket.timeout:
        pass
    if start is None and any("READY=1" in m for m in said):
        start = time.monotonic()
        end = start + 2
open(sys.argv[2], "w").write("\n".join(said) + "\n")
PY
pids+=($!)
listener=$!
for _ in $(seq 100); do [ -S "$dir/notify" ] && break; sleep 0.05; done

NOTIFY_SOCKET=$dir/notify WATCHDOG_USEC=200000 "$gpuslotd" --transport socket \
	--socket-dir "$dir" --state-dir "$dir" --topology "$fixture" --dri "" \
	--config "$dir/none.conf" >"$dir/gpuslotd.log" 2>&1 &
pid=$!
pids+=($pid)
wait "$listener"
said=$(cat "$dir/said")
grep -q "READY=1" <<<"$said" || { echo "no READY=1:"; echo "$said"; cat "$dir/gpuslotd.log"; exit 1; }
# 2 s at one every 100 ms: 20; well under that only if the loop stalls.
n=$(grep -c "WATCHDOG=1" <<<"$said" || true)
[ "$n" -ge 10 ] || { echo "WATCHDOG=1 sent $n times in 2 s (WATCHDOG_USEC=200000)"; exit 1; }

# A second gpuslotd on the same sockets is refused, and the first serves on.
if timeout 5 "$gpuslotd" --transport socket --socket-dir "$dir" --state-dir "$dir/second" \
	--topology "$fixture" --dri "" --config "$dir/none.conf" >"$dir/second.log" 2>&1; then
	echo "a second gpuslotd served the same sockets"; cat "$dir/second.log"; exit 1
fi
grep -q "another gpuslotd serves this socket directory" "$dir/second.log" ||
	{ echo "the second gpuslotd did not say why:"; cat "$dir/second.log"; exit 1; }
kill -0 "$pid"
[ -S "$dir/gpu0.sock" ] || { echo "the first gpuslotd's socket is gone"; exit 1; }
echo "gpuslotd's socket transport under systemd's protocols: ok"
