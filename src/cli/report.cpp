#include "cli/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/bench_setup.h"
#include "cli/decode.h"

namespace flashlab {
namespace cli {
namespace {

// ---- number formatting

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}
// Few significant digits whatever the magnitude (CPU TFLOP/s are ~0.01, GPU ~500).
std::string fmt_sig(double x) {
  if (!std::isfinite(x)) return "-";
  const double a = std::fabs(x);
  if (a >= 100) return fmt("%.1f", x);
  if (a >= 1) return fmt("%.3f", x);
  if (a >= 0.01) return fmt("%.4f", x);
  return fmt("%.2e", x);
}
std::string fmt_err(double x) { return std::isfinite(x) ? fmt("%.2e", x) : "-"; }

// Largest error over a row's tensors, ignoring LSE (reported in its own column).
void worst_errors(const BenchRow& row, double* max_abs, double* rel_l2, double* lse) {
  *max_abs = *rel_l2 = *lse = std::nan("");
  for (const TensorCheck& c : row.checks) {
    if (c.name == "lse") {
      *lse = c.err.max_abs;
      continue;
    }
    if (!std::isfinite(*max_abs) || c.err.max_abs > *max_abs) *max_abs = c.err.max_abs;
    if (!c.rel_l2_applies) continue;  // a negligible reference: rel_l2 is noise over noise
    if (!std::isfinite(*rel_l2) || c.err.rel_l2 > *rel_l2) *rel_l2 = c.err.rel_l2;
  }
}

bool has_timing(const BenchRow& r) {
  return r.status != RowStatus::kError && r.status != RowStatus::kSkipped && !r.ms.empty();
}

// ---- a plain text table: first column left-aligned, the rest right-aligned

void print_grid(const std::vector<std::vector<std::string>>& cells, std::ostream& os) {
  std::vector<size_t> w;
  for (const auto& row : cells)
    for (size_t i = 0; i < row.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], row[i].size());
    }
  for (const auto& row : cells) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(w[i] - row[i].size(), ' ');
      line += i == 0 ? row[i] + pad : "  " + pad + row[i];
    }
    os << line << "\n";
  }
}

// "dk: rel_l2 5.10e-02 > 2.00e-02; max_abs ..." — every bound the tensor broke.
std::string describe_failure(const TensorCheck& c, const Tolerance& tol) {
  std::vector<std::string> broken;
  if (!c.err.finite())
    broken.push_back(std::to_string(c.err.nonfinite) + "/" + std::to_string(c.err.count) +
                     " elements NaN, inf or unwritten");
  const bool lse = c.name == "lse";
  const double max_bound = lse ? tol.lse_abs : tol.max_abs * std::max(1.0, c.ref_max_abs);
  if (c.rel_l2_applies && c.err.rel_l2 > tol.rel_l2)
    broken.push_back("rel_l2 " + fmt_err(c.err.rel_l2) + " > " + fmt_err(tol.rel_l2));
  if (c.err.max_abs > max_bound)
    broken.push_back("max_abs " + fmt_err(c.err.max_abs) + " > " + fmt_err(max_bound));
  std::string s = c.name + ":";
  for (size_t i = 0; i < broken.size(); ++i) s += (i ? "; " : " ") + broken[i];
  return s;
}

// ---- JSON

std::string jstr(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) o += fmt("\\u%04x", c);
    else o += c;
  }
  return o + "\"";
}
std::string jnum(double x) { return std::isfinite(x) ? fmt("%.9g", x) : "null"; }
std::string jbool(bool b) { return b ? "true" : "false"; }
template <typename T>
std::string jarray(const std::vector<T>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + jnum(static_cast<double>(v[i]));
  return o + "]";
}

// A row's "checks" array elements (bench and decode rows).
void json_checks(const std::vector<TensorCheck>& checks, std::ostream& os) {
  for (size_t j = 0; j < checks.size(); ++j) {
    const TensorCheck& c = checks[j];
    os << (j ? ", " : "") << "{\"tensor\": " << jstr(c.name) << ", \"pass\": " << jbool(c.pass)
       << ", \"max_abs\": " << jnum(c.err.max_abs) << ", \"rel_l2\": " << jnum(c.err.rel_l2)
       << ", \"rel_l2_applies\": " << jbool(c.rel_l2_applies) << ", \"nonfinite\": " << c.err.nonfinite
       << ", \"count\": " << c.err.count << ", \"ref_max_abs\": " << jnum(c.ref_max_abs) << "}";
  }
}

