// SPDX-License-Identifier: GPL-2.0
// How amdkfd turns a HIP CU mask into per-shader-engine enables.
//
// A CU mask is not a physical bitmap: amdkfd's
// mqd_symmetrically_map_cu_mask() deals consecutive user bits round-robin
// over shader engines, then shader arrays, then CU columns (and, on
// multi-XCC parts, XCCs first). The order changed between kernels; this is
// the same walk, so the daemon can translate in both directions. Reference:
// ../shared/reference/amd-kfd.md section 1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "amd/topology.hpp"

namespace gpuslot {

enum class MaskAlgorithm {
	A, // Linux <= 5.14: SE round robin, SH unaware
	B, // 5.15 .. 5.19: SE, then SH, then CU column
	C, // 6.0 .. 6.5: B, with WGP pairs on gfx10+ (Debian 12's 6.1)
	D, // >= 6.6: C, interleaved over the XCCs of a node
};

// The algorithm of a kernel release such as "6.1.0-56-amd64"; false when
// the text is not a release.
bool algorithm_for_kernel(const std::string &release, MaskAlgorithm *out);
const char *algorithm_name(MaskAlgorithm a);
// "A".."D" -> the algorithm; false for anything else.
bool parse_algorithm(const std::string &text, MaskAlgorithm *out);

// Which walk amdkfd uses for @gpu: the walk of the amdkfd that actually
// drives it. The kernel release alone cannot say: ROCm's amdgpu-dkms and
// vendor kernels (RHEL 9, Ubuntu HWE) carry a newer amdkfd than their
// version number. In order:
//  - @forced (gpuslotd.conf mask_algorithm, gpuslotctl --mask-algorithm);
//  - an out-of-tree amdgpu (amdgpu-dkms: /sys/module/amdgpu/version
//    exists, @amdgpu_version) carries the newest walk (D);
//  - a GPU family the release's in-tree amdkfd does not know (by
//    gfx_target_version: gfx1100 is in-tree from 5.19, GC 9.4.3/MI300
//    from 6.5, the other gfx11 parts later) can only be driven by
//    amdgpu-dkms: the newest walk (D), with a note saying so;
//  - GC 9.4.3 and later (MI300: gfx940-942, gfx950) only ever had the XCC
//    walk (D);
//  - the release's table entry; a release past the table's newest kernel,
//    or one that cannot be read, gets the newest walk, with a note.
// @notes gets every assumption and warning; known-broken combinations
// (MI300 under 6.5, which writes one XCC's mask to every XCC, and under
// 6.6-6.10 without the 9.4.3 masking fix, which leave XCCs 1-7 unmasked)
// are warnings there too.
struct AlgorithmChoice {
	MaskAlgorithm algorithm = MaskAlgorithm::D;
	std::string why;		// one line: how it was chosen
	std::vector<std::string> notes; // assumptions and warnings
};
AlgorithmChoice choose_algorithm(const GfxVersion &gfx,
				 const std::string &release,
				 const std::string &amdgpu_version,
				 const std::optional<MaskAlgorithm> &forced);
// /sys/module/amdgpu/version, or "" where the in-tree driver has none.
std::string amdgpu_module_version(const std::string &sysfs_module_dir =
					  "/sys/module/amdgpu");
// uname -r: the release whose mapping applies unless told otherwise.
std::string running_kernel_release();

// Active CUs per (XCC, SE, SH): the input of the mapping.
struct CuShape {
	unsigned int xccs = 1, se_per_xcc = 1, sh_per_se = 1;
	std::vector<unsigned int> cus; // [xcc][se][sh], flattened
	bool wgp = false;		// CUs come in WGP pairs (gfx10+)
	bool uniform_assumed = true;	// not read from the driver's bitmap

	unsigned int &at(unsigned int xcc, unsigned int se, unsigned int sh)
	{
		return cus[(xcc * se_per_xcc + se) * sh_per_se + sh];
	}
	unsigned int at(unsigned int xcc, unsigned int se, unsigned int sh) const
	{
		return cus[(xcc * se_per_xcc + se) * sh_per_se + sh];
	}
	unsigned int total() const;
};

// The shape KFD topology implies, spreading the active CUs as evenly as
// possible (KFD does not say which arrays were harvested; libdrm's
// cu_bitmap does, where a render node is there to ask).
CuShape uniform_shape(const GpuNode &gpu);

// Where one user mask bit lands: CU @cu (a logical index, 0-based, within
// its shader array; the hardware picks the physical CU) of SH @sh of SE
// @se of XCC @xcc. In WGP mode both bits of a pair land on the same WGP
// and @cu is its first CU.
struct CuSlot {
	unsigned int xcc, se, sh, cu;
	bool operator==(const CuSlot &) const = default;
};

// For each user bit 0 .. n-1 the slot it controls, in the kernel's order;
// bits past the last slot control nothing (n = the active CU count).
std::vector<CuSlot> mask_bit_slots(const CuShape &shape, MaskAlgorithm a);

// The COMPUTE_STATIC_THREAD_MGMT_SE<n> registers amdkfd writes for @mask
// (bit i = mask[i / 32] >> (i % 32)) on XCC @xcc: low 16 bits SH0, high
// 16 bits SH1, exactly as mqd_symmetrically_map_cu_mask() computes them.
std::vector<uint32_t> se_registers(const CuShape &shape, MaskAlgorithm a,
				   const std::vector<uint32_t> &mask,
				   unsigned int xcc = 0);

} // namespace gpuslot
