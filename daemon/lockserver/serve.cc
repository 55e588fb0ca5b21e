// SPDX-License-Identifier: GPL-2.0
#include "serve.hpp"

#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unistd.h>
#include <memory>

#include "config/config.hpp"
#include "amd/cu_mask.hpp"
#include "lock_server.hpp"
#include "nvidia/nv_topology.hpp"
#include "amd/topology.hpp"

namespace gpuslot {
namespace {

LockServer *running;

void on_signal(int)
{
	if (running)
		running->stop();
}

} // namespace

int restore_socket_boosts(const SocketServeOptions &options, const Daemon::Log &log)
{
	const auto state = options.socket_dir / "gpuslotd.state";
	if (access(state.c_str(), F_OK))
		return 0; // no socket-mode gpuslotd ran here
	std::vector<std::string> notes;
	const int err = restore_boosts(state, &notes);
	for (const auto &n : notes)
		log(err ? LOG_ERR : LOG_NOTICE, n);
	return err ? 1 : 0;
}

int serve_socket_transport(const DaemonOptions &daemon, const SocketServeOptions &options,
			   const Daemon::Log &log)
{
	Config config;
	std::string error;
	if (!load_config(daemon.config, &config, &error)) {
		log(LOG_ERR, error);
		return 1;
	}
	// The GPUs, as the device transport finds them: KFD first, else CUDA.
	auto topo = read_topology(daemon.topology);
	NvTopologyResult nv;
	if (!topo.error.empty()) {
		nv = read_nv_topology();
		if (!nv.error.empty()) {
			log(LOG_ERR, topo.error + "; and no NVIDIA GPU either (" + nv.error + ")");
			return 69;
		}
	}
	const size_t gpus = nv.gpus.empty() ? topo.gpus.size() : nv.gpus.size();

	LockServerOptions lo;
	lo.socket_dir = options.socket_dir;
	lo.nr_domains = unsigned(gpus);
	if (!options.group.empty()) {
		if (const group *g = getgrnam(options.group.c_str()))
			lo.group = g->gr_gid;
		else
			log(LOG_WARNING, "no group '" + options.group +
						 "': the sockets keep gpuslotd's group");
	}
	// Connections cost fds: take the whole hard limit (the unit sets
	// LimitNOFILE), and let the server bound them per uid and in all.
	rlimit nofile{};
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	LockServer server(lo);
	if (server.start(&error)) {
		log(LOG_ERR, error);
		return 1;
	}
	// What a gpuslotd that died (or stopped) left: boosts given back,
	// holds kept for their holders to reclaim.
	for (const auto &line : server.recovered())
		log(LOG_NOTICE, "previous gpuslotd: " + line);
	// systemd's watchdog: WATCHDOG=1 at half its interval, sent by the
	// loop itself, so a loop that stops turning is restarted.
	uint64_t watchdog_usec = 0;
	if (sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec)
		server.every(watchdog_usec * 1000 / 2, [] { sd_notify(0, "WATCHDOG=1"); });
	const std::string kernel = daemon.kernel.empty() ? running_kernel_release() : daemon.kernel;
	// GPU @i's layout for @k slots, planned as on the device, into the lock.
	auto apply = [&](size_t i, unsigned int k, unsigned int hqd, std::vector<std::string> *notes,
			 gpuslot_layout *l, std::string *why) {
		const GpuSettings s = config.for_gpu(unsigned(i));
		ModuleLayout layout;
		const bool ok = nv.gpus.empty()
					? plan_layout(topo.gpus[i], uniform_shape(topo.gpus[i]),
						      choose_algorithm(topo.gpus[i].gfx, kernel, "",
								       s.mask_algorithm)
							      .algorithm,
						      k, s, hqd, &layout, notes, why)
					: plan_nv_layout(nv.gpus[i], k, s, hqd, &layout, notes, why);
		if (!ok) {
			*why = "cannot plan k = " + std::to_string(k) + ": " + *why;
			return false;
		}
		*l = {};
		l->size = sizeof(*l);
		l->k = layout.k;
		l->unit_kind = layout.unit_kind;
		l->unit_size = layout.unit_size;
		l->nr_units = layout.nr_units;
		l->hqd_limit = layout.hqd_limit;
		l->nr_partitions = uint32_t(layout.partitions.size());
		for (unsigned int j = 0; j < layout.k && j < GPUSLOT_MAX_SLOTS; j++)
			l->priority[j] = uint8_t(layout.priority(j)); // issue 32
		if (int err = server.set_layout(unsigned(i), l, layout.partitions.data())) {
			*why = std::string("the lock refused the layout: ") + strerror(err);
			return false;
		}
		return true;
	};
	for (size_t i = 0; i < gpus; i++) {
		const GpuSettings s = config.for_gpu(unsigned(i));
		const std::string name = "gpu" + std::to_string(i);
		std::vector<std::string> notes;
		const unsigned int hqd = s.hqd_limit.value_or(nv.gpus.empty()
								  ? topo.gpus[i].num_cp_queues
								  : kDefaultHqdLimit);
		gpuslot_layout l;
		if (!apply(i, s.k_or(1), hqd, &notes, &l, &error)) {
			log(LOG_ERR, name + ": " + error);
			return 1;
		}
		// Clients find their GPU by it, as on the device.
		const std::string pci = nv.gpus.empty() ? topo.gpus[i].pci_bus_id
							: nv.gpus[i].pci_bus_id;
		if (int err = pci.empty() ? 0 : server.set_attr(unsigned(i), "pci_bus_id", pci))
			log(LOG_WARNING, name + ": cannot record pci_bus_id " + pci + ": " +
						 strerror(err));
		// The config's boost_priority, as gpuslotd writes it into the
		// module (the server then runs one above it).
		if (s.boost_priority && server.boosting()) {
			if (int err = server.set_attr(unsigned(i), "boost_priority",
						      std::to_string(*s.boost_priority))) {
				log(LOG_ERR, name + ": cannot set boost_priority " +
						     std::to_string(*s.boost_priority) + ": " +
						     strerror(err));
				return 1;
			}
		} else if (s.boost_priority && *s.boost_priority) {
			log(LOG_WARNING, name + ": boost_priority " +
						 std::to_string(*s.boost_priority) +
						 " not applied: gpuslotd lacks CAP_SYS_NICE");
		}
		if (s.max_boost_share) {
			if (int err = server.set_attr(unsigned(i), "max_boost_share",
						      std::to_string(*s.max_boost_share))) {
				log(LOG_ERR, name + ": cannot set max_boost_share " +
						     std::to_string(*s.max_boost_share) + ": " +
						     strerror(err));
				return 1;
			}
		}
		for (const auto &[knob, value] : {std::pair{"preempt_share", s.preempt_share},
						  std::pair{"preempt_window_ms", s.preempt_window_ms}}) {
			if (!value)
				continue;
			if (int err = server.set_attr(unsigned(i), knob, std::to_string(*value))) {
				log(LOG_ERR, name + ": cannot set " + knob + " " +
						     std::to_string(*value) + ": " + strerror(err));
				return 1;
			}
		}
		const unsigned int prio = s.boost_priority.value_or(GPUSLOT_DEFAULT_BOOST_PRIORITY);
		log(LOG_INFO, name + ": k " + std::to_string(l.k) + ", generation " +
				      std::to_string(l.generation) + ", served on " +
				      domain_socket(options.socket_dir, unsigned(i)).string() +
				      (!server.boosting()
					       ? " (no SCHED_FIFO boost: gpuslotd lacks CAP_SYS_NICE)"
				       : !prio ? " (boost_priority 0: no boost)"
					       : " (holders run SCHED_FIFO " + std::to_string(prio) + ")"));
		for (const auto &n : notes)
			log(LOG_INFO, name + ": note: " + n);
	}
	// An admin's k resets the partitions: plan them for the new k, as
	// gpuslotd does on the device. An admin's partitions are kept, also
	// when they are the whole GPU for every slot (k-exclusion without
	// partitions): here the server knows which was written.
	server.on_admin_change([&](unsigned int i, LockServer::AdminChange what) {
		const std::string name = "gpu" + std::to_string(i);
		gpuslot_layout now{};
		now.nr_partitions = GPUSLOT_MAX_SLOTS;
		std::vector<gpuslot_partition> parts;
		server.get_layout(i, &now, &parts);
		if (what == LockServer::AdminChange::partitions) {
			const bool whole = std::all_of(parts.begin(), parts.end(), [](const auto &p) {
				return std::all_of(std::begin(p.units), std::end(p.units),
						   [](uint64_t w) { return !w; });
			});
			log(LOG_INFO, name + ": partitions set outside gpuslotd (generation " +
					      std::to_string(now.generation) + "); keeping them" +
					      (whole && now.k > 1
						       ? ": every slot on the whole GPU, so " +
								 std::to_string(now.k) +
								 " jobs share all of it at once"
						       : ""));
			return;
		}
		std::vector<std::string> notes;
		gpuslot_layout l;
		std::string why;
		if (!apply(i, now.k, 0, &notes, &l, &why))
			log(LOG_ERR, name + ": k " + std::to_string(now.k) +
					     " written outside gpuslotd: " + why +
					     "; every slot keeps the whole GPU");
		else
			log(LOG_INFO, name + ": k " + std::to_string(now.k) +
					      " written outside gpuslotd: re-planned, generation " +
					      std::to_string(l.generation));
	});

	running = &server;
	struct sigaction sa = {};
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, nullptr);
	sigaction(SIGINT, &sa, nullptr);
	signal(SIGPIPE, SIG_IGN);
	sd_notify(0, "READY=1\nSTATUS=serving the socket transport");
	int ret = server.run(&error);
	running = nullptr;
	sd_notify(0, "STOPPING=1");
	if (ret) {
		log(LOG_ERR, error);
		return 1;
	}
	return 0;
}

} // namespace gpuslot
