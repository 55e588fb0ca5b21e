#!/bin/bash
# What run_gpuslot_run.sh needs on a GPU host with neither Debian's libraries
# nor a way to download them, from the unit tests' build (tests/, with
# ASan/UBSan): gpuslot-run, its interposer libgpuslot-run.so, libgpuslot,
# run_lock_server (gpuslotd's lock server alone), run_plain (run_plain.cu,
# nvcc alone, linked with nothing of gpuslot), and every library they need
# (glibc and its loader too; not the host's libcuda). Programs run as
#   BUNDLE/ld-linux-x86-64.so.2 --library-path BUNDLE BUNDLE/PROGRAM
#
# usage: [RELEASE_BUILD_DIR=DIR] [SANITIZE=0] bundle_run.sh TEST_BUILD_DIR OUT_DIR
set -euo pipefail
build=$(cd "$1" && pwd) out=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
rm -rf "$out"
mkdir -p "$out"
nvcc -O2 -std=c++17 -arch=sm_90 "$here/run_plain.cu" -o "$out/run_plain"
nvcc -O2 -std=c++17 -arch=sm_90 "$here/launch_rate.cu" -o "$out/launch_rate"
# The lock server and the work holder with ASan/UBSan, as the tests build
# them; SANITIZE=0 without (a release measurement needs neither, and the
# device tool carries at most 64 MiB).
if [ "${SANITIZE:-1}" = 0 ]; then
	sanitize=(-O2)
else
	sanitize=(-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer)
fi
g++ -std=c++20 "${sanitize[@]}" \
	-I"$root/daemon/lockserver" -I"$root/uapi" -I"$root/libclient/include" \
	-I"$root/libclient/src" "$here/run_lock_server.cc" \
	"$build/daemon/libgpuslot_lockserver.a" "$build/libclient/libgpuslot_internal.a" \
	-lpthread -ldl -o "$out/run_lock_server"
# run_launch_cost.sh's higher slot with work: needs libgpuslot's
# gpuslot_set_work (issue 40's lock side); without it, no throttled runs.
g++ -std=c++20 "${sanitize[@]}" \
	-I"$root/uapi" -I"$root/libclient/include" "$here/work_holder.cc" \
	"$build/libclient/libgpuslot_internal.a" -lpthread -ldl -o "$out/work_holder" ||
	echo "bundle_run.sh: work_holder not built (no gpuslot_set_work in libgpuslot?)" >&2
cp "$build/libclient/run/gpuslot-run" "$build/libclient/run/libgpuslot-run.so" \
	"$here/run_gpuslot_run.sh" "$here/run_launch_cost.sh" "$out/"
cp -L "$build/libclient/libgpuslot.so.1" "$out/"
cp -L /lib64/ld-linux-x86-64.so.2 "$out/"
for bin in "$out"/*; do
	{ LD_LIBRARY_PATH="$out" ldd "$bin" 2>/dev/null || true; } | awk '/=> \// {print $3}' |
		while read -r lib; do
			case "$(basename "$lib")" in
			libcuda.so*|libnvidia*) ;;
			*) cp -Ln "$lib" "$out/" 2>/dev/null || true ;;
			esac
		done
done
# PyTorch runs on the host's own loader and libraries: for it, gpuslot-run
# and libgpuslot alone, from a release build where one is given
# (RELEASE_BUILD_DIR: deploy/'s build tree), in preload/.
cp "$here/run_torch_probe.py" "$out/"
rel=${RELEASE_BUILD_DIR:-}
if [ -n "$rel" ]; then
	mkdir -p "$out/preload"
	cp "$rel/libclient/run/gpuslot-run" "$rel/libclient/run/libgpuslot-run.so" "$out/preload/"
	cp -L "$rel/libclient/libgpuslot.so.1" "$out/preload/"
fi
du -sh "$out"
