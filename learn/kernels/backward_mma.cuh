// learn/kernels/backward_mma.cuh — the tensor-core and async-copy instructions of v3/v4 backward
// (the inline-PTX wrappers of kernels/mma.cuh, shared with the forward kernels), plus the fragment
// layouts they use (written down once, here), acc_to_a, and the dK/dV epilogue both versions share.
//
// mma.sync.m16n8k16 (row.col), 16-bit inputs, fp32 accumulators. With g = lane/4, t = lane%4:
//   A (16×16, row-major) : 4 regs of 2 halves   a0 (g, 2t..2t+1)   a1 (g+8, 2t..)   a2 (g, 2t+8..)   a3 (g+8, 2t+8..)
//   B (16×8,  k × n)     : 2 regs of 2 halves   b0 (k 2t..2t+1, n g)                b1 (k 2t+8.., n g)
//   C (16×8)             : 4 floats             c0,c1 (g, 2t..2t+1)                 c2,c3 (g+8, 2t..2t+1)
// Note that C's layout equals A's for one 8-column half: two adjacent C tiles, packed to 16 bits,
// ARE an A fragment. That is how Pᵀ and dSᵀ go from one product into the next without shared memory.
//
// ldmatrix.x4 loads four 8×8 16-bit matrices; lane l gives the row address of matrix l/8, row l%8.
// Without .trans thread (g, t) receives row g, columns 2t..2t+1 of each matrix; with .trans it
// receives column g, rows 2t..2t+1 — i.e. the transposed matrix, for free, during the load.
#pragma once

#include <cstdint>

#include "kernels/backward_common.cuh"
#include "kernels/mma.cuh"

namespace flashlab {
namespace learn_bwd {
namespace mma {

// The wrappers themselves (kernels/mma.cuh): D += A·B, ldmatrix(.trans) from a shared-memory
// pointer, two floats → one register of two 16-bit values, and cp.async (16 bytes; zero-filled
// when `valid` is false: rows past the end of the sequence, read from nowhere).
using learn::cp_async_16;
using learn::cp_async_commit;
using learn::cp_async_wait;
using learn::ldmatrix_x4;
using learn::ldmatrix_x4_trans;
using learn::mma_16816;
using learn::pack2;

// Accumulator tiles c[2kk], c[2kk+1] (a 16×16 slab) as the A operand of the next product.
template <typename T>
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack2<T>(lo[0], lo[1]);
  a[1] = pack2<T>(lo[2], lo[3]);
  a[2] = pack2<T>(hi[0], hi[1]);
  a[3] = pack2<T>(hi[2], hi[3]);
}

// The epilogue of v3 and v4: this warp's 16 key rows [j_warp, j_warp + 16) of dK (times the
// softmax scale) and dV, from the C fragments (g, t as above) to global memory, rounded to T and
// stored two elements (one 32-bit store) at a time.
template <typename T, int HD>
__device__ __forceinline__ void store_dkdv(const BwdArgs& a, int b, int hk, int j_warp, int g, int t,
                                           const float (&dk)[HD / 8][4], const float (&dv)[HD / 8][4]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int j = j_warp + g + 8 * half;
    if (j >= a.seqlen_k) continue;
    T* dkp = static_cast<T*>(a.dk) + elem_index(a.dk_st, b, j, hk);
    T* dvp = static_cast<T*>(a.dv) + elem_index(a.dv_st, b, j, hk);
#pragma unroll
    for (int nt = 0; nt < HD / 8; ++nt) {
      const int col = nt * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(dkp + col) =
          pack2<T>(a.scale * dk[nt][2 * half], a.scale * dk[nt][2 * half + 1]);
      *reinterpret_cast<uint32_t*>(dvp + col) = pack2<T>(dv[nt][2 * half], dv[nt][2 * half + 1]);
    }
  }
}

}  // namespace mma
}  // namespace learn_bwd
}  // namespace flashlab
