#!/bin/bash
# The system test, inside a booted Debian 12 or 13 with systemd as PID 1: install
# the gpuslot packages and check what a real host relies on. Every check
# prints one "SYSTEM-TEST ok:" or "SYSTEM-TEST FAILED:" line.
set -u
P=/mnt/payload
pass=0 fail=0
check() { # what, shell condition
	if eval "$2"; then
		echo "SYSTEM-TEST ok: $1"
		pass=$((pass + 1))
	else
		echo "SYSTEM-TEST FAILED: $1"
		fail=$((fail + 1))
	fi
}
# Wait up to $2 seconds for condition $1.
wait_for() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		eval "$1" && return 0
		sleep 0.1
	done
	return 1
}
sys=/sys/class/gpuslot/gpu0
# The tables are debugfs's (systemd mounts it), root's like this script.
dbg=/sys/kernel/debug/gpuslot/gpu0

echo "SYSTEM-TEST: Linux $(uname -r), $(systemctl --version | head -n 1), PID 1 is $(cat /proc/1/comm)"

# This VM has no GPU: a drop-in points gpuslotd at the recorded Radeon VII
# topology, as an admin would for a test, before the packages start it.
mkdir -p /usr/local/share/gpuslot-test /etc/systemd/system/gpuslotd.service.d
cp -r $P/radeon-vii-gfx906 /usr/local/share/gpuslot-test/
cat >/etc/systemd/system/gpuslotd.service.d/test-topology.conf <<'CONF'
[Service]
ExecStart=
ExecStart=/usr/sbin/gpuslotd --topology /usr/local/share/gpuslot-test/radeon-vii-gfx906 --dri ""
CONF

