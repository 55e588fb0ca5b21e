// SPDX-License-Identifier: GPL-2.0
// gpuslot's lock against what users would use instead, measured in the
// same run (tests/bench, `make bench`). Ends with a table of every
// measurement per lock and the ratio gpuslot / alternative.
#include <benchmark/benchmark.h>

#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "locks.hpp"

namespace gpuslot::bench {
namespace {

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1'000'000'000ULL + ts.tv_nsec;
}

template <class Lock> void setup_k1(const benchmark::State &)
{
	Lock::setup(1, true);
}

template <class Lock> void setup_k_from_arg(const benchmark::State &state)
{
	Lock::setup(unsigned(state.range(0)), true);
}

void setup_gpuslot_noboost(const benchmark::State &)
{
	GpuslotLock::setup(1, false);
}

// 1. One acquire + release pair, nobody else around.
template <class Lock> void uncontended(benchmark::State &state)
{
	typename Lock::Client c;
	for (auto _ : state) {
		benchmark::DoNotOptimize(c.acquire());
		c.release();
	}
}

// 1b. The same pair from a thread that already runs SCHED_FIFO above the
// boost priority, as a real-time task on an RT host does: gpuslot has no
// attributes to change (and no sched_setattr call to make).
// The handoff ratios at stake are a few per cent, and under TCG one
// repetition's median moves by up to 10 % with the host's load: the handoff
// benchmarks repeat more often than --benchmark_repetitions says.
constexpr int kHandoffRepetitions = 9;

// The priority of the real-time callers: above gpuslot's boost priority (50).
constexpr int kRtPrio = 60;

// The calling thread runs SCHED_FIFO @prio while this lives (@prio 0: no
// change), and at its own attributes again afterwards.
class ScopedFifo {
public:
	explicit ScopedFifo(int prio) : policy_(sched_getscheduler(0))
	{
		sched_getparam(0, &old_);
		sched_param rt{};
		rt.sched_priority = prio;
		changed_ = prio && !sched_setscheduler(0, SCHED_FIFO, &rt);
		ok_ = !prio || changed_;
	}
	~ScopedFifo()
	{
		if (changed_)
			sched_setscheduler(0, policy_, &old_);
	}
	ScopedFifo(const ScopedFifo &) = delete;
	ScopedFifo &operator=(const ScopedFifo &) = delete;
	bool ok() const { return ok_; }

private:
	int policy_;
	sched_param old_{};
	bool changed_ = false, ok_ = false;
};

template <class Lock> void uncontended_rt(benchmark::State &state)
{
	ScopedFifo rt(kRtPrio);
	if (!rt.ok()) {
		state.SkipWithError("cannot run SCHED_FIFO 60");
		return;
	}
	uncontended<Lock>(state);
}

// Pin the calling thread to @cpu; returns what it ran on before.
cpu_set_t pin_to(int cpu)
{
	cpu_set_t old, one;
	sched_getaffinity(0, sizeof(old), &old);
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	sched_setaffinity(0, sizeof(one), &one);
	return old;
}

// 2. k = 1: a holder releases while a second thread waits in acquire; the
// time from the release call to the waiter's return. The waiter is given
// 300 us to block in the kernel first, the same for every lock. The holder
// runs on CPU 2 and the waiter on CPU 1, for every lock: where the scheduler
// would otherwise place them (the same vCPU or two, which one is idle)
// varies between runs by more than the locks differ.
//
// @busy: the waiter's CPU is busy with lower-priority real-time work
// when the slot is released: a SCHED_FIFO 10 thread spins there from just
// before the release until the waiter has returned, or for 5 ms after the
// release. The holder gives the waiter 2 ms to block.
// This is the inversion the boost exists for: a SCHED_OTHER waiter that
// got the slot cannot run, and the GPU slot idles, until the other work
// yields.
//
// @rt_prio: both threads run SCHED_FIFO at it (0: SCHED_OTHER, as they
// came), as the tasks of an RT host do.
template <class Lock>
void handoff_run(benchmark::State &state, bool busy, int rt_prio = 0)
{
	constexpr uint64_t kBusyNs = 5'000'000;
	std::atomic<int> phase{0};
	std::atomic<uint64_t> woke{0};
	std::atomic<bool> stop{false};
	std::atomic<int> hog{0}; // 0 idle, 1 asked to start, 2 spinning
	std::atomic<uint64_t> released_at{0};
	ScopedFifo rt(rt_prio);
	if (!rt.ok()) {
		state.SkipWithError("cannot run SCHED_FIFO");
		return;
	}
	cpu_set_t old = pin_to(2);
	const int kick = busy ? eventfd(0, EFD_CLOEXEC) : -1;
	auto wake_hog = [&] {
		uint64_t one = 1;
		if (write(kick, &one, sizeof(one)) != sizeof(one))
			std::abort();
	};
	std::thread hogger;
	if (busy)
		hogger = std::thread([&] {
			pin_to(1);
			sched_param p{};
			p.sched_priority = 10;
			if (sched_setscheduler(0, SCHED_FIFO, &p))
				std::abort();
			for (;;) {
				// Asleep between releases: idle polling at FIFO 10
				// would itself starve the waiter.
				uint64_t go;
				if (read(kick, &go, sizeof(go)) != sizeof(go) || stop.load())
					return;
				hog = 2;
				// Busy until the waiter is through, or 5 ms past the
				// release: the clock starts at the release, which a
				// slow vCPU may make late.
				for (;;) {
					uint64_t from = released_at.load();
					if (phase.load() == 3 ||
					    (from && now_ns() > from + kBusyNs))
						break;
				}
				hog = 0;
			}
		});
	std::thread waiter([&] {
		pin_to(1);
		ScopedFifo waiter_rt(rt_prio);
		if (!waiter_rt.ok())
			std::abort();
		typename Lock::Client c;
		for (;;) {
			while (phase.load() != 1 && !stop.load())
				sched_yield();
			if (stop.load())
				return;
			phase = 2;
			c.acquire();
			woke = now_ns();
			c.release();
			phase = 3;
		}
	});

	typename Lock::Client c;
	std::vector<double> samples;
	for (auto _ : state) {
		c.acquire();
		phase = 1;
		while (phase.load() != 2)
			sched_yield();
		// Time for the waiter to block in the kernel; on the busy run
		// it must have blocked before the other work takes its CPU.
		usleep(busy ? 2000 : 300);
		if (busy) {
			released_at = 0;
			hog = 1;
			wake_hog();
			while (hog.load() != 2)
				sched_yield();
		}
		uint64_t released = now_ns();
		released_at = released;
		c.release();
		while (phase.load() != 3)
			sched_yield();
		while (busy && hog.load() != 0)
			sched_yield();
		double ns = double(woke.load() - released);
		samples.push_back(ns);
		state.SetIterationTime(ns / 1e9);
	}
	stop = true;
	waiter.join();
	if (busy) {
		wake_hog();
		hogger.join();
		close(kick);
	}
	sched_setaffinity(0, sizeof(old), &old);

	std::sort(samples.begin(), samples.end());
	auto pct = [&](double p) {
		return samples[std::min(samples.size() - 1,
					size_t(p * double(samples.size())))] / 1e3;
	};
	state.counters["p50_us"] = pct(0.50);
	state.counters["p99_us"] = pct(0.99);
}

template <class Lock> void handoff(benchmark::State &state)
{
	handoff_run<Lock>(state, false);
}

template <class Lock> void handoff_busy(benchmark::State &state)
{
	handoff_run<Lock>(state, true);
}

// 2c. The handoff between real-time threads above the boost priority:
// gpuslot changes no attributes, and the other locks' waiters are
// real-time too.
template <class Lock> void handoff_rt(benchmark::State &state)
{
	handoff_run<Lock>(state, false, kRtPrio);
}

// 3. Threads contend for k slots (the benchmark's argument).
template <class Lock> void throughput(benchmark::State &state)
{
	typename Lock::Client c;
	for (auto _ : state) {
		benchmark::DoNotOptimize(c.acquire());
		c.release();
	}
	state.SetItemsProcessed(state.iterations());
}

// 4. Acquire + release of slot 0 while N waiters queue for slot 1, which
// another client holds: the cost must not grow with N.
void start_thread(std::vector<pthread_t> &threads, void *(*fn)(void *),
		  void *arg)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 128 * 1024);
	pthread_t t;
	if (pthread_create(&t, &attr, fn, arg))
		std::abort();
	pthread_attr_destroy(&attr);
	threads.push_back(t);
}

