// SPDX-License-Identifier: GPL-2.0
#include "amd/cu_mask.hpp"

#include <sys/utsname.h>

#include <cstdio>
#include <fstream>

namespace gpuslot {

bool algorithm_for_kernel(const std::string &release, MaskAlgorithm *out)
{
	unsigned int major = 0, minor = 0;
	if (std::sscanf(release.c_str(), "%u.%u", &major, &minor) != 2)
		return false;
	if (major < 5 || (major == 5 && minor <= 14))
		*out = MaskAlgorithm::A;
	else if (major == 5)
		*out = MaskAlgorithm::B;
	else if (major == 6 && minor <= 5)
		*out = MaskAlgorithm::C;
	else
		*out = MaskAlgorithm::D;
	return true;
}

const char *algorithm_name(MaskAlgorithm a)
{
	switch (a) {
	case MaskAlgorithm::A: return "A (Linux <= 5.14)";
	case MaskAlgorithm::B: return "B (Linux 5.15-5.19)";
	case MaskAlgorithm::C: return "C (Linux 6.0-6.5)";
	case MaskAlgorithm::D: return "D (Linux >= 6.6)";
	}
	return "?";
}

bool parse_algorithm(const std::string &text, MaskAlgorithm *out)
{
	static const std::pair<const char *, MaskAlgorithm> names[] = {
		{"A", MaskAlgorithm::A}, {"B", MaskAlgorithm::B},
		{"C", MaskAlgorithm::C}, {"D", MaskAlgorithm::D}};
	for (auto &[n, a] : names)
		if (text == n) {
			*out = a;
			return true;
		}
	return false;
}

// The newest kernel line whose amdkfd walk the table was checked against
// (../shared/reference/amd-kfd.md 1.5: v6.19).
constexpr unsigned int kNewestKnownMajor = 6, kNewestKnownMinor = 19;

namespace {

struct Release {
	unsigned int major = 0, minor = 0;
	auto operator<=>(const Release &) const = default;
	std::string text() const
	{
		return std::to_string(major) + "." + std::to_string(minor);
	}
};

// The first Linux release whose in-tree amdkfd drives a GPU family, for
// the families newer than the walk table's oldest kernels; @exact false
// where only a lower bound is known (the family is not in-tree before
// it). Families not listed are driven by every kernel gpuslot plans for.
struct InTree {
	Release first;
	bool exact;
	const char *source;
};

std::optional<InTree> first_in_tree(const GfxVersion &gfx)
{
	// GC 9.4.3 (gfx940-942, MI300): kfd_device.c knows it from 6.5.
	if (gfx.major == 9 && gfx.minor == 4 && gfx.step <= 2)
		return InTree{{6, 5}, true, "6.5"};
	// GC 9.4.4 / 9.5.0 (MI300 successors, MI350): well after 6.5.
	if (gfx.major == 9 && (gfx.minor > 4 || (gfx.minor == 4 && gfx.step > 2)))
		return InTree{{6, 6}, false, "after 6.5"};
	// gfx1100 (GC 11.0.0): kfd_device.c's first gfx11 entry, 5.19.
	if (gfx == GfxVersion{11, 0, 0})
		return InTree{{5, 19}, true, "5.19"};
	// The other gfx11 parts came after 11.0.0 (GC 11.0.2 was posted to
	// amd-gfx in May 2022, for 6.0); gfx12 and later long after.
	if (gfx.major == 11)
		return InTree{{6, 0}, false, "6.0 or later"};
	if (gfx.major >= 12)
		return InTree{{6, 6}, false, "after 6.5"};
	return std::nullopt;
}

} // namespace

AlgorithmChoice choose_algorithm(const GfxVersion &gfx,
				 const std::string &release,
				 const std::string &amdgpu_version,
				 const std::optional<MaskAlgorithm> &forced)
{
	AlgorithmChoice c;
	// GC 9.4.3, the MI300 family, is gfx940 to gfx942 (and later).
	const bool xcc_walk_only = gfx >= GfxVersion{9, 4, 0} && gfx.major == 9;
	MaskAlgorithm by_release = MaskAlgorithm::D;
	Release rel;
	const bool readable = algorithm_for_kernel(release, &by_release) &&
			      std::sscanf(release.c_str(), "%u.%u", &rel.major,
					  &rel.minor) == 2;
	const auto in_tree = first_in_tree(gfx);
	// The running kernel's own amdkfd cannot drive this GPU: a KFD node
	// of it means an out-of-tree amdgpu, amdgpu-dkms (or a vendor kernel
	// carrying a newer amdkfd), whose walk is the newest.
	const bool dkms_by_family = readable && in_tree && rel < in_tree->first;
	if (forced) {
		c.algorithm = *forced;
		c.why = std::string("mask_algorithm ") + algorithm_name(*forced) +
			", as configured";
	} else if (!amdgpu_version.empty()) {
		c.algorithm = MaskAlgorithm::D;
		c.why = "D: amdgpu " + amdgpu_version + " is an out-of-tree "
			"driver (amdgpu-dkms), newer than Linux " + release;
	} else if (dkms_by_family) {
		c.algorithm = MaskAlgorithm::D;
		c.why = "D: Linux " + release + "'s own amdkfd cannot drive " +
			gfx.name() + " (in-tree from Linux " + in_tree->source +
			"), so amdgpu-dkms drives it, with the newest walk";
		c.notes.push_back(gfx.name() + " is not driven by Linux " + release +
				  "'s in-tree amdgpu (gfx_target_version " +
				  std::to_string(gfx.target()) + " is in-tree from Linux " +
				  in_tree->source + "): this GPU runs under amdgpu-dkms, "
				  "and its masks follow amdgpu-dkms's walk (D), not "
				  "Linux " + release + "'s (" + algorithm_name(by_release) +
				  ")");
	} else if (xcc_walk_only) {
		c.algorithm = MaskAlgorithm::D;
		c.why = "D: " + gfx.name() + " has only ever been masked with the "
			"XCC walk";
	} else if (!readable) {
		c.algorithm = MaskAlgorithm::D;
		c.why = "D, the newest walk";
		c.notes.push_back("kernel release '" + release + "' cannot be read; "
				  "assuming the newest CU-mask walk (D). Set "
				  "mask_algorithm in gpuslotd.conf if that is wrong");
	} else {
		c.algorithm = by_release;
		c.why = std::string(algorithm_name(by_release)) + ", by Linux " +
			release;
		if (rel > Release{kNewestKnownMajor, kNewestKnownMinor})
			c.notes.push_back("Linux " + release + " is newer than the "
					  "kernels gpuslot's CU-mask table was checked "
					  "against (up to 6.19); assuming their walk (D)");
	}
	// MI300 under the kernel's own amdgpu (6.5 and later: before 6.5 it
	// is amdgpu-dkms, above). 6.5 masks GC 9.4.3 with the walk of one
	// XCC and writes that same mask to every XCC; 6.6 brought the XCC
	// walk but programmed XCC 0 only, until "Fix CU Masking for GFX
	// 9.4.3" (85cf43c554e4, 6.11; in 6.6.y and 6.10.y since July 2024).
	if (xcc_walk_only && amdgpu_version.empty() && readable && !forced &&
	    !dkms_by_family) {
		if (rel < Release{6, 6})
			c.notes.push_back("warning: Linux " + release + "'s amdkfd "
					  "reads a " + gfx.name() + " CU mask as one XCC's "
					  "(walk C) and writes the same mask to every XCC: "
					  "these masks, planned for the XCC walk (D), would "
					  "enable other CUs than they claim. Use amdgpu-dkms "
					  "or Linux 6.11 or later");
		else if (rel < Release{6, 11})
			c.notes.push_back("warning: Linux 6.6 to 6.10 mask only XCC 0 "
					  "of " + gfx.name() + " and run XCCs 1-7 unmasked, "
					  "until \"Fix CU Masking for GFX 9.4.3\" "
					  "(85cf43c554e4, Linux 6.11, backported to 6.6.y and "
					  "6.10.y in July 2024): check that Linux " + release +
					  " has it, or use amdgpu-dkms");
	}
	return c;
}

std::string amdgpu_module_version(const std::string &sysfs_module_dir)
{
	std::ifstream in(sysfs_module_dir + "/version");
	std::string v;
	std::getline(in, v);
	return v;
}

unsigned int CuShape::total() const
{
	unsigned int n = 0;
	for (unsigned int c : cus)
		n += c;
	return n;
}

CuShape uniform_shape(const GpuNode &gpu)
{
	CuShape s;
	s.xccs = gpu.num_xcc;
	s.se_per_xcc = gpu.se_per_xcc();
	s.sh_per_se = gpu.sh_per_se();
	s.wgp = gpu.wgp_mode();
	unsigned int arrays = s.xccs * s.se_per_xcc * s.sh_per_se;
	unsigned int per = gpu.active_cus() / arrays;
	unsigned int extra = gpu.active_cus() % arrays;
	s.cus.assign(arrays, per);
	// The remainder goes one CU each to SE 0, 1, ... of every XCC in
	// turn, keeping XCCs and SEs within one CU of each other.
	for (unsigned int se = 0; extra && se < s.se_per_xcc; se++)
		for (unsigned int sh = 0; extra && sh < s.sh_per_se; sh++)
			for (unsigned int x = 0; extra && x < s.xccs; x++, extra--)
				s.at(x, se, sh)++;
	return s;
}

namespace {

// amdkfd refuses shapes beyond its se_mask array (KFD_MAX_NUM_SE 8,
// KFD_MAX_NUM_SH_PER_SE 2): the queue then gets no CUs.
bool kernel_handles(const CuShape &s)
{
	return s.se_per_xcc <= 8 && s.sh_per_se <= 2;
}

// Version A: SE round robin, one register column per step, SH unaware.
void walk_a(const CuShape &s, unsigned int count, std::vector<CuSlot> *slots)
{
	const unsigned int nse = s.se_per_xcc;
	std::vector<unsigned int> per_se(nse, 0);
	for (unsigned int se = 0; se < nse; se++)
		for (unsigned int sh = 0; sh < s.sh_per_se; sh++)
			per_se[se] += s.at(0, se, sh);
	unsigned int se = 0, cu = 0;
	for (unsigned int i = 0; i < count; i++) {
		if (cu >= 32)
			break;
		(*slots)[i] = {0, se, cu / 16, cu % 16};
		do {
			if (++se == nse) {
				se = 0;
				cu++;
			}
		} while (cu >= per_se[se] && cu < 32);
	}
}

// Versions B, C and D: CU column, then SH, then SE; D interleaves XCCs.
void walk_bcd(const CuShape &s, MaskAlgorithm a, unsigned int count,
	      std::vector<CuSlot> *slots)
{
	const bool wgp = a != MaskAlgorithm::B && s.wgp;
	const unsigned int step = wgp ? 2 : 1;
	const unsigned int nx = a == MaskAlgorithm::D ? s.xccs : 1;
	for (unsigned int x = 0; x < nx; x++) {
		unsigned int i = x;
		for (unsigned int cu = 0; cu < 16; cu += step)
			for (unsigned int sh = 0; sh < s.sh_per_se; sh++)
				for (unsigned int se = 0; se < s.se_per_xcc; se++) {
					if (s.at(x, se, sh) <= cu)
						continue;
					if (i >= count)
						goto next_xcc;
					(*slots)[i] = {x, se, sh, cu};
					if (wgp && i + 1 < count)
						(*slots)[i + 1] = {x, se, sh, cu};
					i += step * nx;
				}
next_xcc:;
	}
}

} // namespace

std::vector<CuSlot> mask_bit_slots(const CuShape &shape, MaskAlgorithm a)
{
	const unsigned int count = shape.total();
	// A slot the walk never reaches stays at this sentinel.
	const CuSlot none{~0u, ~0u, ~0u, ~0u};
	std::vector<CuSlot> slots(count, none);
	if (!kernel_handles(shape))
		return {};
	if (a == MaskAlgorithm::A)
		walk_a(shape, count, &slots);
	else
		walk_bcd(shape, a, count, &slots);
	while (!slots.empty() && slots.back() == none)
		slots.pop_back();
	return slots;
}

std::vector<uint32_t> se_registers(const CuShape &shape, MaskAlgorithm a,
				   const std::vector<uint32_t> &mask,
				   unsigned int xcc)
{
	std::vector<uint32_t> regs(shape.se_per_xcc, 0);
	auto slots = mask_bit_slots(shape, a);
	const bool wgp = a != MaskAlgorithm::B && a != MaskAlgorithm::A &&
			 shape.wgp;
	const size_t bits = std::min<size_t>(mask.size() * 32, slots.size());
	for (size_t i = 0; i < bits; i++) {
		if (!(mask[i / 32] >> (i % 32) & 1) || slots[i].xcc != xcc)
			continue;
		const CuSlot &s = slots[i];
		regs[s.se] |= (wgp ? 3u : 1u) << (s.cu + 16 * s.sh);
	}
	return regs;
}

std::string running_kernel_release()
{
	utsname u;
	return uname(&u) == 0 ? u.release : "";
}

} // namespace gpuslot
