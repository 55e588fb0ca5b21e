#!/bin/bash
# Gather gpuslotd, gpuslotctl, libgpuslot, slot_jobs and every library they
# need (glibc and its loader too) into one folder, for a GPU host that has
# neither Debian's libraries nor a way to download them. Programs run as
#   BUNDLE/ld-linux-x86-64.so.2 --library-path BUNDLE BUNDLE/PROGRAM
# which finds the host's libcuda.so.1 through its ld.so.cache.
#
# usage: [XSCHED_DIR=DIR] bundle.sh RELEASE_BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
rm -rf "$out"
mkdir -p "$out"
nvcc -O2 -std=c++20 -arch=sm_90 -I"$root/libclient/include" -I"$root/uapi" \
	"$here/slot_jobs.cu" -L"$build/libclient" -lgpuslot -o "$out/slot_jobs"
# gpuslot-run's confinement check (run_confine.sh): a program of nvcc alone,
# for the host's own loader.
nvcc -O2 -std=c++17 -arch=sm_90 -Xcompiler -static-libstdc++,-static-libgcc \
	"$here/smid_probe.cu" -o "$out/smid_probe"
cp "$build/daemon/gpuslotd" "$build/daemon/gpuslotctl" "$out/"
cp -L "$build/libclient/libgpuslot.so.1" "$out/"
cp "$here/socket_results.py" "$here/run_socket.sh" "$here/run_confine.sh" \
	"$here/confine_torch.py" "$out/"
for bin in "$out/gpuslotd" "$out/gpuslotctl" "$out/slot_jobs"; do
	LD_LIBRARY_PATH="$out" ldd "$bin" | awk '/=> \// {print $3} /^\t\/lib64/ {print $1}' |
		while read -r lib; do
			case "$(basename "$lib")" in
			libcuda.so*|libnvidia*) ;; # the host's driver
			*) cp -Ln "$lib" "$out/" 2>/dev/null || true ;;
			esac
		done
done
# gpuslot-run and its interposer (issues 39, 40), for the host's loader:
# gpuslot's own libraries only.
if [ -x "$build/libclient/run/gpuslot-run" ]; then
	mkdir -p "$out/preload"
	cp "$build/libclient/run/gpuslot-run" "$build/libclient/run/libgpuslot-run.so" "$out/preload/"
	cp -L "$build/libclient/libgpuslot.so.1" "$out/preload/"
fi
# XSched's install tree (issue 40's comparison; tests/gpu/xsched/build.sh),
# where XSCHED_DIR names one: bin/xserver and lib/ (its stand-in libcuda).
if [ -n "${XSCHED_DIR:-}" ]; then
	mkdir -p "$out/xsched"
	cp -a "$XSCHED_DIR/bin" "$XSCHED_DIR/lib" "$out/xsched/"
	# xcli (XSched's console) is not used by the harness: 1.2 MB less to
	# carry beside a tree whose results grow.
	rm -rf "$out/xsched/bin/x11_"* "$out/xsched/bin/xcli" "$out/xsched/lib/python" \
		"$out/xsched/lib/cmake"
fi
# The device tool carries at most 64 MiB with the tree: no debug info.
find "$out" -type f \( -name '*.so*' -o -perm -u+x \) ! -name '*.sh' ! -name '*.py' \
	-exec strip --strip-unneeded {} + 2>/dev/null || true
du -sh "$out"
