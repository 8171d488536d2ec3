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
  std::vector<float> sinks_;  // spec.sinks: zeros, readable by the validation
  int64_t rows_q_ = 0, rows_k_ = 0;  // rows per tensor: seqlen, or the packed total
};

// What a run allocates on the host, in bytes (doubles: absurd sizes must not overflow). The
// problem's buffers live for the whole run; the sgemm peer, the reference and cpu_flash run one
// after the other, so only the largest of their scratch adds to them.
struct HostMemory {
  double problem = 0;               // q, k, v, out, lse, dout, dq, dk, dv and the oracle's copies
  double sgemm = 0;                 // the peer's three fp32 matrices
  double reference = 0;             // the float64 reference's scratch, all threads (0: it does not run)
  double reference_per_thread = 0;  // S and P (seqlen_q x seqlen_k doubles each) and its rows
  int reference_threads = 0;        // threads the reference uses: at most one per (batch, head)
  double cpu_flash = 0;             // cpu_flash's tiles per thread and its backward's row sums
  double total() const;
};
// What the run will do: how many CPU threads, forward only or also backward, and which parts run.
struct MemoryPlan {
  int threads = 1;
  bool backward = false;
  bool reference = false;  // the oracle check, or the reference timed as an implementation
  bool cpu_flash = false;
  double sgemm_flops = 0;  // 0: no sgemm peer
};
HostMemory host_memory_needed(const testing::ProblemSpec& spec, const MemoryPlan& plan);

// Guards behind the library's validation (they matter while it is incomplete, and for shapes that
// are valid but do not fit this machine): sizes must be non-negative and everything the run
// allocates (host_memory_needed) must fit in 75 % of the physical memory. Returns InvalidArgument
// / OutOfMemory with the numbers and what to change.
Status check_sizes(const testing::ProblemSpec& spec);
Status check_host_memory(const testing::ProblemSpec& spec, const MemoryPlan& plan);

// Bytes of one score matrix (seqlen_q x seqlen_k doubles): what the float64 reference holds per
// thread. The check is skipped beyond kReferenceMatrixLimit unless --check forces it.
double reference_matrix_bytes(const testing::ProblemSpec& spec);
constexpr double kReferenceMatrixLimit = 4.0 * (1ull << 30);

std::string format_bytes(double bytes);  // "1.50 MiB"

}  // namespace cli
}  // namespace flashlab
