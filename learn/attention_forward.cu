// learn/attention_forward.cu — the forward learning path, one program (llm.c dev/cuda style).
//
// Versions (learn/kernels/forward_vN.cu; chapters in docs/learn/):
//   v0  standard attention: cuBLAS S = QKᵀ, a softmax kernel, cuBLAS O = PV. Materializes S and P:
//       O(seqlen²) memory and traffic.
//   v1  FlashAttention-1 (Algorithm 1): tiles in shared memory, online softmax; outer loop over K/V
//       tiles, inner over Q tiles, O/l/m round-trip through device memory. Scalar fp32.
//   v2  FlashAttention-2 loop order: one block per Q tile, online softmax state in registers, O and
//       LSE written once, parallel over seqlen_q. Scalar fp32.
//   v3  tensor cores: mma.sync m16n8k16 (bf16/fp16 -> fp32) via inline PTX, ldmatrix fragment loads,
//       P kept in registers (the S accumulator becomes the A operand of P·V).
//   v4  pipelined: cp.async double-buffered K/V tiles, XOR-swizzled shared memory (no bank
//       conflicts), causal block skipping, 128-bit global loads and stores, 8 warps per block.
//
// Commands (build: cmake --build <build> --target attention_forward):
//   attention_forward 3                  validate v3 on the awkward-shape sweep, then time it
//   attention_forward all                validate every version, then time every version
//   attention_forward run_all            validate every version, then the progression table on the
//                                        standard shape (bf16, hdim 128, 16 heads, 16k tokens)
// Options:
//   --seqlens 2048,4096,8192,16384       timing sequence lengths (batch = tokens / seqlen)
//   --tokens 16384 --heads 16 --hdim 128 --dtype bf16|fp16 --causal 0|1|both
//   --versions 0,2,4                     subset for all / run_all
//   --peak 798                           bf16 tensor-core peak in TFLOP/s (default: measured here
//                                        with cublasGemmEx bf16 8192³)
//   --small                              validate small shapes only (for compute-sanitizer)
//   --no-validate / --no-time            skip a phase (timing unvalidated versions is refused)
//   --seed S                             input seed (default: fresh, printed)
//
// Every version is validated against the float64 CPU reference (Impl::kReference) before any is
// timed; a version that fails is not timed and the exit code is 1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness.cuh"

using namespace flashlab;
using namespace flashlab::learn;