void *gpuslot_slot1_waiter(void *)
{
	GpuslotLock::Client c;
	c.acquire(1ULL << 1);
	c.release();
	return nullptr;
}

// Once the domain has state.range(0) waiters (read through @info), time
// acquire+release of slot 0 by @c while they wait for slot 1.
template <class Client, class Info>
void cycle_slot0_behind_waiters(benchmark::State &state, Client &c, Info info)
{
	for (;;) {
		gpuslot_domain_info i{};
		i.size = sizeof(i);
		info(&i);
		if (i.nr_waiters == state.range(0))
			break;
		usleep(1000);
	}
	for (auto _ : state) {
		benchmark::DoNotOptimize(c.acquire(1ULL << 0));
		c.release();
	}
}

void waiters_gpuslot(benchmark::State &state)
{
	GpuslotLock::setup(2, true);
	auto holder = std::make_unique<GpuslotLock::Client>();
	holder->acquire(1ULL << 1);
	std::vector<pthread_t> threads;
	for (int i = 0; i < state.range(0); i++)
		start_thread(threads, gpuslot_slot1_waiter, nullptr);
	GpuslotLock::Client c;
	cycle_slot0_behind_waiters(state, c, [&](gpuslot_domain_info *info) {
		ioctl(c.fd(), GPUSLOT_IOC_DOMAIN_INFO, info);
	});
	holder->release(); // the waiters pass slot 1 down the queue
	for (pthread_t t : threads)
		pthread_join(t, nullptr);
}

