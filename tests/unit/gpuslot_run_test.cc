// SPDX-License-Identifier: GPL-2.0
// gpuslot-run and its interposer against the CUDA driver double
// (fake_libcuda.cc) and gpuslotd's lock server on the socket transport:
// programs that know nothing of gpuslot (run_probe.cc), spawned, never
// forked (this process runs the server's thread).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/gpuslot.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "lock_file.hpp"
#include "lock_server.hpp"

extern char **environ;

namespace {

namespace fs = std::filesystem;

struct Child {
	pid_t pid = -1;
	int in = -1;  // its stdin
	int out = -1; // its stdout
};

struct Exit {
	int status = -1; // exit code, or -1 if it timed out (then killed)
	std::string out;
};

class GpuslotRun : public testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/gpuslot-run-XXXXXX";
		ASSERT_NE(mkdtemp(tmpl), nullptr);
		dir_ = tmpl;
		log_ = dir_ / "cuda.log";
		gpuslot::LockServerOptions o;
		o.socket_dir = dir_;
		o.nr_domains = 1;
		server_ = std::make_unique<gpuslot::LockServer>(o);
		std::string error;
		ASSERT_EQ(server_->start(&error), 0) << error;
		// The driver double's GPU (FAKE_CUDA_PCI's default).
		ASSERT_EQ(server_->set_attr(0, "pci_bus_id", "0000:19:00.0"), 0);
		thread_ = std::thread([this] {
			std::string e;
			server_->run(&e);
		});
	}
	void TearDown() override
	{
		for (pid_t p : children_)
			if (kill(p, SIGKILL) == 0)
				waitpid(p, nullptr, 0);
		server_->stop();
		thread_.join();
		server_.reset();
		fs::remove_all(dir_);
	}

	// k whole-GPU slots at these priorities.
	void layout(std::vector<unsigned int> priorities)
	{
		gpuslot_layout l{};
		l.size = sizeof(l);
		l.k = unsigned(priorities.size());
		for (size_t s = 0; s < priorities.size(); s++)
			l.priority[s] = priorities[s];
		ASSERT_EQ(server_->set_layout(0, &l, nullptr), 0);
	}

	// One partition per slot, of units of @kind, at these priorities.
	void partitioned_layout(uint32_t kind, uint32_t unit_size, uint32_t nr_units,
				const std::vector<gpuslot_partition> &parts,
				const std::vector<unsigned int> &priorities)
	{
		gpuslot_layout l{};
		l.size = sizeof(l);
		l.k = unsigned(parts.size());
		l.unit_kind = kind;
		l.unit_size = unit_size;
		l.nr_units = nr_units;
		l.nr_partitions = l.k;
		for (size_t s = 0; s < parts.size(); s++)
			l.priority[s] = priorities[s];
		ASSERT_EQ(server_->set_layout(0, &l, parts.data()), 0);
	}

	// Slots of NVIDIA SM groups as gpuslotd plans them for the driver
	// double's GPU (132 SMs, split by 8: 16 groups): one partition per
	// slot, each a mask of groups, at these priorities.
	void sm_layout(std::vector<uint64_t> groups, std::vector<unsigned int> priorities)
	{
		std::vector<gpuslot_partition> parts(groups.size());
		for (size_t s = 0; s < groups.size(); s++)
			parts[s].units[0] = groups[s];
		partitioned_layout(GPUSLOT_UNIT_NV_SM_GROUP, 8, 16, parts, priorities);
	}

	// A KFD topology (GPUSLOT_KFD_TOPOLOGY) under dir_: nodes/0 a CPU, 1 a
	// Radeon VII at 0000:03:00.0, 2 an MI100 at the domain's
	// 0000:19:00.0: ROCr's GPU 1.
	fs::path kfd_topology()
	{
		const fs::path topo = dir_ / "topology";
		auto node = [&](int n, const std::string &fixture, unsigned int location) {
			fs::create_directories(topo / "nodes" / std::to_string(n));
			std::ofstream out(topo / "nodes" / std::to_string(n) / "properties");
			if (fixture.empty()) {
				out << "cpu_cores_count 8\nsimd_count 0\n";
				return;
			}
			std::ifstream in(std::string(GPUSLOT_KFD_FIXTURES) + "/" + fixture +
					 "/properties");
			for (std::string l; std::getline(in, l);)
				out << (l.rfind("location_id ", 0) == 0
						? "location_id " + std::to_string(location)
						: l)
				    << "\n";
		};
		node(0, "", 0);
		node(1, "radeon-vii-gfx906", 0x300);
		node(2, "mi100-gfx908", 0x1900);
		return topo;
	}

	// An AMD domain (the MI100 of kfd_topology(), 120 CUs): slot s has CUs
	// 16s .. 16s+15, at these priorities; the programs see the topology.
	void amd_layout(const std::vector<unsigned int> &priorities)
	{
		std::vector<gpuslot_partition> parts(priorities.size());
		for (size_t s = 0; s < parts.size(); s++)
			parts[s].units[0] = 0xffffULL << (16 * s);
		partitioned_layout(GPUSLOT_UNIT_AMD_CU, 1, 120, parts, priorities);
		extra_env_.push_back("GPUSLOT_KFD_TOPOLOGY=" + kfd_topology().string());
	}

	// The environment of a program of the test: the lock on dir_'s
	// socket, the driver double, the sanitizer's runtime preloaded first
	// (gpuslot-run adds the interposer after it).
	std::vector<std::string> environment(bool lock_probe)
	{
		std::vector<std::string> env;
		for (char **e = environ; *e; e++)
			if (std::strncmp(*e, "LD_PRELOAD=", 11) &&
			    std::strncmp(*e, "LD_LIBRARY_PATH=", 16) &&
			    std::strncmp(*e, "GPUSLOT_", 8) && std::strncmp(*e, "FAKE_CUDA_", 10) &&
			    std::strncmp(*e, "GPU_MAX_HW_QUEUES=", 18) &&
			    std::strncmp(*e, "HSA_CU_MASK=", 12))
				env.push_back(*e);
		env.push_back("GPUSLOT_TRANSPORT=socket");
		env.push_back("GPUSLOT_SOCKET_DIR=" + dir_.string());
		env.push_back("GPUSLOT_RUN_LIBRARY=" GPUSLOT_RUN_INTERPOSER);
#ifdef GPUSLOT_RUN_HIP_TESTS
		env.push_back("GPUSLOT_RUN_HIP_LIBRARY=" GPUSLOT_RUN_HIP_INTERPOSER);
		env.push_back("LD_LIBRARY_PATH=" FAKE_CUDA_DIR ":" FAKE_HIP_DIR);
#else
		// No HIP interposer built: an AMD domain's program gets the
		// CUDA one (HSA_CU_MASK is still tested).
		env.push_back("GPUSLOT_RUN_HIP_LIBRARY=" GPUSLOT_RUN_INTERPOSER);
		env.push_back("LD_LIBRARY_PATH=" FAKE_CUDA_DIR);
#endif
		env.push_back("FAKE_CUDA_LOG=" + log_.string());
		env.push_back("FAKE_CUDA_KERNEL_US=1000");
		if (lock_probe)
			env.push_back("FAKE_CUDA_LOCK_DIR=" + dir_.string());
		std::string preload = GPUSLOT_ASAN_RUNTIME;
		if (!preload_.empty())
			preload += (preload.empty() ? "" : ":") + preload_;
		if (!preload.empty())
			env.push_back("LD_PRELOAD=" + preload);
		// A variable of extra_env_ replaces the one set above.
		for (const std::string &e : extra_env_) {
			const std::string name = e.substr(0, e.find('=') + 1);
			std::erase_if(env, [&](const std::string &v) { return v.rfind(name, 0) == 0; });
		}
		env.insert(env.end(), extra_env_.begin(), extra_env_.end());
		return env;
	}

	Child spawn(const std::vector<std::string> &args, bool lock_probe = false,
		    bool with_stderr = false)
	{
		int in[2], out[2];
		EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
		EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, in[0], 0);
		posix_spawn_file_actions_adddup2(&fa, out[1], 1);
		if (with_stderr)
			posix_spawn_file_actions_adddup2(&fa, out[1], 2);
		std::vector<char *> argv, envp;
		for (auto &a : args)
			argv.push_back(const_cast<char *>(a.c_str()));
		argv.push_back(nullptr);
		const auto env = environment(lock_probe);
		for (auto &e : env)
			envp.push_back(const_cast<char *>(e.c_str()));
		envp.push_back(nullptr);
		Child c;
		EXPECT_EQ(posix_spawn(&c.pid, argv[0], &fa, nullptr, argv.data(), envp.data()), 0)
			<< args[0];
		posix_spawn_file_actions_destroy(&fa);
		close(in[0]);
		close(out[1]);
		c.in = in[1];
		c.out = out[0];
		children_.push_back(c.pid);
		return c;
	}

	// A line of @c's stdout, within 30 s ("" at EOF or timeout).
	static std::string line(const Child &c)
	{
		std::string s;
		char ch;
		while (true) {
			pollfd p{c.out, POLLIN, 0};
			if (poll(&p, 1, 30000) != 1 || read(c.out, &ch, 1) != 1 || ch == '\n')
				return s;
			s += ch;
		}
	}

	// @c's exit and the rest of its stdout; killed after 60 s.
	Exit finish(Child &c)
	{
		close(c.in);
		Exit e;
		const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
		char buf[4096];
		while (true) {
			pollfd p{c.out, POLLIN, 0};
			const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
				deadline - std::chrono::steady_clock::now());
			const int ready = left.count() > 0 ? poll(&p, 1, int(left.count())) : 0;
			if (ready < 0 && errno == EINTR)
				continue;
			if (ready != 1) {
				ADD_FAILURE() << "no exit within 60 s: killed";
				kill(c.pid, SIGKILL);
				break;
			}
			const ssize_t n = read(c.out, buf, sizeof(buf));
			if (n <= 0)
				break;
			e.out.append(buf, size_t(n));
		}
		close(c.out);
		int status = 0;
		const pid_t waited = waitpid(c.pid, &status, 0);
		if (waited != c.pid)
			e.out += "waitpid: " + std::string(std::strerror(errno));
		std::erase(children_, c.pid);
		e.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (WIFSIGNALED(status))
			e.out += "killed by signal " + std::to_string(WTERMSIG(status));
		return e;
	}

	// @program's 3 jobs of 3 kernels and a blocking copy on slot 0, under
	// --hold and --per-sync: the work edges are exactly two per job
	// (work_edges() of @launch and @sync).
	void work_edges_two_per_job(const std::string &program, const std::string &launch,
				    const std::string &sync);

	// A burst of 20 kernels of @program on slot 1, which slot 0
	// outranks: --inflight 2 under --hold and --per-sync; --no-preempt;
	// and on slot 0. @record, @query: the marker's calls in the double's
	// log; @create: what each marker's creation logs, if not "".
	void bound_where_outranked(const std::string &program, const std::string &record,
				   const std::string &query, const std::string &create);

	// A burst of 20 kernels of @program under gpuslot-run --slot 1
	// @policy --inflight 2, slot 0 outranking it, started while slot 0
	// preempts; then the same with --no-preempt. @launch: the kernel's
	// name in the double's log, between spaces.
	void nothing_sent_while_preempted(const std::vector<std::string> &policy,
					  const std::string &program, const std::string &launch);

	Exit run(const std::vector<std::string> &args, bool lock_probe = false)
	{
		Child c = spawn(args, lock_probe);
		return finish(c);
	}

	// run(), its stderr in Exit::out after its stdout's lines.
	Exit run_with_stderr(const std::vector<std::string> &args)
	{
		Child c = spawn(args, false, true);
		return finish(c);
	}

	// A new connection of a member to the lock on dir_'s socket.
	std::unique_ptr<gpuslot::LockFile> member()
	{
		std::unique_ptr<gpuslot::LockFile> f;
		std::string error;
		EXPECT_EQ(gpuslot::open_lock_file(gpuslot::Transport::socket, dir_, 0, &f, &error), 0)
			<< error;
		return f;
	}

	// What the lock says: a TRY of a new connection (0: it was free).
	int try_acquire()
	{
		gpuslot_acquire a{};
		a.size = sizeof(a);
		a.flags = GPUSLOT_ACQUIRE_TRY;
		return member()->call(GPUSLOT_IOC_ACQUIRE, &a);
	}

	// The domain's hardware queues in use (the budget's hqd_used), as a
	// member reads them.
	unsigned int hqd_used()
	{
		gpuslot_domain_info i{};
		i.size = sizeof(i);
		EXPECT_EQ(member()->call(GPUSLOT_IOC_DOMAIN_INFO, &i), 0);
		return i.hqd_used;
	}

	std::vector<std::string> log_lines()
	{
		std::ifstream in(log_);
		std::vector<std::string> lines;
		for (std::string l; std::getline(in, l);)
			lines.push_back(l);
		return lines;
	}

	fs::path dir_, log_;
	// Preloaded after the sanitizer's runtime, and more variables.
	std::string preload_;
	std::vector<std::string> extra_env_;
	std::unique_ptr<gpuslot::LockServer> server_;
	std::thread thread_;
	std::vector<pid_t> children_;
};

