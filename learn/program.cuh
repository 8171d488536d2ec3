// learn/program.cuh — what the two learning programs (attention_forward.cu, attention_backward.cu)
// share around their own validation and timing loops: the plumbing of main(), not the lesson.
//
//   Command, parse_command   "<0..N-1 | all | run_all>" and --versions
//   program_seed             --seed S, or a fresh seed
//   ValidationTally          passed / failed / skipped per version, the summary lines the scripts grep
//   versions_to_time         the validated versions (a failure is never timed) and the exit code
//   program_peak             --peak, or the measured bf16 tensor-core peak
//   TimingSweep              the timing shapes of --seqlens --causal --dtype --hdim --heads --tokens
//   TimedRow, make_row       one timed (version, shape), fmt_xcheck
//   device_rel_l2            the cross-check of a large output against another version's
//   print_progression_table  TFLOP/s and ms per version and shape
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness.cuh"

namespace flashlab {
namespace learn {

// The positional argument: one version ("3"), or every version of --versions ("all"; "run_all"
// also prints the progression table).
struct Command {
  std::vector<int> versions;
  bool progression = false;
};

// False when argv[1] is missing or none of the forms above (the program prints its usage).
inline bool parse_command(const Args& args, int num_versions, Command* cmd) {
  if (args.argc < 2) return false;
  const std::string what = args.argv[1];
  cmd->versions.clear();
  cmd->progression = what == "run_all";
  if (what == "all" || what == "run_all") {
    std::vector<int64_t> all;
    for (int v = 0; v < num_versions; ++v) all.push_back(v);
    for (int64_t v : args.get_list("--versions", all))
      if (v >= 0 && v < num_versions) cmd->versions.push_back(static_cast<int>(v));
    return true;
  }
  if (what.size() == 1 && what[0] >= '0' && what[0] < '0' + num_versions) {
    cmd->versions.push_back(what[0] - '0');
    return true;
  }
  return false;
}

// --seed S replays a run; without it every run draws fresh inputs (the seed is printed).
inline uint64_t program_seed(const Args& args) {
  return args.get("--seed") ? std::strtoull(args.get("--seed"), nullptr, 10) : fresh_seed() % 1000000007ULL;
}

// Pass / fail / skip counts of one validation sweep, per version.
class ValidationTally {
 public:
  explicit ValidationTally(const std::vector<int>& versions) : versions_(versions) {
    for (int v : versions) passed_[v] = failed_[v] = skipped_[v] = 0;
  }
  // Counts one check. True when its line is to be printed: failures and skips always, every
  // check when LEARN_VERBOSE is set.
  bool record(int version, bool skipped, const Verdict& verdict) {
    if (skipped)
      ++skipped_[version];
    else if (verdict.pass)
      ++passed_[version];
    else
      ++failed_[version];
    return !verdict.pass || skipped || std::getenv("LEARN_VERBOSE");
  }
  static const char* tag(bool skipped, const Verdict& verdict) {
    return skipped ? "SKIP" : verdict.pass ? "ok  " : "FAIL";
  }
  // Prints "  vN: P passed, F failed, S skipped" per version (the run_gpu scripts' summary);
  // returns the failures per version.
  std::map<int, int> finish() const {
    for (int v : versions_)
      std::printf("  v%d: %d passed, %d failed, %d skipped\n", v, passed_.at(v), failed_.at(v),
                  skipped_.at(v));
    std::fflush(stdout);
    return failed_;
  }

 private:
  std::vector<int> versions_;
  std::map<int, int> passed_, failed_, skipped_;
};

// Every version is validated before any is timed: only those without a failure are timed, and
// a failure makes the exit code 1.
inline std::vector<int> versions_to_time(const std::vector<int>& versions, const std::map<int, int>& failures,
                                         int* exit_code) {
  std::vector<int> timed;
  for (int v : versions) {
    if (failures.at(v) == 0)
      timed.push_back(v);
    else
      *exit_code = 1;
  }
  return timed;
}

// The bf16 tensor-core peak the %peak column refers to: --peak, else measured here.
inline double program_peak(const Args& args) {
  double peak = args.get_double("--peak", 0.0);
  if (peak > 0) {
    std::printf("peak: %.1f TFLOP/s (given with --peak)\n", peak);
  } else {
    peak = measure_bf16_peak_tflops();
    std::printf("peak: %.1f TFLOP/s (measured: cublasGemmEx bf16 8192^3, fp32 accumulate, median of 10)\n",
                peak);
  }
  return peak;
}

// The timing shapes: every --causal (0, 1 or both: full first) × every --seqlens, at the standard
// shape unless --dtype / --hdim / --heads / --tokens say otherwise (batch = tokens / seqlen).
struct TimingSweep {
  std::vector<int64_t> seqlens;
  std::vector<bool> causals;
  DType dtype = DType::kBFloat16;
  int64_t hdim = 128, heads = 16, tokens = 16384;

