// SPDX-License-Identifier: GPL-2.0
// The socket transport's sysfs: GPUSLOT_WIRE_ATTR_READ and _WRITE read and
// write a domain's attributes under the names, with the text and with the
// errors of /sys/kernel/gpuslot/gpu<N>/ (kmod/sysfs.c, domain.c, layout.c,
// hqd.c), so that gpuslotctl, gpuslotd and the tests parse one format on
// both transports. The tables stop at a sysfs page as the module's do.
#include "lock_server.hpp"
#include "server_state.hpp"

#include <sys/socket.h>
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
constexpr size_t kLineMax = 128, kMoreMax = 32; // domain.h's table limits

uint64_t since(uint64_t now, uint64_t start)
{
	return now > start ? now - start : 0;
}

// A table line fits while it and the "... N more" line fit in the page.
bool table_full(const std::string &t, size_t line_max = kLineMax)
{
	return t.size() + line_max + kMoreMax > kPage;
}

void table_end(std::string *t, unsigned int skipped)
{
	if (skipped)
		*t += "... " + std::to_string(skipped) + " more\n";
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

// "all" or a non-zero hex bitmap of at most @nr_units bits
// (gpuslot_parse_partition()).
bool parse_partition(std::string s, uint32_t nr_units, uint64_t units[GPUSLOT_UNIT_WORDS])
{
	std::fill(units, units + GPUSLOT_UNIT_WORDS, 0);
	if (s == "all")
		return true;
	if (s.size() > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s = s.substr(2);
	if (s.empty() || s.size() > GPUSLOT_MAX_UNITS / 4)
		return false;
	for (size_t i = 0; i < s.size(); i++) {
		const char ch = s[s.size() - 1 - i];
		unsigned int v;
		if (std::from_chars(&ch, &ch + 1, v, 16).ec != std::errc())
			return false;
		units[i / 16] |= uint64_t(v) << (4 * (i % 16));
	}
	return !gpuslot_partition_is_whole(units) && gpuslot_partition_fits(units, nr_units);
}

std::string partition_line(unsigned int slot, const uint64_t units[GPUSLOT_UNIT_WORDS])
{
	if (gpuslot_partition_is_whole(units))
		return std::to_string(slot) + " all\n";
	int w = GPUSLOT_UNIT_WORDS - 1;
	while (!units[w])
		w--;
	char word[24];
	std::snprintf(word, sizeof(word), "0x%llx", static_cast<unsigned long long>(units[w]));
	std::string line = std::to_string(slot) + " " + word;
	while (w--) {
		std::snprintf(word, sizeof(word), "%016llx", static_cast<unsigned long long>(units[w]));
		line += word;
	}
	return line + "\n";
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

int LockServer::attr_read(const Domain &d, const std::string &name, std::string *text) const
{
	auto line = [](auto v) { return std::to_string(v) + "\n"; };
	std::string t;
	if (name == "k") {
		t = line(d.core.k);
	} else if (name == "boost_priority") {
		t = line(d.boost_priority);
	} else if (name == "max_hold_ms") {
		t = line(d.max_hold_ms);
	} else if (name == "max_boost_share") {
		t = line(d.max_boost_share);
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
	} else if (name == "units") {
		t = std::string(kUnitNames[d.parts.unit_kind]) + " " +
		    std::to_string(d.parts.nr_units) + " " + std::to_string(d.parts.unit_size) + "\n";
	} else if (name == "partitions") {
		const size_t line_max = 6 + (d.parts.nr_units + 3) / 4 + 1;
		unsigned int skipped = 0;
		for (unsigned int slot = 0; slot < d.core.k; slot++) {
			if (table_full(t, line_max))
				skipped++;
			else
				t += partition_line(slot, d.parts.units[slot]);
		}
		table_end(&t, skipped);
	} else if (name == "holders") {
		static const char *const boost[] = {"unboosted", "boosted", "overrun"};
		const uint64_t now = now_ns();
		unsigned int skipped = 0;
		for (unsigned int slot = 0; slot < GPUSLOT_MAX_SLOTS; slot++) {
			const Conn *c = d.holder[slot];
			if (const Orphan *o = d.orphan[slot]; o && !table_full(t)) {
				// Kept for its holder to reclaim (a gpuslotd died).
				t += std::to_string(slot) + " " + std::to_string(o->pid) + " " +
				     std::to_string(o->tid) + " " + task_name(o->pid, o->tid) +
				     " 0 unboosted\n";
				continue;
			}
			if (!c)
				continue;
			if (table_full(t)) {
				skipped++;
				continue;
			}
			t += std::to_string(slot) + " " + std::to_string(c->holder_pid) + " " +
			     std::to_string(c->holder_tid) + " " +
			     task_name(c->holder_pid, c->holder_tid) +
			     " " + std::to_string(since(now, c->hold_start_ns)) + " " +
			     (c->state == Conn::granted ? "pending" : boost[c->hold_boost]) + "\n";
		}
		table_end(&t, skipped);
	} else if (name == "waiters") {
		const uint64_t now = now_ns();
		unsigned int shown = 0;
		for (const ::list_head *n = d.core.waiters.next; n != &d.core.waiters; n = n->next) {
			if (table_full(t))
				break;
			const auto *cw = list_entry(n, gpuslot_core_waiter, node);
			const Conn &c = waiting_conn(cw);
			char allowed[24];
			std::snprintf(allowed, sizeof(allowed), "0x%llx",
				      static_cast<unsigned long long>(cw->allowed));
			t += std::to_string(c.acquire_pid) + " " + std::to_string(c.acquire_tid) +
			     " " + task_name(c.acquire_pid, c.acquire_tid) + " " +
			     std::to_string(since(now, c.start_ns)) + " " + allowed + "\n";
			shown++;
		}
		table_end(&t, d.core.nr_waiters - shown);
	} else if (name == "queues") {
		unsigned int users = 0, shown = 0;
		for (const auto &[fd, c] : conns_) {
			if (c->domain != &d || !c->hqd_reserved)
				continue;
			users++;
			if (table_full(t))
				continue;
			t += std::to_string(c->hqd_pid) + " " + task_name(c->hqd_pid, c->hqd_pid) + " " +
			     std::to_string(c->hqd_reserved) + "\n";
			shown++;
		}
		table_end(&t, users - shown);
	} else if (name == "stats") {
		const gpuslot_stats &s = d.stats;
		std::ostringstream o;
		o << "acquisitions " << s.acquisitions << "\ncontended " << s.contended
		  << "\ntimeouts " << s.timeouts << "\ninterrupted " << s.interrupted
		  << "\ntotal_wait_ns " << s.total_wait_ns << "\nmax_wait_ns " << s.max_wait_ns
		  << "\nmax_hold_ns " << s.max_hold_ns << "\noverruns " << s.overruns
		  << "\nwait_hist_log2_ns";
		for (uint64_t b : s.wait_hist)
			o << " " << b;
		o << "\n";
		t = o.str();
	} else {
		return ENOENT;
	}
	*text = std::move(t);
	return 0;
}

int LockServer::attr_write(Conn &c, const std::string &name, const std::string &text)
{
	static const char *const read_only[] = {"generation", "holders", "waiters", "stats",
						"hqd_used",   "hqd_waiters", "queues", "units"};
	static const char *const writable[] = {"k",	    "boost_priority", "max_hold_ms",
					       "hqd_limit", "partitions",     "pci_bus_id",
					       "max_boost_share"};
	auto named = [&](const auto &list) {
		return std::any_of(std::begin(list), std::end(list),
				   [&](const char *n) { return name == n; });
	};
	if (named(read_only))
		return EACCES;
	if (!named(writable))
		return ENOENT;
	// As sysfs: a file mode (here: who connected) and capable() at the write.
	if (!c.admin_at_connect)
		return EACCES;
	if (!admin(c))
		return EPERM;
	if (int err = store_attr(*c.domain, name, text))
		return err;
	if (name == "k")
		admin_changed(*c.domain, AdminChange::k);
	else if (name == "partitions")
		admin_changed(*c.domain, AdminChange::partitions);
	return 0;
}

int LockServer::set_attr(unsigned int domain, const std::string &name, const std::string &text)
{
	if (domain >= domains_.size())
		return EINVAL;
	return store_attr(*domains_[domain], name, text);
}

int LockServer::store_attr(Domain &d, const std::string &name, const std::string &text)
{
	unsigned int v = 0;
	if (name == "pci_bus_id")
		return parse_pci_bus_id(text, &d.pci_bus_id) ? 0 : EINVAL;
	if (name != "partitions" && !parse_uint(text, &v))
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
	// partitions: "<slot> <all|hex mask>" lines over the current layout.
	if (d.parts.unit_kind == GPUSLOT_UNIT_NONE)
		return EINVAL; // no unit kind yet: gpuslotd sets it with the first layout
	gpuslot_partitions parts = d.parts;
	std::istringstream in(text);
	for (std::string l; std::getline(in, l);) {
		std::istringstream words(trimmed(l));
		std::string slot_word, mask, extra;
		if (!(words >> slot_word))
			continue;
		unsigned int slot;
		if (!(words >> mask) || (words >> extra) || !parse_uint(slot_word, &slot) ||
		    slot >= d.core.k || !parse_partition(mask, parts.nr_units, parts.units[slot]))
			return EINVAL;
	}
	if (gpuslot_partitions_check(&parts, d.core.k))
		return EINVAL; // two partitions share a unit
	d.parts = parts;
	gpuslot_core_new_generation(&d.core);
	record_generation(d);
	return 0;
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
		err = nul ? EINVAL : attr_read(*c.domain, name, &text);
	} else {
		const std::string value = nul ? std::string(nul + 1, data + size) : std::string();
		err = value.size() > kPage ? EINVAL : attr_write(c, name, value);
		text.clear();
	}
	reply(c, c.request_seq, cmd, err, text.data(), err ? 0 : text.size());
	return size_t(std::count(text.begin(), text.end(), '\n'));
}

} // namespace gpuslot