const std::string kRun = GPUSLOT_RUN_BIN;
const std::string kLinked = RUN_PROBE_LINKED;
const std::string kDl = RUN_PROBE_DL;
const std::string kClient = RUN_PROBE_CLIENT;

std::vector<std::string> lines_of(const std::string &text, const std::string &prefix)
{
	std::vector<std::string> out;
	std::istringstream in(text);
	for (std::string l; std::getline(in, l);)
		if (l.rfind(prefix, 0) == 0)
			out.push_back(l);
	return out;
}

// A program reaching the driver as cudart does, through each form of
// cuGetProcAddress, each version and each stream flag the CUDA 12 and 13
// runtimes pass, under --per-sync on a domain of k = 1: every stream it
// made has the slot's priority, every launch went to the driver's entry
// point of the asked-for default-stream semantics while the lock was held,
// and each synchronization gave the slot back.
TEST_F(GpuslotRun, GetProcAddressEveryFormVersionAndFlag)
{
	layout({3});
	// Without gpuslot-run: the program's own priorities, the lock free.
	const Exit plain = run({kDl, "getproc"}, true);
	ASSERT_EQ(plain.status, 0) << plain.out;
	for (const std::string &l : lines_of(plain.out, "case "))
		EXPECT_NE(l.find("priority=0 during=lock=free"), std::string::npos) << l;
	fs::remove(log_);

	const Exit e = run({kRun, "--slot", "0", "--per-sync", "--", kDl, "getproc"}, true);
	ASSERT_EQ(e.status, 0) << e.out;
	const auto cases = lines_of(e.out, "case ");
	ASSERT_EQ(cases.size(), 11u) << e.out;
	std::vector<bool> per_thread;
	for (const std::string &l : cases) {
		// CUDA priority least - 3 of the double's 0 .. -5.
		EXPECT_NE(l.find("priority=-3 during=lock=busy after=lock=free"), std::string::npos)
			<< l;
		per_thread.push_back(l.find("flags=2 ") != std::string::npos);
	}
	std::vector<std::string> launches, syncs;
	for (const std::string &l : log_lines()) {
		if (l.find(" cuLaunchKernel") != std::string::npos)
			launches.push_back(l);
		if (l.find(" cuStreamSynchronize") != std::string::npos)
			syncs.push_back(l);
	}
	ASSERT_EQ(launches.size(), cases.size());
	ASSERT_EQ(syncs.size(), cases.size());
	for (size_t i = 0; i < cases.size(); i++) {
		const char *want = per_thread[i] ? " cuLaunchKernel_ptsz " : " cuLaunchKernel ";
		EXPECT_NE(launches[i].find(want), std::string::npos) << cases[i] << "\n" << launches[i];
		EXPECT_NE(launches[i].find("lock=busy"), std::string::npos) << launches[i];
		EXPECT_EQ(syncs[i].find("_ptsz") != std::string::npos, bool(per_thread[i]))
			<< cases[i] << "\n" << syncs[i];
	}
}

