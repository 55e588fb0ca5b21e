// SPDX-License-Identifier: LGPL-2.1-or-later
#include "lock_file.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <linux/gpuslot.h>
#include <gpuslot_wire.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <vector>

namespace gpuslot {
namespace {

class DeviceFile : public LockFile {
public:
	DeviceFile(int fd, unsigned int domain, std::string sysfs_root)
		: fd_(fd), domain_(domain), sysfs_root_(std::move(sysfs_root))
	{
	}
	~DeviceFile() override { ::close(fd_); }
	int fd() const override { return fd_; }
	int call(unsigned long cmd, void *arg) override
	{
		if (int err = ioctl(fd_, cmd, arg) ? errno : 0)
			return err;
		if (cmd == GPUSLOT_IOC_ATTACH)
			domain_ = static_cast<gpuslot_attach *>(arg)->domain;
		return 0;
	}

	int read_attr(const std::string &name, std::string *text) override
	{
		if (name == "fdinfo")
			return read_fdinfo(text);
		int f = ::open(path(name).c_str(), O_RDONLY | O_CLOEXEC);
		if (f < 0)
			return errno;
		std::string t;
		char buf[4096];
		ssize_t n;
		while ((n = ::read(f, buf, sizeof(buf))) > 0)
			t.append(buf, size_t(n));
		const int err = n < 0 ? errno : 0;
		::close(f);
		if (!err)
			*text = std::move(t);
		return err;
	}

	int write_attr(const std::string &name, const std::string &text) override
	{
		int f = ::open(path(name).c_str(), O_WRONLY | O_CLOEXEC);
		if (f < 0)
			return errno;
		const ssize_t n = ::write(f, text.data(), text.size());
		const int err = n < 0 ? errno : size_t(n) == text.size() ? 0 : EIO;
		::close(f);
		return err;
	}

	int map_work_state(void *at, void **out) override
	{
		// A module before it has no mmap (ENODEV) or refuses this one.
		const int err = map_work_state_page(fd_, at, out);
		return err == ENODEV || err == EINVAL || err == ENOTTY ? EOPNOTSUPP : err;
	}

private:
	// sysfs for the one-value files, debugfs for the tables.
	std::string path(const std::string &name) const
	{
		const std::string dir = "/gpu" + std::to_string(domain_) + "/";
		if (name.rfind("debug/", 0) == 0)
			return "/sys/kernel/debug/gpuslot" + dir + name.substr(6);
		return sysfs_root_ + dir + name;
	}

	// This file's own lines of its fdinfo: those the module adds.
	int read_fdinfo(std::string *text) const
	{
		std::string all;
		char buf[4096];
		const int f = ::open(("/proc/self/fdinfo/" + std::to_string(fd_)).c_str(),
				     O_RDONLY | O_CLOEXEC);
		if (f < 0)
			return errno;
		ssize_t n;
		while ((n = ::read(f, buf, sizeof(buf))) > 0)
			all.append(buf, size_t(n));
		const int err = n < 0 ? errno : 0;
		::close(f);
		if (err)
			return err;
		std::string mine;
		for (size_t at = 0; at < all.size();) {
			size_t end = all.find('\n', at);
			end = end == std::string::npos ? all.size() : end + 1;
			if (all.compare(at, 8, "gpuslot-") == 0)
				mine.append(all, at, end - at);
			at = end;
		}
		*text = std::move(mine);
		return 0;
	}

