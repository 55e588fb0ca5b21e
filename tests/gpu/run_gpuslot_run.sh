#!/bin/bash
# gpuslot-run on an NVIDIA GPU host, with programs that do not link
# libgpuslot: run_plain (run_plain.cu, nvcc alone) twice side by side,
# without gpuslot-run and under gpuslot-run --per-sync on a domain of k = 1
# whose slot has priority 3, against gpuslotd's lock server on the socket
# transport (run_lock_server). The bundle's gpuslot pieces carry ASan:
# its runtime is preloaded first (CUDA needs protect_shadow_gap=0 under it).
# Each program reports its stream's priority, its jobs' GPU intervals
# (%globaltimer) and whether its result is exact; the summary counts the
# most jobs of the two on the GPU at once.
#
# usage: run_gpuslot_run.sh BUNDLE OUT    (BUNDLE: bundle_run.sh's)
set -euo pipefail
b=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
ld=("$b/ld-linux-x86-64.so.2" --library-path "$b")
nvidia-smi -L >"$out/device.txt" 2>&1 || true
work=$(mktemp -d)
export GPUSLOT_TRANSPORT=socket GPUSLOT_SOCKET_DIR=$work/run
export GPUSLOT_RUN_LIBRARY=$b/libgpuslot-run.so
export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0
# The ASan runtime comes first in LD_PRELOAD only where the bundle's
# gpuslot-run was built with it (a release build needs none).
asan=
if grep -qa libasan.so "$b/gpuslot-run"; then  # its DT_NEEDED (no ldd: a bash script, and bash would load the bundle's libc)
	asan=$(ls "$b"/libasan.so.* | head -1)
fi
mkdir -p "$work/run"
"${ld[@]}" "$b/run_lock_server" "$work/run" 1 3 >"$out/lock_server.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do grep -q serving "$out/lock_server.log" && break; sleep 0.1; done
jobs=${JOBS:-20} spin=${SPIN_US:-2000}
plain=("${ld[@]}" "$b/run_plain" "$jobs" "$spin")
under=(env ${asan:+LD_PRELOAD="$asan"} "${ld[@]}" "$b/gpuslot-run" --slot 0 --per-sync -- "${plain[@]}")

"${plain[@]}" >"$out/alone.txt"
"${plain[@]}" >"$out/plain-a.txt" & a=$!
"${plain[@]}" >"$out/plain-b.txt"
wait $a
"${under[@]}" >"$out/run-a.txt" & a=$!
"${under[@]}" >"$out/run-b.txt"
wait $a

# PyTorch, unchanged, under the host's own python3 (not the bundle's
# loader): alone, two side by side, and two under gpuslot-run --per-sync.
torch_jobs=${TORCH_JOBS:-20} torch_n=${TORCH_N:-4096}
probe=(python3 "$b/run_torch_probe.py" "$torch_jobs" "$torch_n")
if [ -d "$b/preload" ] && python3 -c 'import torch' 2>/dev/null; then
	"${probe[@]}" >"$out/torch-alone.txt" 2>&1
	"${probe[@]}" >"$out/torch-plain-a.txt" 2>&1 & a=$!
	"${probe[@]}" >"$out/torch-plain-b.txt" 2>&1
	wait $a
	torch_under=(env LD_LIBRARY_PATH="$b/preload" GPUSLOT_RUN_LIBRARY="$b/preload/libgpuslot-run.so" "$b/preload/gpuslot-run" --slot 0 --per-sync -- "${probe[@]}")
	"${torch_under[@]}" >"$out/torch-run-a.txt" 2>&1 & a=$!
	"${torch_under[@]}" >"$out/torch-run-b.txt" 2>&1
	wait $a
fi
kill $daemon; wait $daemon || true

# The most jobs of the two programs on the GPU at one instant.
most() {
	awk '/^job/ {print $2, 1; print $3, -1}' "$@" | sort -n -k1,1 -k2,2n |
		awk '{n += $2; if (n > m) m = n} END {print m}'
}
{
	for f in alone plain-a plain-b run-a run-b; do
		echo "$f: $(grep -E '^(priority|wall|result)' "$out/$f.txt" | tr '\n' ' ')"
	done
	echo "most jobs at once without gpuslot-run: $(most "$out/plain-a.txt" "$out/plain-b.txt")"
	echo "most jobs at once under gpuslot-run --per-sync, k = 1: $(most "$out/run-a.txt" "$out/run-b.txt")"
	if [ -f "$out/torch-alone.txt" ]; then
		for f in torch-alone torch-plain-a torch-plain-b torch-run-a torch-run-b; do
			echo "$f: $(grep -E '^(priority|wall|result|gpu_ms_p50)' "$out/$f.txt" | tr '\n' ' ')"
		done
		echo "torch: most jobs launching at once without gpuslot-run: $(most "$out/torch-plain-a.txt" "$out/torch-plain-b.txt")"
		echo "torch: most jobs launching at once under gpuslot-run --per-sync, k = 1: $(most "$out/torch-run-a.txt" "$out/torch-run-b.txt")"
	fi
} | tee "$out/summary.txt"
