#!/bin/bash
# Boot Debian's kernel in QEMU (TCG) with a busybox initramfs holding
# gpuslot.ko and the static test suite; fail on a failed test or on any
# BUG:/WARNING:/Oops/Call Trace in the serial log.
#
# usage: run-vm.sh KERNEL_IMAGE MODULE SUITE_BINARY WORKDIR [gtest args...]
# GPUSLOT_VM_BINARIES: more programs for /bin (gpuslotd, gpuslotctl);
# GPUSLOT_VM_FIXTURES: a directory the guest sees as /fixtures.
# GPUSLOT_VM_PYTHON: the Python package's directory, seen as /python, with
# Debian's python3, its standard library and pytest (test-python-vm);
# GPUSLOT_VM_LIBGPUSLOT: the libgpuslot.so.1 it loads.
# GPUSLOT_VM_ARCH=arm64 (`make ... ARCH=arm64`): an arm64 guest in
# qemu-system-aarch64 (-M virt) instead of x86_64, with
# GPUSLOT_VM_BUSYBOX, an arm64 busybox, and GPUSLOT_VM_SYSROOT, the arm64
# sysroot that a dynamically linked program's libraries come from
# (tests/arm64/fetch.sh makes both).
set -euo pipefail

kernel=$1 module=$2 suite=$3 work=$4
shift 4
GPUSLOT_VM_APPEND=${GPUSLOT_VM_APPEND:-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/verdict.sh"

rm -rf "$work/root"
mkdir -p "$work/root"/{bin,dev,etc,lib/modules,proc,sys,tmp}
cp "${GPUSLOT_VM_BUSYBOX:-/bin/busybox}" "$work/root/bin/busybox"
cp "$here/init.sh" "$work/root/init"
chmod 755 "$work/root/init"
cp "$module" "$work/root/lib/modules/gpuslot.ko"
cp "$suite" "$work/root/bin/gpuslot_vm_tests"
for bin in ${GPUSLOT_VM_BINARIES:-}; do
	cp "$bin" "$work/root/bin/"
done
if [ -n "${GPUSLOT_VM_FIXTURES:-}" ]; then
	cp -r "$GPUSLOT_VM_FIXTURES" "$work/root/fixtures"
fi
# The interpreter, the standard library (less its tests and GUI) and
# pytest with what it imports, at the host's paths.
python_files=
if [ -n "${GPUSLOT_VM_PYTHON:-}" ] && [ "${GPUSLOT_VM_ARCH:-x86_64}" != x86_64 ]; then
	echo "run-vm: the Python suite runs on x86_64 only (this host's python3)"
	exit 1
elif [ -n "${GPUSLOT_VM_PYTHON:-}" ]; then
	py=$(readlink -f /usr/bin/python3)
	stdlib=/usr/lib/$(basename "$py")
	mkdir -p "$work/root/usr/bin" "$work/root/usr/lib/python3/dist-packages"
	cp "$py" "$work/root/usr/bin/"
	ln -s "$(basename "$py")" "$work/root/usr/bin/python3"
	(cd / && tar -cf - --exclude="${stdlib#/}/test" --exclude="${stdlib#/}/idlelib" \
		--exclude="${stdlib#/}/tkinter" --exclude="${stdlib#/}/lib2to3" \
		--exclude="${stdlib#/}/ensurepip" --exclude="${stdlib#/}/turtledemo" \
		--exclude="${stdlib#/}/config-*" "${stdlib#/}") | tar -xf - -C "$work/root"
	dpkg -L python3-pytest python3-pluggy python3-iniconfig python3-packaging \
		python3-attr python3-py python3-more-itertools 2>/dev/null |
		grep '^/usr/lib/python3/dist-packages/.' | while read -r f; do
		[ -f "$f" ] || continue
		mkdir -p "$work/root$(dirname "$f")"
		cp "$f" "$work/root$f"
	done
	cp -r "$GPUSLOT_VM_PYTHON" "$work/root/python"
	find "$work/root/python" -name __pycache__ -prune -exec rm -rf {} +
	cp -L "$GPUSLOT_VM_LIBGPUSLOT" "$work/root/lib/libgpuslot.so.1"
	python_files="$py $work/root/lib/libgpuslot.so.1 $(find "$stdlib/lib-dynload" -name '*.so')"
fi
# A dynamically linked program brings its libraries and loader along.
# (ldd fails on a static program: then there is nothing to copy.) An arm64
# program's are listed by the sysroot's loader under qemu-user, as the
# guest's paths, and copied from the sysroot.
sysroot=${GPUSLOT_VM_SYSROOT:-}
list_libs() {
	if [ -z "$sysroot" ]; then
		ldd "$1" 2>/dev/null | grep -oE '/[^ ]+' || true
	elif readelf -l "$1" | grep -q 'program interpreter'; then
		qemu-aarch64 -L "$sysroot" "$sysroot/lib/ld-linux-aarch64.so.1" --list "$1" |
			grep -oE '/[^ ]+' || true
	fi
}
for bin in "$suite" ${GPUSLOT_VM_BINARIES:-} $python_files; do
	libs=$(list_libs "$bin")
	for lib in $libs; do
		# qemu-user finds a library in the sysroot first, else on the host
		# (the build tree's libgpuslot.so.1).
		src=$sysroot$lib
		[ -e "$src" ] || src=$lib
		mkdir -p "$work/root$(dirname "$lib")"
		cp -L "$src" "$work/root$lib"
		# A library from the build tree (libgpuslot.so.1) would be hidden
		# when the tree lies under /tmp, which the guest mounts over:
		# /lib is on the loader's default path.
		case $lib in
		/lib/* | /lib64/* | /usr/lib/*) ;;
		*) cp -L "$src" "$work/root/lib/" ;;
		esac
	done
done
echo "$*" >"$work/root/etc/gpuslot-test-args"
(cd "$work/root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initramfs.cpio.gz"

log=$work/serial.log
# KVM hangs on the hosts this runs on: TCG only.
case ${GPUSLOT_VM_ARCH:-x86_64} in
x86_64)	qemu=(qemu-system-x86_64 -accel tcg -cpu max) console=ttyS0 vm_timeout=1200 ;;
# -M virt: QEMU's generic arm64 machine (GICv2, PL011 serial, PSCI).
# pauth-impdef=on: pointer authentication (which Debian's kernel uses in
# every function) keeps its instructions and semantics but hashes with
# QEMU's cheap IMPLEMENTATION DEFINED algorithm instead of emulating QARMA5:
# measured, the kernel boots in 13 s of guest time instead of 107 s.
arm64)	qemu=(qemu-system-aarch64 -M virt -accel tcg -cpu max,pauth-impdef=on)
	console=ttyAMA0 vm_timeout=2400 ;;
*)	echo "run-vm: GPUSLOT_VM_ARCH=$GPUSLOT_VM_ARCH: use x86_64 or arm64"; exit 1 ;;
esac
boot() {
	echo "run-vm: booting $(basename "$kernel") under TCG (${GPUSLOT_VM_ARCH:-x86_64}), -smp 4; serial log: $log"
	timeout "${GPUSLOT_VM_TIMEOUT:-$vm_timeout}" "${qemu[@]}" -smp 4 -m 1024 \
		-nographic -no-reboot -monitor none -serial stdio \
		-kernel "$kernel" -initrd "$work/initramfs.cpio.gz" \
		-append "console=$console panic=-1 oops=panic panic_on_warn=1 softlockup_panic=1 loglevel=4 $GPUSLOT_VM_APPEND" \
		</dev/null 2>&1 | sed -u 's/\r$//' | tee "$log" || true
}
boot
# A kernel that crashes in its own boot, before init.sh runs (and loads
# gpuslot), hit a flake of the kernel under TCG (seen: an int3 Oops in
# text patching on 6.12), not a bug of ours: it gets one more boot. The
# first log stays, and a second crash fails the run as usual.
if ! grep -q '^gpuslot-vm: kernel ' "$log" && log_shows_bug "$log" run-vm >/dev/null; then
	mv "$log" "$work/serial-first-boot.log"
	echo "run-vm: the kernel crashed in its own boot, before gpuslot was loaded" \
		"($work/serial-first-boot.log): booting once more"
	boot
fi

status=0
log_shows_bug "$log" run-vm && status=1
# The contention tests need the CPUs QEMU was given.
if ! grep -qE 'gpuslot-vm: kernel .*, 4 CPUs$' "$log"; then
	echo "run-vm: the guest did not bring up 4 CPUs"
	status=1
fi
if ! grep -q '^GPUSLOT-VM-EXIT rc=0$' "$log"; then
	echo "run-vm: the suite did not finish with rc=0"
	status=1
fi
# A benchmark run (RUN_VM_SUMMARY=0) has no tests to sum up.
[ "${RUN_VM_SUMMARY:-1}" = 1 ] || exit $status
closing_summary "$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1 || true)" $status
exit $status
