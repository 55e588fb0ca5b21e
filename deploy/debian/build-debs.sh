#!/bin/bash
# make deb: stage the source tree with deploy/debian as debian/ and build
# the packages with dpkg-buildpackage (debhelper, dh-dkms, dh-python).
# usage: build-debs.sh OUTDIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$1
stage=$out/gpuslot-1.0.0
rm -rf "$out"
mkdir -p "$stage"
# Tracked and new files, not build products.
(cd "$root" && { git ls-files -co --exclude-standard 2>/dev/null || find . -path ./build -prune -o -type f -print; } |
	grep -v '^build/' | tar -cf - -T -) | tar -xf - -C "$stage"
cp -r "$root/deploy/debian" "$stage/debian"
rm -f "$stage/debian/build-debs.sh"
(cd "$stage" && dpkg-buildpackage -us -uc -b -j"$(nproc)")
ls -1 "$out"/*.deb