// N queued waiters of the socket transport cost the server no thread: they
// queue with ACQUIRE_ASYNC, for slot 1, which stays held.
void waiters_socket(benchmark::State &state)
{
	SocketLock::setup(2, true);
	SocketLock::Client holder;
	holder.acquire(1ULL << 1);
	std::vector<std::unique_ptr<SocketLock::Client>> queued;
	for (int i = 0; i < state.range(0); i++) {
		queued.push_back(std::make_unique<SocketLock::Client>());
		gpuslot_acquire a{};
		a.size = sizeof(a);
		a.allowed_mask = 1ULL << 1;
		queued.back()->file().call(GPUSLOT_IOC_ACQUIRE_ASYNC, &a);
	}
	SocketLock::Client c;
	cycle_slot0_behind_waiters(state, c, [&](gpuslot_domain_info *info) {
		c.file().call(GPUSLOT_IOC_DOMAIN_INFO, info);
	});
	queued.clear(); // closing leaves the queue
	holder.release();
}

void *sysv_sem1_waiter(void *)
{
	sembuf op{1, -1, 0};
	while (semop(SysvSemLock::semid(), &op, 1) && errno == EINTR)
		;
	return nullptr;
}

void waiters_sysv(benchmark::State &state)
{
	SysvSemLock::setup(1, true);
	std::vector<pthread_t> threads;
	for (int i = 0; i < state.range(0); i++)
		start_thread(threads, sysv_sem1_waiter, nullptr);
	while (semctl(SysvSemLock::semid(), 1, GETNCNT) != state.range(0))
		usleep(1000);
	SysvSemLock::Client c;
	for (auto _ : state) {
		benchmark::DoNotOptimize(c.acquire());
		c.release();
	}
	semctl(SysvSemLock::semid(), 1, SETVAL, int(state.range(0)));
	for (pthread_t t : threads)
		pthread_join(t, nullptr);
}

