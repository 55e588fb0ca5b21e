#!/bin/bash
# gpuslotd's metrics scraped by a real Prometheus server (Debian's
# prometheus package) while clients run: gpuslotd serves the bundled
# Radeon VII on its socket transport (k = 1) with metrics_listen and
# metrics_textfile set; Prometheus scrapes it every second; three clients
# take turns on the slot. Checked through Prometheus's HTTP API and against
# gpuslotctl status --json:
#   - the exposition passes promtool's lint (names, units, _total);
#   - rate(gpuslot_acquisitions_total) agrees with the acquisitions
#     gpuslotctl counted over the same seconds;
#   - gpuslot_acquisitions_total, and histogram_quantile() of 0.5 and 0.9
#     over gpuslot_wait_seconds, equal what gpuslotctl status says once the
#     clients are done;
#   - the textfile (written beside itself and renamed over) holds the same
#     counts and passes promtool too.
# The clients run as an unprivileged member of group gpuslot.
#
# Usage: prometheus-test.sh RELEASE_BUILD_DIR FIXTURE
# Ends with "N passed, N failed".
set -uo pipefail
release=$(realpath "$1") fixture=$(realpath "$2")
here=$(dirname "$(realpath "$0")")
root=$(realpath "$here/../..")
[ "$(id -u)" -eq 0 ] || exec sudo "$0" "$@"

test_name=prometheus-test
. "$(dirname "$(realpath "$0")")/report.sh"

w=$(mktemp -d /tmp/gpuslot-prom-test.XXXXXX)
chmod 0755 "$w"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$w"
}
trap cleanup EXIT
getent group gpuslot >/dev/null || groupadd --system gpuslot || { bad "no group gpuslot"; finish; }
gid=$(getent group gpuslot | cut -d: -f3)

mkdir -p "$w/lib" "$w/sock" "$w/state" "$w/textfile"
chmod 0755 "$w/sock"
cp -L "$release/libclient/libgpuslot.so.1" "$w/lib/"
cc -O2 -Wall -Werror -I"$root/libclient/include" -I"$root/uapi" -o "$w/slot_client" "$here/slot_client.c" \
	"$w/lib/libgpuslot.so.1" -Wl,-rpath,"$w/lib" || { bad "slot_client does not build"; finish; }

# Free local ports below the ephemeral range (where outgoing connections
# of anything on the host could take a port between our check and our
# bind): gpuslotd's metrics and Prometheus's API. Up to three tries.
free_port() {
	python3 -c '
import random, socket
while True:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randrange(20000, 32000)))
        print(s.getsockname()[1])
        break
    except OSError:
        pass'
}
export GPUSLOT_SOCKET_DIR=$w/sock # for the clients
for try in 1 2 3; do
	mport=$(free_port)
	cat >"$w/gpuslotd.conf" <<EOF
[daemon]
metrics_listen = $mport
metrics_textfile = $w/textfile/gpuslot.prom
metrics_textfile_interval_ms = 1000
[default]
k = 1
EOF
	"$release/daemon/gpuslotd" --transport socket --socket-dir "$w/sock" --state-dir "$w/state" \
		--topology "$fixture" --dri "" --config "$w/gpuslotd.conf" >"$w/gpuslotd.log" 2>&1 &
	gpid=$!
	for _ in $(seq 100); do
		{ [ -S "$w/sock/gpu0.sock" ] || ! kill -0 "$gpid" 2>/dev/null; } && break
		sleep 0.1
	done
	kill -0 "$gpid" 2>/dev/null && break
	grep -q "cannot listen" "$w/gpuslotd.log" || break
done
pids+=($gpid)
for _ in $(seq 100); do [ -S "$w/sock/gpu0.sock" ] && break; sleep 0.1; done
[ -S "$w/sock/gpu0.sock" ] || { bad "gpuslotd did not start: $(cat "$w/gpuslotd.log")"; finish; }

metrics=$(curl -sf "http://127.0.0.1:$mport/metrics")
check "gpuslotd serves metrics on 127.0.0.1:$mport (a bare port in the config)" \
	grep -q '^gpuslot_slots{gpu="0",pci_bus_id="0000:03:00.0"} 1$' <<<"$metrics"
lint=$(promtool check metrics <<<"$metrics" 2>&1)
check "promtool check metrics finds nothing to fix in gpuslot_* ($(grep gpuslot_ <<<"$lint" | head -3))" \
	bash -c '! grep -q gpuslot_ <<<"$1"' _ "$lint"