	int fd_;
	unsigned int domain_;
	std::string sysfs_root_;
};

// The commands of API 2, and VERSION at API 1's number (what every module
// answers), by their whole numbers.
bool known_command(unsigned long cmd)
{
	static const unsigned long known[] = {
		GPUSLOT_IOC_VERSION,	    GPUSLOT_IOC_ATTACH,		   GPUSLOT_IOC_ACQUIRE,
		GPUSLOT_IOC_RELEASE,	    GPUSLOT_IOC_SET_K,		   GPUSLOT_IOC_DOMAIN_INFO,
		GPUSLOT_IOC_GET_STATS,	    GPUSLOT_IOC_RESERVE_QUEUES,	   GPUSLOT_IOC_UNRESERVE_QUEUES,
		GPUSLOT_IOC_SET_LAYOUT,	    GPUSLOT_IOC_GET_LAYOUT,	   GPUSLOT_IOC_ACQUIRE_ASYNC,
		GPUSLOT_IOC_ACQUIRE_COMPLETE, GPUSLOT_IOC_ACQUIRE_CANCEL, GPUSLOT_IOC_VERSION_LEGACY,
		GPUSLOT_IOC_SET_WORK};
	return std::find(std::begin(known), std::end(known), cmd) != std::end(known);
}

} // namespace

// Asked once per thread (it is a system call); a forked child asks again
// (its one thread has an id of its own).
static thread_local int32_t cached_tid;

int32_t this_thread_id()
{
	static std::once_flag atfork;
	std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, [] { cached_tid = 0; }); });
	if (!cached_tid)
		cached_tid = int32_t(syscall(SYS_gettid));
	return cached_tid;
}

namespace {

// One connection to gpuslotd. Threads may share it as they share an open
// file of the device: each request carries a sequence number that its
// reply echoes, one caller at a time reads the socket (the reader) and
// hands the others their replies.

// This process's CLOCK_MONOTONIC offset from the host's, in ns: nonzero
// inside a time namespace (time_namespaces(7)); 0 where it cannot be read
// (no time namespaces: the host's clock).
int64_t monotonic_offset_ns()
{
	FILE *f = std::fopen("/proc/self/timens_offsets", "re");
	if (!f)
		return 0;
	char clock[32];
	long long sec, nsec;
	int64_t offset = 0;
	while (std::fscanf(f, "%31s %lld %lld", clock, &sec, &nsec) == 3)
		if (!std::strcmp(clock, "monotonic"))
			offset = int64_t(sec) * 1000000000 + nsec;
	std::fclose(f);
	return offset;
}

// A deadline is CLOCK_MONOTONIC as the caller reads it, in its own time
// namespace, as the module reads it (kmod/compat.h); gpuslotd reads its
// own. The message of a timed ACQUIRE or RESERVE_QUEUES @cmd (@s, @size
// bytes) gets the host's: the offset is the caller's own to know, and a
// wrong one only moves its own deadline. Read for each timed call: setns()
// can move a single-threaded process to another namespace. A deadline
// before the host's boot is long past: 1.
void host_deadline(unsigned long cmd, char *s, uint32_t size)
{
	uint32_t flags;
	uint64_t deadline;
	if (size < 16)
		return;
	std::memcpy(&flags, s + 4, sizeof(flags));
	if (!((cmd == GPUSLOT_IOC_ACQUIRE && flags & GPUSLOT_ACQUIRE_DEADLINE) ||
	      (cmd == GPUSLOT_IOC_RESERVE_QUEUES && flags & GPUSLOT_RESERVE_DEADLINE)))
		return;
	static_assert(offsetof(gpuslot_acquire, deadline_ns) == 8 &&
		      offsetof(gpuslot_reserve_queues, deadline_ns) == 8);
	std::memcpy(&deadline, s + 8, sizeof(deadline));
	const int64_t offset = monotonic_offset_ns();
	if (!offset || deadline == UINT64_MAX)
		return;
	if (offset > 0)
		deadline = deadline > uint64_t(offset) ? deadline - uint64_t(offset) : 1;
	else
		deadline = deadline > UINT64_MAX - uint64_t(-offset) ? UINT64_MAX : deadline + uint64_t(-offset);
	std::memcpy(s + 8, &deadline, sizeof(deadline));
}

class SocketFile : public LockFile {
public:
	explicit SocketFile(int fd) : fd_(fd) {}
	~SocketFile() override { ::close(fd_); }
	int fd() const override { return fd_; }

	int call(unsigned long cmd, void *arg) override
	{
		return call_for(this_thread_id(), cmd, arg);
	}

