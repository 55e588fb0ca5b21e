// SPDX-License-Identifier: GPL-2.0
#include "module.hpp"

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
	return std::all_of(partitions.begin(), partitions.end(),
			   partition_is_whole);
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

	bool text(const char *attr, std::string *out)
	{
		if (int err = attrs_.read(domain_, attr, out))
			return fail(attr, 0, std::string("cannot be read: ") + strerror(err));
		return true;
	}

	template <class T> bool value(const char *attr, T *out)
	{
		std::string t;
		if (!text(attr, &t))
			return false;
		if (!t.empty() && t.back() == '\n')
			t.pop_back();
		return number(t, out) || fail(attr, 1, "expected a number, got '" + t + "'");
	}

	// Calls @parse(words) per line; it returns false on a bad line.
	template <class F> bool lines(const char *attr, F parse)
	{
		std::string t;
		if (!text(attr, &t))
			return false;
		std::istringstream in(t);
		unsigned int n = 0;
		for (std::string line; std::getline(in, line);) {
			n++;
			if (!parse(words(line), line))
				return fail(attr, n, "cannot parse '" + line + "'");
		}
		return true;
	}

	bool fail(const char *attr, unsigned int line, const std::string &what)
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

} // namespace

bool read_domain_state(const fs::path &root, unsigned int domain,
		       DomainState *out, std::string *error)
{
	return read_domain_state(DomainAttrs::module(root), domain, out, error);
}

bool read_domain_state(const DomainAttrs &attrs, unsigned int domain, DomainState *out,
		       std::string *error)
{
	DomainState s;
	s.domain = domain;
	Reader r(attrs, domain, error);
	if (!r.value("k", &s.k) || !r.value("generation", &s.generation) ||
	    !r.value("boost_priority", &s.boost_priority) ||
	    !r.value("max_hold_ms", &s.max_hold_ms) ||
	    !r.value("hqd_limit", &s.hqd_limit) ||
	    !r.value("hqd_used", &s.hqd_used) ||
	    !r.value("hqd_waiters", &s.hqd_waiters))
		return false;

	std::string units;
	if (!r.text("units", &units))
		return false;
	auto uw = words(units);
	if (uw.size() != 3 || !number(uw[1], &s.nr_units) ||
	    !number(uw[2], &s.unit_size))
		return r.fail("units", 1, "expected '<kind> <units> <unit size>'");
	s.unit_kind = uw[0] == "amd-cu"		? GPUSLOT_UNIT_AMD_CU
		      : uw[0] == "nv-sm-group" ? GPUSLOT_UNIT_NV_SM_GROUP
					       : GPUSLOT_UNIT_NONE;

	bool ok = r.lines("partitions", [&](const auto &w, const std::string &) {
		if (w.size() == 3 && w[0] == "...")
			return true; // a table cut at a page: GET_LAYOUT has it all
		unsigned int slot;
		gpuslot_partition p;
		if (w.size() != 2 || !number(w[0], &slot) ||
		    slot != s.partitions.size() || !parse_partition(w[1], &p))
			return false;
		s.partitions.push_back(p);
		return true;
	});
	ok = ok && r.lines("holders", [&](const auto &w, const std::string &) {
		if (w.size() == 3 && w[0] == "...")
			return true; // 64 holders with long names
		Holder h;
		auto boost = w.size() == 6 ? hold_boost(w[5]) : std::nullopt;
		if (!boost || !number(w[0], &h.slot) || !number(w[1], &h.pid) ||
		    !number(w[2], &h.tid) || !unescape_name(w[3], &h.comm) ||
		    !number(w[4], &h.held_ns))
			return false;
		h.boost = *boost;
		s.holders.push_back(h);
		return true;
	});
	ok = ok && r.lines("waiters", [&](const auto &w, const std::string &) {
		if (w.size() == 3 && w[0] == "...")
			return number(w[1], &s.more_waiters);
		Waiter x;
		if (w.size() != 5 || !number(w[0], &x.pid) || !number(w[1], &x.tid) ||
		    !unescape_name(w[2], &x.comm) || !number(w[3], &x.waited_ns) ||
		    !number(w[4], &x.allowed, 16))
			return false;
		s.waiters.push_back(x);
		return true;
	});
	ok = ok && r.lines("queues", [&](const auto &w, const std::string &) {
		if (w.size() == 3 && w[0] == "...")
			return true;
		QueueUser q;
		if (w.size() != 3 || !number(w[0], &q.pid) ||
		    !unescape_name(w[1], &q.comm) || !number(w[2], &q.reserved))
			return false;
		s.queues.push_back(q);
		return true;
	});
	ok = ok && r.lines("stats", [&](const auto &w, const std::string &) {
		if (!w.empty() && w[0] == "wait_hist_log2_ns") {
			s.wait_hist.assign(w.size() - 1, 0);
			for (size_t i = 1; i < w.size(); i++)
				if (!number(w[i], &s.wait_hist[i - 1]))
					return false;
			return true;
		}
		const std::pair<const char *, uint64_t *> counters[] = {
			{"acquisitions", &s.acquisitions}, {"contended", &s.contended},
			{"timeouts", &s.timeouts},	   {"interrupted", &s.interrupted},
			{"total_wait_ns", &s.total_wait_ns}, {"max_wait_ns", &s.max_wait_ns},
			{"max_hold_ns", &s.max_hold_ns},   {"overruns", &s.overruns}};
		for (const auto &[name, field] : counters)
			if (w.size() == 2 && w[0] == name)
				return number(w[1], field);
		return true; // a counter of a newer module
	});
	// Older modules have no pci_bus_id: it is optional.
	if (ok && !attrs.read(domain, "pci_bus_id", &s.pci_bus_id)) {
		while (!s.pci_bus_id.empty() && std::isspace((unsigned char)s.pci_bus_id.back()))
			s.pci_bus_id.pop_back();
	} else {
		s.pci_bus_id.clear();
	}
	if (!ok)
		return false;
	*out = std::move(s);
	return true;
}

} // namespace gpuslot