// The JSON members both reports share, from "tolerance" to the opening of "rows".
template <typename Report>
void json_tolerance_and_notes(const Report& r, std::ostream& os) {
  os << "  \"tolerance\": {\"rel_l2\": " << jnum(r.tol.rel_l2) << ", \"max_abs\": "
     << jnum(r.tol.max_abs) << ", \"max_abs_scaled_by\": \"max(1, max|ref|)\", \"lse_abs\": "
     << jnum(r.tol.lse_abs) << "},\n";
  os << "  \"reference_checked\": " << jbool(r.reference_checked) << ",\n  \"notes\": [";
  for (size_t i = 0; i < r.notes.size(); ++i) os << (i ? ", " : "") << jstr(r.notes[i]);
  os << "],\n  \"rows\": [";
}

// The end of a human report (bench and decode): each row's message and failed checks, then one
// verdict line. `who(row)` names a row.
template <typename Report, typename Who>
void print_verdict(const Report& r, Who who, std::ostream& os) {
  int failures = 0;
  for (const auto& row : r.rows) {
    if (!row.message.empty()) os << who(row) << ": " << row.message << "\n";
    if (row.status != RowStatus::kFail) {
      failures += counts_as_failure(row.status);
      continue;
    }
    ++failures;
    for (const TensorCheck& c : row.checks)
      if (!c.pass) os << who(row) << " FAIL " << describe_failure(c, r.tol) << "\n";
  }
  if (failures) {
    os << failures << " row(s) FAILED\n";
  } else {
    os << (r.reference_checked ? "all checks passed\n"
                               : "no failures, but nothing was compared with the reference\n");
  }
}

}  // namespace

void print_table(const BenchReport& r, std::ostream& os) {
  const BenchOptions& o = r.options;
  os << "flashlab bench: " << r.spec.describe() << " | threads " << r.threads << " | warmup "
     << o.warmup << ", iters " << o.iters << (o.iters_explicit ? "" : " (2 s budget per row)")
     << "\n";
  os << "work: forward " << fmt("%.4g", r.flops.forward / 1e9) << " GFLOP";
  if (o.backward) os << ", backward " << fmt("%.4g", r.flops.backward / 1e9) << " GFLOP";
  os << " (mask-aware: " << r.flops.visible_pairs << " visible query-key pairs x heads)\n";
  os << "check: against the float64 reference on the same " << to_string(r.spec.dtype)
     << " inputs; PASS if " << r.tol.describe() << "\n\n";

  std::vector<std::vector<std::string>> cells = {{"impl", "pass", "device", "check", "ms", "n",
                                                  "TFLOP/s", "x_sgemm", "peak_mem", "max_abs",
                                                  "rel_l2", "lse_err"}};
  for (const BenchRow& row : r.rows) {
    double max_abs, rel_l2, lse;
    worst_errors(row, &max_abs, &rel_l2, &lse);
    const bool timed = has_timing(row);
    cells.push_back({row.impl, row.backward ? "bwd" : "fwd", to_string(row.device),
                     to_string(row.status), timed ? fmt("%.3f", row.median_ms) : "-",
                     timed ? std::to_string(row.ms.size()) : "-",
                     timed ? fmt_sig(row.tflops) : "-",
                     timed && r.has_sgemm ? fmt("%.2f", row.tflops / r.sgemm_tflops) : "-",
                     row.peak_bytes >= 0 ? format_bytes(static_cast<double>(row.peak_bytes)) : "-",
                     fmt_err(max_abs), fmt_err(rel_l2), fmt_err(lse)});
  }
  if (r.has_sgemm)
    cells.push_back({"openblas_sgemm", "-", "cpu", "-", fmt("%.3f", r.sgemm_median_ms),
                     std::to_string(r.sgemm.ms.size()), fmt_sig(r.sgemm_tflops), "1.00", "-", "-",
                     "-", "-"});
  print_grid(cells, os);

  os << "\n";
  if (r.has_sgemm)
    os << "openblas_sgemm: C = A B with M = N = K = " << r.sgemm.m << " ("
       << fmt("%.4g", r.sgemm.flops / 1e9) << " GFLOP, fp32), " << r.sgemm.threads
       << " threads, OpenBLAS core " << r.sgemm.core << "; x_sgemm = TFLOP/s / sgemm TFLOP/s\n";
  for (const std::string& note : r.notes) os << "note: " << note << "\n";
  print_verdict(r, [](const BenchRow& row) { return row.impl + (row.backward ? " bwd" : " fwd"); }, os);
}

