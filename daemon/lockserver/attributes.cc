// SPDX-License-Identifier: GPL-2.0
// The socket transport's sysfs, debugfs and fdinfo: GPUSLOT_WIRE_ATTR_READ
// and _WRITE read and write a domain's attributes under the names, with the
// text and with the errors of the module's files (API 2): the one-value
// files of /sys/class/gpuslot/gpu<N>/ (slot<i>/units and slot<i>/priority
// staged until commit), "debug/<table>" for debugfs's tables (admins only,
// as long as they are) and "fdinfo" for the connection's own lines, so that
// gpuslotctl, gpuslotd and the tests parse one format on both transports.
#include "lock_server.hpp"
#include "server_state.hpp"

#include <sys/socket.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gpuslot {

namespace {

constexpr size_t kPage = GPUSLOT_WIRE_ATTR_MAX;

uint64_t since(uint64_t now, uint64_t start)
{
	return now > start ? now - start : 0;
}

// A thread's name as one word of a table (gpuslot_escape_name()): bytes
// outside '!'..'~' and the backslash as \xHH, an empty name as \x00. Read
// when shown: the module copies it at the call, which we cannot see.
std::string read_task_name(pid_t pid, pid_t tid)
{
	std::string comm;
	std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
	if (!in || !std::getline(in, comm)) {
		std::ifstream proc("/proc/" + std::to_string(pid) + "/comm");
		std::getline(proc, comm);
	}
	std::string out;
	char hex[5];
	for (unsigned char ch : comm.substr(0, 15)) {
		if (ch > ' ' && ch <= '~' && ch != '\\') {
			out += char(ch);
			continue;
		}
		std::snprintf(hex, sizeof(hex), "\\x%02x", ch);
		out += hex;
	}
	return out.empty() ? "\\x00" : out;
}

// kstrtouint(text, 10): decimal, an optional '+', one trailing newline.
bool parse_uint(std::string_view text, unsigned int *out)
{
	if (!text.empty() && text.back() == '\n')
		text.remove_suffix(1);
	if (!text.empty() && text.front() == '+')
		text.remove_prefix(1);
	auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), *out);
	return !text.empty() && err == std::errc() && end == text.data() + text.size();
}

std::string trimmed(const std::string &s)
{
	const char *space = " \t\n\r\v\f";
	const size_t b = s.find_first_not_of(space);
	return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(space) - b + 1);
}

// The kernel's bitmap_parse() over @nr_units bits: comma-separated groups
// of up to 8 hex digits (32 bits each), the highest first, as the module's
// slot<i>/units takes them; "all" is the whole GPU. A bitmap with no unit
// set is refused: write "all" for the whole GPU.
bool parse_partition(const std::string &text, uint32_t nr_units,
		     uint64_t units[GPUSLOT_UNIT_WORDS])
{
	std::fill(units, units + GPUSLOT_UNIT_WORDS, 0);
	const std::string s = trimmed(text);
	if (s == "all")
		return true;
	if (!nr_units)
		return false;
	auto separator = [](char ch) { return ch == ',' || std::isspace(static_cast<unsigned char>(ch)); };
	const unsigned int chunks = (nr_units + 31) / 32;
	unsigned int chunk = 0;
	size_t end = s.size();
	while (end) {
		while (end && separator(s[end - 1]))
			end--;
		if (!end)
			break;
		size_t begin = end;
		while (begin && !separator(s[begin - 1]))
			begin--;
		if (end - begin > 8 || chunk >= chunks)
			return false;
		uint32_t v = 0;
		auto [at, err] = std::from_chars(s.data() + begin, s.data() + end, v, 16);
		if (err != std::errc() || at != s.data() + end)
			return false;
		units[chunk / 2] |= uint64_t(v) << (32 * (chunk % 2));
		chunk++;
		end = begin;
	}
	return !gpuslot_partition_is_whole(units) && gpuslot_partition_fits(units, nr_units);
}