template <class Lock> void register_lock()
{
	std::string n = Lock::name;
	benchmark::RegisterBenchmark(("uncontended." + n).c_str(),
				     uncontended<Lock>)
		->Setup(setup_k1<Lock>)->MinTime(0.3);
	benchmark::RegisterBenchmark(("uncontended_rt." + n).c_str(),
				     uncontended_rt<Lock>)
		->Setup(setup_k1<Lock>)->MinTime(0.3);
	benchmark::RegisterBenchmark(("handoff." + n).c_str(), handoff<Lock>)
		->Setup(setup_k1<Lock>)->UseManualTime()->Iterations(1000)
		->Repetitions(kHandoffRepetitions);
	benchmark::RegisterBenchmark(("handoffbusy." + n).c_str(),
				     handoff_busy<Lock>)
		->Setup(setup_k1<Lock>)->UseManualTime()->Iterations(200);
	benchmark::RegisterBenchmark(("handoffrt." + n).c_str(), handoff_rt<Lock>)
		->Setup(setup_k1<Lock>)->UseManualTime()->Iterations(1000)
		->Repetitions(kHandoffRepetitions);
	auto *b = benchmark::RegisterBenchmark(("throughput." + n).c_str(),
					       throughput<Lock>);
	// Every k with every thread count: the runs are their cross product.
	b->Setup(setup_k_from_arg<Lock>)->MinTime(0.2)->UseRealTime();
	b->Arg(1)->Arg(2)->Arg(4);
	b->Threads(2)->Threads(4)->Threads(16)->Threads(64);
}

// The closing table: per measurement, every lock's figure and gpuslot's
// ratio to it. Every figure is a time per operation: lower is better, and
// a ratio below 1 means gpuslot is faster.
class TableReporter : public benchmark::ConsoleReporter {
public:
	// A reporter of our own does not see --benchmark_color: no colour,
	// the output goes to a serial log.
	TableReporter() : ConsoleReporter(OO_Tabular) {}

	void ReportRuns(const std::vector<Run> &runs) override
	{
		ConsoleReporter::ReportRuns(runs);
		for (const Run &r : runs) {
			// With repetitions, the median of them; else the run.
			bool median = r.run_type == Run::RT_Aggregate &&
				      r.aggregate_name == "median";
			bool single = r.run_type == Run::RT_Iteration &&
				      r.repetitions <= 1;
			if (r.error_occurred || !(median || single))
				continue;
			// "<what>.<lock>[/<arg>][/min_time:..][/real_time][/threads:N]"
			std::vector<std::string> parts;
			std::string name = r.run_name.str();
			for (size_t at = 0; at <= name.size();) {
				size_t slash = std::min(name.find('/', at), name.size());
				parts.push_back(name.substr(at, slash - at));
				at = slash + 1;
			}
			std::string what = parts[0].substr(0, parts[0].find('.'));
			std::string lock = parts[0].substr(parts[0].find('.') + 1);
			std::string arg;
			for (size_t i = 1; i < parts.size(); i++)
				if (!parts[i].empty() &&
				    parts[i].find_first_not_of("0123456789") ==
					    std::string::npos)
					arg = parts[i];
			const int n = arg.empty() ? 0 : std::stoi(arg);
			if (what == "throughput") {
				// Time per operation of the whole system.
				put({4, n, int(r.threads)},
				    "throughput, k=" + arg + ", " +
					    std::to_string(r.threads) +
					    " threads (ns/op)",
				    lock, 1e9 / r.counters.at("items_per_second"));
			} else if (what == "handoff") {
				put({2, 0, 0}, "handoff median (us)", lock,
				    r.counters.at("p50_us"));
				put({2, 1, 0}, "handoff p99 (us)", lock,
				    r.counters.at("p99_us"));
			} else if (what == "handoffrt") {
				put({2, 2, 0}, kHandoffRt, lock,
				    r.counters.at("p50_us"));
			} else if (what == "handoffbusy") {
				put({3, 0, 0},
				    "handoff, waiter's CPU busy with FIFO 10 work, median (us)",
				    lock, r.counters.at("p50_us"));
				put({3, 1, 0},
				    "handoff, waiter's CPU busy with FIFO 10 work, p99 (us)",
				    lock, r.counters.at("p99_us"));
			} else if (what == "uncontended_rt") {
				put({1, 0, 0},
				    "uncontended acquire+release, caller SCHED_FIFO 60 (ns)",
				    lock, r.GetAdjustedRealTime());
			} else if (what == "waiters") {
				put({6, n, 0},
				    "acquire+release, " + arg + " waiters queued (ns)",
				    lock, r.GetAdjustedRealTime());
			} else {
				put({0, 0, 0}, "uncontended acquire+release (ns)", lock,
				    r.GetAdjustedRealTime());
			}
		}
	}