// An event wait is a command: under --per-sync it waits for the slot, and
// the synchronization after it gives the slot back.
TEST_F(GpuslotRun, StreamWaitEventIsACommand)
{
	layout({0});
	const Exit e = run({kRun, "--slot", "0", "--per-sync", "--", kDl, "waitevent"}, true);
	ASSERT_EQ(e.status, 0) << e.out;
	EXPECT_EQ(e.out, "waitevent during=lock=busy after=lock=free\n");
	int waits = 0;
	for (const std::string &l : log_lines())
		if (l.find(" cuStreamWaitEvent ") != std::string::npos) {
			waits++;
			EXPECT_NE(l.find("lock=busy"), std::string::npos) << l;
		}
	EXPECT_EQ(waits, 1);
}

// Streams the program creates get the slot's priority, clamped into the
// device's range; the program's own request is replaced; with several
// slots, the lowest of their priorities.
TEST_F(GpuslotRun, StreamsGetTheSlotsPriorityClampedIntoTheRange)
{
	layout({15, 3});
	Exit e = run({kLinked, "streams"});
	ASSERT_EQ(e.status, 0) << e.out;
	EXPECT_EQ(e.out, "streams 0 -1\n") << "the double without gpuslot-run";
	e = run({kRun, "--slot", "1", "--", kLinked, "streams"});
	ASSERT_EQ(e.status, 0) << e.out;
	EXPECT_EQ(e.out, "streams -3 -3\n");
	e = run({kRun, "--slot", "0", "--", kLinked, "streams"});
	ASSERT_EQ(e.status, 0);
	EXPECT_EQ(e.out, "streams -5 -5\n") << "15 levels, clamped to the 5 the GPU has";
	e = run({kRun, "--slots", "0-1", "--", kDl, "streams"});
	ASSERT_EQ(e.status, 0);
	EXPECT_EQ(e.out, "streams -3 -3\n");
}

// The SMs each stream's commands ran on, by stream handle (the double's
// sms= field of its command lines).
std::map<std::string, std::set<std::string>> sms_by_stream(const std::vector<std::string> &lines)
{
	std::map<std::string, std::set<std::string>> out;
	for (const std::string &l : lines) {
		if (l.find(" cuLaunchKernel") == std::string::npos)
			continue;
		const size_t st = l.find(" stream="), sm = l.find(" sms=");
		if (st == std::string::npos || sm == std::string::npos)
			continue;
		const std::string stream = l.substr(st + 8, l.find(' ', st + 8) - st - 8);
		out[stream].insert(l.substr(sm + 5, l.find(' ', sm + 5) - sm - 5));
	}
	return out;
}

// The program's NON_BLOCKING streams are made on the slot's green context
// (its SMs, its priority), through the linked driver and cudart's path
// alike; a blocking stream stays on the whole GPU (a green context's
// streams cannot be blocking), and the interposer says so; a whole-GPU
// slot makes no green context; --slots of different partitions run on
// the union of theirs.
TEST_F(GpuslotRun, NonBlockingStreamsRunOnTheSlotsPartition)
{
	// Slot 0: groups 0-3 (SMs 0-31), priority 2; slot 1: groups 4-15.
	sm_layout({0xf, 0xfff0}, {2, 0});
	for (const std::string &probe : {kLinked, kDl}) {
		for (auto [slot, sms] : {std::pair{"0", "0-31"}, std::pair{"1", "32-127"}}) {
			fs::remove(log_);
			Exit e = run({kRun, "--slot", slot, "--", probe, "confine"});
			ASSERT_EQ(e.status, 0) << e.out;
			std::istringstream out(e.out);
			std::string word, nb, b;
			out >> word >> nb >> b;
			ASSERT_EQ(word, "confine") << e.out;
			const auto lines = log_lines();
			const auto ran = sms_by_stream(lines);
			EXPECT_EQ(ran.at(nb), std::set<std::string>{sms}) << probe << " slot " << slot;
			EXPECT_EQ(ran.at(b), std::set<std::string>{"all"}) << probe << " slot " << slot;
			// Made once per process, by libgpuslot; the stream
			// read back the slot's priority (-2 of 0 .. -5).
			int greens = 0, made = 0;
			for (const std::string &l : lines) {
				greens += l.find(" cuGreenCtxCreate ") != std::string::npos;
				if (l.find(" cuGreenCtxStreamCreate ") != std::string::npos &&
				    l.find(std::string(" sms=") + sms) != std::string::npos)
					made++;
			}
			EXPECT_EQ(greens, 1) << probe;
			// libgpuslot's slot stream and the program's.
			EXPECT_EQ(made, 2) << probe;
		}
	}
	// A blocking stream is said, on stderr.
	Exit e = run_with_stderr({kRun, "--slot", "0", "--", kLinked, "confine"});
	EXPECT_NE(e.out.find("a blocking stream"), std::string::npos) << e.out;
	// Whole-GPU slots: no green context at all.
	layout({2, 0});
	fs::remove(log_);
	e = run_with_stderr({kRun, "--slot", "0", "--", kDl, "confine"});
	ASSERT_EQ(e.status, 0) << e.out;
	for (const std::string &l : log_lines())
		EXPECT_EQ(l.find("cuGreenCtx"), std::string::npos) << l;
	EXPECT_EQ(e.out.find("whole GPU"), std::string::npos) << "nothing to say: " << e.out;
	sm_layout({0xf, 0xfff0}, {2, 0});
	// A context the program made itself is no green context's: its
	// streams stay on the whole GPU, said.
	extra_env_ = {"FAKE_CUDA_OWN_CTX=1"};
	fs::remove(log_);
	e = run_with_stderr({kRun, "--slot", "0", "--", kLinked, "confine"});
	ASSERT_EQ(e.status, 0) << e.out;
	EXPECT_NE(e.out.find("a context the program made itself"), std::string::npos) << e.out;
	for (const auto &[stream, sms] : sms_by_stream(log_lines()))
		EXPECT_EQ(sms, std::set<std::string>{"all"}) << stream;
	// A partition that cannot be had (the domain's GPU is not the
	// driver's): the program's NON_BLOCKING stream is refused, said.
	extra_env_ = {"FAKE_CUDA_PCI=0000:3b:00.0"};
	fs::remove(log_);
	e = run_with_stderr({kRun, "--slot", "0", "--", kDl, "confine"});
	EXPECT_EQ(e.status, 3) << e.out;
	EXPECT_NE(e.out.find("the program's stream is refused"), std::string::npos) << e.out;
	extra_env_.clear();
	// Slots of different partitions: the program's streams run on the
	// union of theirs, whichever slot a job holds, never outside it.
	sm_layout({0x3, 0xc, 0xfff0}, {2, 0, 0});
	for (auto [slots, probe, sms] : {std::tuple{"0-1", kDl, "0-31"},
					 std::tuple{"1-2", kLinked, "16-127"}}) {
		fs::remove(log_);
		e = run({kRun, "--slots", slots, "--", probe, "confine"});
		ASSERT_EQ(e.status, 0) << e.out;
		std::istringstream out(e.out);
		std::string word, nb;
		out >> word >> nb;
		EXPECT_EQ(sms_by_stream(log_lines()).at(nb), std::set<std::string>{sms}) << slots;
	}
}

