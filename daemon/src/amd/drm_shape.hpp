// SPDX-License-Identifier: GPL-2.0
// The exact active-CU layout of an AMD GPU, from amdgpu's
// AMDGPU_INFO_DEV_INFO cu_bitmap through libdrm. KFD topology only gives
// totals; harvesting can leave shader arrays with different CU counts.
#pragma once

#include <filesystem>
#include <string>

#include "amd/cu_mask.hpp"
#include "amd/topology.hpp"

namespace gpuslot {

// Reads /dev/dri/renderD<drm_render_minor> under @dri. On success *shape
// holds per-(SE, SH) counts with uniform_assumed false. Otherwise returns
// false and *why says why, and the caller keeps the uniform assumption.
bool read_drm_shape(const GpuNode &gpu, const std::filesystem::path &dri,
		    CuShape *shape, std::string *why);

} // namespace gpuslot
