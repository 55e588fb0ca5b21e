#!/bin/bash
# The root file system of the system test, Debian 12 (bookworm, Linux 6.1)
# or Debian 13 (trixie, Linux 6.12), each with its own kernel and headers,
# in two cached stages:
#   1. debootstrap: systemd as PID 1, udev, DKMS with a compiler, Debian's
#      kernel with its headers, and what the gpuslot packages depend on (the
#      VM installs them offline); cached by the hash of the package list.
#   2. the image: a unit that runs the test payload from a second disk and
#      powers off; cached by the hash of this script.
#
# usage: build-rootfs.sh --print-dir CACHE [DIST] | --build CACHE [DIST]
# DIST is bookworm (default) or trixie.
# The image directory holds base.img, vmlinuz, initrd.img, kernel-release.
set -euo pipefail

mode=$1 cache=$2 dist=${3:-bookworm}
packages=systemd,systemd-sysv,udev,dbus,kmod,dkms,build-essential,pkg-config
packages=$packages,linux-image-amd64,linux-headers-amd64,initramfs-tools
packages=$packages,procps,util-linux,passwd,e2fsprogs,ca-certificates
packages=$packages,libinih1,libdrm-amdgpu1,libsystemd0,python3,man-db
# gpuslotd's Prometheus metrics (debootstrap pulls libcivetweb1 along)
packages=$packages,libprometheus-cpp-core1.0,libprometheus-cpp-pull1.0
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

case $dist in
bookworm)
	stage1=$cache/debian12-$(echo "$packages $mirror" | sha256sum | cut -c1-12)
	dir=$cache/rootfs-$(sha256sum "$0" | cut -c1-12) ;;
trixie)
	# openssl: trixie's DKMS signs the modules it builds with a key of
	# its own, which it makes with openssl.
	packages=$packages,openssl
	stage1=$cache/debian13-$(echo "$packages $mirror" | sha256sum | cut -c1-12)
	dir=$cache/rootfs-trixie-$(sha256sum "$0" | cut -c1-12) ;;
*) echo "build-rootfs: DIST=$dist: use bookworm or trixie" >&2; exit 1 ;;
esac
if [ "$mode" = --print-dir ]; then
	echo "$dir"
	exit 0
fi
[ -s "$dir/base.img" ] && { echo "system rootfs: cached in $dir"; exit 0; }

sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo

if [ ! -d "$stage1/root" ]; then
	$sudo rm -rf "$stage1.tmp"
	mkdir -p "$stage1.tmp"
	echo "system rootfs: debootstrap $dist into $stage1.tmp (about 10 minutes, once)"
	$sudo debootstrap --variant=minbase --include="$packages" "$dist" "$stage1.tmp/root" "$mirror"
	# The same kernel as the rest of the release: with its updates.
	$sudo tee "$stage1.tmp/root/etc/apt/sources.list" >/dev/null <<SRC
deb $mirror $dist main
deb $mirror $dist-updates main
deb http://deb.debian.org/debian-security $dist-security main
SRC
	$sudo chroot "$stage1.tmp/root" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive \
		apt-get -y -q dist-upgrade && apt-get clean'
	mv "$stage1.tmp" "$stage1"
fi

work=$dir.tmp
$sudo rm -rf "$work"
mkdir -p "$work"
$sudo cp -a "$stage1/root" "$work/root"
$sudo tee "$work/root/etc/fstab" >/dev/null <<'FSTAB'
/dev/vda / ext4 rw,errors=remount-ro 0 1
FSTAB
echo gpuslot-test | $sudo tee "$work/root/etc/hostname" >/dev/null
# The payload disk's run.sh is the test; its output goes to the console,
# and the VM powers off when it ends. Ordered after the boot's own work,
# but not after multi-user.target, which wants it (that would be a cycle).
$sudo tee "$work/root/etc/systemd/system/gpuslot-system-test.service" >/dev/null <<'UNIT'
[Unit]
Description=gpuslot system test (payload on /dev/vdb)
After=systemd-user-sessions.service systemd-udevd.service systemd-modules-load.service
After=dbus.service
ConditionPathExists=/dev/vdb

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'mkdir -p /mnt/payload && mount -o ro /dev/vdb /mnt/payload && /mnt/payload/run.sh'
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=1500
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Install]
WantedBy=multi-user.target
UNIT
$sudo chroot "$work/root" systemctl enable gpuslot-system-test.service
# Quiet consoles: no login prompt between the test's lines.
$sudo chroot "$work/root" systemctl mask serial-getty@ttyS0.service getty@tty1.service \
	apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer

kver=$(ls "$work/root/lib/modules" | sort -V | tail -n 1)
$sudo cp "$work/root/boot/vmlinuz-$kver" "$work/vmlinuz"
$sudo cp "$work/root/boot/initrd.img-$kver" "$work/initrd.img"
$sudo chmod 644 "$work/vmlinuz" "$work/initrd.img"
echo "$kver" >"$work/kernel-release"
$sudo mkfs.ext4 -q -F -L gpuslot-root -d "$work/root" "$work/base.img" 4G
$sudo chown "$(id -u):$(id -g)" "$work/base.img" "$work/vmlinuz" "$work/initrd.img"
$sudo rm -rf "$work/root"
mv "$work" "$dir"
echo "system rootfs: built $dir (Linux $kver)"
