// SPDX-License-Identifier: LGPL-2.1-or-later
// libgpuslot for C++: RAII over the C API of <gpuslot.h>.
//
//	gpuslot::Client client;			// domain 0, backend auto
//	// in any number of threads:
//	for (;;) {
//		auto slot = client.acquire();	// waits; FIFO; SCHED_FIFO
//		run(slot.stream());		// hipStream_t / CUstream
//	}	// released here, after the work queued on slot.stream() ends
//
// A Slot's destructor follows the library's release rule: it waits for the
// work queued on the slot's stream, then releases; release(NoSync) skips
// the wait for a caller that synchronised itself. A Slot keeps its client
// alive, so destroying the Client first is safe. Failures throw
// gpuslot::Error, which carries the negative errno and the message of
// gpuslot_last_error(). try_acquire() and acquire_for() return
// std::nullopt when no slot came, instead of throwing.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "gpuslot.h"

namespace gpuslot {

class Error : public std::runtime_error {
public:
	explicit Error(int code) : std::runtime_error(gpuslot_last_error()), code_(code) {}
	// A negative errno, as the C API returns it.
	int code() const { return code_; }

private:
	int code_;
};

struct Options {
	unsigned int domain = 0;
	gpuslot_backend backend = GPUSLOT_BACKEND_AUTO;
	bool wait_for_queues = false;
	// The runtime's device number; unset: the domain's GPU, found by its
	// PCI address.
	std::optional<int> gpu_index;
	uint64_t slot_mask = 0; // slots to build streams for; 0 all
	const char *device = nullptr;
	const char *sysfs_root = nullptr;
};

namespace detail {
using ClientRef = std::shared_ptr<gpuslot_client>;

inline gpuslot_slot empty_slot()
{
	gpuslot_slot s{};
	s.size = sizeof(s);
	return s;
}
} // namespace detail

// A held slot. Moving transfers it; destruction releases it.
class Slot {
public:
	Slot(Slot &&o) noexcept : c_(std::move(o.c_)), s_(o.s_) {}
	Slot &operator=(Slot &&o) noexcept
	{
		if (this != &o) {
			release();
			c_ = std::move(o.c_);
			s_ = o.s_;
		}
		return *this;
	}
	Slot(const Slot &) = delete;
	Slot &operator=(const Slot &) = delete;
	~Slot() { release(); }

	unsigned int index() const { return s_.index; }
	unsigned int units() const { return s_.units; }
	// The slot's stream priority, levels above the default (1.3).
	unsigned int priority() const { return s_.priority; }
	uint64_t generation() const { return s_.generation; }
	// The slot's stream: valid until its generation is retired.
	void *stream() const { return s_.stream; }
	template <class Stream> Stream stream_as() const
	{
		return static_cast<Stream>(s_.stream);
	}
	bool held() const { return bool(c_); }

	// One command sent on the slot's stream through the launch gate
	// (gpuslot_launch_begin(), 1.7): @send(stream) runs once the gate
	// admits it, and its result is returned; Error where the gate refuses
	// (nothing is sent then). The gate's end is told however @send ends.
	template <class Send>
	auto launch(Send &&send, uint32_t inflight = GPUSLOT_LAUNCH_INFLIGHT_DEFAULT)
		-> decltype(send(static_cast<void *>(nullptr)))
	{
		if (int err = gpuslot_launch_begin(c_.get(), &s_, inflight))
			throw Error(err);
		struct End {
			gpuslot_client *c;
			const gpuslot_slot *s;
			~End() { gpuslot_launch_end(c, s); }
		} end{c_.get(), &s_};
		return send(s_.stream);
	}

	enum Sync { WaitForWork = 0, NoSync = GPUSLOT_RELEASE_NO_SYNC };
	// Release early (the destructor then does nothing): 0, or the C
	// API's -errno (-EIO: the stream reported an error; released anyway).
	int release(Sync sync = WaitForWork) noexcept
	{
		if (!c_)
			return 0;
		int err = gpuslot_release_slot(c_.get(), &s_, uint32_t(sync));
		c_.reset();
		return err;
	}

private:
	friend class Client;
	friend class PendingSlot;
	Slot(detail::ClientRef c, const gpuslot_slot &s) : c_(std::move(c)), s_(s) {}
	detail::ClientRef c_;
	gpuslot_slot s_;
};

// An asynchronous acquire: poll fd() for POLLIN, then complete().
// Destruction cancels an acquire that did not complete.
class PendingSlot {
public:
	PendingSlot(PendingSlot &&o) noexcept : c_(std::move(o.c_)), s_(o.s_) {}
	PendingSlot &operator=(PendingSlot &&o) noexcept
	{
		if (this != &o) {
			cancel();
			c_ = std::move(o.c_);
			s_ = o.s_;
		}
		return *this;
	}
	PendingSlot(const PendingSlot &) = delete;
	PendingSlot &operator=(const PendingSlot &) = delete;
	~PendingSlot() { cancel(); }

