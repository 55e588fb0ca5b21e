// SPDX-License-Identifier: GPL-2.0
// What every fuzz target here shares: CHECK(), which names the broken
// invariant and aborts (libFuzzer keeps the input), and the closing count
// of operations checked that run-fuzz.sh reads. Define FUZZ_TARGET (the
// target's name) before including.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace fuzz_check {

inline unsigned long long total_ops;

inline void report_total()
{
	std::fprintf(stderr, FUZZ_TARGET ": %llu operations checked\n", total_ops);
}

[[noreturn]] inline void finding(const char *what)
{
	std::fprintf(stderr, FUZZ_TARGET ": invariant broken: %s\n", what);
	std::abort();
}

} // namespace fuzz_check

#define CHECK(cond)							\
	do {								\
		if (!(cond))						\
			fuzz_check::finding(#cond);			\
	} while (0)
