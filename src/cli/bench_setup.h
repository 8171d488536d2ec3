// src/cli/bench_setup.h — turning options into a problem, and the checks made before allocating it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/args.h"
#include "testing/problem.h"

namespace flashlab {
namespace cli {

testing::ProblemSpec make_spec(const BenchOptions& o);

// Params with the user's sizes and flags and placeholder pointers (no tensor memory), so the
// library can validate a shape before we allocate buffers for it. Owns the varlen offsets it
// points to (the validator reads those on the host).
class ShapeOnlyParams {
 public:
  // Fails only when the varlen total length does not fit the int32 offsets.
  Status init(const testing::ProblemSpec& spec);
  FwdParams forward(Impl impl) const;
  BwdParams backward(Impl impl) const;

 private:
  void fill(AttentionConfig* c, Impl impl) const;
  testing::ProblemSpec spec_;
  std::vector<int32_t> cu_q_, cu_k_;
  int64_t rows_q_ = 0, rows_k_ = 0;  // rows per tensor: seqlen, or the packed total
};

// Guards behind the library's validation (they matter while it is incomplete, and for shapes that
// are valid but do not fit this machine): sizes must be non-negative and the host buffers must
// fit in memory. Returns InvalidArgument / OutOfMemory with the numbers.
Status check_host_memory(const testing::ProblemSpec& spec);

// Bytes of one score matrix (seqlen_q x seqlen_k doubles): what the float64 reference holds per
// thread. The check is skipped beyond kReferenceMatrixLimit unless --check forces it.
double reference_matrix_bytes(const testing::ProblemSpec& spec);
constexpr double kReferenceMatrixLimit = 4.0 * (1ull << 30);

std::string format_bytes(double bytes);  // "1.50 MiB"

}  // namespace cli
}  // namespace flashlab
