// tools/racecheck_mbarrier_probe.cu — does compute-sanitizer's racecheck see the ordering that an
// mbarrier gives between threads' shared-memory reads and a later bulk copy (TMA engine) into the
// same bytes? The Hopper backward reuses a 2-stage buffer that a bulk copy fills and the consumer
// threads read with ordinary loads (LSE and D), with exactly this handshake; racecheck reports a
// hazard there. This probe is that handshake and nothing else:
//
//   producer (thread 0), per step s: wait "empty[s % 2]" (after the first round), arm
//     "full[s % 2]" and bulk-copy 512 bytes of global memory into buffer s % 2
//   consumers (threads 32..63): wait "full[s % 2]", read the buffer, arrive on "empty[s % 2]"
//
// Mode 0: every consumer thread arrives on "empty" after its reads (count 32).
// Mode 1: mode 0 plus a __syncthreads per step (a barrier racecheck certainly understands).
// Mode 2: the consumers meet at a named barrier (bar.sync 1, 32) and one thread arrives (count 1):
//         correct too (the barrier orders the other threads' reads before that arrive), and the
//         pattern the backward used first.
// Every mode checks the values it read, so a wrong handshake shows as a failure, not only as a
// report. Build and run on an sm_90 device:
//   nvcc -arch=sm_90a -o /tmp/probe tools/racecheck_mbarrier_probe.cu
//   for m in 0 1 2; do timeout 60 compute-sanitizer --tool racecheck /tmp/probe $m; done
// (H100, 2026-11-24, modes 0 and 1: 0 hazards, 0 wrong values.)
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

namespace {

constexpr int kFloats = 128;  // 512 bytes per step
constexpr int kSteps = 8;

__device__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ void mbar_init(unsigned long long* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(b)), "r"(count) : "memory");
}
__device__ void mbar_arrive(unsigned long long* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(b)) : "memory");
}
__device__ void mbar_arrive_expect_tx(unsigned long long* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
}
__device__ void mbar_wait(unsigned long long* b, unsigned phase) {
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
      "@!p bra W;\n}" ::"r"(smem_addr(b)),
      "r"(phase)
      : "memory");
}
__device__ void bulk_g2s(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

__global__ void probe(const float* src, int mode, int* errors) {
  __shared__ alignas(128) float buf[2][kFloats];
  __shared__ alignas(8) unsigned long long full[2], empty[2];
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int i = 0; i < 2; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], mode == 2 ? 1 : 32);  // the 32 consumer threads, or one for all
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  for (int s = 0; s < kSteps; ++s) {
    const int stage = s % 2;
    const unsigned phase = (s / 2) % 2;
    if (tid == 0) {
      if (s >= 2) mbar_wait(&empty[stage], phase ^ 1);
      mbar_arrive_expect_tx(&full[stage], kFloats * sizeof(float));
      bulk_g2s(buf[stage], src + s * kFloats, kFloats * sizeof(float), &full[stage]);
    } else if (tid >= 32 && tid < 64) {
      mbar_wait(&full[stage], phase);
      const int lane = tid - 32;
      for (int i = lane; i < kFloats; i += 32)
        if (buf[stage][i] != float(s * kFloats + i)) atomicAdd(errors, 1);
      if (mode == 2) {
        asm volatile("bar.sync 1, 32;" ::: "memory");
        if (lane == 0) mbar_arrive(&empty[stage]);
      } else {
        mbar_arrive(&empty[stage]);
      }
    }
    if (mode == 1) __syncthreads();
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int mode = argc > 1 ? std::atoi(argv[1]) : 0;
  float host[kSteps * kFloats];
  for (int i = 0; i < kSteps * kFloats; ++i) host[i] = float(i);
  float* src = nullptr;
  int* errors = nullptr;
  cudaMalloc(&src, sizeof(host));
  cudaMalloc(&errors, sizeof(int));
  cudaMemcpy(src, host, sizeof(host), cudaMemcpyHostToDevice);
  cudaMemset(errors, 0, sizeof(int));
  probe<<<1, 64>>>(src, mode, errors);
  int h = -1;
  const cudaError_t st = cudaMemcpy(&h, errors, sizeof(int), cudaMemcpyDeviceToHost);
  std::printf("mode %d: %s, %d wrong values\n", mode, cudaGetErrorString(st), h);
  return st == cudaSuccess && h == 0 ? 0 : 1;
}
