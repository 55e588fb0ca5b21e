// SPDX-License-Identifier: GPL-2.0
#include "device/module.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

namespace fs = std::filesystem;

namespace gpuslot {

bool partition_is_whole(const gpuslot_partition &p)
{
	return std::all_of(std::begin(p.units), std::end(p.units),
			   [](uint64_t w) { return w == 0; });
}

bool ModuleLayout::all_whole() const
{
	return std::all_of(partitions.begin(), partitions.end(), partition_is_whole) &&
	       std::all_of(priorities.begin(), priorities.end(),
			   [](unsigned int p) { return p == 0; });
}

gpuslot_partition partition_from_mask(const std::vector<uint32_t> &mask)
{
	gpuslot_partition p{};
	for (size_t i = 0; i < mask.size() && i / 2 < GPUSLOT_UNIT_WORDS; i++)
		p.units[i / 2] |= uint64_t(mask[i]) << (32 * (i % 2));
	return p;
}

std::vector<uint32_t> mask_from_partition(const gpuslot_partition &p,
					  unsigned int nr_units)
{
	std::vector<uint32_t> mask((std::max(nr_units, 1u) + 31) / 32);
	for (size_t i = 0; i < mask.size(); i++)
		mask[i] = uint32_t(p.units[i / 2] >> (32 * (i % 2)));
	return mask;
}

std::string partition_text(const gpuslot_partition &p)
{
	if (partition_is_whole(p))
		return "all";
	int w = GPUSLOT_UNIT_WORDS - 1;
	while (!p.units[w])
		w--;
	char buf[32];
	std::string out = "0x";
	snprintf(buf, sizeof(buf), "%llx", (unsigned long long)p.units[w]);
	out += buf;
	while (w--) {
		snprintf(buf, sizeof(buf), "%016llx", (unsigned long long)p.units[w]);
		out += buf;
	}
	return out;
}

bool parse_partition(const std::string &text, gpuslot_partition *out)
{
	*out = gpuslot_partition{};
	if (text == "all")
		return true;
	std::string_view s = text;
	if (s.starts_with("0x") || s.starts_with("0X"))
		s.remove_prefix(2);
	if (s.empty() || s.size() > GPUSLOT_MAX_UNITS / 4)
		return false;
	for (size_t i = 0; i < s.size(); i++) {
		char c = s[s.size() - 1 - i];
		int v = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (v < 0)
			return false;
		out->units[i / 16] |= uint64_t(v) << (4 * (i % 16));
	}
	return true;
}

std::string partition_bitmap_text(const gpuslot_partition &p, unsigned int nr_units)
{
	if (partition_is_whole(p) || !nr_units)
		return "all";
	// lib/vsprintf.c bitmap_string(): 32-bit chunks, the first one as
	// wide as its bits need, the others 8 digits, joined by commas.
	const unsigned int bits = std::min<unsigned int>(nr_units, GPUSLOT_MAX_UNITS);
	std::string out;
	for (int chunk = int((bits + 31) / 32) - 1; chunk >= 0; chunk--) {
		const uint32_t v = uint32_t(p.units[chunk / 2] >> (32 * (chunk % 2)));
		const unsigned int width =
			unsigned(chunk) == (bits - 1) / 32 && bits % 32 ? (bits % 32 + 3) / 4 : 8;
		char buf[16];
		snprintf(buf, sizeof(buf), "%0*x", int(width), v);
		out += (out.empty() ? "" : ",") + std::string(buf);
	}
	return out;
}

bool parse_partition_bitmap(const std::string &text, gpuslot_partition *out)
{
	*out = gpuslot_partition{};
	std::string_view s = text;
	while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
		s.remove_suffix(1);
	if (s == "all")
		return true;
	if (s.empty())
		return false;
	// Chunks from the least significant one, at the end.
	unsigned int chunk = 0;
	for (;;) {
		const size_t comma = s.rfind(',');
		const std::string_view part = comma == std::string_view::npos ? s : s.substr(comma + 1);
		if (part.empty() || part.size() > 8 || chunk >= GPUSLOT_MAX_UNITS / 32)
			return false;
		uint32_t v = 0;
		auto [end, err] = std::from_chars(part.data(), part.data() + part.size(), v, 16);
		if (err != std::errc() || end != part.data() + part.size())
			return false;
		out->units[chunk / 2] |= uint64_t(v) << (32 * (chunk % 2));
		chunk++;
		if (comma == std::string_view::npos)
			return true;
		s = s.substr(0, comma);
	}
}

const char *unit_kind_name(uint32_t kind)
{
	switch (kind) {
	case GPUSLOT_UNIT_NONE: return "none";
	case GPUSLOT_UNIT_AMD_CU: return "amd-cu";
	case GPUSLOT_UNIT_NV_SM_GROUP: return "nv-sm-group";
	}
	return "unknown";
}

Device::~Device()
{
	if (fd_ >= 0)
		::close(fd_);
}

int Device::open(const std::string &path, std::string *error)
{
	fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
	if (fd_ >= 0)
		return 0;
	int err = errno;
	*error = path + ": " + strerror(err) +
		 (err == ENOENT ? " (is the gpuslot module loaded?)" : "");
	return err;
}

namespace {

int ioctl_errno(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? errno : 0;
}

} // namespace

int Device::attach(unsigned int domain) const
{
	gpuslot_attach a{};
	a.size = sizeof(a);
	a.domain = domain;
	return ioctl_errno(fd_, GPUSLOT_IOC_ATTACH, &a);
}

int Device::version(gpuslot_version *v) const
{
	*v = gpuslot_version{};
	v->size = sizeof(*v);
	return ioctl_errno(fd_, GPUSLOT_IOC_VERSION, v);
}

int Device::set_layout(ModuleLayout *l) const
{
	gpuslot_layout a{};
	a.size = sizeof(a);
	a.k = l->k;
	a.unit_kind = l->unit_kind;
	a.unit_size = l->unit_size;
	a.nr_units = l->nr_units;
	a.hqd_limit = l->hqd_limit;
	a.nr_partitions = l->partitions.size();
	a.partitions = reinterpret_cast<uintptr_t>(l->partitions.data());
	for (size_t i = 0; i < l->priorities.size() && i < GPUSLOT_MAX_SLOTS; i++)
		a.priority[i] = uint8_t(l->priorities[i]);
	if (l->expected_generation) {
		a.flags |= GPUSLOT_LAYOUT_EXPECT_GENERATION;
		a.expected_generation = l->expected_generation;
	}
	int err = ioctl_errno(fd_, GPUSLOT_IOC_SET_LAYOUT, &a);
	if (!err)
		l->generation = a.generation;
	return err;
}

int Device::get_layout(ModuleLayout *l) const
{
	std::vector<gpuslot_partition> parts(GPUSLOT_MAX_SLOTS);
	gpuslot_layout a{};
	a.size = sizeof(a);
	a.nr_partitions = parts.size();
	a.partitions = reinterpret_cast<uintptr_t>(parts.data());
	if (int err = ioctl_errno(fd_, GPUSLOT_IOC_GET_LAYOUT, &a))
		return err;
	l->k = a.k;
	l->unit_kind = a.unit_kind;
	l->unit_size = a.unit_size;
	l->nr_units = a.nr_units;
	l->hqd_limit = a.hqd_limit;
	l->generation = a.generation;
	parts.resize(std::min<size_t>(a.k, parts.size()));
	l->partitions = std::move(parts);
	l->priorities.assign(a.priority, a.priority + std::min<size_t>(a.k, GPUSLOT_MAX_SLOTS));
	return 0;
}

fs::path domain_dir(const fs::path &root, unsigned int domain)
{
	return root / ("gpu" + std::to_string(domain));
}

std::vector<unsigned int> list_domains(const fs::path &root)
{
	std::vector<unsigned int> out;
	std::error_code ec;
	for (auto &e : fs::directory_iterator(root, ec)) {
		std::string name = e.path().filename();
		unsigned int id;
		if (!name.starts_with("gpu"))
			continue;
		auto [end, err] = std::from_chars(name.data() + 3,
						  name.data() + name.size(), id);
		if (err == std::errc() && end == name.data() + name.size())
			out.push_back(id);
	}
	std::sort(out.begin(), out.end());
	return out;
}

int write_domain_file(const fs::path &root, unsigned int domain,
		      const std::string &attr, const std::string &text)
{
	std::string path = domain_dir(root, domain) / attr;
	int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	ssize_t n = ::write(fd, text.data(), text.size());
	int err = n < 0 ? errno : (size_t(n) == text.size() ? 0 : EIO);
	::close(fd);
	return err;
}

namespace {

std::vector<std::string> words(const std::string &line)
{
	std::istringstream in(line);
	std::vector<std::string> out;
	for (std::string w; in >> w;)
		out.push_back(w);
	return out;
}

template <class T> bool number(const std::string &s, T *out, int base = 10)
{
	std::string_view v = s;
	if (base == 16 && (v.starts_with("0x") || v.starts_with("0X")))
		v.remove_prefix(2);
	auto [end, err] = std::from_chars(v.data(), v.data() + v.size(), *out,
					  base);
	return err == std::errc() && end == v.data() + v.size() && !v.empty();
}

// A task name as the module writes it: one word, each byte outside
// '!'..'~' and the backslash as \xHH, an empty name as \x00. Anything else
// is refused: a table line is never taken for more than it says.
bool unescape_name(const std::string &in, std::string *out)
{
	std::string name;
	if (in == "\\x00") {
		out->clear();
		return true;
	}
	for (size_t i = 0; i < in.size(); i++) {
		unsigned char c = in[i];
		if (c <= ' ' || c > '~')
			return false;
		if (c != '\\') {
			name += char(c);
			continue;
		}
		unsigned int byte;
		if (i + 3 >= in.size() || in[i + 1] != 'x' ||
		    !number(in.substr(i + 2, 2), &byte, 16) || !byte)
			return false;
		name += char(byte);
		i += 3;
	}
	*out = name;
	return !name.empty();
}

std::optional<HoldBoost> hold_boost(const std::string &w)
{
	if (w == "boosted")
		return HoldBoost::boosted;
	if (w == "unboosted")
		return HoldBoost::unboosted;
	if (w == "overrun")
		return HoldBoost::overrun;
	return std::nullopt;
}

class Reader {
public:
	Reader(const DomainAttrs &attrs, unsigned int domain, std::string *error)
		: attrs_(attrs), domain_(domain), error_(error)
	{
	}

