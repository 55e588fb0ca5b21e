# Sourced by run_python.sh and run_graphs.sh: an NVIDIA GPU host with MPS and
# gpuslotd from a bundle (bundle.sh) serving it on the socket transport,
# the environment the Python package needs to reach it, and its end.
#
#   slot_host_start BUNDLE OUT SIZES [LINE]   SIZES as gpuslotd.conf's, e.g.
#                                             25%,75%; LINE another line of it
#   slot_host_stop

slot_host_start() {
	local sizes=$3
	b=$(cd "$1" && pwd) out=$2
	mkdir -p "$out"
	nvidia-smi -L >"$out/device.txt" 2>&1
	nvidia-cuda-mps-control -d && echo "MPS control daemon started" >>"$out/device.txt"
	work=$(mktemp -d)
	export GPUSLOT_TRANSPORT=socket GPUSLOT_SOCKET_DIR=$work/run
	export GPUSLOT_LIBRARY=$b/libgpuslot.so.1
	export PYTHONPATH=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../python" && pwd)
	# k is the number of sizes.
	printf '[default]\nsizes = %s\n%s\n' "$sizes" "${4:-}" >"$work/gpuslotd.conf"
	"$b/ld-linux-x86-64.so.2" --library-path "$b" "$b/gpuslotd" --transport socket \
		--socket-dir "$work/run" --socket-group '' --config "$work/gpuslotd.conf" \
		--state-dir "$work" >"$out/gpuslotd.log" 2>&1 &
	slot_host_daemon=$!
	for _ in $(seq 100); do [ -S "$work/run/gpu0.sock" ] && break; sleep 0.1; done
}

slot_host_stop() {
	kill "$slot_host_daemon"
	wait "$slot_host_daemon"
	echo quit | nvidia-cuda-mps-control
}
