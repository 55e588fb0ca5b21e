// SPDX-License-Identifier: GPL-2.0
// gpuslotd: keeps the gpuslot module's layouts planned. See daemon.hpp.
#include <getopt.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "gpuslotd/daemon.hpp"
#if GPUSLOT_HAVE_METRICS
#include "gpuslotd/metrics.hpp"
#endif
#include "amd/plan_report.hpp"
#include "plan/slot_layout.hpp"
#include "serve.hpp"

#include <sys/stat.h>

namespace {

const char kUsage[] =
	"usage: gpuslotd [OPTIONS]\n"
	"\n"
	"Plans compute-unit partitions for every GPU in KFD topology, writes them\n"
	"into the gpuslot module (k, partitions, hqd_limit = num_cp_queues), and\n"
	"keeps them: it re-plans when an admin writes /sys/class/gpuslot/gpu<N>/k,\n"
	"reloads its configuration on SIGHUP, audits the compute queues processes\n"
	"really have against what they reserved, and stops on SIGTERM. It runs in\n"
	"the foreground and speaks sd_notify (READY=1, STATUS=, WATCHDOG=1) when\n"
	"systemd runs it as Type=notify.\n"
	"\n"
	"  --config PATH     configuration (default /etc/gpuslot/gpuslotd.conf;\n"
	"                    a missing file means the defaults; at most 1 MiB)\n"
	"  --check-config    read the configuration (which must exist) and the\n"
	"                    topology, print the plans, change nothing, and exit\n"
	"  --topology PATH   KFD topology root or node directory\n"
	"                    (default /sys/class/kfd/kfd/topology)\n"
	"  --sysfs-root PATH the module's sysfs (default /sys/class/gpuslot)\n"
	"  --debugfs-root PATH the module's tables, for the queue audit and the\n"
	"                    metrics (default /sys/kernel/debug/gpuslot)\n"
	"  --device PATH     the module's device (default /dev/gpuslot)\n"
	"  --kfd-proc PATH   KFD's per-process queues (default\n"
	"                    /sys/class/kfd/kfd/proc)\n"
	"  --dri PATH        where render nodes are, for libdrm's CU bitmap\n"
	"                    (default /dev/dri; empty: assume uniform harvesting)\n"
	"  --state-dir PATH  audit.json, and gpuslotd.lock, which keeps a second\n"
	"                    gpuslotd from starting (default /run/gpuslot)\n"
	"  --transport T     device: the module's /dev/gpuslot; socket: serve the\n"
	"                    lock itself on a Unix socket per GPU, where the module\n"
	"                    cannot load (holders boosted with CAP_SYS_NICE); auto\n"
	"                    (default): device if --device exists or the module\n"
	"                    is loaded, else socket\n"
	"  --socket-dir PATH the socket transport's gpu<N>.sock (default\n"
	"                    /run/gpuslot); clients find it there, or where\n"
	"                    GPUSLOT_SOCKET_DIR says\n"
	"  --socket-group G  the sockets' group, mode 0660 (default gpuslot)\n"
	"  --restore-boosts  give back the SCHED_FIFO boosts a socket-mode gpuslotd\n"
	"                    that died left on its holders (recorded in\n"
	"                    --socket-dir's gpuslotd.state), and exit; the unit's\n"
	"                    ExecStopPost. A starting gpuslotd does it too.\n"
	"                    A state file not gpuslotd's own (owner, mode, type)\n"
	"                    or corrupt gives nothing back and is moved aside\n"
	"  --kernel RELEASE  the kernel whose CU-mask walk applies (default: this\n"
	"                    one's, uname -r, or amdgpu-dkms's where it is loaded;\n"
	"                    mask_algorithm in the configuration overrides both)\n"
	"  --help\n"
	"\n"
	"Prometheus metrics (gpuslotd.conf's metrics_listen, metrics_textfile): "
#if GPUSLOT_HAVE_METRICS
	"built in.\n"
#else
	"not built in\n"
	"(built without prometheus-cpp); gpuslotd says so at start where they are\n"
	"configured, and runs without them.\n"
#endif
	"\n"
	"Exit status: 0 stopped by SIGTERM/SIGINT (or --check-config passed),\n"
	"1 could not start (the message says why), 2 bad usage, 69 nothing to\n"
	"manage here: no GPU, or no gpuslot module (systemd does not restart it).\n";

// Under systemd, stderr goes to the journal: "<N>" sets the priority.
void log_line(int priority, const std::string &msg)
{
	static const bool journal = getenv("JOURNAL_STREAM") != nullptr;
	if (journal)
		fprintf(stderr, "<%d>%s\n", priority, msg.c_str());
	else
		fprintf(stderr, "gpuslotd: %s%s\n",
			priority <= LOG_ERR	  ? "error: "
			: priority == LOG_WARNING ? "warning: "
						  : "",
			msg.c_str());
}

int usage_error(const std::string &what)
{
	fprintf(stderr, "gpuslotd: %s\n\n%s", what.c_str(), kUsage);
	return 2;
}

int check_config(const gpuslot::DaemonOptions &o)
{
	gpuslot::Config config;
	std::string error;
	// Checking a file that is not there is a mistake, not the defaults.
	if (!gpuslot::load_config(o.config, &config, &error, true)) {
		log_line(LOG_ERR, error);
		return 1;
	}
	auto topo = gpuslot::read_topology(o.topology);
	if (!topo.error.empty()) {
		log_line(LOG_ERR, topo.error);
		return 1;
	}
	// gpuslotd skips a GPU it cannot read; a check says so.
	for (const auto &u : topo.unreadable)
		log_line(LOG_ERR, "KFD node " + std::to_string(u.node_id) +
					  " cannot be read (gpuslotd skips it): " + u.error);
	gpuslot::MaskAlgorithm unused;
	const std::string kernel =
		o.kernel.empty() ? gpuslot::running_kernel_release() : o.kernel;
	if (!o.kernel.empty() && !gpuslot::algorithm_for_kernel(o.kernel, &unused))
		return usage_error("--kernel '" + o.kernel + "' is not a release");
	std::vector<gpuslot::GpuPlan> plans;
	int status = topo.unreadable.empty() ? 0 : 1;
	// The domains gpuslotd would give the GPUs with no module loaded yet:
	// their places among the GPU nodes, unreadable ones counted.
	const std::vector<int> domain_of = gpuslot::gpu_domains(
		topo, std::vector<std::string>(topo.gpus.size() + topo.unreadable.size()));
	for (size_t g = 0; g < topo.gpus.size(); g++) {
		const auto &gpu = topo.gpus[g];
		const unsigned int i = unsigned(domain_of[g] >= 0 ? domain_of[g] : int(g));
		gpuslot::GpuSettings s = config.for_gpu(i);
		std::string note;
		auto walk = gpuslot::choose_algorithm(
			gpu.gfx, kernel,
			o.kernel.empty() ? gpuslot::amdgpu_module_version() : "",
			s.mask_algorithm);
		gpuslot::GpuPlan p{gpu, gpuslot::gpu_shape(gpu, o.dri, &note),
				   walk.algorithm, {}};
		// Without k or sizes the module's k stays; show k = 1.
		const unsigned int k = s.k_or(1);
		gpuslot::LayoutSpec spec;
		if (!gpuslot::layout_spec(s, k, gpu.active_cus(), false, &spec, &error)) {
			log_line(LOG_ERR, "gpu" + std::to_string(i) + ": " + error);
			return 1;
		}
		p.plan = gpuslot::plan_slots(p.shape, walk.algorithm, spec);
		p.plan.notes.insert(p.plan.notes.begin(), walk.notes.begin(),
				    walk.notes.end());
		p.plan.notes.insert(p.plan.notes.begin(), "mask walk " + walk.why);
		p.plan.notes.insert(p.plan.notes.begin(), note);
		if (!p.plan.error.empty())
			status = 1;
		plans.push_back(std::move(p));
	}
	fputs(gpuslot::plan_text(plans).c_str(), stdout);
	if (!status)
		printf("%s: valid\n", o.config.c_str());
	return status;
}

} // namespace

