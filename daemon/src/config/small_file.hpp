// SPDX-License-Identifier: GPL-2.0
// Reading a small text file that a person or the kernel wrote: the
// configuration, a KFD properties file. A FIFO, a device (/dev/zero) or a
// file past @max is refused, never waited on or read without end, and a
// failure names the file and the real errno.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace gpuslot {

constexpr size_t kMaxSmallFile = 1 << 20; // 1 MiB

// The file's text; false with *error set ("PATH: reason"), and *err the
// errno where there is one (ENOENT for a missing file, else 0).
bool read_small_file(const std::filesystem::path &path, std::string *text,
		     std::string *error, int *err = nullptr,
		     size_t max = kMaxSmallFile);

} // namespace gpuslot
