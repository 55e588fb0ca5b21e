#!/bin/bash
# Containers from gpuslot's CDI spec, with Debian 12's podman (rootful,
# runc), against a gpuslotd serving the bundled Radeon VII on its socket
# transport on this host (k = 1, so that every hold is exclusive):
#   - a container started with --device gpuslot.dev/gpu=0 acquires and
#     releases the slot, as an unprivileged member of group gpuslot;
#   - a host process waits FIFO behind it, and a second container behind
#     the host process;
#   - a container killed (SIGKILL) while holding frees its slot;
#   - a container without the device cannot reach the lock, and one with
#     it sees its socket alone, not gpuslotd's directory (gpuslotd.state);
#   - a default rootful container (uid 0, no CAP_SYS_ADMIN) is no admin;
#   - root in a container with a user namespace may take slots but is no
#     gpuslot admin: neither gpuslotctl set-k (an attribute write) nor a
#     SET_K message sent straight over the socket changes k.
# Runs as root (sudo when not) in a mount namespace of its own, where
# /etc/cdi and /var/run/cdi are empty tmpfs: the test's spec is the only
# one podman sees, and the host's CDI directories are left alone.
#
# Usage: cdi-test.sh RELEASE_BUILD_DIR FIXTURE
# Ends with "N passed, N failed".
set -uo pipefail
release=$(realpath "$1") fixture=$(realpath "$2")
here=$(dirname "$(realpath "$0")")
root=$(realpath "$here/../..")

if [ "$(id -u)" -ne 0 ]; then
	exec sudo "$0" "$@"
fi
if [ -z "${GPUSLOT_CDI_TEST_NS:-}" ]; then
	mkdir -p /etc/cdi /var/run/cdi
	exec env GPUSLOT_CDI_TEST_NS=1 unshare --mount --propagation private "$0" "$@"
fi
mount -t tmpfs -o mode=0755 cdi-test /etc/cdi
mount -t tmpfs -o mode=0755 cdi-test /var/run/cdi

test_name=cdi-test
. "$(dirname "$(realpath "$0")")/report.sh"

w=$(mktemp -d /tmp/gpuslot-cdi-test.XXXXXX)
chmod 0755 "$w"
pids=()
containers=()
cleanup() {
	for c in "${containers[@]}"; do podman rm -f -t 0 "$c" >/dev/null 2>&1; done
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$w"
}
trap cleanup EXIT

# The group whose members may take slots, as the package makes it.
getent group gpuslot >/dev/null || groupadd --system gpuslot || {
	bad "cannot create group gpuslot"
	finish
}
gid=$(getent group gpuslot | cut -d: -f3)

# The test client against the release build's libgpuslot.
mkdir -p "$w/lib"
cp -L "$release/libclient/libgpuslot.so.1" "$w/lib/"
lib=$w/lib/libgpuslot.so.1
cc -O2 -Wall -Werror -I"$root/libclient/include" -I"$root/uapi" -o "$w/slot_client" \
	"$here/slot_client.c" "$lib" -Wl,-rpath,"$w/lib" || { bad "slot_client does not build"; finish; }

# The image: a root file system holding slot_client, gpuslotctl, busybox
# and the libraries they load (podman --rootfs; no registry needed).
rootfs=$w/rootfs
mkdir -p "$rootfs"/{bin,dev,proc,sys,tmp,run,etc,usr/lib/x86_64-linux-gnu}
cp "$w/slot_client" "$release/daemon/gpuslotctl" /bin/busybox "$rootfs/bin/"
cp -L "$lib" "$rootfs/usr/lib/x86_64-linux-gnu/"
for b in "$rootfs/bin/slot_client" "$rootfs/bin/gpuslotctl"; do
	LD_LIBRARY_PATH=$(dirname "$lib") ldd "$b" | grep -oE '/[^ ]+' | while read -r l; do
		[ -e "$rootfs$l" ] || cp -L --parents "$l" "$rootfs"
	done
done
ln -s busybox "$rootfs/bin/sh"
echo "root:x:0:0::/:/bin/sh" >"$rootfs/etc/passwd"
echo "root:x:0:" >"$rootfs/etc/group"
chmod 1777 "$rootfs/tmp"