	void Finalize() override
	{
		ConsoleReporter::Finalize();
		const char *alts[] = {"socket", "sem_t", "sysv-sem", "flock", "pi-mutex"};
		std::printf("\n| measurement | gpuslot |");
		for (const char *a : alts)
			std::printf(" %s | ratio |", a);
		std::printf("\n|---|---|");
		for (size_t i = 0; i < std::size(alts); i++)
			std::printf("---|---|");
		std::printf("\n");
		// The alternatives' figures of a measurement also go next to
		// gpuslot's boost-off figure of it.
		for (auto &[row, cells] : rows_) {
			auto base = rows_.find(row.substr(0, row.size() - off_.size()));
			if (!row.ends_with(off_) || base == rows_.end())
				continue;
			for (auto &[lock, value] : base->second)
				if (lock != "gpuslot")
					cells[lock] = value;
		}
		for (auto &[key, row] : order_) {
			auto &cells = rows_[row];
			std::printf("| %s | %.3g |", row.c_str(), cells["gpuslot"]);
			for (const char *a : alts) {
				if (cells.count(a))
					std::printf(" %.3g | %.2f |", cells[a],
						    cells["gpuslot"] / cells[a]);
				else
					std::printf(" - | - |");
			}
			std::printf("\n");
		}
		print_targets();
		std::fflush(stdout);
	}

private:
	// Where a row goes in the table: (measurement, its arguments). The
	// runs arrive in any order (their repetitions are interleaved).
	using RowKey = std::array<int, 4>;

	// gpuslot-noboost figures get rows of their own ("..., boost off"),
	// after the boost-on rows.
	void put(std::array<int, 3> where, const std::string &row,
		 const std::string &lock, double value)
	{
		const bool off = lock == "gpuslot-noboost";
		const std::string name = off ? row + off_ : row;
		if (!rows_.count(name))
			order_.emplace(RowKey{off ? 5 : where[0], where[0], where[1],
					      where[2]},
				       name);
		rows_[name][off ? "gpuslot" : lock] = value;
	}

	double get(const std::string &row, const std::string &lock)
	{
		return rows_.count(row) && rows_[row].count(lock) ?
			       rows_[row][lock] : NAN;
	}

	void print_targets()
	{
		const std::string un = "uncontended acquire+release (ns)";
		const std::string &off = off_;
		const std::string hm = "handoff median (us)";
		const std::string hb =
			"handoff, waiter's CPU busy with FIFO 10 work, median (us)";
		const std::string ur = "uncontended acquire+release, caller SCHED_FIFO 60 (ns)";
		const double hand_rt = get(kHandoffRt, "gpuslot") /
				       get(kHandoffRt, "sem_t");
		double boost = get(un, "gpuslot") / get(un, "sysv-sem");
		double boost_rt = get(ur, "gpuslot") / get(ur, "sysv-sem");
		double noboost = get(un + off, "gpuslot") / get(un, "sysv-sem");
		double hand = get(hm, "gpuslot") / get(hm, "sem_t");
		double hand_off = get(hm + off, "gpuslot") / get(hm, "sem_t");
		double busy = get(hb, "gpuslot") / get(hb, "sem_t");
		double busy_off = get(hb + off, "gpuslot") / get(hb, "sem_t");
		double flat = get("acquire+release, 1024 waiters queued (ns)",
				  "gpuslot") /
			      get("acquire+release, 0 waiters queued (ns)",
				  "gpuslot");
		const double sock_hand = get(hm, "socket") / get(hm, "gpuslot");
		const double sock_flat = get("acquire+release, 1024 waiters queued (ns)", "socket") /
					 get("acquire+release, 0 waiters queued (ns)", "socket");
		const double sock_un = get(un, "socket") / get(un, "sem_t");
		auto verdict = [](bool ok) { return ok ? "met" : "MISSED"; };
		std::printf("\ntargets:\n");
		std::printf("  uncontended pair vs sysv-sem, boost off: %.3fx "
			    "(target <= 1.5x): %s\n", noboost,
			    verdict(noboost <= 1.5));
		std::printf("  uncontended pair vs sysv-sem, boost on, caller already "
			    "SCHED_FIFO above it: %.3fx (target <= 2x): %s\n",
			    boost_rt, verdict(boost_rt <= 2.0));
		std::printf("  uncontended pair vs sysv-sem, boost on, SCHED_OTHER "
			    "caller: %.3fx (the boost's two sched_setattr calls)\n",
			    boost);
		std::printf("  handoff median vs sem_t, boost off: %.3fx (target <= 1x): %s\n",
			    hand_off, verdict(hand_off <= 1.0));
		std::printf("  handoff median vs sem_t, boost on:  %.3fx (target <= 1x): %s\n",
			    hand, verdict(hand <= 1.0));
		std::printf("  handoff median vs sem_t, both threads SCHED_FIFO 60 "
			    "(no sched_setattr): %.3fx\n", hand_rt);
		std::printf("  handoff median, waiter's CPU busy, vs sem_t, boost off: %.3fx\n",
			    busy_off);
		std::printf("  handoff median, waiter's CPU busy, vs sem_t, boost on:  %.3fx "
			    "(target <= 1x): %s\n", busy, verdict(busy <= 1.0));
		std::printf("  1024 vs 0 queued waiters: %.3fx (target <= 1.2x): %s\n",
			    flat, verdict(flat <= 1.2));
		std::printf("  socket transport handoff median vs the module's: %.3fx "
			    "(target <= 3x): %s\n", sock_hand, verdict(sock_hand <= 3.0));
		std::printf("  socket transport, 1024 vs 0 queued waiters: %.3fx "
			    "(target <= 1.2x): %s\n", sock_flat, verdict(sock_flat <= 1.2));
		std::printf("  socket transport uncontended pair vs sem_t: %.1fx (two round "
			    "trips to gpuslotd)\n", sock_un);
		std::printf("\nwhat the alternatives lack: sem_t: slot identity, "
			    "FIFO order, cleanup on death, boost; sysv-sem: slot "
			    "identity, FIFO across slots, boost; flock: FIFO order "
			    "(blocking waits on one file), boost; pi-mutex: waiting "
			    "for any of k (a waiter blocks on one mutex), FIFO "
			    "(priority order), boost of SCHED_OTHER holders\n");
	}

