// SPDX-License-Identifier: LGPL-2.1-or-later
// gpuslot-run: the GPU's taskset/chrt. Runs an unmodified program with its
// GPU work under a slot of gpuslot's lock: checks the domain and slots
// through libgpuslot (the lock the program will use, on the transport it
// will use), tells the interposer what to do in GPUSLOT_RUN_*, adds it to
// LD_PRELOAD and execs the program.
#include <linux/gpuslot.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <optional>
#include <vector>

#include "amd_cu_mask.hpp"
#include "gpuslot.h"
#include "run_env.hpp"

namespace {

using namespace gpuslot::run;

// As env(1), nice(1) and timeout(1): 125 gpuslot-run failed, 126 the
// program could not be run, 127 it was not found.
constexpr int kExitFailed = 125;
constexpr int kExitCannotRun = 126;
constexpr int kExitNotFound = 127;

const char kUsage[] =
	"usage: gpuslot-run [--domain N] --slot S|--slots LIST [--hold|--per-sync]\n"
	"                   [--inflight N|--no-preempt] -- PROGRAM [ARGS...]\n"
	"\n"
	"Runs PROGRAM, unchanged, with its CUDA work under a slot of gpuslot's lock:\n"
	"the NON_BLOCKING streams it creates run on the slot's SM partition (its\n"
	"green context; the union of the slots' partitions for --slots), every stream\n"
	"it creates gets the slot's priority (clamped into the GPU's range), and its\n"
	"launches, asynchronous copies and memsets and blocking\n"
	"host-device copies run only while the process holds a slot (other driver\n"
	"calls pass through ungated: gpuslot-run(1)).\n"
	"\n"
	"  --domain N     the GPU domain (default 0)\n"
	"  --slot S       the slot to hold; --slots LIST: any of these (1,3 or 1-3);\n"
	"                 the program's streams get the lowest priority among them\n"
	"  --per-sync     (default) the work between two synchronizations is one job:\n"
	"                 the first command after a synchronization acquires, the\n"
	"                 synchronization that finishes the job's work releases\n"
	"  --hold         take the slot before the program starts, keep it to exit\n"
	"  --inflight N   while a slot of higher priority has work (and is within its\n"
	"                 preemption budget), the program sends no command: each\n"
	"                 waits in the thread that sends it until the preemption\n"
	"                 ends; and where another slot of the domain has a higher\n"
	"                 priority than the program's, at most N of its commands\n"
	"                 are unfinished on the GPU at any time, so that a\n"
	"                 preemption finds at most N ahead of the higher slot's work\n"
	"                 (XSched's threshold; default 4; 0 .. 4096; 0: no bound)\n"
	"  --no-preempt   never hold a command back (and no bound)\n"
	"  -h, --help     this text\n"
	"\n"
	"The lock is libgpuslot's: /dev/gpuslot, or gpuslotd's socket where the module\n"
	"is not loaded (GPUSLOT_TRANSPORT=device|socket, GPUSLOT_SOCKET_DIR).\n"
	"It covers programs that reach libcuda.so.1 by linking it, by dlsym() or by\n"
	"cuGetProcAddress (cudart: PyTorch, TensorRT, cuDNN, cuBLAS). The default\n"
	"streams (at the default priority) and blocking streams run on the whole GPU\n"
	"(said on stderr); the processes the program starts do not inherit the slot.\n"
	"On AMD (a layout of CUs) it sets HSA_CU_MASK to the slots' CUs and preloads\n"
	"libgpuslot-run-hip.so instead: HIP's kernel launches, asynchronous copies and\n"
	"memsets, event waits and blocking copies (hipMemcpy, hipMemcpyHtoD/DtoH)\n"
	"pass the same queue, --per-sync, --hold, --inflight and the throttle work as\n"
	"on NVIDIA, and HIP streams the program creates get the slot's priority,\n"
	"levels above HIP's default clamped into hipDeviceGetStreamPriorityRange.\n"
	"The queues its HIP makes (GPU_MAX_HW_QUEUES a pool, set to 1 where unset,\n"
	"and the runtime's 3) are reserved in the domain's hardware-queue budget\n"
	"until it exits; where they do not fit, it does not start. Other HIP calls\n"
	"(the 2D/3D copies, hipMemset and the other synchronous memsets,\n"
	"hipExtLaunch*, a HIP reached by dlopen/dlsym) pass ungated. See\n"
	"gpuslot-run(1).\n"
	"\n"
	"Throttling covers what the queue sees (kernel and graph launches, the copies,\n"
	"memsets and event waits above). A program nobody outranks pays one look at\n"
	"the lock's published state per command; an outranked one with a bound also an\n"
	"event per command. The bound counts all the program's streams together:\n"
	"where one stream's work waits on a later command of another, the next\n"
	"command may wait up to 1000 ms, preempted or not.\n"
	"\n"
	"Exit status: PROGRAM's, or 125 gpuslot-run failed, 126 PROGRAM could not be\n"
	"run, 127 PROGRAM was not found.\n";

int usage_error(const std::string &what)
{
	std::fprintf(stderr, "gpuslot-run: %s\n%s", what.c_str(), kUsage);
	return kExitFailed;
}

int fail(const std::string &what)
{
	std::fprintf(stderr, "gpuslot-run: %s\n", what.c_str());
	return kExitFailed;
}

// The interposer: on an AMD domain HIP's (libgpuslot-run-hip.so,
// GPUSLOT_RUN_HIP_LIBRARY where set), else CUDA's (libgpuslot-run.so,
// GPUSLOT_RUN_LIBRARY where set: a build tree), else where the package
// installs it.
std::string interposer_path(bool amd)
{
	const char *set = std::getenv(amd ? "GPUSLOT_RUN_HIP_LIBRARY" : "GPUSLOT_RUN_LIBRARY");
	return set && *set ? set : amd ? GPUSLOT_RUN_HIP_LIBRARY_PATH : GPUSLOT_RUN_LIBRARY_PATH;
}

// The text of the domain's attribute @name ("" on error).
std::string attr(gpuslot_client *c, const std::string &name)
{
	char text[256] = "";
	return gpuslot_domain_attr(c, name.c_str(), text, sizeof(text)) < 0 ? "" : text;
}

// AMD: the HSA_CU_MASK that confines every queue the program creates to the
// CUs of the slots in @mask (their union), in *@value; "" where a slot is
// the whole GPU. 0, or gpuslot-run's exit status after saying why.
int amd_cu_mask(gpuslot_client *c, uint64_t mask, std::string *value)
{
	value->clear();
	std::vector<uint32_t> cus;
	for (unsigned int s = 0; s < 64; s++) {
		if (!(mask >> s & 1))
			continue;
		const std::string name = "slot" + std::to_string(s) + "/units";
		const std::string text = attr(c, name);
		std::vector<uint32_t> bits;
		bool whole = false;
		if (!gpuslot::run::parse_units_bitmap(text, &bits, &whole))
			return fail(name + " reads \"" + text + "\": not a partition");
		if (whole)
			return 0; // a whole-GPU slot: nothing to confine
		if (cus.size() < bits.size())
			cus.resize(bits.size());
		for (size_t i = 0; i < bits.size(); i++)
			cus[i] |= bits[i];
	}
	std::string pci = attr(c, "pci_bus_id");
	while (!pci.empty() && pci.back() == '\n')
		pci.pop_back();
	const char *topology = std::getenv("GPUSLOT_KFD_TOPOLOGY");
	unsigned int index = 0;
	std::string error;
	if (gpuslot::run::rocr_gpu_index(topology && *topology ? topology
								: "/sys/class/kfd/kfd/topology",
					 pci, std::getenv("ROCR_VISIBLE_DEVICES"), &index,
					 &error))
		return fail("HSA_CU_MASK for the slot's CUs: " + error);
	*value = std::to_string(index) + ":" + gpuslot::run::cu_list(cus);
	return 0;
}

// AMD: the program's HIP makes its queues from pools of GPU_MAX_HW_QUEUES
// each (default 4); unset, it is set to 1, as libgpuslot does, so that a
// program takes few of the domain's hardware queues. A value of the user's
// is kept if it is a plain number: HIP reads it with atoi(), so anything
// else would be counted as HIP might not read it. *@queues: what HIP will
// make for streams @levels above the default (hip_program_queues()), for
// the interposer to reserve.
int hip_queues_to_reserve(unsigned int levels, unsigned int *queues)
{
	const char *set = std::getenv("GPU_MAX_HW_QUEUES");
	if (!set && setenv("GPU_MAX_HW_QUEUES", "1", 1))
		return fail(std::string("setenv: ") + std::strerror(errno));
	const auto pool = set ? parse_number(set, kMaxHipPool) : std::optional<unsigned long>(1);
	if (!pool || !*pool)
		return fail(std::string("GPU_MAX_HW_QUEUES \"") + set +
			    "\": gpuslot-run counts the program's hardware queues from it; give "
			    "a number 1 .. " + std::to_string(kMaxHipPool) +
			    ", or unset it (gpuslot-run then sets 1)");
	*queues = hip_program_queues(unsigned(*pool), levels);
	return 0;
}

// The slots exist in the domain's layout: a slot at or past k would wait
// for ever. *@levels: the priority levels of the program's streams. On AMD
// (a layout of AMD CUs: *@amd), *@hsa_cu_mask gets the mask that confines
// the program and *@queues the hardware queues its HIP makes.
int check_slots(unsigned long domain, uint64_t mask, std::string *hsa_cu_mask, bool *amd,
		unsigned int *levels, unsigned int *queues)
{
	gpuslot_options o{};
	o.size = sizeof(o);
	o.domain = uint32_t(domain);
	o.backend = GPUSLOT_BACKEND_NONE;
	gpuslot_client *c = nullptr;
	if (gpuslot_open(&o, &c) < 0)
		return fail("domain " + std::to_string(domain) + ": " + gpuslot_last_error());
	gpuslot_layout_info info{};
	info.size = sizeof(info);
	int err = gpuslot_client_layout(c, &info);
	if (err < 0) {
		gpuslot_close(c);
		return fail(std::string("the domain's layout: ") + gpuslot_last_error());
	}
	const uint64_t all = info.k >= 64 ? ~0ULL : (1ULL << info.k) - 1;
	if (mask & ~all) {
		gpuslot_close(c);
		return fail("slot " + slot_list(mask & ~all) + " is not in domain " +
			    std::to_string(domain) + "'s layout: k is " + std::to_string(info.k) +
			    ", slots 0 .. " + std::to_string(info.k - 1));
	}
	*amd = info.unit_kind == GPUSLOT_UNIT_AMD_CU;
	std::string error;
	err = streams_priority_levels(c, mask, levels, &error) ? 0 : fail(error);
	if (!err && *amd)
		err = amd_cu_mask(c, mask, hsa_cu_mask);
	if (!err && *amd)
		err = hip_queues_to_reserve(*levels, queues);
	gpuslot_close(c);
	return err;
}

} // namespace