// AMD: gpuslot-run sets HSA_CU_MASK to its slots' CUs (the union for
// --slots; the bits of the layout's HIP CU masks, as ROCr applies them to
// every queue), at ROCr's index of the domain's GPU: the KFD topology's GPU
// order (a CPU node skipped), renumbered by ROCR_VISIBLE_DEVICES. A GPU
// hidden from ROCr, an index it cannot place (a UUID), a mask the user set
// already: gpuslot-run refuses before the program runs. A whole-GPU slot
// sets none.
TEST_F(GpuslotRun, AmdSlotsSetHsaCuMaskToTheirCus)
{
	const fs::path topo = kfd_topology();
	std::vector<gpuslot_partition> parts(3);
	parts[0].units[0] = 0xffff;		   // CUs 0-15
	parts[1].units[0] = 0xffffULL << 32;	   // CUs 32-47
	parts[2].units[1] = 0xffULL << (100 - 64); // CUs 100-107
	partitioned_layout(GPUSLOT_UNIT_AMD_CU, 1, 120, parts, {0, 0, 0});
	const std::string env = "GPUSLOT_KFD_TOPOLOGY=" + topo.string();
	auto mask_under = [&](std::vector<std::string> options, std::vector<std::string> more) {
		extra_env_ = {env};
		extra_env_.insert(extra_env_.end(), more.begin(), more.end());
		std::vector<std::string> args = {kRun};
		args.insert(args.end(), options.begin(), options.end());
		args.insert(args.end(), {"--", "/usr/bin/printenv", "HSA_CU_MASK"});
		return run_with_stderr(args);
	};
	Exit e = mask_under({"--slot", "1"}, {});
	EXPECT_EQ(e.status, 0) << e.out;
	EXPECT_EQ(e.out, "1:32-47\n");
	e = mask_under({"--slots", "0-2"}, {});
	EXPECT_EQ(e.out, "1:0-15,32-47,100-107\n");
	e = mask_under({"--slot", "1"}, {"ROCR_VISIBLE_DEVICES=1,0"});
	EXPECT_EQ(e.out, "0:32-47\n") << "ROCr's GPU 1 listed first";
	e = mask_under({"--slot", "1"}, {"ROCR_VISIBLE_DEVICES=0"});
	EXPECT_EQ(e.status, 125) << e.out;
	EXPECT_NE(e.out.find("hides the domain's GPU"), std::string::npos) << e.out;
	e = mask_under({"--slot", "1"}, {"ROCR_VISIBLE_DEVICES=GPU-0123456789abcdef"});
	EXPECT_EQ(e.status, 125) << e.out;
	e = mask_under({"--slot", "1"}, {"HSA_CU_MASK=0:0-3"});
	EXPECT_EQ(e.status, 125) << e.out;
	EXPECT_NE(e.out.find("HSA_CU_MASK is set"), std::string::npos) << e.out;
	extra_env_ = {"GPUSLOT_KFD_TOPOLOGY=" + (dir_ / "none").string()};
	e = run_with_stderr({kRun, "--slot", "1", "--", "/usr/bin/printenv", "HSA_CU_MASK"});
	EXPECT_EQ(e.status, 125) << "no topology: no index to give: " << e.out;
	// Whole-GPU slots: nothing to confine.
	layout({0, 0, 0});
	e = mask_under({"--slot", "1"}, {});
	EXPECT_EQ(e.status, 1) << "printenv: HSA_CU_MASK unset: " << e.out;
	EXPECT_EQ(e.out, "");
}

// A program that links libgpuslot and opens its own client of the cuda
// backend, under gpuslot-run on a partitioned slot: its library's driver
// lookups get libcuda's entry points, not the interposer's (the dlsym hook
// sees the caller is libgpuslot), so its whole-GPU slot stream is made by
// the driver, never on the program's partition, and its gpuslot_open()
// does not wait for the lock it holds itself (it did: the interposer's
// partition opened from inside it).
TEST_F(GpuslotRun, AProgramsOwnLibgpuslotGetsTheDriversEntryPoints)
{
	sm_layout({0, 0xfff0}, {2, 0}); // slot 0 the whole GPU, slot 1 groups 4-15
	fs::remove(log_);
	Exit e = run({kRun, "--slot", "1", "--", kClient});
	ASSERT_EQ(e.status, 0) << e.out;
	EXPECT_EQ(e.out, "client ok priority 2\n");
	int plain = 0;
	for (const std::string &l : log_lines()) {
		EXPECT_EQ(l.find(" cuGreenCtxStreamCreate "), std::string::npos)
			<< "no stream on a partition: " << l;
		plain += l.find(" cuStreamCreate priority=-2") != std::string::npos;
	}
	EXPECT_EQ(plain, 1) << "the library's own stream, by the driver";
}

struct Interval {
	uint64_t start, end;
};

// Each process's jobs in the double's log: from a command with no job
// open to the synchronization that returned after it.
std::map<pid_t, std::vector<Interval>> jobs_of(const std::vector<std::string> &lines)
{
	std::map<pid_t, std::vector<Interval>> jobs;
	std::map<pid_t, uint64_t> open;
	for (const std::string &l : lines) {
		std::istringstream in(l);
		pid_t pid;
		uint64_t t;
		std::string what;
		in >> pid >> t >> what;
		const bool command = what.rfind("cuLaunch", 0) == 0 || what == "cuMemcpyDtoH_v2" ||
				     what.rfind("hipLaunch", 0) == 0 || what == "hipMemcpyDtoH";
		const bool sync = what.rfind("cuStreamSynchronize", 0) == 0 ||
				  what == "cuCtxSynchronize" || what == "cuMemcpyDtoH_v2:done" ||
				  what == "hipStreamSynchronize" || what == "hipDeviceSynchronize" ||
				  what == "hipMemcpyDtoH:done";
		if (command && !open.count(pid))
			open[pid] = t;
		if (sync && open.count(pid)) {
			jobs[pid].push_back({open[pid], t});
			open.erase(pid);
		}
	}
	return jobs;
}

// The most jobs of different processes open at one instant.
unsigned int most_at_once(const std::map<pid_t, std::vector<Interval>> &jobs)
{
	std::vector<std::pair<uint64_t, int>> edges;
	for (auto &[pid, list] : jobs)
		for (const Interval &j : list) {
			edges.push_back({j.start, +1});
			edges.push_back({j.end, -1});
		}
	std::sort(edges.begin(), edges.end()); // an end before a start at one instant
	int now = 0, most = 0;
	for (auto &[t, d] : edges)
		most = std::max(most, now += d);
	return unsigned(most);
}

// --per-sync: programs that know nothing of the lock never have more than
// k jobs on the GPU at once (k = 1 with two, k = 2 with three), and each
// gets all its jobs done.
TEST_F(GpuslotRun, PerSyncNeverMoreThanKJobsAtOnce)
{
	for (unsigned int k : {1u, 2u}) {
		SCOPED_TRACE("k = " + std::to_string(k));
		layout(std::vector<unsigned int>(k, 0));
		fs::remove(log_);
		std::vector<Child> children;
		for (unsigned int i = 0; i <= k; i++)
			children.push_back(spawn({kRun, "--slots", k == 1 ? "0" : "0,1", "--per-sync",
						  "--", i % 2 ? kDl : kLinked, "jobs", "12"}));
		for (Child &c : children) {
			const Exit e = finish(c);
			EXPECT_EQ(e.status, 0);
			EXPECT_EQ(e.out, "jobs 12\n");
		}
		const auto jobs = jobs_of(log_lines());
		ASSERT_EQ(jobs.size(), k + 1);
		for (auto &[pid, list] : jobs)
			EXPECT_EQ(list.size(), 13u) << "12 jobs and a blocking copy of pid " << pid;
		EXPECT_LE(most_at_once(jobs), k);
		EXPECT_EQ(try_acquire(), 0) << "every slot given back";
	}
}

