#!/bin/bash
# The chroot `make deb DIST=... ARCH=...` builds in: Debian DIST (bookworm or
# trixie) for amd64 with that release's own toolchain, debhelper and
# lintian, and gpuslot's build dependencies for ARCH: amd64's, or for arm64
# a cross-compiler (crossbuild-essential-arm64) and the arm64 -dev packages
# through multiarch. In two cached stages under CACHE:
#   1. debootstrap --variant=buildd: keyed by release, package list, mirror;
#   2. the build dependencies of deploy/debian/control for ARCH: keyed by
#      stage 1, ARCH, control and this script. One per ARCH: the amd64 and
#      arm64 -dev packages of a release are not always co-installable (a
#      binNMU of one architecture only makes their shared files differ, as
#      trixie's libpsl-dev).
# Cross-building, not a qemu-user arm64 chroot: the compiler runs natively
# (an emulated g++ builds gpuslot's C++20 many times slower), and the
# release's stage 1 serves both architectures.
#
# usage: build-chroot.sh --print-dir|--build CACHE DIST ARCH
set -euo pipefail
mode=$1 cache=$2 dist=$3 arch=${4:-amd64}
here=$(cd "$(dirname "$0")" && pwd)
case $dist in
bookworm | trixie) ;;
*) echo "build-chroot: DIST=$dist: use bookworm or trixie" >&2; exit 1 ;;
esac
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# lintian and debhelper come in stage 2: apt, unlike debootstrap, resolves
# their virtual dependencies (perl-openssl-abi-3).
packages=fakeroot
stage1=$cache/deb-chroot-$dist-$(echo "$dist $packages $mirror" | sha256sum | cut -c1-12)
dir=$cache/deb-build-$dist-$arch-$({ echo "$stage1 $arch"; cat "$here/control" "$0"; } | sha256sum | cut -c1-12)
if [ "$mode" = --print-dir ]; then
	echo "$dir"
	exit 0
fi
[ -f "$dir/ready" ] && { echo "build chroot: cached in $dir"; exit 0; }

sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo

if [ ! -d "$stage1/root" ]; then
	$sudo rm -rf "$stage1.tmp"
	mkdir -p "$stage1.tmp"
	echo "build chroot: debootstrap $dist into $stage1.tmp (several minutes, once)"
	$sudo debootstrap --variant=buildd --include="$packages" "$dist" "$stage1.tmp/root" "$mirror"
	security=$dist-security
	$sudo tee "$stage1.tmp/root/etc/apt/sources.list" >/dev/null <<SRC
deb $mirror $dist main
deb $mirror $dist-updates main
deb http://deb.debian.org/debian-security $security main
SRC
	mv "$stage1.tmp" "$stage1"
fi

# Runs a command in the chroot with /proc, /dev and /sys mounted; they are
# unmounted however it ends.
in_chroot() { # root command...
	local root=$1 rc=0
	shift
	for m in proc sys dev; do $sudo mount --bind "/$m" "$root/$m"; done
	$sudo chroot "$root" "$@" || rc=$?
	for m in dev sys proc; do $sudo umount -l "$root/$m"; done
	return $rc
}

work=$dir.tmp
$sudo rm -rf "$work"
mkdir -p "$work"
$sudo cp -a "$stage1/root" "$work/root"
$sudo mkdir -p "$work/root/tmp/src/debian"
$sudo cp "$here/control" "$work/root/tmp/src/debian/control"
$sudo cp /etc/resolv.conf "$work/root/etc/resolv.conf" 2>/dev/null || true
in_chroot "$work/root" sh -ec '
	export DEBIAN_FRONTEND=noninteractive
	[ "$1" = amd64 ] || dpkg --add-architecture "$1"
	apt-get update -q
	apt-get -y -q dist-upgrade
	apt-get -y -q --no-install-recommends install lintian debhelper
	cd /tmp/src
	if [ "$1" = amd64 ]; then
		apt-get -y -q --no-install-recommends build-dep .
	else
		apt-get -y -q --no-install-recommends install crossbuild-essential-"$1"
		apt-get -y -q --no-install-recommends build-dep -a "$1" .
	fi
	apt-get clean
	rm -rf /tmp/src' _ "$arch"
touch "$work/ready"
mv "$work" "$dir"
echo "build chroot: built $dir"
