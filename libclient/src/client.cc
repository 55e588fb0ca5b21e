// SPDX-License-Identifier: LGPL-2.1-or-later
// The C API of libgpuslot (gpuslot.h): checking what callers pass, the
// process-wide registry that lets clients of one domain share their
// streams, and the calls, which ProcessDomain carries out.
#include <pthread.h>
#include <unistd.h>

#include <linux/gpuslot.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "client_internal.hpp"
#include "cuda_backend.hpp"
#include "device_choice.hpp"
#include "gpuslot.h"
#include "hip_backend.hpp"
#include "process_domain.hpp"

// The *_SIZE_VER0 literals are ABI: the structs may grow, never shrink.
static_assert(sizeof(void *) != 8 || sizeof(gpuslot_options) == GPUSLOT_OPTIONS_SIZE_VER0);
static_assert(sizeof(void *) != 8 || sizeof(gpuslot_slot) == GPUSLOT_SLOT_SIZE_VER0);
static_assert(sizeof(void *) != 8 ||
	      sizeof(gpuslot_layout_info) == GPUSLOT_LAYOUT_INFO_SIZE_VER0);
static_assert(sizeof(gpuslot_work_info) == GPUSLOT_WORK_INFO_SIZE_VER0);

using namespace gpuslot;

struct gpuslot_client {
	std::shared_ptr<ProcessDomain> domain;
	pid_t owner = 0;
	std::string notice; // storage for gpuslot_layout_info.notice
	std::mutex notice_lock;
	// Calls running on this client: gpuslot_close() must not free it
	// under them.
	std::atomic<unsigned int> calls{0};
	// The process's forks() when it was opened: the work state's calls
	// tell a forked child so without asking getpid(), a system call.
	unsigned int forks = 0;
};

