// learn/basics/cuda/03_sync_race.cu — synchronization and races, made visible.
//
// Threads of a block share __shared__ memory, but nothing orders one warp's store before another
// warp's load unless a barrier does: __syncthreads() waits until every thread of the block reached
// it, and makes their shared (and global) writes visible to the block. Without it a warp may read
// a word another warp has not written yet. Across blocks there is no barrier at all: updates of one
// global word must be atomic, or increments are lost (read, add, write by two threads = one add).
//
//   reverse_racy       each block reverses 1024 floats through shared memory, no barrier between
//                      the write s[t] and the read s[1023 - t]; warps are delayed by a warp-dependent
//                      __nanosleep so the race shows every run (warp 0 reads what warp 31 has not
//                      written yet)
//   reverse_synced     the same with __syncthreads(): always right
//   count_racy         n threads do `*counter = *counter + 1` on one global word (volatile):
//                      most increments are lost
//   count_atomic       atomicAdd(counter, 1) per thread: exact, all n updates serialized on one address
//   count_warp_atomic  one atomicAdd(counter, 32 active lanes) per warp: exact, 32x fewer atomics
//
//   build-basics/03_sync_race     the racy kernels report how wrong they are (not a failure: that is
//                                 the lesson); the synced / atomic ones are validated, then timed
//   compute-sanitizer --tool racecheck build-basics/03_sync_race --racecheck-only
//                                 names the shared-memory hazard of reverse_racy
#include "basics.cuh"

using namespace flashlab;
using namespace flashlab::learn;
using namespace flashlab::learn::basics;

constexpr int kBlock = 1024;

template <bool kSync>
__device__ __forceinline__ void reverse(const float* __restrict__ x, float* __restrict__ y, int delay_ns) {
  __shared__ float s[kBlock];
  const int t = threadIdx.x;
  const int64_t base = blockIdx.x * int64_t(kBlock);
  if (delay_ns) __nanosleep(delay_ns * (t / 32));  // later warps write later
  s[t] = x[base + t];
  if (kSync) __syncthreads();
  y[base + t] = s[kBlock - 1 - t];
}
__global__ void reverse_racy(const float* x, float* y, int delay_ns) {
  reverse<false>(x, y, delay_ns);
}
__global__ void reverse_synced(const float* x, float* y, int delay_ns) {
  reverse<true>(x, y, delay_ns);
}

__global__ void count_racy(volatile unsigned* counter, int64_t n) {
  if (blockIdx.x * int64_t(blockDim.x) + threadIdx.x < n) *counter = *counter + 1;  // load, add, store
}
__global__ void count_atomic(unsigned* counter, int64_t n) {
  if (blockIdx.x * int64_t(blockDim.x) + threadIdx.x < n) atomicAdd(counter, 1u);
}
__global__ void count_warp_atomic(unsigned* counter, int64_t n) {
  const bool in_range = blockIdx.x * int64_t(blockDim.x) + threadIdx.x < n;
  const unsigned active = __ballot_sync(0xffffffffu, in_range);  // the lanes of this warp inside n
  if (in_range && threadIdx.x % 32 == __ffs(active) - 1) atomicAdd(counter, unsigned(__popc(active)));
}

int main(int argc, char** argv) {
  const Args args{argc, argv};
  const Report rep = Report::open("03_sync_race", 0);
  Check check;

  // 1. Shared-memory race.
  const int blocks = static_cast<int>(args.get_int("--blocks", 4096));
  const size_t n = size_t(blocks) * kBlock;
  DeviceBuffer x, y;
  std::vector<float> hx;
  if (!random_floats(x, hx, n, fresh_seed()) || !y.allocate(n * 4)) return 1;
  std::vector<float> want(n);
  for (size_t b = 0; b < size_t(blocks); ++b)
    for (int t = 0; t < kBlock; ++t) want[b * kBlock + t] = hx[b * kBlock + kBlock - 1 - t];
  const int delay_ns = static_cast<int>(args.get_int("--delay-ns", 200));
  for (int racy = 1; racy >= 0; --racy) {
    y.poison();
    if (racy)
      reverse_racy<<<blocks, kBlock>>>(x.as<float>(), y.as<float>(), delay_ns);
    else
      reverse_synced<<<blocks, kBlock>>>(x.as<float>(), y.as<float>(), delay_ns);
    const std::vector<float> got = download_floats(y, n);
    if (racy) {
      size_t wrong = 0;
      for (size_t i = 0; i < n; ++i) wrong += !(got[i] == want[i]);
      rep.value("reverse_racy: wrong elements", double(wrong), "of " + std::to_string(n),
                "no __syncthreads(): a race, different every run");
    } else {
      check.expect_equal("reverse_synced", got.data(), want.data(), n);
    }
  }
  if (args.has("--racecheck-only")) return check.exit_code("03_sync_race");

  // 2. Global counter: lost updates, atomics, warp-aggregated atomics.
  const int64_t threads = args.get_int("--threads", int64_t(1) << 24);
  const int tb = 256, grid = static_cast<int>((threads + tb - 1) / tb);
  DeviceBuffer counter;
  if (!counter.allocate(4)) return 1;
  auto count = [&](int kind) {
    unsigned* c = counter.as<unsigned>();
    cudaMemsetAsync(c, 0, 4);
    if (kind == 0)
      count_racy<<<grid, tb>>>(c, threads);
    else if (kind == 1)
      count_atomic<<<grid, tb>>>(c, threads);
    else
      count_warp_atomic<<<grid, tb>>>(c, threads - 5);  // a partial last warp: 27 active lanes
  };
  const char* names[] = {"count_racy", "count_atomic", "count_warp_atomic"};
  for (int kind = 0; kind < 3; ++kind) {
    count(kind);
    unsigned got = 0;
    if (!LEARN_CHECK(cudaDeviceSynchronize()) || !counter.download(&got, 4)) return 1;
    const unsigned expected = static_cast<unsigned>(kind == 2 ? threads - 5 : threads);
    if (kind == 0)
      rep.value("count_racy: increments kept", double(got), "of " + std::to_string(expected), "lost updates");
    else
      check.expect_equal(names[kind], &got, &expected, 1);
  }
  for (int kind = 0; kind < 3; ++kind) rep.time(names[kind], time_launch([&] { count(kind); }));
  return check.exit_code("03_sync_race");
}