// The kernel's "%*pb" of @units over @nr_units bits (as cpumask files show
// them): 32-bit groups, the highest first, comma-separated, lower-case and
// zero-padded, the first as wide as its bits need. "all" for the whole GPU.
std::string format_partition(const uint64_t units[GPUSLOT_UNIT_WORDS], uint32_t nr_units)
{
	if (gpuslot_partition_is_whole(units) || !nr_units)
		return "all";
	std::string out;
	unsigned int width = nr_units % 32 ? nr_units % 32 : 32;
	for (int chunk = int((nr_units + 31) / 32) - 1; chunk >= 0; chunk--) {
		const uint32_t v = uint32_t(units[chunk / 2] >> (32 * (chunk % 2))) &
				   uint32_t((1ULL << width) - 1);
		char group[16];
		std::snprintf(group, sizeof(group), "%s%0*x", out.empty() ? "" : ",",
			      int((width + 3) / 4), v);
		out += group;
		width = 32;
	}
	return out;
}

// "slot<i>/<file>": i (0 .. GPUSLOT_MAX_SLOTS - 1, decimal, no leading
// zero) and the file; false if @name is no such path.
bool slot_attr(const std::string &name, unsigned int *slot, std::string *file)
{
	if (name.rfind("slot", 0) != 0)
		return false;
	const size_t slash = name.find('/');
	if (slash == std::string::npos || slash == 4 || (slash > 5 && name[4] == '0'))
		return false;
	auto [at, err] = std::from_chars(name.data() + 4, name.data() + slash, *slot);
	if (err != std::errc() || at != name.data() + slash || *slot >= GPUSLOT_MAX_SLOTS)
		return false;
	*file = name.substr(slash + 1);
	return *file == "units" || *file == "priority";
}

// "DDDD:BB:DD.F" in lower case, or "" to forget the GPU; false if neither.
bool parse_pci_bus_id(const std::string &text, std::string *out)
{
	const std::string s = trimmed(text);
	unsigned int dom, bus, dev, fn;
	char end;
	static const char shape[] = "xxxx:xx:xx.x";
	if (s.empty()) {
		out->clear();
		return true;
	}
	if (s.size() != sizeof(shape) - 1)
		return false;
	for (size_t i = 0; i < s.size(); i++)
		if (shape[i] == 'x' ? !std::isxdigit(static_cast<unsigned char>(s[i])) : s[i] != shape[i])
			return false;
	if (std::sscanf(s.c_str(), "%4x:%2x:%2x.%1x%c", &dom, &bus, &dev, &fn, &end) != 4 ||
	    dev > 0x1f || fn > 7)
		return false;
	char norm[16];
	std::snprintf(norm, sizeof(norm), "%04x:%02x:%02x.%x", dom, bus, dev, fn);
	*out = norm;
	return true;
}

const char *const kUnitNames[] = {"none", "amd-cu", "nv-sm-group"};

} // namespace

// Names are cached for a second: a member that reads a table of a
// thousand waiters in a loop costs no /proc read per line.
std::string LockServer::task_name(pid_t pid, pid_t tid) const
{
	const uint64_t now = now_ns();
	auto it = names_.find(tid);
	if (it != names_.end() && it->second.pid == pid && now - it->second.read_ns < 1000000000)
		return it->second.name;
	if (names_.size() >= 4096)
		names_.clear();
	std::string name = read_task_name(pid, tid);
	names_[tid] = {pid, name, now};
	return name;
}

namespace {

const char *const kStatNames[] = {"acquisitions", "contended",	 "timeouts",	"interrupted",
				  "total_wait_ns", "max_wait_ns", "max_hold_ns", "overruns"};

uint64_t stat_value(const gpuslot_stats &s, const std::string &name)
{
	const uint64_t values[] = {s.acquisitions,  s.contended,   s.timeouts,	  s.interrupted,
				   s.total_wait_ns, s.max_wait_ns, s.max_hold_ns, s.overruns};
	for (size_t i = 0; i < std::size(kStatNames); i++)
		if (name == kStatNames[i])
			return values[i];
	return 0;
}

bool is_stat(const std::string &name)
{
	return std::any_of(std::begin(kStatNames), std::end(kStatNames),
			   [&](const char *n) { return name == n; });
}

std::string hex(uint64_t v)
{
	char s[24];
	std::snprintf(s, sizeof(s), "0x%llx", static_cast<unsigned long long>(v));
	return s;
}

// What the module's rw files are; everything else readable is read-only.
const char *const kWritable[] = {"k",	      "boost_priority", "max_hold_ms", "max_boost_share",
				 "hqd_limit", "pci_bus_id",	"commit", "preempt_share", "preempt_window_ms"};

} // namespace

