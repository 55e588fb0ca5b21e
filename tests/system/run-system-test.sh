#!/bin/bash
# make test-system: boot a Debian 12 (DIST=bookworm, default) or Debian 13
# (DIST=trixie) root file system (build-rootfs.sh, cached) with systemd as
# PID 1 on that release's kernel under QEMU (TCG), install
# the gpuslot packages in it and run payload/run.sh. Fails on a failed check
# or on a kernel bug in the serial log (tests/vm/verdict.sh).
#
# usage: run-system-test.sh DEBDIR WORKDIR CACHE [DIST]
set -euo pipefail
debs=$1 work=$2 cache=$3 dist=${4:-bookworm}
here=$(cd "$(dirname "$0")" && pwd)
repo=$here/../..
. "$repo/tests/vm/verdict.sh"

bash "$here/build-rootfs.sh" --build "$cache" "$dist"
root=$(bash "$here/build-rootfs.sh" --print-dir "$cache" "$dist")
release=$([ "$dist" = trixie ] && echo "Debian 13" || echo "Debian 12")

rm -rf "$work"
mkdir -p "$work/payload"
for p in gpuslot-dkms gpuslotd libgpuslot1 libgpuslot-dev python3-gpuslot; do
	cp "$debs"/${p}_*.deb "$work/payload/"
done
cp "$here/payload/run.sh" "$here/payload/hold.c" "$repo/libclient/examples/job_loop.c" \
	"$work/payload/"
cp -r "$repo/tests/fixtures/kfd/radeon-vii-gfx906" "$work/payload/"
mkfs.ext4 -q -F -L payload -d "$work/payload" "$work/payload.img" 64M

log=$work/serial.log
echo "test-system: booting $release ($(cat "$root/kernel-release")) with systemd under TCG; serial log: $log"
# snapshot=on: the cached image never changes.
timeout "${GPUSLOT_SYSTEM_TIMEOUT:-900}" qemu-system-x86_64 \
	-accel tcg -cpu max -smp 2 -m 2048 \
	-nographic -no-reboot -monitor none -serial stdio \
	-kernel "$root/vmlinuz" -initrd "$root/initrd.img" \
	-drive file="$root/base.img",if=virtio,format=raw,snapshot=on \
	-drive file="$work/payload.img",if=virtio,format=raw,readonly=on \
	-append "root=/dev/vda rw console=ttyS0 panic=-1 panic_on_warn=1 loglevel=4 systemd.show_status=0" \
	</dev/null 2>&1 | sed -u 's/\r$//' | tee "$log" || true

status=0
log_shows_bug "$log" test-system && status=1
grep -qE '(^|: )SYSTEM-TEST-EXIT rc=0$' "$log" || { echo "test-system: the test did not finish with rc=0"; status=1; }
closing_summary "$(grep -oE 'SYSTEM-TEST: [0-9]+ passed, [0-9]+ failed' "$log" |
	tail -n 1 | sed 's/SYSTEM-TEST: //')" $status
exit $status
