// SPDX-License-Identifier: GPL-2.0
#include "amd/planner.hpp"

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <tuple>
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

namespace {

// A unit is what the hardware allocates: a CU, or a WGP (two CUs) on
// gfx10+. Units are counted only where a mask bit can reach them.
struct Units {
	unsigned int size;		       // CUs per unit
	std::vector<unsigned int> free_per_se; // [SE of one XCC, or global]
	std::vector<unsigned int> cap_per_se;
	std::vector<std::vector<unsigned int>> xcc_ses; // SE indices per XCC
};

// The order in which a partition takes SEs: round robin over the XCCs
// (the freest XCC first), within each XCC the freest SE first.
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

// @n units over @m SEs, c or c+1 each: safe when every used SE gets at
// least 2 units, or all get 1.
bool safe_split(unsigned int n, unsigned int m)
{
	if (m == 0 || n < m)
		return false;
	unsigned int c = n / m, r = n % m;
	return c >= 2 || r == 0;
}

// Whole, untouched SEs whose capacities add up to exactly @n, fewest SEs
// first: SEs of different sizes pack too (80,80,72,72 on an MI300X).
std::vector<unsigned int> whole_ses_for(const Units &u,
					const std::vector<unsigned int> &candidates,
					unsigned int n)
{
	std::vector<unsigned int> whole;
	for (unsigned int se : candidates)
		if (u.free_per_se[se] == u.cap_per_se[se] && u.cap_per_se[se])
			whole.push_back(se);
	if (whole.size() > 16)
		whole.resize(16); // 65536 subsets at most
	std::vector<unsigned int> best;
	for (uint32_t set = 1; set < (1u << whole.size()); set++) {
		unsigned int sum = 0;
		std::vector<unsigned int> pick;
		for (unsigned int i = 0; i < whole.size(); i++)
			if (set >> i & 1) {
				sum += u.cap_per_se[whole[i]];
				pick.push_back(whole[i]);
			}
		if (sum == n && (best.empty() || pick.size() < best.size()))
			best = pick;
	}
	return best;
}

// Chooses SEs and per-SE unit counts for @n units, taking SEs in the
// order of @candidates; returns the counts per SE, or empty.
std::vector<unsigned int> place(const Units &u,
				const std::vector<unsigned int> &candidates,
				unsigned int n, bool *packed)
{
	const unsigned int nse = unsigned(u.free_per_se.size());
	const unsigned int ncand = unsigned(candidates.size());
	std::vector<unsigned int> take(nse, 0);
	*packed = false;

	auto whole = whole_ses_for(u, candidates, n);
	if (!whole.empty()) {
		for (unsigned int se : whole)
			take[se] = u.cap_per_se[se];
		*packed = true;
		return take;
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

// A partition's units over the SEs of one XCC.
using Split = std::vector<unsigned int>;

// Placements of @n units in @free, best first: whole SEs (packed), then
// even spreads (every used SE within one unit of the others), widest and
// freest first. An uneven spread would make its smallest SE the
// bottleneck of every dispatch, so none is offered.
std::vector<Split> candidates(const Units &u, const Split &free, unsigned int n)
{
	const unsigned int nse = unsigned(free.size());
	std::vector<Split> out;
	Units now = u;
	now.free_per_se = free;
	std::vector<unsigned int> all(nse);
	std::iota(all.begin(), all.end(), 0);
	auto whole = whole_ses_for(now, all, n);
	if (!whole.empty()) {
		Split t(nse, 0);
		for (unsigned int se : whole)
			t[se] = free[se];
		out.push_back(t);
	}
	struct Option {
		Split t;
		unsigned int m, room;
	};
	std::vector<Option> spread;
	for (uint32_t set = 1; nse <= 8 && set < (1u << nse); set++) {
		const unsigned int m = unsigned(std::popcount(set));
		if (!safe_split(n, m))
			continue;
		const unsigned int c = n / m, r = n % m;
		std::vector<unsigned int> ses;
		unsigned int room = 0;
		for (unsigned int se = 0; se < nse; se++)
			if (set >> se & 1) {
				ses.push_back(se);
				room += free[se];
			}
		// The r SEs with the most room take c + 1.
		std::stable_sort(ses.begin(), ses.end(), [&](unsigned a, unsigned b) {
			return free[a] > free[b];
		});
		Split t(nse, 0);
		bool fits = true;
		for (unsigned int i = 0; i < m && fits; i++) {
			t[ses[i]] = c + (i < r ? 1 : 0);
			fits = free[ses[i]] >= t[ses[i]];
		}
		if (fits && std::find(out.begin(), out.end(), t) == out.end())
			spread.push_back({t, m, room});
	}
	std::stable_sort(spread.begin(), spread.end(),
			 [](const Option &a, const Option &b) {
				 return a.m != b.m ? a.m > b.m : a.room > b.room;
			 });
	for (auto &o : spread)
		out.push_back(o.t);
	return out;
}

// Depth-first search for a placement of every partition's @want units
// (in @order), within @budget steps.
bool search(const Units &u, const std::vector<unsigned int> &want,
	    const std::vector<unsigned int> &order, size_t at, Split &free,
	    std::vector<Split> &take, long &budget)
{
	if (at == order.size())
		return true;
	if (--budget < 0)
		return false;
	const unsigned int j = order[at];
	unsigned int left = 0, need = 0;
	for (unsigned int f : free)
		left += f;
	for (size_t i = at; i < order.size(); i++)
		need += want[order[i]];
	if (need > left)
		return false;
	for (const Split &t : candidates(u, free, want[j])) {
		for (size_t se = 0; se < free.size(); se++)
			free[se] -= t[se];
		take[j] = t;
		if (search(u, want, order, at + 1, free, take, budget))
			return true;
		for (size_t se = 0; se < free.size(); se++)
			free[se] += t[se];
		if (budget < 0)
			return false;
	}
	return false;
}

// The CUs a mask bit enables: one, or the two of its WGP under a WGP walk.
unsigned int cus_per_bit(const CuShape &shape, MaskAlgorithm a)
{
	return shape.wgp && a != MaskAlgorithm::A && a != MaskAlgorithm::B ? 2 : 1;
}

using CuKey = std::tuple<unsigned, unsigned, unsigned, unsigned>; // xcc se sh cu

// Why amdkfd cannot mask @shape with walk @a as a partition needs, or "".
std::string walk_problem(const CuShape &shape, MaskAlgorithm a,
			 const std::vector<CuSlot> &slots)
{
	if (slots.empty())
		return "amdkfd cannot mask CUs on a GPU with " +
		       std::to_string(shape.se_per_xcc) + " shader engines and " +
		       std::to_string(shape.sh_per_se) +
		       " shader arrays each per XCC (at most 8 and 2): every "
		       "masked queue would get no CU and hang";
	if (a == MaskAlgorithm::A && shape.sh_per_se > 1)
		return std::string("walk ") + algorithm_name(a) +
		       " cannot address the second shader array of each SE: "
		       "masks on this GPU need Linux 5.15 or later";
	if (shape.xccs > 1 && a != MaskAlgorithm::D)
		return std::string("walk ") + algorithm_name(a) + " masks XCC 0 only: on this " +
		       std::to_string(shape.xccs) + "-XCC GPU the other XCCs would run "
		       "unmasked. Masks need the XCC walk (D)";
	return "";
}

// Check what @plan claims against what its masks do under the walk: the
// CUs of each partition, per SE; no mask empty, none sharing a CU, every
// XCC in every partition of a multi-XCC GPU. A lie is a planner bug, and
// an error rather than a layout.
std::string verify(const CuShape &shape, MaskAlgorithm a,
		   const std::vector<CuSlot> &slots, const Plan &plan,
		   bool rocr_pairs = true)
{
	std::set<CuKey> used;
	const unsigned int per_bit = cus_per_bit(shape, a);
	for (size_t j = 0; j < plan.partitions.size(); j++) {
		const PlannedPartition &p = plan.partitions[j];
		const std::string name = "partition " + std::to_string(j) + " (" +
					 p.mask_hex() + ")";
		std::set<CuKey> cus;
		std::vector<unsigned int> per_se(shape.xccs * shape.se_per_xcc, 0);
		std::vector<unsigned int> per_xcc(shape.xccs, 0);
		for (size_t i = 0; i < p.mask.size() * 32; i++) {
			if (!(p.mask[i / 32] >> (i % 32) & 1))
				continue;
			if (i >= slots.size())
				return name + ": bit " + std::to_string(i) +
				       " lies past the last CU the kernel maps";
			const CuSlot &s = slots[i];
			for (unsigned int c = 0; c < per_bit; c++)
				if (cus.insert({s.xcc, s.se, s.sh, s.cu + c}).second) {
					per_se[s.xcc * shape.se_per_xcc + s.se]++;
					per_xcc[s.xcc]++;
				}
		}
		if (cus.empty())
			return name + ": the mask enables no CU; a queue with it would hang";
		if (cus.size() != p.cus)
			return name + " claims " + std::to_string(p.cus) +
			       " CUs, but the kernel's walk enables " +
			       std::to_string(cus.size());
		if (per_se != p.cus_per_se)
			return name + ": its CUs per SE are not what the kernel's walk gives";
		// ROCr (ROCm 5.3 and later) refuses half a user-bit pair on
		// gfx10+, whatever the kernel's walk.
		for (size_t i = 0; rocr_pairs && shape.wgp && i < p.mask.size() * 32; i += 2)
			if ((p.mask[i / 32] >> (i % 32) & 1) !=
			    (p.mask[i / 32] >> (i % 32 + 1) & 1))
				return name + ": user bits " + std::to_string(i) + " and " +
				       std::to_string(i + 1) + " differ: ROCr refuses the "
				       "mask (half a WGP pair)";
		const unsigned int most = *std::max_element(per_se.begin(), per_se.end());
		if (most > 1 && std::find(per_se.begin(), per_se.end(), 1u) != per_se.end())
			return name + ": a lone CU on an SE next to " + std::to_string(most) +
			       " on another";
		for (unsigned int x = 0; x < shape.xccs && shape.xccs > 1; x++)
			if (!per_xcc[x])
				return name + ": XCC " + std::to_string(x) +
				       " has no CU; a dispatch spread over the XCCs "
				       "would hang there";
		for (const CuKey &c : cus)
			if (!used.insert(c).second)
				return name + " shares a CU with another partition";
	}
	return "";
}

// Disjoint sets over 0 .. n-1.
struct DisjointSets {
	std::vector<unsigned int> up;
	explicit DisjointSets(size_t n) : up(n) { std::iota(up.begin(), up.end(), 0u); }
	unsigned int find(unsigned int i)
	{
		while (up[i] != i)
			i = up[i] = up[up[i]];
		return i;
	}
	void join(unsigned int a, unsigned int b) { up[find(a)] = find(b); }
};

// The smallest set of user bits a plan may set: bits that must be set
// together. On gfx10+ a WGP's two CUs run together or not at all, and
// ROCr (since ROCm 5.3, whatever the kernel) refuses a mask whose user
// bits 2w and 2w+1 differ; under walk B those two bits land on two SEs,
// so an atom there is one WGP on each of two SEs.
struct Atom {
	std::vector<unsigned int> bits;
	std::set<CuKey> cus;
	unsigned int xcc = 0;
	std::map<unsigned int, unsigned int> per_se; // SE of its XCC -> CUs
	std::pair<unsigned int, unsigned int> order; // (first CU column, SH)
};

std::vector<Atom> find_atoms(const CuShape &shape, MaskAlgorithm a,
			     const std::vector<CuSlot> &slots, bool rocr_pairs)
{
	const unsigned int n = unsigned(slots.size());
	DisjointSets sets(n);
	std::map<CuKey, unsigned int> first_bit;
	auto cus_of = [&](unsigned int i) {
		std::vector<CuKey> out;
		const CuSlot &s = slots[i];
		for (unsigned int c = 0; c < cus_per_bit(shape, a); c++)
			out.push_back({s.xcc, s.se, s.sh, s.cu + c});
		return out;
	};
	// Bits that enable the same CU (a WGP walk's pairs).
	for (unsigned int i = 0; i < n; i++)
		for (const CuKey &c : cus_of(i)) {
			auto [it, fresh] = first_bit.insert({c, i});
			if (!fresh)
				sets.join(i, it->second);
		}
	if (shape.wgp) {
		// The two CUs of a WGP, in the SE's register (cu 2j, 2j+1).
		for (auto &[c, i] : first_bit) {
			auto [x, se, sh, cu] = c;
			auto partner = first_bit.find({x, se, sh, cu ^ 1u});
			if (partner != first_bit.end())
				sets.join(i, partner->second);
		}
		// ROCr's rule on the user bits.
		for (unsigned int i = 0; rocr_pairs && i + 1 < n; i += 2)
			sets.join(i, i + 1);
	}
	std::map<unsigned int, Atom> by_root;
	for (unsigned int i = 0; i < n; i++) {
		Atom &at = by_root[sets.find(i)];
		at.bits.push_back(i);
		for (const CuKey &c : cus_of(i))
			at.cus.insert(c);
	}
	std::vector<Atom> out;
	for (auto &[root, at] : by_root) {
		std::set<unsigned int> xccs;
		at.order = {~0u, ~0u};
		for (auto &[x, se, sh, cu] : at.cus) {
			xccs.insert(x);
			at.per_se[se]++;
			at.order = std::min(at.order, std::make_pair(cu, sh));
		}
		if (xccs.size() != 1)
			continue; // no shape gpuslot knows ties XCCs together
		at.xcc = *xccs.begin();
		out.push_back(std::move(at));
	}
	return out;
}

// SEs an atom ties together, per XCC, as SE sets ("planning columns"): the
// planner's unit of placement. One SE each, except where ROCr's pair rule
// ties SEs together under walk B.
struct Columns {
	std::vector<std::vector<unsigned int>> ses;	     // [column] -> SEs
	std::vector<std::vector<std::vector<const Atom *>>> atoms; // [xcc][column]
	unsigned int atom_cus = 0;			     // CUs per atom
	unsigned int dropped_cus = 0;			     // in no usable atom
	std::string error;
};

Columns plan_columns(const CuShape &shape, const std::vector<Atom> &atoms)
{
	Columns c;
	// Atoms of one size only: the most common one.
	std::map<unsigned int, unsigned int> sizes;
	for (const Atom &at : atoms)
		sizes[unsigned(at.cus.size())]++;
	unsigned int best = 0;
	for (auto [size, count] : sizes)
		if (!best || count > sizes[best])
			best = size;
	c.atom_cus = best;
	DisjointSets ses(shape.se_per_xcc);
	std::vector<const Atom *> usable;
	for (const Atom &at : atoms) {
		// Even over its SEs, so the partition stays balanced.
		bool even = at.cus.size() == best;
		for (auto [se, cus] : at.per_se)
			even = even && cus == at.per_se.begin()->second;
		if (!even) {
			c.dropped_cus += unsigned(at.cus.size());
			continue;
		}
		usable.push_back(&at);
		for (auto [se, cus] : at.per_se)
			ses.join(se, at.per_se.begin()->first);
	}
	std::map<unsigned int, unsigned int> column_of_root;
	std::vector<unsigned int> column_of(shape.se_per_xcc);
	for (unsigned int se = 0; se < shape.se_per_xcc; se++) {
		auto [it, fresh] = column_of_root.insert(
			{ses.find(se), unsigned(column_of_root.size())});
		if (fresh)
			c.ses.push_back({});
		c.ses[it->second].push_back(se);
		column_of[se] = it->second;
	}
	c.atoms.assign(shape.xccs,
		       std::vector<std::vector<const Atom *>>(c.ses.size()));
	for (const Atom *at : usable) {
		const unsigned int col = column_of[at->per_se.begin()->first];
		if (at->per_se.size() != c.ses[col].size()) {
			// SEs chained by atoms that do not each cover all of
			// them: a partition could not hold them evenly.
			c.error = "CU masks that keep WGP pairs whole (ROCr's rule: "
				  "user bits 2w and 2w+1 both set or both clear) tie "
				  "this GPU's SEs together unevenly under this walk; "
				  "no balanced plan exists. Use walk C or D (Linux "
				  "6.0 or later, or amdgpu-dkms)";
			return c;
		}
		c.atoms[at->xcc][col].push_back(at);
	}
	for (auto &per_xcc : c.atoms)
		for (auto &list : per_xcc)
			std::stable_sort(list.begin(), list.end(),
					 [](const Atom *x, const Atom *y) {
						 return x->order < y->order;
					 });
	return c;
}

std::string se_list(const std::vector<unsigned int> &ses)
{
	std::string out;
	for (size_t i = 0; i < ses.size(); i++)
		out += (i ? (i + 1 == ses.size() ? " and " : ", ") : "") +
		       std::to_string(ses[i]);
	return out;
}

Plan plan_impl(const CuShape &shape, MaskAlgorithm algorithm, unsigned int k,
	       const std::vector<unsigned int> &sizes, bool rocr_pairs,
	       Columns *columns_out)
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
	const auto slots = mask_bit_slots(shape, algorithm);
	if (std::string why = walk_problem(shape, algorithm, slots); !why.empty()) {
		plan.error = why;
		return plan;
	}
	if (shape.uniform_assumed)
		plan.notes.push_back("assuming uniform harvesting: active CUs "
				     "spread evenly over the shader arrays");

	// What a plan may hand out: atoms of bits that go together, in
	// columns of SEs that atoms tie together.
	const auto atoms = find_atoms(shape, algorithm, slots, rocr_pairs);
	Columns cols = plan_columns(shape, atoms);
	if (!cols.error.empty()) {
		plan.error = cols.error;
		return plan;
	}
	const unsigned int usize = cols.atom_cus;
	std::set<CuKey> covered;
	for (const Atom &at : atoms)
		covered.insert(at.cus.begin(), at.cus.end());
	unsigned int reached = unsigned(covered.size()) - cols.dropped_cus;
	if (covered.size() < total)
		plan.notes.push_back(std::to_string(total - covered.size()) +
				     " CUs lie beyond what a CU mask can reach "
				     "(16 per shader array) and are in no partition");
	if (cols.dropped_cus)
		plan.notes.push_back(std::to_string(cols.dropped_cus) +
				     " CUs cannot be masked in whole WGPs spread "
				     "evenly over their SEs and are in no partition");

	// Plan one XCC; every XCC gets the same split, since a dispatch on
	// a multi-XCC GPU runs on all of them in turn and its smallest XCC
	// share sets its speed. An XCC with fewer units limits them all.
	const unsigned int nx = shape.xccs, nse = shape.se_per_xcc;
	const unsigned int ncol = unsigned(cols.ses.size());
	Units u;
	u.size = usize;
	u.cap_per_se.assign(ncol, ~0u);
	for (unsigned int x = 0; x < nx; x++)
		for (unsigned int col = 0; col < ncol; col++)
			u.cap_per_se[col] = std::min<unsigned>(
				u.cap_per_se[col], unsigned(cols.atoms[x][col].size()));
	u.free_per_se = u.cap_per_se;
	u.xcc_ses.assign(1, {});
	for (unsigned int col = 0; col < ncol; col++)
		u.xcc_ses[0].push_back(col);
	const unsigned int xcc_units =
		std::accumulate(u.cap_per_se.begin(), u.cap_per_se.end(), 0u);
	if (nx * xcc_units * usize < reached)
		plan.notes.push_back("the XCCs differ in shape: each partition "
				     "gets the same share of every XCC, and " +
				     std::to_string(reached - nx * xcc_units * usize) +
				     " CUs of the larger XCCs stay idle");

	if (k > xcc_units) {
		plan.error = "k = " + std::to_string(k) + " is more than the " +
			     std::to_string(xcc_units * usize * nx) + " CUs a mask can reach" +
			     (shape.wgp ? " in whole WGPs" : "") +
			     (nx > 1 ? ", with the same share of every XCC" : "") +
			     ": every slot needs at least " + std::to_string(usize * nx) +
			     " CUs; use k <= " + std::to_string(xcc_units);
		return plan;
	}
	// Units per XCC for each partition: an even split hands out the
	// remainder one unit each, so no unit an even split could use idles.
	std::vector<unsigned int> want(k);
	for (unsigned int j = 0; j < k; j++)
		want[j] = sizes.empty() ?
				  xcc_units / k + (j < xcc_units % k ? 1 : 0) :
				  sizes[j] / (usize * nx);
	std::vector<unsigned int> order(k);
	std::iota(order.begin(), order.end(), 0);
	// Largest first: whole SEs go to the partitions that can fill them.
	std::stable_sort(order.begin(), order.end(),
			 [&](unsigned a, unsigned b) { return want[a] > want[b]; });

	plan.partitions.resize(k);
	std::vector<std::vector<unsigned int>> take(k, Split(ncol, 0));
	// Every partition at its size if some placement allows it; else the
	// smallest gives up a unit at a time. The greedy placement below is
	// the fallback when the search runs out of steps.
	std::vector<unsigned int> got = want;
	bool found = false;
	for (int round = 0; !found && round < 64; round++) {
		Split free = u.cap_per_se;
		long budget = 20000;
		found = search(u, got, order, 0, free, take, budget);
		if (found)
			break;
		unsigned int j = order.back();
		for (auto it = order.rbegin(); it != order.rend(); ++it)
			if (got[*it]) {
				j = *it;
				break;
			}
		if (!got[j])
			break;
		got[j]--;
	}
	if (!found) {
		Units greedy = u;
		for (unsigned int j : order) {
			unsigned int n = want[j];
			bool packed = false;
			for (; n > 0; n--) {
				take[j] = place(greedy, se_order(greedy), n, &packed);
				if (!take[j].empty())
					break;
			}
			if (n == 0) {
				plan.error = "no safe placement left for partition " +
					     std::to_string(j);
				return plan;
			}
			for (unsigned int col = 0; col < ncol; col++)
				greedy.free_per_se[col] -= take[j][col];
			got[j] = n;
		}
	}
	for (unsigned int j = 0; j < k; j++) {
		PlannedPartition &p = plan.partitions[j];
		p.requested_cus = sizes.empty() ? total / k : sizes[j];
		if (!got[j]) {
			plan.error = "no safe placement for partition " + std::to_string(j) +
				     " of " + std::to_string(p.requested_cus) + " CUs";
			return plan;
		}
		// Packed: whole SEs only.
		p.se_packed = true;
		for (unsigned int col = 0; col < ncol; col++)
			if (take[j][col] && take[j][col] != u.cap_per_se[col])
				p.se_packed = false;
		p.cus = got[j] * usize * nx;
		if (!sizes.empty() && p.cus != p.requested_cus)
			plan.notes.push_back("partition " + std::to_string(j) +
					     ": " + std::to_string(p.requested_cus) +
					     " CUs rounded to " + std::to_string(p.cus) +
					     (nx > 1 ? ", the nearest safe size with the same "
						       "share of every XCC" :
						       ", the nearest safe size"));
		else if (sizes.empty() && got[j] < want[j])
			plan.notes.push_back("partition " + std::to_string(j) + ": " +
					     std::to_string(got[j] * usize * nx) +
					     " CUs, not " +
					     std::to_string(want[j] * usize * nx) +
					     ": no safe placement has room for more");
	}

	// Concrete bits: in each column of each XCC, the partitions take the
	// atoms in turn (column order, alternating shader arrays); every bit
	// of an atom a partition owns is set in its mask.
	for (auto &p : plan.partitions) {
		p.mask.assign((total + 31) / 32, 0);
		p.cus_per_se.assign(nx * nse, 0);
	}
	for (unsigned int x = 0; x < nx; x++)
		for (unsigned int col = 0; col < ncol; col++) {
			const auto &list = cols.atoms[x][col];
			size_t next = 0;
			for (unsigned int j = 0; j < k; j++)
				for (unsigned int i = 0; i < take[j][col]; i++, next++) {
					PlannedPartition &p = plan.partitions[j];
					for (unsigned int b : list[next]->bits)
						p.mask[b / 32] |= 1u << (b % 32);
					for (auto [se, cus] : list[next]->per_se)
						p.cus_per_se[x * nse + se] += cus;
				}
		}
	if (columns_out)
		*columns_out = std::move(cols);
	plan.error = verify(shape, algorithm, slots, plan, rocr_pairs);
	return plan;
}

} // namespace

Plan plan_partitions(const CuShape &shape, MaskAlgorithm algorithm,
		     unsigned int k, const std::vector<unsigned int> &sizes)
{
	Columns cols;
	Plan plan = plan_impl(shape, algorithm, k, sizes, true, &cols);
	bool tied = false;
	std::string groups;
	for (const auto &ses : cols.ses)
		if (ses.size() > 1) {
			tied = true;
			groups += (groups.empty() ? "SEs " : ", SEs ") + se_list(ses);
		}
	if (!plan.error.empty() || !tied)
		return plan;
	// Walk B deals user bits 2w and 2w+1 to different SEs: what keeping
	// them whole cost, against a plan that keeps only the WGPs whole.
	plan.notes.push_back(
		std::string("walk ") + algorithm_name(algorithm) + " deals user bits "
		"2w and 2w+1 to different SEs, and ROCr (ROCm 5.3 and later, "
		"whatever the kernel) refuses a gfx10+ mask that sets one without "
		"the other: a partition holds " + groups + " together, a WGP on "
		"each at a time (" + std::to_string(cols.atom_cus) + " CUs)");
	Plan alone = plan_impl(shape, algorithm, k, sizes, false, nullptr);
	for (size_t j = 0; alone.error.empty() && j < plan.partitions.size(); j++) {
		const auto &p = plan.partitions[j];
		const auto &q = alone.partitions[j];
		if (q.se_packed && !p.se_packed)
			plan.notes.push_back(
				"partition " + std::to_string(j) + ": SE-distributed, "
				"not SE-packed: the whole SEs it could fill alone are "
				"tied to others by ROCr's pair rule; given up for a "
				"mask ROCr accepts");
		if (q.cus > p.cus)
			plan.notes.push_back("partition " + std::to_string(j) + ": " +
					     std::to_string(p.cus) + " CUs, not " +
					     std::to_string(q.cus) +
					     ": given up to keep user-bit pairs whole");
	}
	return plan;
}

} // namespace gpuslot
