// SPDX-License-Identifier: GPL-2.0
// gpuslot's NVIDIA partitions on a real GPU (issue "NVIDIA backend"). The
// kernel module cannot be loaded there, so these runs use libgpuslot's
// cuda backend and the daemon's planner without the lock.
//
//   gpu_partitions placement K [SIZES]    each slot's stream runs only on
//                                         its SMs; slots disjoint; counts;
//                                         clusters as large as the device's
//                                         co-scheduled groups run on each;
//                                         SIZES: SMs per slot (96,36) or
//                                         percentages (50%,25%,25%)
//   gpu_partitions work SLOT K ITERS AT   one process of the MPS run: at
//                                         wall time AT, a fixed amount of
//                                         arithmetic on slot SLOT of K (K = 0:
//                                         the whole GPU); prints its time
//   gpu_partitions experiment JOBS DIR    the seeds' MM1024 vs MM256
//                                         experiment; samples to DIR
//
// Every mode exits non-zero when a check fails.
#include <cuda_runtime.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <linux/gpuslot.h>

#include "cuda_backend.hpp"
#include "nvidia/nv_plan.hpp"
#include "nvidia/nv_topology.hpp"
#include "plan/sizes.hpp"

namespace {

#define CHECK_CUDA(x)                                                                    \
	do {                                                                             \
		cudaError_t e_ = (x);                                                    \
		if (e_ != cudaSuccess) {                                                 \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,       \
				cudaGetErrorString(e_));                                 \
			exit(2);                                                         \
		}                                                                        \
	} while (0)

