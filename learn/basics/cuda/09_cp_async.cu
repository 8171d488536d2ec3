// learn/basics/cuda/09_cp_async.cu — cp.async double buffering: load tile k+1 while computing tile k.
//
// A block walks over tiles of 1024 floats (4 KB). Each tile goes through shared memory because
// every thread needs another thread's values: out[j] = poly(s[j]) * s[1023 - j] (poly: Horner,
// kDegree steps). One block per SM, 256 threads: few warps, so the load latency is NOT hidden by
// occupancy (07_occupancy) and must be hidden by the pipeline.
//
//   v1 tile_sync         load tile k (global -> registers -> shared), __syncthreads, compute,
//                        __syncthreads: the SM waits for every load, then the memory system waits
//                        for the compute
//   v2 tile_cp_async     two shared buffers. cp.async copies global -> shared without passing
//                        through registers and without blocking the thread; commit_group closes a
//                        batch, wait_group N waits until at most N batches are still in flight.
//                        Prologue: issue tile 0. Step k: issue tile k+1 into the other buffer,
//                        commit, wait_group 1 (tile k has landed, k+1 may still fly), barrier,
//                        compute on buffer k % 2, barrier (the buffer is refilled at step k+1).
//                        The schedule is the cuda_basics/cp_async_schedule exercise with S = 2.
//
//   build-basics/09_cp_async     validate against a float64 CPU evaluation, then time (64M floats)
#include "basics.cuh"

using namespace flashlab;
using namespace flashlab::learn;
using namespace flashlab::learn::basics;

constexpr int kThreads = 256;
constexpr int kTile = kThreads * 4;  // one float4 (16 bytes, one cp.async) per thread per tile
constexpr int kDegree = 16;          // Horner steps per element: enough compute to be worth hiding

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));  // .cg: L2 only
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__host__ __device__ inline float poly(float v) {
  float acc = 1.0f;
  for (int d = 0; d < kDegree; ++d)
    acc = acc * (0.125f * v) + 1.0f;  // Horner: sum (v/8)^d, |v/8| < 1: well conditioned
  return acc;
}

// out[j] for the four elements this thread owns, from a tile in shared memory.
__device__ __forceinline__ void compute_tile(const float* s, float* __restrict__ out_tile) {
  float4 r;
  float* rv = &r.x;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int j = threadIdx.x * 4 + e;
    rv[e] = poly(s[j]) * s[kTile - 1 - j];  // s[kTile-1-j] belongs to another thread: a barrier is due
  }
  reinterpret_cast<float4*>(out_tile)[threadIdx.x] = r;
}

__global__ void tile_sync(const float* __restrict__ x, float* __restrict__ out, int tiles) {
  __shared__ __align__(16) float s[kTile];
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    reinterpret_cast<float4*>(s)[threadIdx.x] =
        reinterpret_cast<const float4*>(x + int64_t(t) * kTile)[threadIdx.x];
    __syncthreads();
    compute_tile(s, out + int64_t(t) * kTile);
    __syncthreads();  // before the next tile overwrites s
  }
}

__global__ void tile_cp_async(const float* __restrict__ x, float* __restrict__ out, int tiles) {
  __shared__ __align__(16) float s[2][kTile];
  int t = blockIdx.x;
  if (t < tiles) cp_async_16(&s[0][threadIdx.x * 4], x + int64_t(t) * kTile + threadIdx.x * 4);
  cp_async_commit();
  for (int k = 0; t < tiles; ++k, t += gridDim.x) {
    const int next = t + gridDim.x;
    if (next < tiles)
      cp_async_16(&s[(k + 1) % 2][threadIdx.x * 4], x + int64_t(next) * kTile + threadIdx.x * 4);
    cp_async_commit();   // always commit (an empty group at the end) so wait_group 1 means "tile k"
    cp_async_wait<1>();  // this thread's copies of tile k are done...
    __syncthreads();     // ...and everyone else's
    compute_tile(s[k % 2], out + int64_t(t) * kTile);
    __syncthreads();  // buffer k % 2 is the target of the copies issued at step k + 1
  }
  cp_async_wait<0>();
}

using TileKernel = decltype(&tile_sync);
struct Version {
  const char* name;
  TileKernel kernel;
};
const Version kVersions[] = {{"v1 tile_sync", tile_sync}, {"v2 tile_cp_async (2 stages)", tile_cp_async}};

int main(int argc, char** argv) {
  const Args args{argc, argv};
  const int64_t n = args.get_int("--n", int64_t(1) << 26);
  if (n % kTile) {
    std::printf("--n must be a multiple of %d\n", kTile);
    return 2;
  }
  const size_t bytes = n * sizeof(float);
  const Report rep = Report::open("09_cp_async", bytes);
  Check check;

  DeviceBuffer x, out;
  std::vector<float> hx;
  if (!random_floats(x, hx, n, fresh_seed()) || !out.allocate(bytes)) return 1;
  const int blocks_per_sm = static_cast<int>(args.get_int("--blocks-per-sm", 1));
  const int grid = num_sms() * blocks_per_sm;
  for (const Version& v : kVersions)
    for (int64_t len : {int64_t(kTile), int64_t(kTile) * 7, int64_t(kTile) * 1001, n}) {
      const int tiles = static_cast<int>(len / kTile);
      out.poison();
      v.kernel<<<grid, kThreads>>>(x.as<float>(), out.as<float>(), tiles);
      const std::vector<float> got = download_floats(out, len);
      std::vector<double> want(len);
      for (int64_t i = 0; i < len; ++i) {
        const int64_t base = i / kTile * kTile, j = i % kTile;
        double acc = 1.0;
        for (int d = 0; d < kDegree; ++d) acc = acc * (0.125 * hx[i]) + 1.0;
        want[i] = acc * hx[base + kTile - 1 - j];
      }
      check.expect_close(std::string(v.name) + " n=" + std::to_string(len), got.data(), want.data(), len,
                         2e-5, 1e-6);
    }
  const Timing t1 =
      time_launch([&] { tile_sync<<<grid, kThreads>>>(x.as<float>(), out.as<float>(), int(n / kTile)); });
  const Timing t2 =
      time_launch([&] { tile_cp_async<<<grid, kThreads>>>(x.as<float>(), out.as<float>(), int(n / kTile)); });
  rep.bandwidth(kVersions[0].name, t1, 2.0 * bytes);
  rep.bandwidth(kVersions[1].name, t2, 2.0 * bytes);
  if (t1.ok && t2.ok) rep.value("cp.async speed-up over sync", t1.median_ms / t2.median_ms, "x");
  return check.exit_code("09_cp_async");
}
