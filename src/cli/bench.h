// src/cli/bench.h — `flashlab bench`: check every selected implementation against the float64
// reference, time it, and collect one report (printed as a table or JSON by report.h).
#pragma once

#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/checks.h"
#include "cli/sgemm_peer.h"
#include "testing/problem.h"

namespace flashlab {
namespace cli {

// How a row's check came out.
enum class RowStatus {
  kPass,       // every output within tolerance of the reference
  kFail,       // an output out of tolerance, NaN or unwritten
  kError,      // the implementation returned an error Status
  kSkipped,    // not run: unsupported configuration for an implementation nobody asked for
  kReference,  // the reference itself (the oracle run; checked only for unwritten / NaN outputs)
  kUnchecked,  // no reference (too big): only checked for unwritten / NaN outputs
};
const char* to_string(RowStatus s);
bool counts_as_failure(RowStatus s);

// One implementation and one pass (forward or backward).
struct BenchRow {
  std::string impl;
  Device device = Device::kCPU;
  bool backward = false;
  RowStatus status = RowStatus::kPass;
  std::string message;              // the Status text for kError / kSkipped
  std::vector<TensorCheck> checks;  // out, lse | dq, dk, dv
  std::vector<double> ms;           // timed iterations
  double median_ms = 0;
  double flops = 0;
  double tflops = 0;
  int64_t peak_bytes = -1;          // peak extra memory of the first call; -1 unknown
};

struct BenchReport {
  BenchOptions options;
  testing::ProblemSpec spec;  // as run (varlen: batch and max lengths filled in)
  int threads = 0;
  AttentionFlops flops;
  Tolerance tol;
  bool reference_checked = false;
  std::vector<std::string> notes;  // skipped checks, skipped implementations, ...
  std::vector<BenchRow> rows;
  bool has_sgemm = false;
  SgemmResult sgemm;
  double sgemm_median_ms = 0;
  double sgemm_tflops = 0;
  bool all_passed() const;
};

// Adds a note to *notes when the timed runs `ms` of `who` spread widely (max/min > 1.5), with what
// usually steadies them (one thread for a tiny CPU shape, more runs). Shared with decode mode.
void note_spread(const std::string& who, const std::vector<double>& ms, bool cpu, int threads,
                 std::vector<std::string>* notes);

// Runs the benchmark. A non-OK Status means the run could not start (bad arguments, invalid shape,
// out of memory): nothing was measured. Implementation failures are rows, not errors.
Status run_bench(const BenchOptions& options, BenchReport* report);

}  // namespace cli
}  // namespace flashlab