	// 0 or the errno; the text as it is.
	int raw(const std::string &attr, std::string *out)
	{
		return attrs_.read(domain_, attr, out);
	}

	bool text(const std::string &attr, std::string *out)
	{
		if (int err = raw(attr, out))
			return fail(attr, 0, std::string("cannot be read: ") + strerror(err));
		return true;
	}

	// One value: the file's text without its newline.
	bool word(const std::string &attr, std::string *out)
	{
		if (!text(attr, out))
			return false;
		if (!out->empty() && out->back() == '\n')
			out->pop_back();
		return true;
	}

	template <class T> bool value(const std::string &attr, T *out, int base = 10)
	{
		std::string t;
		if (!word(attr, &t))
			return false;
		return number(t, out, base) ||
		       fail(attr, 1, std::string("expected a ") + (base == 16 ? "hex " : "") +
					     "number, got '" + t + "'");
	}

	// Calls @parse(words) per line of @t; it returns false on a bad line.
	template <class F> bool lines(const std::string &attr, const std::string &t, F parse)
	{
		std::istringstream in(t);
		unsigned int n = 0;
		for (std::string line; std::getline(in, line);) {
			n++;
			if (!parse(words(line), line))
				return fail(attr, n, "cannot parse '" + line + "'");
		}
		return true;
	}