// --hold: the slot is taken before the program's first GPU call, kept
// across its synchronizations, and freed when it is killed, or exits.
TEST_F(GpuslotRun, HoldKeepsTheSlotFromStartToExit)
{
	layout({0});
	Child c = spawn({kRun, "--slot", "0", "--hold", "--", kLinked, "hold"});
	ASSERT_EQ(line(c), "started");
	EXPECT_EQ(try_acquire(), EAGAIN) << "held before the first CUDA call";
	ASSERT_EQ(write(c.in, "\n", 1), 1);
	ASSERT_EQ(line(c), "jobs 1");
	ASSERT_EQ(line(c), "worked");
	EXPECT_EQ(try_acquire(), EAGAIN) << "held after a synchronization";
	ASSERT_EQ(kill(c.pid, SIGKILL), 0);
	const Exit killed = finish(c);
	EXPECT_EQ(killed.status, -1);
	int got = EAGAIN;
	for (int i = 0; i < 500 && got == EAGAIN; i++) {
		got = try_acquire();
		if (got == EAGAIN)
			usleep(10000);
	}
	EXPECT_EQ(got, 0) << "a killed holder's slot is freed";

	c = spawn({kRun, "--slot", "0", "--hold", "--", kDl, "hold"});
	ASSERT_EQ(line(c), "started");
	EXPECT_EQ(try_acquire(), EAGAIN);
	ASSERT_EQ(write(c.in, "\n\n", 2), 2);
	const Exit done = finish(c);
	EXPECT_EQ(done.status, 0);
	EXPECT_EQ(try_acquire(), 0) << "an exited holder's slot is free at once";
}

// One field of a line of the double's log ("key=value").
uint64_t field(const std::string &line, const std::string &key)
{
	const size_t at = line.find(" " + key + "=");
	return at == std::string::npos ? 0 : std::stoull(line.substr(at + key.size() + 2));
}

// The kernels of the log as (sent, end) in the double's clock: the CUDA
// double's cuLaunchKernel*, the HIP double's hipLaunchKernel.
std::vector<std::pair<uint64_t, uint64_t>> kernels(const std::vector<std::string> &lines)
{
	std::vector<std::pair<uint64_t, uint64_t>> out;
	for (const std::string &l : lines) {
		std::istringstream in(l);
		pid_t pid;
		uint64_t t;
		std::string what;
		in >> pid >> t >> what;
		if (what.rfind("cuLaunchKernel", 0) == 0 || what == "hipLaunchKernel")
			out.push_back({t, field(l, "end")});
	}
	return out;
}

// The log as the work edges and what lies between them: 1 pending, 0
// drained, k a kernel (@launch), s a stream synchronization (@sync).
std::string work_edges(const std::vector<std::string> &lines, const std::string &launch,
		       const std::string &sync)
{
	std::string edges;
	for (const std::string &l : lines) {
		if (l.find(" gpuslot_set_work ") != std::string::npos)
			edges += l.find("pending=1") != std::string::npos ? "1" : "0";
		if (l.find(launch) != std::string::npos)
			edges += "k";
		if (l.find(sync) != std::string::npos)
			edges += "s";
	}
	return edges;
}

// The most kernels of the log unfinished on the double's GPU at once, seen
// at each launch: the launches before it whose work ends after it was sent,
// and itself.
unsigned int most_in_flight(const std::vector<std::string> &lines)
{
	const auto launches = kernels(lines);
	unsigned int most = 0;
	for (size_t i = 0; i < launches.size(); i++) {
		unsigned int n = 0;
		for (size_t j = 0; j <= i; j++)
			n += launches[j].second > launches[i].first;
		most = std::max(most, n);
	}
	return most;
}

void GpuslotRun::nothing_sent_while_preempted(const std::vector<std::string> &policy,
					       const std::string &program, const std::string &launch)
{
	const fs::path preempts = dir_ / "preempts";
	preload_ = FAKE_WORK_STATE;
	extra_env_.push_back("FAKE_WORK_PREEMPTS=" + preempts.string());
	auto logged = [&](const std::string &what) {
		unsigned int n = 0;
		if (fs::exists(log_))
			for (const std::string &l : log_lines())
				n += l.find(what) != std::string::npos;
		return n;
	};
	// Waits on the log, not on a fixed time, so that a slow start on a
	// loaded machine decides nothing.
	auto within_10s = [](auto done) {
		const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
		while (!done() && std::chrono::steady_clock::now() < until)
			std::this_thread::sleep_for(std::chrono::milliseconds(5));
		return done();
	};
	for (bool preempt : {true, false}) {
		SCOPED_TRACE(preempt ? "preempted" : "--no-preempt");
		fs::remove(log_);
		std::ofstream(preempts).put('\n');
		std::vector<std::string> args = {kRun, "--slot", "1"};
		args.insert(args.end(), policy.begin(), policy.end());
		args.insert(args.end(), {"--inflight", "2"});
		if (!preempt)
			args.push_back("--no-preempt");
		args.insert(args.end(), {"--", program, "burst", "20"});
		Child c = spawn(args);
		if (preempt) {
			// The work edge is told before the first command
			// meets the throttle.
			EXPECT_TRUE(within_10s([&] { return logged(" gpuslot_set_work ") > 0; }))
				<< "the burst never began";
			std::this_thread::sleep_for(std::chrono::milliseconds(50));
			EXPECT_EQ(logged(launch), 0u) << "a kernel went while preempted";
		} else {
			EXPECT_TRUE(within_10s([&] { return logged(launch) == 20; }))
				<< "held back with --no-preempt";
		}
		timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		const uint64_t ended = uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
		fs::remove(preempts);
		const Exit e = finish(c);
		ASSERT_EQ(e.status, 0) << e.out;
		const auto sent = kernels(log_lines());
		ASSERT_EQ(sent.size(), 20u);
		if (preempt) {
			EXPECT_GE(sent.front().first, ended) << "a kernel went while preempted";
			EXPECT_EQ(most_in_flight(log_lines()), 2u);
		} else {
			EXPECT_LT(sent.back().first, ended);
		}
	}
}

void GpuslotRun::work_edges_two_per_job(const std::string &program, const std::string &launch,
					 const std::string &sync)
{
	preload_ = FAKE_WORK_STATE;
	for (const char *policy : {"--hold", "--per-sync"}) {
		SCOPED_TRACE(policy);
		fs::remove(log_);
		const Exit e = run({kRun, "--slot", "0", policy, "--", program, "jobs", "3"});
		ASSERT_EQ(e.status, 0) << e.out;
		EXPECT_EQ(work_edges(log_lines(), launch, sync), "1kkks0" "1kkks0" "1kkks0" "10");
	}
}

