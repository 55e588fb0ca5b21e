// SPDX-License-Identifier: GPL-2.0
// `make demo`: the whole of gpuslot at work, inside the test VM.
//
// The module is loaded; this program starts gpuslotd on the bundled Radeon
// VII topology (k = 4, a 30-CU partition for slot 0 and three of 10), then
// six clients built on libgpuslot (none backend) that run simulated jobs of
// different lengths. "perception" is the high-priority task: its
// allowed-slot mask pins it to slot 0, the large partition, and the other
// clients' masks leave slot 0 to it (in the dissertation, partitions, not
// exclusive locking, protected the high-priority task). Halfway an
// admin writes k = 2 (gpuslotd re-plans), then one client is killed while
// it holds a slot (the slot moves on). It prints `gpuslotctl status` as it
// goes and a table per client at the end, and exits 0 only if every
// invariant it checks held.
//
// With GPUSLOT_DEMO_TRANSPORT=socket (`make demo TRANSPORT=socket`) it runs
// on the host instead, without the module: gpuslotd serves the lock on its
// socket transport, and the demo reads the same attributes through it.
// GPUSLOT_DEMO_BIN and GPUSLOT_DEMO_FIXTURES say where the programs and
// the topology are there.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpuslot.h"
#include "lock_file.hpp"

