// SPDX-License-Identifier: GPL-2.0
#include "config/small_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuslot {

bool read_small_file(const std::filesystem::path &path, std::string *text,
		     std::string *error, int *err, size_t max)
{
	auto fail = [&](int e, const std::string &why) {
		if (err)
			*err = e;
		*error = path.string() + ": " + why;
		return false;
	};
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return fail(errno, strerror(errno));
	struct stat st;
	if (fstat(fd, &st)) {
		int e = errno;
		close(fd);
		return fail(e, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return fail(S_ISDIR(st.st_mode) ? EISDIR : EINVAL,
			    S_ISDIR(st.st_mode) ? strerror(EISDIR)
						: "not a regular file");
	}
	// sysfs files report a size of 4096 whatever they hold: read, do
	// not trust st_size, but stop one byte past the limit.
	std::string out;
	char buf[4096];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			return fail(e, strerror(e));
		}
		if (n == 0)
			break;
		out.append(buf, size_t(n));
		if (out.size() > max) {
			close(fd);
			return fail(EFBIG, "larger than " + std::to_string(max >> 10) +
						   " KiB; not a file gpuslot wrote or reads");
		}
	}
	close(fd);
	if (err)
		*err = 0;
	*text = std::move(out);
	return true;
}

} // namespace gpuslot
