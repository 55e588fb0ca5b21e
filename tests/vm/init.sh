#!/bin/busybox sh
# /init of the gpuslot test VM: load the module, run the suite, check the
# kernel's leak detector where it has one, and stop the VM.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null

echo "gpuslot-vm: kernel $(uname -r) $(uname -v), $(nproc) CPUs"
kmemleak=/sys/kernel/debug/kmemleak
# Only what leaks from here on is gpuslot's business.
[ -e $kmemleak ] && echo clear >$kmemleak

if insmod /lib/modules/gpuslot.ko; then
	cd /tmp
	GPUSLOT_KO=/lib/modules/gpuslot.ko /bin/gpuslot_vm_tests $(cat /etc/gpuslot-test-args)
	rc=$?
else
	echo "gpuslot-vm: insmod failed"
	rc=1
fi

if [ -e $kmemleak ]; then
	rmmod gpuslot || rc=1
	# kmemleak reports only objects older than 5 s.
	sleep 6
	echo scan >$kmemleak
	echo scan >$kmemleak
	echo "gpuslot-vm: kmemleak scan after rmmod:"
	cat $kmemleak
	echo "gpuslot-vm: kmemleak scan done"
fi
echo "GPUSLOT-VM-EXIT rc=$rc"
# -no-reboot makes QEMU exit: no ACPI needed to stop the VM.
reboot -f
