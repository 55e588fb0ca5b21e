// SPDX-License-Identifier: LGPL-2.1-or-later
#include "process_domain.hpp"

#include <fcntl.h>
#include <linux/gpuslot.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hqd_message.hpp"

namespace gpuslot {
namespace {

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The queue budget through the process's control file.
class ModuleBudget : public QueueBudget {
public:
	// @file is the owner's: it is replaced when gpuslotd restarts.
	ModuleBudget(std::unique_ptr<LockFile> &file, unsigned int domain, bool wait)
		: file_(file), domain_(domain), wait_(wait)
	{
	}

	int reserve(unsigned int count, std::string *error) override
	{
		gpuslot_reserve_queues r{};
		r.size = sizeof(r);
		r.count = count;
		r.flags = wait_ ? GPUSLOT_RESERVE_WAIT : 0;
		int err = file_->call(GPUSLOT_IOC_RESERVE_QUEUES, &r);
		if (err == ENOSPC) {
			auto e = explain_hqd_exhausted(
				[this](const std::string &name, std::string *text) {
					return file_->read_attr(name, text);
				},
				"", "/sys/module/amdgpu/parameters/sched_policy", domain_, count);
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
		file_->call(GPUSLOT_IOC_UNRESERVE_QUEUES, &u);
	}

private:
	std::unique_ptr<LockFile> &file_;
	unsigned int domain_;
	bool wait_;
};

// A slot's handle: lane index + 1, and the lane's use serial.
uint64_t make_handle(unsigned int index, uint32_t serial)
{
	return uint64_t(index + 1) << 32 | serial;
}

std::string acquire_message(int err)
{
	switch (err) {
	case EAGAIN: return "no slot free now";
	case ETIMEDOUT: return "no slot within the timeout";
	case EINTR: return "interrupted by a signal; nothing is held";
	case EINVAL: return "allowed_mask allows no slot below k";
	default: return std::string("ACQUIRE: ") + strerror(err);
	}
}

} // namespace

ProcessDomain::ProcessDomain(const Config &config) : config_(config), owner_pid_(getpid()) {}

int ProcessDomain::open_file(std::unique_ptr<LockFile> *file, std::string *error) const
{
	return open_lock_file(config_.transport,
			      config_.transport == Transport::device ? config_.device
								     : config_.socket_dir,
			      config_.domain, file, error, config_.sysfs_root);
}

int ProcessDomain::open_lane_file(uint64_t token, std::unique_ptr<LockFile> *file,
				  std::string *error) const
{
	if (int err = open_file(file, error))
		return err;
	const int err = (*file)->set_client_token(token);
	if (err && err != ENOTTY) {
		*error = std::string("GPUSLOT_WIRE_CLIENT_TOKEN: ") + strerror(err);
		file->reset();
		return -err;
	}
	return 0;
}

namespace {

// A lane's token: random, never 0 (none).
uint64_t new_lane_token()
{
	uint64_t token = 0;
	while (!token)
		if (getrandom(&token, sizeof(token), 0) != ssize_t(sizeof(token)))
			token = 0;
	return token;
}

} // namespace

int ProcessDomain::read_layout(SlotLayout *out, std::string *error) const
{
	std::vector<gpuslot_partition> parts(GPUSLOT_MAX_SLOTS);
	gpuslot_layout l{};
	l.size = sizeof(l);
	l.nr_partitions = parts.size();
	l.partitions = reinterpret_cast<uintptr_t>(parts.data());
	if (int err = control_->call(GPUSLOT_IOC_GET_LAYOUT, &l)) {
		*error = std::string("GET_LAYOUT: ") + strerror(err) +
			 (err == ENOTTY ? " (the loaded module predates layouts: load the one "
					  "built with this library)"
					: "");
		return -err;
	}
	SlotLayout s;
	s.k = l.k;
	s.unit_kind = l.unit_kind;
	s.nr_units = l.nr_units;
	s.unit_size = l.unit_size;
	s.generation = l.generation;
	// The GPU the layout is for, which gpuslotd names (empty while unknown).
	std::string id;
	if (!control_->read_attr("pci_bus_id", &id))
		s.pci_bus_id = id.substr(0, id.find_first_of(" \n"));
	const unsigned int words = (l.nr_units + 31) / 32;
	for (unsigned int slot = 0; slot < l.k; slot++) {
		std::vector<uint32_t> mask(words);
		bool any = false;
		for (unsigned int w = 0; w < words; w++) {
			mask[w] = uint32_t(parts[slot].units[w / 2] >> (32 * (w % 2)));
			any |= mask[w] != 0;
		}
		s.masks.push_back(any ? mask : std::vector<uint32_t>{});
		s.priorities.push_back(l.priority[slot]);
	}
	*out = std::move(s);
	return 0;
}

int ProcessDomain::open(const Config &config, const BackendFactory &make_backend,
			std::shared_ptr<ProcessDomain> *out, std::string *error)
{
	std::shared_ptr<ProcessDomain> d(new ProcessDomain(config));
	if (int err = d->open_file(&d->control_, error))
		return err;
	SlotLayout layout;
	if (int err = d->read_layout(&layout, error))
		return err;
	if (int err = make_backend(layout, &d->backend_, error))
		return err;
	d->budget_ = std::make_unique<ModuleBudget>(d->control_, config.domain,
						    config.wait_for_queues);
	d->sets_ = std::make_unique<StreamSets>(*d->backend_, *d->budget_, config.slot_mask);
	if (int err = d->sets_->update(layout, error); err < 0)
		return err;
	// Mapped at its first use, through a file of its own.
	d->work_ = std::make_unique<WorkState>(
		config.transport,
		[raw = d.get()](std::unique_ptr<LockFile> *f, std::string *e) {
			return raw->open_file(f, e);
		},
		config.transport == Transport::socket ? socket_path(config.socket_dir, config.domain)
						      : std::string());
	*out = std::move(d);
	return 0;
}

ProcessDomain::~ProcessDomain()
{
	// A forked child shares the parent's open files and GPU state: it
	// closes its descriptors and leaves the rest alone.
	if (getpid() != owner_pid_) {
		(void)sets_.release();
		// The gates' events are the parent's too.
		for (Lane &lane : lanes_)
			if (lane.gate) {
				lane.gate->throttle->disable();
				(void)lane.gate->markers.release();
			}
	} else {
		// Holds of clients that did not release end with their files.
		sets_.reset();
	}
	// The files close with lanes_ and control_.
}

int ProcessDomain::take_lane(const void *owner, Lane **out, std::string *error)
{
	Lane *reuse = nullptr;
	{
		std::lock_guard<std::mutex> hold(lock_);
		if (!free_lanes_.empty()) {
			Lane &lane = lanes_[free_lanes_.back()];
			free_lanes_.pop_back();
			lane.state = LaneState::busy;
			lane.owner = owner;
			lane.serial++;
			// gpuslotd restarted since its last use: a new connection
			// now, rather than a call that fails ECONNRESET.
			if (!lane.lost && lane.file->gone())
				lane.lost = true;
			if (!lane.lost) {
				*out = &lane;
				return 0;
			}
			reuse = &lane;
		}
	}
	if (reuse) {
		// Its connection died with gpuslotd: a new one.
		std::unique_ptr<LockFile> file;
		if (int err = open_lane_file(reuse->token, &file, error)) {
			put_lane(reuse);
			return err;
		}
		reuse->file = std::move(file);
		reuse->lost = false;
		*out = reuse;
		return 0;
	}
	std::unique_ptr<LockFile> file;
	const uint64_t token = new_lane_token();
	if (int err = open_lane_file(token, &file, error))
		return err;
	std::lock_guard<std::mutex> hold(lock_);
	Lane &lane = lanes_.emplace_back();
	lane.file = std::move(file);
	lane.token = token;
	lane.index = unsigned(lanes_.size() - 1);
	lane.state = LaneState::busy;
	lane.owner = owner;
	lane.serial = 1;
	*out = &lane;
	return 0;
}

void ProcessDomain::put_lane(Lane *lane)
{
	std::lock_guard<std::mutex> hold(lock_);
	lane->state = LaneState::idle;
	lane->owner = nullptr;
	lane->stream = nullptr;
	// The hold's end cleared its work report; its gate's events go
	// (after the release's synchronization, or with work still queued:
	// an event destroyed while pending is freed once it completes).
	lane->work_pending = false;
	lane->held = false;
	lane->gate.reset();
	free_lanes_.push_back(lane->index);
}

int ProcessDomain::connection_lost(Lane *lane, const char *what, std::string *error)
{
	if (lane)
		lane->lost = true;
	control_lost_ = true;
	*error = std::string(what) +
		 ": gpuslotd went away (restarted?); holds and queue reservations of the socket "
		 "transport end with it. The next call connects again";
	return -ECONNRESET;
}

int ProcessDomain::reconnect(std::string *error)
{
	if (!control_lost_) {
		// A restart of gpuslotd that no call met yet hung the control
		// file up. (Not while a build runs: that one learns it itself.)
		std::unique_lock<std::mutex> building(build_lock_, std::try_to_lock);
		if (!building.owns_lock() || !control_->gone())
			return 0;
		control_lost_ = true;
		return reconnect_locked(error);
	}
	std::lock_guard<std::mutex> building(build_lock_);
	return reconnect_locked(error);
}

int ProcessDomain::reconnect_locked(std::string *error)
{
	if (!control_lost_)
		return 0;
	std::unique_ptr<LockFile> file;
	if (int err = open_file(&file, error))
		return err;
	control_ = std::move(file);
	unsigned int queues;
	{
		std::lock_guard<std::mutex> hold(lock_);
		queues = sets_->reserved();
	}
	if (queues) {
		if (int err = budget_->reserve(queues, error)) {
			*error = "reconnected to gpuslotd, but the streams' queues could not be "
				 "reserved again: " +
				 *error;
			return err;
		}
	}
	control_lost_ = false;
	return 0;
}

int ProcessDomain::lane_of(const gpuslot_slot *slot, LaneState from, Lane **out,
			   std::string *error)
{
	const uint64_t h = slot->handle;
	const unsigned int i = unsigned(h >> 32) - 1;
	std::unique_lock<std::mutex> hold(lock_);
	// A hold another thread takes back from a restarted gpuslotd is this
	// caller's again once it has.
	reclaimed_.wait(hold, [&] {
		return !h || i >= lanes_.size() || lanes_[i].state != LaneState::reclaiming;
	});
	if (!h || i >= lanes_.size() || lanes_[i].serial != uint32_t(h) ||
	    lanes_[i].state != from) {
		*error = from == LaneState::holding
				 ? "this slot is not held by this client (released already?)"
				 : "no acquire of this client was started in this slot";
		return -EINVAL;
	}
	lanes_[i].state = LaneState::busy;
	*out = &lanes_[i];
	return 0;
}

int ProcessDomain::effective_mask(uint64_t allowed, uint64_t *mask, std::string *error)
{
	for (int round = 0; round < 2; round++) {
		uint64_t built;
		{
			std::lock_guard<std::mutex> hold(lock_);
			built = sets_->current()->slots;
		}
		*mask = (allowed ? allowed : ~0ULL) & built;
		if (*mask)
			return 0;
		// Slots of a newer layout may be wanted: build it first.
		if (round == 0) {
			int err = refresh(error);
			if (err < 0)
				return err;
			if (err == 0)
				break;
		}
	}
	// Let the module say whether the mask is below k at all.
	if (!allowed)
		return 0;
	*error = "allowed_mask allows no slot this client has streams for "
		 "(the client's slot_mask, or slots >= k)";
	return -EINVAL;
}

bool ProcessDomain::renumber(uint64_t generation)
{
	std::unique_lock<std::mutex> building(build_lock_, std::try_to_lock);
	if (!building.owns_lock() || control_lost_)
		return false;
	SlotLayout layout;
	std::string ignored;
	// The layout of that very generation: one read later may be newer.
	if (read_layout(&layout, &ignored) || layout.generation != generation)
		return false;
	std::lock_guard<std::mutex> hold(lock_);
	return sets_->renumber(layout);
}

bool ProcessDomain::claim(Lane *l, unsigned int slot_index, uint64_t generation,
			  gpuslot_slot *slot)
{
	bool newer;
	{
		std::lock_guard<std::mutex> hold(lock_);
		newer = sets_->newer(generation);
	}
	// An unchanged layout at a new number (gpuslotd restarted; a hold
	// taken back comes with the restart's generation) needs no streams.
	if (newer && !renumber(generation))
		return false;
	std::lock_guard<std::mutex> hold(lock_);
	StreamSets::Handout h;
	// A grant from a newer layout than the streams', or of a slot they
	// do not have, cannot be served with the right partition.
	if (sets_->newer(generation) || !sets_->hand_out(slot_index, &h))
		return false;
	l->state = LaneState::holding;
	l->generation = h.generation;
	l->stream = h.stream;
	l->slot_index = slot_index;
	l->holder_tid = this_thread_id();
	l->priority = h.priority;
	l->held = true;
	l->outranked = false;
	if (const SlotLayout *layout = sets_->layout())
		for (unsigned int j = 0; j < layout->k; j++)
			l->outranked |= layout->priority(j) > h.priority;
	slot->index = slot_index;
	slot->units = h.units;
	slot->priority = h.priority;
	slot->generation = h.generation;
	slot->stream = h.stream;
	slot->poll_fd = l->file->fd();
	slot->handle = make_handle(l->index, l->serial);
	return true;
}

int ProcessDomain::file_release(LockFile &file)
{
	gpuslot_release r{};
	r.size = sizeof(r);
	return file.call(GPUSLOT_IOC_RELEASE, &r);
}

int ProcessDomain::regrant(Lane *lane, uint64_t generation, std::string *error)
{
	// Nothing ran on the slot: no stream to wait for.
	file_release(*lane->file);
	bool newer;
	{
		std::lock_guard<std::mutex> hold(lock_);
		newer = sets_->newer(generation);
	}
	if (newer) {
		int err = refresh(error);
		if (err < 0)
			return err;
	}
	return 0;
}

void ProcessDomain::keep_holds()
{
	if (config_.transport != Transport::socket)
		return;
	std::vector<Lane *> ended;
	{
		std::lock_guard<std::mutex> hold(lock_);
		for (Lane &l : lanes_)
			if (l.state == LaneState::holding && !l.lost && l.file->gone()) {
				l.state = LaneState::reclaiming;
				ended.push_back(&l);
			}
	}
	if (ended.empty())
		return;
	for (Lane *l : ended) {
		// A hold not taken back is the lane's holder's to learn, at
		// its release.
		std::string ignored;
		keep_hold(l, &ignored);
		std::lock_guard<std::mutex> hold(lock_);
		l->state = LaneState::holding;
	}
	reclaimed_.notify_all();
}

int ProcessDomain::keep_hold(Lane *lane, std::string *error)
{
	std::unique_ptr<LockFile> file;
	// gpuslotd not (yet) listening: the lane stays as it is, for the next
	// call to try again within the grace period.
	if (int err = open_lane_file(lane->token, &file, error))
		return err;
	// Its slot only, at once, and only the hold the new gpuslotd kept for
	// this token (RECLAIM): a slot merely free again (the grace period
	// over, another holder come and gone) is no hold kept, and the lane's
	// holder must learn that it lost it. The boost is the holder
	// thread's, as before the restart.
	gpuslot_acquire a{};
	a.size = sizeof(a);
	a.flags = GPUSLOT_ACQUIRE_TRY | GPUSLOT_ACQUIRE_RECLAIM;
	a.allowed_mask = 1ULL << lane->slot_index;
	const int err = file->call_for(lane->holder_tid, GPUSLOT_IOC_ACQUIRE, &a);
	lane->file = std::move(file);
	if (err) {
		lane->lost = true;
		*error = err == EAGAIN ? "the restarted gpuslotd did not keep the hold (its grace "
					 "period ended, or the layout changed)"
				       : acquire_message(err);
		return -err;
	}
	// The lane holds on its new connection: its stream and generation are
	// the hold's as before; an acquire renumbers or rebuilds the streams.
	// The new gpuslotd knows no work of it: the gate's next command
	// reports it again.
	std::lock_guard<std::mutex> hold(lock_);
	lane->work_pending = false;
	return 0;
}

int ProcessDomain::begin_acquire(uint64_t allowed, const void *owner, uint64_t *mask, Lane **lane,
				 std::string *error)
{
	keep_holds();
	if (int err = reconnect(error))
		return err;
	if (int err = effective_mask(allowed, mask, error))
		return err;
	return take_lane(owner, lane, error);
}

int ProcessDomain::acquire(int64_t timeout_ns, uint64_t allowed, gpuslot_slot *slot,
			   const void *owner, std::string *error)
{
	const uint64_t deadline = timeout_ns > 0 ? now_ns() + uint64_t(timeout_ns) : 0;
	uint64_t mask;
	Lane *lane;
	if (int err = begin_acquire(allowed, owner, &mask, &lane, error))
		return err;
	for (;;) {
		gpuslot_acquire a{};
		a.size = sizeof(a);
		a.allowed_mask = mask;
		if (timeout_ns == 0) {
			a.flags = GPUSLOT_ACQUIRE_TRY;
		} else if (timeout_ns > 0) {
			// One absolute deadline for every round: a regrant
			// after a layout change waits no longer in total.
			a.flags = GPUSLOT_ACQUIRE_DEADLINE;
			a.deadline_ns = deadline;
		}
		if (int err = lane->file->call(GPUSLOT_IOC_ACQUIRE, &a)) {
			const int ret = err == ECONNRESET ? connection_lost(lane, "ACQUIRE", error)
							  : (*error = acquire_message(err), -err);
			put_lane(lane);
			return ret;
		}
		if (claim(lane, a.slot, a.generation, slot))
			return 0;
		if (int err = regrant(lane, a.generation, error)) {
			put_lane(lane);
			return err;
		}
		if (int err = effective_mask(allowed, &mask, error)) {
			put_lane(lane);
			return err;
		}
	}
}

int ProcessDomain::release(gpuslot_slot *slot, uint32_t flags, std::string *error)
{
	Lane *lane;
	if (int err = lane_of(slot, LaneState::holding, &lane, error))
		return err;
	end_launches(lane);
	int ret = 0;
	// The job's GPU work ends before the next holder's starts.
	if (!(flags & GPUSLOT_RELEASE_NO_SYNC) && lane->stream) {
		std::string why;
		if (int err = backend_->synchronize(lane->stream, &why)) {
			*error = "slot " + std::to_string(slot->index) + ": " + why +
				 " (the slot is released all the same)";
			ret = err;
		}
	}
	// gpuslotd restarted under the hold: take it back first (it kept it
	// for this lane), so that the release hands the slot to the next
	// waiter now, not at the end of the grace period.
	keep_holds();
	std::string why;
	if (!lane->lost && lane->file->gone() && keep_hold(lane, &why)) {
		connection_lost(lane, "RELEASE", error);
		*error += " (" + why + ")";
		ret = -ECONNRESET;
	} else if (lane->lost) {
		ret = connection_lost(lane, "RELEASE", error);
		*error += " (the restarted gpuslotd did not keep the hold)";
	} else if (int err = file_release(*lane->file)) {
		if (err == ECONNRESET) {
			ret = connection_lost(lane, "RELEASE", error);
		} else {
			*error = std::string("RELEASE: ") + strerror(err);
			ret = -err;
		}
	}
	{
		std::lock_guard<std::mutex> hold(lock_);
		// The gate's events go before their generation may be retired.
		lane->gate.reset();
		sets_->hold_ended(lane->generation);
	}
	put_lane(lane);
	slot->handle = 0;
	return ret;
}

int ProcessDomain::queue_async(Lane *lane, std::string *error)
{
	gpuslot_acquire a{};
	a.size = sizeof(a);
	a.allowed_mask = lane->allowed;
	if (int err = lane->file->call(GPUSLOT_IOC_ACQUIRE_ASYNC, &a)) {
		if (err == ECONNRESET)
			return connection_lost(lane, "ACQUIRE_ASYNC", error);
		*error = err == ENOTTY ? "the loaded module has no asynchronous acquire: load "
					 "the one built with this library"
				       : acquire_message(err);
		return -err;
	}
	std::lock_guard<std::mutex> hold(lock_);
	lane->state = LaneState::pending;
	return 0;
}

int ProcessDomain::start(uint64_t allowed, gpuslot_slot *slot, const void *owner,
			 std::string *error)
{
	uint64_t mask;
	Lane *lane;
	if (int err = begin_acquire(allowed, owner, &mask, &lane, error))
		return err;
	lane->allowed = mask;
	if (int err = queue_async(lane, error)) {
		put_lane(lane);
		return err;
	}
	std::lock_guard<std::mutex> hold(lock_);
	slot->poll_fd = lane->file->fd();
	slot->handle = make_handle(lane->index, lane->serial);
	return 0;
}

int ProcessDomain::complete(gpuslot_slot *slot, std::string *error)
{
	Lane *lane;
	if (int err = lane_of(slot, LaneState::pending, &lane, error))
		return err;
	// The acquire is over, failed: the lane goes back, the slot is void.
	auto end = [&](int ret) {
		put_lane(lane);
		slot->handle = 0;
		return ret;
	};
	gpuslot_acquire a{};
	a.size = sizeof(a);
	int err = lane->file->call(GPUSLOT_IOC_ACQUIRE_COMPLETE, &a);
	if (err == EAGAIN) {
		std::lock_guard<std::mutex> hold(lock_);
		lane->state = LaneState::pending;
		*error = "not granted yet: poll slot.poll_fd";
		return -EAGAIN;
	}
	if (err == ECONNRESET)
		return end(connection_lost(lane, "ACQUIRE_COMPLETE", error));
	if (err) {
		*error = err == EINVAL ? "k shrank below every slot allowed_mask allows"
				       : std::string("ACQUIRE_COMPLETE: ") + strerror(err);
		return end(-err);
	}
	if (claim(lane, a.slot, a.generation, slot))
		return 0;
	// The grant needs new streams: build them, then queue again.
	if (int e = regrant(lane, a.generation, error))
		return end(e);
	if (int e = queue_async(lane, error))
		return end(e);
	*error = "the layout changed: new streams were built and the slot was queued again";
	return -EAGAIN;
}

int ProcessDomain::cancel(gpuslot_slot *slot, std::string *error)
{
	Lane *lane;
	if (int err = lane_of(slot, LaneState::pending, &lane, error))
		return err;
	gpuslot_release r{};
	r.size = sizeof(r);
	int err = lane->file->call(GPUSLOT_IOC_ACQUIRE_CANCEL, &r);
	// A lost connection cancelled everything already.
	if (err == ECONNRESET) {
		lane->lost = true;
		control_lost_ = true;
		err = 0;
	}
	put_lane(lane);
	slot->handle = 0;
	if (err) {
		*error = std::string("ACQUIRE_CANCEL: ") + strerror(err);
		return -err;
	}
	return 0;
}

int ProcessDomain::refresh(std::string *error)
{
	keep_holds();
	if (int err = reconnect(error))
		return err;
	std::lock_guard<std::mutex> building(build_lock_);
	SlotLayout layout;
	if (int err = read_layout(&layout, error))
		return err;
	{
		std::lock_guard<std::mutex> hold(lock_);
		if (!sets_->newer(layout.generation) || sets_->renumber(layout))
			return 0;
	}
	StreamSets::Generation g;
	if (int err = sets_->build(layout, &g, error))
		return err;
	std::lock_guard<std::mutex> hold(lock_);
	sets_->install(std::move(g));
	return 1;
}

int ProcessDomain::retire(uint64_t generation, std::string *error)
{
	std::lock_guard<std::mutex> building(build_lock_);
	std::lock_guard<std::mutex> hold(lock_);
	if (int err = sets_->retire(generation)) {
		*error = "a slot of generation " + std::to_string(generation) +
			 " or older is still held: release it first";
		return err;
	}
	return 0;
}

void ProcessDomain::info(gpuslot_layout_info *out, std::string *notice)
{
	std::lock_guard<std::mutex> hold(lock_);
	const SlotLayout *l = sets_->layout();
	out->k = l->k;
	out->unit_kind = l->unit_kind;
	out->nr_units = l->nr_units;
	out->hqd_reserved = sets_->reserved();
	out->live_generations = sets_->live_sets();
	out->generation = l->generation;
	out->rebuilds = sets_->builds() - 1;
	out->backend = backend_->name();
	out->device = backend_->device_ordinal();
	out->unit_size = l->unit_size ? l->unit_size : 1;
	*notice = backend_->notice();
}

int ProcessDomain::set_work(const gpuslot_slot *slot, bool pending, std::string *error)
{
	Lane *lane;
	if (int err = lane_of(slot, LaneState::holding, &lane, error))
		return err;
	int ret = 0;
	std::string why;
	// gpuslotd restarted under the hold: take it back first (it kept it
	// for this lane), and report to the new server. One not listening
	// yet leaves the lane as it is, for a later call to try again.
	if (!lane->lost && lane->file->gone() && keep_hold(lane, &why)) {
		ret = connection_lost(nullptr, "SET_WORK", error);
		*error += " (" + why + ")";
	} else if (lane->lost) {
		ret = connection_lost(lane, "SET_WORK", error);
		*error += " (the restarted gpuslotd did not keep the hold)";
	} else {
		struct gpuslot_set_work w{};
		w.size = sizeof(w);
		w.flags = pending ? GPUSLOT_WORK_PENDING : 0;
		const int err = lane->file->call(GPUSLOT_IOC_SET_WORK, &w);
		if (err == ENOTTY || err == EINVAL) {
			// A module or gpuslotd before it: the command, or its
			// size, unknown.
			*error = "SET_WORK: the lock predates preemptive slots (upgrade the gpuslot "
				 "module or gpuslotd)";
			ret = -EOPNOTSUPP;
		} else if (err == ECONNRESET) {
			ret = connection_lost(lane, "SET_WORK", error);
		} else if (err == EPERM) {
			// The lock holds no completed slot for this file.
			*error = "SET_WORK: this slot is no longer held by this client";
			ret = -EINVAL;
		} else if (err) {
			*error = std::string("SET_WORK: ") + strerror(err);
			ret = -err;
		}
	}
	std::lock_guard<std::mutex> hold(lock_);
	lane->state = LaneState::holding;
	if (!ret)
		lane->work_pending = pending;
	return ret;
}

ProcessDomain::Lane *ProcessDomain::held_lane(const gpuslot_slot *slot)
{
	const uint64_t h = slot->handle;
	const unsigned int i = unsigned(h >> 32) - 1;
	if (!h || i >= lanes_.size() || lanes_[i].serial != uint32_t(h) || !lanes_[i].held)
		return nullptr;
	return &lanes_[i];
}

namespace {

// Whether a slot of priority above @priority preempts, from the published
// state: what gpuslot_work_preempts() says, asked before every command.
class WorkPreempts final : public PreemptView {
public:
	WorkPreempts(WorkState *work, unsigned int priority) : work_(work), priority_(priority) {}
	bool preempted() override
	{
		gpuslot_work_state st;
		std::string error;
		// Unreadable (gpuslotd gone, not yet mapped again): nothing is
		// published, so nothing holds the sender back.
		if (work_->snapshot(&st, &error) < 0)
			return false;
		return uint64_t(st.preempt_level) > uint64_t(priority_) + 1;
	}

private:
	WorkState *const work_;
	const unsigned int priority_;
};

// Begins without their end per gate: a begin whose end never comes is
// dropped after kMaxOpen.
constexpr size_t kMaxOpen = 256;

// One bound per hold: 0, or -EINVAL where @inflight is not @gate's.
template <class Gate> int same_bound(const Gate &gate, unsigned int inflight, std::string *error)
{
	if (gate.inflight == inflight)
		return 0;
	*error = "this hold's launch gate was opened with a bound of " +
		 std::to_string(gate.inflight) + " in flight, not " + std::to_string(inflight) +
		 ": one bound per hold";
	return -EINVAL;
}

} // namespace

void ProcessDomain::end_launches(Lane *lane)
{
	std::lock_guard<std::mutex> hold(lock_);
	lane->held = false;
	reported_.notify_all();
}

int ProcessDomain::launch_gate(Lane *lane, unsigned int inflight,
			       std::shared_ptr<LaunchGate> *out, std::string *error)
{
	if (lane->gate) {
		if (int err = same_bound(*lane->gate, inflight, error))
			return err;
		*out = lane->gate;
		return 0;
	}
	if (!lane->stream) {
		*error = std::string("the ") + backend_->name() +
			 " backend gave this slot no stream to gate (gpuslot-run throttles a "
			 "program's own streams)";
		return -EOPNOTSUPP;
	}
	auto gate = std::make_shared<LaunchGate>();
	if (int err = backend_->make_markers(lane->stream, &gate->markers, error))
		return err;
	gate->preempt = std::make_unique<WorkPreempts>(work_.get(), lane->priority);
	Throttle t;
	t.suspend = true;
	t.inflight = lane->outranked ? inflight : 0;
	t.preempt = gate->preempt.get();
	t.markers = gate->markers.get();
	gate->throttle = std::make_unique<LaunchThrottle>(t);
	gate->inflight = inflight;
	gate->stream = lane->stream;
	*out = std::move(gate);
	return 0;
}

int ProcessDomain::launch_begin(const gpuslot_slot *slot, unsigned int inflight,
				std::string *error)
{
	std::shared_ptr<LaunchGate> gate;
	Lane *lane;
	{
		std::unique_lock<std::mutex> hold(lock_);
		lane = held_lane(slot);
		if (!lane) {
			*error = "this slot is not held by this client (released already?)";
			return -EINVAL;
		}
		if (int err = launch_gate(lane, inflight, &gate, error))
			return err;
	}
	{
		// The job's first command: its work edge, so that lower slots
		// yield to it, told by one thread while the others wait for it.
		std::unique_lock<std::mutex> hold(lock_);
		reported_.wait(hold, [&] { return !lane->reporting || !lane->held; });
		if (!lane->held) {
			*error = "this slot was released while the command waited to be sent";
			return -EINVAL;
		}
		if (!lane->work_pending) {
			lane->reporting = true;
			hold.unlock();
			int err = 0;
			// A command captured into a graph does not run now: it
			// reports no work (nor is it held back or counted:
			// LaunchThrottle::before()). Asked only here, not at
			// every command.
			if (!gate->markers->capturing(gate->stream)) {
				// The published state must be readable too: a
				// lock that predates it fails here, not at every
				// command.
				gpuslot_work_state st;
				err = work_->snapshot(&st, error);
				if (!err)
					err = set_work(slot, true, error);
			}
			hold.lock();
			lane->reporting = false;
			reported_.notify_all();
			if (err)
				return err;
		}
		// The gate is the hold's once a begin succeeds (a failed first
		// one leaves no bound fixed); another thread's first may have
		// made it meanwhile.
		if (!lane->gate)
			lane->gate = gate;
		if (int err = same_bound(*lane->gate, inflight, error))
			return err;
		gate = lane->gate;
	}
	const bool marked = gate->throttle->before(StreamKey{gate->stream, 0});
	std::lock_guard<std::mutex> open(gate->open_lock);
	if (gate->open.size() >= kMaxOpen)
		gate->open.erase(gate->open.begin());
	gate->open.push_back({pthread_self(), marked});
	return 0;
}

int ProcessDomain::launch_end(const gpuslot_slot *slot, std::string *error)
{
	std::shared_ptr<LaunchGate> gate;
	{
		std::lock_guard<std::mutex> hold(lock_);
		Lane *lane = held_lane(slot);
		if (!lane) {
			*error = "this slot is not held by this client (released already?)";
			return -EINVAL;
		}
		gate = lane->gate;
	}
	bool marked = false, found = false;
	if (gate) {
		// This thread's newest begin: the command that took a place in
		// the bound is the one marked, whatever other threads do.
		const pthread_t self = pthread_self();
		std::lock_guard<std::mutex> open(gate->open_lock);
		auto it = std::find_if(gate->open.rbegin(), gate->open.rend(),
				       [&](const LaunchGate::Begin &b) {
					       return pthread_equal(b.thread, self);
				       });
		if (it != gate->open.rend()) {
			found = true;
			marked = it->marked;
			gate->open.erase(std::next(it).base());
		}
	}
	if (!found) {
		*error = "no gpuslot_launch_begin() of this thread in this hold to end";
		return -EINVAL;
	}
	gate->throttle->after(StreamKey{gate->stream, 0}, marked);
	return 0;
}

int ProcessDomain::slot_priority(unsigned int slot)
{
	std::lock_guard<std::mutex> hold(lock_);
	const SlotLayout *l = sets_->layout();
	if (!l || slot >= l->k)
		return -EINVAL;
	return int(l->priority(slot));
}

int ProcessDomain::slots_context(uint64_t slots, void **context, uint64_t *generation,
				 std::string *error)
{
	// Only the cuda backend's contexts are green contexts.
	if (std::string(backend_->name()) != "cuda") {
		*error = "gpuslot_slots_context() needs a client of the cuda backend";
		return -EOPNOTSUPP;
	}
	// A union's context is built here, once: serialised with builds,
	// under the lock holders take for the few milliseconds it takes.
	std::lock_guard<std::mutex> building(build_lock_);
	std::lock_guard<std::mutex> hold(lock_);
	return sets_->lend_context(slots, context, generation, error);
}

int ProcessDomain::read_attr(const std::string &name, std::string *text)
{
	// build_lock_: reconnect() replaces the control file under it.
	std::lock_guard<std::mutex> building(build_lock_);
	return -control_->read_attr(name, text);
}

void ProcessDomain::drop_owner(const void *owner)
{
	for (unsigned int i = 0;; i++) {
		LaneState state;
		Lane *lane;
		{
			std::unique_lock<std::mutex> hold(lock_);
			if (i >= lanes_.size())
				return;
			lane = &lanes_[i];
			reclaimed_.wait(hold, [&] { return lane->state != LaneState::reclaiming; });
			if (lane->owner != owner || (lane->state != LaneState::holding &&
						     lane->state != LaneState::pending))
				continue;
			state = lane->state;
			lane->state = LaneState::busy;
		}
		if (state == LaneState::holding) {
			end_launches(lane);
			file_release(*lane->file);
			std::lock_guard<std::mutex> hold(lock_);
			lane->gate.reset();
			sets_->hold_ended(lane->generation);
		} else {
			gpuslot_release r{};
			r.size = sizeof(r);
			lane->file->call(GPUSLOT_IOC_ACQUIRE_CANCEL, &r);
		}
		put_lane(lane);
	}
}

} // namespace gpuslot