std::string layout_problem(const gpuslot_partitions &p, unsigned int k)
{
	for (unsigned int s = 0; s < GPUSLOT_MAX_SLOTS; s++) {
		if (p.priority[s] > GPUSLOT_MAX_SLOT_PRIORITY)
			return "slot " + std::to_string(s) + ": priority " +
			       std::to_string(p.priority[s]) + " is over " +
			       std::to_string(GPUSLOT_MAX_SLOT_PRIORITY);
		if (s >= k && p.priority[s])
			return "slot " + std::to_string(s) + ": a priority at or past k " +
			       std::to_string(k);
	}
	if (!gpuslot_partitions_check(&p, k))
		return "";
	// Which rule: the partitions' own, or two that share units.
	for (unsigned int i = 0; i < k; i++)
		for (unsigned int j = i + 1; j < k; j++) {
			if (gpuslot_partition_is_whole(p.units[i]) ||
			    gpuslot_partition_is_whole(p.units[j]))
				continue;
			for (unsigned int w = 0; w < GPUSLOT_UNIT_WORDS; w++)
				if (p.units[i][w] & p.units[j][w])
					return "slots " + std::to_string(i) + " and " +
					       std::to_string(j) + " share units at priorities " +
					       std::to_string(p.priority[i]) + " and " +
					       std::to_string(p.priority[j]) +
					       " (overlapping partitions need different priorities)";
		}
	return "a partition does not fit the unit kind or nr_units";
}

// debugfs's tables (admins only, no page cut): holders, waiters, queues,
// wait_hist; ENOENT for another name.
int LockServer::debug_table(const Domain &d, const std::string &table, std::string *text) const
{
	std::string t;
	const uint64_t now = now_ns();
	if (table == "holders") {
		static const char *const boost[] = {"unboosted", "boosted", "overrun"};
		for (unsigned int slot = 0; slot < GPUSLOT_MAX_SLOTS; slot++) {
			if (const Orphan *o = d.orphan[slot]) {
				// Kept for its holder to reclaim (a gpuslotd died).
				t += std::to_string(slot) + " " + std::to_string(o->pid) + " " +
				     std::to_string(o->tid) + " " + task_name(o->pid, o->tid) +
				     " 0 unboosted\n";
				continue;
			}
			const Conn *c = d.holder[slot];
			if (!c)
				continue;
			// As the module prints them (gpuslot_pid_nr_live()): a process
			// or thread that is gone is 0, so that a number the kernel has
			// given to another task never names it. The process is vouched
			// for by its pidfd, the thread by tgkill() within it.
			const bool process = pidfd_alive(pidfd_for(*c, c->holder_pid));
			const bool thread = process && thread_in_group(c->holder_pid, c->holder_tid);
			t += std::to_string(slot) + " " + std::to_string(process ? c->holder_pid : 0) +
			     " " + std::to_string(thread ? c->holder_tid : 0) + " " +
			     (process ? task_name(c->holder_pid, thread ? c->holder_tid : c->holder_pid)
				      : std::string("\\x00")) +
			     " " + std::to_string(since(now, c->hold_start_ns)) + " " +
			     (c->state == Conn::granted ? "pending" : boost[c->hold_boost]) + "\n";
		}
	} else if (table == "waiters") {
		for (const ::list_head *n = d.core.waiters.next; n != &d.core.waiters; n = n->next) {
			const auto *cw = list_entry(n, gpuslot_core_waiter, node);
			const Conn &c = waiting_conn(cw);
			t += std::to_string(c.acquire_pid) + " " + std::to_string(c.acquire_tid) + " " +
			     task_name(c.acquire_pid, c.acquire_tid) + " " +
			     std::to_string(since(now, c.start_ns)) + " " + hex(cw->allowed) + "\n";
		}
	} else if (table == "queues") {
		for (const auto &[fd, c] : conns_)
			if (c->domain == &d && c->hqd_reserved)
				t += std::to_string(c->hqd_pid) + " " +
				     task_name(c->hqd_pid, c->hqd_pid) + " " +
				     std::to_string(c->hqd_reserved) + "\n";
	} else if (table == "wait_hist") {
		for (unsigned int i = 0; i < GPUSLOT_HIST_BUCKETS; i++)
			t += std::to_string(uint64_t(1) << i) + " " +
			     std::to_string(d.stats.wait_hist[i]) + "\n";
	} else {
		return ENOENT;
	}
	*text = std::move(t);
	return 0;
}