namespace gpuslot {
namespace {

thread_local std::string last_error;

// Record what went wrong for gpuslot_last_error(); returns @code.
int fail(int code, std::string message)
{
	last_error = "gpuslot: " + std::move(message);
	return code;
}

// A struct a caller passes in: at least its first published size, and
// anything past what this library knows must be zero (it came from a
// newer header and means something this library cannot do).
int check_in_struct(const void *p, uint32_t size, size_t ver0, size_t known, const char *what)
{
	if (size < ver0)
		return fail(-EINVAL, std::string(what) + ".size is " + std::to_string(size) +
					     ": set it to sizeof(struct " + what + ")");
	const char *tail = static_cast<const char *>(p) + known;
	for (size_t i = known; i < size; i++)
		if (tail[i - known])
			return fail(-E2BIG, std::string(what) +
						    " has fields this libgpuslot does not know (a "
						    "newer header): update the library");
	return 0;
}

// An output struct: at least its first published size. The library
// writes what it knows (up to the caller's size) and zeroes the rest.
int check_out_struct(uint32_t size, size_t ver0, const char *what)
{
	if (size < ver0)
		return fail(-EINVAL, std::string(what) + ".size is " + std::to_string(size) +
					     ": set it to sizeof(struct " + what + ")");
	return 0;
}

template <class T> void copy_out(const T &src, T *dst, uint32_t size)
{
	const uint32_t n = size < sizeof(T) ? size : uint32_t(sizeof(T));
	std::memcpy(reinterpret_cast<char *>(dst) + sizeof(uint32_t),
		    reinterpret_cast<const char *>(&src) + sizeof(uint32_t), n - sizeof(uint32_t));
	if (size > sizeof(T))
		std::memset(reinterpret_cast<char *>(dst) + sizeof(T), 0, size - sizeof(T));
}

bool in_child(const gpuslot_client *c)
{
	return getpid() != c->owner;
}

// Forks of this process's ancestry since the library was loaded (counted in
// each child): a client opened before the last fork is its parent's.
std::atomic<unsigned int> fork_count{0};

unsigned int forks()
{
	static std::once_flag counting;
	std::call_once(counting, [] {
		pthread_atfork(nullptr, nullptr, [] { fork_count.fetch_add(1); });
	});
	return fork_count.load(std::memory_order_relaxed);
}

// Counts a call on a client for as long as it runs.
class InCall {
public:
	explicit InCall(gpuslot_client *c) : c_(c) { c_->calls.fetch_add(1); }
	~InCall() { c_->calls.fetch_sub(1); }
	InCall(const InCall &) = delete;
	InCall &operator=(const InCall &) = delete;

private:
	gpuslot_client *c_;
};

int child_error(const gpuslot_client *c)
{
	return fail(-ECHILD, "this client was opened by process " + std::to_string(c->owner) +
				     "; a forked child opens its own with gpuslot_open()");
}

// Clients of one process that asked for the same thing share a domain.
using Key = std::tuple<pid_t, int, std::string, std::string, unsigned int, uint32_t, int, uint64_t,
		       uint32_t>;
std::mutex registry_lock;
std::map<Key, std::weak_ptr<ProcessDomain>> registry;

// The backend @opts asks for, on @layout.
BackendFactory default_backends(const gpuslot_options &opts)
{
	return [opts](const SlotLayout &layout, std::unique_ptr<Backend> *out,
			     std::string *error) {
		uint32_t backend = opts.backend;
		if (backend == GPUSLOT_BACKEND_AUTO)
			backend = layout.unit_kind == GPUSLOT_UNIT_AMD_CU ? GPUSLOT_BACKEND_HIP
				  : layout.unit_kind == GPUSLOT_UNIT_NV_SM_GROUP
					  ? GPUSLOT_BACKEND_CUDA
					  : GPUSLOT_BACKEND_NONE;
		DeviceChoice device;
		device.domain = opts.domain;
		if (opts.flags & GPUSLOT_OPEN_GPU_INDEX)
			device.ordinal = opts.gpu_index;
		else
			device.pci_bus_id = layout.pci_bus_id;
		const char *fallback = "; use GPUSLOT_BACKEND_NONE for CPU-side gating";
		if (backend == GPUSLOT_BACKEND_CUDA) {
			CudaApi api;
			if (!load_cuda(&api, error)) {
				*error += fallback;
				return -ENODEV;
			}
			*out = std::make_unique<CudaBackend>(api, device);
		} else if (backend == GPUSLOT_BACKEND_HIP) {
			HipRuntime rt;
			if (!load_hip(&rt, error)) {
				*error += fallback;
				return -ENODEV;
			}
			*out = make_hip_backend(rt, device);
		} else {
			*out = make_none_backend(opts.runtime_queues);
		}
		return 0;
	};
}

} // namespace

int open_client(const gpuslot_options *opts, const BackendFactory *backends,
		gpuslot_client **out)
{
	if (!opts || !out)
		return fail(-EINVAL, "gpuslot_open() needs options and a place for the client");
	if (int err = check_in_struct(opts, opts->size, GPUSLOT_OPTIONS_SIZE_VER0,
				      sizeof(*opts), "gpuslot_options"))
		return err;
	bool reserved_zero = true;
	for (uint64_t r : opts->__reserved)
		reserved_zero &= !r;
	if (!reserved_zero ||
	    (opts->flags & ~(GPUSLOT_OPEN_WAIT_QUEUES | GPUSLOT_OPEN_GPU_INDEX)))
		return fail(-EINVAL, "unknown flags or a nonzero __reserved field in options");
	if (opts->backend > GPUSLOT_BACKEND_CUDA)
		return fail(-EINVAL, "backend " + std::to_string(opts->backend) +
					     " is not one of AUTO, NONE, HIP, CUDA");
	if (opts->runtime_queues && opts->backend != GPUSLOT_BACKEND_NONE)
		return fail(-EINVAL, "runtime_queues " + std::to_string(opts->runtime_queues) +
					     " is for GPUSLOT_BACKEND_NONE: the hip backend counts HIP's "
					     "own queues, and CUDA has none to reserve");
	if (opts->runtime_queues > GPUSLOT_MAX_HQD)
		return fail(-EINVAL, "runtime_queues " + std::to_string(opts->runtime_queues) +
					     " is more than GPUSLOT_MAX_HQD (" +
					     std::to_string(GPUSLOT_MAX_HQD) + ")");
	if ((opts->flags & GPUSLOT_OPEN_GPU_INDEX) && opts->gpu_index < 0)
		return fail(-EINVAL, "gpu_index " + std::to_string(opts->gpu_index) +
					     " with GPUSLOT_OPEN_GPU_INDEX: use a device number >= 0");

	ProcessDomain::Config config;
	config.device = opts->device ? opts->device : "/dev/gpuslot";
	const char *socket_dir = getenv("GPUSLOT_SOCKET_DIR");
	config.socket_dir = socket_dir && *socket_dir ? socket_dir : "/run/gpuslot";
	{
		std::string error;
		if (int err = choose_transport(config.device, config.socket_dir, opts->domain,
					       &config.transport, &error))
			return fail(err, error);
	}
	config.sysfs_root = opts->sysfs_root ? opts->sysfs_root : "/sys/class/gpuslot";
	config.domain = opts->domain;
	config.slot_mask = opts->slot_mask;
	config.wait_for_queues = opts->flags & GPUSLOT_OPEN_WAIT_QUEUES;
	const int gpu = opts->flags & GPUSLOT_OPEN_GPU_INDEX ? opts->gpu_index : -1;

	auto c = std::make_unique<gpuslot_client>();
	c->owner = getpid();
	c->forks = forks();
	// A test's backend is its own: such clients share nothing.
	const Key key{c->owner,
		      int(config.transport),
		      config.transport == Transport::device ? config.device : config.socket_dir,
		      config.sysfs_root,
		      config.domain,
		      opts->backend,
		      gpu,
		      config.slot_mask,
		      opts->runtime_queues};
	std::lock_guard<std::mutex> hold(registry_lock);
	if (!backends) {
		auto it = registry.find(key);
		if (it != registry.end()) {
			c->domain = it->second.lock();
			if (!c->domain)
				registry.erase(it);
		}
	}
	if (!c->domain) {
		std::string error;
		const BackendFactory factory =
			backends ? *backends : default_backends(*opts);
		if (int err = ProcessDomain::open(config, factory, &c->domain, &error))
			return fail(err, error);
		if (!backends)
			registry[key] = c->domain;
	}
	*out = c.release();
	return 0;
}

} // namespace gpuslot