double now_s()
{
	timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

gpuslot::NvGpu gpu0()
{
	auto topo = gpuslot::read_nv_topology();
	if (!topo.error.empty()) {
		fprintf(stderr, "gpu_partitions: %s\n", topo.error.c_str());
		exit(2);
	}
	return topo.gpus.at(0);
}

// The layout gpuslotd would write for @sizes (SMs per slot; empty: equal).
gpuslot::SlotLayout layout_for(const gpuslot::NvGpu &g, unsigned int k,
			       const std::vector<unsigned int> &sizes, gpuslot::NvPlan *plan)
{
	*plan = gpuslot::plan_nv_partitions(g, k, sizes);
	if (!plan->error.empty()) {
		fprintf(stderr, "gpu_partitions: plan: %s\n", plan->error.c_str());
		exit(2);
	}
	gpuslot::SlotLayout l;
	l.k = k;
	l.unit_kind = GPUSLOT_UNIT_NV_SM_GROUP;
	l.unit_size = plan->group_sms;
	l.nr_units = plan->groups;
	for (const auto &groups : plan->slot_groups) {
		std::vector<uint32_t> mask((plan->groups + 31) / 32);
		for (unsigned int gi : groups)
			mask[gi / 32] |= 1u << (gi % 32);
		l.masks.push_back(mask);
	}
	return l;
}

struct Streams {
	gpuslot::CudaBackend backend;
	gpuslot::StreamSet set;
	std::vector<void *> &streams = set.streams;

	Streams(const gpuslot::CudaApi &api) : backend(api, device_zero()) {}
	~Streams() { backend.destroy(&set); }
	unsigned int sms(unsigned int slot) const { return set.units.at(slot); }

	static gpuslot::DeviceChoice device_zero()
	{
		gpuslot::DeviceChoice d;
		d.ordinal = 0;
		return d;
	}
};

gpuslot::CudaApi cuda()
{
	gpuslot::CudaApi api;
	std::string err;
	if (!gpuslot::load_cuda(&api, &err)) {
		fprintf(stderr, "gpu_partitions: %s\n", err.c_str());
		exit(2);
	}
	return api;
}

void build(Streams &s, const gpuslot::SlotLayout &l)
{
	std::string err;
	if (int e = s.backend.build(l, gpuslot::layout_slots(l, 0), &s.set, &err)) {
		fprintf(stderr, "gpu_partitions: build: %s (%d)\n", err.c_str(), e);
		exit(2);
	}
}

__device__ unsigned int smid()
{
	unsigned int id;
	asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
	return id;
}

// Each block notes its SM and spins a little so blocks spread over all
// the SMs the stream may use.
__global__ void record_smid(unsigned int *out, long long spin)
{
	if (threadIdx.x == 0) {
		out[blockIdx.x] = smid();
		long long t0 = clock64();
		while (clock64() - t0 < spin) {
		}
	}
}

std::set<unsigned int> sms_used(cudaStream_t s, unsigned int blocks)
{
	unsigned int *d, *h = new unsigned int[blocks];
	CHECK_CUDA(cudaMalloc(&d, blocks * sizeof(unsigned int)));
	record_smid<<<blocks, 128, 0, s>>>(d, 20000);
	CHECK_CUDA(cudaGetLastError());
	CHECK_CUDA(cudaStreamSynchronize(s));
	CHECK_CUDA(cudaMemcpy(h, d, blocks * sizeof(unsigned int), cudaMemcpyDeviceToHost));
	std::set<unsigned int> out(h, h + blocks);
	CHECK_CUDA(cudaFree(d));
	delete[] h;
	return out;
}

__global__ void in_cluster(unsigned int *out)
{
	if (threadIdx.x == 0)
		out[blockIdx.x] = smid();
}

// A kernel in thread-block clusters of @size on @s: launched and finished
// (cuDNN and cuBLAS pick such kernels on Hopper), or the error.
std::string cluster_launch(cudaStream_t s, unsigned int size)
{
	unsigned int *d;
	CHECK_CUDA(cudaMalloc(&d, 64 * size * sizeof(unsigned int)));
	cudaLaunchConfig_t cfg = {};
	cfg.gridDim = dim3(64 * size);
	cfg.blockDim = dim3(128);
	cfg.stream = s;
	cudaLaunchAttribute attr;
	attr.id = cudaLaunchAttributeClusterDimension;
	attr.val.clusterDim.x = size;
	attr.val.clusterDim.y = 1;
	attr.val.clusterDim.z = 1;
	cfg.attrs = &attr;
	cfg.numAttrs = 1;
	cudaError_t e = cudaLaunchKernelEx(&cfg, in_cluster, d);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(s);
	cudaGetLastError(); // a refused launch is not sticky
	CHECK_CUDA(cudaFree(d));
	return e == cudaSuccess ? "ran" : cudaGetErrorString(e);
}

// @sizes_arg: SMs or percentages per slot; NULL for k equal partitions.
int placement(unsigned int k, const char *sizes_arg)
{
	auto g = gpu0();
	std::vector<unsigned int> sizes;
	std::string err;
	if (sizes_arg && !gpuslot::parse_sizes(sizes_arg, g.sm_count, &sizes, &err)) {
		fprintf(stderr, "gpu_partitions: sizes '%s': %s; expected SMs (96,36) or "
				"percentages (50%%,25%%,25%%)\n", sizes_arg, err.c_str());
		return 2;
	}
	printf("placement: %s, %u SMs (min partition %u, co-scheduled groups of %u), k = %u\n",
	       g.name.c_str(), g.sm_count, g.min_partition_sms, g.coscheduled_alignment, k);
	printf("placement: the driver's co-scheduled splits: %s\n",
	       gpuslot::nv_splits_text(g.splits).c_str());
	gpuslot::NvPlan plan;
	auto l = layout_for(g, k, sizes, &plan);
	printf("placement: layout: %u groups of %u SMs (nv-sm-group)\n", plan.groups,
	       plan.group_sms);
	for (const auto &n : plan.notes)
		printf("placement: note: %s\n", n.c_str());
	Streams s(cuda());
	build(s, l);
	const unsigned int blocks = g.sm_count * 32;
	bool ok = true;
	std::set<unsigned int> seen;
	for (unsigned int j = 0; j < k; j++) {
		auto used = sms_used(static_cast<cudaStream_t>(s.streams[j]), blocks);
		bool disjoint = true;
		for (unsigned int sm : used)
			disjoint &= !seen.count(sm);
		seen.insert(used.begin(), used.end());
		const unsigned int want = plan.slot_sms[j], got = s.sms(j);
		bool counts = used.size() == want && got == want;
		const std::string cluster = cluster_launch(static_cast<cudaStream_t>(s.streams[j]),
							   g.coscheduled_alignment);
		printf("placement: slot %u: %u blocks ran on %zu SMs (layout %u, read back %u), "
		       "disjoint from earlier slots: %s; clusters of %u: %s; SMs %s\n",
		       j, blocks, used.size(), want, got, disjoint ? "yes" : "NO",
		       g.coscheduled_alignment, cluster.c_str(), gpuslot::sizes_text({used.begin(), used.end()}).c_str());
		ok &= disjoint && counts && cluster == "ran";
	}
	// A stream outside the partitions may use every SM.
	cudaStream_t whole;
	CHECK_CUDA(cudaStreamCreateWithFlags(&whole, cudaStreamNonBlocking));
	auto all = sms_used(whole, blocks);
	printf("placement: a plain stream's blocks ran on %zu SMs\n", all.size());
	CHECK_CUDA(cudaStreamDestroy(whole));
	printf("placement: %s\n", ok ? "PASS" : "FAIL");
	return ok ? 0 : 1;
}

// A fixed amount of arithmetic per thread: unlike a kernel that spins on
// clock64(), it takes longer when it gets less of the GPU, so it shows
// time-slicing as well as sharing.
__global__ void work(long long iters, float *sink)
{
	float x = threadIdx.x;
	for (long long i = 0; i < iters; i++)
		x = x * 1.0000001f + 0.5f;
	if (x == 123.0f)
		*sink = x;
}

int work_main(int slot, unsigned int k, long long iters, double start_at)
{
	auto g = gpu0();
	Streams s(cuda());
	cudaStream_t stream;
	unsigned int sms = g.sm_count;
	if (k) {
		gpuslot::NvPlan plan;
		build(s, layout_for(g, k, {}, &plan));
		stream = static_cast<cudaStream_t>(s.streams.at(slot));
		sms = s.sms(slot);
	} else {
		CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	}
	float *sink;
	CHECK_CUDA(cudaMalloc(&sink, sizeof(float)));
	// Two 1024-thread blocks fit an SM: 2 x SMs blocks are one wave on
	// the whole GPU and two on a half.
	const unsigned int blocks = 2 * g.sm_count;
	work<<<blocks, 1024, 0, stream>>>(iters / 20, sink);
	CHECK_CUDA(cudaStreamSynchronize(stream)); // warm up
	while (now_s() < start_at)
		usleep(100);
	double t0 = now_s();
	work<<<blocks, 1024, 0, stream>>>(iters, sink);
	CHECK_CUDA(cudaStreamSynchronize(stream));
	double t1 = now_s();
	printf("work: slot %d of k %u (%u SMs): %.6f %.6f (%.3f s); notice: %s\n", slot, k, sms,
	       t0, t1, t1 - t0, k ? s.backend.notice() : "-");
	CHECK_CUDA(cudaFree(sink));
	return 0;
}

// Naive fp32 C = A x B, one thread per element (hip_plugin_framework's
// matrix_multiply plugin).
__global__ void matrix_multiply(const float *a, const float *b, float *c, int width)
{
	int row = blockIdx.y * blockDim.y + threadIdx.y;
	int col = blockIdx.x * blockDim.x + threadIdx.x;
	if (row >= width || col >= width)
		return;
	float sum = 0;
	for (int i = 0; i < width; i++)
		sum += a[row * width + i] * b[i * width + col];
	c[row * width + col] = sum;
}

struct Matmul {
	float *a, *b, *c;
	int width = 1024;
	dim3 block;

	explicit Matmul(int edge) : block(edge, edge)
	{
		size_t n = size_t(width) * width;
		std::vector<float> h(n);
		for (size_t i = 0; i < n; i++)
			h[i] = float(i % 17) / 17.0f;
		CHECK_CUDA(cudaMalloc(&a, n * sizeof(float)));
		CHECK_CUDA(cudaMalloc(&b, n * sizeof(float)));
		CHECK_CUDA(cudaMalloc(&c, n * sizeof(float)));
		// Inputs copied once; the jobs never copy.
		CHECK_CUDA(cudaMemcpy(a, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
		CHECK_CUDA(cudaMemcpy(b, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
	}
	~Matmul()
	{
		cudaFree(a);
		cudaFree(b);
		cudaFree(c);
	}
	// One job: launch and wait; its response time in ms.
	double job(cudaStream_t s) const
	{
		dim3 grid((width + block.x - 1) / block.x, (width + block.y - 1) / block.y);
		double t0 = now_s();
		matrix_multiply<<<grid, block, 0, s>>>(a, b, c, width);
		CHECK_CUDA(cudaStreamSynchronize(s));
		return (now_s() - t0) * 1e3;
	}
};

struct Scenario {
	std::string name;
	std::vector<unsigned int> sizes; // measured, competitor SMs; empty: whole GPU
	bool competitor;
};

int experiment(int jobs, const std::string &dir)
{
	auto g = gpu0();
	const unsigned int sm = g.sm_count;
	const unsigned int half = sm / 2 / 2 * 2;
	const unsigned int big = sm * 8 / 11 / 12 * 12, small = sm - big; // 96/36 on 132
	std::vector<Scenario> scenarios = {
		{"isolated", {}, false},
		{"full sharing", {}, true},
		{"isolated on " + std::to_string(half) + " SMs", {half, sm - half}, false},
		{"even " + std::to_string(half) + "/" + std::to_string(sm - half), {half, sm - half}, true},
		{"uneven " + std::to_string(big) + "/" + std::to_string(small), {big, small}, true},
		{"uneven " + std::to_string(small) + "/" + std::to_string(big), {small, big}, true},
	};
	Matmul mm1024(32), mm256(16);
	printf("experiment: %s, %u SMs; measured MM1024 (32x32 blocks), competitor MM256 (16x16 "
	       "blocks), 1024x1024 fp32, %d measured jobs per scenario after 50 warm-up jobs\n",
	       g.name.c_str(), sm, jobs);
	printf("%-22s %8s %8s %8s %8s %8s %8s %8s %10s\n", "scenario", "samples", "min", "median",
	       "mean", "p99", "max", "std", "SMs");
	std::ofstream csv(dir + "/samples.csv");
	csv << "scenario,ms\n";
	auto api = cuda();
	for (const auto &sc : scenarios) {
		Streams s(api);
		cudaStream_t mine, theirs;
		std::string sms = "all";
		if (sc.sizes.empty()) {
			CHECK_CUDA(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking));
			CHECK_CUDA(cudaStreamCreateWithFlags(&theirs, cudaStreamNonBlocking));
		} else {
			gpuslot::NvPlan plan;
			build(s, layout_for(g, 2, sc.sizes, &plan));
			mine = static_cast<cudaStream_t>(s.streams[0]);
			theirs = static_cast<cudaStream_t>(s.streams[1]);
			sms = std::to_string(s.sms(0)) + "/" +
			      std::to_string(s.sms(1));
		}
		std::atomic<bool> stop{false};
		std::thread competitor;
		if (sc.competitor)
			competitor = std::thread([&] {
				while (!stop)
					mm256.job(theirs);
			});
		std::vector<double> t;
		for (int i = 0; i < jobs + 50; i++) {
			double ms = mm1024.job(mine);
			if (i >= 50)
				t.push_back(ms);
		}
		stop = true;
		if (competitor.joinable())
			competitor.join();
		if (sc.sizes.empty()) {
			CHECK_CUDA(cudaStreamDestroy(mine));
			CHECK_CUDA(cudaStreamDestroy(theirs));
		}
		for (double v : t)
			csv << sc.name << "," << v << "\n";
		std::sort(t.begin(), t.end());
		double mean = 0, var = 0;
		for (double v : t)
			mean += v / t.size();
		for (double v : t)
			var += (v - mean) * (v - mean) / t.size();
		printf("%-22s %8zu %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %10s\n", sc.name.c_str(),
		       t.size(), t.front(), t[t.size() / 2], mean, t[t.size() * 99 / 100], t.back(),
		       std::sqrt(var), sms.c_str());
		fflush(stdout);
	}
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	std::string mode = argc > 1 ? argv[1] : "";
	if (mode == "placement" && (argc == 3 || argc == 4))
		return placement(std::atoi(argv[2]), argc == 4 ? argv[3] : nullptr);
	if (mode == "work" && argc == 6)
		return work_main(std::atoi(argv[2]), std::atoi(argv[3]), std::atoll(argv[4]),
				 std::atof(argv[5]));
	if (mode == "experiment" && argc == 4)
		return experiment(std::atoi(argv[2]), argv[3]);
	fprintf(stderr, "usage: gpu_partitions placement K [SIZES] | work SLOT K ITERS START_AT | "
			"experiment JOBS DIR\n");
	return 2;
}
