#!/bin/bash
# The gpuslot debug kernel: Debian's linux-source-6.1 configured from
# tinyconfig plus debug.config, built once and cached outside the clone,
# keyed by the source version and the config fragment.
#
# usage: build.sh --print-dir CACHE   print where the tree is (or will be)
#        build.sh --build CACHE       build it unless it is already there
set -euo pipefail
mode=$1 cache=$2
here=$(cd "$(dirname "$0")" && pwd)

src=$(ls /usr/src/linux-source-*.tar.xz 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$src" ] || { echo "build.sh: linux-source is not installed" >&2; exit 1; }
key=$( (basename "$src"; cat "$here/debug.config") | sha256sum | cut -c1-12)
tree=$cache/linux-debug-$key

if [ "$mode" = --print-dir ]; then
	echo "$tree"
	exit 0
fi
[ "$mode" = --build ] || { echo "usage: build.sh --print-dir|--build CACHE" >&2; exit 2; }

if [ -f "$tree/.gpuslot-built" ]; then
	echo "debug kernel: cached in $tree"
	exit 0
fi
echo "debug kernel: building in $tree (once; about 4 minutes on 2 cores)"
rm -rf "$tree.tmp"
mkdir -p "$tree.tmp"
tar -xJf "$src" -C "$tree.tmp" --strip-components=1
cd "$tree.tmp"
make -s tinyconfig
scripts/kconfig/merge_config.sh -m .config "$here/debug.config" >/dev/null
make -s olddefconfig
# Every option the fragment asks for must have survived olddefconfig.
missing=0
while read -r line; do
	case "$line" in
	CONFIG_*=n) grep -qx "# ${line%=n} is not set" .config || { echo "not off: $line"; missing=1; } ;;
	CONFIG_*) grep -qx "$line" .config || { echo "not set: $line"; missing=1; } ;;
	esac
done <"$here/debug.config"
[ $missing -eq 0 ] || { echo "debug kernel: the config fragment did not apply" >&2; exit 1; }
make -s -j"$(nproc)" bzImage modules
cd - >/dev/null
mv "$tree.tmp" "$tree"
touch "$tree/.gpuslot-built"
echo "debug kernel: built $tree"