	static constexpr const char *kHandoffRt =
		"handoff median, both threads SCHED_FIFO 60 (us)";
	const std::string off_ = ", gpuslot boost off";
	std::map<RowKey, std::string> order_;
	std::map<std::string, std::map<std::string, double>> rows_;
};

} // namespace
} // namespace gpuslot::bench

int main(int argc, char **argv)
{
	using namespace gpuslot::bench;
	// 1024 waiting clients, each with its own file.
	rlimit nofile{8192, 8192};
	setrlimit(RLIMIT_NOFILE, &nofile);

	register_lock<GpuslotLock>();
	benchmark::RegisterBenchmark("uncontended.gpuslot-noboost",
				     uncontended<GpuslotLock>)
		->Setup(setup_gpuslot_noboost)->MinTime(0.3);
	benchmark::RegisterBenchmark("handoff.gpuslot-noboost",
				     handoff<GpuslotLock>)
		->Setup(setup_gpuslot_noboost)->UseManualTime()->Iterations(1000)
		->Repetitions(kHandoffRepetitions);
	benchmark::RegisterBenchmark("handoffbusy.gpuslot-noboost",
				     handoff_busy<GpuslotLock>)
		->Setup(setup_gpuslot_noboost)->UseManualTime()->Iterations(200);
	register_lock<SocketLock>();
	register_lock<PosixSemLock>();
	register_lock<SysvSemLock>();
	register_lock<FlockLock>();
	register_lock<PiMutexLock>();
	using Fn = void (*)(benchmark::State &);
	for (auto [name, fn] : {std::pair<const char *, Fn>{"waiters.gpuslot",
							    waiters_gpuslot},
				std::pair<const char *, Fn>{"waiters.socket", waiters_socket},
				std::pair<const char *, Fn>{"waiters.sysv-sem",
							    waiters_sysv}})
		benchmark::RegisterBenchmark(name, fn)
			->Arg(0)->Arg(16)->Arg(256)->Arg(1024)->MinTime(0.3);

	benchmark::Initialize(&argc, argv);
	TableReporter reporter;
	benchmark::RunSpecifiedBenchmarks(&reporter);
	benchmark::Shutdown();
	return 0;
}
