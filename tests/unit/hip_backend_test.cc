// SPDX-License-Identifier: GPL-2.0
// The hip backend against a test double of the HIP entry points it calls
// (HipApi), and the choice of the HIP runtime against a test double of the
// dynamic loader: the masks it passes, the device it picks by PCI address
// (also when HIP_VISIBLE_DEVICES renumbers), that the caller's device comes
// back, which libamdhip64 it uses, and every error path.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <linux/gpuslot.h>

#include <cerrno>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "hip_backend.hpp"

namespace {

// The test double of HIP: records every call; fails where told to. The
// devices it sees are @visible, by PCI address, in HIP's order.
struct HipDouble {
	static inline std::vector<std::string> calls;
	static inline std::vector<std::string> visible;
	static inline int current = 0;
	static inline int fail_set_device = 0;
	static inline int fail_create_at = -1; // the n-th create fails
	static inline int fail_sync = 0;
	static inline int creates = 0;
	static inline uintptr_t next_stream = 0x1000;
	// ROCclr's levels: Low 1, Normal 0 (hipStreamCreate's), High -1.
	static inline int greatest = -1;
	static inline int clamp_to = 0; // != 0: created streams get this priority
	static inline std::map<uintptr_t, int> priority_of;

	static void reset()
	{
		calls.clear();
		visible = {"0000:03:00.0", "0000:43:00.0"};
		current = 0;
		fail_set_device = 0;
		fail_create_at = -1;
		fail_sync = 0;
		creates = 0;
		next_stream = 0x1000;
		greatest = -1;
		clamp_to = 0;
		priority_of.clear();
	}

	static std::string hex(const uint32_t *m, uint32_t n)
	{
		std::string s;
		char buf[16];
		for (uint32_t i = n; i-- > 0;) {
			snprintf(buf, sizeof(buf), "%08x", m[i]);
			s += buf;
		}
		return s;
	}