check "no per-process label in any series" bash -c '! grep -qE "^gpuslot_[a-z_]*\{[^}]*(pid|comm)=" <<<"$1"' _ "$metrics"

cat >"$w/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gpuslot
    static_configs:
      - targets: ['127.0.0.1:$mport']
EOF
pport=$(free_port)
prometheus --config.file="$w/prometheus.yml" --storage.tsdb.path="$w/tsdb" \
	--web.listen-address="127.0.0.1:$pport" --log.level=warn >"$w/prometheus.log" 2>&1 &
pids+=($!)
api="http://127.0.0.1:$pport/api/v1"
# query PROMQL [TIME]: the first sample's value, or "" when there is none.
query() {
	curl -sf "$api/query" --data-urlencode "query=$1" ${2:+--data-urlencode "time=$2"} |
		python3 -c 'import json,sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2>/dev/null
}
for _ in $(seq 300); do [ "$(query 'up{job="gpuslot"}')" = 1 ] && break; sleep 0.1; done
check "Prometheus scrapes gpuslotd" [ "$(query 'up{job="gpuslot"}')" = 1 ]

status_field() {
	"$release/daemon/gpuslotctl" status --json --transport socket --socket-dir "$w/sock" \
		--topology "$fixture" --dri "" --state-dir "$w/state" |
		python3 -c "import json,sys; g=json.load(sys.stdin)['gpus'][0]; print($1)"
}

# Three clients take turns for a while (about 6 s each on a quiet host).
for i in 1 2 3; do
	setpriv --reuid=65534 --regid=65534 --groups="$gid" "$w/slot_client" loop 1000 \
		>"$w/client$i.out" 2>&1 &
	pids+=($!)
done
sleep 2
t1=$(date +%s.%N) a1=$(status_field "g['stats']['acquisitions']")
sleep 4
t2=$(date +%s.%N) a2=$(status_field "g['stats']['acquisitions']")
# Scrapes every second: give Prometheus the one after t2.
sleep 2
window=$(python3 -c "print(round($t2 - $t1))")
r_prom=$(query "rate(gpuslot_acquisitions_total{gpu=\"0\"}[${window}s])" "$t2")
r_ctl=$(python3 -c "print(($a2 - $a1) / ($t2 - $t1))")
check "rate(gpuslot_acquisitions_total[${window}s]) = $r_prom/s agrees with gpuslotctl's $r_ctl/s (within 20%)" \
	python3 -c "import sys; p, c = float('$r_prom' or 0), $r_ctl; sys.exit(not (c > 0 and abs(p - c) <= 0.2 * c))"
check "the clients waited for each other (contended acquisitions counted)" \
	[ "$(query 'gpuslot_contended_acquisitions_total{gpu="0"} > 0')" != "" ]

wait "${pids[@]:2}" 2>/dev/null
check "every client finished its 1000 rounds" \
	bash -c 'for i in 1 2 3; do grep -qx "done 1000" "$1/client$i.out" || exit 1; done' _ "$w" ||
	head -5 "$w"/client*.out
# Nothing changes now: wait for a scrape of the final counts.
final=$(status_field "g['stats']['acquisitions']")
for _ in $(seq 100); do
	[ "$(query 'gpuslot_acquisitions_total{gpu="0"}')" = "$final" ] && break
	sleep 0.1
done
check "gpuslot_acquisitions_total in Prometheus = gpuslotctl's $final" \
	[ "$(query 'gpuslot_acquisitions_total{gpu="0"}')" = "$final" ]
for q in 0.5 0.9; do
	p=$(query "histogram_quantile($q, gpuslot_wait_seconds_bucket{gpu=\"0\"})")
	c=$(status_field "g['stats']['wait_quantiles_seconds']['$q']")
	check "histogram_quantile($q) of gpuslot_wait_seconds = $p s agrees with gpuslotctl's $c s" \
		python3 -c "import sys; p, c = float('$p' or 'nan'), float('$c'); sys.exit(not abs(p - c) <= 1e-6 * c + 1e-12)"
done

tf=$w/textfile/gpuslot.prom
for _ in $(seq 50); do grep -q "gpuslot_acquisitions_total{.*} $final$" "$tf" 2>/dev/null && break; sleep 0.1; done
check "the textfile holds the same counts ($tf)" grep -q "gpuslot_acquisitions_total{.*} $final$" "$tf"
check "promtool accepts the textfile" bash -c '! promtool check metrics <"$1" 2>&1 | grep -q gpuslot_' _ "$tf"
finish
