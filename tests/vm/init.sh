#!/bin/busybox sh
# /init of the gpuslot test VM: load the module, run the suite, power off.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp

echo "gpuslot-vm: kernel $(uname -r), $(nproc) CPUs"
if insmod /lib/modules/gpuslot.ko; then
	cd /tmp
	GPUSLOT_KO=/lib/modules/gpuslot.ko /bin/gpuslot_vm_tests $(cat /etc/gpuslot-test-args)
	rc=$?
else
	echo "gpuslot-vm: insmod failed"
	rc=1
fi
echo "GPUSLOT-VM-EXIT rc=$rc"
poweroff -f