	static gpuslot::HipRuntime runtime(unsigned int pool = 1, bool preloaded = false)
	{
		gpuslot::HipRuntime rt;
		rt.soname = "libamdhip64.so.6";
		rt.preloaded = preloaded;
		rt.pool_queues = pool;
		gpuslot::HipApi &a = rt.api;
		a.get_device = [](int *d) {
			*d = current;
			return 0;
		};
		a.set_device = [](int d) {
			calls.push_back("set_device " + std::to_string(d));
			if (fail_set_device)
				return fail_set_device;
			current = d;
			return 0;
		};
		a.device_count = [](int *n) {
			*n = int(visible.size());
			return 0;
		};
		a.device_by_pci_bus_id = [](int *d, const char *id) {
			for (size_t i = 0; i < visible.size(); i++)
				if (visible[i] == id) {
					*d = int(i);
					return 0;
				}
			return 101; // hipErrorInvalidDevice's neighbour
		};
		a.stream_create = [](void **s) {
			calls.push_back("create");
			if (creates++ == fail_create_at)
				return 101;
			*s = reinterpret_cast<void *>(next_stream++);
			return 0;
		};
		a.stream_create_with_cu_mask = [](void **s, uint32_t n, const uint32_t *m) {
			calls.push_back("create_masked " + hex(m, n));
			if (creates++ == fail_create_at)
				return 2; // hipErrorOutOfMemory
			*s = reinterpret_cast<void *>(next_stream++);
			return 0;
		};
		a.stream_create_with_priority = [](void **s, int priority) {
			calls.push_back("create_priority " + std::to_string(priority));
			if (creates++ == fail_create_at)
				return 2;
			priority_of[next_stream] = clamp_to ? clamp_to : priority;
			*s = reinterpret_cast<void *>(next_stream++);
			return 0;
		};
		a.priority_range = [](int *least, int *most) {
			calls.push_back("priority_range");
			*least = 1;
			*most = greatest;
			return 0;
		};
		a.stream_priority = [](void *s, int *priority) {
			*priority = priority_of[reinterpret_cast<uintptr_t>(s)];
			return 0;
		};
		a.stream_synchronize = [](void *s) {
			calls.push_back("sync " + std::to_string(reinterpret_cast<uintptr_t>(s)));
			return fail_sync;
		};
		a.stream_destroy = [](void *s) {
			calls.push_back("destroy " + std::to_string(reinterpret_cast<uintptr_t>(s)));
			return 0;
		};
		a.error_string = [](int e) {
			return e == 2 ? "hipErrorOutOfMemory" : e == 719 ? "hipErrorLaunchFailure"
									   : "hipErrorUnknown";
		};
		// Launch markers: an event says the device current at its
		// making; one query in two says hipErrorNotReady (600).
		a.events.create = [](void *s, void **e) {
			calls.push_back("event_create " + std::to_string(reinterpret_cast<uintptr_t>(s)) +
					" on " + std::to_string(current));
			*e = reinterpret_cast<void *>(uintptr_t(0x9000 + current));
			return 0;
		};
		a.events.record = [](void *e, void *s) {
			calls.push_back("event_record " + std::to_string(reinterpret_cast<uintptr_t>(e)) +
					" " + std::to_string(reinterpret_cast<uintptr_t>(s)));
			return 0;
		};
		a.events.query = [](void *) { return creates++ % 2 ? 0 : 600; };
		a.events.destroy = [](void *e) {
			calls.push_back("event_destroy " + std::to_string(reinterpret_cast<uintptr_t>(e)));
			return 0;
		};
		a.events.capturing = [](void *, bool *c) {
			*c = false;
			return 0;
		};
		a.events.not_ready = 600;
		return rt;
	}
};

gpuslot::SlotLayout layout(std::vector<std::vector<uint32_t>> masks)
{
	gpuslot::SlotLayout l;
	l.k = masks.size();
	l.unit_kind = GPUSLOT_UNIT_AMD_CU;
	l.unit_size = 1;
	l.nr_units = 60;
	l.masks = std::move(masks);
	return l;
}

gpuslot::DeviceChoice at(const char *pci_bus_id, unsigned int domain = 0)
{
	gpuslot::DeviceChoice d;
	d.pci_bus_id = pci_bus_id;
	d.domain = domain;
	return d;
}

class HipBackend : public testing::Test {
protected:
	void SetUp() override
	{
		HipDouble::reset();
		unsetenv("HIP_VISIBLE_DEVICES");
	}
	gpuslot::StreamSet set;
	std::string error;
};

TEST_F(HipBackend, OneMaskedStreamPerSlotOnTheDomainsGpu)
{
	auto b = gpuslot::make_hip_backend(HipDouble::runtime(), at("0000:43:00.0"));
	auto l = layout({{0x33333333, 0x3333333}, {0xcccccccc, 0xccccccc}});
	EXPECT_EQ(b->set_queues(l, 0x3), 2u);
	EXPECT_EQ(b->set_queues(l, 0x2), 1u);
	EXPECT_EQ(b->runtime_queues(), 1u + gpuslot::kHipRuntimeQueues);
	// Radeon VII k = 2: SEs 0-1 and 2-3, on HIP device 1, found by its
	// PCI address; the thread's device 0 comes back afterwards.
	ASSERT_EQ(b->build(l, 0x3, &set, &error), 0) << error;
	EXPECT_EQ(HipDouble::calls,
		  (std::vector<std::string>{"set_device 1", "create_masked 0333333333333333",
					    "create_masked 0ccccccccccccccc", "set_device 0"}));
	EXPECT_EQ(set.slots, 0x3u);
	EXPECT_EQ(set.streams, (std::vector<void *>{reinterpret_cast<void *>(0x1000),
						     reinterpret_cast<void *>(0x1001)}));
	EXPECT_EQ(HipDouble::current, 0);
}

// gpuslot_launch_begin()'s markers on HIP: events made with the domain's
// GPU current (HIP makes an event on the current device), the thread's
// device back after, recorded on the slot's stream, reused, destroyed with
// the markers; hipErrorNotReady is "not reached". Without HIP's event entry
// points there are none, and the reason is given.
TEST_F(HipBackend, LaunchMarkersAreEventsOfTheDomainsGpu)
{
	auto b = gpuslot::make_hip_backend(HipDouble::runtime(), at("0000:43:00.0"));
	auto l = layout({{0x33333333, 0x3333333}, {0xcccccccc, 0xccccccc}});
	ASSERT_EQ(b->build(l, 0x3, &set, &error), 0) << error;
	HipDouble::calls.clear();
	HipDouble::creates = 0;
	std::unique_ptr<gpuslot::Markers> m;
	ASSERT_EQ(b->make_markers(set.streams[1], &m, &error), 0) << error;
	void *e = m->record(set.streams[1]);
	ASSERT_NE(e, nullptr);
	EXPECT_FALSE(m->reached(e));
	EXPECT_TRUE(m->reached(e));
	m->recycle(e);
	EXPECT_EQ(m->record(set.streams[1]), e) << "a recycled event was not reused";
	EXPECT_EQ(m->record(set.streams[0]), nullptr) << "a marker on another slot's stream";
	m->recycle(e);
	m.reset();
	EXPECT_EQ(HipDouble::calls,
		  (std::vector<std::string>{"set_device 1", "event_create 4097 on 1", "set_device 0",
					    "event_record 36865 4097", "event_record 36865 4097",
					    "event_destroy 36865"}));
	EXPECT_EQ(HipDouble::current, 0);

	gpuslot::HipRuntime bare = HipDouble::runtime();
	bare.api.events = gpuslot::EventOps{};
	auto old = gpuslot::make_hip_backend(bare, at("0000:43:00.0"));
	EXPECT_EQ(old->make_markers(set.streams[1], &m, &error), -EOPNOTSUPP);
	EXPECT_EQ(m, nullptr);
	EXPECT_NE(error.find("hipEventCreateWithFlags"), std::string::npos) << error;
}

// Issue 32: HIP has no priority for a CU-masked stream; a masked slot of
// another priority than 0 is refused in words, nothing created.
TEST_F(HipBackend, ASlotPriorityIsRefusedPlainly)
{
	auto b = gpuslot::make_hip_backend(HipDouble::runtime(), at("0000:43:00.0"));
	auto l = layout({{0x33333333, 0x3333333}, {0xcccccccc, 0xccccccc}});
	l.priorities = {0, 2};
	EXPECT_EQ(b->build(l, 0x3, &set, &error), -EOPNOTSUPP);
	EXPECT_EQ(error, "slot 1 has priority 2: HIP offers no stream priority for a CU-masked "
			 "stream (hipExtStreamCreateWithCUMask has no priority argument), so the "
			 "hip backend serves a priority other than 0 only on a slot on the whole GPU");
	EXPECT_TRUE(HipDouble::calls.empty());
	// Slot 0 alone, at priority 0, is served.
	ASSERT_EQ(b->build(l, 0x1, &set, &error), 0) << error;
	EXPECT_EQ(set.priorities, (std::vector<unsigned int>{0, 0}));
}

// Issue 32 on AMD: a slot on the whole GPU (no mask: layout = protect's
// slot 0) is a plain stream at HIP's priority 0 - p, read back; it takes a
// queue of HIP's high-priority pool. Beyond the levels HIP offers, and
// where HIP made the stream at another priority, it is refused.
TEST_F(HipBackend, AWholeGpuSlotGetsItsPriorityAndItIsReadBack)
{
	auto b = gpuslot::make_hip_backend(HipDouble::runtime(), at("0000:43:00.0"));
	auto l = layout({{}, {0x33333333, 0x3333333}, {0xcccccccc, 0xccccccc}});
	l.priorities = {1, 0, 0};
	EXPECT_EQ(b->set_queues(l, 0x7), 3u);
	EXPECT_EQ(b->set_queues(l, 0x6), 2u);
	// Counted per slot, so that giving back slot by slot adds up.
	auto raised = layout({{}, {}, {0xf}});
	raised.priorities = {1, 1, 0};
	EXPECT_EQ(b->set_queues(raised, 0x7), 3u);
	EXPECT_EQ(b->set_queues(raised, 0x1) + b->set_queues(raised, 0x2) + b->set_queues(raised, 0x4),
		  b->set_queues(raised, 0x7));
	ASSERT_EQ(b->build(l, 0x7, &set, &error), 0) << error;
	EXPECT_EQ(HipDouble::calls,
		  (std::vector<std::string>{"priority_range", "set_device 1", "create_priority -1",
					    "create_masked 0333333333333333",
					    "create_masked 0ccccccccccccccc", "set_device 0"}));
	EXPECT_EQ(set.priorities, (std::vector<unsigned int>{1, 0, 0}));

	// Priority 2: HIP has one level above the default.
	HipDouble::reset();
	gpuslot::StreamSet two;
	l.priorities = {2, 0, 0};
	EXPECT_EQ(b->build(l, 0x7, &two, &error), -EOPNOTSUPP);
	EXPECT_EQ(error, "slot 0 has priority 2: HIP offers 1 level(s) above the default "
			 "(priorities 1 to -1, the default 0), so the hip backend serves priorities "
			 "0 to 1");
	EXPECT_EQ(HipDouble::calls, (std::vector<std::string>{"priority_range"}));

	// A stream HIP made at another priority than asked is destroyed, and
	// nothing is served.
	HipDouble::reset();
	HipDouble::clamp_to = -2;
	gpuslot::StreamSet clamped;
	l.priorities = {1, 0, 0};
	EXPECT_EQ(b->build(l, 0x7, &clamped, &error), -EIO);
	EXPECT_EQ(error, "slot 0's stream has HIP priority -2, not -1 (1 level above the default)");
	EXPECT_EQ(HipDouble::calls,
		  (std::vector<std::string>{"priority_range", "set_device 1", "create_priority -1",
					    "sync 4096", "destroy 4096", "set_device 0"}));
	EXPECT_EQ(clamped.slots, 0u);
}

TEST_F(HipBackend, VisibleDevicesRenumberingCannotMoveTheDomain)
{
	// HIP_VISIBLE_DEVICES=1: the domain's GPU is HIP's device 0 now.
	setenv("HIP_VISIBLE_DEVICES", "1", 1);
	HipDouble::visible = {"0000:43:00.0"};
	auto b = gpuslot::make_hip_backend(HipDouble::runtime(), at("0000:43:00.0", 1));
	ASSERT_EQ(b->build(layout({{0xf}}), 0x1, &set, &error), 0) << error;
	EXPECT_EQ(HipDouble::calls[0], "set_device 0");

	// The domain's GPU hidden: an error, not another GPU.
	HipDouble::reset();
	HipDouble::visible = {"0000:03:00.0"};
	auto hidden = gpuslot::make_hip_backend(HipDouble::runtime(), at("0000:43:00.0", 1));
	EXPECT_EQ(hidden->build(layout({{0xf}}), 0x1, &set, &error), -ENODEV);
	EXPECT_EQ(error, "domain 1's GPU 0000:43:00.0 is not visible to HIP in this process "
			 "(HIP_VISIBLE_DEVICES=1 hides it?)");
	EXPECT_TRUE(HipDouble::calls.empty());
}

TEST_F(HipBackend, AnUnknownGpuIsOnlyGuessedWhenThereIsOne)
{
	auto two = gpuslot::make_hip_backend(HipDouble::runtime(), at("", 1));
	EXPECT_EQ(two->build(layout({{0xf}}), 0x1, &set, &error), -ENODEV);
	EXPECT_EQ(error, "domain 1's GPU is unknown (gpuslotd records it in pci_bus_id) and HIP "
			 "sees 2 GPUs: start gpuslotd, or name the device with "
			 "GPUSLOT_OPEN_GPU_INDEX");
	HipDouble::visible = {"0000:03:00.0"};
	auto one = gpuslot::make_hip_backend(HipDouble::runtime(), at(""));
	ASSERT_EQ(one->build(layout({{0xf}}), 0x1, &set, &error), 0) << error;
	EXPECT_EQ(HipDouble::calls[0], "set_device 0");

	// A device named by the caller.
	HipDouble::reset();
	gpuslot::DeviceChoice named;
	named.ordinal = 1;
	auto b = gpuslot::make_hip_backend(HipDouble::runtime(), named);
	ASSERT_EQ(b->build(layout({{0xf}}), 0x1, &set, &error), 0);
	EXPECT_EQ(HipDouble::calls[0], "set_device 1");
	named.ordinal = 2;
	auto missing = gpuslot::make_hip_backend(HipDouble::runtime(), named);
	EXPECT_EQ(missing->build(layout({{0xf}}), 0x1, &set, &error), -ENODEV);
	EXPECT_EQ(error, "HIP device 2 does not exist: HIP sees 2");
}

TEST_F(HipBackend, WholeGpuSlotsUsePlainStreamsAndNoQueueOfTheirOwn)
{
	auto b = gpuslot::make_hip_backend(HipDouble::runtime(), at("0000:03:00.0"));
	auto l = layout({{}, {0xf, 0}, {}});
	EXPECT_EQ(b->set_queues(l, 0x7), 1u);
	ASSERT_EQ(b->build(l, 0x7, &set, &error), 0);
	EXPECT_EQ(HipDouble::calls,
		  (std::vector<std::string>{"set_device 0", "create",
					    "create_masked 000000000000000f", "create"}));
}

TEST_F(HipBackend, OnlyTheSlotsAskedForGetStreams)
{
	auto b = gpuslot::make_hip_backend(HipDouble::runtime(), at("0000:03:00.0"));
	ASSERT_EQ(b->build(layout({{0xf}, {0xf0}, {0xf00}}), 0x4, &set, &error), 0);
	EXPECT_EQ(HipDouble::calls,
		  (std::vector<std::string>{"set_device 0", "create_masked 00000f00"}));
	EXPECT_EQ(set.slots, 0x4u);
	EXPECT_EQ(set.streams[0], nullptr);
}

TEST_F(HipBackend, AFailedStreamDestroysTheOnesBeforeIt)
{
	auto b = gpuslot::make_hip_backend(HipDouble::runtime(), at("0000:03:00.0"));
	HipDouble::fail_create_at = 2;
	EXPECT_EQ(b->build(layout({{0xf}, {0xf0}, {0xf00}}), 0x7, &set, &error), -EIO);
	EXPECT_EQ(error, "hipExtStreamCreateWithCUMask for slot 2: hipErrorOutOfMemory");
	EXPECT_EQ(set.slots, 0u);
	const std::vector<std::string> tail(HipDouble::calls.end() - 4, HipDouble::calls.end());
	EXPECT_EQ(tail, (std::vector<std::string>{"sync 4096", "destroy 4096", "sync 4097",
						  "destroy 4097"}));
}

TEST_F(HipBackend, NoDeviceForeignUnitsAndAFailedSync)
{
	gpuslot::DeviceChoice named;
	named.ordinal = 1;
	auto b = gpuslot::make_hip_backend(HipDouble::runtime(), named);
	HipDouble::fail_set_device = 101;
	EXPECT_EQ(b->build(layout({{0xf}}), 0x1, &set, &error), -ENODEV);
	EXPECT_EQ(error, "hipSetDevice(1): hipErrorUnknown");

	HipDouble::reset();
	auto l = layout({{0xf}});
	l.unit_kind = GPUSLOT_UNIT_NV_SM_GROUP;
	EXPECT_EQ(b->build(l, 0x1, &set, &error), -EOPNOTSUPP);
	EXPECT_TRUE(HipDouble::calls.empty());

	HipDouble::fail_sync = 719;
	EXPECT_EQ(b->synchronize(reinterpret_cast<void *>(0x1000), &error), -EIO);
	EXPECT_EQ(error, "hipStreamSynchronize: hipErrorLaunchFailure");
}

TEST_F(HipBackend, AHipLoadedBeforeKeepsItsPoolAndSaysSo)
{
	auto b = gpuslot::make_hip_backend(HipDouble::runtime(4, true), at(""));
	EXPECT_EQ(b->runtime_queues(), 4u + gpuslot::kHipRuntimeQueues);
	EXPECT_NE(b->notice().find("set GPU_MAX_HW_QUEUES=1"), std::string::npos);
	auto ours = gpuslot::make_hip_backend(HipDouble::runtime(1, false), at(""));
	EXPECT_EQ(ours->notice(), "");
	EXPECT_EQ(gpuslot::hip_pool_queues(nullptr), gpuslot::kHipDefaultPoolQueues);
	EXPECT_EQ(gpuslot::hip_pool_queues("1"), 1u);
	EXPECT_EQ(gpuslot::hip_pool_queues("8"), 8u);
	// As ROCclr reads it: atoi(), an empty value skipped.
	EXPECT_EQ(gpuslot::hip_pool_queues(""), gpuslot::kHipDefaultPoolQueues);
	EXPECT_EQ(gpuslot::hip_pool_queues("3x"), 3u);
	EXPECT_EQ(gpuslot::hip_pool_queues("lots"), 1u) << "0: counted as the one queue";
	EXPECT_EQ(gpuslot::hip_pool_queues("0"), 1u);
	EXPECT_EQ(gpuslot::hip_pool_queues("-1"), gpuslot::kHipUnboundedPoolQueues);
	EXPECT_EQ(gpuslot::hip_pool_queues("5000"), gpuslot::kHipUnboundedPoolQueues);
}

// The test double of the dynamic loader: which sonames are loaded in the
// process and which are installed; records every open.
struct LoaderDouble {
	static inline std::vector<std::string> loaded, installed, calls;
	static inline std::string last_error;

