// SPDX-License-Identifier: GPL-2.0
// A GPU domain's attributes wherever the lock lives: the module's sysfs tree
// (/sys/class/gpuslot/gpu<N>/, one value per file) with its debugfs tables
// (/sys/kernel/debug/gpuslot/gpu<N>/, root only), or gpuslotd's socket
// transport, which serves the same names, text and errnos
// (GPUSLOT_WIRE_ATTR_READ/WRITE): "k", "slot3/units", "stats/contended",
// "commit", and "debug/holders" for the table debugfs has as
// gpu<N>/holders. gpuslotctl reads and changes state through it on either
// transport.
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
	static DomainAttrs module(const std::filesystem::path &sysfs_root,
				  const std::filesystem::path &debugfs_root = "/sys/kernel/debug/gpuslot");
	static DomainAttrs socket(const std::filesystem::path &socket_dir);

	bool on_socket() const { return socket_; }
	// The sysfs root, or the socket directory.
	const std::filesystem::path &where() const { return where_; }
	// Where the module's debug/ tables are (debugfs); empty on the socket.
	const std::filesystem::path &debugfs() const { return debugfs_; }
	// The domains there, in order: gpu<N>/ directories, or gpu<N>.sock.
	std::vector<unsigned int> domains() const;
	// 0 or the errno of sysfs (or of the socket, which gives the same).
	int read(unsigned int domain, const std::string &attr, std::string *text) const;
	int write(unsigned int domain, const std::string &attr, const std::string &text) const;
	// The attribute's name for messages: a sysfs (or debugfs) path, or
	// "<socket>: <attr>".
	std::string name(unsigned int domain, const std::string &attr) const;

private:
	DomainAttrs(bool socket, std::filesystem::path where, std::filesystem::path debugfs = {})
		: socket_(socket), where_(std::move(where)), debugfs_(std::move(debugfs))
	{
	}
	int connection(unsigned int domain, LockFile **out) const;
	// The module's file for @attr: debug/<table> under debugfs, the rest
	// under sysfs.
	std::filesystem::path path(unsigned int domain, const std::string &attr) const;

	bool socket_;
	std::filesystem::path where_;
	std::filesystem::path debugfs_;
	// One connection per domain, opened on first use.
	mutable std::map<unsigned int, std::shared_ptr<LockFile>> files_;
};

} // namespace gpuslot
