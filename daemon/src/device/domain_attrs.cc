// SPDX-License-Identifier: GPL-2.0
#include "device/domain_attrs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>

#include "lock_file.hpp"
#include "device/module.hpp"

namespace fs = std::filesystem;

namespace gpuslot {

DomainAttrs DomainAttrs::module(const fs::path &sysfs_root, const fs::path &debugfs_root)
{
	return DomainAttrs(false, sysfs_root, debugfs_root);
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

fs::path DomainAttrs::path(unsigned int domain, const std::string &attr) const
{
	const std::string gpu = "gpu" + std::to_string(domain);
	if (attr.starts_with("debug/"))
		return debugfs_ / gpu / attr.substr(6);
	return where_ / gpu / attr;
}

int DomainAttrs::read(unsigned int domain, const std::string &attr, std::string *text) const
{
	if (socket_) {
		LockFile *f;
		if (int err = connection(domain, &f))
			return err;
		return f->read_attr(attr, text);
	}
	// read(2) itself, not a stream: its errno (EACCES for debugfs's
	// root-only tables, ENXIO for a retired slot) is the answer.
	const fs::path p = path(domain, attr);
	int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	std::string t;
	char buf[4096];
	for (;;) {
		ssize_t n = ::read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;
			::close(fd);
			return err;
		}
		if (n == 0)
			break;
		t.append(buf, size_t(n));
	}
	::close(fd);
	*text = std::move(t);
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
		       : path(domain, attr).string();
}

} // namespace gpuslot
