#!/bin/bash
# `make check-kernel-style`: checkpatch.pl --strict (from Debian's
# linux-source), sparse (kbuild C=2) and the compiler's W=1 warnings over
# the kernel module and the uapi header. Any finding fails. kmod/lockcore/shim/ is userspace code (the
# kernel headers the lock core includes, for its userspace build): not checked.
#
# usage: check-kernel-style.sh KDIR BUILD_DIR
set -euo pipefail
kdir=$1 build=$2
cd "$(dirname "$0")/.."

src=$(ls /usr/src/linux-source-*.tar.xz | sort -V | tail -n 1)
tools=$build/linux-source-scripts
if [ ! -x "$tools/scripts/checkpatch.pl" ]; then
	mkdir -p "$tools"
	top=$(basename "$src" .tar.xz)
	tar -xJf "$src" -C "$tools" --strip-components=1 \
		"$top/scripts/checkpatch.pl" "$top/scripts/spelling.txt" \
		"$top/scripts/const_structs.checkpatch"
fi

if git rev-parse --git-dir >/dev/null 2>&1; then
	files=$(git ls-files --cached --others --exclude-standard \
		'kmod/*.c' 'kmod/*.h' 'uapi/*.h' ':!kmod/lockcore/shim/*')
else
	files=$(find kmod uapi -name '*.[ch]' ! -name '*.mod.c' ! -path 'kmod/lockcore/shim/*')
fi

[ -n "$files" ] || { echo "check-kernel-style: no sources found"; exit 1; }

status=0
echo "checkpatch.pl --strict: $(echo $files | wc -w) files"
# LINUX_VERSION_CODE is for in-tree code, which builds for one kernel; an
# out-of-tree module keys what differs between kernels on it, in one place
# (kmod/compat.h).
out=$(perl "$tools/scripts/checkpatch.pl" --strict --no-tree --terse \
	--ignore LINUX_VERSION_CODE -f $files) ||
	status=1
# --terse still prints a total per file: show only the findings.
echo "$out" | grep -v '^total: 0 errors, 0 warnings, 0 checks' || true

# W=1: the compiler's extra warnings too. GPUSLOT_KERNEL_CHROOT (set by
# `make check-kernel-style KERNEL=...` for a kernel of another Debian
# release) runs the build in that kernel's chroot, with its compiler and
# sparse: tests/kernels/chroot.sh --module.
echo "sparse (make C=2 W=1)${GPUSLOT_KERNEL_CHROOT:+, in the chroot of KERNEL}"
if [ -n "${GPUSLOT_KERNEL_CHROOT:-}" ]; then
	out=$($GPUSLOT_KERNEL_CHROOT kmod -s C=2 W=1 2>&1) || status=1
else
	out=$(make -s -C "$kdir" M="$PWD/kmod" C=2 W=1 modules 2>&1) || status=1
fi
if echo "$out" | grep -E 'warning:|error:'; then
	status=1
fi

if [ $status -eq 0 ]; then
	echo "check-kernel-style: no findings"
else
	echo "check-kernel-style: findings above"
fi
exit $status
