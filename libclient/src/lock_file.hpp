// SPDX-License-Identifier: LGPL-2.1-or-later
// One "open file" of a gpuslot lock, over either transport: the module's
// /dev/gpuslot (ioctl) or gpuslotd's socket (one connection per file, the
// same commands and structs as messages; see <linux/gpuslot.h>). The client
// calls the commands the same way on both.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

struct msghdr;

namespace gpuslot {

enum class Transport { device, socket };

class LockFile {
public:
	virtual ~LockFile() = default;
	// Pollable: readable when an asynchronous acquire was granted.
	virtual int fd() const = 0;
	// GPUSLOT_IOC_* on @arg, as ioctl(2) does it: 0 or a positive errno.
	// GET_LAYOUT/SET_LAYOUT's partitions go through their pointer.
	virtual int call(unsigned long cmd, void *arg) = 0;
	// call() for thread @tid of this process (the socket's boost goes to
	// the thread a request names): a hold taken back after a restart of
	// gpuslotd is its holder's, whichever thread takes it back. The
	// device boosts the caller: call().
	virtual int call_for(int32_t /*tid*/, unsigned long cmd, void *arg) { return call(cmd, arg); }
	// The connection ended (gpuslotd went away; its holds are kept for a
	// while, for their holders to take back). Never on the device.
	virtual bool gone() { return false; }
	// The attached domain's attribute @name with its file's text (on the
	// device: /sys/class/gpuslot/gpu<N>/<name>, debug/<t> in
	// /sys/kernel/debug/gpuslot/gpu<N>/<t>, fdinfo the gpuslot- lines of
	// this file's /proc/self/fdinfo; on the socket GPUSLOT_WIRE_ATTR_*):
	// 0 or a positive errno, as the files give them.
	virtual int read_attr(const std::string &name, std::string *text) = 0;
	virtual int write_attr(const std::string &name, const std::string &text) = 0;
	// The client's token for this file (GPUSLOT_WIRE_CLIENT_TOKEN): who may
	// reclaim its hold after gpuslotd restarts. The device needs none (a
	// hold there is its open file's): 0. 0 or a positive errno.
	virtual int set_client_token(uint64_t) { return 0; }
	// The device: the attached domain's work state (struct
	// gpuslot_work_state), the module's page of this file mapped PROT_READ,
	// MAP_SHARED, at @at with MAP_FIXED if @at is not null. 0 with *@out,
	// or a positive errno (EOPNOTSUPP: a module before it, or the socket,
	// whose memfd comes over a connection of its own: work_state.cc).
	virtual int map_work_state(void *, void **) { return EOPNOTSUPP; }
};

// Whether the peer of the socket @fd closed it (a poll, no wait).
bool peer_hung_up(int fd);

// Closes the descriptors that came with a received message (SCM_RIGHTS).
void close_passed_fds(msghdr *mh);

// Where gpuslotd serves @domain in the socket directory @dir.
std::string socket_path(const std::string &dir, unsigned int domain);

// The work state page of @fd (the device's file, or gpuslotd's memfd),
// read-only, shared, at @at with MAP_FIXED if not null: 0 with *@out, or
// a positive errno.
int map_work_state_page(int fd, void *at, void **out);

// A file of @domain: @where is the device (/dev/gpuslot) or the socket
// directory (/run/gpuslot); the device's attributes are under
// @sysfs_root. 0, or -errno with *error.
int open_lock_file(Transport transport, const std::string &where, unsigned int domain,
		   std::unique_ptr<LockFile> *out, std::string *error,
		   const std::string &sysfs_root = "/sys/class/gpuslot");

// The calling thread's id (gettid()), which a socket request names.
int32_t this_thread_id();

// @name is an attribute path: one or two words of [A-Za-z0-9_] joined by
// a '/' ("k", "slot3/units", "debug/holders"), nothing that leaves the
// domain's directory.
bool attribute_name_ok(const std::string &name);

// What the lock answered to VERSION when the file was opened.
struct VersionAnswer {
	int error = 0;        // of GPUSLOT_IOC_VERSION (ENOTTY: an API 1 module)
	int legacy_error = 0; // of GPUSLOT_IOC_VERSION_LEGACY, if asked
	uint32_t api_version = 0;
	// The socket: the server answered in gsl1 (API 1). One that closed the
	// connection at the first request (error ECONNRESET) is a gsl1 server
	// (which cannot parse gsl2) or one that refused the connection.
	bool old_wire = false;
};

// Whether this library may use a lock that answered @a: 0, or -errno with
// *error naming the lock's API, ours, and what to upgrade.
int judge_version(Transport transport, const VersionAnswer &a, std::string *error);

// The transport for @domain: GPUSLOT_TRANSPORT=device|socket if set (else
// -EINVAL), else the device when it exists, else the socket when gpuslotd
// serves one, else the device (whose absence the open then reports).
int choose_transport(const std::string &device, const std::string &socket_dir,
		     unsigned int domain, Transport *out, std::string *error);

} // namespace gpuslot
