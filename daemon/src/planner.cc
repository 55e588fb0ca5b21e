// SPDX-License-Identifier: GPL-2.0
#include "planner.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>

namespace gpuslot {

std::string PlannedPartition::mask_hex() const
{
	std::ostringstream out;
	out << "0x" << std::hex;
	bool leading = true;
	for (size_t i = mask.size(); i-- > 0;) {
		if (leading) {
			if (!mask[i] && i)
				continue;
			out << mask[i];
			leading = false;
		} else {
			out.width(8);
			out.fill('0');
			out << mask[i];
		}
	}
	return out.str();
}

bool parse_sizes(const std::string &text, unsigned int total_cus,
		 std::vector<unsigned int> *out, std::string *error)
{
	out->clear();
	std::istringstream in(text);
	for (std::string item; std::getline(in, item, ',');) {
		bool percent = !item.empty() && item.back() == '%';
		if (percent)
			item.pop_back();
		if (item.empty() ||
		    item.find_first_not_of("0123456789") != std::string::npos ||
		    item.size() > 6) {
			*error = "size '" + item + (percent ? "%" : "") +
				 "' is not a whole number of CUs or a percentage";
			return false;
		}
		unsigned long v = std::stoul(item);
		if (percent)
			v = v * total_cus / 100;
		if (v == 0) {
			*error = "a partition of 0 CUs";
			return false;
		}
		out->push_back(unsigned(v));
	}
	if (out->empty()) {
		*error = "no sizes given";
		return false;
	}
	return true;
}

namespace {

// A unit is what the hardware allocates: a CU, or a WGP (two CUs) on
// gfx10+.
struct Units {
	unsigned int size;		       // CUs per unit
	std::vector<unsigned int> free_per_se; // [global SE]
	std::vector<unsigned int> cap_per_se;
	std::vector<std::vector<unsigned int>> xcc_ses; // global SE indices
};

// The order in which a partition takes SEs: round robin over the XCCs
// (the freest XCC first), within each XCC the freest SE first. The first
// m SEs are then spread over the XCCs within one of each other.
std::vector<unsigned int> se_order(const Units &u)
{
	auto by_free = [&](const std::vector<unsigned int> &v) {
		std::vector<unsigned int> sorted = v;
		std::stable_sort(sorted.begin(), sorted.end(),
				 [&](unsigned a, unsigned b) {
					 return u.free_per_se[a] > u.free_per_se[b];
				 });
		return sorted;
	};
	std::vector<std::vector<unsigned int>> per;
	std::vector<unsigned int> xfree;
	for (auto &ses : u.xcc_ses) {
		per.push_back(by_free(ses));
		unsigned int f = 0;
		for (unsigned int se : ses)
			f += u.free_per_se[se];
		xfree.push_back(f);
	}
	std::vector<unsigned int> xorder(per.size());
	std::iota(xorder.begin(), xorder.end(), 0);
	std::stable_sort(xorder.begin(), xorder.end(),
			 [&](unsigned a, unsigned b) { return xfree[a] > xfree[b]; });
	std::vector<unsigned int> out;
	for (size_t r = 0; out.size() < u.free_per_se.size(); r++)
		for (unsigned int x : xorder)
			if (r < per[x].size())
				out.push_back(per[x][r]);
	return out;
}



// @n units over the SEs in @use (each at most its free units): c or c+1
// each. Safe when every used SE gets at least 2 units, or all get 1.
bool safe_split(unsigned int n, unsigned int m)
{
	if (m == 0 || n < m)
		return false;
	unsigned int c = n / m, r = n % m;
	return c >= 2 || r == 0;
}

// Chooses SEs and per-SE unit counts for @n units, taking SEs in the
// order of @candidates; returns the counts per global SE, or empty.
std::vector<unsigned int> place(const Units &u,
				const std::vector<unsigned int> &candidates,
				unsigned int n, bool *packed)
{
	const unsigned int nse = unsigned(u.free_per_se.size());
	const unsigned int ncand = unsigned(candidates.size());
	std::vector<unsigned int> take(nse, 0);
	*packed = false;

	// SE-packed: whole, untouched SEs of equal capacity.
	std::vector<unsigned int> whole;
	for (unsigned int se : candidates)
		if (u.free_per_se[se] == u.cap_per_se[se] && u.cap_per_se[se])
			whole.push_back(se);
	if (!whole.empty()) {
		unsigned int cap = u.cap_per_se[whole[0]];
		bool equal = std::all_of(whole.begin(), whole.end(), [&](unsigned s) {
			return u.cap_per_se[s] == cap;
		});
		if (equal && n % cap == 0 && n / cap <= whole.size()) {
			for (unsigned int i = 0; i < n / cap; i++)
				take[whole[i]] = cap;
			*packed = true;
			return take;
		}
	}

	// SE-distributed: over as many SEs as possible.
	for (unsigned int m = std::min(n, ncand); m >= 1; m--) {
		if (!safe_split(n, m))
			continue;
		unsigned int c = n / m, r = n % m;
		bool fits = true;
		for (unsigned int i = 0; i < m && fits; i++)
			fits = u.free_per_se[candidates[i]] >= c + (i < r ? 1 : 0);
		if (!fits)
			continue;
		for (unsigned int i = 0; i < m; i++)
			take[candidates[i]] = c + (i < r ? 1 : 0);
		return take;
	}
	return {};
}

} // namespace

Plan plan_partitions(const CuShape &shape, MaskAlgorithm algorithm,
		     unsigned int k, const std::vector<unsigned int> &sizes)
{
	Plan plan;
	const unsigned int total = shape.total();
	if (k < 1 || k > 64) {
		plan.error = "k must be 1 to 64, not " + std::to_string(k);
		return plan;
	}
	if (!sizes.empty() && sizes.size() != k) {
		plan.error = std::to_string(sizes.size()) + " sizes for k = " +
			     std::to_string(k) + "; give one size per slot";
		return plan;
	}
	if (std::accumulate(sizes.begin(), sizes.end(), 0u) > total) {
		plan.error = "the sizes add up to more than the " +
			     std::to_string(total) + " CUs of the GPU";
		return plan;
	}
	if (shape.uniform_assumed)
		plan.notes.push_back("assuming uniform harvesting: active CUs "
				     "spread evenly over the shader arrays");

	Units u;
	u.size = shape.wgp ? 2 : 1;
	const unsigned int nse = shape.xccs * shape.se_per_xcc;
	for (unsigned int x = 0; x < shape.xccs; x++)
		for (unsigned int se = 0; se < shape.se_per_xcc; se++) {
			unsigned int cus = 0;
			for (unsigned int sh = 0; sh < shape.sh_per_se; sh++)
				cus += shape.at(x, se, sh) / u.size * u.size;
			u.cap_per_se.push_back(cus / u.size);
		}
	u.free_per_se = u.cap_per_se;
	u.xcc_ses.resize(shape.xccs);
	for (unsigned int x = 0; x < shape.xccs; x++)
		for (unsigned int se = 0; se < shape.se_per_xcc; se++)
			u.xcc_ses[x].push_back(x * shape.se_per_xcc + se);
	const unsigned int total_units =
		std::accumulate(u.cap_per_se.begin(), u.cap_per_se.end(), 0u);

	std::vector<unsigned int> want(k);
	for (unsigned int j = 0; j < k; j++)
		want[j] = sizes.empty() ? total_units / k :
					  sizes[j] / u.size;
	// Largest first: whole SEs go to the partitions that can fill them.
	std::vector<unsigned int> order(k);
	std::iota(order.begin(), order.end(), 0);
	std::stable_sort(order.begin(), order.end(),
			 [&](unsigned a, unsigned b) { return want[a] > want[b]; });

	plan.partitions.resize(k);
	std::vector<std::vector<unsigned int>> take(k);
	for (unsigned int j : order) {
		PlannedPartition &p = plan.partitions[j];
		p.requested_cus = sizes.empty() ? total / k : sizes[j];
		unsigned int n = want[j];
		bool packed = false;
		for (; n > 0; n--) {
			take[j] = place(u, se_order(u), n, &packed);
			if (!take[j].empty())
				break;
		}
		if (n == 0) {
			plan.error = "no safe placement left for partition " +
				     std::to_string(j) + " of " +
				     std::to_string(p.requested_cus) + " CUs";
			return plan;
		}
		for (unsigned int se = 0; se < nse; se++)
			u.free_per_se[se] -= take[j][se];
		p.cus = n * u.size;
		p.se_packed = packed;
		if (p.cus != p.requested_cus)
			plan.notes.push_back("partition " + std::to_string(j) +
					     ": " + std::to_string(p.requested_cus) +
					     " CUs rounded to " +
					     std::to_string(p.cus) +
					     ", the nearest safe size");
	}

	// Concrete slots: in each SE, the partitions' units fill the logical
	// CU columns in turn, alternating shader arrays; then every mask bit
	// whose slot a partition owns is set in its mask.
	auto slots = mask_bit_slots(shape, algorithm);
	std::map<std::tuple<unsigned, unsigned, unsigned, unsigned>, unsigned>
		owner; // (xcc, se, sh, first cu of unit) -> partition
	for (unsigned int g = 0; g < nse; g++) {
		unsigned int x = g / shape.se_per_xcc, se = g % shape.se_per_xcc;
		std::vector<std::pair<unsigned, unsigned>> units; // (sh, cu)
		for (unsigned int cu = 0; cu < 16; cu += u.size)
			for (unsigned int sh = 0; sh < shape.sh_per_se; sh++)
				if (cu + u.size <= shape.at(x, se, sh))
					units.push_back({sh, cu});
		size_t next = 0;
		for (unsigned int j = 0; j < k; j++)
			for (unsigned int i = 0; i < take[j][g]; i++, next++)
				owner[{x, se, units[next].first,
				       units[next].second}] = j;
	}
	for (auto &p : plan.partitions) {
		p.mask.assign((total + 31) / 32, 0);
		p.cus_per_se.assign(nse, 0);
	}
	for (size_t i = 0; i < slots.size(); i++) {
		const CuSlot &s = slots[i];
		auto it = owner.find({s.xcc, s.se, s.sh, s.cu});
		if (it == owner.end())
			continue;
		PlannedPartition &p = plan.partitions[it->second];
		p.mask[i / 32] |= 1u << (i % 32);
		p.cus_per_se[s.xcc * shape.se_per_xcc + s.se]++;
	}
	return plan;
}

} // namespace gpuslot
