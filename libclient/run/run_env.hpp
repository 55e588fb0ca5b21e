// SPDX-License-Identifier: LGPL-2.1-or-later
// What gpuslot-run tells its interposer, through the environment of the
// program it execs (both sides read and write it here).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

struct gpuslot_client;

namespace gpuslot::run {

inline constexpr const char *kEnvDomain = "GPUSLOT_RUN_DOMAIN";
inline constexpr const char *kEnvSlots = "GPUSLOT_RUN_SLOTS"; // a slot list, as --slots takes it
inline constexpr const char *kEnvPolicy = "GPUSLOT_RUN_POLICY"; // hold | per-sync
// Whether the program's commands wait while a slot of higher priority
// preempts (issue 40): "1" (unset: the same) or "0" (--no-preempt).
inline constexpr const char *kEnvPreempt = "GPUSLOT_RUN_PREEMPT";
// The bound on the program's unfinished commands where another slot of the
// domain outranks its slot (--inflight): a number 0 (none) ..
// kMaxInflight; unset: kDefaultInflight. What a preemption finds queued
// ahead of the higher slot's work (docs/preemption.md).
inline constexpr const char *kEnvInflight = "GPUSLOT_RUN_INFLIGHT";
// XSched's threshold (its "4 in flight" on Hopper, issue 40).
inline constexpr unsigned int kDefaultInflight = 4;
inline constexpr unsigned int kMaxInflight = 4096;
// How often a held-back command looks again, in microseconds
// (GPUSLOT_RUN_POLL_US, kMinPollUs .. kMaxPollUs; unset: Throttle's 50).
inline constexpr const char *kEnvPollUs = "GPUSLOT_RUN_POLL_US";
inline constexpr unsigned int kMinPollUs = 10;
inline constexpr unsigned int kMaxPollUs = 100000;

// AMD: the hardware queues the program's HIP makes for itself, counted by
// the launcher (hip_program_queues()) and reserved by the interposer's
// client for the program's life (gpuslot_options.runtime_queues): a number
// 1 .. GPUSLOT_MAX_HQD; unset: none.
inline constexpr const char *kEnvQueues = "GPUSLOT_RUN_HIP_QUEUES";
// The priority levels of the program's streams as the launcher read them
// from the layout (streams_priority_levels()): the interposer makes the
// streams at these, so that the queues counted and the streams made agree
// (one read of the layout); 0 .. GPUSLOT_MAX_SLOT_PRIORITY. Unset (the
// interposer loaded by hand): it reads them itself.
inline constexpr const char *kEnvLevels = "GPUSLOT_RUN_PRIORITY_LEVELS";
// The largest GPU_MAX_HW_QUEUES gpuslot-run counts (a pool per priority;
// a GPU has 32 hardware queues).
inline constexpr unsigned int kMaxHipPool = 256;

// The queues HIP makes for a program under gpuslot-run whose streams run
// @levels above the default, with @pool queues per priority pool
// (hip_pool_queues()): the default priority's pool (the null stream, and
// the program's streams where @levels is 0), the high priority's (the
// program's streams otherwise: gpuslot-run replaces what the program asks
// for, so no other pool is used), and the runtime's own
// (kHipRuntimeQueues).
unsigned int hip_program_queues(unsigned int pool, unsigned int levels);

// The priority levels of the program's streams: the lowest of the slots in
// @mask (gpuslot_slot_priority()), so that no stream stands above the
// slot that runs it. False with @error.
bool streams_priority_levels(gpuslot_client *c, uint64_t mask, unsigned int *levels,
			     std::string *error);

// "1", "0,2", "1-3,5": bit i for slot i (0 .. 63). std::nullopt and
// @error for anything else (empty items, reversed ranges, slots past 63).
std::optional<uint64_t> parse_slot_list(const std::string &text, std::string *error);
// The mask as a slot list that parse_slot_list() reads back.
std::string slot_list(uint64_t mask);
// A decimal number 0 .. @max, all of @text.
std::optional<unsigned long> parse_number(const std::string &text, unsigned long max);

} // namespace gpuslot::run
