// SPDX-License-Identifier: GPL-2.0
// The VM suite's entry point: GoogleTest, a per-test watchdog, and the
// closing summary line that tests/vm/run-vm.sh and `make test` read. With
// GPUSLOT_TEST_TRANSPORT=socket it runs on the host against gpuslotd's lock
// server instead of the module.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "device.h"
#include "lock_server.hpp"

namespace {

int passed, failed, skipped;
char current_test[256];

void print_summary(int extra_failed)
{
	if (skipped)
		std::printf("%d skipped (each says why above)\n", skipped);
	std::printf("%d passed, %d failed\n", passed, failed + extra_failed);
	std::fflush(stdout);
}

// A lock bug shows up as a hang: fail the test by name instead.
void on_watchdog(int)
{
	std::printf("\nwatchdog: %s did not finish in time\n", current_test);
	print_summary(1);
	_exit(1);
}

class Watchdog : public testing::EmptyTestEventListener {
public:
	explicit Watchdog(unsigned int seconds) : seconds_(seconds) {}

private:
	void OnTestStart(const testing::TestInfo &t) override
	{
		std::snprintf(current_test, sizeof(current_test), "%s.%s",
			      t.test_suite_name(), t.name());
		alarm(seconds_);
	}

	void OnTestEnd(const testing::TestInfo &t) override
	{
		alarm(0);
		if (t.result()->Skipped())
			skipped++;
		else if (t.result()->Passed())
			passed++;
		else
			failed++;
	}

	void OnTestProgramEnd(const testing::UnitTest &) override
	{
		print_summary(0);
	}

	unsigned int seconds_;
};

// The socket transport: gpuslotd's lock server (the code gpuslotd runs)
// in a child process, one domain, in a fresh directory that the suite's
// unprivileged children may reach too (they test refusals).
gpuslot::LockServer *server;
pid_t server_pid = -1;
std::string socket_dir;

void on_server_term(int)
{
	server->stop();
}

bool start_socket_server()
{
	char dir[] = "/tmp/gpuslot-suite.XXXXXX";
	int ready[2];
	if (!mkdtemp(dir) || chmod(dir, 0755) || pipe(ready))
		return false;
	socket_dir = dir;
	server_pid = gpuslot::test::fork_one_thread();
	if (server_pid == 0) {
		close(ready[0]);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		gpuslot::LockServerOptions o;
		o.socket_dir = socket_dir;
		o.nr_domains = 1;
		o.mode = 0666;
		server = new gpuslot::LockServer(o);
		std::string error;
		signal(SIGTERM, on_server_term);
		if (server->start(&error)) {
			std::fprintf(stderr, "lock server: %s\n", error.c_str());
			_exit(1);
		}
		char boost = server->boosting() ? '1' : '0';
		if (write(ready[1], &boost, 1) != 1)
			_exit(1);
		close(ready[1]);
		_exit(server->run(&error) ? 1 : 0);
	}
	close(ready[1]);
	char boost = 0;
	const bool up = read(ready[0], &boost, 1) == 1;
	close(ready[0]);
	if (!up)
		return false;
	setenv("GPUSLOT_SOCKET_DIR", socket_dir.c_str(), 1);
	setenv("GPUSLOT_TRANSPORT", "socket", 1); // libgpuslot's choice
	setenv("GPUSLOT_TEST_SOCKET_BOOST", boost == '1' ? "1" : "0", 1);
	// The boost tests check the server's own priority and CPU.
	setenv("GPUSLOT_TEST_SOCKET_SERVER_PID", std::to_string(server_pid).c_str(), 1);
	std::printf("socket transport: gpuslotd's lock server in %s, boost %s\n", dir,
		    boost == '1' ? "on" : "off (no CAP_SYS_NICE)");
	return true;
}

void stop_socket_server()
{
	if (server_pid <= 0)
		return;
	kill(server_pid, SIGTERM);
	waitpid(server_pid, nullptr, 0);
	std::error_code ec;
	std::filesystem::remove_all(socket_dir, ec);
}

} // namespace

int main(int argc, char **argv)
{
	testing::InitGoogleTest(&argc, argv);
	if (gpuslot::test::on_socket() && !start_socket_server()) {
		std::printf("cannot start the lock server for the socket transport\n");
		print_summary(1);
		return 1;
	}
	const char *env = std::getenv("GPUSLOT_TEST_TIMEOUT");
	signal(SIGALRM, on_watchdog);
	testing::UnitTest::GetInstance()->listeners().Append(
		new Watchdog(env ? std::atoi(env) : 120));
	const int rc = RUN_ALL_TESTS();
	stop_socket_server();
	return rc;
}