namespace {

// Where things are: in the VM (the defaults), or on the host.
struct Place {
	bool socket = false;	// gpuslotd's socket transport, not the module
	std::string bin = "/bin";	// gpuslotd and gpuslotctl
	std::string topology = "/fixtures/kfd/radeon-vii-gfx906";
	std::string run = "/tmp";	// config, logs, sockets, state
} place;

std::string env_or(const char *name, const std::string &fallback)
{
	const char *v = getenv(name);
	return v && *v ? v : fallback;
}

constexpr int kSamples = 8192;
// perception has slot 0, the large partition, to itself; the rest share
// the others (after k = 2: slot 1).
constexpr uint64_t kSlot0 = 1u << 0;
constexpr uint64_t kOthers = ~kSlot0;

// What a client reports, in memory shared with the demo.
struct ClientStats {
	char name[16];
	uint64_t allowed; // 0: any slot
	int job_ms;
	pid_t pid;
	std::atomic<uint64_t> jobs, boosts, rebuilds, new_generations, slots_used;
	std::atomic<uint64_t> max_wait_ns, total_wait_ns;
	std::atomic<uint64_t> bad_slot; // granted outside its mask
	std::atomic<int> holding;	 // the slot it holds, or -1
	uint64_t waits[kSamples];
};

struct Shared {
	std::atomic<bool> stop;
	ClientStats clients[6];
};

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void sleep_ms(int ms)
{
	timespec ts{ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR) {
	}
}

std::string read_file(const std::string &path)
{
	std::ifstream in(path);
	std::stringstream s;
	s << in.rdbuf();
	return s.str();
}

std::string run(const std::string &cmd)
{
	FILE *p = popen((cmd + " 2>&1").c_str(), "r");
	std::string out;
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
		out.append(buf, n);
	pclose(p);
	return out;
}

// Domain 0's attribute @name: from the module's sysfs
// (/sys/class/gpuslot/gpu0/, one value per file) or, for debug/<table>, its
// debugfs (root's), or over gpuslotd's socket, which serves the same names.
std::string attr(const std::string &name)
{
	if (!place.socket)
		return read_file(name.starts_with("debug/")
					 ? "/sys/kernel/debug/gpuslot/gpu0/" + name.substr(6)
					 : "/sys/class/gpuslot/gpu0/" + name);
	std::unique_ptr<gpuslot::LockFile> f;
	std::string error, text;
	if (gpuslot::open_lock_file(gpuslot::Transport::socket, place.run + "/sockets", 0, &f,
				    &error) ||
	    f->read_attr(name, &text))
		return "";
	return text;
}

// gpuslotctl with the options that point it at this demo's gpuslotd.
std::string gpuslotctl(const std::string &args)
{
	return run(place.bin + "/gpuslotctl " + args +
		   (place.socket ? " --transport socket --socket-dir " + place.run + "/sockets" : ""));
}

// Per line of the holders table (debugfs, or the socket's debug/holders):
// slot and pid.
std::vector<std::pair<int, int>> holders()
{
	std::vector<std::pair<int, int>> out;
	std::istringstream in(attr("debug/holders"));
	for (std::string line; std::getline(in, line);) {
		int slot, pid;
		if (sscanf(line.c_str(), "%d %d", &slot, &pid) == 2)
			out.push_back({slot, pid});
	}
	return out;
}

// One client: the per-job loop of libgpuslot's examples, with bookkeeping.
int client_main(Shared *sh, ClientStats *me)
{
	gpuslot_options o{};
	o.size = sizeof(o);
	o.backend = GPUSLOT_BACKEND_NONE;
	gpuslot_client *c;
	if (gpuslot_open(&o, &c) < 0) {
		fprintf(stderr, "%s: %s\n", me->name, gpuslot_last_error());
		return 1;
	}
	uint64_t generation = 0;
	while (!sh->stop.load()) {
		gpuslot_slot s{};
		s.size = sizeof(s);
		uint64_t t0 = now_ns();
		if (gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, me->allowed, &s) < 0) {
			fprintf(stderr, "%s: %s\n", me->name, gpuslot_last_error());
			return 1;
		}
		uint64_t wait = now_ns() - t0;
		me->holding = int(s.index);
		// The module boosts the holding thread to SCHED_FIFO.
		if ((sched_getscheduler(0) & ~SCHED_RESET_ON_FORK) == SCHED_FIFO)
			me->boosts++;
		if (me->allowed && !(me->allowed >> s.index & 1))
			me->bad_slot++;
		// A new layout: libgpuslot built new streams (outside the
		// hold); a real job rebuilds what it made on the old ones,
		// then retires them.
		const uint64_t old_generation = generation;
		if (generation && s.generation != generation)
			me->new_generations++;
		generation = s.generation;
		gpuslot_layout_info info{};
		info.size = sizeof(info);
		if (gpuslot_client_layout(c, &info) == 0)
			me->rebuilds = info.rebuilds;
		me->slots_used |= 1ULL << s.index;
		uint64_t n = me->jobs;
		if (n < kSamples)
			me->waits[n] = wait;
		me->total_wait_ns += wait;
		me->max_wait_ns = std::max<uint64_t>(me->max_wait_ns, wait);
		sleep_ms(me->job_ms); // the job, on s.stream with a GPU backend
		me->jobs++;
		me->holding = -1;
		gpuslot_release_slot(c, &s, 0);
		if (old_generation && old_generation != generation)
			gpuslot_retire_generation(c, old_generation);
		sleep_ms(2); // between frames
	}
	gpuslot_close(c);
	return 0;
}

std::vector<std::string> failures;

void check(bool ok, const std::string &what)
{
	printf("demo: %s %s\n", ok ? "ok:    " : "FAILED:", what.c_str());
	if (!ok)
		failures.push_back(what);
}

void snapshot(const char *when, uint64_t start)
{
	printf("\n=== %.1f s: %s ===\n$ gpuslotctl status\n%s", (now_ns() - start) / 1e9, when,
	       gpuslotctl("status --topology " + place.topology + " --dri '' --state-dir " +
			  place.run + "/gpuslot-run")
		       .c_str());
	fflush(stdout);
}