	bool fail(const std::string &attr, unsigned int line, const std::string &what)
	{
		*error_ = attrs_.name(domain_, attr) +
			  (line ? ":" + std::to_string(line) : "") + ": " + what;
		return false;
	}

private:
	const DomainAttrs &attrs_;
	unsigned int domain_;
	std::string *error_;
};

// The one-value files: every one must be there and parse.
bool read_values(Reader &r, DomainState *s)
{
	std::string kind;
	if (!r.value("k", &s->k) || !r.value("generation", &s->generation) ||
	    !r.value("boost_priority", &s->boost_priority) ||
	    !r.value("max_hold_ms", &s->max_hold_ms) ||
	    !r.value("hqd_limit", &s->hqd_limit) || !r.value("hqd_used", &s->hqd_used) ||
	    !r.value("hqd_waiters", &s->hqd_waiters) ||
	    !r.value("nr_holders", &s->nr_holders) ||
	    !r.value("nr_waiters", &s->nr_waiters) || !r.value("held_mask", &s->held_mask, 16) ||
	    !r.value("nr_units", &s->nr_units) || !r.value("unit_size", &s->unit_size) ||
	    !r.word("unit_kind", &kind))
		return false;
	if (kind == "none")
		s->unit_kind = GPUSLOT_UNIT_NONE;
	else if (kind == "amd-cu")
		s->unit_kind = GPUSLOT_UNIT_AMD_CU;
	else if (kind == "nv-sm-group")
		s->unit_kind = GPUSLOT_UNIT_NV_SM_GROUP;
	else
		return r.fail("unit_kind", 1,
			      "expected none, amd-cu or nv-sm-group, got '" + kind + "'");
	const std::pair<const char *, uint64_t *> counters[] = {
		{"acquisitions", &s->acquisitions}, {"contended", &s->contended},
		{"timeouts", &s->timeouts},	    {"interrupted", &s->interrupted},
		{"total_wait_ns", &s->total_wait_ns}, {"max_wait_ns", &s->max_wait_ns},
		{"max_hold_ns", &s->max_hold_ns},   {"overruns", &s->overruns}};
	for (const auto &[name, field] : counters)
		if (!r.value(std::string("stats/") + name, field))
			return false;
	if (s->k < 1 || s->k > GPUSLOT_MAX_SLOTS)
		return r.fail("k", 1, "k " + std::to_string(s->k) + " is not 1 to 64");
	s->partitions.clear();
	s->priorities.clear();
	for (unsigned int i = 0; i < s->k; i++) {
		const std::string dir = "slot" + std::to_string(i) + "/";
		std::string units;
		gpuslot_partition p;
		unsigned int prio;
		if (!r.word(dir + "units", &units) || !r.value(dir + "priority", &prio))
			return false;
		if (!parse_partition_bitmap(units, &p))
			return r.fail(dir + "units", 1,
				      "expected 'all' or a bitmap such as 'ffff,ffffffff', got '" +
					      units + "'");
		if (prio > GPUSLOT_MAX_SLOT_PRIORITY)
			return r.fail(dir + "priority", 1,
				      "priority " + std::to_string(prio) + " is past 15");
		s->partitions.push_back(p);
		s->priorities.push_back(prio);
	}
	// Optional: a domain that no GPU was named for has an empty one.
	if (std::string pci; !r.raw("pci_bus_id", &pci)) {
		while (!pci.empty() && std::isspace((unsigned char)pci.back()))
			pci.pop_back();
		s->pci_bus_id = pci;
	}
	return true;
}

// The debug/ tables, where this reader may read them. false only for a
// table that is there but does not parse.
bool read_tables(Reader &r, bool socket, DomainState *s)
{
	std::string holders, waiters, queues, hist;
	int err = r.raw("debug/holders", &holders);
	if (!err)
		err = r.raw("debug/waiters", &waiters);
	if (!err)
		err = r.raw("debug/queues", &queues);
	if (!err)
		err = r.raw("debug/wait_hist", &hist);
	if (err) {
		s->tables = false;
		s->tables_note =
			err == EACCES || err == EPERM
				? (socket ? "the holder, waiter and queue tables are for admins "
					    "only (gpuslotd's debug/ attributes; run as root)"
					  : "the holder, waiter and queue tables are root's only "
					    "(debugfs, /sys/kernel/debug/gpuslot; run as root)")
			: err == ENOENT ? (socket ? "this gpuslotd serves no debug/ tables"
						  : "no debugfs tables (is debugfs mounted on "
						    "/sys/kernel/debug, and the kernel built with "
						    "CONFIG_DEBUG_FS?)")
					: std::string("the tables cannot be read: ") + strerror(err);
		return true;
	}
	s->tables = true;
	s->tables_note.clear();
	bool ok = r.lines("debug/holders", holders, [&](const auto &w, const std::string &) {
		Holder h;
		auto boost = w.size() == 6 ? hold_boost(w[5]) : std::nullopt;
		if (!boost || !number(w[0], &h.slot) || !number(w[1], &h.pid) ||
		    !number(w[2], &h.tid) || !unescape_name(w[3], &h.comm) ||
		    !number(w[4], &h.held_ns))
			return false;
		h.boost = *boost;
		s->holders.push_back(h);
		return true;
	});
	ok = ok && r.lines("debug/waiters", waiters, [&](const auto &w, const std::string &) {
		Waiter x;
		if (w.size() != 5 || !number(w[0], &x.pid) || !number(w[1], &x.tid) ||
		    !unescape_name(w[2], &x.comm) || !number(w[3], &x.waited_ns) ||
		    !number(w[4], &x.allowed, 16))
			return false;
		s->waiters.push_back(x);
		return true;
	});
	ok = ok && r.lines("debug/queues", queues, [&](const auto &w, const std::string &) {
		QueueUser q;
		if (w.size() != 3 || !number(w[0], &q.pid) || !unescape_name(w[1], &q.comm) ||
		    !number(w[2], &q.reserved))
			return false;
		s->queues.push_back(q);
		return true;
	});
	// wait_hist: "bucket_lo_ns count", bucket i from 2^i ns (the first
	// also counts 0 ns), in order.
	ok = ok && r.lines("debug/wait_hist", hist, [&](const auto &w, const std::string &) {
		const size_t i = s->wait_hist.size();
		uint64_t lo, count;
		if (w.size() != 2 || !number(w[0], &lo) || !number(w[1], &count) ||
		    i >= GPUSLOT_HIST_BUCKETS || lo != 1ULL << i)
			return false;
		s->wait_hist.push_back(count);
		return true;
	});
	return ok;
}

} // namespace

bool read_domain_state(const fs::path &root, unsigned int domain,
		       DomainState *out, std::string *error, const fs::path &debugfs_root)
{
	return read_domain_state(DomainAttrs::module(root, debugfs_root), domain, out, error);
}

bool read_domain_state(const DomainAttrs &attrs, unsigned int domain, DomainState *out,
		       std::string *error)
{
	// One file at a time is no snapshot: a layout that changed while
	// they were read (generation moved) is read again.
	for (int tries = 0;; tries++) {
		DomainState s;
		s.domain = domain;
		Reader r(attrs, domain, error);
		if (!read_values(r, &s)) {
			// A slot file gone with a smaller k: read it again.
			if (tries < 3 && (error->find(": No such device or address") != std::string::npos ||
					  error->find(": No such file or directory") != std::string::npos))
				continue;
			return false;
		}
		uint64_t after = 0;
		if (!r.value("generation", &after))
			return false;
		if (after != s.generation && tries < 3)
			continue;
		if (!read_tables(r, attrs.on_socket(), &s))
			return false;
		*out = std::move(s);
		return true;
	}
}

} // namespace gpuslot