extern "C" uint32_t gpuslot_lib_version(void)
{
	return GPUSLOT_VERSION_NUMBER(GPUSLOT_VERSION_MAJOR, GPUSLOT_VERSION_MINOR,
				      GPUSLOT_VERSION_PATCH);
}

extern "C" int gpuslot_open(const struct gpuslot_options *opts, struct gpuslot_client **out)
{
	return open_client(opts, nullptr, out);
}

extern "C" void gpuslot_close(struct gpuslot_client *c)
{
	if (!c)
		return;
	// In a forked child the holds are the parent's, and so are the calls
	// that were running when it forked.
	if (!in_child(c)) {
		// Freeing the client under a call of another thread (one waiting
		// in gpuslot_acquire_slot(), which nothing can wake) is a
		// use-after-free, and leaves that waiter queued: stop here, saying
		// so, rather than corrupt memory.
		if (const unsigned int n = c->calls.load()) {
			fprintf(stderr,
				"libgpuslot: gpuslot_close() while %u call%s on the same client "
				"%s running in other threads (waiting in gpuslot_acquire_slot()?): "
				"freeing it under them would be a use-after-free. End them first "
				"(a timeout, or the pollable acquire with a wake-up descriptor of "
				"your own: libgpuslot(3), Closing). Aborting.\n",
				n, n == 1 ? "" : "s", n == 1 ? "is" : "are");
			abort();
		}
		c->domain->drop_owner(c);
	}
	{
		// The last client of the domain destroys it here.
		std::lock_guard<std::mutex> hold(registry_lock);
		c->domain.reset();
	}
	delete c;
}

// The checks every slot call makes.
static int slot_call(gpuslot_client *c, gpuslot_slot *slot, const char *fn)
{
	if (!c || !slot)
		return fail(-EINVAL, std::string(fn) + "() needs a client and a slot");
	if (in_child(c))
		return child_error(c);
	return check_out_struct(slot->size, GPUSLOT_SLOT_SIZE_VER0, "gpuslot_slot");
}

// Run @call on a full-size copy of the caller's slot and copy it back.
template <class Call> static int with_slot(gpuslot_slot *slot, Call call)
{
	gpuslot_slot mine{};
	const uint32_t n = slot->size < sizeof(mine) ? slot->size : uint32_t(sizeof(mine));
	std::memcpy(&mine, slot, n);
	mine.size = sizeof(mine);
	// Reserved members are the library's to define: zero today.
	for (uint64_t &r : mine.__reserved)
		r = 0;
	std::string error;
	int ret = call(&mine, &error);
	copy_out(mine, slot, slot->size);
	return ret < 0 ? fail(ret, error) : ret;
}

extern "C" int gpuslot_acquire_slot(struct gpuslot_client *c, int64_t timeout_ns,
				    uint64_t allowed_mask, struct gpuslot_slot *slot)
{
	if (int err = slot_call(c, slot, "gpuslot_acquire_slot"))
		return err;
	const InCall in(c);
	if (timeout_ns < GPUSLOT_WAIT_FOREVER)
		return fail(-EINVAL, "timeout_ns " + std::to_string(timeout_ns) +
					     ": use 0 (try), GPUSLOT_WAIT_FOREVER, or a positive timeout");
	return with_slot(slot, [&](gpuslot_slot *s, std::string *error) {
		return c->domain->acquire(timeout_ns, allowed_mask, s, c, error);
	});
}

