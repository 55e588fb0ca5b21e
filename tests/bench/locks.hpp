// SPDX-License-Identifier: GPL-2.0
// The k-slot locks a real-time user could use instead of gpuslot, behind
// one small interface so the benchmarks measure each the same way.
//
// Each kind has a shared part (set up once per benchmark with k slots) and
// a per-thread Client. acquire() returns the slot (or 0 when the lock has
// no slot identity) and release() gives it back.
#pragma once

#include <linux/gpuslot.h>
#include <pthread.h>
#include <semaphore.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lock_file.hpp"

namespace gpuslot::bench {

// gpuslot itself: the attached domain 0 with k slots.
struct GpuslotLock {
	static constexpr const char *name = "gpuslot";
	static void setup(unsigned int k, bool boost);

	class Client {
	public:
		Client();
		~Client();
		int acquire(uint64_t mask = 0);
		void release();
		int fd() const { return fd_; }

	private:
		int fd_;
	};
};

// gpuslot's socket transport: gpuslotd's LockServer, run by the benchmark
// in a thread of its own (as gpuslotd runs it), reached through
// libgpuslot's LockFile, one connection per client. Boosted as gpuslotd
// boosts (CAP_SYS_NICE: root in the VM).
struct SocketLock {
	static constexpr const char *name = "socket";
	static void setup(unsigned int k, bool boost);

	class Client {
	public:
		Client();
		int acquire(uint64_t mask = 0);
		void release();
		gpuslot::LockFile &file() { return *file_; }

	private:
		std::unique_ptr<gpuslot::LockFile> file_;
	};
};

// A process-shared POSIX semaphore initialised to k: no slot identity, no
// FIFO, no cleanup when a holder dies, no boost.
struct PosixSemLock {
	static constexpr const char *name = "sem_t";
	static void setup(unsigned int k, bool boost);

	class Client {
	public:
		int acquire(uint64_t mask = 0);
		void release();
	};
};

// A System V semaphore set: semaphore 0 counts k slots; SEM_UNDO gives
// the slot back when a holder dies. Semaphore 1 exists for waiters that
// queue on something other than what the benchmark cycles.
struct SysvSemLock {
	static constexpr const char *name = "sysv-sem";
	static void setup(unsigned int k, bool boost);
	static int semid();

	class Client {
	public:
		int acquire(uint64_t mask = 0);
		void release();
	};
};

// k lock files locked with flock(): slot identity by trying each file,
// then a blocking wait on one of them (head-of-line blocking).
struct FlockLock {
	static constexpr const char *name = "flock";
	static void setup(unsigned int k, bool boost);

	class Client {
	public:
		Client();
		~Client();
		int acquire(uint64_t mask = 0);
		void release();

	private:
		std::vector<int> fds_;
		int held_ = -1;
	};
};

// k robust priority-inheritance pthread mutexes, process-shared, taken by
// a trylock scan and then a blocking lock on one of them.
struct PiMutexLock {
	static constexpr const char *name = "pi-mutex";
	static void setup(unsigned int k, bool boost);

	class Client {
	public:
		int acquire(uint64_t mask = 0);
		void release();

	private:
		int held_ = -1;
		unsigned int next_ = 0;
	};
};

} // namespace gpuslot::bench
