// SPDX-License-Identifier: GPL-2.0
// gpuslotd and gpuslotctl against the real module, on the Radeon VII
// topology fixture (60 CUs, 4 SEs x 15): planning, re-planning after an
// admin writes k, admin partitions, reload, the queue audit, sd_notify.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>
#include <sstream>

#include "device.h"

namespace gpuslot::test {
namespace {

const char kTopology[] = "/fixtures/kfd/radeon-vii-gfx906";
const char kConfig[] = "/tmp/gpuslotd.conf";
const char kLog[] = "/tmp/gpuslotd.log";
const char kStateDir[] = "/tmp/gpuslot-run";
const char kKfdProc[] = "/tmp/kfd-proc";
const char kNotify[] = "/tmp/gpuslotd-notify.sock";

std::string domain_file(const char *attr)
{
	return read_attr(0, attr);
}

// Runs a shell command; its exit status and what it printed (both streams).
struct Output {
	int status;
	std::string text;
};
Output run(const std::string &cmd)
{
	FILE *p = popen((cmd + " 2>&1").c_str(), "r");
	std::string text;
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
		text.append(buf, n);
	int st = pclose(p);
	return {WIFEXITED(st) ? WEXITSTATUS(st) : 128, text};
}

std::string gpuslotctl(const std::string &args)
{
	return std::string("/bin/gpuslotctl ") + args + " --topology " + kTopology +
	       " --dri '' --state-dir " + kStateDir;
}

// Slot @slot's units from sysfs (slot<i>/units: "all" or the kernel's
// %*pb bitmap, 32-bit chunks joined by commas) as a number; -1 for "all".
// The Radeon VII has 60 CUs: one 64-bit word holds them.
long long slot_units(unsigned int domain, unsigned int slot)
{
	std::string t = read_attr(domain, "slot" + std::to_string(slot) + "/units");
	while (!t.empty() && t.back() == '\n')
		t.pop_back();
	if (t == "all")
		return -1;
	t.erase(std::remove(t.begin(), t.end(), ','), t.end());
	return t.empty() ? -2 : (long long)std::stoull(t, nullptr, 16);
}

// Every slot's units, slots 0 .. k - 1.
std::vector<long long> slot_masks(unsigned int domain = 0)
{
	std::vector<long long> out;
	const unsigned int k = unsigned(std::stoul(read_attr(domain, "k")));
	for (unsigned int slot = 0; slot < k; slot++)
		out.push_back(slot_units(domain, slot));
	return out;
}

// CU counts of the partitions in sysfs; -1 for "all".
std::vector<int> partition_sizes()
{
	std::vector<int> out;
	for (long long m : slot_masks())
		out.push_back(m < 0 ? -1 : std::popcount((unsigned long long)m));
	return out;
}

class Daemon : public testing::Test {
protected:
	void SetUp() override
	{
		reset_domain(0);
		mkdir(kKfdProc, 0755);
		unlink(kNotify);
		notify_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		ASSERT_GE(notify_, 0);
		sockaddr_un a{};
		a.sun_family = AF_UNIX;
		strcpy(a.sun_path, kNotify);
		ASSERT_EQ(bind(notify_, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
	}

	void TearDown() override
	{
		if (pid_ > 0) {
			kill(pid_, SIGTERM);
			EXPECT_EQ(wait_child(pid_), 0) << log();
		}
		close(notify_);
		reset_domain(0);
		EXPECT_EQ(kernel_log_problems(), std::vector<std::string>{});
	}

	static void write_config(const std::string &text)
	{
		std::ofstream(kConfig, std::ios::trunc) << text;
	}

	// Start gpuslotd as systemd would: NOTIFY_SOCKET set, in the foreground.
	void start(const char *topology = kTopology)
	{
		pid_ = fork_one_thread();
		if (pid_ == 0) {
			int fd = open(kLog, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			dup2(fd, 1);
			dup2(fd, 2);
			setenv("NOTIFY_SOCKET", kNotify, 1);
			execl("/bin/gpuslotd", "gpuslotd", "--config", kConfig,
			      "--topology", topology, "--dri", "", "--state-dir",
			      kStateDir, "--kfd-proc", kKfdProc, nullptr);
			_exit(127);
		}
	}

	// The next notify message that contains @what, within @ms.
	std::string wait_notify(const std::string &what, int ms = 60000)
	{
		for (;;) {
			pollfd p{notify_, POLLIN, 0};
			if (poll(&p, 1, ms) != 1)
				return "";
			char buf[4096];
			ssize_t n = recv(notify_, buf, sizeof(buf) - 1, 0);
			if (n <= 0)
				return "";
			buf[n] = '\0';
			notes_.push_back(buf);
			if (strstr(buf, what.c_str()))
				return buf;
		}
	}

	static std::string log() { return read_file(kLog); }

	int notify_ = -1;
	pid_t pid_ = -1;
	std::vector<std::string> notes_;
};

TEST_F(Daemon, AppliesThePlanAndTellsSystemdItIsReady)
{
	// 1 where that is the only boost priority (kmod/compat.h).
	const std::string boost = boost_limited() ? "1" : "40";
	write_config("[default]\nk = 4\nboost_priority = " + boost + "\n");
	start();
	std::string ready = wait_notify("READY=1");
	ASSERT_NE(ready, "") << log();
	EXPECT_NE(ready.find("STATUS=gpu0 k 4"), std::string::npos) << ready;

	EXPECT_EQ(domain_file("k"), "4\n");
	EXPECT_EQ(domain_file("unit_kind"), "amd-cu\n");
	EXPECT_EQ(domain_file("nr_units"), "60\n");
	EXPECT_EQ(domain_file("unit_size"), "1\n");
	EXPECT_EQ(domain_file("hqd_limit"), "24\n"); // num_cp_queues
	EXPECT_EQ(domain_file("boost_priority"), boost + "\n");
	// The fixture's location_id 768: bus 3. Clients find the GPU by it.
	EXPECT_EQ(domain_file("pci_bus_id"), "0000:03:00.0\n");
	// k = 4 on 4 SEs x 15: one SE each, the acceptance layout.
	auto all = slot_masks();
	ASSERT_EQ(all.size(), 4u);
	std::set<long long> masks(all.begin(), all.end());
	EXPECT_EQ(masks, (std::set<long long>{0x111111111111111, 0x222222222222222,
					      0x444444444444444, 0x888888888888888}));
	for (unsigned int slot = 0; slot < 4; slot++)
		EXPECT_EQ(read_attr(0, "slot" + std::to_string(slot) + "/priority"), "0\n");
}

// Two GPUs, one of them unreadable (issue 31): gpuslotd names it and
// manages the other, in the domain it had with both readable (1); the
// broken GPU's domain 0 is left as it was.
TEST_F(Daemon, AnUnreadableGpuIsSkippedAndMovesNoOther)
{
	ASSERT_EQ(unload_module(), 0);
	ASSERT_EQ(load_module("domains=2"), 0);
	write_config("[default]\nk = 2\n");
	start("/fixtures/kfd-roots/one-gpu-unreadable");
	std::string ready = wait_notify("READY=1");
	EXPECT_NE(ready.find("STATUS=gpu1 k 2"), std::string::npos) << ready << log();
	EXPECT_NE(log().find("KFD node 1 (0000:0b:00.0) cannot be read: "), std::string::npos)
		<< log();
	EXPECT_NE(log().find("'simd_per_cu' is 'zero'"), std::string::npos) << log();
	EXPECT_EQ(read_attr(1, "unit_kind"), "amd-cu\n");
	EXPECT_EQ(read_attr(1, "nr_units"), "96\n");
	EXPECT_EQ(read_attr(1, "k"), "2\n");
	EXPECT_EQ(read_attr(1, "pci_bus_id"), "0000:86:00.0\n");
	EXPECT_EQ(read_attr(0, "k"), "1\n");
	EXPECT_EQ(read_attr(0, "pci_bus_id"), "\n");
	// gpuslotctl maps domains to GPUs as gpuslotd does: domain 0 (the
	// unreadable GPU's) is shown and checked against no GPU, never against
	// the gfx1100 of domain 1.
	const std::string ctl = "/bin/gpuslotctl status --topology "
				"/fixtures/kfd-roots/one-gpu-unreadable --dri '' --domain ";
	auto zero = run(ctl + "0");
	EXPECT_EQ(zero.status, 0) << zero.text;
	EXPECT_EQ(zero.text.find("gfx1100"), std::string::npos) << zero.text;
	auto one = run(ctl + "1");
	EXPECT_EQ(one.status, 0) << one.text;
	EXPECT_NE(one.text.find("gpu1: gfx1100"), std::string::npos) << one.text;
	kill(pid_, SIGTERM);
	EXPECT_EQ(wait_child(pid_), 0) << log();
	pid_ = -1;
	ASSERT_EQ(unload_module(), 0);
	ASSERT_EQ(load_module(""), 0);
}

TEST_F(Daemon, RePlansWhenAnAdminWritesKAndStatusShowsIt)
{
	write_config("[default]\nk = 4\n");
	start();
	ASSERT_NE(wait_notify("READY=1"), "") << log();

	ASSERT_EQ(write_attr(0, "k", "3"), 0);
	ASSERT_TRUE(wait_until([] {
		return partition_sizes() == std::vector<int>{20, 20, 20};
	})) << log();

	// A holder and a waiter for slot 1 only, as a person would see them.
	Dev holder, other, waiter;
	ASSERT_EQ(holder.acquire(0, 0, 1u << 1).err, 0);
	ASSERT_EQ(other.reserve(4).err, 0);
	std::thread t([&] { EXPECT_EQ(waiter.acquire(0, 0, 1u << 1).err, 0); });
	ASSERT_TRUE(wait_waiters(1));
	auto text = run(gpuslotctl("status"));
	ASSERT_EQ(holder.release(), 0);
	t.join();
	ASSERT_EQ(waiter.release(), 0);
	std::cout << "gpuslotctl status:\n" << text.text;
	ASSERT_EQ(text.status, 0) << text.text;
	EXPECT_NE(text.text.find("k 3, generation"), std::string::npos) << text.text;
	EXPECT_NE(text.text.find("HQDs 4/24 reserved"), std::string::npos) << text.text;
	EXPECT_NE(text.text.find("B slot 1  20 CUs"), std::string::npos) << text.text;
	EXPECT_NE(text.text.find("waiters: 1\n"), std::string::npos) << text.text;
	// 20 CUs on each of 4 SEs: 5 per SE per slot.
	for (const char *se : {"SE0  |", "SE1  |", "SE2  |", "SE3  |"}) {
		auto at = text.text.find(se);
		ASSERT_NE(at, std::string::npos) << text.text;
		std::string row = text.text.substr(at + 6, 15);
		for (char c : {'A', 'B', 'C'})
			EXPECT_EQ(std::count(row.begin(), row.end(), c), 5) << row;
	}

	auto json = run(gpuslotctl("status --json"));
	ASSERT_EQ(json.status, 0) << json.text;
	auto j = nlohmann::json::parse(json.text);
	ASSERT_EQ(j["gpus"].size(), 1u);
	EXPECT_EQ(j["gpus"][0]["k"], 3);
	ASSERT_EQ(j["gpus"][0]["slots"].size(), 3u);
	for (auto &slot : j["gpus"][0]["slots"])
		EXPECT_EQ(slot["units"], 20);
	EXPECT_NE(log().find("k 3 written outside gpuslotd"), std::string::npos) << log();
}

TEST_F(Daemon, KeepsPartitionsAnAdminSetAndLintsThem)
{
	write_config("[default]\nk = 2\n");
	start();
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	const uint64_t gen = std::stoull(domain_file("generation"));

	// Bits 0-4: two CUs on SE 0, one on SE 1..3: lint refuses.
	auto refused = run(gpuslotctl("set-partitions 0x1f 0xf000"));
	EXPECT_EQ(refused.status, 1) << refused.text;
	EXPECT_NE(refused.text.find("single CU"), std::string::npos) << refused.text;
	EXPECT_EQ(std::stoull(domain_file("generation")), gen);

	auto forced = run(gpuslotctl("set-partitions 0x1f 0xf000 --force"));
	ASSERT_EQ(forced.status, 0) << forced.text;
	// One change: the staged slot files, then commit (one generation).
	EXPECT_EQ(slot_masks(), (std::vector<long long>{0x1f, 0xf000}));
	EXPECT_EQ(std::stoull(domain_file("generation")), gen + 1);
	ASSERT_TRUE(wait_until([] {
		return log().find("partitions set outside gpuslotd") != std::string::npos;
	})) << log();
	// gpuslotd names the problem and leaves the admin's partitions alone.
	EXPECT_NE(log().find("single CU"), std::string::npos) << log();
	usleep(1500 * 1000);
	EXPECT_EQ(slot_masks(), (std::vector<long long>{0x1f, 0xf000}));

	auto lint = run(gpuslotctl("lint"));
	EXPECT_EQ(lint.status, 1) << lint.text;
	EXPECT_NE(lint.text.find("slot 0"), std::string::npos) << lint.text;
}

TEST_F(Daemon, ReloadAppliesAGoodConfigAndKeepsTheOldOneOnABadOne)
{
	write_config("[default]\nk = 4\n");
	start();
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	const auto before = slot_masks();

	write_config("[default]\nk = 4\nhqd_limit = 5000\n");
	ASSERT_EQ(kill(pid_, SIGHUP), 0);
	ASSERT_NE(wait_notify("RELOADING=1"), "") << log();
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	EXPECT_NE(log().find("gpuslotd.conf:3: hqd_limit '5000'"), std::string::npos) << log();
	EXPECT_NE(log().find("keeping the configuration loaded before"), std::string::npos);
	EXPECT_EQ(slot_masks(), before);

	write_config("[default]\nk = 2\nhqd_limit = 16\n");
	ASSERT_EQ(kill(pid_, SIGHUP), 0);
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	EXPECT_EQ(partition_sizes(), (std::vector<int>{30, 30}));
	EXPECT_EQ(domain_file("hqd_limit"), "16\n");
}

// A reload keeps a k that an admin wrote since the last plan, unless the
// config's own k changed.
TEST_F(Daemon, ReloadKeepsAnAdminsKUnlessTheConfigsKChanged)
{
	write_config("[default]\nk = 4\n");
	start();
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	ASSERT_EQ(write_attr(0, "k", "3"), 0);
	ASSERT_TRUE(wait_until([] {
		return partition_sizes() == std::vector<int>{20, 20, 20};
	})) << log();

	// The same k in the config, another key changed: the admin's 3 stays.
	write_config("[default]\nk = 4\nhqd_limit = 16\n");
	ASSERT_EQ(kill(pid_, SIGHUP), 0);
	ASSERT_NE(wait_notify("RELOADING=1"), "") << log();
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	EXPECT_EQ(domain_file("k"), "3\n");
	EXPECT_EQ(domain_file("hqd_limit"), "16\n");
	EXPECT_NE(log().find("keeping k 3, which an admin set"), std::string::npos) << log();

	// The config's k changes: it is the newer word.
	write_config("[default]\nk = 2\nhqd_limit = 16\n");
	ASSERT_EQ(kill(pid_, SIGHUP), 0);
	ASSERT_NE(wait_notify("RELOADING=1"), "") << log();
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	EXPECT_EQ(partition_sizes(), (std::vector<int>{30, 30}));
}

// One gpuslotd per host: a second one exits 1 and names the first.
TEST_F(Daemon, ASecondInstanceIsRefused)
{
	{
		int fd = open(kConfig, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
		bool locks = fd >= 0 && flock(fd, LOCK_SH) == 0;
		close(fd);
		if (!locks)
			GTEST_SKIP() << "this kernel has no file locking (CONFIG_FILE_LOCKING)";
	}
	write_config("[default]\nk = 2\n");
	start();
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	const uint64_t gen = std::stoull(domain_file("generation"));
	auto second = run(std::string("/bin/gpuslotd --config ") + kConfig + " --topology " +
			  kTopology + " --dri '' --state-dir " + kStateDir +
			  " --kfd-proc " + kKfdProc);
	EXPECT_EQ(second.status, 1) << second.text;
	EXPECT_NE(second.text.find("another gpuslotd is running (pid " +
				   std::to_string(pid_) + ","),
		  std::string::npos) << second.text;
	EXPECT_EQ(std::stoull(domain_file("generation")), gen); // it changed nothing
}

TEST_F(Daemon, AuditFindsAProcessOverItsQueueReservation)
{
	write_config("[daemon]\naudit_interval_ms = 100\n[default]\nk = 2\n");
	// This process holds 3 compute queues and an SDMA queue on gpu_id 0
	// (the fixture has no gpu_id file: 0), as KFD would show them.
	const std::string me = std::string(kKfdProc) + "/" + std::to_string(getpid());
	for (int q = 0; q < 4; q++) {
		std::string dir = me + "/queues/" + std::to_string(q);
		ASSERT_EQ(run("mkdir -p " + dir).status, 0);
		std::ofstream(dir + "/type") << (q == 3 ? "1" : "0");
		std::ofstream(dir + "/gpuid") << "0";
	}
	Dev d;
	ASSERT_EQ(d.reserve(2).err, 0);
	start();
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	ASSERT_TRUE(wait_until([] {
		return log().find("compute queues but reserved 2") != std::string::npos;
	})) << log();
	auto status = run(gpuslotctl("status"));
	EXPECT_NE(status.text.find("audit: " + std::to_string(getpid())), std::string::npos)
		<< status.text;
	EXPECT_NE(status.text.find("has 3 compute queues but reserved 2"),
		  std::string::npos) << status.text;

	// Reserving the third queue settles it.
	ASSERT_EQ(d.reserve(1).err, 0);
	ASSERT_TRUE(wait_until([] {
		return log().find("every process is within its reservation") !=
		       std::string::npos;
	})) << log();
	run("rm -rf " + me);
}

TEST_F(Daemon, StopsOnSigtermAndLeavesTheLayout)
{
	write_config("[default]\nk = 3\n");
	start();
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	Dev holder;
	ASSERT_EQ(holder.acquire().err, 0);
	ASSERT_EQ(kill(pid_, SIGTERM), 0);
	EXPECT_NE(wait_notify("STOPPING=1"), "");
	EXPECT_EQ(wait_child(pid_), 0) << log();
	pid_ = -1;
	EXPECT_EQ(partition_sizes(), (std::vector<int>{20, 20, 20}));
	EXPECT_EQ(domain_file("nr_holders"), "1\n");
	EXPECT_EQ(holder.release(), 0);
}

TEST_F(Daemon, ABadConfigStopsItFromStarting)
{
	write_config("[default]\nslots = 4\n");
	start();
	EXPECT_EQ(wait_child(pid_), 1);
	pid_ = -1;
	EXPECT_NE(log().find("gpuslotd.conf:2: unknown key 'slots' in [default]"),
		  std::string::npos) << log();
	EXPECT_EQ(domain_file("unit_kind"), "none\n");
}

// Issue 32: the config's priorities and a slot on the whole GPU reach the
// module, gpuslotctl shows them, and an admin's priorities are kept.
TEST_F(Daemon, WritesTheConfigsPrioritiesAndWholeGpuSlots)
{
	write_config("[default]\nsizes = all,25%,25%,25%\npriorities = 2,0,0,0\n");
	start();
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	EXPECT_EQ(read_attr(0, "slot0/units"), "all\n");
	EXPECT_EQ(read_attr(0, "slot0/priority"), "2\n");
	EXPECT_EQ(read_attr(0, "slot1/priority"), "0\n");
	EXPECT_EQ(partition_sizes(), (std::vector<int>{-1, 15, 15, 15}));
	auto text = run(gpuslotctl("status"));
	ASSERT_EQ(text.status, 0) << text.text;
	EXPECT_NE(text.text.find("A slot 0  whole GPU                   priority 2  free"),
		  std::string::npos) << text.text;
	EXPECT_NE(text.text.find("B slot 1  15 CUs 0x111111111111111    priority 0  free"),
		  std::string::npos) << text.text;
	EXPECT_NE(log().find("slot 0 whole GPU priority 2"), std::string::npos) << log();
	auto json = run(gpuslotctl("status --json"));
	ASSERT_EQ(json.status, 0) << json.text;
	EXPECT_EQ(nlohmann::json::parse(json.text)["gpus"][0]["slots"][0]["priority"], 2);

	// An admin's priorities go in with the partitions, as one commit;
	// gpuslotd keeps them.
	const uint64_t gen = std::stoull(domain_file("generation"));
	auto set = run(gpuslotctl("set-partitions all 0x111111111111111 0x222222222222222 "
				  "0x444444444444444 --priorities 0,1,1,1"));
	ASSERT_EQ(set.status, 0) << set.text;
	EXPECT_EQ(std::stoull(domain_file("generation")), gen + 1);
	EXPECT_EQ(read_attr(0, "slot1/priority"), "1\n");
	ASSERT_TRUE(wait_until([] {
		return log().find("partitions set outside gpuslotd") != std::string::npos;
	})) << log();
	usleep(1500 * 1000);
	EXPECT_EQ(read_attr(0, "slot3/priority"), "1\n");
}

// layout = protect on AMD: slot 0 on the whole GPU, the others one SE each,
// all at priority 0 (HIP has none for CU-masked streams, and a raised
// slot 0 would cost every client an HQD), said in the log.
TEST_F(Daemon, AppliesTheProtectLayout)
{
	write_config("[default]\nlayout = protect\nk = 4\n");
	start();
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	EXPECT_EQ(slot_masks(), (std::vector<long long>{-1, 0x111111111111111, 0x222222222222222,
							0x444444444444444}));
	EXPECT_EQ(read_attr(0, "slot0/priority"), "0\n");
	EXPECT_EQ(read_attr(0, "slot1/priority"), "0\n");
	EXPECT_NE(log().find("slot 0 runs on the whole GPU (60 CUs), slots 1-3 confined to 45 CUs, "
			     "all at priority 0"),
		  std::string::npos) << log();
}

// A member reads the one-value files but not debugfs: gpuslotctl status
// shows the counts and says why it names no holder.
TEST_F(Daemon, AMemberSeesCountsAndWhyNotWho)
{
	write_config("[default]\nk = 2\n");
	start();
	ASSERT_NE(wait_notify("READY=1"), "") << log();
	Dev holder;
	ASSERT_EQ(holder.acquire(0, 0, 1u << 1).err, 0);
	const std::string out = "/tmp/member-status.txt";
	pid_t child = fork_one_thread();
	if (child == 0) {
		int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
		if (fd < 0 || fchown(fd, 65534, 65534) || setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(126);
		dup2(fd, 1);
		dup2(fd, 2);
		execl("/bin/gpuslotctl", "gpuslotctl", "status", "--topology", kTopology, "--dri",
		      "", "--state-dir", kStateDir, nullptr);
		_exit(127);
	}
	EXPECT_EQ(wait_child(child), 0) << read_file(out);
	const std::string text = read_file(out);
	EXPECT_NE(text.find("B slot 1  30 CUs"), std::string::npos) << text;
	EXPECT_NE(text.find("priority 0  held\n"), std::string::npos) << text;
	EXPECT_EQ(text.find("held by"), std::string::npos) << text;
	EXPECT_NE(text.find("not shown: the holder, waiter and queue tables are root's only"),
		  std::string::npos) << text;
	// Root sees who.
	auto root = run(gpuslotctl("status"));
	EXPECT_NE(root.text.find("held by " + std::to_string(getpid())), std::string::npos)
		<< root.text;
	EXPECT_NE(root.text.find("and debugfs /sys/kernel/debug/gpuslot)"), std::string::npos)
		<< root.text;
	ASSERT_EQ(holder.release(), 0);
}

} // namespace
} // namespace gpuslot::test
