// learn/basics/cuda/06_reduce.cu — the sum of a large fp32 array: shared-memory tree, warp shuffles,
// and the version that runs at memory speed.
//
// Every version writes one partial sum per block; one final block (reduce_partials) adds the
// partials, so the result is deterministic (no float atomics) and the pass costs microseconds.
//
//   v1 reduce_smem_tree     one element per thread, a tree in shared memory: log2(256) = 8 rounds,
//                           each behind a __syncthreads(), half the threads idle after each round
//   v2 reduce_warp_shuffle  one element per thread, __shfl_xor_sync inside each warp (5 steps, no
//                           shared memory, no barrier), then one value per warp through shared memory
//                           (the cuda_basics/warp_reduce and block_reduce exercises)
//   v3 reduce_grid_stride   a few blocks per SM, each thread walks the array with a grid-stride loop
//                           of float4 loads, 4 independent accumulators (4 loads in flight per
//                           thread), then v2's block reduction: bandwidth-bound, the goal is
//                           >= 70 % of the device-to-device copy bandwidth
//
//   build-basics/06_reduce          validate every version (awkward sizes and 64M floats), then time
//
// Bandwidth here = bytes read / time (a reduction writes nothing worth counting); the copy line it
// is compared with counts read + written bytes: both are what the DRAM moves per second.
#include "basics.cuh"

using namespace flashlab;
using namespace flashlab::learn;
using namespace flashlab::learn::basics;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float warp_sum(float v) {
  for (int m = 16; m > 0; m /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, m);  // butterfly: every lane ends with the sum
  return v;
}

// The sum of one value per thread of the block; the result is valid in thread 0.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float per_warp[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) per_warp[warp] = v;
  __syncthreads();
  v = threadIdx.x < kWarps ? per_warp[threadIdx.x] : 0.0f;
  return warp == 0 ? warp_sum(v) : 0.0f;
}

__global__ void reduce_smem_tree(const float* __restrict__ x, int64_t n, float* __restrict__ partial) {
  __shared__ float s[kThreads];
  const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

__global__ void reduce_warp_shuffle(const float* __restrict__ x, int64_t n, float* __restrict__ partial) {
  const int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  const float total = block_sum(i < n ? x[i] : 0.0f);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void reduce_grid_stride(const float* __restrict__ x, int64_t n, float* __restrict__ partial) {
  const float4* x4 = reinterpret_cast<const float4*>(x);  // cudaMalloc'd: 256-byte aligned
  const int64_t n4 = n / 4, stride = int64_t(gridDim.x) * kThreads;
  float acc[4] = {0, 0, 0, 0};
  int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  // Four float4 loads issued before any is used: 64 bytes in flight per thread.
  for (; i + 3 * stride < n4; i += 4 * stride) {
    float4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = x4[i + u * stride];
#pragma unroll
    for (int u = 0; u < 4; ++u) acc[u] += (v[u].x + v[u].y) + (v[u].z + v[u].w);
  }
  for (; i < n4; i += stride) {
    const float4 v = x4[i];
    acc[0] += (v.x + v.y) + (v.z + v.w);
  }
  // The n % 4 tail, one element per thread of block 0.
  if (blockIdx.x == 0 && threadIdx.x < n % 4) acc[1] += x[n4 * 4 + threadIdx.x];
  const float total = block_sum((acc[0] + acc[1]) + (acc[2] + acc[3]));
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// One block adds the partials: 528 for v3, n / 256 for v1 and v2 (262144 on 64M floats, a few µs).
__global__ void reduce_partials(const float* __restrict__ partial, int n, float* __restrict__ out) {
  float acc = 0;
  for (int i = threadIdx.x; i < n; i += kThreads) acc += partial[i];
  const float total = block_sum(acc);
  if (threadIdx.x == 0) *out = total;
}

struct Version {
  const char* name;
  decltype(&reduce_smem_tree) kernel;
  bool grid_stride;  // v3: a fixed number of blocks; v1, v2: one element per thread
};
const Version kVersions[] = {{"v1 reduce_smem_tree", reduce_smem_tree, false},
                             {"v2 reduce_warp_shuffle", reduce_warp_shuffle, false},
                             {"v3 reduce_grid_stride (float4, 4 in flight)", reduce_grid_stride, true}};

static int blocks_for(const Version& v, int64_t n) {
  // v3: 4 blocks of 256 threads per SM (half the SM's 2048 threads): enough loads in flight.
  return v.grid_stride ? num_sms() * 4
                       : static_cast<int>(std::max<int64_t>(1, (n + kThreads - 1) / kThreads));
}

// Both passes; `partial` holds at least blocks_for(v, n) floats.
static void run(const Version& v, const float* x, int64_t n, float* partial, float* out) {
  const int blocks = blocks_for(v, n);
  v.kernel<<<blocks, kThreads>>>(x, n, partial);
  reduce_partials<<<1, kThreads>>>(partial, blocks, out);
}

int main(int argc, char** argv) {
  const Args args{argc, argv};
  const int64_t n = args.get_int("--n", int64_t(1) << 26);  // 64M floats, 256 MiB
  const Report rep = Report::open("06_reduce", n * sizeof(float));
  Check check;

  // Integer-valued inputs in [-8, 8] \ {0}: every partial sum of 64M of them stays far below 2^24,
  // so any summation order is exact in fp32 and a dropped or doubled element cannot hide in a
  // tolerance. The float64 CPU sum must be matched exactly.
  std::vector<float> hx(n);
  std::mt19937 gen(static_cast<uint32_t>(fresh_seed()));
  std::uniform_int_distribution<int> pick(1, 16);
  for (float& v : hx) {
    const int k = pick(gen);
    v = static_cast<float>(k <= 8 ? k : 8 - k);
  }
  DeviceBuffer x, partial, out;
  if (!x.upload(hx.data(), n * sizeof(float)) || !partial.allocate(((n + kThreads - 1) / kThreads + 1) * 4) ||
      !out.allocate(4))
    return 1;
  // Validate on prefixes of the same array (awkward sizes) and on all of it.
  for (const Version& v : kVersions)
    for (int64_t len : {int64_t(1), int64_t(3), int64_t(1000), int64_t(1234567), n}) {
      double want = 0;
      for (int64_t i = 0; i < len; ++i) want += hx[i];
      out.poison();
      run(v, x.as<float>(), len, partial.as<float>(), out.as<float>());
      float got = NAN;
      if (!LEARN_CHECK(cudaDeviceSynchronize()) || !out.download(&got, 4)) got = NAN;
      const double g = got;
      check.expect_equal(std::string(v.name) + " n=" + std::to_string(len), &g, &want, 1);
    }
  for (const Version& v : kVersions)
    rep.bandwidth(v.name,
                  time_launch([&] { run(v, x.as<float>(), n, partial.as<float>(), out.as<float>()); }),
                  double(n) * sizeof(float));
  return check.exit_code("06_reduce");
}
