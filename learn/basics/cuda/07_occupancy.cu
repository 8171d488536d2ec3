// learn/basics/cuda/07_occupancy.cu — occupancy and latency hiding.
//
// A global load takes ~600-800 ns to return from HBM. An SM keeps the memory system busy only if it
// has enough loads in flight meanwhile: Little's law, bytes in flight per SM = bandwidth per SM x
// latency (H100: 3.35 TB/s / 132 SMs ~ 25 GB/s per SM, x ~0.7 µs ~ 18 KB, more under load). In
// flight = resident warps x loads each
// warp issues before it waits. Occupancy = resident warps / the SM's maximum (64), limited by the
// threads, registers and shared memory each block takes (cuda_basics/occupancy exercise).
//
//   copy1 <block size>          one float per thread: only occupancy puts loads in flight. Block 32
//                               is capped by the 32-blocks-per-SM limit (50 % occupancy)
//   copy1, 256 threads + smem   dynamic shared memory the kernel does not even use, sized so that
//                               only 1, 2, 4 or 8 blocks fit on an SM: occupancy 12.5 % .. 100 %
//   copy_ilp4, + smem           four independent loads per thread before the first store: the same
//                               low occupancy with 4x the bytes in flight (instruction-level
//                               parallelism replaces warps)
//
//   build-basics/07_occupancy    validate each configuration, then time it; prints the occupancy
//                                from cudaOccupancyMaxActiveBlocksPerMultiprocessor
#include "basics.cuh"

using namespace flashlab;
using namespace flashlab::learn;
using namespace flashlab::learn::basics;

// kIlp independent loads per thread, all issued before the first store waits for one: ILP 1 is
// the plain one-float-per-thread copy, ILP 4 has four loads in flight per thread.
template <int kIlp>
__global__ void copy_ilp(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t base = blockIdx.x * int64_t(blockDim.x) * kIlp + threadIdx.x;
  float v[kIlp];
#pragma unroll
  for (int k = 0; k < kIlp; ++k) {
    const int64_t i = base + k * int64_t(blockDim.x);
    v[k] = i < n ? x[i] : 0.0f;
  }
#pragma unroll
  for (int k = 0; k < kIlp; ++k) {
    const int64_t i = base + k * int64_t(blockDim.x);
    if (i < n) y[i] = v[k];
  }
}
constexpr int kIlp = 4;
const auto copy1 = copy_ilp<1>;
const auto copy_ilp4 = copy_ilp<kIlp>;

struct Config {
  std::string name;
  bool ilp;
  int threads;
  int blocks_per_sm;  // 0: as many as fit (no shared memory); else shared memory sized to allow this many
};

int main(int argc, char** argv) {
  const Args args{argc, argv};
  const int64_t n = args.get_int("--n", int64_t(1) << 26);
  const size_t bytes = n * sizeof(float);
  const Report rep = Report::open("07_occupancy", bytes);

  int dev = 0, smem_per_sm = 0, reserved = 0, max_threads_sm = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
  cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev);
  cudaDeviceGetAttribute(&max_threads_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev);
  for (auto k : {copy1, copy_ilp4})
    LEARN_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_per_sm - reserved));

  std::vector<Config> configs;
  for (int t : {32, 64, 128, 256, 1024}) configs.push_back({"copy1 block " + std::to_string(t), false, t, 0});
  for (int b : {1, 2, 4, 8})
    configs.push_back({"copy1 block 256, smem for " + std::to_string(b) + "/SM", false, 256, b});
  for (int b : {1, 2, 4})
    configs.push_back({"copy_ilp4 block 256, smem for " + std::to_string(b) + "/SM", true, 256, b});

  Check check;
  DeviceBuffer x, y;
  std::vector<float> hx;
  if (!random_floats(x, hx, n, fresh_seed()) || !y.allocate(bytes)) return 1;
  for (const Config& c : configs) {
    // Shared memory per block so that exactly blocks_per_sm fit: the SM's total, minus the
    // per-block reservation the runtime keeps, divided up (rounded down to 1 KB).
    const size_t smem = c.blocks_per_sm ? ((smem_per_sm / c.blocks_per_sm - reserved) / 1024) * 1024 : 0;
    auto kernel = c.ilp ? copy_ilp4 : copy1;
    const int64_t per_block = int64_t(c.threads) * (c.ilp ? kIlp : 1);
    const int grid = static_cast<int>((n + per_block - 1) / per_block);
    auto launch = [&] { kernel<<<grid, c.threads, smem>>>(x.as<float>(), y.as<float>(), n); };
    int resident = 0;
    LEARN_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, c.threads, smem));
    const double occupancy = 100.0 * resident * c.threads / max_threads_sm;

    y.poison();
    launch();
    const std::vector<float> got = download_floats(y, n);
    if (!check.expect_equal(c.name, got.data(), hx.data(), n)) continue;
    const Timing t = time_launch(launch);
    char note[96];
    std::snprintf(note, sizeof(note), "%d blocks/SM, occupancy %.1f %%", resident, occupancy);
    std::printf("  %s: %s\n", c.name.c_str(), note);
    rep.bandwidth(c.name + " (" + note + ")", t, 2.0 * bytes);
  }
  return check.exit_code("07_occupancy");
}