	int fd() const { return s_.poll_fd; }
	// The slot once granted, std::nullopt while still queued.
	std::optional<Slot> complete()
	{
		if (!c_)
			throw std::logic_error("gpuslot::PendingSlot: completed or cancelled");
		int err = gpuslot_acquire_complete(c_.get(), &s_);
		if (err == -EAGAIN)
			return std::nullopt;
		auto c = std::move(c_);
		if (err)
			throw Error(err);
		return Slot(std::move(c), s_);
	}
	void cancel() noexcept
	{
		if (c_)
			gpuslot_acquire_cancel(std::exchange(c_, nullptr).get(), &s_);
	}

private:
	friend class Client;
	PendingSlot(detail::ClientRef c, const gpuslot_slot &s) : c_(std::move(c)), s_(s) {}
	detail::ClientRef c_;
	gpuslot_slot s_;
};

// A client: thread-safe, movable; its slots keep it alive.
class Client {
public:
	explicit Client(const Options &o = {})
	{
		gpuslot_options opts{};
		opts.size = sizeof(opts);
		opts.domain = o.domain;
		opts.backend = o.backend;
		opts.flags = (o.wait_for_queues ? GPUSLOT_OPEN_WAIT_QUEUES : 0) |
			     (o.gpu_index ? GPUSLOT_OPEN_GPU_INDEX : 0);
		opts.gpu_index = o.gpu_index.value_or(0);
		opts.slot_mask = o.slot_mask;
		opts.device = o.device;
		opts.sysfs_root = o.sysfs_root;
		gpuslot_client *c = nullptr;
		if (int err = gpuslot_open(&opts, &c))
			throw Error(err);
		c_ = detail::ClientRef(c, gpuslot_close);
	}

	// Wait for a slot (bit i of @allowed allows slot i; 0 any).
	Slot acquire(uint64_t allowed = 0) { return *get(GPUSLOT_WAIT_FOREVER, allowed); }

	std::optional<Slot> try_acquire(uint64_t allowed = 0) { return get(0, allowed); }

	std::optional<Slot> acquire_for(std::chrono::nanoseconds timeout, uint64_t allowed = 0)
	{
		return get(timeout.count() > 0 ? timeout.count() : 0, allowed);
	}

	// Queue for a slot without blocking.
	PendingSlot start(uint64_t allowed = 0)
	{
		gpuslot_slot s = detail::empty_slot();
		if (int err = gpuslot_acquire_start(c_.get(), allowed, &s))
			throw Error(err);
		return PendingSlot(c_, s);
	}

	// Build streams for a newer layout now: true if it did.
	bool refresh()
	{
		int ret = gpuslot_refresh(c_.get());
		if (ret < 0)
			throw Error(ret);
		return ret > 0;
	}

	// Done with the streams of generations up to @generation.
	void retire(uint64_t generation)
	{
		if (int err = gpuslot_retire_generation(c_.get(), generation))
			throw Error(err);
	}

	gpuslot_layout_info layout() const
	{
		gpuslot_layout_info l{};
		l.size = sizeof(l);
		if (int err = gpuslot_client_layout(c_.get(), &l))
			throw Error(err);
		return l;
	}

	// Slot @index's priority in the current layout (1.3).
	unsigned int slot_priority(unsigned int index) const
	{
		int p = gpuslot_slot_priority(c_.get(), index);
		if (p < 0)
			throw Error(p);
		return unsigned(p);
	}

	gpuslot_client *get() const { return c_.get(); }

private:
	std::optional<Slot> get(int64_t timeout_ns, uint64_t allowed)
	{
		gpuslot_slot s = detail::empty_slot();
		int err = gpuslot_acquire_slot(c_.get(), timeout_ns, allowed, &s);
		if (err == -EAGAIN || err == -ETIMEDOUT)
			return std::nullopt;
		if (err)
			throw Error(err);
		return Slot(c_, s);
	}

	detail::ClientRef c_;
};

} // namespace gpuslot
