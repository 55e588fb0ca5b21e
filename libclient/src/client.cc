// SPDX-License-Identifier: LGPL-2.1-or-later
// The C API of libgpuslot (gpuslot.h): a client over one open file of
// /dev/gpuslot, its layout, and a backend's streams.
#include <fcntl.h>
#include <linux/gpuslot.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend.hpp"
#include "cuda_backend.hpp"
#include "gpuslot.h"
#include "hip_backend.hpp"
#include "hqd_message.hpp"

namespace gpuslot {
namespace {

thread_local std::string last_error;

// Record what went wrong for gpuslot_last_error(); returns @code.
int fail(int code, std::string message)
{
	last_error = "gpuslot: " + std::move(message);
	return code;
}

int ioctl_errno(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? errno : 0;
}

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

} // namespace

// The module's queue budget through the client's file.
class ModuleBudget : public QueueBudget {
public:
	ModuleBudget(int fd, unsigned int domain, std::string sysfs_root, bool wait)
		: fd_(fd), domain_(domain), sysfs_root_(std::move(sysfs_root)), wait_(wait)
	{
	}

	int reserve(unsigned int count, std::string *error) override
	{
		gpuslot_reserve_queues r{};
		r.size = sizeof(r);
		r.count = count;
		r.flags = wait_ ? GPUSLOT_RESERVE_WAIT : 0;
		int err = ioctl_errno(fd_, GPUSLOT_IOC_RESERVE_QUEUES, &r);
		if (err == ENOSPC) {
			auto e = explain_hqd_exhausted(sysfs_root_,
						       "/sys/module/amdgpu/parameters/sched_policy",
						       domain_, count);
			*error = e.error ? "hardware queue budget exhausted (" + e.text + ")" : e.text;
		} else if (err) {
			*error = "reserving " + std::to_string(count) +
				 " hardware queues: " + strerror(err);
		}
		return -err;
	}

	void unreserve(unsigned int count) override
	{
		gpuslot_unreserve_queues u{};
		u.size = sizeof(u);
		u.count = count;
		ioctl_errno(fd_, GPUSLOT_IOC_UNRESERVE_QUEUES, &u);
	}

private:
	int fd_;
	unsigned int domain_;
	std::string sysfs_root_;
	bool wait_;
};

} // namespace gpuslot

using namespace gpuslot;

struct gpuslot_client {
	int fd = -1;
	pid_t owner = 0;
	unsigned int domain = 0;
	std::unique_ptr<ModuleBudget> budget;
	std::unique_ptr<Backend> backend;
	SlotLayout layout;
	std::vector<void *> streams;
	uint64_t rebuilds = 0;
	// Serialises acquire's rebuild against gpuslot_client_layout() readers.
	std::mutex lock;
};

namespace {

int read_layout(gpuslot_client *c, SlotLayout *out)
{
	std::vector<gpuslot_partition> parts(GPUSLOT_MAX_SLOTS);
	gpuslot_layout l{};
	l.size = sizeof(l);
	l.nr_partitions = parts.size();
	l.partitions = reinterpret_cast<uintptr_t>(parts.data());
	if (int err = ioctl_errno(c->fd, GPUSLOT_IOC_GET_LAYOUT, &l))
		return fail(-err, std::string("GET_LAYOUT: ") + strerror(err) +
					  (err == ENOTTY ? " (the loaded module predates "
							   "layouts: load the one built with "
							   "this library)"
							 : ""));
	SlotLayout s;
	s.k = l.k;
	s.unit_kind = l.unit_kind;
	s.nr_units = l.nr_units;
	s.unit_size = l.unit_size;
	s.generation = l.generation;
	const unsigned int words = (l.nr_units + 31) / 32;
	for (unsigned int slot = 0; slot < l.k; slot++) {
		std::vector<uint32_t> mask(words);
		bool any = false;
		for (unsigned int w = 0; w < words; w++) {
			mask[w] = uint32_t(parts[slot].units[w / 2] >> (32 * (w % 2)));
			any |= mask[w] != 0;
		}
		s.masks.push_back(any ? mask : std::vector<uint32_t>{});
	}
	*out = std::move(s);
	return 0;
}

bool in_child(const gpuslot_client *c)
{
	return getpid() != c->owner;
}

int child_error(const gpuslot_client *c)
{
	return fail(-ECHILD, "this client was opened by process " +
				     std::to_string(c->owner) +
				     "; a forked child opens its own with gpuslot_open()");
}

// Streams for @c->layout; the old ones are destroyed first.
int build_streams(gpuslot_client *c)
{
	std::string error;
	c->backend->destroy(&c->streams);
	if (int err = c->backend->build(c->layout, *c->budget, &c->streams, &error))
		return fail(err, "gpu" + std::to_string(c->domain) + ": " + error);
	return 0;
}

unsigned int slot_units(const SlotLayout &l, unsigned int slot)
{
	if (slot >= l.masks.size() || l.masks[slot].empty())
		return l.nr_units;
	unsigned int n = 0;
	for (uint32_t w : l.masks[slot])
		n += std::popcount(w);
	return n;
}

} // namespace

