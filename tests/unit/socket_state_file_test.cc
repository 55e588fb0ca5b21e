// SPDX-License-Identifier: GPL-2.0
// gpuslotd's state files of older versions (state_file.cc, read_old_state<>):
// version 1 (gpuslotd before the holder's owner was recorded) and version 2
// (before client tokens), their bytes built here from the layouts the older
// gpuslotds wrote (docs/transports.md, "When gpuslotd dies"), not by the
// current writer: what a new gpuslotd restores from each (the boost given
// back, the hold kept for its holder, the generations), what it refuses
// (privilege for an unknown owner, a reclaim by another client), and that a
// corrupt one of each is moved aside with nothing restored. No fork: the
// holder is a thread of this process.
#include <gtest/gtest.h>

#include <linux/gpuslot.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lock_file.hpp"
#include "lock_server.hpp"
#include "emulation.hpp"

namespace {

namespace fs = std::filesystem;
using gpuslot::LockFile;

// The older layouts, as those gpuslotds wrote them (in the host's byte
// order): a header of 16 bytes (magic u64, nr_domains u32,
// record size u32), then per domain the generation (u64) and 64 records.
// A record: state u32 (0 free, 1 held, 2 boosted), pid i32, tid i32, prio
// u32 (the boost applied), start_time u64 (the holder process's, clock
// ticks after boot), the thread's attributes before the boost (policy u32,
// rt_priority u32, nice i32, reset_on_fork u32): 40 bytes in version 1;
// version 2 adds the owner's fingerprint (u64): 48 bytes.
constexpr uint64_t kMagicV1 = 0x31657461736c7367ULL;
constexpr uint64_t kMagicV2 = 0x32657461736c7367ULL;
constexpr uint64_t kMagicV3 = 0x33657461736c7367ULL; // this gpuslotd's

struct Record {
	uint32_t state = 0;
	int32_t pid = 0, tid = 0;
	uint32_t prio = 0;
	uint64_t start_time = 0;
	uint32_t policy = 0, rt_priority = 0;
	int32_t nice = 0;
	uint32_t reset_on_fork = 0;
	uint64_t owner = 0; // version 2 only
};

template <class T> void put(std::vector<char> &b, size_t at, T v)
{
	std::memcpy(b.data() + at, &v, sizeof(v));
}

// A state file of @version for 2 domains with generations @gen, whose
// domain 0 slot 0 is @r.
std::vector<char> old_state(int version, const uint64_t gen[2], const Record &r)
{
	const size_t rec = version == 1 ? 40 : 48, domain = 8 + 64 * rec;
	std::vector<char> b(16 + 2 * domain);
	put(b, 0, version == 1 ? kMagicV1 : kMagicV2);
	put(b, 8, uint32_t(2));
	put(b, 12, uint32_t(rec));
	for (int d = 0; d < 2; d++)
		put(b, 16 + d * domain, gen[d]);
	const size_t at = 16 + 8;
	put(b, at + 0, r.state);
	put(b, at + 4, r.pid);
	put(b, at + 8, r.tid);
	put(b, at + 12, r.prio);
	put(b, at + 16, r.start_time);
	put(b, at + 24, r.policy);
	put(b, at + 28, r.rt_priority);
	put(b, at + 32, r.nice);
	put(b, at + 36, r.reset_on_fork);
	if (version == 2)
		put(b, at + 40, r.owner);
	return b;
}

// The start time of this process (/proc/self/stat field 22).
uint64_t own_start_time()
{
	std::ifstream in("/proc/self/stat");
	std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
	std::istringstream fields(stat.substr(stat.rfind(')') + 2));
	std::string field;
	for (int i = 3; i <= 22 && fields >> field; i++)
		if (i == 22)
			return std::stoull(field);
	return 0;
}

// The owner fingerprint a version-2 file records for thread @tid of this
// process, as documented (docs/transports.md): FNV-1a (64 bits) of its
// Uid, Gid, Groups, CapPrm and CapEff lines of /proc (in the file's order,
// each with its newline) and its program's device and inode ("dev:ino").
uint64_t owner_of_thread(pid_t tid)
{
	std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/status");
	std::string who;
	for (std::string line; std::getline(in, line);)
		for (const char *key : {"Uid:", "Gid:", "Groups:", "CapEff:", "CapPrm:"})
			if (line.rfind(key, 0) == 0)
				who += line + "\n";
	struct stat exe;
	if (stat("/proc/self/exe", &exe))
		return 0;
	who += std::to_string(exe.st_dev) + ":" + std::to_string(exe.st_ino);
	uint64_t h = 0xcbf29ce484222325ULL;
	for (unsigned char ch : who) {
		h ^= ch;
		h *= 0x100000001b3ULL;
	}
	return h ? h : 1;
}

// A thread of this process that runs SCHED_FIFO @prio and waits: the
// holder a dead gpuslotd boosted.
class Holder {
public:
	explicit Holder(int prio)
	{
		thread_ = std::thread([this, prio] {
			sched_param p{prio};
			const bool ok = sched_setscheduler(0, SCHED_FIFO, &p) == 0;
			std::unique_lock<std::mutex> g(m_);
			tid_ = ok ? pid_t(syscall(SYS_gettid)) : -1;
			cv_.notify_all();
			cv_.wait(g, [this] { return done_; });
		});
		std::unique_lock<std::mutex> g(m_);
		cv_.wait(g, [this] { return tid_ != 0; });
	}
	~Holder()
	{
		{
			std::lock_guard<std::mutex> g(m_);
			done_ = true;
		}
		cv_.notify_all();
		thread_.join();
	}
	pid_t tid() const { return tid_; }
	// Its policy and real-time priority now.
	std::pair<int, int> policy() const
	{
		sched_param p{};
		const int policy = sched_getscheduler(tid_);
		sched_getparam(tid_, &p);
		return {policy, p.sched_priority};
	}

private:
	std::mutex m_;
	std::condition_variable cv_;
	bool done_ = false;
	pid_t tid_ = 0;
	std::thread thread_;
};

class OldStateFile : public testing::Test {
protected:
	void SetUp() override
	{
		if (geteuid() != 0)
			GTEST_SKIP() << "a boosted holder (SCHED_FIFO) and its restore need root";
		char tmpl[] = "/tmp/gpuslot-oldstate-XXXXXX";
		ASSERT_NE(mkdtemp(tmpl), nullptr);
		dir_ = tmpl;
	}
	void TearDown() override
	{
		stop();
		if (!dir_.empty())
			fs::remove_all(dir_);
	}
	fs::path state() const { return dir_ / "gpuslotd.state"; }
	void plant(const std::vector<char> &bytes)
	{
		std::ofstream out(state(), std::ios::binary | std::ios::trunc);
		out.write(bytes.data(), std::streamsize(bytes.size()));
		out.close();
		ASSERT_EQ(chmod(state().c_str(), 0600), 0);
	}
	void start()
	{
		gpuslot::LockServerOptions o;
		o.socket_dir = dir_;
		o.nr_domains = 2;
		server_ = std::make_unique<gpuslot::LockServer>(o);
		std::string error;
		ASSERT_EQ(server_->start(&error), 0) << error;
		thread_ = std::thread([this] {
			std::string e;
			server_->run(&e);
		});
	}
	void stop()
	{
		if (!server_)
			return;
		server_->stop();
		if (thread_.joinable())
			thread_.join();
		server_.reset();
	}
	std::string log() const
	{
		std::string all;
		for (const auto &l : server_->recovered())
			all += l + "\n";
		return all;
	}
	std::unique_ptr<LockFile> file(unsigned int domain = 0, uint64_t token = 0)
	{
		std::unique_ptr<LockFile> f;
		std::string error;
		EXPECT_EQ(gpuslot::open_lock_file(gpuslot::Transport::socket, dir_, domain, &f,
						  &error),
			  0)
			<< error;
		if (f && token) {
			EXPECT_EQ(f->set_client_token(token), 0);
		}
		return f;
	}
	static gpuslot_domain_info info(LockFile &f)
	{
		gpuslot_domain_info i{};
		i.size = sizeof(i);
		EXPECT_EQ(f.call(GPUSLOT_IOC_DOMAIN_INFO, &i), 0);
		return i;
	}
	static int try_acquire(LockFile &f)
	{
		gpuslot_acquire a{};
		a.size = sizeof(a);
		a.flags = GPUSLOT_ACQUIRE_TRY;
		return f.call(GPUSLOT_IOC_ACQUIRE, &a);
	}
	static int release(LockFile &f)
	{
		gpuslot_release r{};
		r.size = sizeof(r);
		return f.call(GPUSLOT_IOC_RELEASE, &r);
	}
	uint64_t magic_now() const
	{
		uint64_t m = 0;
		std::ifstream in(state(), std::ios::binary);
		in.read(reinterpret_cast<char *>(&m), sizeof(m));
		return m;
	}

