#!/bin/bash
# Build XSched (OSDI'25, github.com/XpuOS/xsched) for issue 40's comparison,
# from local copies of its repository and submodules (this machine has no
# network: the copies come from the tool library's fetch), and install it
# into OUT (bin/xserver, lib/libcuda.so.1 — its stand-in for the driver).
#
# Its submodules: cuxtra (a closed static library inside its own
# repository), CLI11, cpp-httplib, jsoncpp, FTXUI at the commits XSched pins
# (from their upstream repositories: XpuOS's copies are forks at those
# commits); ipc, XpuOS's own IPC library, is not public: ipc/ here stands
# in for it (the same ipc::Node interface over Unix datagram sockets in
# the abstract namespace; only the global scheduler, xserver, uses it).
#
# usage: build.sh XSCHED_REPO CUXTRA_REPO CLI11_REPO HTTPLIB_REPO JSONCPP_REPO FTXUI_REPO OUT
#   each *_REPO a git repository (e.g. /work/.mirror/XpuOS+xsched/repo)
#   CUDA_HOME   the CUDA toolkit's headers (default /usr/local/cuda)
set -euo pipefail
[ $# -eq 7 ] || { sed -n '2,17p' "$0"; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$7" && cd "$7" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$work/xsched
# Its tree without the PDFs (the copy may lack their blobs).
git init -q "$src"
git -C "$1" archive HEAD -- $(git -C "$1" ls-tree -r --name-only HEAD | grep -v '\.pdf$' |
	grep -v '^3rdparty/[^/]*$' ; echo 3rdparty/CMakeLists.txt) | tar -x -C "$src"
pin() { git -C "$1" ls-tree HEAD "3rdparty/$2" | awk '{print $3}'; }
xs=$1
for sub in "cuxtra $2" "CLI11 $3" "cpp-httplib $4" "jsoncpp $5" "ftxui $6"; do
	read -r name repo <<<"$sub"
	commit=$(pin "$xs" "$name")
	git clone -q "$repo" "$src/3rdparty/$name"
	git -C "$src/3rdparty/$name" checkout -q "$commit"
	echo "xsched: 3rdparty/$name at $commit"
done
cp -r "$here/ipc" "$src/3rdparty/ipc"
echo "xsched: 3rdparty/ipc: gpuslot's stand-in (tests/gpu/xsched/ipc)"
# Its -Werror meets GCC 12's -Wrange-loop-construct in utils/region.h; its
# targets add -Werror after CMAKE_CXX_FLAGS, so -Wno-error alone is undone:
# that warning is turned off by name.
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$out" \
	-DSHIM_SOFTLINK=ON -DBUILD_TEST=OFF -DPLATFORM_CUDA=ON \
	-DCUDAToolkit_ROOT="${CUDA_HOME:-/usr/local/cuda}" -DCMAKE_CXX_FLAGS="-Wno-error -Wno-range-loop-construct" >/dev/null
cmake --build "$work/build" --target install -j"$(nproc)" >/dev/null
echo "xsched: $(git -C "$xs" rev-parse --short HEAD) installed in $out"
ls "$out/bin" "$out/lib"