// The module's show_fdinfo lines for connection @c, its open file.
std::string LockServer::fdinfo(const Conn &c) const
{
	static const char *const state[] = {"idle", "waiting", "held", "async-waiting", "pending"};
	const bool holds = c.state == Conn::holding || c.state == Conn::granted;
	const bool waits = c.state == Conn::acquiring || c.state == Conn::queued;
	std::string t = "gpuslot-domain:\t" + std::to_string(c.domain->id) + "\n";
	t += std::string("gpuslot-state:\t") + state[c.state] + "\n";
	t += "gpuslot-slot:\t" + (holds ? std::to_string(c.slot) : "-") + "\n";
	t += "gpuslot-generation:\t" + (holds ? std::to_string(c.generation) : "-") + "\n";
	t += "gpuslot-allowed-mask:\t" + (waits ? hex(c.waiter.core.allowed) : "-") + "\n";
	t += "gpuslot-hqd-reserved:\t" + std::to_string(c.hqd_reserved) + "\n";
	t += "gpuslot-hqd-waiting:\t" + std::to_string(c.hqd_waiting ? c.reserve.count : 0) + "\n";
	// The module's reasons: another user's thread is the module's
	// not-the-openers-user; of the kernel's refusals, EPERM is all
	// gpuslotd sees.
	const bool refused = c.state == Conn::holding && c.hold_seq && c.boost_refused_seq == c.hold_seq;
	t += std::string("gpuslot-boost-refused:\t") +
	     (!refused ? "-"
	      : c.boost_refusal == refused_other_user ? "not-the-openers-user"
						      : "refused-by-the-kernel") +
	     "\n";
	return t;
}