# gpuslotd on the socket transport, k = 1.
mkdir -p "$w/sock" "$w/state"
chmod 0755 "$w/sock"
printf '[default]\nk = 1\n' >"$w/gpuslotd.conf"
"$release/daemon/gpuslotd" --transport socket --socket-dir "$w/sock" --state-dir "$w/state" \
	--topology "$fixture" --dri "" --config "$w/gpuslotd.conf" >"$w/gpuslotd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$w/sock/gpu0.sock" ] && break; sleep 0.1; done
[ -S "$w/sock/gpu0.sock" ] || { bad "gpuslotd did not start: $(cat "$w/gpuslotd.log")"; finish; }

# Host clients find this gpuslotd's sockets, as a container finds them at
# /run/gpuslot through the spec.
export GPUSLOT_SOCKET_DIR=$w/sock
ctl() { "$release/daemon/gpuslotctl" "$@" --transport socket --socket-dir "$w/sock" \
	--topology "$fixture" --dri "" --state-dir "$w/state"; }
# status_field EXPR: a Python expression over domain 0's JSON status 'g'.
status_field() {
	ctl status --json | python3 -c "import json,sys; g=json.load(sys.stdin)['gpus'][0]; print($1)"
}
# wait_for WHAT CONDITION...: up to 20 s for the condition to hold.
wait_for() {
	local what=$1
	shift
	for _ in $(seq 200); do
		"$@" && { ok "$what"; return 0; }
		sleep 0.1
	done
	bad "$what"
	return 1
}
output_is() { grep -qx -- "$2" "$1" 2>/dev/null; }
waiters_are() { [ "$(status_field "len(g['waiters'])")" = "$1" ]; }
holder_pid() { status_field "next((s['holder']['pid'] for s in g['slots'] if 'holder' in s), 0)"; }

# The spec, as a user would generate it.
if ctl cdi generate --output /etc/cdi/gpuslot.json 2>"$w/cdi.err"; then
	ok "gpuslotctl cdi generate wrote /etc/cdi/gpuslot.json"
else
	bad "gpuslotctl cdi generate: $(cat "$w/cdi.err")"
	finish
fi
check "the spec is cdiVersion 0.5.0 (Debian 12's podman 4.3.1 knows 0.3.0 to 0.5.0)" \
	grep -q '"cdiVersion": "0.5.0"' /etc/cdi/gpuslot.json

# podman, rootful, with runc. This host's rlimits may be below podman's
# defaults (nofile 1048576), which the runtime cannot raise without
# CAP_SYS_RESOURCE: ask for less. podman_run NAME OPTION... -- COMMAND...
# (--rootfs is a flag: the first argument after the options is the root
# file system, and everything after it the command.)
podman_run() {
	local name=$1 opts=()
	shift
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	containers+=("$name")
	podman --runtime runc run --rm --name "$name" --network none \
		--ulimit nofile=1024:1024 --ulimit nproc=1024:1024 "${opts[@]}" --rootfs "$rootfs" "$@"
}
member=(--user 1000:1000 --group-add "$gid")

# A holder in a container, a host process behind it, a container behind that.
mkfifo "$w/a.in" "$w/h.in" "$w/c.in"
exec 7<>"$w/a.in" 8<>"$w/h.in" 9<>"$w/c.in"
podman_run gpuslot-test-a -i --device gpuslot.dev/gpu=0 "${member[@]}" -- /bin/slot_client hold \
	<"$w/a.in" >"$w/a.out" 2>&1 &
pids+=($!)
wait_for "a container with --device gpuslot.dev/gpu=0 holds the slot, as uid 1000 in group gpuslot" \
	output_is "$w/a.out" "held 0" || { cat "$w/a.out"; finish; }
a_pid=$(holder_pid)
setpriv --reuid=65534 --regid=65534 --groups="$gid" "$w/slot_client" hold \
	<"$w/h.in" >"$w/h.out" 2>&1 &
h=$!
pids+=($h)
wait_for "a host process (nobody, group gpuslot) waits behind the container" waiters_are 1
podman_run gpuslot-test-c -i --device gpuslot.dev/gpu=0 "${member[@]}" -- /bin/slot_client hold \
	<"$w/c.in" >"$w/c.out" 2>&1 &
