// SPDX-License-Identifier: GPL-2.0
// gpuslotctl: gpuslot's command line for people. So far: plan.
#include <getopt.h>
#include <sys/utsname.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "plan_report.hpp"

namespace {

const char kUsage[] =
	"usage: gpuslotctl plan [--topology PATH] [--k N] [--sizes LIST]\n"
	"                       [--kernel RELEASE] [--json]\n"
	"\n"
	"plan   k compute-unit partitions for every GPU of a KFD topology, as HIP\n"
	"       CU masks, with the CUs each one has per shader engine.\n"
	"  --topology PATH  a KFD topology root (with nodes/) or one node directory\n"
	"                   (default /sys/class/kfd/kfd/topology)\n"
	"  --k N            number of slots, 1..64 (default: the number of --sizes)\n"
	"  --sizes LIST     partition sizes in CUs (30,10,10,10) or percent\n"
	"                   (50%,25%,25%); default k equal partitions\n"
	"  --kernel RELEASE the kernel whose CU-mask mapping applies (default: this\n"
	"                   one's, uname -r)\n"
	"  --json           machine-readable output\n"
	"\n"
	"Exit status: 0 planned, 1 the topology or the plan failed, 2 bad usage.\n"
	"The other gpuslotctl commands (status, lint, set-k, set-partitions) are not\n"
	"written yet.\n";

int usage_error(const std::string &what)
{
	std::fprintf(stderr, "gpuslotctl: %s\n\n%s", what.c_str(), kUsage);
	return 2;
}

int plan(int argc, char **argv)
{
	std::string topology = "/sys/class/kfd/kfd/topology", sizes_text;
	std::string kernel;
	unsigned int k = 0;
	bool json = false;
	static const option opts[] = {
		{"topology", required_argument, nullptr, 't'},
		{"k", required_argument, nullptr, 'k'},
		{"sizes", required_argument, nullptr, 's'},
		{"kernel", required_argument, nullptr, 'r'},
		{"json", no_argument, nullptr, 'j'},
		{"help", no_argument, nullptr, 'h'},
		{nullptr, 0, nullptr, 0},
	};
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "", opts, nullptr)) != -1;) {
		switch (c) {
		case 't': topology = optarg; break;
		case 's': sizes_text = optarg; break;
		case 'r': kernel = optarg; break;
		case 'j': json = true; break;
		case 'h': std::fputs(kUsage, stdout); return 0;
		case 'k': {
			char *end = nullptr;
			unsigned long v = std::strtoul(optarg, &end, 10);
			if (!*optarg || *end || v < 1 || v > 64)
				return usage_error("--k '" + std::string(optarg) +
						   "': expected a whole number from 1 to 64");
			k = unsigned(v);
			break;
		}
		default:
			return usage_error("unknown option");
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '" +
				   std::string(argv[optind]) + "'");
	if (kernel.empty()) {
		utsname u;
		uname(&u);
		kernel = u.release;
	}
	gpuslot::MaskAlgorithm algorithm;
	if (!gpuslot::algorithm_for_kernel(kernel, &algorithm))
		return usage_error("--kernel '" + kernel +
				   "': expected a release such as 6.1.0-56-amd64");

	auto topo = gpuslot::read_topology(topology);
	if (!topo.error.empty()) {
		std::fprintf(stderr, "gpuslotctl: %s\n", topo.error.c_str());
		return 1;
	}
	std::vector<gpuslot::GpuPlan> plans;
	bool failed = false;
	for (const auto &gpu : topo.gpus) {
		gpuslot::GpuPlan p{gpu, gpuslot::uniform_shape(gpu), algorithm, {}};
		std::vector<unsigned int> sizes;
		std::string err;
		if (!sizes_text.empty() &&
		    !gpuslot::parse_sizes(sizes_text, gpu.active_cus(), &sizes, &err))
			return usage_error("--sizes '" + sizes_text + "': " + err);
		unsigned int slots = k ? k : unsigned(sizes.size());
		if (!slots)
			return usage_error("give --k or --sizes");
		p.plan = gpuslot::plan_partitions(p.shape, algorithm, slots, sizes);
		failed |= !p.plan.error.empty();
		plans.push_back(std::move(p));
	}
	std::fputs((json ? gpuslot::plan_json(plans) : gpuslot::plan_text(plans)).c_str(),
		   stdout);
	return failed ? 1 : 0;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage_error("no command");
	std::string cmd = argv[1];
	if (cmd == "--help" || cmd == "-h" || cmd == "help") {
		std::fputs(kUsage, stdout);
		return 0;
	}
	if (cmd == "plan")
		return plan(argc - 1, argv + 1);
	return usage_error("unknown command '" + cmd + "'; this gpuslotctl knows: plan");
}