int main(int argc, char **argv)
{
	unsigned long domain = 0;
	std::optional<uint64_t> mask;
	const char *policy = "per-sync";
	unsigned long inflight = kDefaultInflight;
	bool preempt = true;
	int i = 1;
	for (; i < argc; i++) {
		const std::string a = argv[i];
		auto value = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
		if (a == "--") {
			i++;
			break;
		} else if (a == "-h" || a == "--help") {
			std::fputs(kUsage, stdout);
			return 0;
		} else if (a == "--hold") {
			policy = "hold";
		} else if (a == "--per-sync") {
			policy = "per-sync";
		} else if (a == "--inflight") {
			const char *v = value();
			auto n = v ? parse_number(v, kMaxInflight) : std::nullopt;
			if (!n)
				return usage_error("--inflight: expected a number of commands 0 .. " +
						   std::to_string(kMaxInflight));
			inflight = *n;
		} else if (a == "--no-preempt") {
			preempt = false;
		} else if (a == "--domain") {
			const char *v = value();
			auto n = v ? parse_number(v, 1u << 20) : std::nullopt;
			if (!n)
				return usage_error("--domain: expected a domain number");
			domain = *n;
		} else if (a == "--slot" || a == "--slots") {
			if (mask)
				return usage_error("give --slot or --slots once");
			const char *v = value();
			if (!v)
				return usage_error(a + ": expected a slot");
			std::string error;
			if (a == "--slot") {
				auto n = parse_number(v, 63);
				if (!n)
					return usage_error("--slot \"" + std::string(v) +
							   "\": expected a slot number 0 .. 63");
				mask = 1ULL << *n;
			} else if (!(mask = parse_slot_list(v, &error))) {
				return usage_error("--slots: " + error);
			}
		} else {
			return usage_error("unknown option \"" + a + "\" (the program follows --)");
		}
	}
	if (!mask)
		return usage_error("--slot or --slots is required");
	if (i >= argc)
		return usage_error("no program to run (after --)");
	std::string hsa_cu_mask;
	bool amd = false;
	unsigned int levels = 0, queues = 0;
	if (int err = check_slots(domain, *mask, &hsa_cu_mask, &amd, &levels, &queues))
		return err;
	// ROCr reads it when the program's HIP starts: every queue it makes
	// gets the slots' CUs. A mask of the user's own would be replaced.
	if (!hsa_cu_mask.empty()) {
		const char *set = std::getenv("HSA_CU_MASK");
		if (set && *set)
			return fail(std::string("HSA_CU_MASK is set (\"") + set +
				    "\"): gpuslot-run sets it to the slot's CUs (\"" + hsa_cu_mask +
				    "\"); unset it");
		if (setenv("HSA_CU_MASK", hsa_cu_mask.c_str(), 1))
			return fail(std::string("setenv: ") + std::strerror(errno));
	}
	const std::string library = interposer_path(amd);
	if (access(library.c_str(), R_OK))
		return fail("the interposer " + library + ": " + std::strerror(errno) +
			    (amd ? " (GPUSLOT_RUN_HIP_LIBRARY names another)"
				 : " (GPUSLOT_RUN_LIBRARY names another)"));
	// After what is preloaded already (a sanitizer's runtime must stay
	// first); the CUDA driver and HIP are never preloaded, so the
	// interposer still comes before them.
	const char *preload = std::getenv("LD_PRELOAD");
	const std::string preloads =
		preload && *preload ? std::string(preload) + ":" + library : library;
	if (setenv("LD_PRELOAD", preloads.c_str(), 1) ||
	    setenv(kEnvDomain, std::to_string(domain).c_str(), 1) ||
	    setenv(kEnvSlots, slot_list(*mask).c_str(), 1) || setenv(kEnvPolicy, policy, 1) ||
	    setenv(kEnvInflight, std::to_string(inflight).c_str(), 1) ||
	    setenv(kEnvPreempt, preempt ? "1" : "0", 1) ||
	    setenv(kEnvLevels, std::to_string(levels).c_str(), 1) ||
	    (queues ? setenv(kEnvQueues, std::to_string(queues).c_str(), 1)
		    : unsetenv(kEnvQueues)))
		return fail(std::string("setenv: ") + std::strerror(errno));
	execvp(argv[i], argv + i);
	const int err = errno;
	std::fprintf(stderr, "gpuslot-run: %s: %s\n", argv[i], std::strerror(err));
	return err == ENOENT ? kExitNotFound : kExitCannotRun;
}