// CUs of each slot's partition (slot<i>/units: "all", -1 here, or the
// kernel's %*pb bitmap: 32-bit hex chunks joined by commas).
std::vector<int> partition_sizes()
{
	std::vector<int> out;
	const std::string k = attr("k");
	if (k.empty())
		return {};
	for (int slot = 0; slot < atoi(k.c_str()); slot++) {
		std::string units = attr("slot" + std::to_string(slot) + "/units");
		while (!units.empty() && units.back() == '\n')
			units.pop_back();
		if (units.empty())
			return {};
		if (units == "all") {
			out.push_back(-1);
			continue;
		}
		int cus = 0;
		std::istringstream chunks(units);
		for (std::string chunk; std::getline(chunks, chunk, ',');)
			cus += __builtin_popcount(unsigned(strtoul(chunk.c_str(), nullptr, 16)));
		out.push_back(cus);
	}
	return out;
}

} // namespace

int main()
{
	setvbuf(stdout, nullptr, _IOLBF, 0);
	const uint64_t start = now_ns();
	place.socket = env_or("GPUSLOT_DEMO_TRANSPORT", "device") == "socket";
	if (place.socket) {
		char dir[] = "/tmp/gpuslot-demo.XXXXXX";
		if (!mkdtemp(dir)) {
			perror("demo: mkdtemp");
			return 1;
		}
		place.run = dir;
		place.bin = env_or("GPUSLOT_DEMO_BIN", place.bin);
		place.topology = env_or("GPUSLOT_DEMO_FIXTURES", "/fixtures") +
				 "/kfd/radeon-vii-gfx906";
		// The clients' libgpuslot finds the sockets here.
		setenv("GPUSLOT_TRANSPORT", "socket", 1);
		setenv("GPUSLOT_SOCKET_DIR", (place.run + "/sockets").c_str(), 1);
	}
	printf("demo: gpuslot on a Radeon VII (60 CUs, 4 SEs x 15), six clients, "
	       "k = 4 then 2, %s\n",
	       place.socket ? "on gpuslotd's socket transport (no module)"
			    : "on the module's /dev/gpuslot");

	// gpuslotd, as systemd would run it.
	const std::string config = place.run + "/gpuslotd.conf";
	const std::string notify_path = place.run + "/gpuslotd-notify.sock";
	const std::string log_path = place.run + "/gpuslotd.log";
	const std::string kfd_proc = place.run + "/kfd-proc";
	std::ofstream(config) << "[daemon]\naudit_interval_ms = 500\n"
				 "[default]\nk = 4\nsizes = 30,10,10,10\nboost_priority = 50\n";
	mkdir(kfd_proc.c_str(), 0755);
	int notify = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	sockaddr_un a{};
	a.sun_family = AF_UNIX;
	strcpy(a.sun_path, notify_path.c_str());
	if (notify < 0 || bind(notify, reinterpret_cast<sockaddr *>(&a), sizeof(a))) {
		perror("demo: notify socket");
		return 1;
	}
	pid_t daemon = fork();
	if (daemon == 0) {
		int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 2);
		setenv("NOTIFY_SOCKET", notify_path.c_str(), 1);
		const std::string gpuslotd = place.bin + "/gpuslotd";
		const std::string state = place.run + "/gpuslot-run";
		const std::string sockets = place.run + "/sockets";
		execl(gpuslotd.c_str(), "gpuslotd", "--config", config.c_str(), "--topology",
		      place.topology.c_str(), "--dri", "", "--state-dir", state.c_str(), "--kfd-proc",
		      kfd_proc.c_str(), "--transport", place.socket ? "socket" : "device",
		      "--socket-dir", sockets.c_str(), nullptr);
		_exit(127);
	}
	bool ready = false;
	for (int i = 0; i < 20 && !ready; i++) {
		pollfd p{notify, POLLIN, 0};
		char buf[512] = "";
		if (poll(&p, 1, 3000) == 1 && recv(notify, buf, sizeof(buf) - 1, 0) > 0)
			ready = strstr(buf, "READY=1");
	}
	check(ready, "gpuslotd started and sent READY=1");
	if (!ready) {
		printf("%s", read_file(log_path).c_str());
		return 1;
	}
	check(partition_sizes() == std::vector<int>{30, 10, 10, 10},
	      "gpuslotd applied k = 4 with partitions of 30, 10, 10 and 10 CUs");

	auto *sh = static_cast<Shared *>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
					      MAP_SHARED | MAP_ANONYMOUS, -1, 0));
	new (sh) Shared();
	struct Spec {
		const char *name;
		uint64_t allowed;
		int job_ms;
	} specs[6] = {
		{"perception", kSlot0, 6}, {"planner", kOthers, 10},
		{"tracker", kOthers, 4},   {"infer-a", kOthers, 20},
		{"infer-b", kOthers, 20},  {"logger", kOthers, 3},
	};
	for (int i = 0; i < 6; i++) {
		ClientStats *c = &sh->clients[i];
		snprintf(c->name, sizeof(c->name), "%s", specs[i].name);
		c->allowed = specs[i].allowed;
		c->job_ms = specs[i].job_ms;
		c->holding = -1;
		// Only the parent writes the pid: the memory is shared.
		pid_t pid = fork();
		if (pid > 0)
			c->pid = pid;
		if (pid == 0) {
			// The name gpuslotctl status and the holders table show.
			prctl(PR_SET_NAME, specs[i].name);
			_exit(client_main(sh, c));
		}
	}

	// The invariants the module promises, sampled from its holders table
	// (debugfs, or the socket's debug/holders) meanwhile.
	std::atomic<bool> sampling{true};
	std::atomic<int> max_holders{0}, duplicate{0}, samples{0};
	std::atomic<int> retired_after_shrink{0};
	std::atomic<bool> shrunk{false};
	std::thread sampler([&] {
		while (sampling) {
			auto h = holders();
			samples++;
			max_holders = std::max<int>(max_holders, int(h.size()));
			std::vector<int> slots;
			for (auto &[slot, pid] : h) {
				slots.push_back(slot);
				if (shrunk && slot >= 2)
					retired_after_shrink++;
			}
			std::sort(slots.begin(), slots.end());
			if (std::adjacent_find(slots.begin(), slots.end()) != slots.end())
				duplicate++;
			sleep_ms(2);
		}
	});

	sleep_ms(3000);
	snapshot("k = 4, six clients running", start);

	// An admin halves k; gpuslotd re-plans.
	printf("\n=== %.1f s: an admin writes k = 2 ===\n$ gpuslotctl set-k 2\n%s",
	       (now_ns() - start) / 1e9, gpuslotctl("set-k 2").c_str());
	uint64_t t_k = now_ns();
	bool replanned = false;
	while (!replanned && now_ns() - t_k < 10000000000ULL) {
		replanned = partition_sizes() == std::vector<int>{30, 30};
		sleep_ms(10);
	}
	check(replanned, "gpuslotd re-planned k = 2 as two SE-packed halves of 30 CUs in " +
				 std::to_string((now_ns() - t_k) / 1000000) + " ms");
	// Holders of slots 2 and 3 finish their jobs; then none may hold them.
	sleep_ms(200);
	shrunk = true;
	sleep_ms(2800);
	snapshot("k = 2 after gpuslotd re-planned", start);

	// Kill "logger" while it holds a slot.
	ClientStats *victim = &sh->clients[5];
	int slot = -1;
	for (int i = 0; i < 5000 && slot < 0; i++) {
		for (auto &[s, pid] : holders())
			if (pid == victim->pid)
				slot = s;
		if (slot < 0)
			sleep_ms(1);
	}
	if (victim->pid <= 0) {
		printf("demo: no pid for logger\n");
		return 1;
	}
	kill(victim->pid, SIGKILL);
	uint64_t t_kill = now_ns();
	printf("\n=== %.1f s: SIGKILL to logger (pid %d) while it holds slot %d ===\n",
	       (t_kill - start) / 1e9, victim->pid, slot);
	int status = 0;
	waitpid(victim->pid, &status, 0);
	bool moved = false;
	while (slot >= 0 && !moved && now_ns() - t_kill < 5000000000ULL) {
		for (auto &[s, pid] : holders())
			moved |= s == slot && pid != victim->pid;
		sleep_ms(1);
	}
	check(slot >= 0 && WIFSIGNALED(status) && moved,
	      "the slot logger held (" + std::to_string(slot) + ") went to another client " +
		      std::to_string((now_ns() - t_kill) / 1000000) + " ms after the kill");
	sleep_ms(2000);
	snapshot("after the kill", start);

	sh->stop = true;
	bool clean = true;
	for (int i = 0; i < 5; i++) {
		waitpid(sh->clients[i].pid, &status, 0);
		clean &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
	}
	sampling = false;
	sampler.join();
	kill(daemon, SIGTERM);
	waitpid(daemon, &status, 0);
	check(clean, "the five surviving clients stopped cleanly");
	check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "gpuslotd stopped on SIGTERM with status 0");

	printf("\n%-11s %6s %10s %10s %10s %-8s %7s %9s\n", "client", "jobs", "mean wait",
	       "p99 wait", "max wait", "slots", "boosts", "rebuilds");
	bool boosted = true, busy = true, rebuilt = true, pinned = true;
	for (int i = 0; i < 6; i++) {
		ClientStats *c = &sh->clients[i];
		uint64_t n = c->jobs;
		std::vector<uint64_t> w(c->waits, c->waits + std::min<uint64_t>(n, kSamples));
		std::sort(w.begin(), w.end());
		double p99 = w.empty() ? 0 : w[std::min(w.size() - 1, w.size() * 99 / 100)] / 1e6;
		std::string slots;
		for (int s = 0; s < 64; s++)
			if (c->slots_used >> s & 1)
				slots += (slots.empty() ? "" : ",") + std::to_string(s);
		printf("%-11s %6llu %7.2f ms %7.2f ms %7.2f ms %-8s %7llu %9llu%s\n", c->name,
		       (unsigned long long)n, n ? c->total_wait_ns / 1e6 / n : 0.0, p99,
		       c->max_wait_ns / 1e6, slots.c_str(), (unsigned long long)c->boosts.load(),
		       (unsigned long long)c->rebuilds.load(), i == 5 ? "  (killed)" : "");
		// A job can end between SIGKILL and the count: allow one.
		boosted &= c->boosts + (i == 5) >= n;
		busy &= n > 0;
		rebuilt &= i == 5 || (c->new_generations >= 1 && c->rebuilds >= 1);
		pinned &= !c->bad_slot;
	}
	printf("\n");
	check(samples > 100 && max_holders <= 4 && !duplicate,
	      std::to_string(samples) + " samples of the holders table: never more than k = 4 "
				      "holders (most seen " + std::to_string(max_holders) +
		      "), never one slot twice");
	check(!retired_after_shrink, "after k = 2 no slot at or past 2 was held");
	bool others_off_slot0 = true;
	for (int i = 1; i < 6; i++)
		others_off_slot0 &= !(sh->clients[i].slots_used & kSlot0);
	check(pinned && sh->clients[0].slots_used == kSlot0 && others_off_slot0,
	      "perception ran only on slot 0, the 30-CU partition, and nobody else did");
	check(boosted, "every job ran SCHED_FIFO while holding its slot");
	check(busy, "every client got jobs done");
	check(rebuilt, "every surviving client saw a new generation after k = 2 and "
		       "libgpuslot rebuilt its streams");
	printf("\ngpuslotd's log:\n%s\n", read_file(log_path).c_str());
	if (failures.empty()) {
		printf("demo: every invariant held (%.1f s)\n", (now_ns() - start) / 1e9);
		return 0;
	}
	printf("demo: %zu invariant(s) failed\n", failures.size());
	return 1;
}
