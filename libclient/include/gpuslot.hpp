// SPDX-License-Identifier: LGPL-2.1-or-later
// libgpuslot for C++: RAII over the C API of <gpuslot.h>.
//
//	gpuslot::Client client;			// domain 0, backend auto
//	for (;;) {
//		auto slot = client.acquire();	// waits; FIFO; SCHED_FIFO
//		run(slot.stream());		// hipStream_t with hip
//	}					// slot released here
//
// Failures throw gpuslot::Error, which carries the negative errno and the
// message of gpuslot_last_error(). try_acquire() and acquire_for() return
// std::nullopt when no slot came, instead of throwing.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
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
	int gpu_index = -1;
	const char *device = nullptr;
	const char *sysfs_root = nullptr;
};

// A held slot. Moving transfers it; destruction releases it.
class Slot {
public:
	Slot(Slot &&o) noexcept : c_(std::exchange(o.c_, nullptr)), s_(o.s_) {}
	Slot &operator=(Slot &&o) noexcept
	{
		if (this != &o) {
			release();
			c_ = std::exchange(o.c_, nullptr);
			s_ = o.s_;
		}
		return *this;
	}
	Slot(const Slot &) = delete;
	Slot &operator=(const Slot &) = delete;
	~Slot() { release(); }

	unsigned int index() const { return s_.index; }
	unsigned int units() const { return s_.units; }
	uint64_t generation() const { return s_.generation; }
	// The slot's stream: hipStream_t with the hip backend, nullptr with none.
	void *stream() const { return s_.stream; }
	template <class Stream> Stream stream_as() const
	{
		return static_cast<Stream>(s_.stream);
	}

	// Release early; the destructor then does nothing.
	void release() noexcept
	{
		if (c_)
			gpuslot_release_slot(std::exchange(c_, nullptr));
	}

private:
	friend class Client;
	Slot(gpuslot_client *c, const gpuslot_slot &s) : c_(c), s_(s) {}
	gpuslot_client *c_;
	gpuslot_slot s_;
};

class Client {
public:
	explicit Client(const Options &o = {})
	{
		gpuslot_options opts{};
		opts.size = sizeof(opts);
		opts.domain = o.domain;
		opts.backend = o.backend;
		opts.flags = o.wait_for_queues ? GPUSLOT_OPEN_WAIT_QUEUES : 0;
		opts.gpu_index = o.gpu_index;
		opts.device = o.device;
		opts.sysfs_root = o.sysfs_root;
		if (int err = gpuslot_open(&opts, &c_))
			throw Error(err);
	}
	Client(const Client &) = delete;
	Client &operator=(const Client &) = delete;
	Client(Client &&o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
	~Client() { gpuslot_close(c_); }

	// Wait for a slot (bit i of @allowed allows slot i; 0 any).
	Slot acquire(uint64_t allowed = 0) { return *get(GPUSLOT_WAIT_FOREVER, allowed); }

	std::optional<Slot> try_acquire(uint64_t allowed = 0) { return get(0, allowed); }

	std::optional<Slot> acquire_for(std::chrono::nanoseconds timeout, uint64_t allowed = 0)
	{
		return get(timeout.count() > 0 ? timeout.count() : 0, allowed);
	}

	gpuslot_layout_info layout() const
	{
		gpuslot_layout_info l;
		if (int err = gpuslot_client_layout(c_, &l))
			throw Error(err);
		return l;
	}

	gpuslot_client *get() const { return c_; }

private:
	std::optional<Slot> get(int64_t timeout_ns, uint64_t allowed)
	{
		gpuslot_slot s;
		int err = gpuslot_acquire_slot(c_, timeout_ns, allowed, &s);
		if (err == -EAGAIN || err == -ETIMEDOUT)
			return std::nullopt;
		if (err)
			throw Error(err);
		return Slot(c_, s);
	}

	gpuslot_client *c_ = nullptr;
};

} // namespace gpuslot