void GpuslotRun::bound_where_outranked(const std::string &program, const std::string &record,
				       const std::string &query, const std::string &create)
{
	preload_ = FAKE_WORK_STATE;
	struct Case {
		std::vector<std::string> options;
		unsigned int most; // 0: more than 2
	};
	const Case cases[] = {
		{{"--slot", "1", "--inflight", "2", "--hold"}, 2},
		{{"--slot", "1", "--inflight", "2", "--per-sync"}, 2},
		{{"--slot", "1", "--inflight", "2", "--no-preempt"}, 0},
		{{"--slot", "0", "--inflight", "2"}, 0},
	};
	for (const Case &c : cases) {
		std::string name;
		for (const std::string &o : c.options)
			name += o + " ";
		SCOPED_TRACE(name);
		fs::remove(log_);
		std::vector<std::string> args = {kRun};
		args.insert(args.end(), c.options.begin(), c.options.end());
		args.insert(args.end(), {"--", program, "burst", "20"});
		const Exit e = run(args);
		ASSERT_EQ(e.status, 0) << e.out;
		EXPECT_EQ(e.out, "burst 20\n");
		const auto lines = log_lines();
		const unsigned int most = most_in_flight(lines);
		if (c.most)
			EXPECT_EQ(most, c.most);
		else
			EXPECT_GT(most, 2u) << "the burst was held back";
		// On their one stream, in the order sent: their ends rise.
		std::vector<uint64_t> ends;
		for (const auto &[sent, end] : kernels(lines))
			ends.push_back(end);
		EXPECT_EQ(ends.size(), 20u);
		EXPECT_TRUE(std::is_sorted(ends.begin(), ends.end()));
		// The markers are recorded and asked in relaxed capture mode,
		// so that they cannot invalidate another thread's capture.
		unsigned int markers = 0, created = 0;
		const std::string creating = create.substr(0, create.find(' '));
		for (const std::string &l : lines) {
			if (!create.empty() && l.find(" " + creating + " ") != std::string::npos) {
				created++;
				EXPECT_NE(l.find(create.substr(creating.size())), std::string::npos) << l;
			}
			if (l.find(" " + record + " ") == std::string::npos &&
			    l.find(" " + query + " ") == std::string::npos)
				continue;
			markers++;
			EXPECT_NE(l.find("mode=relaxed"), std::string::npos) << l;
		}
		if (c.most)
			EXPECT_GT(markers, 0u);
		else
			EXPECT_EQ(markers, 0u);
		if (!create.empty() && c.most) {
			EXPECT_GT(created, 0u) << "no marker made";
		}
	}
}

// The throttle through the interposer, its CUDA events and the driver
// double (1 ms per kernel), with the work state of libgpuslot faked
// (fake_work_state.cc). A program on slot 1, outranked by slot 0: a burst
// of 20 kernels never has more than --inflight 2 unfinished, all 20 run in
// order on their stream, every marker in relaxed capture mode; with
// --no-preempt, or on slot 0 (nobody outranks it), the burst is all
// unfinished at once (nothing waits, nothing marked).
TEST_F(GpuslotRun, ThrottleKeepsTheBoundWhereOutranked)
{
	layout({1, 0});
	bound_where_outranked(kLinked, "cuEventRecord", "cuEventQuery", "");
}

// While a higher slot preempts, the program sends nothing: a burst started
// during a preemption has told the lock of its work (so it is at its first
// command) and sent no kernel 50 ms later; it sends its first kernel only
// after the preemption ended, then keeps to the bound. With --no-preempt the
// whole burst goes during the preemption (nothing_sent_while_preempted()).
TEST_F(GpuslotRun, NothingIsSentWhileAHigherSlotPreempts)
{
	layout({1, 0});
	nothing_sent_while_preempted({"--hold"}, kLinked, " cuLaunchKernel ");
}

// The work edges through the interposer: exactly two per job (pending at
// its first command, drained at the synchronization that finished it),
// under --hold and --per-sync alike, for 3 jobs of 3 kernels and a job of
// one blocking copy.
TEST_F(GpuslotRun, WorkEdgesTwoPerJobUnderBothPolicies)
{
	layout({0});
	work_edges_two_per_job(kDl, " cuLaunchKernel ", " cuStreamSynchronize");
}

// Bad input gets a clear error, and the program is not run.
TEST_F(GpuslotRun, LauncherRejectsBadInput)
{
	layout({0, 0});
	EXPECT_EQ(run({kRun, "--slot", "2", "--", kLinked, "streams"}).status, 125) << "k is 2";
	EXPECT_EQ(run({kRun, "--slots", "1-0", "--", kLinked, "streams"}).status, 125);
	EXPECT_EQ(run({kRun, "--", kLinked, "streams"}).status, 125) << "no slot";
	EXPECT_EQ(run({kRun, "--slot", "0"}).status, 125) << "no program";
	EXPECT_EQ(run({kRun, "--slot", "0", "--", "/nonexistent/program"}).status, 127);
	// --inflight: a number of commands 0 .. 4096, all of it.
	for (const char *bad : {"", "-1", "4097", "4x", " 4", "99999999999999999999"}) {
		const Exit e = run({kRun, "--slot", "0", "--inflight", bad, "--", kLinked, "streams"});
		EXPECT_EQ(e.status, 125) << "--inflight \"" << bad << "\"";
	}
	EXPECT_EQ(run({kRun, "--slot", "0", "--inflight"}).status, 125) << "no value";
	EXPECT_FALSE(fs::exists(log_)) << "no program ran";
	EXPECT_EQ(run({kRun, "--slot", "0", "--", kLinked, "streams", "--inflight"}).status, 0)
		<< "the program's own arguments are its own";
	// The interposer reads the threshold as strictly, where it is set by
	// hand.
	Exit e = run({"/usr/bin/env", "GPUSLOT_RUN_SLOTS=0", "GPUSLOT_RUN_INFLIGHT=many",
		      std::string("LD_PRELOAD=") + (*GPUSLOT_ASAN_RUNTIME ? GPUSLOT_ASAN_RUNTIME ":" : "") +
			      GPUSLOT_RUN_INTERPOSER,
		      kLinked, "streams"});
	EXPECT_EQ(e.status, 125) << e.out;
	for (const char *good : {"0", "1", "4096"}) {
		e = run({kRun, "--slot", "0", "--inflight", good, "--", kLinked, "streams"});
		EXPECT_EQ(e.status, 0) << "--inflight " << good << ": " << e.out;
	}
	e = run({kRun, "--slot", "0", "--no-preempt", "--", kLinked, "streams"});
	EXPECT_EQ(e.status, 0) << e.out;
	EXPECT_EQ(run({kRun, "--slot", "0", "--window", "16", "--", kLinked, "streams"}).status,
		  125)
		<< "--window is gone (a bound at all times is --inflight's now)";
	// The interposer, loaded by hand with one variable set: whether to
	// hold back, and how often a held-back command looks again (10 ..
	// 100000 us), read as strictly.
	auto interposed = [&](const std::string &setting) {
		return run_with_stderr({"/usr/bin/env", "GPUSLOT_RUN_SLOTS=0", setting,
					std::string("LD_PRELOAD=") +
						(*GPUSLOT_ASAN_RUNTIME ? GPUSLOT_ASAN_RUNTIME ":" : "") +
						GPUSLOT_RUN_INTERPOSER,
					kLinked, "streams"});
	};
	for (const char *bad : {"", "yes", "2"}) {
		e = interposed(std::string("GPUSLOT_RUN_PREEMPT=") + bad);
		EXPECT_EQ(e.status, 125) << "GPUSLOT_RUN_PREEMPT=" << bad << ": " << e.out;
	}
	for (const char *bad : {"", "9", "100001", "50us"}) {
		e = interposed(std::string("GPUSLOT_RUN_POLL_US=") + bad);
		EXPECT_EQ(e.status, 125) << "GPUSLOT_RUN_POLL_US=" << bad << ": " << e.out;
		EXPECT_NE(e.out.find("GPUSLOT_RUN_POLL_US"), std::string::npos) << e.out;
	}
	for (const char *good : {"10", "100000"}) {
		e = run({"/usr/bin/env", "GPUSLOT_RUN_POLL_US=" + std::string(good), kRun, "--slot",
			 "0", "--", kLinked, "streams"});
		EXPECT_EQ(e.status, 0) << "GPUSLOT_RUN_POLL_US=" << good << ": " << e.out;
	}
	const Exit help = run({kRun, "--help"});
	EXPECT_EQ(help.status, 0);
	EXPECT_NE(help.out.find("usage: gpuslot-run"), std::string::npos);
	EXPECT_NE(help.out.find("--inflight N"), std::string::npos);
	EXPECT_NE(help.out.find("--no-preempt"), std::string::npos);
}

