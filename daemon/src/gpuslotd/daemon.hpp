// SPDX-License-Identifier: GPL-2.0
// gpuslotd's core: plans each GPU's partitions, writes the layout into the
// module, re-plans when an admin writes k, reloads its config, and audits
// real queue usage. main() in gpuslotd.cc only parses options and runs it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "amd/audit.hpp"
#include "config/config.hpp"
#include "amd/cu_mask.hpp"
#include "device/module.hpp"
#include "nvidia/nv_plan.hpp"
#include "amd/topology.hpp"

namespace gpuslot {

struct DaemonOptions {
	std::filesystem::path config = "/etc/gpuslot/gpuslotd.conf";
	std::filesystem::path topology = "/sys/class/kfd/kfd/topology";
	std::filesystem::path sysfs = "/sys/class/gpuslot";
	std::filesystem::path debugfs = "/sys/kernel/debug/gpuslot"; // the tables
	std::filesystem::path device = "/dev/gpuslot";
	std::filesystem::path kfd_proc = "/sys/class/kfd/kfd/proc";
	std::filesystem::path dri = "/dev/dri"; // empty: do not ask libdrm
	std::filesystem::path state_dir = "/run/gpuslot"; // audit.json
	std::string kernel;				   // empty: uname -r
};

// The layout of k slots of @gpu as @settings ask (sizes, `all` for a
// whole-GPU slot, priorities, layout = protect; see slot_layout.hpp) and
// @hqd_limit (0 keeps the module's). Notes say what was rounded, assumed
// or why the layout is as it is.
bool plan_layout(const GpuNode &gpu, const CuShape &shape,
		 MaskAlgorithm algorithm, unsigned int k,
		 const GpuSettings &settings, unsigned int hqd_limit,
		 ModuleLayout *out, std::vector<std::string> *notes,
		 std::string *error);
// Only sizes (every slot at priority 0).
bool plan_layout(const GpuNode &gpu, const CuShape &shape,
		 MaskAlgorithm algorithm, unsigned int k,
		 const std::optional<std::string> &sizes, unsigned int hqd_limit,
		 ModuleLayout *out, std::vector<std::string> *notes,
		 std::string *error);

// The same for NVIDIA GPU @gpu (sizes in SMs or percent): unit kind
// nv-sm-group, unit size G SMs, one unit per group of the driver's split.
bool plan_nv_layout(const NvGpu &gpu, unsigned int k,
		    const GpuSettings &settings, unsigned int hqd_limit,
		    ModuleLayout *out, std::vector<std::string> *notes,
		    std::string *error);
bool plan_nv_layout(const NvGpu &gpu, unsigned int k,
		    const std::optional<std::string> &sizes, unsigned int hqd_limit,
		    ModuleLayout *out, std::vector<std::string> *notes,
		    std::string *error);

// The CU shape of @gpu: libdrm's exact bitmap where @dri has its render
// node, else uniform harvesting; *note says which.
CuShape gpu_shape(const GpuNode &gpu, const std::filesystem::path &dri,
		  std::string *note);

class Daemon {
public:
	// syslog priorities: LOG_ERR, LOG_WARNING, LOG_INFO.
	using Log = std::function<void(int priority, const std::string &)>;

	Daemon(DaemonOptions options, Log log);
	~Daemon();

	// Discover GPUs, read the config, apply every layout. Only one
	// gpuslotd runs per host (a lock in state_dir).
	bool start(std::string *error);
	// start() failed because there is nothing to manage here: no GPU, or
	// no gpuslot module. systemd must not restart gpuslotd for that
	// (RestartPreventExitStatus=, kExitUnavailable).
	bool unavailable() const { return unavailable_; }
	static constexpr int kExitUnavailable = 69; // EX_UNAVAILABLE
	// Re-read the config and apply it; a bad config is refused and the
	// old one stays.
	bool reload(std::string *error);
	// Layouts changed outside gpuslotd: re-plan a domain whose k was
	// written (its partitions were reset); keep partitions an admin set.
	void check_domains();
	// Compare KFD compute queues with reservations; log and record
	// processes over theirs in state_dir/audit.json.
	void audit();
	// "gpu0 k 4 gen 7; ..." for systemd's STATUS=.
	std::string status_line() const;
	// Until SIGTERM or SIGINT: poll sysfs, handle SIGHUP, audit, and talk
	// to systemd (READY=1, STATUS=, WATCHDOG=1). Returns the exit status.
	int run();

private:
	struct Managed;
	unsigned int hqd_limit_for(const Managed &m, const GpuSettings &s) const;
	// How a layout went in: applied, refused because someone changed the
	// layout since @expected was read (an admin: re-read, do not
	// overwrite), or failed.
	enum class Applied { ok, raced, failed };
	Applied apply(Managed &m, const GpuSettings &settings, unsigned int k,
		      unsigned int hqd_limit, uint64_t expected,
		      const std::string &why, std::string *error);
	bool lock_instance(std::string *error);
	// The CU-mask walk for @m under @settings (see choose_algorithm()).
	AlgorithmChoice walk(const Managed &m, const GpuSettings &settings) const;

	DaemonOptions options_;
	Log log_;
	Config config_;
	int lock_fd_ = -1;	     // state_dir/gpuslotd.lock, held while running
	bool unavailable_ = false;   // nothing to manage: no GPU, no module
	std::string kernel_;	     // the release whose walk applies
	std::string amdgpu_version_; // amdgpu-dkms, when loaded
	std::vector<std::unique_ptr<Managed>> gpus_;
	size_t last_over_ = 0;
	std::string audit_note_; // why the queue table could not be read
};

} // namespace gpuslot
