// learn/basics/cuda/04_coalescing.cu — coalesced vs strided global memory access, and float4.
//
// The same bytes copied in a different order. A warp's 32 loads are served in 32-byte sectors:
// 32 consecutive floats are 4 sectors (128 bytes, all used); 32 floats `stride` apart are up to
// 32 sectors of which one float each is used, so the DRAM moves up to 8x more than the kernel asks.
//
//   copy_coalesced        y[i] = x[i], thread i -> element i (lane L of a warp touches base + L)
//   copy_strided<S>       every element still copied once, but thread t handles element
//                         (t % (n/S)) * S + t / (n/S): neighbouring threads are S floats apart
//   copy_float4           grid-stride loop over float4: 16 bytes per thread per instruction,
//                         a quarter of the instructions, fewer blocks (what memcpy does)
//   scale_interleaved     y = 2x, the cuda_basics/strided_vs_coalesced exercise's solution:
//                         at step j thread t takes i = j*T + t (T = threads in the grid)
//   scale_chunked         the same exercise's `chunked` mutant: thread t takes k consecutive
//                         elements t*k .. t*k+k-1, so at each step the lanes are k floats apart
//
//   build-basics/04_coalescing              validate every kernel, then time them (64M floats)
//   build-basics/04_coalescing --ncu --n 8192 --grid 2 --block 128
//                                           one launch each of scale_interleaved and scale_chunked
//                                           at the simulator's shape (learn/basics/ncu_vs_sim.py)
#include "basics.cuh"

using namespace flashlab;
using namespace flashlab::learn;
using namespace flashlab::learn::basics;

__global__ void copy_coalesced(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i];
}

// 32-bit index math (n < 2^32): a 64-bit division per element would cost more than the access.
template <int S>
__global__ void copy_strided(const float* __restrict__ x, float* __restrict__ y, uint32_t n) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t rows = n / S;  // n is a multiple of S
  if (t < n) {
    const uint32_t i = (t % rows) * S + t / rows;  // lane L and L+1 are S floats apart
    y[i] = x[i];
  }
}

__global__ void copy_float4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = x[i];
}

// The simulator exercise's two orders, line for line (learn/exercises/cuda_basics/strided_vs_coalesced).
__global__ void scale_interleaved(const float* __restrict__ x, float* __restrict__ y, int n) {
  const int T = blockDim.x * gridDim.x;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int j = 0; j < (n + T - 1) / T; ++j) {
    const int i = j * T + t;
    if (i < n) y[i] = 2.0f * x[i];
  }
}
__global__ void scale_chunked(const float* __restrict__ x, float* __restrict__ y, int n) {
  const int T = blockDim.x * gridDim.x;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int k = (n + T - 1) / T;
  for (int j = 0; j < k; ++j) {
    const int i = t * k + j;  // at step j, lane L reads element L*k + j: stride k
    if (i < n) y[i] = 2.0f * x[i];
  }
}

static bool check_scale(Check& check, const char* name, const DeviceBuffer& y, const std::vector<float>& x) {
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = 2.0f * x[i];
  const std::vector<float> got = download_floats(y, x.size());
  return check.expect_equal(name, got.data(), want.data(), x.size());
}

// --ncu: the simulator's launch shape, one launch of each kernel (validated, not timed).
static int ncu_mode(const Args& args) {
  const int n = static_cast<int>(args.get_int("--n", 8192));
  const int grid = static_cast<int>(args.get_int("--grid", 2)),
            block = static_cast<int>(args.get_int("--block", 128));
  Check check;
  DeviceBuffer x, y;
  std::vector<float> hx;
  if (!random_floats(x, hx, n, 42) || !y.allocate(n * sizeof(float))) return 1;
  scale_interleaved<<<grid, block>>>(x.as<float>(), y.as<float>(), n);
  check_scale(check, "scale_interleaved (ncu shape)", y, hx);
  y.poison();
  scale_chunked<<<grid, block>>>(x.as<float>(), y.as<float>(), n);
  check_scale(check, "scale_chunked (ncu shape)", y, hx);
  return check.exit_code("04_coalescing --ncu");
}

int main(int argc, char** argv) {
  const Args args{argc, argv};
  if (args.has("--ncu")) return ncu_mode(args);
  const int64_t n = args.get_int("--n", int64_t(1) << 26);  // 64M floats, 256 MiB per array
  const size_t bytes = n * sizeof(float);
  const Report rep = Report::open("04_coalescing", bytes);

  Check check;
  DeviceBuffer x, y;
  std::vector<float> hx;
  if (n % 128 != 0 || n >= (int64_t(1) << 31) || !random_floats(x, hx, n, fresh_seed()) || !y.allocate(bytes))
    return 1;
  const float* px = x.as<float>();
  float* py = y.as<float>();
  const int threads = 256;
  const int blocks = static_cast<int>((n + threads - 1) / threads);
  const int few_blocks = num_sms() * 8;  // grid-stride kernels: 8 x 256 threads = a full SM

  struct Version {
    const char* name;
    std::function<void()> launch;
    bool scale;  // y = 2x (else y = x)
  };
  const Version versions[] = {
      {"copy_coalesced", [&] { copy_coalesced<<<blocks, threads>>>(px, py, n); }, false},
      {"copy_strided<2>", [&] { copy_strided<2><<<blocks, threads>>>(px, py, n); }, false},
      {"copy_strided<8>", [&] { copy_strided<8><<<blocks, threads>>>(px, py, n); }, false},
      {"copy_strided<32>", [&] { copy_strided<32><<<blocks, threads>>>(px, py, n); }, false},
      {"copy_float4 (grid-stride)",
       [&] {
         copy_float4<<<few_blocks, threads>>>(reinterpret_cast<const float4*>(px),
                                              reinterpret_cast<float4*>(py), n / 4);
       },
       false},
      {"scale_interleaved (sim solution)",
       [&] { scale_interleaved<<<few_blocks, threads>>>(px, py, int(n)); }, true},
      {"scale_chunked (sim mutant)", [&] { scale_chunked<<<few_blocks, threads>>>(px, py, int(n)); }, true},
  };
  // 1. Validate every version (output poisoned first, so an element never written shows as NaN).
  for (const Version& v : versions) {
    y.poison();
    v.launch();
    if (v.scale) {
      check_scale(check, v.name, y, hx);
    } else {
      const std::vector<float> got = download_floats(y, n);
      check.expect_equal(v.name, got.data(), hx.data(), n);
    }
  }
  // 2. Time them: bytes = read + written.
  for (const Version& v : versions) rep.bandwidth(v.name, time_launch(v.launch), 2.0 * bytes);
  return check.exit_code("04_coalescing");
}