namespace {

constexpr int kNumVersions = 5;

// Runs the validation sweep for `versions`; returns the number of failures per version.
std::map<int, int> validate(const std::vector<int>& versions, bool small, uint64_t seed) {
  std::map<int, int> failures;
  for (int v : versions) failures[v] = 0;
  std::map<int, int> skipped = failures, passed = failures;
  const std::vector<testing::ProblemSpec> specs = validation_specs(small);
  std::printf("== validation: %zu shapes x %zu versions, seed %llu\n", specs.size(), versions.size(),
              static_cast<unsigned long long>(seed));
  for (size_t n = 0; n < specs.size(); ++n) {
    testing::ProblemSpec spec = specs[n];
    spec.data_seed = seed + n;  // fresh inputs for every shape
    auto c = std::make_unique<ForwardCase>(spec);
    for (int v : versions) {
      bool skip = false;
      const Verdict verdict = c->check(v, &skip);
      const char* tag = skip ? "SKIP" : verdict.pass ? "ok  " : "FAIL";
      if (skip) ++skipped[v];
      else if (verdict.pass) ++passed[v];
      else ++failures[v];
      if (!verdict.pass || skip || std::getenv("LEARN_VERBOSE"))
        std::printf("  %s v%d %-40s %s\n", tag, v, spec.describe().c_str(), verdict.line.c_str());
    }
  }
  for (int v : versions)
    std::printf("  v%d: %d passed, %d failed, %d skipped\n", v, passed[v], failures[v], skipped[v]);
  std::fflush(stdout);
  return failures;
}

struct Row {
  int version;
  int64_t seqlen;
  bool causal;
  double ms, tflops, pct;
  int64_t extra;
  double xcheck;  // rel_l2 against v0's output on the same inputs (-1: not checked)
};

// rel_l2 of two device tensors of `n` elements (downloaded; used on the large timing shapes, where
// the CPU reference is too slow, to cross-check every version against v0).
double device_rel_l2(const DeviceBuffer& a, const DeviceBuffer& b, DType dt, int64_t n) {
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

std::vector<Row> time_versions(const std::vector<int>& versions, const Args& args, double peak) {
  std::vector<Row> rows;
  const std::vector<int64_t> seqlens = args.get_list("--seqlens", {2048, 4096, 8192, 16384});
  const std::string causal_opt = args.get("--causal") ? args.get("--causal") : "both";
  std::vector<bool> causals;
  if (causal_opt != "1") causals.push_back(false);
  if (causal_opt != "0") causals.push_back(true);
  DType dtype = DType::kBFloat16;
  if (args.get("--dtype")) parse_dtype(args.get("--dtype"), &dtype);
  const int64_t hdim = args.get_int("--hdim", 128), heads = args.get_int("--heads", 16);
  const int64_t tokens = args.get_int("--tokens", 16384);

  std::printf("== timing: %s hdim %lld, %lld heads, %lld tokens; median ms over reps, L2 flushed; "
              "peak %.0f TFLOP/s\n", to_string(dtype), (long long)hdim, (long long)heads, (long long)tokens, peak);
  std::printf("  %-4s %-7s %-6s %10s %9s %7s %11s %9s %5s\n", "ver", "seqlen", "causal", "ms", "TFLOP/s", "%peak",
              "extra mem", "vs v0", "reps");
  for (bool causal : causals)
    for (int64_t seqlen : seqlens) {
      const testing::ProblemSpec spec = timing_spec(seqlen, causal, hdim, dtype, heads, tokens);
      TimingProblem tp;
      if (!tp.init(spec, false, 1234 + seqlen)) {
        std::printf("  could not allocate the timing problem %s\n", spec.describe().c_str());
        continue;
      }
      const int64_t n_out = spec.batch * spec.seqlen_q * spec.heads_q * spec.head_dim;
      DeviceBuffer v0_out;  // v0's output for the cross-check
      for (int v : versions) {
        const FwdParams p = tp.fwd_params(v);
        const double flops = attention_flops(p).forward;
        // Extra memory and a correctness sanity check on poisoned outputs, outside the timing.
        PoolPeak pool;
        tp.out.poison();
        if (!pool.begin()) continue;
        const Status st = run_forward(v, p);
        const int64_t extra = pool.end();
        if (!st.ok()) {
          std::printf("  v%-3d %-7lld %-6d %s\n", v, (long long)seqlen, causal ? 1 : 0, st.to_string().c_str());
          continue;
        }
        const int64_t bad = count_nonfinite(tp.out.get(), dtype, n_out);
        double xcheck = -1;
        if (v == 0) {
          if (v0_out.allocate(n_out * 2)) cudaMemcpy(v0_out.get(), tp.out.get(), n_out * 2, cudaMemcpyDeviceToDevice);
        } else if (v0_out.get()) {
          xcheck = device_rel_l2(tp.out, v0_out, dtype, n_out);
        }
        const Timing t = time_ms([&] { return run_forward(v, p); });
        if (!t.ok) {
          std::printf("  v%-3d %-7lld %-6d timing failed: %s\n", v, (long long)seqlen, causal ? 1 : 0, t.error.c_str());
          continue;
        }
        Row r{v, seqlen, causal, t.median_ms, tflops(flops, t.median_ms), 0, extra, xcheck};
        r.pct = peak > 0 ? 100.0 * r.tflops / peak : 0;
        rows.push_back(r);
        char xc[32] = "-";
        if (xcheck >= 0) std::snprintf(xc, sizeof(xc), "%.1e", xcheck);
        std::printf("  v%-3d %-7lld %-6d %10.3f %9.1f %6.1f%% %11s %9s %5d%s\n", v, (long long)seqlen, causal ? 1 : 0,
                    r.ms, r.tflops, r.pct, fmt_bytes(extra).c_str(), xc, t.reps,
                    bad != 0 ? "  NONFINITE OUTPUT" : "");
        std::fflush(stdout);
      }
    }
  return rows;
}

// The progression table: one line per version, TFLOP/s per (causal, seqlen), then ms.
void print_progression(const std::vector<Row>& rows, const std::vector<int>& versions) {
  std::vector<std::pair<bool, int64_t>> cols;
  for (const Row& r : rows)
    if (std::find(cols.begin(), cols.end(), std::make_pair(r.causal, r.seqlen)) == cols.end())
      cols.push_back({r.causal, r.seqlen});
  for (const char* what : {"TFLOP/s", "ms"}) {
    std::printf("\n== progression (%s)\n| version |", what);
    for (auto& c : cols) std::printf(" %s %lldk |", c.first ? "causal" : "full", (long long)(c.second / 1024));
    std::printf("\n|---|");
    for (size_t i = 0; i < cols.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (int v : versions) {
      std::printf("| v%d |", v);
      for (auto& c : cols) {
        const Row* hit = nullptr;
        for (const Row& r : rows)
          if (r.version == v && r.causal == c.first && r.seqlen == c.second) hit = &r;
        if (!hit) std::printf(" - |");
        else if (what[0] == 'T') std::printf(" %.1f |", hit->tflops);
        else std::printf(" %.3f |", hit->ms);
      }
      std::printf("\n");
    }
  }
  std::printf("\ncsv,version,seqlen,causal,ms,tflops,pct_peak,extra_bytes,xcheck_vs_v0\n");
  for (const Row& r : rows)
    std::printf("csv,%d,%lld,%d,%.4f,%.2f,%.2f,%lld,%.3g\n", r.version, (long long)r.seqlen, r.causal ? 1 : 0, r.ms,
                r.tflops, r.pct, (long long)r.extra, r.xcheck);
}

void usage() {
  std::printf("usage: attention_forward <0..4 | all | run_all> [--seqlens 2048,4096] [--causal 0|1|both]\n"
              "         [--hdim 64|128] [--dtype bf16|fp16] [--heads 16] [--tokens 16384] [--versions 0,2]\n"
              "         [--peak TFLOPS] [--small] [--no-validate] [--no-time] [--seed S]\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage();
    return 2;
  }
  const Args args{argc, argv};
  const std::string what = argv[1];
  std::vector<int> versions;
  if (what == "all" || what == "run_all") {
    for (int64_t v : args.get_list("--versions", {0, 1, 2, 3, 4}))
      if (v >= 0 && v < kNumVersions) versions.push_back(static_cast<int>(v));
  } else if (what.size() == 1 && what[0] >= '0' && what[0] < '0' + kNumVersions) {
    versions.push_back(what[0] - '0');
  } else {
    usage();
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: the learning kernels need a GPU\n");
    return 1;
  }
  std::printf("device: %s\n", device_name().c_str());
  const uint64_t seed = args.get("--seed") ? std::strtoull(args.get("--seed"), nullptr, 10) : fresh_seed() % 1000000007ULL;

  // 1. Validate every selected version before timing any.
  std::vector<int> timed = versions;
  int exit_code = 0;
  if (!args.has("--no-validate")) {
    const std::map<int, int> failures = validate(versions, args.has("--small"), seed);
    timed.clear();
    for (int v : versions) {
      if (failures.at(v) == 0) timed.push_back(v);
      else exit_code = 1;
    }
  }
  if (args.has("--no-time")) return exit_code;

  // 2. The bf16 tensor-core peak the percentages refer to.
  double peak = args.get_double("--peak", 0.0);
  if (peak > 0) {
    std::printf("peak: %.1f TFLOP/s (given with --peak)\n", peak);
  } else {
    peak = measure_bf16_peak_tflops();
    std::printf("peak: %.1f TFLOP/s (measured: cublasGemmEx bf16 8192^3, fp32 accumulate, median of 10)\n", peak);
  }

  // 3. Time.
  keep_pool_memory();
  const std::vector<Row> rows = time_versions(timed, args, peak);
  if (what == "run_all") print_progression(rows, timed);
  return exit_code;
}