int LockServer::attr_read(const Conn &c, const std::string &name, std::string *text) const
{
	const Domain &d = *c.domain;
	auto line = [](auto v) { return std::to_string(v) + "\n"; };
	std::string t, file;
	unsigned int slot;
	if (name == "k") {
		t = line(d.core.k);
	} else if (name == "boost_priority") {
		t = line(d.boost_priority);
	} else if (name == "max_hold_ms") {
		t = line(d.max_hold_ms);
	} else if (name == "max_boost_share") {
		t = line(d.max_boost_share);
	} else if (name == "preempt_share") {
		t = line(d.preempt.share);
	} else if (name == "preempt_window_ms") {
		t = line(d.preempt.window_ns / 1000000);
	} else if (name == "generation") {
		t = line(d.core.generation);
	} else if (name == "hqd_limit") {
		t = line(d.budget.limit);
	} else if (name == "hqd_used") {
		t = line(d.budget.used);
	} else if (name == "hqd_waiters") {
		t = line(d.budget.nr_waiters);
	} else if (name == "pci_bus_id") {
		t = d.pci_bus_id + "\n";
	} else if (name == "unit_kind") {
		t = std::string(kUnitNames[d.parts.unit_kind]) + "\n";
	} else if (name == "unit_size") {
		t = line(d.parts.unit_size);
	} else if (name == "nr_units") {
		t = line(d.parts.nr_units);
	} else if (name == "nr_holders") {
		t = line(std::popcount(d.core.held));
	} else if (name == "nr_waiters") {
		t = line(d.core.nr_waiters);
	} else if (name == "held_mask") {
		t = hex(d.core.held) + "\n";
	} else if (name == "stats/boosts_refused") {
		t = line(d.boosts_refused);
	} else if (name.rfind("stats/", 0) == 0 && is_stat(name.substr(6))) {
		t = line(stat_value(d.stats, name.substr(6)));
	} else if (slot_attr(name, &slot, &file)) {
		// Slots past k have no layout (the module's ENXIO).
		if (slot >= d.core.k)
			return ENXIO;
		t = file == "units" ? format_partition(d.parts.units[slot], d.parts.nr_units) + "\n"
				    : line(unsigned(d.parts.priority[slot]));
	} else if (name == "commit") {
		return EACCES; // write-only (0200)
	} else if (name.rfind("debug/", 0) == 0) {
		// debugfs's files are root's (0400): an admin now, as at an
		// open, checked before any work (a refused read builds no
		// table). Root (or an unprivileged gpuslotd's own user) passes
		// the file mode but is refused without the capability: EPERM,
		// as the module's open does.
		if (!admin(c))
			return c.request_uid == 0 ||
					       (geteuid() != 0 && c.request_uid == geteuid())
				       ? EPERM
				       : EACCES;
		std::string table;
		if (int err = debug_table(d, name.substr(6), &table))
			return err;
		t = std::move(table);
	} else if (name == "fdinfo") {
		t = fdinfo(c);
	} else {
		return ENOENT;
	}
	*text = std::move(t);
	return 0;
}

int LockServer::attr_write(Conn &c, const std::string &name, const std::string &text)
{
	unsigned int slot;
	std::string file, ignored;
	const bool writable = slot_attr(name, &slot, &file) ||
			      std::any_of(std::begin(kWritable), std::end(kWritable),
					  [&](const char *n) { return name == n; });
	if (!writable)
		return name == "fdinfo" || name.rfind("debug/", 0) == 0 ||
				       attr_read(c, name, &ignored) != ENOENT
			       ? EACCES
			       : ENOENT;
	// As sysfs: a file mode (here: who connected) and capable() at the write.
	if (!c.admin_at_connect)
		return EACCES;
	if (!admin(c))
		return EPERM;
	if (int err = store_attr(*c.domain, name, text))
		return err;
	if (name == "k")
		admin_changed(*c.domain, AdminChange::k);
	return 0;
}

int LockServer::set_attr(unsigned int domain, const std::string &name, const std::string &text)
{
	if (domain >= domains_.size())
		return EINVAL;
	return store_attr(*domains_[domain], name, text);
}

int LockServer::stage_slot(Domain &d, unsigned int slot, const std::string &file,
			   const std::string &text)
{
	if (slot >= d.core.k)
		return ENXIO;
	uint64_t units[GPUSLOT_UNIT_WORDS];
	unsigned int priority = 0;
	if (file == "units") {
		if (!parse_partition(text, d.parts.nr_units, units))
			return EINVAL;
		// Units need a unit kind: gpuslotd sets it with the first layout.
		if (!gpuslot_partition_is_whole(units) && d.parts.unit_kind == GPUSLOT_UNIT_NONE)
			return EINVAL;
	} else if (!parse_uint(text, &priority) || priority > GPUSLOT_MAX_SLOT_PRIORITY) {
		return EINVAL;
	}
	// The first write copies the live layout; staging of an older
	// generation is stale and starts again from the live one.
	if (!d.staged || d.staged_from != d.core.generation) {
		d.staged_parts = d.parts;
		d.staged_from = d.core.generation;
		d.staged = true;
	}
	if (file == "units")
		std::memcpy(d.staged_parts.units[slot], units, sizeof(units));
	else
		d.staged_parts.priority[slot] = uint8_t(priority);
	return 0;
}