extern "C" int gpuslot_release_slot(struct gpuslot_client *c, struct gpuslot_slot *slot,
				    uint32_t flags)
{
	if (int err = slot_call(c, slot, "gpuslot_release_slot"))
		return err;
	const InCall in(c);
	if (flags & ~GPUSLOT_RELEASE_NO_SYNC)
		return fail(-EINVAL, "unknown release flags " + std::to_string(flags));
	return with_slot(slot, [&](gpuslot_slot *s, std::string *error) {
		return c->domain->release(s, flags, error);
	});
}

extern "C" int gpuslot_acquire_start(struct gpuslot_client *c, uint64_t allowed_mask,
				     struct gpuslot_slot *slot)
{
	if (int err = slot_call(c, slot, "gpuslot_acquire_start"))
		return err;
	const InCall in(c);
	return with_slot(slot, [&](gpuslot_slot *s, std::string *error) {
		return c->domain->start(allowed_mask, s, c, error);
	});
}

extern "C" int gpuslot_acquire_fd(const struct gpuslot_slot *slot)
{
	if (!slot || slot->size < GPUSLOT_SLOT_SIZE_VER0 || !slot->handle)
		return fail(-EINVAL, "gpuslot_acquire_fd() needs a slot from gpuslot_acquire_start()");
	return slot->poll_fd;
}

extern "C" int gpuslot_acquire_complete(struct gpuslot_client *c, struct gpuslot_slot *slot)
{
	if (int err = slot_call(c, slot, "gpuslot_acquire_complete"))
		return err;
	const InCall in(c);
	return with_slot(slot, [&](gpuslot_slot *s, std::string *error) {
		return c->domain->complete(s, error);
	});
}

extern "C" int gpuslot_acquire_cancel(struct gpuslot_client *c, struct gpuslot_slot *slot)
{
	if (int err = slot_call(c, slot, "gpuslot_acquire_cancel"))
		return err;
	const InCall in(c);
	return with_slot(slot, [&](gpuslot_slot *s, std::string *error) {
		return c->domain->cancel(s, error);
	});
}

extern "C" int gpuslot_refresh(struct gpuslot_client *c)
{
	if (!c)
		return fail(-EINVAL, "gpuslot_refresh() needs a client");
	if (in_child(c))
		return child_error(c);
	const InCall in(c);
	std::string error;
	int ret = c->domain->refresh(&error);
	return ret < 0 ? fail(ret, error) : ret;
}

extern "C" int gpuslot_retire_generation(struct gpuslot_client *c, uint64_t generation)
{
	if (!c)
		return fail(-EINVAL, "gpuslot_retire_generation() needs a client");
	if (in_child(c))
		return child_error(c);
	const InCall in(c);
	std::string error;
	int ret = c->domain->retire(generation, &error);
	return ret < 0 ? fail(ret, error) : ret;
}

extern "C" int gpuslot_client_layout(struct gpuslot_client *c, struct gpuslot_layout_info *out)
{
	if (!c || !out)
		return fail(-EINVAL, "gpuslot_client_layout() needs a client and a place for the layout");
	const InCall in(c);
	if (int err = check_out_struct(out->size, GPUSLOT_LAYOUT_INFO_SIZE_VER0,
				       "gpuslot_layout_info"))
		return err;
	gpuslot_layout_info info{};
	std::lock_guard<std::mutex> hold(c->notice_lock);
	c->domain->info(&info, &c->notice);
	info.notice = c->notice.c_str();
	copy_out(info, out, out->size);
	return 0;
}

extern "C" int gpuslot_slot_priority(struct gpuslot_client *c, uint32_t index)
{
	if (!c)
		return fail(-EINVAL, "gpuslot_slot_priority() needs a client");
	if (in_child(c))
		return child_error(c);
	const InCall in(c);
	const int p = c->domain->slot_priority(index);
	if (p < 0)
		return fail(p, "slot " + std::to_string(index) +
				       " is not a slot of the client's layout (0 .. k - 1)");
	return p;
}

extern "C" int gpuslot_slots_context(struct gpuslot_client *c, uint64_t slots, void **context,
				     uint64_t *generation)
{
	if (!c || !context || !generation)
		return fail(-EINVAL, "gpuslot_slots_context() needs a client and places for the "
				     "context and its generation");
	if (in_child(c))
		return child_error(c);
	const InCall in(c);
	std::string error;
	const int err = c->domain->slots_context(slots, context, generation, &error);
	return err ? fail(err, error) : 0;
}

