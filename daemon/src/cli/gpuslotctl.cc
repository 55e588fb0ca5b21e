// SPDX-License-Identifier: GPL-2.0
// gpuslotctl: gpuslot's command line for people (and, with --json, for
// machines): status, plan, lint, set-k, set-partitions, and the CDI spec
// for containers (cdi generate).
#include <fcntl.h>
#include <getopt.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "amd/audit.hpp"
#include "cli/cdi.hpp"
#include "gpuslotd/daemon.hpp"
#include "amd/lint.hpp"
#include "device/module.hpp"
#include "nvidia/nv_topology.hpp"
#include "amd/plan_report.hpp"
#include "plan/sizes.hpp"
#include "plan/slot_layout.hpp"
#include "device/status.hpp"

namespace {

const char kUsage[] =
	"usage: gpuslotctl COMMAND [OPTIONS]\n"
	"\n"
	"  status [--domain N]          every GPU domain: k, generation, slots with\n"
	"                               their partition, priority and holder, waiters,\n"
	"                               HQDs, the partitions as an SE x CU picture (one\n"
	"                               letter per slot), gpuslotd's queue audit; who\n"
	"                               holds and waits only as root (debugfs tables)\n"
	"  plan --k N [--sizes LIST] [--priorities LIST]\n"
	"                               k compute-unit partitions for every GPU of a\n"
	"                               KFD topology, as HIP CU masks with their CUs\n"
	"                               per shader engine; changes nothing\n"
	"  plan --layout protect [--k N] [--reserve P%]\n"
	"                               slot 0 protects one task: it runs on the whole\n"
	"                               GPU at a higher priority, the other k - 1 slots\n"
	"                               confined to leave it a reserve (default 25%)\n"
	"  plan --nvidia ...            the same for every NVIDIA GPU the CUDA driver\n"
	"                               sees, as groups of one green-context split\n"
	"                               (sizes in SMs or percent)\n"
	"  lint [--domain N] [MASK...] [--priorities LIST]\n"
	"                               what is wrong with CU masks (one per slot, in\n"
	"                               slot order) and their priorities, or with the\n"
	"                               module's layout when no mask is given\n"
	"  set-k K [--domain N]         set k (root); the partitions become the whole\n"
	"                               GPU at priority 0 until gpuslotd re-plans\n"
	"  set-partitions MASK... [--priorities LIST] [--domain N] [--force]\n"
	"                               set every slot's partition (hex mask or 'all')\n"
	"                               and priority, one per slot in order (root), as\n"
	"                               one change (staged slot files, then commit);\n"
	"                               refused when lint finds an error, unless --force\n"
	"  cdi generate [--output FILE] a CDI spec (kind gpuslot.dev/gpu: one device\n"
	"                               per domain and 'all') giving containers the\n"
	"                               lock as this host has it: /dev/gpuslot, or\n"
	"                               gpuslotd's sockets; e.g. --output\n"
	"                               /etc/cdi/gpuslot.json, then podman run\n"
	"                               --device gpuslot.dev/gpu=0\n"
	"\n"
	"Options:\n"
	"  --json             machine-readable output (status, plan, lint)\n"
	"  --output FILE      cdi generate: write FILE (atomically, mode 0644)\n"
	"                     instead of standard output\n"
	"  --domain N         one domain (default: all for status, 0 otherwise)\n"
	"  --sizes LIST       plan: partition sizes in CUs (30,10,10,10) or percent\n"
	"                     (50%,25%,25%), 'all' for a slot on the whole GPU\n"
	"                     (all,25%,25%,25%); default k equal partitions\n"
	"  --priorities LIST  one GPU stream priority per slot, 0..15, more is more\n"
	"                     urgent (5,0,0,0); default all 0\n"
	"  --layout L         plan: partitions (default: --sizes and --priorities) or\n"
	"                     protect (slot 0 on the whole GPU at priority 1, the\n"
	"                     others confined at 0)\n"
	"  --reserve P%       plan --layout protect: the share no confined slot may\n"
	"                     use, 0%..90% (default 25%, as measured)\n"
	"  --k N              plan: number of slots, 1..64 (default: the number of\n"
	"                     --sizes or --priorities; 2 for protect)\n"
	"  --topology PATH    KFD topology root (with nodes/) or one node directory\n"
	"                     (default /sys/class/kfd/kfd/topology)\n"
	"  --transport T      where the lock is: device (the module's sysfs),\n"
	"                     socket (gpuslotd's sockets), or auto (default): the\n"
	"                     module's sysfs when it exists, else the sockets\n"
	"  --sysfs-root PATH  the module's sysfs (default /sys/class/gpuslot)\n"
	"  --debugfs-root PATH the module's tables (default\n"
	"                     /sys/kernel/debug/gpuslot; root only)\n"
	"  --socket-dir PATH  gpuslotd's sockets (default /run/gpuslot, or\n"
	"                     $GPUSLOT_SOCKET_DIR)\n"
	"  --state-dir PATH   where gpuslotd writes audit.json (default /run/gpuslot)\n"
	"  --dri PATH         render nodes for libdrm's CU bitmap (default /dev/dri)\n"
	"  --kernel RELEASE   the kernel whose CU-mask walk applies (default: this\n"
	"                     one's, uname -r, or amdgpu-dkms's where it is loaded)\n"
	"  --mask-algorithm W the walk itself: A, B, C, D, or auto (default): D on\n"
	"                     MI300 (GC 9.4.3+), else by kernel release\n"
	"\n"
	"Domain N is the N-th GPU of KFD topology in node order, as gpuslotd maps them.\n"
	"Exit status: 0 done, 1 failed (or lint found an error), 2 bad usage.\n";

int usage_error(const std::string &what)
{
	std::fprintf(stderr, "gpuslotctl: %s\n\n%s", what.c_str(), kUsage);
	return 2;
}

int fail(const std::string &what)
{
	std::fprintf(stderr, "gpuslotctl: %s\n", what.c_str());
	return 1;
}

struct Options {
	std::string command;
	std::vector<std::string> args;
	std::string topology = "/sys/class/kfd/kfd/topology";
	std::string sysfs = gpuslot::kSysfsRoot;
	std::string debugfs = gpuslot::kDebugfsRoot;
	std::string transport = "auto";
	std::string socket_dir = getenv("GPUSLOT_SOCKET_DIR") && *getenv("GPUSLOT_SOCKET_DIR")
					 ? getenv("GPUSLOT_SOCKET_DIR")
					 : "/run/gpuslot";
	std::string state_dir = "/run/gpuslot";
	std::string dri = "/dev/dri";
	std::string kernel, sizes, priorities;
	std::optional<unsigned int> reserve; // --reserve, percent
	bool protect = false;		      // --layout protect
	std::string output; // cdi generate --output
	unsigned int k = 0;
	int domain = -1;
	bool json = false, force = false, nvidia = false;
	bool kernel_given = false; // --kernel: another host, not this one
	std::optional<gpuslot::MaskAlgorithm> forced; // --mask-algorithm
};

// The CU-mask walk amdkfd uses for @gpu: see choose_algorithm(). The
// out-of-tree driver check asks this host only when --kernel is not given.
gpuslot::AlgorithmChoice walk_for(const Options &o, const gpuslot::GpuNode &gpu)
{
	return gpuslot::choose_algorithm(gpu.gfx, o.kernel,
					 o.kernel_given ? "" : gpuslot::amdgpu_module_version(),
					 o.forced);
}

bool whole_number(const char *text, unsigned long lo, unsigned long hi,
		  unsigned long *out)
{
	char *end = nullptr;
	errno = 0;
	*out = std::strtoul(text, &end, 10);
	return *text && !*end && !errno && *out >= lo && *out <= hi &&
	       text[0] != '-';
}

// 0, or the exit status of a usage error.
int parse_options(int argc, char **argv, Options *o)
{
	static const option opts[] = {
		{"topology", required_argument, nullptr, 't'},
		{"sysfs-root", required_argument, nullptr, 'S'},
		{"debugfs-root", required_argument, nullptr, 'G'},
		{"priorities", required_argument, nullptr, 'P'},
		{"layout", required_argument, nullptr, 'l'},
		{"reserve", required_argument, nullptr, 'R'},
		{"transport", required_argument, nullptr, 'T'},
		{"socket-dir", required_argument, nullptr, 'L'},
		{"state-dir", required_argument, nullptr, 'D'},
		{"dri", required_argument, nullptr, 'r'},
		{"kernel", required_argument, nullptr, 'K'},
		{"mask-algorithm", required_argument, nullptr, 'm'},
		{"sizes", required_argument, nullptr, 's'},
		{"k", required_argument, nullptr, 'k'},
		{"domain", required_argument, nullptr, 'd'},
		{"json", no_argument, nullptr, 'j'},
		{"force", no_argument, nullptr, 'f'},
		{"nvidia", no_argument, nullptr, 'n'},
		{"output", required_argument, nullptr, 'o'},
		{"help", no_argument, nullptr, 'h'},
		{nullptr, 0, nullptr, 0},
	};
	o->command = argv[1];
	optind = 2;
	unsigned long v;
	for (int c; (c = getopt_long(argc, argv, "", opts, nullptr)) != -1;) {
		switch (c) {
		case 't': o->topology = optarg; break;
		case 'S': o->sysfs = optarg; break;
		case 'G': o->debugfs = optarg; break;
		case 'P': {
			std::vector<unsigned int> p;
			std::string err;
			if (!gpuslot::parse_priorities(optarg, &p, &err))
				return usage_error("--priorities '" + std::string(optarg) + "': " + err);
			o->priorities = optarg;
			break;
		}
		case 'l':
			if (std::string(optarg) != "protect" && std::string(optarg) != "partitions")
				return usage_error("--layout '" + std::string(optarg) +
						   "': expected partitions or protect");
			o->protect = std::string(optarg) == "protect";
			break;
		case 'R': {
			std::string t = optarg;
			if (t.size() < 2 || t.back() != '%' ||
			    !whole_number(t.substr(0, t.size() - 1).c_str(), 0, 90, &v))
				return usage_error("--reserve '" + t +
						   "': expected a percentage from 0% to 90%, such as 25%");
			o->reserve = unsigned(v);
			break;
		}
		case 'L': o->socket_dir = optarg; break;
		case 'T':
			o->transport = optarg;
			if (o->transport != "device" && o->transport != "socket" &&
			    o->transport != "auto")
				return usage_error("--transport '" + o->transport +
						   "': use device, socket or auto");
			break;
		case 'D': o->state_dir = optarg; break;
		case 'r': o->dri = optarg; break;
		case 'K':
			o->kernel = optarg;
			o->kernel_given = true;
			break;
		case 'm': {
			gpuslot::MaskAlgorithm a;
			if (std::string(optarg) == "auto")
				break;
			if (!gpuslot::parse_algorithm(optarg, &a))
				return usage_error("--mask-algorithm '" + std::string(optarg) +
						   "': expected auto, A, B, C or D");
			o->forced = a;
			break;
		}
		case 's': o->sizes = optarg; break;
		case 'j': o->json = true; break;
		case 'f': o->force = true; break;
		case 'n': o->nvidia = true; break;
		case 'o':
			o->output = optarg;
			if (o->output.empty())
				return usage_error("--output: expected a file name");
			break;
		case 'h': std::fputs(kUsage, stdout); exit(0);
		case 'k':
			if (!whole_number(optarg, 1, GPUSLOT_MAX_SLOTS, &v))
				return usage_error("--k '" + std::string(optarg) +
						   "': expected a whole number from 1 to 64");
			o->k = unsigned(v);
			break;
		case 'd':
			if (!whole_number(optarg, 0, GPUSLOT_MAX_DOMAINS - 1, &v))
				return usage_error("--domain '" + std::string(optarg) +
						   "': expected a domain from 0 to 15");
			o->domain = int(v);
			break;
		default:
			return usage_error("unknown option for '" + o->command + "'");
		}
	}
	for (int i = optind; i < argc; i++)
		o->args.push_back(argv[i]);
	gpuslot::MaskAlgorithm unused;
	if (o->kernel.empty())
		o->kernel = gpuslot::running_kernel_release();
	else if (!gpuslot::algorithm_for_kernel(o->kernel, &unused))
		return usage_error("--kernel '" + o->kernel +
				   "': expected a release such as 6.1.0-56-amd64");
	return 0;
}

// What --sizes, --priorities, --layout and --reserve ask for, as the
// config's keys would: 0, or the exit status of a usage error.
int plan_settings(const Options &o, gpuslot::GpuSettings *s, unsigned int *k)
{
	if (o.protect && (!o.sizes.empty() || !o.priorities.empty()))
		return usage_error("--layout protect plans sizes and priorities itself: drop "
				   "--sizes and --priorities");
	if (o.reserve && !o.protect)
		return usage_error("--reserve is for --layout protect; for other layouts give "
				   "--sizes (all,25%,25%,25% leaves 25%)");
	if (!o.sizes.empty())
		s->sizes = o.sizes;
	if (!o.priorities.empty())
		s->priorities = o.priorities;
	if (o.protect)
		s->layout = gpuslot::LayoutKind::protect;
	s->reserve_percent = o.reserve;
	if (o.k)
		s->k = o.k;
	*k = s->k_or(0);
	if (!*k)
		return usage_error("give --k, --sizes, --priorities or --layout protect");
	std::vector<unsigned int> v;
	std::string err;
	if (s->sizes && (!gpuslot::parse_sizes(*s->sizes, 100, &v, &err, true)))
		return usage_error("--sizes '" + o.sizes + "': " + err);
	if (s->sizes && v.size() != *k)
		return usage_error("--sizes '" + o.sizes + "' gives " + std::to_string(v.size()) +
				   " sizes for k = " + std::to_string(*k));
	if (s->priorities && (!gpuslot::parse_priorities(*s->priorities, &v, &err) || v.size() != *k))
		return usage_error("--priorities '" + o.priorities + "': " +
				   (err.empty() ? "give one per slot, " + std::to_string(*k) : err));
	return 0;
}

// Lint findings about a plan's priorities, as notes.
void priority_notes(const std::vector<gpuslot_partition> &parts,
		    const std::vector<unsigned int> &prios, const gpuslot::PriorityLintGpu &gpu,
		    std::vector<std::string> *notes)
{
	for (const auto &f : gpuslot::lint_priorities(parts, prios, gpu))
		notes->push_back(f.text());
}

int plan_nvidia(const Options &o)
{
	gpuslot::GpuSettings settings;
	unsigned int k = 0;
	if (int rc = plan_settings(o, &settings, &k))
		return rc;
	auto topo = gpuslot::read_nv_topology();
	if (!topo.error.empty())
		return fail(topo.error);
	nlohmann::json gpus = nlohmann::json::array();
	std::string text;
	bool failed = false;
	for (const auto &gpu : topo.gpus) {
		gpuslot::LayoutSpec spec;
		std::string err;
		if (!gpuslot::layout_spec(settings, k, gpu.sm_count, true, &spec, &err))
			return usage_error(err);
		auto p = gpuslot::plan_nv_slots(gpu, spec);
		failed |= !p.error.empty();
		nlohmann::json slots = nlohmann::json::array();
		const unsigned int task_slots = gpuslot::nv_task_slots(gpu.cc_major, gpu.cc_minor);
		text += "CUDA device " + std::to_string(gpu.ordinal) + ": " + gpu.name + ", " +
			std::to_string(gpu.sm_count) + " SMs, co-scheduled in groups of " +
			std::to_string(gpu.coscheduled_alignment) + " (smallest partition " +
			std::to_string(gpu.min_partition_sms) + ")" +
			(task_slots ? ", " + std::to_string(task_slots) + " task slots (compute " +
					      "capability " + std::to_string(gpu.cc_major) + "." +
					      std::to_string(gpu.cc_minor) + ")"
				    : "") +
			"\n  the driver's splits: " + gpuslot::nv_splits_text(gpu.splits) + "\n";
		if (!p.error.empty()) {
			text += "  cannot plan: " + p.error + "\n";
		} else {
			text += "  split: " + std::to_string(p.groups) + " groups of " +
				std::to_string(p.group_sms) + " co-scheduled SMs\n";
			std::vector<gpuslot_partition> parts;
			for (size_t j = 0; j < p.slot_groups.size(); j++) {
				gpuslot_partition part{};
				for (unsigned int g : p.slot_groups[j])
					part.units[g / 64] |= 1ULL << (g % 64);
				parts.push_back(part);
				text += "  slot " + std::to_string(j) + ": " +
					(p.whole[j] ? "whole GPU (" + std::to_string(p.slot_sms[j]) +
							      " SMs)"
						    : std::to_string(p.slot_sms[j]) + " SMs, groups " +
							      gpuslot::sizes_text(p.slot_groups[j]) +
							      ", units " + gpuslot::partition_text(part)) +
					"; priority " + std::to_string(p.priorities[j]) + "\n";
				slots.push_back({{"slot", j},
						 {"whole", bool(p.whole[j])},
						 {"priority", p.priorities[j]},
						 {"sms", p.slot_sms[j]},
						 {"groups", p.slot_groups[j]},
						 {"units", gpuslot::partition_text(part)}});
			}
			priority_notes(parts, p.priorities,
				       {GPUSLOT_UNIT_NV_SM_GROUP, task_slots,
					"compute capability " + std::to_string(gpu.cc_major) + "." +
						std::to_string(gpu.cc_minor),
					false},
				       &p.notes);
		}
		for (const auto &n : p.notes)
			text += "  note: " + n + "\n";
		nlohmann::json splits = nlohmann::json::array();
		for (const auto &sp : gpu.splits)
			splits.push_back({{"group_sms", sp.group_sms}, {"groups", sp.groups}});
		nlohmann::json g = {{"ordinal", gpu.ordinal},
				    {"name", gpu.name},
				    {"sms", gpu.sm_count},
				    {"coscheduled_sms", gpu.coscheduled_alignment},
				    {"task_slots", task_slots},
				    {"splits", splits},
				    {"unit_kind", "nv-sm-group"},
				    {"unit_size", p.group_sms},
				    {"nr_units", p.groups},
				    {"partitions", slots},
				    {"notes", p.notes}};
		if (!p.error.empty())
			g["error"] = p.error;
		gpus.push_back(g);
	}
	std::fputs(o.json ? (nlohmann::json{{"gpus", gpus}}.dump(2) + "\n").c_str() : text.c_str(),
		   stdout);
	return failed ? 1 : 0;
}

int plan(const Options &o)
{
	if (!o.args.empty())
		return usage_error("unexpected argument '" + o.args[0] + "'");
	if (o.nvidia)
		return plan_nvidia(o);
	gpuslot::GpuSettings settings;
	unsigned int k = 0;
	if (int rc = plan_settings(o, &settings, &k))
		return rc;
	auto topo = gpuslot::read_topology(o.topology);
	if (!topo.error.empty())
		return fail(topo.error);
	std::vector<gpuslot::GpuPlan> plans;
	// A node that cannot be read is skipped, as gpuslotd skips it.
	bool failed = !topo.unreadable.empty();
	for (const auto &u : topo.unreadable)
		std::fprintf(stderr, "gpuslotctl: KFD node %u cannot be read, skipped: %s\n",
			     u.node_id, u.error.c_str());
	for (const auto &gpu : topo.gpus) {
		auto walk = walk_for(o, gpu);
		gpuslot::GpuPlan p{gpu, gpuslot::uniform_shape(gpu), walk.algorithm, {}};
		gpuslot::LayoutSpec spec;
		std::string err;
		if (!gpuslot::layout_spec(settings, k, gpu.active_cus(), false, &spec, &err))
			return usage_error(err);
		p.plan = gpuslot::plan_slots(p.shape, walk.algorithm, spec);
		p.plan.notes.insert(p.plan.notes.begin(), walk.notes.begin(),
				    walk.notes.end());
		p.plan.notes.insert(p.plan.notes.begin(), "mask walk " + walk.why);
		// protect's own notes say what its overlap does on AMD.
		if (p.plan.error.empty() && !o.protect) {
			std::vector<gpuslot_partition> parts;
			std::vector<unsigned int> prios;
			for (const auto &part : p.plan.partitions) {
				parts.push_back(part.whole ? gpuslot_partition{}
							   : gpuslot::partition_from_mask(part.mask));
				prios.push_back(part.priority);
			}
			// The HIP note is the planner's already.
			for (const auto &f : gpuslot::lint_priorities(
				     parts, prios, {GPUSLOT_UNIT_AMD_CU, 0, gpu.gfx.name(), true}))
				if (f.slot >= 0)
					p.plan.notes.push_back(f.text());
		}
		failed |= !p.plan.error.empty();
		plans.push_back(std::move(p));
	}
	std::fputs((o.json ? gpuslot::plan_json(plans) : gpuslot::plan_text(plans)).c_str(),
		   stdout);
	return failed ? 1 : 0;
}

// For each domain up to the highest there (at least @at_least), the index
// in @topo.gpus of its GPU, -1 for none: mapped as gpuslotd maps them
// (gpu_domains(): the PCI address each domain records, else the GPU's place
// among the KFD GPU nodes, unreadable ones counted), so that a GPU that
// cannot be read never makes another GPU's masks be shown or checked
// against the wrong shape.
std::vector<int> gpus_of_domains(const gpuslot::DomainAttrs &attrs,
				 const gpuslot::TopologyResult &topo, unsigned int at_least)
{
	const auto domains = attrs.domains();
	unsigned int nr = at_least;
	for (unsigned int d : domains)
		nr = std::max(nr, d + 1);
	std::vector<std::string> recorded(nr);
	for (unsigned int d : domains) {
		std::string text;
		if (!attrs.read(d, "pci_bus_id", &text))
			recorded[d] = text.substr(0, text.find_first_of(" \t\n"));
	}
	std::vector<int> gpu_of(nr, -1);
	const std::vector<int> domain_of = gpuslot::gpu_domains(topo, recorded);
	for (size_t g = 0; g < domain_of.size(); g++)
		if (domain_of[g] >= 0)
			gpu_of[size_t(domain_of[g])] = int(g);
	return gpu_of;
}

gpuslot::DomainAttrs domain_attrs(const Options &o);

// The KFD GPU of domain @domain, if the topology is there.
bool gpu_of_domain(const Options &o, unsigned int domain, gpuslot::GpuNode *gpu,
		   std::string *error)
{
	auto topo = gpuslot::read_topology(o.topology);
	if (!topo.error.empty()) {
		*error = topo.error;
		return false;
	}
	const int g = gpus_of_domains(domain_attrs(o), topo, domain + 1)[domain];
	if (g < 0) {
		*error = o.topology + ": no readable GPU for domain " + std::to_string(domain) +
			 " (" + std::to_string(topo.gpus.size()) + " readable, " +
			 std::to_string(topo.unreadable.size()) + " unreadable)";
		return false;
	}
	*gpu = topo.gpus[size_t(g)];
	return true;
}

// Where the domains' attributes are: the module's sysfs, or gpuslotd's
// sockets (auto: the sysfs when the module made it, else the sockets when
// gpuslotd serves any).
gpuslot::DomainAttrs domain_attrs(const Options &o)
{
	auto module = gpuslot::DomainAttrs::module(o.sysfs, o.debugfs);
	auto socket = gpuslot::DomainAttrs::socket(o.socket_dir);
	if (o.transport == "auto") {
		std::error_code ec;
		return std::filesystem::exists(o.sysfs, ec) || socket.domains().empty() ? module
											 : socket;
	}
	return o.transport == "socket" ? socket : module;
}

// "the module's sysfs /sys/class/gpuslot" or "gpuslotd's sockets in ...";
// @tables: the debug/ tables were read too.
std::string transport_name(const gpuslot::DomainAttrs &a, bool tables = false)
{
	if (a.on_socket())
		return "gpuslotd's sockets in " + a.where().string() +
		       (tables ? " (with its debug/ tables)" : "");
	return "the module's sysfs " + a.where().string() +
	       (tables ? " and debugfs " + a.debugfs().string() : "");
}

int status(const Options &o)
{
	if (!o.args.empty())
		return usage_error("unexpected argument '" + o.args[0] + "'");
	const auto attrs = domain_attrs(o);
	auto domains = attrs.domains();
	if (domains.empty())
		return fail(attrs.where().string() +
			    (attrs.on_socket() ? ": no gpuslot domains (does gpuslotd serve the socket "
						 "transport?)"
					       : ": no gpuslot domains (is the module loaded, or does "
						 "gpuslotd serve the socket transport?)"));
	auto topo = gpuslot::read_topology(o.topology);
	std::vector<gpuslot::AuditEntry> over;
	bool audited = false;
	if (std::ifstream in(o.state_dir + "/audit.json"); in) {
		std::ostringstream text;
		text << in.rdbuf();
		audited = gpuslot::parse_audit_json(text.str(), &over);
	}
	std::vector<int> gpu_of;
	if (topo.error.empty())
		gpu_of = gpus_of_domains(attrs, topo, 0);
	std::vector<gpuslot::StatusGpu> gpus;
	for (unsigned int d : domains) {
		if (o.domain >= 0 && d != unsigned(o.domain))
			continue;
		gpuslot::StatusGpu g;
		std::string err;
		if (!gpuslot::read_domain_state(attrs, d, &g.state, &err))
			return fail(err);
		if (d < gpu_of.size() && gpu_of[d] >= 0) {
			g.has_gpu = true;
			g.gpu = topo.gpus[size_t(gpu_of[d])];
			std::string note;
			g.shape = gpuslot::gpu_shape(g.gpu, o.dri, &note);
			g.algorithm = walk_for(o, g.gpu).algorithm;
		}
		g.audited = audited;
		for (const auto &e : over)
			if (e.domain == d)
				g.over.push_back(e);
		gpus.push_back(std::move(g));
	}
	if (gpus.empty())
		return fail("no domain " + std::to_string(o.domain) + " in " + transport_name(attrs));
	std::fputs((o.json ? gpuslot::status_json(gpus) : gpuslot::status_text(gpus)).c_str(),
		   stdout);
	bool tables = true;
	for (const auto &g : gpus)
		tables &= g.state.tables;
	if (!o.json)
		std::printf("(read from %s)\n", transport_name(attrs, tables).c_str());
	return 0;
}

// A slot and its CU mask; slots that are the whole GPU are left out.
using SlotMasks = std::vector<std::pair<int, std::vector<uint32_t>>>;

// Lint @masks (and their slots' @priorities, one per slot), naming findings
// by their slots.
std::vector<gpuslot::LintFinding> lint_slots(const gpuslot::CuShape &shape,
					     gpuslot::MaskAlgorithm algorithm,
					     const SlotMasks &masks,
					     const std::vector<unsigned int> &priorities)
{
	std::vector<std::vector<uint32_t>> plain;
	std::vector<unsigned int> prios;
	for (const auto &m : masks) {
		plain.push_back(m.second);
		prios.push_back(size_t(m.first) < priorities.size() ? priorities[m.first] : 0);
	}
	auto findings = gpuslot::lint_masks(shape, algorithm, plain, prios);
	for (auto &f : findings) {
		f.slot = masks[f.slot].first;
		if (f.other_slot >= 0)
			f.other_slot = masks[f.other_slot].first;
	}
	return findings;
}

// Parse one mask argument per slot: hex, or "all" for the whole GPU.
bool parse_mask_args(const std::vector<std::string> &args, SlotMasks *out,
		     std::string *error)
{
	for (size_t slot = 0; slot < args.size(); slot++) {
		if (args[slot] == "all")
			continue;
		std::vector<uint32_t> m;
		if (!gpuslot::parse_mask(args[slot], &m)) {
			*error = "'" + args[slot] + "' is not a mask: expected hex "
				 "such as 0x888888888888888 (at most 1024 bits) or 'all'";
			return false;
		}
		out->push_back({int(slot), m});
	}
	return true;
}

// Every slot's partition from @masks (slots not in it: the whole GPU).
std::vector<gpuslot_partition> partitions_of(const SlotMasks &masks, size_t k)
{
	std::vector<gpuslot_partition> parts(k);
	for (const auto &[slot, mask] : masks)
		parts[size_t(slot)] = gpuslot::partition_from_mask(mask);
	return parts;
}

// The --priorities given, or @current, for @k slots.
bool priorities_for(const Options &o, size_t k, const std::vector<unsigned int> &current,
		    std::vector<unsigned int> *out, std::string *error)
{
	if (o.priorities.empty()) {
		*out = current;
		out->resize(k, 0);
		return true;
	}
	if (!gpuslot::parse_priorities(o.priorities, out, error))
		return false;
	if (out->size() != k) {
		*error = "--priorities '" + o.priorities + "' gives " + std::to_string(out->size()) +
			 " priorities for " + std::to_string(k) + " slots: give one per slot";
		return false;
	}
	return true;
}

void print_findings(const Options &o, const std::vector<gpuslot::LintFinding> &f)
{
	if (o.json) {
		nlohmann::json arr = nlohmann::json::array();
		for (const auto &x : f) {
			nlohmann::json j = {
				{"severity", x.severity == gpuslot::LintFinding::kError ? "error" : "warning"},
				{"slot", x.slot},
				{"problem", x.problem},
				{"consequence", x.consequence}};
			if (x.other_slot >= 0)
				j["other_slot"] = x.other_slot;
			arr.push_back(j);
		}
		std::fputs((nlohmann::json{{"findings", arr}}.dump(2) + "\n").c_str(), stdout);
		return;
	}
	for (const auto &x : f)
		std::printf("%s\n", x.text().c_str());
}

bool has_error(const std::vector<gpuslot::LintFinding> &f)
{
	for (const auto &x : f)
		if (x.severity == gpuslot::LintFinding::kError)
			return true;
	return false;
}

// How priorities are linted on a domain of @unit_kind: NVIDIA's task slots
// where the driver answers.
gpuslot::PriorityLintGpu priority_gpu(uint32_t unit_kind)
{
	gpuslot::PriorityLintGpu g;
	g.unit_kind = unit_kind;
	g.confined_overlap_linted = unit_kind == GPUSLOT_UNIT_AMD_CU;
	if (unit_kind == GPUSLOT_UNIT_NV_SM_GROUP) {
		auto topo = gpuslot::read_nv_topology();
		if (topo.error.empty() && !topo.gpus.empty()) {
			g.task_slots = gpuslot::nv_task_slots(topo.gpus[0].cc_major,
							      topo.gpus[0].cc_minor);
			g.what = "compute capability " + std::to_string(topo.gpus[0].cc_major) +
				 "." + std::to_string(topo.gpus[0].cc_minor);
		}
	}
	return g;
}

int lint(const Options &o)
{
	const unsigned int domain = o.domain < 0 ? 0 : unsigned(o.domain);
	std::string err;
	SlotMasks masks;
	size_t k = o.args.size();
	std::vector<unsigned int> current;
	uint32_t unit_kind = GPUSLOT_UNIT_AMD_CU;
	if (!o.args.empty()) {
		if (!parse_mask_args(o.args, &masks, &err))
			return usage_error(err);
	} else {
		gpuslot::DomainState s;
		if (!gpuslot::read_domain_state(domain_attrs(o), domain, &s, &err))
			return fail(err);
		k = s.partitions.size();
		current = s.priorities;
		unit_kind = s.unit_kind;
		for (size_t slot = 0; slot < s.partitions.size(); slot++)
			if (!gpuslot::partition_is_whole(s.partitions[slot]))
				masks.push_back({int(slot), gpuslot::mask_from_partition(
								    s.partitions[slot], s.nr_units)});
	}
	std::vector<unsigned int> prios;
	if (!priorities_for(o, k, current, &prios, &err))
		return usage_error(err);
	std::vector<gpuslot::LintFinding> findings;
	std::string what;
	if (unit_kind == GPUSLOT_UNIT_AMD_CU) {
		gpuslot::GpuNode gpu;
		if (!gpu_of_domain(o, domain, &gpu, &err))
			return fail(err);
		std::string note;
		auto shape = gpuslot::gpu_shape(gpu, o.dri, &note);
		findings = lint_slots(shape, walk_for(o, gpu).algorithm, masks, prios);
		what = gpu.gfx.name() + " (" + std::to_string(gpu.active_cus()) + " CUs)";
	} else {
		what = std::string(gpuslot::unit_kind_name(unit_kind)) + " units";
	}
	auto more = gpuslot::lint_priorities(partitions_of(masks, k), prios, priority_gpu(unit_kind));
	findings.insert(findings.end(), more.begin(), more.end());
	print_findings(o, findings);
	if (!o.json && findings.empty())
		std::printf("%zu slot(s), %zu mask(s) on %s: no problem found\n", k, masks.size(),
			    what.c_str());
	return has_error(findings) ? 1 : 0;
}

int set_k(const Options &o)
{
	unsigned long k;
	if (o.args.size() != 1 ||
	    !whole_number(o.args[0].c_str(), 1, GPUSLOT_MAX_SLOTS, &k))
		return usage_error("set-k takes one k, a whole number from 1 to 64");
	const unsigned int domain = o.domain < 0 ? 0 : unsigned(o.domain);
	const auto attrs = domain_attrs(o);
	if (int e = attrs.write(domain, "k", std::to_string(k)))
		return fail(attrs.name(domain, "k") + ": " + strerror(e) +
			    (e == EACCES || e == EPERM ? " (root only)" : ""));
	std::printf("gpu%u: k %lu through %s; every slot runs on the whole GPU at priority 0 "
		    "until gpuslotd re-plans the partitions\n", domain, k,
		    transport_name(attrs).c_str());
	return 0;
}

// set-partitions: the staged slot<i>/units and slot<i>/priority files, then
// commit with the generation they were read at, so that the layout changes
// once (one generation) and never over someone else's newer one: the same
// on the module and on gpuslotd's sockets.
int set_partitions(const Options &o)
{
	const unsigned int domain = o.domain < 0 ? 0 : unsigned(o.domain);
	const std::string name = "gpu" + std::to_string(domain);
	gpuslot::DomainState s;
	std::string err;
	const auto attrs = domain_attrs(o);
	if (!gpuslot::read_domain_state(attrs, domain, &s, &err))
		return fail(err);
	if (s.unit_kind == GPUSLOT_UNIT_NONE)
		return fail(name + " has no unit kind yet: gpuslotd sets it with its "
			    "first layout, so start gpuslotd first");
	if (o.args.size() != s.k)
		return usage_error(name + " has k " + std::to_string(s.k) + ": give " +
				   std::to_string(s.k) +
				   " masks, one per slot in order ('all' for the whole GPU)");
	SlotMasks masks;
	if (!parse_mask_args(o.args, &masks, &err))
		return usage_error(err);
	std::vector<unsigned int> prios;
	if (!priorities_for(o, s.k, s.priorities, &prios, &err))
		return usage_error(err);

	gpuslot::GpuNode gpu;
	std::vector<gpuslot::LintFinding> findings;
	if (s.unit_kind == GPUSLOT_UNIT_AMD_CU && gpu_of_domain(o, domain, &gpu, &err)) {
		std::string note;
		findings = lint_slots(gpuslot::gpu_shape(gpu, o.dri, &note),
				      walk_for(o, gpu).algorithm, masks, prios);
	} else if (s.unit_kind == GPUSLOT_UNIT_AMD_CU) {
		std::fprintf(stderr, "gpuslotctl: masks not linted: %s\n", err.c_str());
	}
	auto more = gpuslot::lint_priorities(partitions_of(masks, s.k), prios,
					     priority_gpu(s.unit_kind));
	findings.insert(findings.end(), more.begin(), more.end());
	print_findings(o, findings);
	if (has_error(findings) && !o.force)
		return fail("refusing to write partitions lint calls wrong "
			    "(--force writes them anyway)");

	const auto parts = partitions_of(masks, s.k);
	const auto why = [&](const std::string &attr, int e) {
		return fail(attrs.name(domain, attr) + ": " + strerror(e) +
			    (e == EINVAL ? " (each slot's units must lie within the GPU's " +
						   std::to_string(s.nr_units) +
						   " units, its priority 0 to 15)"
			     : e == EACCES || e == EPERM ? " (root only)"
			     : e == ENXIO ? " (k changed meanwhile; run again)"
					  : ""));
	};
	for (unsigned int slot = 0; slot < s.k; slot++) {
		const std::string dir = "slot" + std::to_string(slot) + "/";
		if (int e = attrs.write(domain, dir + "units",
					gpuslot::partition_bitmap_text(parts[slot], s.nr_units)))
			return why(dir + "units", e);
		if (int e = attrs.write(domain, dir + "priority", std::to_string(prios[slot])))
			return why(dir + "priority", e);
	}
	if (int e = attrs.write(domain, "commit", std::to_string(s.generation)))
		return fail(attrs.name(domain, "commit") + ": " + strerror(e) +
			    (e == EINVAL ? " (partitions must not overlap at the same priority, and "
					   "none may be empty" +
					   std::string(attrs.on_socket()
							       ? ")"
							       : "; the kernel log names the rule)")
			     : e == EACCES || e == EPERM ? " (root only)"
			     : e == EAGAIN ? " (the layout changed since generation " +
						     std::to_string(s.generation) +
						     ", gpuslotd or another admin: nothing was "
						     "changed; run again)"
					   : ""));
	gpuslot::DomainState after;
	if (gpuslot::read_domain_state(attrs, domain, &after, &err))
		std::printf("%s: partitions set through %s, generation %llu\n", name.c_str(),
			    transport_name(attrs).c_str(), (unsigned long long)after.generation);
	return 0;
}

// Write @text to @path through a temporary file beside it and rename(2),
// so that an engine reading the CDI directory never sees half a spec.
int write_atomically(const std::string &path, const std::string &text)
{
	const std::filesystem::path p = path;
	const std::filesystem::path tmp =
		p.parent_path() / ("." + p.filename().string() + "." + std::to_string(getpid()));
	int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(tmp.string() + ": " + strerror(errno));
	fchmod(fd, 0644); // whatever the umask: engines read it as any user
	bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size()) && !fsync(fd);
	int err = errno;
	ok = !::close(fd) && ok;
	if (!ok || ::rename(tmp.c_str(), p.c_str())) {
		err = ok ? errno : err;
		::unlink(tmp.c_str());
		return fail(path + ": " + strerror(err));
	}
	return 0;
}