	bool gone() override
	{
		{
			std::lock_guard<std::mutex> guard(lock_);
			if (broken_)
				return true;
		}
		// A grant's announcement is POLLIN only: no hang-up.
		return peer_hung_up(fd_);
	}

	int call_for(int32_t tid, unsigned long cmd, void *arg) override
	{
		// What the module's dispatcher refuses before it reads anything:
		// a command it does not know (this library knows the uapi's),
		// by its whole number, as the module matches it.
		if (!known_command(cmd))
			return ENOTTY;
		if (!arg)
			return EFAULT;
		uint32_t size;
		std::memcpy(&size, arg, sizeof(size));
		if (size > GPUSLOT_MAX_STRUCT_SIZE)
			return E2BIG;
		// At least the size field goes, which gpuslotd checks as the
		// module does.
		const uint32_t sent = std::max<uint32_t>(size, sizeof(size));
		const bool layout = cmd == GPUSLOT_IOC_SET_LAYOUT || cmd == GPUSLOT_IOC_GET_LAYOUT;
		gpuslot_layout *l = layout ? static_cast<gpuslot_layout *>(arg) : nullptr;
		if (layout && size < GPUSLOT_LAYOUT_SIZE_VER0)
			return EINVAL;
		size_t tail = 0;
		if (cmd == GPUSLOT_IOC_SET_LAYOUT) {
			if (l->nr_partitions > GPUSLOT_MAX_SLOTS)
				return EINVAL;
			tail = l->nr_partitions * sizeof(gpuslot_partition);
		}
		// Sized once: GCC 14 (Debian 13) sees no bound on a resize() by
		// the tail and fails the build with -Wstringop-overflow.
		std::vector<char> msg(sizeof(gpuslot_wire) + sent + tail);
		if (tail) // no partitions may come with a null pointer
			std::memcpy(msg.data() + sizeof(gpuslot_wire) + size,
				    reinterpret_cast<const void *>(uintptr_t(l->partitions)), tail);
		std::memcpy(msg.data() + sizeof(gpuslot_wire), arg, std::min<uint32_t>(size, sent));
		host_deadline(cmd, msg.data() + sizeof(gpuslot_wire), size);
		std::vector<char> reply;
		if (int err = exchange(_IOC_NR(cmd), &msg, &reply, tid))
			return err;
		gpuslot_wire h;
		std::memcpy(&h, reply.data(), sizeof(h));
		const char *data = reply.data() + sizeof(h);
		if (cmd == GPUSLOT_IOC_ACQUIRE_ASYNC) {
			// Nothing is copied back, as from the device; a grant made
			// at once makes the file readable before the call returns.
			uint32_t now = 0;
			if (h.size == sizeof(now))
				std::memcpy(&now, data, sizeof(now));
			if (!h.error && now == GPUSLOT_WIRE_GRANTED) {
				pollfd p{fd_, POLLIN, 0};
				while (poll(&p, 1, -1) < 0 && errno == EINTR)
					;
			}
			return h.error;
		}
		uint32_t got = std::min<uint32_t>(h.size, size);
		if (l && h.size > size) {
			// GET_LAYOUT's partitions follow the struct.
			got = size;
			const size_t parts = (h.size - size) / sizeof(gpuslot_partition);
			const size_t room = std::min<size_t>(parts, l->nr_partitions);
			std::memcpy(reinterpret_cast<void *>(uintptr_t(l->partitions)), data + size,
				    room * sizeof(gpuslot_partition));
		}
		// The size field stays the caller's.
		if (got > sizeof(uint32_t))
			std::memcpy(static_cast<char *>(arg) + sizeof(uint32_t), data + sizeof(uint32_t),
				    got - sizeof(uint32_t));
		return h.error;
	}

	int read_attr(const std::string &name, std::string *text) override
	{
		return attr(GPUSLOT_WIRE_ATTR_READ, name, text);
	}

	int write_attr(const std::string &name, const std::string &text) override
	{
		std::string ignored;
		return attr(GPUSLOT_WIRE_ATTR_WRITE, name + '\0' + text, &ignored);
	}