	static gpuslot::Loader loader()
	{
		return {
			[](const char *name, int flags) -> void * {
				const bool noload = flags & RTLD_NOLOAD;
				calls.push_back(std::string(noload ? "noload " : "load ") + name);
				auto &where = noload ? loaded : installed;
				for (auto &n : where)
					if (n == name)
						return &n;
				last_error = std::string(name) + ": cannot open shared object file";
				return nullptr;
			},
			[](void *, const char *) -> void * { return nullptr; },
			[]() -> const char * { return last_error.c_str(); },
		};
	}
};

TEST(HipRuntime, TheRuntimeAlreadyInTheProcessWins)
{
	LoaderDouble::calls.clear();
	LoaderDouble::loaded = {"libamdhip64.so.6"}; // PyTorch-ROCm's
	LoaderDouble::installed = {"libamdhip64.so.7", "libamdhip64.so.6"};
	gpuslot::HipRuntime rt;
	void *h;
	std::string error;
	ASSERT_TRUE(gpuslot::find_hip(LoaderDouble::loader(), &rt, &h, &error));
	EXPECT_EQ(rt.soname, "libamdhip64.so.6");
	EXPECT_TRUE(rt.preloaded);
	EXPECT_EQ(LoaderDouble::calls,
		  (std::vector<std::string>{"noload libamdhip64.so.7", "noload libamdhip64.so.6"}));
}

TEST(HipRuntime, ElseTheNewestThatLoads)
{
	LoaderDouble::calls.clear();
	LoaderDouble::loaded = {};
	LoaderDouble::installed = {"libamdhip64.so.6", "libamdhip64.so.5"};
	gpuslot::HipRuntime rt;
	void *h;
	std::string error;
	ASSERT_TRUE(gpuslot::find_hip(LoaderDouble::loader(), &rt, &h, &error));
	EXPECT_EQ(rt.soname, "libamdhip64.so.6");
	EXPECT_FALSE(rt.preloaded);
	EXPECT_EQ(LoaderDouble::calls,
		  (std::vector<std::string>{"noload libamdhip64.so.7", "noload libamdhip64.so.6",
					    "noload libamdhip64.so.5", "load libamdhip64.so.7",
					    "load libamdhip64.so.6"}));

	LoaderDouble::installed = {};
	EXPECT_FALSE(gpuslot::find_hip(LoaderDouble::loader(), &rt, &h, &error));
	EXPECT_EQ(error, "cannot load HIP (ROCm 5, 6 or 7): libamdhip64.so.7: cannot open shared "
			 "object file; libamdhip64.so.6: cannot open shared object file; "
			 "libamdhip64.so.5: cannot open shared object file");
}

} // namespace