	fs::path dir_;
	std::unique_ptr<gpuslot::LockServer> server_;
	std::thread thread_;
};

// Generations far above CLOCK_BOOTTIME in microseconds, so that the new
// ones can only have come from the file.
const uint64_t kGenerations[2] = {1000000000000000ULL, 2000000000000000ULL};

// Version 1: the boost is given back, but as to an unknown owner (no
// privileged policy: the saved SCHED_FIFO 7 comes back as SCHED_OTHER); the
// hold is kept for its holder (this process, no token) and reclaimed by
// it; the generations go on from the recorded ones; the file is rewritten
// in this version's layout.
TEST_F(OldStateFile, Version1GivesTheBoostBackUnprivilegedAndKeepsTheHold)
{
	GPUSLOT_SKIP_IF_START_TIME_PER_THREAD();
	Holder holder(30);
	ASSERT_GT(holder.tid(), 0) << "SCHED_FIFO refused";
	Record r;
	r.state = 2; // boosted
	r.pid = getpid();
	r.tid = holder.tid();
	r.prio = 30;
	r.start_time = own_start_time();
	r.policy = SCHED_FIFO;
	r.rt_priority = 7;
	plant(old_state(1, kGenerations, r));
	start();
	const std::string notes = log();
	EXPECT_NE(notes.find("SCHED_FIFO 30 given back"), std::string::npos) << notes;
	EXPECT_NE(notes.find("no privilege back"), std::string::npos) << notes;
	EXPECT_EQ(holder.policy().first, SCHED_OTHER) << "an unknown owner got SCHED_FIFO back";
	EXPECT_EQ(magic_now(), kMagicV3);
	auto f = file(), other = file(1);
	EXPECT_EQ(info(*f).generation, kGenerations[0] + 1);
	EXPECT_EQ(info(*other).generation, kGenerations[1] + 1);
	EXPECT_EQ(info(*f).held_mask, 1u) << "the hold is kept for its holder";
	// Its holder's process asks again (no token, as a version-1 hold has
	// none): the kept slot is its own.
	ASSERT_EQ(try_acquire(*f), 0);
	EXPECT_EQ(release(*f), 0);
	EXPECT_EQ(info(*f).held_mask, 0u);
}

// Version 2: the owner it recorded is read (the same owner gets its
// privileged attributes back: SCHED_FIFO 7), and its holds have no client
// token: a client with a token cannot reclaim one, a client without can.
TEST_F(OldStateFile, Version2ReadsTheOwnerAndKeepsHoldsWithoutATokenForTheirHolder)
{
	GPUSLOT_SKIP_IF_START_TIME_PER_THREAD();
	Holder holder(30);
	ASSERT_GT(holder.tid(), 0) << "SCHED_FIFO refused";
	Record r;
	r.state = 2;
	r.pid = getpid();
	r.tid = holder.tid();
	r.prio = 30;
	r.start_time = own_start_time();
	r.policy = SCHED_FIFO;
	r.rt_priority = 7;
	r.owner = owner_of_thread(holder.tid());
	ASSERT_NE(r.owner, 0u);
	plant(old_state(2, kGenerations, r));
	start();
	const std::string notes = log();
	EXPECT_NE(notes.find("SCHED_FIFO 30 given back"), std::string::npos) << notes;
	EXPECT_EQ(notes.find("no privilege back"), std::string::npos) << notes;
	EXPECT_EQ(holder.policy(), std::make_pair(int(SCHED_FIFO), 7));
	EXPECT_EQ(magic_now(), kMagicV3);
	auto tokened = file(0, 0x5eed), plain = file();
	EXPECT_EQ(info(*plain).generation, kGenerations[0] + 1);
	EXPECT_EQ(info(*plain).held_mask, 1u);
	EXPECT_EQ(try_acquire(*tokened), EAGAIN) << "a client with a token took a hold kept for none";
	ASSERT_EQ(try_acquire(*plain), 0);
	EXPECT_EQ(release(*plain), 0);
}

// A corrupt file of each version (its table cut short; more domains than
// any gpuslotd serves; a record size not its version's) is named in the
// log, moved aside, and nothing in it restored: the boosted holder keeps
// its SCHED_FIFO 30, no hold is kept, and --restore-boosts acts on none.
TEST_F(OldStateFile, ACorruptOneOfEachVersionIsMovedAsideAndNothingRestored)
{
	Holder holder(30);
	ASSERT_GT(holder.tid(), 0) << "SCHED_FIFO refused";
	Record r;
	r.state = 2;
	r.pid = getpid();
	r.tid = holder.tid();
	r.prio = 30;
	r.start_time = own_start_time();
	r.policy = SCHED_OTHER;
	r.owner = owner_of_thread(holder.tid());
	enum Corrupt { cut_short, too_many_domains, wrong_record_size };
	for (int version : {1, 2}) {
		for (Corrupt how : {cut_short, too_many_domains, wrong_record_size}) {
			SCOPED_TRACE("version " + std::to_string(version) + ", corruption " +
				     std::to_string(int(how)));
			std::vector<char> bytes = old_state(version, kGenerations, r);
			if (how == cut_short)
				bytes.erase(bytes.end() - 100, bytes.end());
			else if (how == too_many_domains)
				put(bytes, 8, uint32_t(5000));
			else
				put(bytes, 12, uint32_t(version == 1 ? 48 : 40));
			for (bool restore : {true, false}) {
				for (const auto &e : fs::directory_iterator(dir_))
					fs::remove(e.path());
				plant(bytes);
				const fs::path aside = state().string() + ".bad.1";
				if (restore) {
					std::vector<std::string> notes;
					EXPECT_EQ(gpuslot::restore_boosts(state(), &notes), -EINVAL);
					EXPECT_TRUE(fs::exists(aside));
				} else {
					start();
					EXPECT_NE(log().find("moved aside to " + aside.string()),
						  std::string::npos)
						<< log();
					auto f = file();
					EXPECT_EQ(info(*f).held_mask, 0u) << "a corrupt file's hold kept";
					EXPECT_LT(info(*f).generation, kGenerations[0]);
					f.reset();
					stop();
				}
				EXPECT_EQ(holder.policy(), std::make_pair(int(SCHED_FIFO), 30))
					<< "a corrupt file's boost given back";
				// Moved aside as it was.
				std::ifstream in(aside, std::ios::binary);
				const std::vector<char> kept((std::istreambuf_iterator<char>(in)),
							     std::istreambuf_iterator<char>());
				EXPECT_EQ(kept, bytes);
			}
		}
	}
}

} // namespace