pids+=($!)
wait_for "a second container waits behind the host process" waiters_are 2
echo >&7
wait_for "the container released" output_is "$w/a.out" "released"
wait_for "the host process got the slot next (FIFO)" output_is "$w/h.out" "held 0"
check "the second container still waits" waiters_are 1
check "the holder is the host process" [ "$(holder_pid)" = "$h" ]
echo >&8
wait_for "then the second container got it" output_is "$w/c.out" "held 0"
echo >&9
wait_for "and released it" output_is "$w/c.out" "released"
check "the container's hold was its own (pid $a_pid), not the host process's" \
	[ "$a_pid" != "$h" -a "$a_pid" != 0 ]

# The spec binds the domain's socket alone, not gpuslotd's directory: no
# gpuslotd.state to flock or write.
out=$(podman_run gpuslot-test-ls --device gpuslot.dev/gpu=0 "${member[@]}" -- /bin/sh -c 'ls -A /run/gpuslot' 2>&1)
check "a container with the device sees only its socket in /run/gpuslot ($out)" [ "$out" = "gpu0.sock" ]

# A default rootful container: uid 0 (no user namespace), without
# CAP_SYS_ADMIN (podman's defaults drop it). No admin.
out=$(podman_run gpuslot-test-r --device gpuslot.dev/gpu=0 -- /bin/slot_client set-k 2 2>&1)
check "a rootful container's root without CAP_SYS_ADMIN may not send SET_K ($out)" \
	[ "$out" = "set-k: Operation not permitted" ]
check "and k stays 1" [ "$(status_field "g['k']")" = 1 ]

# SIGKILL to a container that holds the slot frees it.
mkfifo "$w/k.in"
exec 6<>"$w/k.in"
podman_run gpuslot-test-k -i --device gpuslot.dev/gpu=0 "${member[@]}" -- /bin/slot_client hold \
	<"$w/k.in" >"$w/k.out" 2>&1 &
pids+=($!)
wait_for "a container holds the slot before it is killed" output_is "$w/k.out" "held 0"
podman kill --signal KILL gpuslot-test-k >/dev/null
free_now() { [ "$("$w/slot_client" try)" = "held 0" ]; }
wait_for "after SIGKILL to the container the slot is free again" free_now

# Without the device: no socket, no lock.
out=$(podman_run gpuslot-test-n "${member[@]}" -- /bin/slot_client try 2>&1)
check "a container without the device cannot reach the lock ($out)" \
	grep -q "^error: " <<<"$out"
out=$(podman_run gpuslot-test-n2 "${member[@]}" -- /bin/sh -c 'ls /run/gpuslot /dev/gpuslot' 2>&1)
check "nor see its socket directory or device" grep -q "No such file" <<<"$out"

# Root in a user namespace: container uids 0..4999 are host 200000..204999,
# container gid 5000 is the host's gpuslot group.
# It even has CAP_SYS_ADMIN, in its own user namespace only: a capability
# there is no capability on the host.
userns=(--uidmap 0:200000:5000 --gidmap 0:200000:5000 --gidmap "5000:$gid:1" --group-add 5000
	--cap-add SYS_ADMIN)
out=$(podman_run gpuslot-test-u "${userns[@]}" --device gpuslot.dev/gpu=0 -- /bin/slot_client try 2>&1)
check "root in a user-namespaced container (group gpuslot mapped) may take a slot ($out)" \
	[ "$out" = "held 0" ]
out=$(podman_run gpuslot-test-u2 "${userns[@]}" --device gpuslot.dev/gpu=0 -- \
	/bin/gpuslotctl set-k 2 --transport socket 2>&1)
check "but is no gpuslot admin: set-k is refused ($out)" grep -q "root only" <<<"$out"
out=$(podman_run gpuslot-test-u3 "${userns[@]}" --device gpuslot.dev/gpu=0 -- \
	/bin/slot_client set-k 2 2>&1)
check "nor may it send SET_K over the socket ($out)" [ "$out" = "set-k: Operation not permitted" ]
check "and k stays 1" [ "$(status_field "g['k']")" = 1 ]
out=$("$w/slot_client" set-k 1 2>&1)
check "while host root may (SET_K 1 over the socket: $out)" [ "$out" = "set-k: ok" ]

finish
