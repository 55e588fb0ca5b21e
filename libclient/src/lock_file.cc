// SPDX-License-Identifier: LGPL-2.1-or-later
#include "lock_file.hpp"

#include <fcntl.h>
#include <linux/gpuslot.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace gpuslot {
namespace {

class DeviceFile : public LockFile {
public:
	explicit DeviceFile(int fd) : fd_(fd) {}
	~DeviceFile() override { ::close(fd_); }
	int fd() const override { return fd_; }
	int call(unsigned long cmd, void *arg) override
	{
		return ioctl(fd_, cmd, arg) ? errno : 0;
	}

private:
	int fd_;
};

// One connection to gpuslotd. Calls on one file come from one thread at a
// time (the client's lane discipline), as on the device.
class SocketFile : public LockFile {
public:
	explicit SocketFile(int fd) : fd_(fd) {}
	~SocketFile() override { ::close(fd_); }
	int fd() const override { return fd_; }

	int call(unsigned long cmd, void *arg) override
	{
		const uint32_t nr = _IOC_NR(cmd);
		uint32_t size;
		std::memcpy(&size, arg, sizeof(size));
		if (size > GPUSLOT_MAX_STRUCT_SIZE)
			return E2BIG;
		std::vector<char> msg(sizeof(gpuslot_wire) + size);
		const bool layout = cmd == GPUSLOT_IOC_SET_LAYOUT || cmd == GPUSLOT_IOC_GET_LAYOUT;
		gpuslot_layout *l = layout ? static_cast<gpuslot_layout *>(arg) : nullptr;
		if (layout && size < GPUSLOT_LAYOUT_SIZE_VER0)
			return EINVAL;
		if (cmd == GPUSLOT_IOC_SET_LAYOUT) {
			if (l->nr_partitions > GPUSLOT_MAX_SLOTS)
				return EINVAL;
			const size_t tail = l->nr_partitions * sizeof(gpuslot_partition);
			msg.resize(msg.size() + tail);
			std::memcpy(msg.data() + sizeof(gpuslot_wire) + size,
				    reinterpret_cast<const void *>(uintptr_t(l->partitions)), tail);
		}
		gpuslot_wire h{};
		h.magic = GPUSLOT_WIRE_MAGIC;
		h.cmd = nr;
		h.size = uint32_t(msg.size() - sizeof(h));
		h.tid = int32_t(syscall(SYS_gettid));
		std::memcpy(msg.data(), &h, sizeof(h));
		std::memcpy(msg.data() + sizeof(h), arg, size);
		if (send(fd_, msg.data(), msg.size(), MSG_NOSIGNAL) < 0)
			return errno == EPIPE ? ECONNRESET : errno;
		return receive(nr, arg, size, l);
	}

private:
	// The reply to command @nr; announcements of grants are skipped.
	int receive(uint32_t nr, void *arg, uint32_t size, gpuslot_layout *l)
	{
		std::vector<char> buf(sizeof(gpuslot_wire) + GPUSLOT_MAX_STRUCT_SIZE +
				      GPUSLOT_MAX_SLOTS * sizeof(gpuslot_partition));
		bool cancelled = false;
		int result = -1;
		for (;;) {
			ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
			if (n < 0 && errno == EINTR && nr == _IOC_NR(GPUSLOT_IOC_ACQUIRE) &&
			    !cancelled) {
				// A signal: leave the queue, as the module's wait
				// does; a grant that raced with it wins.
				cancelled = true;
				if (int err = send_cancel())
					return err;
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return ECONNRESET;
			gpuslot_wire h;
			if (size_t(n) < sizeof(h))
				return EPROTO;
			std::memcpy(&h, buf.data(), sizeof(h));
			if (h.magic != GPUSLOT_WIRE_MAGIC || h.size != size_t(n) - sizeof(h))
				return EPROTO;
			if (h.cmd == GPUSLOT_WIRE_GRANTED)
				continue;
			if (cancelled && h.cmd == _IOC_NR(GPUSLOT_IOC_ACQUIRE_CANCEL)) {
				if (result >= 0)
					return result;
				continue;
			}
			if (h.cmd != nr)
				return EPROTO;
			const char *data = buf.data() + sizeof(h);
			uint32_t got = std::min<uint32_t>(h.size, size);
			if (l && h.size > size) {
				// GET_LAYOUT's partitions follow the struct.
				got = size;
				const size_t parts = (h.size - size) / sizeof(gpuslot_partition);
				const size_t room = std::min<size_t>(parts, l->nr_partitions);
				std::memcpy(reinterpret_cast<void *>(uintptr_t(l->partitions)),
					    data + size, room * sizeof(gpuslot_partition));
			}
			// The size field stays the caller's.
			if (got > sizeof(uint32_t))
				std::memcpy(static_cast<char *>(arg) + sizeof(uint32_t),
					    data + sizeof(uint32_t), got - sizeof(uint32_t));
			if (!cancelled)
				return h.error;
			result = h.error;
		}
	}

	int send_cancel()
	{
		struct {
			gpuslot_wire h;
			gpuslot_release r;
		} m{};
		m.h.magic = GPUSLOT_WIRE_MAGIC;
		m.h.cmd = _IOC_NR(GPUSLOT_IOC_ACQUIRE_CANCEL);
		m.h.size = sizeof(m.r);
		m.h.tid = int32_t(syscall(SYS_gettid));
		m.r.size = sizeof(m.r);
		return send(fd_, &m, sizeof(m), MSG_NOSIGNAL) < 0 ? ECONNRESET : 0;
	}

	int fd_;
};

std::string socket_path(const std::string &dir, unsigned int domain)
{
	return dir + "/gpu" + std::to_string(domain) + ".sock";
}

} // namespace

int open_lock_file(Transport transport, const std::string &where, unsigned int domain,
		   std::unique_ptr<LockFile> *out, std::string *error)
{
	if (transport == Transport::device) {
		int f = ::open(where.c_str(), O_RDWR | O_CLOEXEC);
		if (f < 0) {
			int err = errno;
			*error = where + ": " + strerror(err) +
				 (err == ENOENT	  ? " (load the gpuslot module, or start gpuslotd "
						    "for its socket transport)"
				  : err == EACCES ? " (join the gpuslot group)"
						  : "");
			return -err;
		}
		auto file = std::make_unique<DeviceFile>(f);
		gpuslot_attach a{};
		a.size = sizeof(a);
		a.domain = domain;
		if (int err = file->call(GPUSLOT_IOC_ATTACH, &a)) {
			*error = "no GPU domain " + std::to_string(domain) + ": " + strerror(err);
			return -err;
		}
		*out = std::move(file);
		return 0;
	}
	const std::string path = socket_path(where, domain);
	sockaddr_un addr{};
	addr.sun_family = AF_UNIX;
	if (path.size() >= sizeof(addr.sun_path)) {
		*error = path + ": too long for a Unix socket";
		return -ENAMETOOLONG;
	}
	strcpy(addr.sun_path, path.c_str());
	int f = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (f < 0) {
		*error = std::string("socket: ") + strerror(errno);
		return -errno;
	}
	if (connect(f, reinterpret_cast<sockaddr *>(&addr), sizeof(addr))) {
		int err = errno;
		::close(f);
		struct stat st;
		const bool dir = stat(where.c_str(), &st) == 0;
		*error = path + ": " + strerror(err) +
			 (err == ENOENT && dir ? " (no GPU domain " + std::to_string(domain) +
							 " on gpuslotd's socket transport)"
			  : err == ENOENT    ? " (gpuslotd does not serve the socket transport)"
			  : err == EACCES    ? " (join the gpuslot group)"
					     : "");
		return -(err == ENOENT && dir ? EINVAL : err);
	}
	*out = std::make_unique<SocketFile>(f);
	return 0;
}

int choose_transport(const std::string &device, const std::string &socket_dir,
		     unsigned int domain, Transport *out, std::string *error)
{
	if (const char *forced = getenv("GPUSLOT_TRANSPORT"); forced && *forced) {
		if (!strcmp(forced, "device"))
			*out = Transport::device;
		else if (!strcmp(forced, "socket"))
			*out = Transport::socket;
		else {
			*error = std::string("GPUSLOT_TRANSPORT=") + forced +
				 ": use device or socket, or leave it unset";
			return -EINVAL;
		}
		return 0;
	}
	struct stat st;
	if (stat(device.c_str(), &st) == 0 ||
	    stat(socket_path(socket_dir, domain).c_str(), &st) != 0)
		*out = Transport::device;
	else
		*out = Transport::socket;
	return 0;
}

} // namespace gpuslot