extern "C" int gpuslot_open(const struct gpuslot_options *opts, struct gpuslot_client **out)
{
	// The first published struct is the one this library was built with.
	constexpr size_t kSizeVer0 = sizeof(gpuslot_options);
	if (!opts || !out)
		return fail(-EINVAL, "gpuslot_open() needs options and a place for the client");
	if (opts->size < kSizeVer0)
		return fail(-EINVAL, "options.size is " + std::to_string(opts->size) +
					     ": set it to sizeof(struct gpuslot_options)");
	const char *extra = reinterpret_cast<const char *>(opts) + kSizeVer0;
	for (size_t i = 0; i < opts->size - kSizeVer0; i++)
		if (extra[i])
			return fail(-E2BIG, "options are from a newer libgpuslot");
	if (opts->__reserved || (opts->flags & ~GPUSLOT_OPEN_WAIT_QUEUES))
		return fail(-EINVAL, "unknown flags or a nonzero __reserved in options");
	if (opts->backend > GPUSLOT_BACKEND_CUDA)
		return fail(-EINVAL, "backend " + std::to_string(opts->backend) +
					     " is not one of AUTO, NONE, HIP, CUDA");

	auto c = std::make_unique<gpuslot_client>();
	const std::string device = opts->device ? opts->device : "/dev/gpuslot";
	const std::string sysfs = opts->sysfs_root ? opts->sysfs_root : "/sys/kernel/gpuslot";
	c->owner = getpid();
	c->domain = opts->domain;
	c->fd = open(device.c_str(), O_RDWR | O_CLOEXEC);
	if (c->fd < 0) {
		int err = errno;
		return fail(-err, device + ": " + strerror(err) +
					  (err == ENOENT ? " (load the gpuslot module)"
					   : err == EACCES ? " (join the gpuslot group)"
							   : ""));
	}
	gpuslot_attach a{};
	a.size = sizeof(a);
	a.domain = opts->domain;
	if (int err = ioctl_errno(c->fd, GPUSLOT_IOC_ATTACH, &a)) {
		int code = fail(-err, "no GPU domain " + std::to_string(opts->domain) +
					      ": " + strerror(err));
		close(c->fd);
		return code;
	}
	auto cleanup = [&](int code) {
		close(c->fd);
		return code;
	};
	if (int err = read_layout(c.get(), &c->layout))
		return cleanup(err);
	c->budget = std::make_unique<ModuleBudget>(c->fd, c->domain, sysfs,
						   opts->flags & GPUSLOT_OPEN_WAIT_QUEUES);

	uint32_t backend = opts->backend;
	if (backend == GPUSLOT_BACKEND_AUTO)
		backend = c->layout.unit_kind == GPUSLOT_UNIT_AMD_CU ? GPUSLOT_BACKEND_HIP
			  : c->layout.unit_kind == GPUSLOT_UNIT_NV_SM_GROUP
				  ? GPUSLOT_BACKEND_CUDA
				  : GPUSLOT_BACKEND_NONE;
	const int gpu = opts->gpu_index >= 0 ? opts->gpu_index : int(opts->domain);
	if (backend == GPUSLOT_BACKEND_CUDA) {
		CudaApi api;
		std::string error;
		if (!load_cuda(&api, &error))
			return cleanup(fail(-EOPNOTSUPP, error + "; use GPUSLOT_BACKEND_NONE "
								 "for CPU-side gating"));
		c->backend = std::make_unique<CudaBackend>(api, gpu);
	} else if (backend == GPUSLOT_BACKEND_HIP) {
		HipApi api;
		std::string error;
		if (!load_hip(&api, &error))
			return cleanup(fail(-ENODEV, error + "; use GPUSLOT_BACKEND_NONE "
							     "for CPU-side gating"));
		c->backend = make_hip_backend(api, gpu);
	} else {
		c->backend = make_none_backend();
	}
	if (int err = build_streams(c.get()))
		return cleanup(err);
	*out = c.release();
	return 0;
}

