// src/cuda/decode/decode_timeline.cuh — per-CTA timestamps of the tile decode kernel, a diagnosis
// build only: compiled in with -DFLASHLAB_DECODE_TIMELINE (CMAKE_CUDA_FLAGS), else FLASHLAB_TL(k)
// is nothing and the kernel is the same code.
//
// Thread 0 of CTA i writes the GPU's %globaltimer (ns) at mark k into g_decode_tl[8 i + k] and its
// SM's id into slot 7. The marks (decode_tile_kernel.cuh):
//   0  the CTA's start                    4  the CTA's end (after its output is stored)
//   1  Q in shared memory (the prologue's end, after the barrier)
//   2  the first tile waited for          5  thread 0's queries stored (before that barrier)
//   3  the loop's end                     6  the staged rows landed (fused append / rotation only)
// The host side (decode.cu, timeline_before / timeline_after), with the environment variable
// FLASHLAB_DECODE_TL=path: reads 512 MiB before the tile kernel's launch (the L2 holds none of the
// call's data; skipped after an append kernel, which the decode kernel overlaps), synchronizes
// after it and writes one CSV row per CTA (cta, smid, t0..t6; 0 = a mark not reached).
// benchmarks/decode_timeline.py runs the fused-append benchmark's four calls and prints the
// marks' percentiles (docs/perf.md, sessions 31-33, are what it found).
#pragma once

#ifdef FLASHLAB_DECODE_TIMELINE
namespace flashlab {
namespace decode {
constexpr int kTimelineCtas = 65536;  // CTAs past it are not recorded
static __device__ unsigned long long g_decode_tl[kTimelineCtas * 8];
__device__ __forceinline__ void timeline_mark(int k) {
  if (threadIdx.x == 0 && blockIdx.x < kTimelineCtas) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    g_decode_tl[blockIdx.x * 8 + k] = t;
    g_decode_tl[blockIdx.x * 8 + 7] = sm;
  }
}
}  // namespace decode
}  // namespace flashlab
#define FLASHLAB_TL(k) ::flashlab::decode::timeline_mark(k)
#else
#define FLASHLAB_TL(k) \
  do {                 \
  } while (0)
#endif