int LockServer::commit_staged(Domain &d, const std::string &text)
{
	unsigned long long from = 0;
	std::string_view v(text);
	if (!v.empty() && v.back() == '\n')
		v.remove_suffix(1);
	if (auto [end, err] = std::from_chars(v.data(), v.data() + v.size(), from);
	    v.empty() || err != std::errc() || end != v.data() + v.size())
		return EINVAL;
	if (!d.staged)
		return ENODATA;
	// Staged for a layout that is gone, or not the one the admin read:
	// dropped, as the module does.
	if (d.staged_from != d.core.generation || from != d.staged_from) {
		d.staged = false;
		return EAGAIN;
	}
	if (const std::string problem = layout_problem(d.staged_parts, d.core.k); !problem.empty()) {
		// Staging kept: the admin fixes a slot and commits again. The
		// log says which rule, as the module's dmesg line does.
		std::fprintf(stderr, "gpuslotd: gpu%u: commit refused: %s\n", d.id, problem.c_str());
		return EINVAL;
	}
	d.staged = false;
	if (std::memcmp(&d.parts, &d.staged_parts, sizeof(d.parts)) == 0)
		return 0; // the same layout again: no new generation
	d.parts = d.staged_parts;
	gpuslot_core_new_generation(&d.core);
	record_generation(d);
	work_layout_changed(d);
	admin_changed(d, AdminChange::partitions);
	return 0;
}

int LockServer::store_attr(Domain &d, const std::string &name, const std::string &text)
{
	unsigned int v = 0, slot;
	std::string file;
	if (slot_attr(name, &slot, &file))
		return stage_slot(d, slot, file, text);
	if (name == "commit")
		return commit_staged(d, text);
	if (name == "pci_bus_id")
		return parse_pci_bus_id(text, &d.pci_bus_id) ? 0 : EINVAL;
	if (!parse_uint(text, &v))
		return EINVAL;
	if (name == "k")
		return set_k(d, v, nullptr);
	if (name == "hqd_limit")
		return set_hqd_limit(d, v);
	if (name == "max_hold_ms") {
		if (v > GPUSLOT_MAX_MAX_HOLD_MS)
			return EINVAL;
		d.max_hold_ms = v;
		return 0;
	}
	if (name == "preempt_share" || name == "preempt_window_ms")
		return store_preempt_attr(d, name, v);
	if (name == "max_boost_share") {
		if (v < 1 || v > 100)
			return EINVAL;
		d.max_boost_share = v;
		return 0;
	}
	if (name == "boost_priority") {
		// Without CAP_SYS_NICE there is no boost to set: 0 stays. The
		// server runs above every boost it grants (run_above_boosts()):
		// at most GPUSLOT_MAX_BOOST_PRIORITY, as on the module.
		if (v > GPUSLOT_MAX_BOOST_PRIORITY || (v && !boost_))
			return v > GPUSLOT_MAX_BOOST_PRIORITY ? EINVAL : EPERM;
		d.boost_priority = v;
		run_above_boosts();
		return 0;
	}
	return ENOENT;
}

size_t LockServer::on_attr(Conn &c, uint32_t cmd, const char *data, size_t size)
{
	const char *nul = static_cast<const char *>(std::memchr(data, '\0', size));
	std::string name(data, nul ? size_t(nul - data) : size);
	std::string text;
	int err;
	if (size > kPage + name.size() + 1 || name.empty()) {
		err = EINVAL;
	} else if (cmd == GPUSLOT_WIRE_ATTR_READ) {
		err = nul ? EINVAL : attr_read(c, name, &text);
		if (!err && text.size() > GPUSLOT_WIRE_TABLE_MAX)
			err = EFBIG; // a table longer than the wire carries
	} else {
		const std::string value = nul ? std::string(nul + 1, data + size) : std::string();
		err = value.size() > kPage ? EINVAL : attr_write(c, name, value);
		text.clear();
	}
	reply(c, c.request_seq, cmd, err, text.data(), err ? 0 : text.size());
	return size_t(std::count(text.begin(), text.end(), '\n'));
}

} // namespace gpuslot