// On a domain that is not AMD's, gpuslot-run reserves no hardware queue and
// leaves GPU_MAX_HW_QUEUES alone; a GPUSLOT_RUN_HIP_QUEUES of the user's is
// not passed on; the streams' priority levels are (one read of the layout).
// Bad values of either are refused by the interposer.
TEST_F(GpuslotRun, NoQueuesAreReservedOffAmd)
{
	layout({0, 0});
	extra_env_.push_back("GPUSLOT_RUN_HIP_QUEUES=7");
	const Exit e = run({kRun, "--slot", "0", "--", "/bin/cat", "/proc/self/environ"});
	EXPECT_EQ(e.status, 0) << e.out;
	EXPECT_EQ(e.out.find("GPUSLOT_RUN_HIP_QUEUES="), std::string::npos) << e.out;
	EXPECT_EQ(e.out.find("GPU_MAX_HW_QUEUES="), std::string::npos) << e.out;
	EXPECT_NE(e.out.find(std::string("GPUSLOT_RUN_PRIORITY_LEVELS=0") + '\0'),
		  std::string::npos)
		<< e.out;
	// The interposer by hand, with a value out of range.
	extra_env_ = {"GPUSLOT_RUN_SLOTS=0", "GPUSLOT_RUN_HIP_QUEUES=1025"};
	preload_ = GPUSLOT_RUN_INTERPOSER;
	const Exit bad = run_with_stderr({"/bin/true"});
	EXPECT_EQ(bad.status, 125) << bad.out;
	EXPECT_NE(bad.out.find("GPUSLOT_RUN_HIP_QUEUES \"1025\""), std::string::npos) << bad.out;
	extra_env_ = {"GPUSLOT_RUN_SLOTS=0", "GPUSLOT_RUN_PRIORITY_LEVELS=16"};
	const Exit levels = run_with_stderr({"/bin/true"});
	EXPECT_EQ(levels.status, 125) << levels.out;
	EXPECT_NE(levels.out.find("GPUSLOT_RUN_PRIORITY_LEVELS \"16\""), std::string::npos)
		<< levels.out;
	EXPECT_EQ(hqd_used(), 0u);
}

#ifdef GPUSLOT_RUN_HIP_TESTS
// On an AMD domain: libgpuslot-run-hip.so against the HIP double
// (fake_libamdhip.cc, 1 ms per kernel, priorities 0 .. -2) and a HIP program
// that knows nothing of gpuslot (hip_run_probe.cc).
const std::string kHip = HIP_RUN_PROBE;

// The launcher preloads the HIP interposer on an AMD domain (a layout of
// CUs) and the CUDA one elsewhere: the environment the program was started
// with (/proc/self/environ: the interposer takes itself out of LD_PRELOAD
// at load, not out of that).
TEST_F(GpuslotRun, LauncherPreloadsTheHipInterposerOnAmd)
{
	auto preloaded = [&]() {
		const Exit e = run({kRun, "--slot", "0", "--", "/bin/cat", "/proc/self/environ"});
		EXPECT_EQ(e.status, 0) << e.out;
		std::string preload;
		std::istringstream in(e.out);
		for (std::string v; std::getline(in, v, '\0');)
			if (v.rfind("LD_PRELOAD=", 0) == 0)
				preload = v;
		return preload;
	};
	amd_layout({0, 0});
	std::string p = preloaded();
	EXPECT_NE(p.find(GPUSLOT_RUN_HIP_INTERPOSER), std::string::npos) << p;
	EXPECT_EQ(p.find(GPUSLOT_RUN_INTERPOSER), std::string::npos) << p;
	layout({0, 0});
	p = preloaded();
	EXPECT_NE(p.find(GPUSLOT_RUN_INTERPOSER), std::string::npos) << p;
	EXPECT_EQ(p.find(GPUSLOT_RUN_HIP_INTERPOSER), std::string::npos) << p;
	// A HIP interposer that is not there: said, and the program not run.
	amd_layout({0, 0});
	extra_env_.push_back("GPUSLOT_RUN_HIP_LIBRARY=" + (dir_ / "none.so").string());
	const Exit e = run_with_stderr({kRun, "--slot", "0", "--", kHip, "streams"});
	EXPECT_EQ(e.status, 125) << e.out;
	EXPECT_NE(e.out.find("GPUSLOT_RUN_HIP_LIBRARY"), std::string::npos) << e.out;
	const Exit help = run({kRun, "--help"});
	EXPECT_NE(help.out.find("libgpuslot-run-hip.so"), std::string::npos) << help.out;
}

// A HIP program's streams get the slot's priority, p levels above HIP's
// default (0, hipStreamCreate's), clamped into
// hipDeviceGetStreamPriorityRange (HIP's 1 .. -1, as the double has it),
// whichever way it made them; its own request is replaced. Counted from the
// range's least (1) instead, a slot of priority 0 would make streams below
// the program's plain ones and one of priority 1 would raise nothing.
TEST_F(GpuslotRun, HipStreamsGetTheSlotsPriority)
{
	amd_layout({1, 3, 0});
	Exit e = run({kHip, "streams"});
	ASSERT_EQ(e.status, 0) << e.out;
	EXPECT_EQ(e.out, "streams 0 0 -1\n") << "without gpuslot-run";
	e = run({kRun, "--slot", "0", "--", kHip, "streams"});
	EXPECT_EQ(e.status, 0) << e.out;
	EXPECT_EQ(e.out, "streams -1 -1 -1\n");
	e = run({kRun, "--slot", "1", "--hold", "--", kHip, "streams"});
	EXPECT_EQ(e.out, "streams -1 -1 -1\n") << "3 levels clamped to -1";
	e = run({kRun, "--slot", "2", "--", kHip, "streams"});
	EXPECT_EQ(e.out, "streams 0 0 0\n") << "priority 0: HIP's default, not its least";
	e = run({kRun, "--slots", "0,2", "--", kHip, "streams"});
	EXPECT_EQ(e.out, "streams 0 0 0\n") << "--slots: the lowest";
}

// The hardware queues a HIP program makes are counted in the domain's
// budget from before its first GPU call until it exits: its HIP's pools
// (GPU_MAX_HW_QUEUES, set to 1 where the user did not set it; the default
// priority's pool, and the high one's where the slot raises its streams)
// and the runtime's 3. A GPU_MAX_HW_QUEUES that is no plain number is
// refused. Where the budget cannot hold them, the program does not start
// its main(), is told why, and the budget is as it was.
TEST_F(GpuslotRun, HipProgramsQueuesAreReservedForItsLife)
{
	struct Case {
		const char *slot;
		const char *pool; // GPU_MAX_HW_QUEUES, nullptr: unset
		const char *seen; // what the program sees
		unsigned int queues;
	};
	for (const Case &k : {Case{"0", nullptr, "1", 1 * 2 + 3}, Case{"1", nullptr, "1", 1 + 3},
			      Case{"0", "3", "3", 3 * 2 + 3}, Case{"1", "3", "3", 3 + 3}}) {
		SCOPED_TRACE(std::string("slot ") + k.slot + ", GPU_MAX_HW_QUEUES " +
			     (k.pool ? k.pool : "unset"));
		extra_env_.clear();
		amd_layout({1, 0});
		if (k.pool)
			extra_env_.push_back(std::string("GPU_MAX_HW_QUEUES=") + k.pool);
		Child c = spawn({kRun, "--slot", k.slot, "--", kHip, "wait"});
		EXPECT_EQ(line(c), std::string("waiting GPU_MAX_HW_QUEUES=") + k.seen);
		EXPECT_EQ(hqd_used(), k.queues);
		const Exit e = finish(c);
		EXPECT_EQ(e.status, 0) << e.out;
		EXPECT_EQ(hqd_used(), 0u) << "given back at exit";
	}
	for (const char *pool : {"lots", "3x", "0", "-1", "257"}) {
		SCOPED_TRACE(std::string("GPU_MAX_HW_QUEUES ") + pool);
		extra_env_.clear();
		amd_layout({1, 0});
		extra_env_.push_back(std::string("GPU_MAX_HW_QUEUES=") + pool);
		const Exit e = run_with_stderr({kRun, "--slot", "0", "--", kHip, "wait"});
		EXPECT_EQ(e.status, 125) << e.out;
		EXPECT_NE(e.out.find("GPU_MAX_HW_QUEUES \"" + std::string(pool) + "\""),
			  std::string::npos)
			<< e.out;
		EXPECT_EQ(hqd_used(), 0u);
	}
	// A budget of 6 with 2 reserved by another member: slot 0's 5 do not
	// fit.
	extra_env_.clear();
	amd_layout({1, 0});
	ASSERT_EQ(server_->set_attr(0, "hqd_limit", "6"), 0);
	const std::unique_ptr<gpuslot::LockFile> other = member();
	gpuslot_reserve_queues r{};
	r.size = sizeof(r);
	r.count = 2;
	ASSERT_EQ(other->call(GPUSLOT_IOC_RESERVE_QUEUES, &r), 0);
	const Exit refused = run_with_stderr({kRun, "--slot", "0", "--", kHip, "wait"});
	EXPECT_EQ(refused.status, 125) << refused.out;
	EXPECT_EQ(refused.out.find("waiting"), std::string::npos) << "main() ran: " << refused.out;
	EXPECT_NE(refused.out.find("hardware queue"), std::string::npos) << refused.out;
	EXPECT_EQ(hqd_used(), 2u) << "the budget as it was";
	// Slot 1's 4 fit.
	Child c = spawn({kRun, "--slot", "1", "--", kHip, "wait"});
	EXPECT_EQ(line(c), "waiting GPU_MAX_HW_QUEUES=1");
	EXPECT_EQ(hqd_used(), 6u);
	EXPECT_EQ(finish(c).status, 0);
	EXPECT_EQ(hqd_used(), 2u);
}

