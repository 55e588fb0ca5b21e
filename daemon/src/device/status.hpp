// SPDX-License-Identifier: GPL-2.0
// `gpuslotctl status`: per GPU the slots, holders, waiters, queue budget
// and partitions (as an SE x CU picture), for people and as JSON.
#pragma once

#include <string>
#include <vector>

#include "amd/audit.hpp"
#include "amd/cu_mask.hpp"
#include "device/module.hpp"
#include "amd/topology.hpp"

namespace gpuslot {

struct StatusGpu {
	DomainState state;
	bool has_gpu = false; // a KFD GPU maps to this domain
	GpuNode gpu;
	CuShape shape;
	MaskAlgorithm algorithm = MaskAlgorithm::C;
	std::vector<AuditEntry> over; // from gpuslotd's last audit
	bool audited = false;
};

// "3.2 ms", "12 s": a duration for people.
std::string human_ns(uint64_t ns);

// The wait-time histogram's buckets as Prometheus has them: upper bound
// of bucket @i in seconds (2^(i+1) ns; the last one +Inf).
double wait_bucket_upper_seconds(size_t i, size_t buckets);
// The @q quantile (0..1) of the waits in @hist (wait_hist_log2_ns), in
// seconds, interpolated within its bucket exactly as Prometheus's
// histogram_quantile() does on gpuslot_wait_seconds; NaN without waits.
double wait_quantile_seconds(const std::vector<uint64_t> &hist, double q);

std::string status_text(const std::vector<StatusGpu> &gpus);
std::string status_json(const std::vector<StatusGpu> &gpus);

} // namespace gpuslot
