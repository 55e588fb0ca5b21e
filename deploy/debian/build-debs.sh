#!/bin/bash
# make deb: stage the source tree with deploy/debian as debian/ and build
# the packages with dpkg-buildpackage (debhelper, dh-dkms, dh-python), then
# check them with lintian: any error or warning fails.
#   DIST=bookworm ARCH=amd64 on a Debian 12 amd64 host: on the host, as
#   before. Any other pair: in a DIST chroot (build-chroot.sh, cached in
#   CACHE) with that release's toolchain and lintian; arm64 cross-built
#   there (dpkg-buildpackage -a arm64).
# usage: build-debs.sh OUTDIR [DIST ARCH CACHE]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$1 dist=${2:-bookworm} arch=${3:-amd64} cache=${4:-$HOME/.cache/gpuslot}
case $dist in bookworm | trixie) ;; *) echo "make deb: DIST=$dist: use bookworm or trixie" >&2; exit 1 ;; esac
case $arch in amd64 | arm64) ;; *) echo "make deb: ARCH=$arch: use amd64 or arm64" >&2; exit 1 ;; esac
stage=$out/gpuslot-1.0.0
rm -rf "$out"
mkdir -p "$stage"
# Tracked and new files, not build products.
(cd "$root" && { git ls-files -co --exclude-standard 2>/dev/null || find . -path ./build -prune -o -type f -print; } |
	grep -v '^build/' | tar -cf - -T -) | tar -xf - -C "$stage"
cp -r "$root/deploy/debian" "$stage/debian"
rm -f "$stage/debian/build-debs.sh" "$stage/debian/build-chroot.sh"
# Each release's build has a version of its own, the upstream one with
# +deb12 or +deb13 (as Debian's own rebuilds for a release are named), so
# that apt replaces the bookworm build on an upgrade to trixie
# (1.0.0+deb12 < 1.0.0+deb13) and never takes one release's build for the
# other's. The module's DKMS version stays the upstream one (rules).
case $dist in bookworm) release=deb12 ;; trixie) release=deb13 ;; esac
sed -i "1s/^gpuslot (\([^)+]*\)) [a-z]*;/gpuslot (\1+$release) $dist;/" "$stage/debian/changelog"
grep -q "^gpuslot ([^)]*+$release) $dist;" "$stage/debian/changelog" ||
	{ echo "make deb: debian/changelog's first line is not 'gpuslot (VERSION) DIST;'" >&2; exit 1; }

# lintian's verdict: every tag it prints (overrides in debian/*.lintian-
# overrides say why) but only errors and warnings fail.
lint='lintian --fail-on error,warning --display-info'
. /etc/os-release
if [ "$dist" = bookworm ] && [ "$arch" = amd64 ] && [ "${VERSION_CODENAME:-}" = bookworm ] &&
	[ "$(dpkg --print-architecture)" = amd64 ]; then
	# Not through the Makefile's ccache settings (a package is built as
	# Debian's build daemons build it).
	(cd "$stage" && env -u CCACHE_BASEDIR -u CCACHE_NOHASHDIR dpkg-buildpackage -us -uc -b -j"$(nproc)")
	$lint "$out"/*.changes
else
	sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	bash "$root/deploy/debian/build-chroot.sh" --build "$cache" "$dist" "$arch"
	chroot_dir=$(bash "$root/deploy/debian/build-chroot.sh" --print-dir "$cache" "$dist" "$arch")
	# A copy of the cached chroot per build: the cache never changes, and
	# two builds never share one.
	work=$(mktemp -d "$out/chroot.XXXXXX")
	# (Under set -e a trap's failing command ends the script with its status:
	# proc is unmounted already when the build went well.)
	trap '$sudo umount -l "$work/root/proc" 2>/dev/null || true; $sudo rm -rf "$work"' EXIT
	$sudo cp -a "$chroot_dir/root" "$work/root"
	$sudo mkdir -p "$work/root/build"
	$sudo cp -a "$stage" "$work/root/build/"
	cross=
	[ "$arch" = amd64 ] || cross="-a $arch -Pcross,nocheck"
	$sudo mount --bind /proc "$work/root/proc"
	echo "make deb: building for Debian $dist $arch in a chroot of $dist ($chroot_dir)"
	# A clean environment, as Debian's build daemons give: this one has
	# `make ARCH=arm64`'s exports (CMAKE_TOOLCHAIN_FILE, a path outside
	# the chroot, which the package's cmake would take). DEB_BUILD_OPTIONS
	# is kept, with nocheck beside the cross build's nocheck profile.
	# shellcheck disable=SC2086 # $cross is words
	$sudo timeout -k 10 "${DEB_TIMEOUT:-3600}" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LC_ALL=C.UTF-8 DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-}${cross:+ nocheck}" chroot "$work/root" sh -ec "cd /build/gpuslot-1.0.0 &&
		dpkg-buildpackage -us -uc -b $cross -j$(nproc) && cd .. && $lint *.changes"
	$sudo umount -l "$work/root/proc"
	$sudo cp "$work/root/build/"*.deb "$work/root/build/"*.changes "$work/root/build/"*.buildinfo "$out/"
	$sudo chown "$(id -u):$(id -g)" "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
fi
ls -1 "$out"/*.deb