void print_json(const BenchReport& r, std::ostream& os) {
  const BenchOptions& o = r.options;
  const testing::ProblemSpec& s = r.spec;
  os << "{\n  \"tool\": \"flashlab bench\",\n  \"version\": " << jstr(build_info().version) << ",\n";
  os << "  \"config\": {\"batch\": " << s.batch << ", \"seqlen_q\": " << s.seqlen_q
     << ", \"seqlen_k\": " << s.seqlen_k << ", \"heads_q\": " << s.heads_q
     << ", \"heads_kv\": " << s.heads_kv << ", \"head_dim\": " << s.head_dim
     << ", \"dtype\": " << jstr(to_string(s.dtype)) << ", \"causal\": " << jbool(s.causal)
     << ", \"align\": "
     << jstr(s.causal_align == CausalAlign::kBottomRight ? "bottom-right" : "top-left")
     << ", \"window\": [" << s.window_left << ", " << s.window_right
     << "], \"sink_tokens\": " << s.sink_tokens << ", \"softcap\": " << jnum(s.softcap) << ", \"alibi\": " << jbool(s.alibi)
     << ", \"sinks\": " << jbool(s.sinks)
     << ", \"dropout\": " << jnum(s.dropout_p) << ", \"seed\": " << o.seed
     << ", \"varlen_q\": " << jarray(s.lens_q) << ", \"varlen_k\": " << jarray(s.lens_k)
     << ", \"backward\": " << jbool(o.backward) << ", \"threads\": " << r.threads
     << ", \"warmup\": " << o.warmup << ", \"iters\": " << o.iters
     << ", \"iters_explicit\": " << jbool(o.iters_explicit) << "},\n";
  os << "  \"flops\": {\"forward\": " << jnum(r.flops.forward)
     << ", \"backward\": " << jnum(r.flops.backward)
     << ", \"visible_pairs\": " << r.flops.visible_pairs << "},\n";
  json_tolerance_and_notes(r, os);
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const BenchRow& row = r.rows[i];
    const bool timed = has_timing(row);
    os << (i ? "," : "") << "\n    {\"impl\": " << jstr(row.impl)
       << ", \"pass\": " << jstr(row.backward ? "backward" : "forward")
       << ", \"device\": " << jstr(to_string(row.device))
       << ", \"status\": " << jstr(to_string(row.status))
       << ", \"message\": " << jstr(row.message)
       << ", \"ms_median\": " << (timed ? jnum(row.median_ms) : "null")
       << ", \"ms\": " << jarray(row.ms) << ", \"flops\": " << jnum(row.flops)
       << ", \"tflops\": " << (timed ? jnum(row.tflops) : "null") << ", \"vs_sgemm\": "
       << (timed && r.has_sgemm ? jnum(row.tflops / r.sgemm_tflops) : "null")
       << ", \"peak_extra_bytes\": "
       << (row.peak_bytes >= 0 ? std::to_string(row.peak_bytes) : "null") << ", \"checks\": [";
    json_checks(row.checks, os);
    os << "]}";
  }
  os << "\n  ],\n  \"sgemm\": ";
  if (r.has_sgemm) {
    os << "{\"m\": " << r.sgemm.m << ", \"n\": " << r.sgemm.n << ", \"k\": " << r.sgemm.k
       << ", \"flops\": " << jnum(r.sgemm.flops) << ", \"threads\": " << r.sgemm.threads
       << ", \"openblas_core\": " << jstr(r.sgemm.core)
       << ", \"ms_median\": " << jnum(r.sgemm_median_ms) << ", \"ms\": " << jarray(r.sgemm.ms)
       << ", \"tflops\": " << jnum(r.sgemm_tflops) << "}";
  } else {
    os << "null";
  }
  os << ",\n  \"all_passed\": " << jbool(r.all_passed()) << "\n}\n";
}

// ---- decode mode (`flashlab bench --decode`)

