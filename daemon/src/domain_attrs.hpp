// SPDX-License-Identifier: GPL-2.0
// A GPU domain's attributes wherever the lock lives: the module's sysfs tree
// (/sys/kernel/gpuslot/gpu<N>/), or gpuslotd's socket transport, which
// serves the same names, text and errnos (GPUSLOT_WIRE_ATTR_READ/WRITE).
// gpuslotctl reads and changes state through it on either transport.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gpuslot {

class LockFile;

class DomainAttrs {
public:
	static DomainAttrs module(const std::filesystem::path &sysfs_root);
	static DomainAttrs socket(const std::filesystem::path &socket_dir);

	bool on_socket() const { return socket_; }
	// The sysfs root, or the socket directory.
	const std::filesystem::path &where() const { return where_; }
	// The domains there, in order: gpu<N>/ directories, or gpu<N>.sock.
	std::vector<unsigned int> domains() const;
	// 0 or the errno of sysfs (or of the socket, which gives the same).
	int read(unsigned int domain, const std::string &attr, std::string *text) const;
	int write(unsigned int domain, const std::string &attr, const std::string &text) const;
	// The attribute's name for messages: a sysfs path, or "<socket>: <attr>".
	std::string name(unsigned int domain, const std::string &attr) const;

private:
	DomainAttrs(bool socket, std::filesystem::path where)
		: socket_(socket), where_(std::move(where))
	{
	}
	int connection(unsigned int domain, LockFile **out) const;

	bool socket_;
	std::filesystem::path where_;
	// One connection per domain, opened on first use.
	mutable std::map<unsigned int, std::shared_ptr<LockFile>> files_;
};

} // namespace gpuslot