mkdir -p /tmp/debs && cp $P/*.deb /tmp/debs/
t0=$(date +%s)
DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	/tmp/debs/gpuslot-dkms_*.deb /tmp/debs/gpuslotd_*.deb \
	/tmp/debs/libgpuslot1_*.deb /tmp/debs/libgpuslot-dev_*.deb \
	/tmp/debs/python3-gpuslot_*.deb 2>&1 | tail -n 25
echo "SYSTEM-TEST: apt-get install took $(($(date +%s) - t0)) s"

# Each release gets its own build (deploy/debian/build-debs.sh): +deb12 on
# Debian 12, +deb13 on 13, so an upgrade replaces one with the other.
rel=$(. /etc/os-release && echo "deb$VERSION_ID")
check "the five packages are the build for this release (+$rel)" \
	"[ \"\$(dpkg-query -W -f '\${Version}\n' gpuslot-dkms gpuslotd libgpuslot1 libgpuslot-dev \
	    python3-gpuslot | grep -c '+$rel\$')\" = 5 ]"
check "DKMS built and installed gpuslot for $(uname -r)" \
	"dkms status gpuslot/1.0.0 -k $(uname -r) | grep -q installed"
check "the module is loaded" "[ -d /sys/module/gpuslot ]"
check "systemctl start gpuslotd reached active: READY=1 arrived (Type=notify)" \
	"systemctl start gpuslotd && [ \"\$(systemctl show -p ActiveState --value gpuslotd)\" = active ]"
echo "SYSTEM-TEST: status: $(systemctl show -p StatusText --value gpuslotd)"
check "gpuslotd applied its layout (units amd-cu 60 1, 4 slots)" \
	"[ \"\$(cat $sys/unit_kind) \$(cat $sys/nr_units) \$(cat $sys/unit_size)\" = 'amd-cu 60 1' ] && \
	 [ \"\$(cat $sys/k)\" = 4 ]"
check "udev gave /dev/gpuslot group gpuslot, mode 0660" \
	"[ \"\$(stat -c %G:%a /dev/gpuslot)\" = gpuslot:660 ]"
check "gpuslotd is enabled for boot" "systemctl is-enabled -q gpuslotd"

# Clients, built against libgpuslot-dev through pkg-config.
gcc -O2 -o /usr/local/bin/job_loop $P/job_loop.c $(pkg-config --cflags --libs gpuslot)
gcc -O2 -o /usr/local/bin/hold $P/hold.c $(pkg-config --cflags --libs gpuslot)
check "pkg-config gpuslot builds and links a client" "[ -x /usr/local/bin/job_loop ] && [ -x /usr/local/bin/hold ]"
useradd -m -G gpuslot alice
useradd -m bob
out=$(runuser -u alice -- job_loop 5 none 2>&1)
check "a user in group gpuslot acquires slots ($out)" "[ \"\$out\" = '5 jobs done, 0 skipped' ]"
# The Python example the README shows, from python3-gpuslot.
out=$(runuser -u alice -- env GPUSLOT_BACKEND=none \
	python3 /usr/share/doc/python3-gpuslot/examples/job_loop.py 2>&1)
check "the Python example runs as a user in group gpuslot ($out)" \
	"[[ \"\$out\" =~ ^[0-9]+' frames done, '[0-9]+' skipped on none'$ ]]"
man_pages_render() {
	local page
	for page in man4/gpuslot.4 man8/gpuslotd.8 man8/gpuslotctl.8 man5/gpuslotd.conf.5 \
		man3/libgpuslot.3; do
		[ -n "$(MANWIDTH=80 man -l /usr/share/man/$page.gz 2>/dev/null)" ] || return 1
	done
}
check "every man page is installed and renders" man_pages_render
out=$(runuser -u bob -- job_loop 5 none 2>&1)
check "a user outside the group is refused ($out)" \
	"[[ \"\$out\" == *'Permission denied (join the gpuslot group)'* ]]"

# Reload applies a config change.
sed -i 's/^k = 4$/k = 2/' /etc/gpuslot/gpuslotd.conf
systemctl reload gpuslotd
check "systemctl reload applied k = 2 from gpuslotd.conf" \
	"wait_for '[ \"\$(cat $sys/k)\" = 2 ] && ! grep -q all $sys/slot0/units $sys/slot1/units' 20"
echo "SYSTEM-TEST: partitions after reload: $(cat $sys/slot0/units);$(cat $sys/slot1/units)"

# A restart leaves held slots held.
runuser -u alice -- hold >/tmp/hold.out 2>&1 &
check "a client holds a slot" "wait_for 'grep -q holding /tmp/hold.out' 20"
holder=$(pgrep -x -u alice hold)
gen=$(cat $sys/generation)
systemctl restart gpuslotd
check "systemctl restart gpuslotd leaves the held slot held (and the layout as it was)" \
	"[ \"\$(systemctl show -p ActiveState --value gpuslotd)\" = active ] && \
	 grep -q \" \$holder \" $dbg/holders && [ \"\$(cat $sys/generation)\" = $gen ]"
pkill -x -u alice hold
wait 2>/dev/null

# A crash (SIGABRT) makes systemd restart it.
n0=$(systemctl show -p NRestarts --value gpuslotd)
pid0=$(systemctl show -p MainPID --value gpuslotd)
systemctl kill -s ABRT gpuslotd
check "after SIGABRT systemd restarted gpuslotd" \
	"wait_for '[ \"\$(systemctl show -p NRestarts --value gpuslotd)\" -gt $n0 ] && \
		   [ \"\$(systemctl show -p ActiveState --value gpuslotd)\" = active ] && \
		   [ \"\$(systemctl show -p MainPID --value gpuslotd)\" != $pid0 ]' 30"
gpuslotctl status --topology /usr/local/share/gpuslot-test/radeon-vii-gfx906 --dri ""

# Removal leaves no unit, rule or module behind.
DEBIAN_FRONTEND=noninteractive apt-get remove -y -q gpuslotd gpuslot-dkms libgpuslot-dev \
	python3-gpuslot libgpuslot1 2>&1 | tail -n 8
check "apt-get remove: no unit left" \
	"[ ! -e /usr/lib/systemd/system/gpuslotd.service ] && [ ! -e /lib/systemd/system/gpuslotd.service ] && ! systemctl list-unit-files gpuslotd.service | grep -q gpuslotd"
check "apt-get remove: no udev rule left" "[ ! -e /usr/lib/udev/rules.d/60-gpuslot.rules ] && [ ! -e /lib/udev/rules.d/60-gpuslot.rules ]"
check "apt-get remove: no module left, on disk or loaded" \
	"[ -z \"\$(find /lib/modules -name 'gpuslot.ko*')\" ] && [ ! -d /sys/module/gpuslot ] && \
	 ! dkms status | grep -q gpuslot"

echo "SYSTEM-TEST: $pass passed, $fail failed"
echo "SYSTEM-TEST-EXIT rc=$((fail > 0))"
# Power off at once: the unit's SuccessAction is the fallback.
sync
systemctl poweroff -ff