  explicit TimingSweep(const Args& args) {
    seqlens = args.get_list("--seqlens", {2048, 4096, 8192, 16384});
    const std::string causal_opt = args.get("--causal") ? args.get("--causal") : "both";
    if (causal_opt != "1") causals.push_back(false);
    if (causal_opt != "0") causals.push_back(true);
    if (args.get("--dtype")) parse_dtype(args.get("--dtype"), &dtype);
    hdim = args.get_int("--hdim", 128);
    heads = args.get_int("--heads", 16);
    tokens = args.get_int("--tokens", 16384);
  }
  testing::ProblemSpec spec(int64_t seqlen, bool causal) const {
    return timing_spec(seqlen, causal, hdim, dtype, heads, tokens);
  }
  // "== timing<what>: bf16 hdim 128, 16 heads, 16384 tokens; ..."
  void print_header(const char* what, double peak) const {
    std::printf(
        "== timing%s: %s hdim %lld, %lld heads, %lld tokens; median ms over reps, L2 flushed; "
        "peak %.0f TFLOP/s\n",
        what, to_string(dtype), (long long)hdim, (long long)heads, (long long)tokens, peak);
  }
};

// One timed (version, shape).
struct TimedRow {
  int version;
  bool det;  // backward: deterministic dQ (false in the forward program)
  int64_t seqlen;
  bool causal;
  double ms, tflops, pct;
  int64_t extra;  // device memory the call added (bytes)
  double xcheck;  // rel_l2 against the reference version's output on the same inputs (-1: not checked)
};

inline TimedRow make_row(int version, bool det, int64_t seqlen, bool causal, const Timing& t, double flops,
                         double peak, int64_t extra, double xcheck) {
  TimedRow r{version, det, seqlen, causal, t.median_ms, tflops(flops, t.median_ms), 0, extra, xcheck};
  r.pct = peak > 0 ? 100.0 * r.tflops / peak : 0;
  return r;
}

// "2.1e-03", or "-" when not checked.
inline std::string fmt_xcheck(double xcheck) {
  char xc[32] = "-";
  if (xcheck >= 0) std::snprintf(xc, sizeof(xc), "%.1e", xcheck);
  return xc;
}

// rel_l2 of two 16-bit device tensors of n elements (downloaded; the cross-check of one version
// against another on the large timing shapes, where the CPU reference is too slow). 1e30 when
// anything is not finite, -1 on error.
inline double device_rel_l2(const DeviceBuffer& a, const DeviceBuffer& b, DType dt, int64_t n) {
  std::vector<uint16_t> ha(n), hb(n);
  if (!a.download(ha.data(), n * 2) || !b.download(hb.data(), n * 2)) return -1;
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = load_as_float(dt, &ha[i]), y = load_as_float(dt, &hb[i]);
    num += (x - y) * (x - y);
    den += y * y;
  }
  return std::isfinite(num) ? std::sqrt(num / std::max(den, 1e-30)) : 1e30;
}

// The progression table (markdown): one line per (version, deterministic) of `lines`, one column
// per (causal, seqlen) in the order the rows were timed; TFLOP/s first, then ms. "-": not timed.
inline void print_progression_table(const char* title, const std::vector<TimedRow>& rows,
                                    const std::vector<std::pair<int, bool>>& lines) {
  std::vector<std::pair<bool, int64_t>> cols;
  for (const TimedRow& r : rows)
    if (std::find(cols.begin(), cols.end(), std::make_pair(r.causal, r.seqlen)) == cols.end())
      cols.push_back({r.causal, r.seqlen});
  for (const char* what : {"TFLOP/s", "ms"}) {
    std::printf("\n== %s (%s)\n| version |", title, what);
    for (auto& c : cols)
      std::printf(" %s %lldk |", c.first ? "causal" : "full", (long long)(c.second / 1024));
    std::printf("\n|---|");
    for (size_t i = 0; i < cols.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (auto& l : lines) {
      std::printf("| v%d%s |", l.first, l.second ? " det" : "");
      for (auto& c : cols) {
        const TimedRow* hit = nullptr;
        for (const TimedRow& r : rows)
          if (r.version == l.first && r.det == l.second && r.causal == c.first && r.seqlen == c.second)
            hit = &r;
        if (!hit)
          std::printf(" - |");
        else if (what[0] == 'T')
          std::printf(" %.1f |", hit->tflops);
        else
          std::printf(" %.3f |", hit->ms);
      }
      std::printf("\n");
    }
  }
}

}  // namespace learn
}  // namespace flashlab
