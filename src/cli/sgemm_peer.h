// src/cli/sgemm_peer.h — the CPU peer measured in the same run: one OpenBLAS sgemm doing the same
// number of floating-point operations as the attention forward, on the same number of threads.
// Its TFLOP/s is what a well-tuned dense fp32 kernel reaches on this CPU, the yardstick for the
// CPU attention implementations (which do two matrix products plus a softmax).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/runner.h"

namespace flashlab {
namespace cli {

struct SgemmResult {
  int64_t m = 0, n = 0, k = 0;  // C(m,n) = A(m,k) B(k,n), row-major
  double flops = 0;             // 2 m n k
  int threads = 0;
  std::string core;             // the kernel set OpenBLAS picked for this CPU ("Haswell", ...)
  std::vector<double> ms;       // per timed iteration
};

// OpenBLAS picks its kernels from the CPU model at load time; a CPU newer than the library falls
// back to old generic ones ("Prescott": SSE3) and the peer looks slow. OPENBLAS_CORETYPE=SkylakeX
// (or Haswell, Zen) overrides the choice; the table prints the core it ran with.
bool sgemm_core_is_generic(const std::string& core);

// Square-ish problem with 2 m n k ~ `flops` (m = n = k = round(cbrt(flops / 2)), capped so the
// three matrices stay under ~1 GiB).
SgemmResult sgemm_shape(double flops);
// Runs it: warm-up, then timed iterations (budget as for the implementations).
Status run_sgemm(int threads, const TimingPlan& plan, const IterationCallback& cb, SgemmResult* r);

}  // namespace cli
}  // namespace flashlab
