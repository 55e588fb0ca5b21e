/* SPDX-License-Identifier: LGPL-2.1-or-later OR GPL-2.0 */
/*
 * gpuslot_wire.h - gpuslotd's socket transport, message by message.
 *
 * Not kernel ABI: the module never sees these messages. gpuslotd's lock
 * server and libgpuslot speak it; it is installed with libgpuslot for
 * other clients of the socket (tests/containers/slot_client.c is one).
 * The commands' structs are those of <linux/gpuslot.h>.
 */
#ifndef GPUSLOT_WIRE_H
#define GPUSLOT_WIRE_H

#include <linux/gpuslot.h>
#include <linux/types.h>

/*
 * The socket transport. Where /dev/gpuslot cannot exist (no module), gpuslotd
 * serves each domain on a SOCK_SEQPACKET Unix socket with the same commands:
 * a connection stands for one open file of the device. A request is one
 * message: struct gpuslot_wire (@cmd the ioctl's command number,
 * _IOC_NR(GPUSLOT_IOC_*); @size the bytes that follow) and the command's
 * struct, as the ioctl takes it. GET_LAYOUT and SET_LAYOUT carry their
 * partitions after the struct instead of behind a pointer. The reply is one
 * message: struct gpuslot_wire with @error 0 or a positive errno, and the
 * struct as the ioctl writes it back (and GET_LAYOUT's partitions). An
 * untimed or timed ACQUIRE is answered when it is granted or fails; an
 * ACQUIRE_ASYNC grant is announced by a message with @cmd
 * GPUSLOT_WIRE_GRANTED and no struct, which makes the socket readable; it
 * comes again after each reply while the grant waits for its COMPLETE. An
 * ACQUIRE_ASYNC granted at once is answered with the __u32
 * GPUSLOT_WIRE_GRANTED instead of a struct, and announced right after.
 * @tid names the calling thread (for the boost); gpuslotd checks that it
 * belongs to the peer process. @seq, chosen by the caller, comes back in
 * the reply, so that threads sharing a connection (as threads share an
 * open file) each get their own answer; announcements carry 0.
 */
#define GPUSLOT_WIRE_MAGIC	0x67736c32	/* "gsl2": API 2 */
/*
 * The magic of API 1 ("gsl1"). A gsl2 server answers a gsl1 request with
 * one gsl1 header whose @error is EPROTONOSUPPORT, logs which protocols
 * met, and closes; a gsl1 server closes at a gsl2 request. Either way the
 * library names what to upgrade.
 */
#define GPUSLOT_WIRE_MAGIC_V1	0x67736c31	/* "gsl1": API 1 */
#define GPUSLOT_WIRE_GRANTED	0xff

/*
 * The socket's counterpart of sysfs (/sys/class/gpuslot/gpu<N>/), debugfs
 * (gpuslot/gpu<N>/ under /sys/kernel/debug) and fdinfo: a request with
 * @cmd GPUSLOT_WIRE_ATTR_READ carries an attribute's name, the file's path
 * relative to the domain's sysfs directory ("k", "slot3/units",
 * "stats/acquisitions"), "debug/<name>" for a debugfs table, or "fdinfo"
 * for this connection's own fdinfo lines; one with GPUSLOT_WIRE_ATTR_WRITE
 * carries the name, a NUL, and the text to store. The reply carries the
 * text exactly as the file shows it (empty for a write). Errors as the
 * files give them: ENOENT no such attribute; EACCES a write to a read-only
 * one, a read of debug/ (root-only in debugfs) or a write by a peer that
 * was no admin when it connected (the file mode); EPERM a write by a peer
 * that is no admin now (capable() at the write), or a read of debug/ by
 * root without CAP_SYS_ADMIN; EINVAL a bad value.
 * One-value attributes and writes fit GPUSLOT_WIRE_ATTR_MAX; a debug/
 * table's reply is as long as the table, up to GPUSLOT_WIRE_TABLE_MAX.
 */
#define GPUSLOT_WIRE_ATTR_READ	0xf0
#define GPUSLOT_WIRE_ATTR_WRITE	0xf1
#define GPUSLOT_WIRE_ATTR_MAX	4096	/* a sysfs page */
#define GPUSLOT_WIRE_TABLE_MAX	(1u << 20)

/*
 * A request with @cmd GPUSLOT_WIRE_CLIENT_TOKEN carries a __u64, not 0:
 * the client's token for this connection, set once (EBUSY after; EINVAL
 * for 0 or another size). A slot granted to the connection is recorded in
 * gpuslotd's state file with it, and after a restart of gpuslotd the hold
 * it left is reclaimed only by a connection of the same process (pid and
 * start time) with the same token: not by another client of that process.
 * libgpuslot sets a random token per lane (an open file of its own) and
 * sends it again when the lane reconnects. A connection without a token
 * reclaims only holds recorded without one. A gpuslotd before it answers
 * ENOTTY, which the library ignores.
 */
#define GPUSLOT_WIRE_CLIENT_TOKEN	0xf2

/*
 * A request with @cmd GPUSLOT_WIRE_WORK_STATE carries a __u32, 0 (EINVAL
 * otherwise): it asks for the domain's work state (struct
 * gpuslot_work_state, <linux/gpuslot.h>). The reply carries no data and,
 * with @error 0, one file descriptor (SCM_RIGHTS): a memfd of
 * GPUSLOT_WORK_STATE_SIZE bytes, opened read-only and sealed
 * (F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_FUTURE_WRITE, F_SEAL_SEAL), which
 * only gpuslotd writes; map it with mmap(PROT_READ, MAP_SHARED). Any
 * connection may ask; once it has been sent the memfd, a further request
 * on it is EBUSY (so that a peer that never reads its socket holds at most
 * one memfd in flight per connection). An answer gpuslotd cannot send ends
 * a connection that holds and waits for nothing. Each gpuslotd has its
 * own: after a restart, ask the new one. A gpuslotd before it answers
 * ENOTTY (the __u32 makes an old one read it as a command's struct).
 *
 * The holder's reports travel as the ioctl's: @cmd
 * _IOC_NR(GPUSLOT_IOC_SET_WORK) with struct gpuslot_set_work, answered
 * without a struct (EPERM from a connection that holds no completed slot).
 */
#define GPUSLOT_WIRE_WORK_STATE	0xf3

struct gpuslot_wire {
	__u32 magic;
	__u32 cmd;
	__s32 error;
	__u32 size;
	__s32 tid;
	__u32 seq;
};

#endif /* GPUSLOT_WIRE_H */