int main(int argc, char **argv)
{
	gpuslot::DaemonOptions o;
	gpuslot::SocketServeOptions so;
	std::string transport = "auto";
	bool check = false, restore = false;
	static const option opts[] = {
		{"config", required_argument, nullptr, 'c'},
		{"check-config", no_argument, nullptr, 'C'},
		{"topology", required_argument, nullptr, 't'},
		{"sysfs-root", required_argument, nullptr, 's'},
		{"debugfs-root", required_argument, nullptr, 'g'},
		{"device", required_argument, nullptr, 'd'},
		{"kfd-proc", required_argument, nullptr, 'p'},
		{"dri", required_argument, nullptr, 'r'},
		{"state-dir", required_argument, nullptr, 'S'},
		{"kernel", required_argument, nullptr, 'k'},
		{"transport", required_argument, nullptr, 'T'},
		{"socket-dir", required_argument, nullptr, 'D'},
		{"socket-group", required_argument, nullptr, 'G'},
		{"restore-boosts", no_argument, nullptr, 'R'},
		{"help", no_argument, nullptr, 'h'},
		{nullptr, 0, nullptr, 0},
	};
	for (int c; (c = getopt_long(argc, argv, "", opts, nullptr)) != -1;) {
		switch (c) {
		case 'c': o.config = optarg; break;
		case 'C': check = true; break;
		case 't': o.topology = optarg; break;
		case 's': o.sysfs = optarg; break;
		case 'g': o.debugfs = optarg; break;
		case 'd': o.device = optarg; break;
		case 'p': o.kfd_proc = optarg; break;
		case 'r': o.dri = optarg; break;
		case 'S': o.state_dir = optarg; break;
		case 'k': o.kernel = optarg; break;
		case 'T': transport = optarg; break;
		case 'D': so.socket_dir = optarg; break;
		case 'G': so.group = optarg; break;
		case 'R': restore = true; break;
		case 'h': fputs(kUsage, stdout); return 0;
		default: return usage_error("unknown option");
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '" + std::string(argv[optind]) + "'");
	if (transport != "auto" && transport != "device" && transport != "socket")
		return usage_error("--transport '" + transport + "': use device, socket or auto");
	if (restore)
		return gpuslot::restore_socket_boosts(so, log_line);
	if (check) {
		if (o.kernel.empty())
			o.kernel = gpuslot::running_kernel_release();
		return check_config(o);
	}
	// auto: the module when it is loaded, even if udev has not made its
	// device node yet; the socket only where there is no module at all.
	struct stat st;
	const bool module = stat(o.device.c_str(), &st) == 0 ||
			    stat("/sys/module/gpuslot", &st) == 0;
	const bool socket = transport == "socket" || (transport == "auto" && !module);
	// Prometheus metrics, where the config asks for them: read through
	// the attributes of either transport. Declared before the transport
	// so that it ends after it (a scrape waiting on the socket transport
	// gets its answer, or the closed connection).
#if GPUSLOT_HAVE_METRICS
	std::unique_ptr<gpuslot::MetricsExporter> metrics;
#endif
	gpuslot::Config config;
	std::string config_error; // the transport reports it
	if (gpuslot::load_config(o.config, &config, &config_error) && config.metrics.enabled()) {
#if !GPUSLOT_HAVE_METRICS
		log_line(LOG_WARNING, "metrics: this gpuslotd was built without prometheus-cpp: no "
				      "metrics (" + o.config.string() + " sets metrics_listen or "
				      "metrics_textfile)");
#else
		metrics = std::make_unique<gpuslot::MetricsExporter>(
			config.metrics,
			socket ? gpuslot::DomainAttrs::socket(so.socket_dir)
			       : gpuslot::DomainAttrs::module(o.sysfs, o.debugfs),
			log_line);
		std::string error;
		if (!metrics->start(&error)) {
			log_line(LOG_ERR, error);
			return 1;
		}
#endif
	}
	if (socket)
		return gpuslot::serve_socket_transport(o, so, log_line);

	gpuslot::Daemon daemon(o, log_line);
	std::string error;
	if (!daemon.start(&error)) {
		log_line(LOG_ERR, error);
		sd_notifyf(0, "STATUS=failed: %s", error.c_str());
		// Nothing to manage here: restarting would only fail again.
		return daemon.unavailable() ? gpuslot::Daemon::kExitUnavailable : 1;
	}
	return daemon.run();
}
