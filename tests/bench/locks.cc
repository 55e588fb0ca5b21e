// SPDX-License-Identifier: GPL-2.0
#include "locks.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sem.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "lock_server.hpp"

namespace gpuslot::bench {
namespace {

[[noreturn]] void die(const std::string &what)
{
	throw std::runtime_error(what + ": " + std::strerror(errno));
}

void write_sysfs(const char *attr, unsigned int value)
{
	std::string path = std::string("/sys/class/gpuslot/gpu0/") + attr;
	int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
	std::string text = std::to_string(value);
	if (fd < 0 || write(fd, text.data(), text.size()) < 0)
		die("write " + path);
	close(fd);
}

// State shared by the threads (and, for the process-shared kinds, usable
// across processes) of the lock kinds that need memory.
struct Shared {
	sem_t sem;
	pthread_mutex_t mutex[GPUSLOT_MAX_SLOTS];
	unsigned int k;
	int semid = -1;
};

Shared *shared()
{
	static Shared *s = [] {
		void *p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			die("mmap");
		return new (p) Shared();
	}();
	return s;
}

std::string flock_path(unsigned int slot)
{
	return "/tmp/gpuslot-bench-flock." + std::to_string(slot);
}

} // namespace

void GpuslotLock::setup(unsigned int k, bool boost)
{
	write_sysfs("k", k);
	write_sysfs("boost_priority", boost ? 50 : 0);
	// No bound on a hold's boost: the waiter benchmark holds slot 1 for
	// seconds, and an overrun mid-run would change what is measured.
	write_sysfs("max_hold_ms", 0);
}

GpuslotLock::Client::Client() : fd_(open("/dev/gpuslot", O_RDWR | O_CLOEXEC))
{
	if (fd_ < 0)
		die("open /dev/gpuslot");
}

GpuslotLock::Client::~Client()
{
	close(fd_);
}

int GpuslotLock::Client::acquire(uint64_t mask)
{
	gpuslot_acquire a{};
	a.size = sizeof(a);
	a.allowed_mask = mask;
	if (ioctl(fd_, GPUSLOT_IOC_ACQUIRE, &a))
		die("GPUSLOT_IOC_ACQUIRE");
	return int(a.slot);
}

void GpuslotLock::Client::release()
{
	gpuslot_release r{};
	r.size = sizeof(r);
	if (ioctl(fd_, GPUSLOT_IOC_RELEASE, &r))
		die("GPUSLOT_IOC_RELEASE");
}

void PosixSemLock::setup(unsigned int k, bool)
{
	Shared *s = shared();
	sem_destroy(&s->sem);
	if (sem_init(&s->sem, 1, k))
		die("sem_init");
}

int PosixSemLock::Client::acquire(uint64_t)
{
	while (sem_wait(&shared()->sem))
		if (errno != EINTR)
			die("sem_wait");
	return 0;
}

void PosixSemLock::Client::release()
{
	sem_post(&shared()->sem);
}

void SysvSemLock::setup(unsigned int k, bool)
{
	Shared *s = shared();
	if (s->semid < 0) {
		s->semid = semget(IPC_PRIVATE, 2, IPC_CREAT | 0600);
		if (s->semid < 0)
			die("semget");
	}
	if (semctl(s->semid, 0, SETVAL, int(k)) || semctl(s->semid, 1, SETVAL, 0))
		die("semctl SETVAL");
}

int SysvSemLock::semid()
{
	return shared()->semid;
}

int SysvSemLock::Client::acquire(uint64_t)
{
	sembuf op{0, -1, SEM_UNDO};
	while (semop(shared()->semid, &op, 1))
		if (errno != EINTR)
			die("semop");
	return 0;
}

void SysvSemLock::Client::release()
{
	sembuf op{0, 1, SEM_UNDO};
	if (semop(shared()->semid, &op, 1))
		die("semop");
}

void FlockLock::setup(unsigned int k, bool)
{
	shared()->k = k;
	for (unsigned int i = 0; i < k; i++) {
		int fd = open(flock_path(i).c_str(), O_CREAT | O_RDWR | O_CLOEXEC,
			      0600);
		if (fd < 0)
			die("open " + flock_path(i));
		close(fd);
	}
}

FlockLock::Client::Client()
{
	// One open file description per slot and client: flock() locks
	// belong to the description.
	for (unsigned int i = 0; i < shared()->k; i++) {
		int fd = open(flock_path(i).c_str(), O_RDWR | O_CLOEXEC);
		if (fd < 0)
			die("open " + flock_path(i));
		fds_.push_back(fd);
	}
}

FlockLock::Client::~Client()
{
	for (int fd : fds_)
		close(fd);
}

int FlockLock::Client::acquire(uint64_t)
{
	for (size_t i = 0; i < fds_.size(); i++)
		if (flock(fds_[i], LOCK_EX | LOCK_NB) == 0)
			return held_ = int(i);
	if (flock(fds_[0], LOCK_EX))
		die("flock");
	return held_ = 0;
}

void FlockLock::Client::release()
{
	flock(fds_[held_], LOCK_UN);
	held_ = -1;
}

void PiMutexLock::setup(unsigned int k, bool)
{
	Shared *s = shared();
	for (unsigned int i = 0; i < GPUSLOT_MAX_SLOTS; i++)
		pthread_mutex_destroy(&s->mutex[i]);
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
	pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	for (unsigned int i = 0; i < k; i++)
		if (pthread_mutex_init(&s->mutex[i], &attr))
			die("pthread_mutex_init");
	pthread_mutexattr_destroy(&attr);
	s->k = k;
}

int PiMutexLock::Client::acquire(uint64_t)
{
	Shared *s = shared();
	for (unsigned int i = 0; i < s->k; i++) {
		int rc = pthread_mutex_trylock(&s->mutex[i]);
		if (rc == EOWNERDEAD)
			pthread_mutex_consistent(&s->mutex[i]);
		if (rc == 0 || rc == EOWNERDEAD)
			return held_ = int(i);
	}
	// Everything busy: wait on one mutex, spreading the clients.
	unsigned int i = next_++ % s->k;
	int rc = pthread_mutex_lock(&s->mutex[i]);
	if (rc == EOWNERDEAD)
		pthread_mutex_consistent(&s->mutex[i]);
	else if (rc)
		die("pthread_mutex_lock");
	return held_ = int(i);
}

void PiMutexLock::Client::release()
{
	pthread_mutex_unlock(&shared()->mutex[held_]);
	held_ = -1;
}

namespace {

const char kSocketDir[] = "/tmp/gpuslot-bench-sockets";

// The server runs for the rest of the program, like a daemon.
void start_socket_server()
{
	static bool started = [] {
		static gpuslot::LockServer server({kSocketDir, 1});
		std::string error;
		if (server.start(&error))
			throw std::runtime_error("lock server: " + error);
		std::thread([] {
			std::string e;
			server.run(&e);
		}).detach();
		return true;
	}();
	(void)started;
}

} // namespace

void SocketLock::setup(unsigned int k, bool)
{
	start_socket_server();
	Client admin;
	gpuslot_set_k s{};
	s.size = sizeof(s);
	s.k = k;
	if (int err = admin.file().call(GPUSLOT_IOC_SET_K, &s)) {
		errno = err;
		die("socket SET_K");
	}
}

SocketLock::Client::Client()
{
	std::string error;
	if (gpuslot::open_lock_file(gpuslot::Transport::socket, kSocketDir, 0, &file_, &error))
		throw std::runtime_error(error);
}

int SocketLock::Client::acquire(uint64_t mask)
{
	gpuslot_acquire a{};
	a.size = sizeof(a);
	a.allowed_mask = mask;
	if (int err = file_->call(GPUSLOT_IOC_ACQUIRE, &a)) {
		errno = err;
		die("socket ACQUIRE");
	}
	return int(a.slot);
}

void SocketLock::Client::release()
{
	gpuslot_release r{};
	r.size = sizeof(r);
	if (int err = file_->call(GPUSLOT_IOC_RELEASE, &r)) {
		errno = err;
		die("socket RELEASE");
	}
}

} // namespace gpuslot::bench