extern "C" int gpuslot_set_work(struct gpuslot_client *c, const struct gpuslot_slot *slot,
				int pending)
{
	if (!c || !slot)
		return fail(-EINVAL, "gpuslot_set_work() needs a client and a held slot");
	if (in_child(c))
		return child_error(c);
	const InCall in(c);
	std::string error;
	const int ret = c->domain->set_work(slot, pending != 0, &error);
	return ret < 0 ? fail(ret, error) : 0;
}

namespace {

// The work state for gpuslot_work_snapshot() and gpuslot_work_preempts():
// no system call once mapped (the fork check included).
int work_state(gpuslot_client *c, gpuslot_work_state *out)
{
	if (forks() != c->forks)
		return child_error(c);
	const InCall in(c);
	std::string error;
	const int ret = c->domain->work_snapshot(out, &error);
	return ret < 0 ? fail(ret, error) : 0;
}

} // namespace

extern "C" int gpuslot_work_snapshot(struct gpuslot_client *c, struct gpuslot_work_info *out)
{
	if (!c || !out)
		return fail(-EINVAL, "gpuslot_work_snapshot() needs a client and a place for the state");
	if (int err = check_out_struct(out->size, GPUSLOT_WORK_INFO_SIZE_VER0, "gpuslot_work_info"))
		return err;
	gpuslot_work_state st;
	if (int err = work_state(c, &st))
		return err;
	gpuslot_work_info info{};
	info.size = sizeof(info);
	info.k = st.k;
	info.generation = st.generation;
	info.held_mask = st.held_mask;
	info.work_mask = st.work_mask;
	info.preempt_mask = st.preempt_mask;
	info.updates = st.updates;
	info.preempt_level = st.preempt_level;
	copy_out(info, out, out->size);
	return 0;
}

extern "C" int gpuslot_work_preempts(struct gpuslot_client *c, uint32_t priority)
{
	if (!c)
		return fail(-EINVAL, "gpuslot_work_preempts() needs a client");
	gpuslot_work_state st;
	if (int err = work_state(c, &st))
		return err;
	// A slot of priority p yields while preempt_level > p + 1 (uapi).
	return uint64_t(st.preempt_level) > uint64_t(priority) + 1 ? 1 : 0;
}

namespace {

// The launch gate's calls, one per command: the fork check without a system
// call (as work_state()'s), no struct copied (the gate reads the handle).
template <class Call>
int launch_call(gpuslot_client *c, const gpuslot_slot *slot, const char *fn, Call call)
{
	if (!c || !slot)
		return fail(-EINVAL, std::string(fn) + "() needs a client and a held slot");
	if (forks() != c->forks)
		return child_error(c);
	const InCall in(c);
	std::string error;
	const int ret = call(&error);
	return ret < 0 ? fail(ret, error) : 0;
}

} // namespace

extern "C" int gpuslot_launch_begin(struct gpuslot_client *c, const struct gpuslot_slot *slot,
				    uint32_t inflight)
{
	return launch_call(c, slot, "gpuslot_launch_begin", [&](std::string *error) {
		return c->domain->launch_begin(slot, inflight, error);
	});
}

extern "C" int gpuslot_launch_end(struct gpuslot_client *c, const struct gpuslot_slot *slot)
{
	return launch_call(c, slot, "gpuslot_launch_end", [&](std::string *error) {
		return c->domain->launch_end(slot, error);
	});
}

extern "C" int gpuslot_domain_attr(struct gpuslot_client *c, const char *name, char *buf,
				   size_t len)
{
	if (!c || !name || (!buf && len))
		return fail(-EINVAL, "gpuslot_domain_attr() needs a client, a name and a buffer");
	if (in_child(c))
		return child_error(c);
	const InCall in(c);
	if (!gpuslot::attribute_name_ok(name))
		return fail(-EINVAL, std::string("\"") + name +
					     "\" is not an attribute name (k, slot0/units, "
					     "stats/acquisitions, debug/holders, fdinfo, ...)");
	std::string text;
	if (int err = c->domain->read_attr(name, &text))
		return fail(err, std::string("reading attribute ") + name + ": " + strerror(-err));
	if (len) {
		size_t n = std::min(text.size(), len - 1);
		memcpy(buf, text.data(), n);
		buf[n] = '\0';
	}
	return int(std::min<size_t>(text.size(), INT32_MAX));
}

extern "C" const char *gpuslot_last_error(void)
{
	return last_error.c_str();
}
