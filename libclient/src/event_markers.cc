// SPDX-License-Identifier: LGPL-2.1-or-later
// Launch markers over a runtime's events (backend.hpp, EventOps): what the
// cuda and hip backends give gpuslot_launch_begin()'s bound.
#include <vector>

#include "backend.hpp"

namespace gpuslot {
namespace {

// The events of one stream's markers: made on first need, for that stream,
// and reused; the throttle serialises the calls (its mutex).
class EventMarkers final : public Markers {
public:
	EventMarkers(const EventOps &ops, void *stream) : ops_(ops), stream_(stream) {}
	~EventMarkers() override
	{
		for (void *e : free_)
			ops_.destroy(e);
	}
	EventMarkers(const EventMarkers &) = delete;
	EventMarkers &operator=(const EventMarkers &) = delete;

	bool capturing(void *stream) override
	{
		bool captured = false;
		// An error: leave the command alone, as a captured one.
		return ops_.capturing(stream, &captured) != 0 || captured;
	}
	void *record(void *stream) override
	{
		// Made for this stream only (its context, its device).
		if (stream != stream_)
			return nullptr;
		void *e = nullptr;
		if (!free_.empty()) {
			e = free_.back();
			free_.pop_back();
		} else if (ops_.create(stream_, &e) != 0) {
			return nullptr;
		}
		if (ops_.record(e, stream_) != 0) {
			ops_.destroy(e);
			return nullptr;
		}
		return e;
	}
	bool reached(void *marker) override { return ops_.query(marker) != ops_.not_ready; }
	void recycle(void *marker) override { free_.push_back(marker); }

private:
	const EventOps ops_;
	void *const stream_;
	std::vector<void *> free_;
};

} // namespace

std::unique_ptr<Markers> make_event_markers(const EventOps &ops, void *stream)
{
	if (!ops.create || !ops.record || !ops.query || !ops.destroy || !ops.capturing || !stream)
		return nullptr;
	return std::make_unique<EventMarkers>(ops, stream);
}

} // namespace gpuslot
