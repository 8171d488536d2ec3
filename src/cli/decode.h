// src/cli/decode.h — `flashlab bench --decode`: attention_with_kvcache against a KV cache filled
// to --cache-len for every sequence (contiguous, or paged through a shuffled page table), checked
// against a dense float64 reference and timed; reported as ms and TB/s of K/V read (docs/cli.md).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/bench.h"
#include "cli/checks.h"

namespace flashlab {
namespace cli {

// Bytes of K and V one call must read at least: batch * cache_len * heads_kv * head_dim * 2 * dtype
// bytes (every cached key and value once; q, out and the page table are small beside them).
double decode_kv_bytes(const BenchOptions& o);

struct DecodeRow {
  std::string impl;
  Device device = Device::kCPU;
  RowStatus status = RowStatus::kPass;
  std::string message;              // the Status text for kError / kSkipped
  std::vector<TensorCheck> checks;  // out, lse
  std::vector<double> ms;           // timed iterations
  double median_ms = 0;
  double tb_per_s = 0;  // decode_kv_bytes / median time
};

struct DecodeReport {
  BenchOptions options;
  int threads = 0;
  int64_t num_pages = 0;  // paged cache: pages allocated (batch * ceil(cache_len / page_size))
  double kv_bytes = 0;
  Tolerance tol;
  bool reference_checked = false;
  std::vector<std::string> notes;
  std::vector<DecodeRow> rows;
  bool all_passed() const;
};

// A non-OK Status means nothing was measured (bad arguments, invalid shape, out of memory).
Status run_decode(const BenchOptions& options, DecodeReport* report);

void print_decode_table(const DecodeReport& report, std::ostream& os);
void print_decode_json(const DecodeReport& report, std::ostream& os);

}  // namespace cli
}  // namespace flashlab
