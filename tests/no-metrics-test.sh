#!/bin/bash
# gpuslotd without prometheus-cpp (issue 37: Ubuntu 22.04 does not package
# it). Configures the product build (deploy/) with prometheus-cpp hidden
# from find_package, as on a system without it, builds gpuslotd alone, and
# checks that it is linked without it, that --help says the metrics are not
# built in, and that it serves the socket transport with a config that asks
# for metrics, saying at start that there are none.
#   tests/no-metrics-test.sh BUILD_DIR
# Ends with "N passed, N failed".
set -uo pipefail
build=${1:?usage: no-metrics-test.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
passed=0 failed=0
check() {
	local what=$1
	shift
	if "$@"; then
		echo "ok:     $what"
		passed=$((passed + 1))
	else
		echo "FAILED: $what"
		failed=$((failed + 1))
	fi
}
finish() {
	[ -n "${gpid:-}" ] && kill "$gpid" 2>/dev/null
	rm -rf "${w:-}"
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}

mkdir -p "$build"
# GPUSLOT_CMAKE_LAUNCHER: the Makefile's ccache arguments (word-split).
# shellcheck disable=SC2086
cmake -S "$root/deploy" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DCMAKE_DISABLE_FIND_PACKAGE_prometheus-cpp=ON ${GPUSLOT_CMAKE_LAUNCHER:-} \
	>"$build/configure.log" 2>&1
check "configures with prometheus-cpp hidden ($build/configure.log)" \
	grep -q "gpuslotd: no Prometheus metrics" "$build/configure.log"
if ! cmake --build "$build" -j "$(nproc)" --target gpuslotd >"$build/build.log" 2>&1; then
	tail -n 30 "$build/build.log"
	check "gpuslotd builds without prometheus-cpp" false
	finish
fi
gpuslotd=$build/daemon/gpuslotd
check "gpuslotd builds without prometheus-cpp" test -x "$gpuslotd"
check "and is linked without it" bash -c '! ldd "$1" | grep -q prometheus' _ "$gpuslotd"
check "--help says the metrics are not built in" \
	bash -c '"$1" --help | grep -q "not built in"' _ "$gpuslotd"

w=$(mktemp -d)
mkdir -p "$w/sock" "$w/state"
cat >"$w/gpuslotd.conf" <<CONF
[daemon]
metrics_listen = 9842
[default]
k = 1
CONF
"$gpuslotd" --transport socket --socket-dir "$w/sock" --state-dir "$w/state" \
	--socket-group "$(id -gn)" --topology "$root/tests/fixtures/kfd/radeon-vii-gfx906" --dri "" \
	--config "$w/gpuslotd.conf" >"$w/gpuslotd.log" 2>&1 &
gpid=$!
for _ in $(seq 100); do
	{ [ -S "$w/sock/gpu0.sock" ] || ! kill -0 "$gpid" 2>/dev/null; } && break
	sleep 0.1
done
check "serves the socket transport with metrics configured ($(head -c 300 "$w/gpuslotd.log"))" \
	test -S "$w/sock/gpu0.sock"
check "and says at start that it has no metrics" \
	grep -q "built without prometheus-cpp: no metrics" "$w/gpuslotd.log"
kill -TERM "$gpid"
wait "$gpid"
rc=$?
gpid=
check "stops on SIGTERM with status 0 (got $rc)" test "$rc" -eq 0
finish
