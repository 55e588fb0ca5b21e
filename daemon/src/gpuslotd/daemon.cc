// SPDX-License-Identifier: GPL-2.0
#include "gpuslotd/daemon.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "amd/drm_shape.hpp"
#include "amd/lint.hpp"
#include "nvidia/nv_topology.hpp"
#include "amd/planner.hpp"
#include "plan/slot_layout.hpp"

namespace fs = std::filesystem;

namespace gpuslot {

bool plan_layout(const GpuNode &gpu, const CuShape &shape,
		 MaskAlgorithm algorithm, unsigned int k,
		 const GpuSettings &settings,
		 unsigned int hqd_limit, ModuleLayout *out,
		 std::vector<std::string> *notes, std::string *error)
{
	LayoutSpec spec;
	if (!layout_spec(settings, k, gpu.active_cus(), false, &spec, error))
		return false;
	Plan plan = plan_slots(shape, algorithm, spec);
	if (!plan.error.empty()) {
		*error = plan.error;
		return false;
	}
	notes->insert(notes->end(), plan.notes.begin(), plan.notes.end());
	ModuleLayout l;
	l.k = k;
	l.unit_kind = GPUSLOT_UNIT_AMD_CU;
	l.unit_size = 1;
	l.nr_units = gpu.active_cus();
	l.hqd_limit = hqd_limit;
	for (const auto &p : plan.partitions) {
		l.partitions.push_back(p.whole ? gpuslot_partition{} : partition_from_mask(p.mask));
		l.priorities.push_back(p.priority);
	}
	*out = std::move(l);
	return true;
}

bool plan_layout(const GpuNode &gpu, const CuShape &shape, MaskAlgorithm algorithm,
		 unsigned int k, const std::optional<std::string> &sizes, unsigned int hqd_limit,
		 ModuleLayout *out, std::vector<std::string> *notes, std::string *error)
{
	GpuSettings s;
	s.sizes = sizes;
	return plan_layout(gpu, shape, algorithm, k, s, hqd_limit, out, notes, error);
}

bool plan_nv_layout(const NvGpu &gpu, unsigned int k,
		    const GpuSettings &settings, unsigned int hqd_limit,
		    ModuleLayout *out, std::vector<std::string> *notes, std::string *error)
{
	LayoutSpec spec;
	if (!layout_spec(settings, k, gpu.sm_count, true, &spec, error))
		return false;
	NvPlan plan = plan_nv_slots(gpu, spec);
	if (!plan.error.empty()) {
		*error = plan.error;
		return false;
	}
	notes->insert(notes->end(), plan.notes.begin(), plan.notes.end());
	ModuleLayout l;
	l.k = k;
	l.unit_kind = GPUSLOT_UNIT_NV_SM_GROUP;
	l.unit_size = plan.group_sms;
	l.nr_units = plan.groups;
	l.hqd_limit = hqd_limit;
	for (size_t j = 0; j < plan.slot_groups.size(); j++) {
		gpuslot_partition p{};
		for (unsigned int g : plan.slot_groups[j])
			p.units[g / 64] |= 1ULL << (g % 64);
		l.partitions.push_back(p);
		l.priorities.push_back(plan.priorities[j]);
	}
	*out = std::move(l);
	return true;
}

bool plan_nv_layout(const NvGpu &gpu, unsigned int k, const std::optional<std::string> &sizes,
		    unsigned int hqd_limit, ModuleLayout *out, std::vector<std::string> *notes,
		    std::string *error)
{
	GpuSettings s;
	s.sizes = sizes;
	return plan_nv_layout(gpu, k, s, hqd_limit, out, notes, error);
}

CuShape gpu_shape(const GpuNode &gpu, const fs::path &dri, std::string *note)
{
	CuShape shape;
	if (!dri.empty() && read_drm_shape(gpu, dri, &shape, note)) {
		*note = "CU layout read from " +
			(dri / ("renderD" + std::to_string(gpu.drm_render_minor)))
				.string();
		return shape;
	}
	if (dri.empty())
		*note = "not asking libdrm; assuming uniform harvesting";
	return uniform_shape(gpu);
}

struct Daemon::Managed {
	unsigned int domain = 0;
	bool nvidia = false; // an NVIDIA GPU (nv), else an AMD one (gpu)
	NvGpu nv;
	GpuNode gpu;
	CuShape shape;
	Device dev;
	uint64_t generation = 0; // the last layout gpuslotd applied or accepted
	unsigned int k = 0;
	bool admin_k = false;	 // k was written outside gpuslotd since the last plan
	int generation_fd = -1; // sysfs "generation", polled for POLLPRI

