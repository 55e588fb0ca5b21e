// SPDX-License-Identifier: GPL-2.0
// The VM suite's entry point: GoogleTest, a per-test watchdog, and the
// closing summary line that tests/vm/run-vm.sh and `make test` read.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace {

int passed, failed;
char current_test[256];

void print_summary(int extra_failed)
{
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
		if (t.result()->Passed())
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

} // namespace

int main(int argc, char **argv)
{
	testing::InitGoogleTest(&argc, argv);
	const char *env = std::getenv("GPUSLOT_TEST_TIMEOUT");
	signal(SIGALRM, on_watchdog);
	testing::UnitTest::GetInstance()->listeners().Append(
		new Watchdog(env ? std::atoi(env) : 120));
	return RUN_ALL_TESTS();
}