	int set_client_token(uint64_t token) override
	{
		std::vector<char> msg(sizeof(gpuslot_wire) + sizeof(token)), reply;
		std::memcpy(msg.data() + sizeof(gpuslot_wire), &token, sizeof(token));
		if (int err = exchange(GPUSLOT_WIRE_CLIENT_TOKEN, &msg, &reply))
			return err;
		gpuslot_wire h;
		std::memcpy(&h, reply.data(), sizeof(h));
		return h.error;
	}

private:
	int attr(uint32_t cmd, const std::string &payload, std::string *text)
	{
		if (payload.size() > 2 * GPUSLOT_WIRE_ATTR_MAX + 1)
			return EINVAL;
		std::vector<char> msg(sizeof(gpuslot_wire) + payload.size()), reply;
		std::memcpy(msg.data() + sizeof(gpuslot_wire), payload.data(), payload.size());
		if (int err = exchange(cmd, &msg, &reply))
			return err;
		gpuslot_wire h;
		std::memcpy(&h, reply.data(), sizeof(h));
		if (!h.error)
			text->assign(reply.data() + sizeof(h), h.size);
		return h.error;
	}

	// Send @msg (its header is filled in here) as command @cmd and wait
	// for its reply: 0 with *reply (header and data; the command's own
	// error in the header), or the errno of the connection.
	int exchange(uint32_t cmd, std::vector<char> *msg, std::vector<char> *reply,
		     int32_t tid = this_thread_id())
	{
		std::unique_lock<std::mutex> guard(lock_);
		if (broken_)
			return ECONNRESET;
		const uint32_t seq = next_seq();
		gpuslot_wire h{};
		h.magic = GPUSLOT_WIRE_MAGIC;
		h.cmd = cmd;
		h.size = uint32_t(msg->size() - sizeof(h));
		h.tid = tid;
		h.seq = seq;
		std::memcpy(msg->data(), &h, sizeof(h));
		if (send(fd_, msg->data(), msg->size(), MSG_NOSIGNAL) < 0)
			return errno == EPIPE ? ECONNRESET : errno;
		bool cancelled = false;
		for (;;) {
			if (auto it = replies_.find(seq); it != replies_.end()) {
				*reply = std::move(it->second);
				replies_.erase(it);
				return 0;
			}
			if (broken_)
				return ECONNRESET;
			if (reading_) {
				replied_.wait(guard);
				continue;
			}
			// Read one message for whoever waits for it.
			reading_ = true;
			guard.unlock();
			char *in = in_.get(); // the reader's alone
			// No request of this file asks for a descriptor (the
			// work state's memfd comes over a connection of its
			// own): any that comes is closed. Room for the sender's
			// credentials too, which come first (SO_PASSCRED is on).
			alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) +
						      CMSG_SPACE(4 * sizeof(int))];
			iovec iov{in, kReceiveMax};
			msghdr mh{};
			mh.msg_iov = &iov;
			mh.msg_iovlen = 1;
			mh.msg_control = control;
			mh.msg_controllen = sizeof(control);
			ssize_t n = recvmsg(fd_, &mh, MSG_CMSG_CLOEXEC);
			const int err = n < 0 ? errno : 0;
			if (n > 0)
				close_passed_fds(&mh);
			guard.lock();
			reading_ = false;
			replied_.notify_all();
			if (n < 0 && err == EINTR && cmd == _IOC_NR(GPUSLOT_IOC_ACQUIRE) &&
			    !cancelled) {
				// A signal: leave the queue, as the module's wait
				// does; a grant that raced with it wins. Its answer
				// (EINTR, or the grant) is still this call's.
				cancelled = true;
				if (int e = send_cancel())
					return e;
				continue;
			}
			if (n < 0 && (err == EINTR || err == EAGAIN))
				continue;
			gpuslot_wire r;
			if (n > 0 && size_t(n) >= sizeof(r))
				std::memcpy(&r, in, sizeof(r));
			if (n <= 0 || size_t(n) < sizeof(r) || r.magic != GPUSLOT_WIRE_MAGIC ||
			    r.size != size_t(n) - sizeof(r)) {
				// Gone (a restart), an older gpuslotd or not
				// gpuslotd: every caller learns it.
				broken_ = true;
				old_wire_ = n > 0 && size_t(n) >= sizeof(r) &&
					    r.magic == GPUSLOT_WIRE_MAGIC_V1;
				replied_.notify_all();
				return n <= 0 ? ECONNRESET : EPROTO;
			}
			// Grants are announced for poll(); cancels answer nobody.
			if (r.cmd == GPUSLOT_WIRE_GRANTED || ignored_.erase(r.seq))
				continue;
			replies_[r.seq].assign(in, in + n);
		}
	}

	uint32_t next_seq()
	{
		if (!++seq_)
			++seq_; // 0 is for announcements
		return seq_;
	}

	// Under lock_.
	int send_cancel()
	{
		struct {
			gpuslot_wire h;
			gpuslot_release r;
		} m{};
		m.h.magic = GPUSLOT_WIRE_MAGIC;
		m.h.cmd = _IOC_NR(GPUSLOT_IOC_ACQUIRE_CANCEL);
		m.h.size = sizeof(m.r);
		m.h.tid = this_thread_id();
		m.h.seq = next_seq();
		m.r.size = sizeof(m.r);
		ignored_.insert(m.h.seq);
		return send(fd_, &m, sizeof(m), MSG_NOSIGNAL) < 0 ? ECONNRESET : 0;
	}

