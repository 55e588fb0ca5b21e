// SPDX-License-Identifier: GPL-2.0
#include "domain_attrs.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>

#include "lock_file.hpp"
#include "module.hpp"

namespace fs = std::filesystem;

namespace gpuslot {

DomainAttrs DomainAttrs::module(const fs::path &sysfs_root)
{
	return DomainAttrs(false, sysfs_root);
}

DomainAttrs DomainAttrs::socket(const fs::path &socket_dir)
{
	return DomainAttrs(true, socket_dir);
}

std::vector<unsigned int> DomainAttrs::domains() const
{
	// gpu<N> (a directory of sysfs) or gpu<N>.sock (a socket).
	const std::string suffix = socket_ ? ".sock" : "";
	std::vector<unsigned int> out;
	std::error_code ec;
	for (auto &e : fs::directory_iterator(where_, ec)) {
		const std::string name = e.path().filename();
		if (!name.starts_with("gpu") || !name.ends_with(suffix) ||
		    name.size() <= 3 + suffix.size())
			continue;
		const char *end = name.data() + name.size() - suffix.size();
		unsigned int id;
		auto [stop, err] = std::from_chars(name.data() + 3, end, id);
		if (err == std::errc() && stop == end)
			out.push_back(id);
	}
	std::sort(out.begin(), out.end());
	return out;
}

int DomainAttrs::connection(unsigned int domain, LockFile **out) const
{
	auto &f = files_[domain];
	if (!f) {
		std::unique_ptr<LockFile> file;
		std::string error;
		if (int err = open_lock_file(Transport::socket, where_, domain, &file, &error))
			return -err;
		f = std::move(file);
	}
	*out = f.get();
	return 0;
}

int DomainAttrs::read(unsigned int domain, const std::string &attr, std::string *text) const
{
	if (socket_) {
		LockFile *f;
		if (int err = connection(domain, &f))
			return err;
		return f->read_attr(attr, text);
	}
	std::ifstream in(where_ / ("gpu" + std::to_string(domain)) / attr);
	if (!in)
		return errno ? errno : ENOENT;
	std::ostringstream t;
	t << in.rdbuf();
	*text = t.str();
	return 0;
}

int DomainAttrs::write(unsigned int domain, const std::string &attr, const std::string &text) const
{
	if (socket_) {
		LockFile *f;
		if (int err = connection(domain, &f))
			return err;
		return f->write_attr(attr, text);
	}
	return write_domain_file(where_, domain, attr, text);
}

std::string DomainAttrs::name(unsigned int domain, const std::string &attr) const
{
	const std::string gpu = "gpu" + std::to_string(domain);
	return socket_ ? (where_ / (gpu + ".sock")).string() + ": " + attr
		       : (where_ / gpu / attr).string();
}

} // namespace gpuslot
