#!/bin/bash
# Debian 12's arm64 packages for the arm64 build and VM, fetched with apt
# from Debian's mirror and unpacked with dpkg -x, without adding arm64 as
# a dpkg architecture of this host: apt runs on a private state directory
# whose only architecture is arm64, and nothing is installed.
#
# usage: fetch.sh --print-dir CACHE   the directory it makes (no download)
#        fetch.sh --fetch CACHE       make it (once; later calls reuse it)
#
# The directory, CACHE/arm64-<key>, is keyed by this script and the host's
# Debian 12 kernel (the arm64 kernel is the same upload as the amd64 one,
# so that the host's linux-kbuild-6.1 serves as kbuild's host tools). It
# holds:
#   sysroot/   the -dev packages and what they depend on (the userspace
#              cross build, and qemu-aarch64 -L)
#   kernel/    linux-image-*-arm64 and linux-headers-*-arm64 with -common;
#              kernel/kdir is the headers' build tree, kernel/Image the
#              kernel QEMU boots
#   busybox    busybox-static's arm64 busybox
#   VERSIONS   the packages and versions it was made from
set -euo pipefail

mode=$1 cache=$2
here=$(cd "$(dirname "$0")" && pwd)

# The host's Debian 12 kernel ABI (6.1.0-56) and the upload's version
# (6.1.192-2): the arm64 packages must be the same upload as
# linux-kbuild-6.1, whose amd64 fixdep and modpost build the module.
kver=$(dpkg-query -W -f='${Depends}' linux-image-amd64 | sed -n 's/^linux-image-\([^ ,]*\)-amd64.*/\1/p')
kbuild_version=$(dpkg-query -W -f='${Version}' linux-kbuild-6.1)
[ -n "$kver" ] && [ -n "$kbuild_version" ] || {
	echo "fetch.sh: needs linux-image-amd64 and linux-kbuild-6.1 (tests/install-deps.sh)" >&2
	exit 1
}

# The userspace's build dependencies (tests/install-deps.sh, less what is
# amd64-only: HIP, the kernels, the tools), for arm64.
dev_packages=(libc6-dev libstdc++-12-dev libgcc-12-dev libasan8 libubsan1
	libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
	libsystemd-dev libdrm-dev libinih-dev prometheus-cpp-dev)
kernel_packages=("linux-image-$kver-arm64" "linux-headers-$kver-arm64" "linux-headers-$kver-common")

key=$( { cat "$0"; echo "$kver $kbuild_version"; } | sha256sum | cut -c1-12)
dir=$cache/arm64-$key
if [ "$mode" = --print-dir ]; then
	echo "$dir"
	exit 0
fi
[ "$mode" = --fetch ] || { echo "usage: fetch.sh --print-dir|--fetch CACHE" >&2; exit 2; }
[ -f "$dir/VERSIONS" ] && exit 0

tmp=$(mktemp -d "$cache/arm64-$key.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/apt/lists/partial" "$tmp/apt/archives/partial" "$tmp/apt/etc/preferences.d" \
	"$tmp/debs" "$tmp/out"
: >"$tmp/apt/status"
cat >"$tmp/apt/etc/sources.list" <<SOURCES
deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-updates main
deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
SOURCES
apt=(apt-get -q -o APT::Architecture=arm64 -o APT::Architectures::=arm64
	-o Dir::State="$tmp/apt" -o Dir::State::Lists="$tmp/apt/lists"
	-o Dir::State::status="$tmp/apt/status" -o Dir::Cache="$tmp/apt"
	-o Dir::Cache::archives="$tmp/apt/archives"
	-o Dir::Etc::SourceList="$tmp/apt/etc/sources.list" -o Dir::Etc::SourceParts=/nonexistent
	-o Dir::Etc::Preferences="$tmp/apt/etc/preferences"
	-o Dir::Etc::PreferencesParts="$tmp/apt/etc/preferences.d"
	-o APT::Install-Recommends=false -o Debug::NoLocking=true)
"${apt[@]}" update >"$tmp/apt-update.log" 2>&1 || { cat "$tmp/apt-update.log" >&2; exit 1; }

# The -dev packages with everything they depend on (the state has nothing
# installed, so apt resolves down to libc6), downloaded only.
DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -d "${dev_packages[@]}" busybox-static \
	>"$tmp/apt-install.log" 2>&1 || { cat "$tmp/apt-install.log" >&2; exit 1; }
(cd "$tmp/debs" && "${apt[@]}" download "${kernel_packages[@]}") >>"$tmp/apt-install.log" 2>&1 ||
	{ cat "$tmp/apt-install.log" >&2; exit 1; }

for deb in "$tmp"/apt/archives/*.deb "$tmp"/debs/*.deb; do
	dpkg-deb -f "$deb" Package Version Architecture | paste -sd' ' >>"$tmp/out/VERSIONS"
done
image_version=$(dpkg-deb -f "$tmp"/debs/linux-image-*.deb Version)
[ "$image_version" = "$kbuild_version" ] || {
	echo "fetch.sh: Debian's arm64 kernel is $image_version, this host's linux-kbuild-6.1 $kbuild_version:" \
		"update the host (apt-get upgrade) so that both are the same upload" >&2
	exit 1
}

mkdir -p "$tmp/out/sysroot" "$tmp/out/kernel"
for deb in "$tmp"/apt/archives/*.deb; do
	case $(basename "$deb") in
	busybox-static_*) dpkg -x "$deb" "$tmp/busybox" ;;
	*) dpkg -x "$deb" "$tmp/out/sysroot" ;;
	esac
done
cp "$tmp/busybox/bin/busybox" "$tmp/out/busybox"
for deb in "$tmp"/debs/*.deb; do
	dpkg -x "$deb" "$tmp/out/kernel"
done
# The headers' scripts/ and tools/ point into linux-kbuild-6.1 (arm64
# binaries in arm64's package): this host's amd64 linux-kbuild-6.1 of the
# same upload stands in for it.
ln -s /usr/lib/linux-kbuild-6.1 "$tmp/out/kernel/usr/lib/linux-kbuild-6.1"
# The build tree's Makefile includes -common's at its installed path:
# the unpacked one instead.
sed -i "s|^include /usr/src/|include $dir/kernel/usr/src/|" \
	"$tmp/out/kernel/usr/src/linux-headers-$kver-arm64/Makefile"
# The VM runs without the kernel's modules (292 MiB).
rm -rf "$tmp/out/kernel/lib/modules"
ln -s "usr/src/linux-headers-$kver-arm64" "$tmp/out/kernel/kdir"
ln -s "boot/vmlinuz-$kver-arm64" "$tmp/out/kernel/Image"
# Absolute symbolic links of the sysroot (libfoo.so -> /lib/...) point
# into the sysroot instead of the host.
find "$tmp/out/sysroot" -type l -lname '/*' | while read -r link; do
	target=$(readlink "$link")
	ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$tmp/out/sysroot$target")" "$link"
done
# Debian 12 is merged-/usr: /lib is /usr/lib.
for d in lib bin sbin; do
	[ -e "$tmp/out/sysroot/$d" ] || ln -s "usr/$d" "$tmp/out/sysroot/$d"
done
mv "$tmp/out" "$tmp.done"
mv -T "$tmp.done" "$dir" 2>/dev/null || rm -rf "$tmp.done"
echo "fetch.sh: Debian 12 arm64 packages in $dir"