public:
	// The server answered in gsl1, API 1's protocol.
	bool old_wire()
	{
		std::lock_guard<std::mutex> guard(lock_);
		return old_wire_;
	}

private:
	int fd_;
	std::mutex lock_;
	std::condition_variable replied_;
	bool reading_ = false, broken_ = false, old_wire_ = false;
	uint32_t seq_ = 0;
	std::map<uint32_t, std::vector<char>> replies_; // by sequence number
	std::set<uint32_t> ignored_;			 // our own cancels
	// What the reader receives into, the largest message there is: a
	// debug/ table. Not written until used, so the pages past the first
	// cost nothing until such a table comes.
	static constexpr size_t kReceiveMax =
		sizeof(gpuslot_wire) +
		std::max<size_t>(GPUSLOT_WIRE_TABLE_MAX,
				 GPUSLOT_MAX_STRUCT_SIZE + GPUSLOT_MAX_SLOTS * sizeof(gpuslot_partition));
	std::unique_ptr<char[]> in_ = std::make_unique_for_overwrite<char[]>(kReceiveMax);
};

} // namespace

bool peer_hung_up(int fd)
{
	pollfd p{fd, POLLRDHUP, 0};
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

void close_passed_fds(msghdr *mh)
{
	for (cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		const size_t nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfds; i++) {
			int f;
			std::memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(f));
			::close(f);
		}
	}
}

std::string socket_path(const std::string &dir, unsigned int domain)
{
	return dir + "/gpu" + std::to_string(domain) + ".sock";
}

int map_work_state_page(int fd, void *at, void **out)
{
	void *p = mmap(at, GPUSLOT_WORK_STATE_SIZE, PROT_READ, MAP_SHARED | (at ? MAP_FIXED : 0), fd,
		       0);
	if (p == MAP_FAILED)
		return errno;
	*out = p;
	return 0;
}