int cdi(const Options &o)
{
	if (o.args.size() != 1 || o.args[0] != "generate")
		return usage_error("cdi takes one subcommand: generate [--output FILE]");
	const auto attrs = domain_attrs(o);
	gpuslot::CdiOptions c;
	c.socket = attrs.on_socket();
	c.socket_dir = o.socket_dir;
	c.domains = attrs.domains();
	if (c.domains.empty())
		return fail(attrs.where().string() +
			    ": no gpuslot domains (load the module, or start gpuslotd on the "
			    "socket transport, before generating the CDI spec)");
	if (c.socket && !std::filesystem::path(o.socket_dir).is_absolute())
		return usage_error("--socket-dir '" + o.socket_dir +
				   "': the CDI spec needs an absolute path");
	const std::string spec = gpuslot::cdi_spec_json(c);
	if (o.output.empty()) {
		std::fputs(spec.c_str(), stdout);
		return 0;
	}
	if (int rc = write_atomically(o.output, spec))
		return rc;
	std::fprintf(stderr, "gpuslotctl: %s: CDI spec of %s, cdiVersion %s, devices %s for %s\n",
		     o.output.c_str(), gpuslot::kCdiKind, gpuslot::kCdiVersion,
		     [&] {
			     std::string names;
			     for (unsigned int d : c.domains)
				     names += std::to_string(d) + ", ";
			     return names + "all";
		     }().c_str(),
		     transport_name(attrs).c_str());
	return 0;
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
	Options o;
	if (int rc = parse_options(argc, argv, &o))
		return rc;
	if (cmd == "plan")
		return plan(o);
	if (cmd == "status")
		return status(o);
	if (cmd == "lint")
		return lint(o);
	if (cmd == "set-k")
		return set_k(o);
	if (cmd == "set-partitions")
		return set_partitions(o);
	if (cmd == "cdi")
		return cdi(o);
	return usage_error("unknown command '" + cmd +
			   "'; known: status, plan, lint, set-k, set-partitions, cdi");
}
