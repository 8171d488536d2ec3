// src/cli/args.h — command-line options of `flashlab bench` and their parser.
//
// The parser only checks syntax (is it a number, a known dtype, a known impl name). Shape rules
// (heads_q a multiple of heads_kv, head_dim limits, ...) belong to the library: the numbers are
// passed through unchanged and the dispatcher's Status is printed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashlab/flashlab.h"

namespace flashlab {
namespace cli {

struct BenchOptions {
  // --- shape
  int64_t batch = 2;
  int64_t heads = 8;
  int64_t heads_kv = -1;  // -1: same as heads
  int64_t seqlen_q = 1024;
  int64_t seqlen_k = 1024;
  int64_t head_dim = 64;
  DType dtype = DType::kBFloat16;
  std::vector<int32_t> varlen_q;  // non-empty: variable-length batch (batch = its size)
  std::vector<int32_t> varlen_k;  // empty: same as varlen_q

  // --- mask and score modifications
  bool causal = false;
  CausalAlign align = CausalAlign::kBottomRight;
  int64_t window_left = -1;
  int64_t window_right = -1;
  int64_t sink_tokens = 0;  // StreamingLLM sink tokens (not the learning kernels)
  float softcap = 0.0f;
  bool alibi = false;
  bool sinks = false;  // attention sinks, one logit per query head (not the learning kernels)
  float dropout = 0.0f;
  uint64_t seed = 42;  // inputs and the dropout mask

  // --- what to run
  std::vector<Impl> impls;  // empty: every implementation available on this machine
  bool impls_explicit = false;
  bool backward = false;    // --backward; on when no option but --json / --quiet is given
  int warmup = 1;
  int iters = 10;
  bool iters_explicit = false;  // without --iters, slow impls stop after a time budget
  int threads = 0;              // 0: all (omp_get_max_threads())
  bool force_check = false;     // --check: run the reference even when it is huge
  bool no_check = false;        // --no-check: skip the reference (timing sweeps)
  bool no_sgemm = false;        // --no-sgemm: skip the OpenBLAS peer row

  // --- tolerance override (negative: the per-dtype default)
  double tol_rel_l2 = -1;
  double tol_max_abs = -1;

  // --- decode mode (--decode: attention_with_kvcache against a full cache; src/cli/decode.h)
  bool decode = false;
  int64_t cache_len = 4096;  // keys per sequence, every sequence filled to it
  int64_t page_size = 0;     // 0: contiguous cache; > 0: paged, a shuffled page table
  bool pages_in_order = false;  // --page-order sequential: page table 0, 1, 2, ... (locality probe)
  int64_t splits = 0;        // splits of the keys: 0 = the library's choice (auto), N > 0 forced

  // --- output
  bool json = false;
  bool quiet = false;
  bool help = false;

  std::vector<std::string> given;  // the options on the command line, in order (decode checks them)
};

// Parses argv[first..argc) into *out. Returns an InvalidArgument Status naming the option on error.
Status parse_bench_args(int argc, char** argv, int first, BenchOptions* out);

// Usage text of `flashlab bench` and of the whole tool.
const char* bench_usage();
const char* tool_usage();

}  // namespace cli
}  // namespace flashlab