	~Managed()
	{
		if (generation_fd >= 0)
			close(generation_fd);
	}
};

Daemon::Daemon(DaemonOptions options, Log log)
	: options_(std::move(options)), log_(std::move(log))
{
}

Daemon::~Daemon()
{
	if (lock_fd_ >= 0)
		close(lock_fd_);
}

namespace {

std::string name_of(unsigned int domain)
{
	return "gpu" + std::to_string(domain);
}

// sysfs_notify() wakes poll() once per change; reading re-arms it.
void rearm(int fd)
{
	char buf[32];
	if (lseek(fd, 0, SEEK_SET) == 0)
		while (read(fd, buf, sizeof(buf)) > 0) {
		}
}

} // namespace

AlgorithmChoice Daemon::walk(const Managed &m, const GpuSettings &settings) const
{
	return choose_algorithm(m.gpu.gfx, kernel_, amdgpu_version_,
				settings.mask_algorithm);
}

Daemon::Applied Daemon::apply(Managed &m, const GpuSettings &settings,
			      unsigned int k, unsigned int hqd_limit,
			      uint64_t expected, const std::string &why,
			      std::string *error)
{
	const std::string name = name_of(m.domain);
	ModuleLayout layout;
	std::vector<std::string> notes;
	if (!(m.nvidia ? plan_nv_layout(m.nv, k, settings, hqd_limit, &layout, &notes, error)
		       : plan_layout(m.gpu, m.shape, walk(m, settings).algorithm, k, settings,
				     hqd_limit, &layout, &notes, error))) {
		*error = name + ": cannot plan k = " + std::to_string(k) + ": " +
			 *error;
		return Applied::failed;
	}
	layout.expected_generation = expected;
	if (int err = m.dev.set_layout(&layout)) {
		if (err == EAGAIN) {
			*error = name + ": the layout changed since gpuslotd read "
				 "generation " + std::to_string(expected) +
				 " (an admin?): not overwriting it";
			return Applied::raced;
		}
		*error = name + ": the module refused the layout: " + strerror(err);
		return Applied::failed;
	}
	// Which GPU the domain stands for: clients match their runtime's
	// device by it. An older module without the file is no error.
	const std::string &pci = m.nvidia ? m.nv.pci_bus_id : m.gpu.pci_bus_id;
	if (!pci.empty()) {
		int err = write_domain_file(options_.sysfs, m.domain, "pci_bus_id", pci);
		if (err && err != ENOENT) {
			*error = name + ": cannot set pci_bus_id " + pci + ": " + strerror(err);
			return Applied::failed;
		}
	}
	if (settings.boost_priority) {
		if (int err = write_domain_file(options_.sysfs, m.domain,
						"boost_priority",
						std::to_string(*settings.boost_priority))) {
			*error = name + ": cannot set boost_priority: " + strerror(err);
			return Applied::failed;
		}
	}
	if (settings.max_boost_share) {
		if (int err = write_domain_file(options_.sysfs, m.domain,
						"max_boost_share",
						std::to_string(*settings.max_boost_share))) {
			*error = name + ": cannot set max_boost_share: " + strerror(err);
			return Applied::failed;
		}
	}
	for (const auto &[knob, value] : {std::pair{"preempt_share", settings.preempt_share},
					  std::pair{"preempt_window_ms", settings.preempt_window_ms}}) {
		if (!value)
			continue;
		if (int err = write_domain_file(options_.sysfs, m.domain, knob,
						std::to_string(*value))) {
			*error = name + ": cannot set " + knob + ": " + strerror(err);
			return Applied::failed;
		}
	}
	const bool changed = layout.generation != m.generation;
	m.generation = layout.generation;
	m.k = k;
	if (!changed)
		return Applied::ok;
	std::ostringstream msg;
	msg << name << ": k " << k << ", generation " << layout.generation << " ("
	    << why << "):";
	for (size_t j = 0; j < layout.partitions.size(); j++) {
		unsigned int units = 0;
		for (uint64_t w : layout.partitions[j].units)
			units += __builtin_popcountll(w);
		const bool whole = partition_is_whole(layout.partitions[j]);
		msg << " slot " << j << " "
		    << (whole ? std::string("whole GPU")
			: m.nvidia ? std::to_string(units * layout.unit_size) + " SMs"
				   : std::to_string(units) + " CUs")
		    << (whole ? "" : " " + partition_text(layout.partitions[j]))
		    << " priority " << layout.priority(unsigned(j))
		    << (j + 1 < layout.partitions.size() ? ";" : "");
	}
	log_(LOG_INFO, msg.str());
	for (const auto &n : notes)
		log_(LOG_INFO, name + ": note: " + n);
	return Applied::ok;
}

// One gpuslotd per host: two would overwrite each other's layouts. The
// lock is an flock() on state_dir/gpuslotd.lock, which holds the pid.
bool Daemon::lock_instance(std::string *error)
{
	const fs::path path = options_.state_dir / "gpuslotd.lock";
	std::error_code ec;
	fs::create_directories(options_.state_dir, ec);
	lock_fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (lock_fd_ < 0) {
		*error = path.string() + ": " + strerror(errno);
		return false;
	}
	const int err = flock(lock_fd_, LOCK_EX | LOCK_NB) ? errno : 0;
	if (err && err != EWOULDBLOCK) {
		// A kernel without file locking (CONFIG_FILE_LOCKING=n): the
		// guard is lost, not the daemon.
		log_(LOG_WARNING, path.string() + ": cannot lock it (" + strerror(err) +
					  "): a second gpuslotd would not be refused");
	} else if (err) {
		char pid[32] = {};
		ssize_t n = pread(lock_fd_, pid, sizeof(pid) - 1, 0);
		std::string text(pid, n > 0 ? size_t(n) : 0);
		while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
			text.pop_back();
		*error = "another gpuslotd is running (pid " +
			 (text.empty() ? std::string("unknown") : text) + ", " +
			 path.string() + "): stop it first";
		close(lock_fd_);
		lock_fd_ = -1;
		return false;
	}
	const std::string me = std::to_string(getpid()) + "\n";
	if (ftruncate(lock_fd_, 0) || pwrite(lock_fd_, me.data(), me.size(), 0) < 0) {
		*error = path.string() + ": " + strerror(errno);
		return false;
	}
	return true;
}

// The config's hqd_limit, else KFD's num_cp_queues; 0 (keep the module's)
// on NVIDIA, which has no HQD budget to mirror.
unsigned int Daemon::hqd_limit_for(const Managed &m, const GpuSettings &s) const
{
	if (s.hqd_limit)
		return *s.hqd_limit;
	return m.nvidia ? 0 : m.gpu.num_cp_queues;
}

bool Daemon::start(std::string *error)
{
	if (!lock_instance(error))
		return false;
	if (!load_config(options_.config, &config_, error))
		return false;
	const std::string kernel =
		options_.kernel.empty() ? running_kernel_release() : options_.kernel;
	kernel_ = kernel;
	// --kernel describes another host: its amdgpu is not this one's.
	amdgpu_version_ = options_.kernel.empty() ? amdgpu_module_version() : "";
	auto topo = read_topology(options_.topology);
	NvTopologyResult nv;
	if (!topo.error.empty()) {
		// A KFD topology that is there but wrong is an error to fix.
		const bool no_amd = !fs::exists(options_.topology) ||
				    topo.error.ends_with(": no GPU node");
		if (!no_amd) {
			*error = topo.error;
			return false;
		}
		// No AMD GPU: NVIDIA GPUs through the CUDA driver, if any.
		nv = read_nv_topology();
		if (!nv.error.empty()) {
			*error = topo.error + "; and no NVIDIA GPU either (" + nv.error + ")";
			unavailable_ = true;
			return false;
		}
		log_(LOG_INFO, "no KFD topology (" + topo.error + "); managing " +
				       std::to_string(nv.gpus.size()) +
				       " NVIDIA GPU(s) through the CUDA driver");
	}
	const size_t gpus = nv.gpus.empty() ? topo.gpus.size() : nv.gpus.size();

	Device probe;
	if (int err = probe.open(options_.device, error)) {
		unavailable_ = err == ENOENT || err == ENODEV || err == ENXIO;
		return false;
	}
	gpuslot_version v;
	if (int err = probe.version(&v)) {
		*error = options_.device.string() + ": VERSION: " + strerror(err);
		return false;
	}
	if (!(v.features & GPUSLOT_FEATURE_LAYOUT)) {
		*error = "the loaded gpuslot module has no layouts (API " +
			 std::to_string(v.api_version) + "); load the one built "
			 "with this gpuslotd";
		return false;
	}
	// Which domain each GPU gets. NVIDIA: CUDA's order. AMD: by PCI
	// address (the domain that already names the GPU), else by place
	// among the KFD GPU nodes; a node that cannot be read is logged and
	// skipped, and keeps its place, so no other GPU's layout moves.
	std::vector<int> domain_of(gpus, -1);
	if (!nv.gpus.empty()) {
		for (size_t i = 0; i < gpus && i < v.nr_domains; i++)
			domain_of[i] = int(i);
	} else {
		for (const UnreadableNode &u : topo.unreadable)
			log_(LOG_ERR, "KFD node " + std::to_string(u.node_id) +
					      (u.pci_bus_id.empty() ? "" : " (" + u.pci_bus_id + ")") +
					      " cannot be read: " + u.error +
					      "; skipping that GPU, the others are managed");
		std::vector<std::string> recorded(v.nr_domains);
		for (unsigned int d = 0; d < v.nr_domains; d++) {
			std::ifstream in(domain_dir(options_.sysfs, d) / "pci_bus_id");
			std::getline(in, recorded[d]);
			recorded[d] = recorded[d].substr(0, recorded[d].find_first_of(" \t"));
		}
		domain_of = gpu_domains(topo, recorded);
	}
	for (size_t i = 0; i < gpus; i++)
		if (domain_of[i] < 0)
			log_(LOG_WARNING, "GPU " + std::to_string(i) +
						  " has no gpuslot domain: load the module "
						  "with domains=" +
						  std::to_string(gpus + topo.unreadable.size()));

	for (size_t i = 0; i < gpus; i++) {
		if (domain_of[i] < 0)
			continue;
		auto m = std::make_unique<Managed>();
		m->domain = unsigned(domain_of[i]);
		const std::string name = name_of(m->domain);
		if (!nv.gpus.empty()) {
			m->nvidia = true;
			m->nv = nv.gpus[i];
			log_(LOG_INFO, name + ": " + m->nv.name + " (CUDA device " +
					       std::to_string(m->nv.ordinal) + "), " +
					       std::to_string(m->nv.sm_count) +
					       " SMs; partitions are SM groups of one "
					       "green-context split");
		} else {
			m->gpu = topo.gpus[i];
			std::string note;
			m->shape = gpu_shape(m->gpu, options_.dri, &note);
			const AlgorithmChoice w = walk(*m, config_.for_gpu(m->domain));
			log_(LOG_INFO, name + ": " + m->gpu.gfx.name() + " (KFD node " +
					       std::to_string(m->gpu.node_id) + "), " +
					       std::to_string(m->gpu.active_cus()) + " CUs, " +
					       std::to_string(m->gpu.num_cp_queues) +
					       " HQDs; " + note + "; CU-mask walk " + w.why);
			for (const std::string &n : w.notes)
				log_(n.starts_with("warning") ? LOG_WARNING : LOG_NOTICE,
				     name + ": " + n);
		}
		if (m->dev.open(options_.device, error))
			return false;
		if (int err = m->dev.attach(m->domain)) {
			*error = name + ": ATTACH: " + strerror(err);
			return false;
		}
		ModuleLayout now;
		if (int err = m->dev.get_layout(&now)) {
			*error = name + ": GET_LAYOUT: " + strerror(err);
			return false;
		}
		const GpuSettings s = config_.for_gpu(m->domain);
		const unsigned int hqd = hqd_limit_for(*m, s);
		// An admin may change the layout between our read and our set:
		// read again and plan again, a few times.
		Applied done = Applied::raced;
		for (int tries = 0; done == Applied::raced && tries < 5; tries++) {
			if (tries && (m->dev.get_layout(&now) != 0))
				break;
			done = apply(*m, s, s.k_or(now.k), hqd, now.generation, "start",
				     error);
		}
		if (done != Applied::ok)
			return false;
		const fs::path gen = domain_dir(options_.sysfs, m->domain) / "generation";
		m->generation_fd = open(gen.c_str(), O_RDONLY | O_CLOEXEC);
		if (m->generation_fd < 0) {
			*error = gen.string() + ": " + strerror(errno);
			return false;
		}
		rearm(m->generation_fd);
		gpus_.push_back(std::move(m));
	}
	std::sort(gpus_.begin(), gpus_.end(),
		  [](const auto &a, const auto &b) { return a->domain < b->domain; });
	if (gpus_.empty()) {
		*error = "no GPU to manage";
		unavailable_ = true;
		return false;
	}
	return true;
}

bool Daemon::reload(std::string *error)
{
	Config next;
	if (!load_config(options_.config, &next, error)) {
		*error += "; keeping the configuration loaded before";
		return false;
	}
	// A k an admin wrote since the last plan stays, unless the config's
	// own k changed: the admin's is the newer word.
	std::vector<unsigned int> ks;
	std::vector<bool> admin_ks;
	for (auto &m : gpus_) {
		const bool same = config_.for_gpu(m->domain).k_or(0) ==
				  next.for_gpu(m->domain).k_or(0);
		admin_ks.push_back(m->admin_k && same);
		ks.push_back(admin_ks.back() ? m->k : next.for_gpu(m->domain).k_or(m->k));
	}
	// Plan every GPU first: a config that cannot be planned changes
	// nothing anywhere.
	for (size_t i = 0; i < gpus_.size(); i++) {
		Managed *m = gpus_[i].get();
		const GpuSettings s = next.for_gpu(m->domain);
		ModuleLayout dry;
		std::vector<std::string> notes;
		const bool ok = m->nvidia
					? plan_nv_layout(m->nv, ks[i], s, 0, &dry, &notes, error)
					: plan_layout(m->gpu, m->shape, walk(*m, s).algorithm,
						      ks[i], s, 0, &dry, &notes, error);
		if (!ok) {
			*error = name_of(m->domain) + ": " + *error +
				 "; keeping the configuration loaded before";
			return false;
		}
	}
	// What each GPU had, to put back should one of them refuse.
	std::vector<ModuleLayout> before(gpus_.size());
	for (size_t i = 0; i < gpus_.size(); i++)
		if (int err = gpus_[i]->dev.get_layout(&before[i])) {
			*error = name_of(gpus_[i]->domain) + ": GET_LAYOUT: " + strerror(err) +
				 "; keeping the configuration loaded before";
			return false;
		}
	Config old = std::move(config_);
	config_ = std::move(next);
	for (size_t i = 0; i < gpus_.size(); i++) {
		Managed &m = *gpus_[i];
		const GpuSettings s = config_.for_gpu(m.domain);
		const bool keep_admin_k = admin_ks[i];
		std::string err;
		switch (apply(m, s, ks[i], hqd_limit_for(m, s), m.generation, "reload",
			      &err)) {
		case Applied::ok:
			if (keep_admin_k)
				log_(LOG_INFO, name_of(m.domain) + ": keeping k " +
						       std::to_string(m.k) +
						       ", which an admin set");
			m.admin_k = keep_admin_k;
			continue;
		case Applied::raced:
			// An admin's newer layout: check_domains() takes it in.
			log_(LOG_WARNING, err);
			continue;
		case Applied::failed:
			break;
		}
		// Put back every GPU this reload changed, and the old config.
		for (size_t j = 0; j < i; j++) {
			ModuleLayout back = before[j];
			back.expected_generation = gpus_[j]->generation;
			back.hqd_limit = 0;
			if (gpus_[j]->dev.set_layout(&back) == 0) {
				gpus_[j]->generation = back.generation;
				gpus_[j]->k = back.k;
			}
		}
		config_ = std::move(old);
		*error = err + "; every GPU keeps the layout it had";
		return false;
	}
	return true;
}

void Daemon::check_domains()
{
	for (auto &m : gpus_) {
		const std::string name = name_of(m->domain);
		ModuleLayout now;
		if (int err = m->dev.get_layout(&now)) {
			log_(LOG_ERR, name + ": GET_LAYOUT: " + strerror(err));
			continue;
		}
		if (now.generation == m->generation)
			continue;
		if (now.all_whole()) {
			// Writing k resets partitions: plan for the new k.
			std::string err;
			switch (apply(*m, config_.for_gpu(m->domain), now.k, 0,
				      now.generation,
				      "k " + std::to_string(now.k) + " written outside gpuslotd",
				      &err)) {
			case Applied::ok:
				m->admin_k = true;
				break;
			case Applied::raced:
				// Changed again meanwhile: the next poll sees it.
				log_(LOG_INFO, err);
				break;
			case Applied::failed:
				log_(LOG_ERR, err + "; every slot keeps the whole GPU");
				m->generation = now.generation;
				m->k = now.k;
				m->admin_k = true;
				break;
			}
			continue;
		}
		// An admin wrote partitions: keep them, say what is wrong.
		m->generation = now.generation;
		m->k = now.k;
		// The confined slots' masks (a whole-GPU slot has none), named
		// by their slots, then what the priorities do.
		std::vector<std::vector<uint32_t>> masks;
		std::vector<unsigned int> prios, slot_of;
		for (unsigned int j = 0; j < now.partitions.size(); j++)
			if (!partition_is_whole(now.partitions[j])) {
				masks.push_back(mask_from_partition(now.partitions[j], now.nr_units));
				prios.push_back(now.priority(j));
				slot_of.push_back(j);
			}
		auto findings = now.unit_kind == GPUSLOT_UNIT_AMD_CU
					? lint_masks(m->shape,
						     walk(*m, config_.for_gpu(m->domain)).algorithm,
						     masks, prios)
					: std::vector<LintFinding>{};
		for (auto &f : findings) {
			f.slot = int(slot_of[size_t(f.slot)]);
			if (f.other_slot >= 0)
				f.other_slot = int(slot_of[size_t(f.other_slot)]);
		}
		PriorityLintGpu pg;
		pg.unit_kind = now.unit_kind;
		pg.confined_overlap_linted = now.unit_kind == GPUSLOT_UNIT_AMD_CU;
		if (m->nvidia) {
			pg.task_slots = nv_task_slots(m->nv.cc_major, m->nv.cc_minor);
			pg.what = "compute capability " + std::to_string(m->nv.cc_major) + "." +
				  std::to_string(m->nv.cc_minor);
		}
		now.priorities.resize(now.partitions.size(), 0);
		auto more = lint_priorities(now.partitions, now.priorities, pg);
		findings.insert(findings.end(), more.begin(), more.end());
		log_(LOG_INFO, name + ": partitions set outside gpuslotd (generation " +
				       std::to_string(now.generation) + "); keeping them" +
				       (findings.empty() ? "" : ", but:"));
		for (const auto &f : findings)
			log_(f.severity == LintFinding::kError ? LOG_ERR : LOG_WARNING,
			     name + ": " + f.text());
	}
}

void Daemon::audit()
{
	if (!fs::is_directory(options_.kfd_proc))
		return;
	auto queues = count_compute_queues(options_.kfd_proc);
	std::vector<AuditEntry> over;
	for (auto &m : gpus_) {
		DomainState state;
		std::string err;
		if (!read_domain_state(options_.sysfs, m->domain, &state, &err,
				       options_.debugfs)) {
			log_(LOG_ERR, err);
			continue;
		}
		if (!state.tables) {
			// Once, not every period.
			if (audit_note_ != state.tables_note)
				log_(LOG_ERR, name_of(m->domain) + ": no queue audit: " +
						      state.tables_note);
			audit_note_ = state.tables_note;
			continue;
		}
		auto o = over_reservation(queues, m->gpu.gpu_id, state);
		over.insert(over.end(), o.begin(), o.end());
	}
	// Log when the picture changes, not every period.
	if (over.size() != last_over_) {
		for (const AuditEntry &e : over)
			log_(LOG_WARNING,
			     name_of(e.domain) + ": process " + std::to_string(e.pid) +
				     " (" + e.comm + ") has " + std::to_string(e.queues) +
				     " compute queues but reserved " +
				     std::to_string(e.reserved) +
				     ": past the budget the firmware time-slices "
				     "queues and every task slows down");
		if (over.empty())
			log_(LOG_INFO, "queue audit: every process is within its reservation");
		last_over_ = over.size();
	}
	if (options_.state_dir.empty())
		return;
	std::error_code ec;
	fs::create_directories(options_.state_dir, ec);
	const fs::path file = options_.state_dir / "audit.json";
	const fs::path tmp = options_.state_dir / ".audit.json.tmp";
	{
		std::ofstream out(tmp, std::ios::trunc);
		out << audit_json(over);
		if (!out) {
			log_(LOG_ERR, tmp.string() + ": cannot be written");
			return;
		}
	}
	fs::rename(tmp, file, ec);
	if (ec)
		log_(LOG_ERR, file.string() + ": " + ec.message());
}

std::string Daemon::status_line() const
{
	std::string out;
	for (const auto &m : gpus_)
		out += (out.empty() ? "" : "; ") + name_of(m->domain) + " k " +
		       std::to_string(m->k) + " generation " +
		       std::to_string(m->generation);
	return out + (last_over_ ? "; " + std::to_string(last_over_) +
					   " process(es) over their queue reservation"
				 : "");
}

namespace {

uint64_t now_ms()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

} // namespace

int Daemon::run()
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, nullptr);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0) {
		log_(LOG_ERR, std::string("signalfd: ") + strerror(errno));
		return 1;
	}

	uint64_t watchdog_usec = 0;
	const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
	// Ping twice per period, as sd_watchdog_enabled(3) advises.
	const uint64_t watchdog_ms = watchdog ? std::max<uint64_t>(watchdog_usec / 2000, 1) : 0;
	const uint64_t audit_ms = config_.audit_interval_ms;
	uint64_t next_watchdog = now_ms(), next_audit = now_ms();

	audit();
	sd_notifyf(0, "READY=1\nSTATUS=%s", status_line().c_str());
	log_(LOG_INFO, "ready: " + status_line());

	for (;;) {
		std::vector<pollfd> fds{{sfd, POLLIN, 0}};
		for (auto &m : gpus_)
			fds.push_back({m->generation_fd, POLLPRI | POLLERR, 0});
		const uint64_t now = now_ms();
		// At least once a second the layouts are checked anyway.
		uint64_t wake = now + 1000;
		if (watchdog)
			wake = std::min(wake, next_watchdog);
		if (audit_ms)
			wake = std::min(wake, next_audit);
		int timeout = wake > now ? int(wake - now) : 0;
		if (poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
			log_(LOG_ERR, std::string("poll: ") + strerror(errno));
			close(sfd);
			return 1;
		}
		if (fds[0].revents & POLLIN) {
			signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGHUP) {
					sd_notify(0, "RELOADING=1");
					std::string err;
					if (reload(&err))
						log_(LOG_INFO, "configuration reloaded");
					else
						log_(LOG_ERR, err);
					sd_notifyf(0, "READY=1\nSTATUS=%s",
						   status_line().c_str());
				} else {
					sd_notify(0, "STOPPING=1");
					log_(LOG_INFO, "stopping; the layouts stay in the module");
					close(sfd);
					return 0;
				}
			}
		}
		for (size_t i = 1; i < fds.size(); i++)
			if (fds[i].revents)
				rearm(fds[i].fd);
		std::string before = status_line();
		check_domains();
		if (audit_ms && now_ms() >= next_audit) {
			audit();
			next_audit = now_ms() + audit_ms;
		}
		if (status_line() != before)
			sd_notifyf(0, "STATUS=%s", status_line().c_str());
		if (watchdog && now_ms() >= next_watchdog) {
			sd_notify(0, "WATCHDOG=1");
			next_watchdog = now_ms() + watchdog_ms;
		}
	}
}

} // namespace gpuslot