namespace {
std::string decode_shape(const BenchOptions& o, const DecodeReport& r) {
  std::string s = "b" + std::to_string(o.batch) + " sq" + std::to_string(o.seqlen_q) + " cache " +
                  std::to_string(o.cache_len) + " hq" + std::to_string(o.heads) + " hkv" +
                  std::to_string(o.heads_kv) + " d" + std::to_string(o.head_dim) + " " +
                  to_string(o.dtype);
  if (o.page_size > 0)
    s += " paged(page " + std::to_string(o.page_size) + ", " + std::to_string(r.num_pages) + " pages, " +
         (o.pages_in_order ? "sequential)" : "shuffled)");
  else
    s += " contiguous";
  return s + (o.splits > 0 ? " splits " + std::to_string(o.splits) : "");
}
void decode_errors(const DecodeRow& row, double* max_abs, double* rel_l2, double* lse) {
  *max_abs = *rel_l2 = *lse = std::nan("");
  for (const TensorCheck& c : row.checks) {
    if (c.name == "lse") {
      *lse = c.err.max_abs;
    } else {
      *max_abs = c.err.max_abs;
      if (c.rel_l2_applies) *rel_l2 = c.err.rel_l2;
    }
  }
}
bool decode_timed(const DecodeRow& r) {
  return r.status != RowStatus::kError && r.status != RowStatus::kSkipped && !r.ms.empty();
}
}  // namespace

void print_decode_table(const DecodeReport& r, std::ostream& os) {
  const BenchOptions& o = r.options;
  os << "flashlab bench --decode: " << decode_shape(o, r) << " | threads " << r.threads
     << " | warmup " << o.warmup << ", iters " << o.iters << "\n";
  os << "work: K and V read once = " << fmt("%.4g", r.kv_bytes / 1e6)
     << " MB per call (batch x cache_len x heads_kv x head_dim x 2 x " << dtype_size(o.dtype)
     << " bytes); TB/s = that / median time\n";
  if (r.reference_checked)
    os << "check: against attention_forward (impl reference, float64) on the same keys gathered "
          "dense; PASS if "
       << r.tol.describe() << "\n";
  os << "\n";
  std::vector<std::vector<std::string>> cells = {
      {"impl", "pass", "device", "check", "ms", "n", "TB/s", "max_abs", "rel_l2", "lse_err"}};
  for (const DecodeRow& row : r.rows) {
    double max_abs, rel_l2, lse;
    decode_errors(row, &max_abs, &rel_l2, &lse);
    const bool timed = decode_timed(row);
    cells.push_back({row.impl, "decode", to_string(row.device), to_string(row.status),
                     timed ? fmt("%.3f", row.median_ms) : "-",
                     timed ? std::to_string(row.ms.size()) : "-", timed ? fmt_sig(row.tb_per_s) : "-",
                     fmt_err(max_abs), fmt_err(rel_l2), fmt_err(lse)});
  }
  print_grid(cells, os);
  os << "\n";
  for (const std::string& note : r.notes) os << "note: " << note << "\n";
  print_verdict(r, [](const DecodeRow& row) { return row.impl + " decode"; }, os);
}

void print_decode_json(const DecodeReport& r, std::ostream& os) {
  const BenchOptions& o = r.options;
  os << "{\n  \"tool\": \"flashlab bench --decode\",\n  \"version\": " << jstr(build_info().version)
     << ",\n";
  os << "  \"config\": {\"batch\": " << o.batch << ", \"seqlen_q\": " << o.seqlen_q
     << ", \"cache_len\": " << o.cache_len << ", \"page_size\": " << o.page_size
     << ", \"num_pages\": " << r.num_pages << ", \"pages_in_order\": " << (o.pages_in_order ? "true" : "false")
     << ", \"heads_q\": " << o.heads
     << ", \"heads_kv\": " << o.heads_kv << ", \"head_dim\": " << o.head_dim
     << ", \"dtype\": " << jstr(to_string(o.dtype)) << ", \"seed\": " << o.seed
     << ", \"threads\": " << r.threads << ", \"warmup\": " << o.warmup << ", \"iters\": " << o.iters
     << "},\n";
  os << "  \"kv_bytes\": " << jnum(r.kv_bytes) << ",\n";
  json_tolerance_and_notes(r, os);
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const DecodeRow& row = r.rows[i];
    const bool timed = decode_timed(row);
    os << (i ? "," : "") << "\n    {\"impl\": " << jstr(row.impl) << ", \"pass\": \"decode\""
       << ", \"device\": " << jstr(to_string(row.device))
       << ", \"status\": " << jstr(to_string(row.status)) << ", \"message\": " << jstr(row.message)
       << ", \"ms_median\": " << (timed ? jnum(row.median_ms) : "null")
       << ", \"ms\": " << jarray(row.ms)
       << ", \"tb_per_s\": " << (timed ? jnum(row.tb_per_s) : "null") << ", \"checks\": [";
    json_checks(row.checks, os);
    os << "]}";
  }
  os << "\n  ],\n  \"all_passed\": " << jbool(r.all_passed()) << "\n}\n";
}

}  // namespace cli
}  // namespace flashlab