int open_lock_file(Transport transport, const std::string &where, unsigned int domain,
		   std::unique_ptr<LockFile> *out, std::string *error, const std::string &sysfs_root)
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
		auto file = std::make_unique<DeviceFile>(f, domain, sysfs_root);
		// Which API the module speaks, before any command of ours.
		VersionAnswer answer;
		gpuslot_version v{};
		v.size = sizeof(v);
		answer.error = file->call(GPUSLOT_IOC_VERSION, &v);
		answer.api_version = v.api_version;
		if (answer.error == ENOTTY) {
			gpuslot_version old{};
			old.size = sizeof(old);
			answer.legacy_error = file->call(GPUSLOT_IOC_VERSION_LEGACY, &old);
			answer.api_version = old.api_version;
		}
		if (int err = judge_version(transport, answer, error)) {
			*error = where + ": " + *error;
			return err;
		}
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
	// Each message carries our credentials, so that gpuslotd knows the
	// caller (a forked child sharing the connection is one of its own).
	const int on = 1;
	setsockopt(f, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on));
	// A signal interrupts a sleeping ACQUIRE, as the module's EINTR does,
	// even under SA_RESTART: with a receive timeout set, recv() is never
	// restarted (signal(7)). The timeout itself only makes us wait again.
	const timeval wake{3600, 0};
	setsockopt(f, SOL_SOCKET, SO_RCVTIMEO, &wake, sizeof(wake));
	auto file = std::make_unique<SocketFile>(f);
	// Which API gpuslotd speaks: an older one closes the connection at
	// our first message (gsl1 cannot parse gsl2), or answers in gsl1.
	VersionAnswer answer;
	gpuslot_version v{};
	v.size = sizeof(v);
	answer.error = file->call(GPUSLOT_IOC_VERSION, &v);
	answer.api_version = v.api_version;
	answer.old_wire = file->old_wire();
	if (int err = judge_version(transport, answer, error)) {
		*error = path + ": " + *error;
		return err;
	}
	*out = std::move(file);
	return 0;
}

bool attribute_name_ok(const std::string &name)
{
	const size_t slash = name.find('/');
	auto word = [&](size_t from, size_t to) {
		return to > from && std::all_of(name.begin() + long(from), name.begin() + long(to),
						[](char ch) {
							return std::isalnum(static_cast<unsigned char>(ch)) ||
							       ch == '_';
						});
	};
	if (slash == std::string::npos)
		return word(0, name.size());
	return word(0, slash) && word(slash + 1, name.size());
}

int judge_version(Transport transport, const VersionAnswer &a, std::string *error)
{
	const std::string ours = " this libgpuslot needs API " + std::to_string(GPUSLOT_API_VERSION);
	const std::string upgrade = " (gsl2): upgrade gpuslotd (the gpuslot package) to 2.x or "
				    "later, or use the libgpuslot that came with it";
	if (transport == Transport::socket) {
		if (a.old_wire || (!a.error && a.api_version < GPUSLOT_API_VERSION)) {
			*error = "gpuslotd speaks " +
				 (a.old_wire ? std::string("the socket protocol gsl1 (API 1)")
					     : "API " + std::to_string(a.api_version)) +
				 ";" + ours + upgrade;
			return -EPROTONOSUPPORT;
		}
		if (a.error == ECONNRESET) {
			// What a gpuslotd 1.x does with a gsl2 message, and what
			// any gpuslotd does with a connection over its limits:
			// both close it, so say both.
			*error = "gpuslotd closed the connection at its first request: it refused the "
				 "connection (too many of this user's, or it is out of descriptors: "
				 "see its log), or it speaks an older socket protocol (gsl1, API 1) "
				 "that cannot read this libgpuslot's; this libgpuslot needs API 2" +
				 upgrade;
			return -ECONNRESET;
		}
		if (a.error) {
			*error = std::string("VERSION: ") + strerror(a.error);
			return -a.error;
		}
		return 0;
	}
	uint32_t api = a.api_version;
	if (a.error == ENOTTY) {
		if (a.legacy_error) {
			*error = std::string("answers neither VERSION nor API 1's VERSION (") +
				 strerror(a.legacy_error) + "): not a gpuslot device";
			return -ENOTTY;
		}
		api = api ? api : 1;
	} else if (a.error) {
		*error = std::string("VERSION: ") + strerror(a.error);
		return -a.error;
	}
	if (api < GPUSLOT_API_VERSION) {
		*error = "the gpuslot module speaks API " + std::to_string(api) + ";" + ours +
			 ": upgrade the gpuslot kernel module (gpuslot-dkms) to 2.x or later, or "
			 "stop it (rmmod gpuslot) so that gpuslotd serves the socket transport";
		return -EPROTONOSUPPORT;
	}
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