// The levels the launcher passes (GPUSLOT_RUN_PRIORITY_LEVELS) never raise
// a stream above its slot: the interposer takes the lower of them and its
// own read of the layout. Loaded by hand on a slot of priority 0, levels 1
// leave the streams at the default; on one of priority 1, levels 0 do.
TEST_F(GpuslotRun, TheLaunchersLevelsNeverRaiseAStreamAboveItsSlot)
{
	preload_ = GPUSLOT_RUN_HIP_INTERPOSER;
	for (auto [priority, levels, streams] :
	     {std::tuple{0u, "1", "streams 0 0 0\n"}, std::tuple{1u, "0", "streams 0 0 0\n"},
	      std::tuple{1u, "1", "streams -1 -1 -1\n"}}) {
		SCOPED_TRACE("slot priority " + std::to_string(priority) + ", levels " + levels);
		extra_env_.clear();
		amd_layout({priority});
		extra_env_.push_back("GPUSLOT_RUN_SLOTS=0");
		extra_env_.push_back(std::string("GPUSLOT_RUN_PRIORITY_LEVELS=") + levels);
		const Exit e = run({kHip, "streams"});
		EXPECT_EQ(e.status, 0) << e.out;
		EXPECT_EQ(e.out, streams);
	}
}

// Every HIP command the interposer gates waits for the slot: under
// --per-sync on k = 1, each (a job of its own) reaches HIP (the double)
// while the lock says the slot is held, the blocking copies too; without
// gpuslot-run, none does.
TEST_F(GpuslotRun, HipEveryCommandWaitsForTheSlot)
{
	amd_layout({0});
	const std::vector<std::string> commands = {
		"hipModuleLaunchKernel", "hipLaunchKernel",	"hipLaunchCooperativeKernel",
		"hipGraphLaunch",	 "hipMemcpyAsync",	"hipMemcpyHtoDAsync",
		"hipMemcpyDtoHAsync",	 "hipMemcpyDtoDAsync", "hipMemsetAsync",
		"hipMemsetD32Async",	 "hipStreamWaitEvent", "hipMemcpy",
		"hipMemcpyHtoD",	 "hipMemcpyDtoH"};
	for (bool under : {false, true}) {
		SCOPED_TRACE(under ? "under gpuslot-run --per-sync" : "alone");
		fs::remove(log_);
		std::vector<std::string> args;
		if (under)
			args = {kRun, "--slot", "0", "--per-sync", "--"};
		args.insert(args.end(), {kHip, "commands"});
		const Exit e = run(args, true);
		ASSERT_EQ(e.status, 0) << e.out;
		EXPECT_EQ(e.out, "commands\n");
		std::vector<std::string> seen;
		for (const std::string &l : log_lines()) {
			std::istringstream in(l);
			pid_t pid;
			uint64_t t;
			std::string what;
			in >> pid >> t >> what;
			if (l.find(" lock=") == std::string::npos)
				continue;
			seen.push_back(what);
			EXPECT_NE(l.find(under ? " lock=busy" : " lock=free"), std::string::npos) << l;
		}
		EXPECT_EQ(seen, commands);
	}
	EXPECT_EQ(try_acquire(), 0) << "the slot given back";
}

// --per-sync on k = 1: two HIP programs never have a job on the (simulated)
// GPU at once, each gets its 12 jobs and its blocking copy done, and each
// job acquired once (the queue's count, GPUSLOT_RUN_STATS).
TEST_F(GpuslotRun, HipPerSyncNeverTwoJobsAtOnce)
{
	amd_layout({0});
	extra_env_.push_back("GPUSLOT_RUN_STATS=1");
	std::vector<Child> children;
	for (int i = 0; i < 2; i++)
		children.push_back(
			spawn({kRun, "--slot", "0", "--per-sync", "--", kHip, "jobs", "12"}, false,
			      true));
	for (Child &c : children) {
		const Exit e = finish(c);
		EXPECT_EQ(e.status, 0) << e.out;
		EXPECT_NE(e.out.find("jobs 12\n"), std::string::npos) << e.out;
		EXPECT_NE(e.out.find(": 13 acquires,"), std::string::npos) << e.out;
	}
	const auto jobs = jobs_of(log_lines());
	ASSERT_EQ(jobs.size(), 2u);
	for (auto &[pid, list] : jobs)
		EXPECT_EQ(list.size(), 13u) << "12 jobs and a blocking copy of pid " << pid;
	EXPECT_EQ(most_at_once(jobs), 1u);
	EXPECT_EQ(try_acquire(), 0) << "the slot given back";
}

// The work edges are exactly pending and drained around each job of a HIP
// program, and around its blocking copy, under both policies.
TEST_F(GpuslotRun, HipWorkEdgesTwoPerJobUnderBothPolicies)
{
	amd_layout({0});
	work_edges_two_per_job(kHip, " hipLaunchKernel ", " hipStreamSynchronize");
}

// The throttle on HIP: a HIP program on slot 1, outranked by slot 0, sends
// a burst of 20 kernels with never more than --inflight 2 unfinished, under
// --hold and --per-sync, in order, its markers (HIP events) recorded and
// asked in relaxed capture mode; with --no-preempt or on slot 0, all at once.
TEST_F(GpuslotRun, HipThrottleKeepsTheBoundWhereOutranked)
{
	amd_layout({1, 0});
	// Markers are events without timing (hipEventDisableTiming).
	bound_where_outranked(kHip, "hipEventRecord", "hipEventQuery",
			      "hipEventCreateWithFlags flags=2");
}

// While a higher slot preempts, a HIP program sends nothing: a burst begun
// during the preemption sends its first kernel after it ended, then keeps
// to the bound; with --no-preempt it runs during the preemption.
TEST_F(GpuslotRun, HipNothingIsSentWhileAHigherSlotPreempts)
{
	amd_layout({1, 0});
	nothing_sent_while_preempted({"--per-sync"}, kHip, " hipLaunchKernel ");
}
#endif // GPUSLOT_RUN_HIP_TESTS

} // namespace
