#!/bin/bash
# Install what `make test` and `make demo` need on Debian 12, once: a run
# with everything present installs nothing. Uses sudo when not root.
set -euo pipefail

packages=(
	build-essential cmake pkg-config
	# in front of the compilers of the CMake builds (Makefile, GPUSLOT_CCACHE)
	ccache
	libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
	libsystemd-dev libdrm-dev libinih-dev
	libamdhip64-dev libhsakmt-dev libhsa-runtime-dev
	debhelper dh-dkms debootstrap dpkg-dev
	linux-image-amd64 linux-headers-amd64 linux-source
	linux-image-rt-amd64 linux-headers-rt-amd64
	linux-image-6.12-amd64 linux-headers-6.12-amd64
	clang libclang-rt-14-dev
	# the toolchain floor (make test-toolchains): Ubuntu 22.04's GCC 11
	g++-11
	# arm64 (make test-vm ARCH=arm64, make test-arm64; .ci/run's vm-arm64
	# and arm64 steps): Debian's cross compilers (the arm64 kernel's
	# headers name aarch64-linux-gnu-gcc-12), qemu-system-aarch64 for the
	# VM, qemu-aarch64 (qemu-user) for the unit tests
	gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-system-arm qemu-user
	qemu-system-x86 busybox-static cpio kmod sparse
	libelf-dev libssl-dev bc flex bison xz-utils
	python3 python3-pytest python3-pytest-timeout python3-setuptools python3-pip python3-numpy python3-matplotlib
	dh-python lintian man-db
	# gpuslotd's Prometheus metrics, and the containers-and-metrics step
	# (tests/containers/): a real Prometheus server scraping gpuslotd, and
	# podman (rootful, runc) running containers from the CDI spec
	prometheus-cpp-dev prometheus curl podman runc
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
