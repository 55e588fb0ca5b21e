#!/bin/bash
# Kernels that Debian 12 cannot install (their packages need another
# release's libc and compiler) come from a debootstrap chroot of their own
# Debian release, built once and cached outside the clone. The chroot gives
# the kernel image the VM boots and the headers the module is built
# against, and the module is built inside it, with that release's compiler.
#
#   bullseye       Debian 11's linux-image-amd64 (5.10) of its last point
#                  release
#   trixie-bpo     the newest generic kernel of Debian 13's backports
#                  (trixie-backports' linux-image-amd64: 7.x)
#   trixie-bpo-rt  the same line's PREEMPT_RT kernel (linux-image-rt-amd64)
#
# trixie-bpo and trixie-bpo-rt share one chroot. Its directory is keyed by
# the release, its suites, the package list and the mirror: a change to
# any of these makes a new one. The kernel is whatever that release has
# the day the chroot is made (as Debian 12's kernels are whatever the
# host has installed).
#
# usage: chroot.sh --print-dir CACHE NAME     where the chroot is (or will be)
#        chroot.sh --print-kver CACHE NAME    the kernel's release (uname -r)
#        chroot.sh --build CACHE NAME         make it unless it is cached
#        chroot.sh --module CACHE NAME KMOD [make args...]
#                                             build KMOD/gpuslot.ko in it
set -euo pipefail
mode=$1 cache=$2 name=$3
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

# The compiler and make come with the headers (linux-headers depends on its
# release's gcc); sparse for `make check-kernel-style KERNEL=...`;
# initramfs-tools so that no other initramfs generator comes along with
# the kernel (the VM boots with its own initramfs: none is made here).
base=make,sparse,ca-certificates,kmod,initramfs-tools
case $name in
bullseye)
	release=bullseye
	suites="bullseye bullseye-updates"
	security_suite=bullseye-security
	install_from=bullseye
	kernels="linux-image-amd64 linux-headers-amd64"
	flavour=amd64 ;;
trixie-bpo | trixie-bpo-rt)
	release=trixie
	suites="trixie trixie-updates trixie-backports"
	security_suite=trixie-security
	install_from=trixie-backports
	kernels="linux-image-amd64 linux-headers-amd64 linux-image-rt-amd64 linux-headers-rt-amd64"
	flavour=amd64
	[ "$name" = trixie-bpo-rt ] && flavour=rt-amd64 ;;
*)
	echo "chroot.sh: unknown kernel '$name' (bullseye, trixie-bpo, trixie-bpo-rt)" >&2
	exit 2 ;;
esac
key=$(echo "$release|$suites|$security_suite|$install_from|$base|$kernels|$mirror|$security" |
	sha256sum | cut -c1-12)
dir=$cache/kernel-chroot-$release-$key

# The kernel release of FLAVOUR the chroot holds: the one its metapackage
# (linux-image-amd64 or linux-image-rt-amd64) depends on (7.x's depend on
# linux-base-* first).
kver() {
	chroot "$dir/root" dpkg-query -W -f='${Depends}' "linux-image-$flavour" |
		grep -o 'linux-image-[^ ,]*' | head -n 1 | sed 's/^linux-image-//'
}

case $mode in
--print-dir)
	echo "$dir"
	exit 0 ;;
--print-kver)
	[ -f "$dir/.gpuslot-built" ] || { echo "chroot.sh: $dir is not built" >&2; exit 1; }
	kver
	exit 0 ;;
--build | --module) ;;
*)
	echo "usage: chroot.sh --print-dir|--print-kver|--build|--module CACHE NAME" >&2
	exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "chroot.sh: debootstrap and chroot need root" >&2; exit 1; }

if [ ! -f "$dir/.gpuslot-built" ]; then
	echo "kernel chroot: debootstrap $release into $dir.tmp (once; see docs/testing.md for how long)"
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	debootstrap --variant=minbase --include="$base" "$release" "$dir.tmp/root" "$mirror"
	{
		for s in $suites; do echo "deb $mirror $s main"; done
		echo "deb $security $security_suite main"
	} >"$dir.tmp/root/etc/apt/sources.list"
	# No initramfs (minutes per kernel under dracut or initramfs-tools):
	# the VM boots the kernel with its own (tests/vm/).
	chroot "$dir.tmp/root" dpkg-divert --local --rename --add /usr/sbin/update-initramfs
	ln -s /bin/true "$dir.tmp/root/usr/sbin/update-initramfs"
	chroot "$dir.tmp/root" sh -c "apt-get update -q &&
		DEBIAN_FRONTEND=noninteractive apt-get -y -q dist-upgrade &&
		DEBIAN_FRONTEND=noninteractive apt-get -y -q --no-install-recommends \
			-t $install_from install $kernels &&
		apt-get clean"
	touch "$dir.tmp/.gpuslot-built"
	mv "$dir.tmp" "$dir"
fi
[ "$mode" = --module ] || { echo "kernel chroot: $name $(kver) in $dir"; exit 0; }

# The module's sources go into a scratch directory of the chroot, are
# built there, and gpuslot.ko comes back: nothing of the build tree is
# shared with the chroot, which several clones may use at once.
kmod=$4
shift 4
v=$(kver)
scratch=$(mktemp -d "$dir/root/tmp/gpuslot-kmod.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# The module's Kbuild picks what it compiles from kmod/, and includes
# <uapi/linux/gpuslot.h> from the directory above it.
cp -r "$kmod" "$scratch/kmod"
cp -r "$kmod/../uapi" "$scratch/uapi"
make -s -C "$scratch/kmod" clean KDIR=/nonexistent >/dev/null 2>&1 || true
find "$scratch/kmod" \( -name '*.o' -o -name '*.ko' -o -name '*.mod*' -o -name '.*.cmd' \
	-o -name Module.symvers -o -name modules.order \) -delete
inner=/tmp/$(basename "$scratch")/kmod
echo "kernel chroot: building gpuslot.ko for $v ($name) in $dir"
# objtool (7.x) reads /proc: mounted in a mount namespace of the build's
# own, so that it goes with the build, whoever else uses the chroot.
unshare --mount --propagation private sh -c 'mount -t proc proc "$1/proc" && shift &&
	exec chroot "$@"' sh "$dir/root" "$dir/root" make -C "/lib/modules/$v/build" M="$inner" "$@" modules
cp "$scratch/kmod/gpuslot.ko" "$kmod/gpuslot.ko"
