// SPDX-License-Identifier: GPL-2.0
#include "amd/drm_shape.hpp"

#include <amdgpu.h>
#include <amdgpu_drm.h>
#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

namespace gpuslot {

bool read_drm_shape(const GpuNode &gpu, const std::filesystem::path &dri,
		    CuShape *shape, std::string *why)
{
	const std::string node =
		(dri / ("renderD" + std::to_string(gpu.drm_render_minor))).string();
	if (gpu.num_xcc > 1) {
		*why = "the CU bitmap of a multi-XCC GPU is per XCC partition; "
		       "assuming uniform harvesting";
		return false;
	}
	int fd = open(node.c_str(), O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		*why = node + ": " + strerror(errno) +
		       "; assuming uniform harvesting";
		return false;
	}
	amdgpu_device_handle dev;
	uint32_t major, minor;
	int err = amdgpu_device_initialize(fd, &major, &minor, &dev);
	drm_amdgpu_info_device info{};
	if (!err) {
		err = amdgpu_query_info(dev, AMDGPU_INFO_DEV_INFO, sizeof(info),
					&info);
		amdgpu_device_deinitialize(dev);
	}
	close(fd);
	if (err) {
		*why = node + ": AMDGPU_INFO_DEV_INFO failed (" +
		       strerror(-err) + "); assuming uniform harvesting";
		return false;
	}

	CuShape s;
	s.se_per_xcc = info.num_shader_engines;
	s.sh_per_se = info.num_shader_arrays_per_engine;
	s.wgp = gpu.wgp_mode();
	s.uniform_assumed = false;
	if (!s.se_per_xcc || !s.sh_per_se || s.se_per_xcc > 16 ||
	    s.sh_per_se > 2) {
		*why = node + ": unexpected shape " + std::to_string(s.se_per_xcc) +
		       " SEs x " + std::to_string(s.sh_per_se) +
		       " SH; assuming uniform harvesting";
		return false;
	}
	// amdgpu folds SEs 4..7 into the SH columns; GFX11 doubles the stride
	// (amdkfd's mqd_symmetrically_map_cu_mask does the same).
	const unsigned int sh_mul = gpu.gfx.major == 11 ? 2 : 1;
	s.cus.assign(s.se_per_xcc * s.sh_per_se, 0);
	for (unsigned int se = 0; se < s.se_per_xcc; se++)
		for (unsigned int sh = 0; sh < s.sh_per_se; sh++) {
			unsigned int col = sh + (se / 4) * sh_mul;
			if (col >= 4) {
				*why = node + ": SE " + std::to_string(se) +
				       " is past the cu_bitmap; assuming uniform "
				       "harvesting";
				return false;
			}
			s.at(0, se, sh) = std::popcount(info.cu_bitmap[se % 4][col]);
		}
	if (s.total() != gpu.active_cus()) {
		*why = node + ": cu_bitmap has " + std::to_string(s.total()) +
		       " CUs but KFD topology " + std::to_string(gpu.active_cus()) +
		       "; assuming uniform harvesting";
		return false;
	}
	*shape = s;
	return true;
}

} // namespace gpuslot