extern "C" void gpuslot_close(struct gpuslot_client *c)
{
	if (!c)
		return;
	// A forked child shares the parent's open file description: closing
	// its descriptor leaves the parent's slot and streams alone.
	if (!in_child(c))
		c->backend->destroy(&c->streams);
	close(c->fd);
	delete c;
}

extern "C" int gpuslot_acquire_slot(struct gpuslot_client *c, int64_t timeout_ns,
			       uint64_t allowed_mask, struct gpuslot_slot *slot)
{
	if (!c || !slot)
		return fail(-EINVAL, "gpuslot_acquire_slot() needs a client and a slot");
	if (in_child(c))
		return child_error(c);
	if (timeout_ns < GPUSLOT_WAIT_FOREVER)
		return fail(-EINVAL, "timeout_ns " + std::to_string(timeout_ns) +
					     ": use 0 (try), GPUSLOT_WAIT_FOREVER, or a positive timeout");
	const uint64_t deadline = timeout_ns > 0 ? now_ns() + uint64_t(timeout_ns) : 0;
	for (;;) {
		gpuslot_acquire a{};
		a.size = sizeof(a);
		a.allowed_mask = allowed_mask;
		if (timeout_ns == 0) {
			a.flags = GPUSLOT_ACQUIRE_TRY;
		} else if (timeout_ns > 0) {
			a.flags = GPUSLOT_ACQUIRE_TIMEOUT;
			uint64_t now = now_ns();
			a.timeout_ns = deadline > now ? deadline - now : 0;
		}
		if (int err = ioctl_errno(c->fd, GPUSLOT_IOC_ACQUIRE, &a)) {
			switch (err) {
			case EAGAIN: return fail(-err, "no slot free now");
			case ETIMEDOUT: return fail(-err, "no slot within the timeout");
			case EINTR: return fail(-err, "interrupted by a signal; nothing is held");
			case EDEADLK: return fail(-err, "this client already holds a slot: release it, "
						       "or open one client per thread");
			case EBUSY: return fail(-err, "another thread is acquiring on this client");
			case EINVAL: return fail(-err, "allowed_mask allows no slot below k");
			default: return fail(-err, std::string("ACQUIRE: ") + strerror(err));
			}
		}
		std::lock_guard<std::mutex> hold(c->lock);
		if (a.generation != c->layout.generation) {
			// gpuslotd re-planned: build streams for the new layout.
			SlotLayout fresh;
			int err = read_layout(c, &fresh);
			if (!err) {
				c->layout = std::move(fresh);
				err = build_streams(c);
				c->rebuilds++;
			}
			if (err || a.slot >= c->layout.k) {
				gpuslot_release r{};
				r.size = sizeof(r);
				ioctl_errno(c->fd, GPUSLOT_IOC_RELEASE, &r);
				if (err)
					return err;
				// k shrank after the grant: that slot is gone.
				continue;
			}
		}
		slot->index = a.slot;
		slot->generation = c->layout.generation;
		slot->units = slot_units(c->layout, a.slot);
		slot->stream = a.slot < c->streams.size() ? c->streams[a.slot] : nullptr;
		return 0;
	}
}

extern "C" int gpuslot_release_slot(struct gpuslot_client *c)
{
	if (!c)
		return fail(-EINVAL, "gpuslot_release_slot() needs a client");
	if (in_child(c))
		return child_error(c);
	gpuslot_release r{};
	r.size = sizeof(r);
	if (int err = ioctl_errno(c->fd, GPUSLOT_IOC_RELEASE, &r))
		return fail(-err, err == EPERM ? "this client holds no slot"
					       : std::string("RELEASE: ") + strerror(err));
	return 0;
}

extern "C" int gpuslot_client_layout(struct gpuslot_client *c, struct gpuslot_layout_info *out)
{
	if (!c || !out)
		return fail(-EINVAL, "gpuslot_client_layout() needs a client and a place for the layout");
	std::lock_guard<std::mutex> hold(c->lock);
	out->k = c->layout.k;
	out->unit_kind = c->layout.unit_kind;
	out->nr_units = c->layout.nr_units;
	out->hqd_reserved = c->backend->reserved();
	out->generation = c->layout.generation;
	out->rebuilds = c->rebuilds;
	out->backend = c->backend->name();
	out->notice = c->backend->notice();
	return 0;
}

extern "C" const char *gpuslot_last_error(void)
{
	return last_error.c_str();
}
