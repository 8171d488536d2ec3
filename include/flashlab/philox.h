// flashlab/philox.h — Philox-4x32-10 and the dropout keep-mask. Host and device.
//
// The mask must be identical on every backend (CPU reference, cpu_flash, CUDA kernels), so it is a
// pure function of (seed, offset, batch, head, row, col); docs/dropout.md explains the keying:
//   key     = (lo32(seed), hi32(seed))
//   bh      = offset + batch * heads_q + head               (uint64, wraps)
//   counter = (col / 4, row, lo32(bh), hi32(bh))
//   word    = philox4x32_10(counter, key)[col % 4]
//   keep    = word >= dropout_threshold(p)
// Row and col are positions inside the sequence (also for variable-length batches).
#pragma once

#include <cmath>
#include <cstdint>

#include "flashlab/config.h"

namespace flashlab {

struct Philox4 {
  uint32_t x[4];
};

FLASHLAB_HD void mulhilo32(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

// Philox-4x32 with 10 rounds (Salmon et al., SC'11), the generator cuRAND and PyTorch use.
FLASHLAB_HD Philox4 philox4x32_10(Philox4 ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo32(kMul0, ctr.x[0], &hi0, &lo0);
    mulhilo32(kMul1, ctr.x[2], &hi1, &lo1);
    Philox4 next;
    next.x[0] = hi1 ^ ctr.x[1] ^ k0;
    next.x[1] = lo1;
    next.x[2] = hi0 ^ ctr.x[3] ^ k1;
    next.x[3] = lo0;
    ctr = next;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return ctr;
}

// Integer threshold so that P(word < threshold) = p for a uniform 32-bit word. Computed once on
// the host and compared as integers, so no backend depends on float rounding of a uniform.
inline uint32_t dropout_threshold(float p) {
  if (!(p > 0.0f)) return 0u;
  const double t = std::floor(static_cast<double>(p) * 4294967296.0);
  return t >= 4294967295.0 ? 4294967295u : static_cast<uint32_t>(t);
}

// The four random words for columns [4*(col/4), 4*(col/4)+3] of one row.
FLASHLAB_HD Philox4 dropout_words(uint64_t seed, uint64_t offset, int64_t batch, int64_t heads_q,
                                  int64_t head, int64_t row, int64_t col) {
  const uint64_t bh = offset + static_cast<uint64_t>(batch) * static_cast<uint64_t>(heads_q) +
                      static_cast<uint64_t>(head);
  Philox4 ctr;
  ctr.x[0] = static_cast<uint32_t>(col >> 2);
  ctr.x[1] = static_cast<uint32_t>(row);
  ctr.x[2] = static_cast<uint32_t>(bh);
  ctr.x[3] = static_cast<uint32_t>(bh >> 32);
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

FLASHLAB_HD bool dropout_keep(uint64_t seed, uint64_t offset, uint32_t threshold, int64_t batch,
                              int64_t heads_q, int64_t head, int64_t row, int64_t col) {
  if (threshold == 0u) return true;
  const Philox4 w = dropout_words(seed, offset, batch, heads_q, head, row, col);
  return w.x[col & 3] >= threshold;
}

}  // namespace flashlab
