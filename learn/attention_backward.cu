// learn/attention_backward.cu — the backward learning path, one program (llm.c dev/cuda style).
//
// Versions (learn/kernels/backward_vN.cu; chapters in docs/learn/*-backward.md):
//   v0  standard attention: S, P, dP, dS materialized (O(seqlen²) scratch), five cuBLAS products and
//       two elementwise kernels.
//   v1  FlashAttention-1 (Algorithm 2): one thread block per (batch, kv head) walks key blocks
//       (outer) and query blocks (inner); P recomputed from LSE, D recomputed per tile, dQ
//       read-modify-written in device memory. Scalar fp32, 32×32 tiles in shared memory.
//   v2  FlashAttention-2 partition: one thread block per key block (parallel over seqlen_k), D and
//       LSE·log2e precomputed once, dQ accumulated with fp32 atomics (or in a fixed order with
//       --deterministic). Same scalar tile math as v1.
//   v3  tensor cores: mma.sync m16n8k16 + ldmatrix(.trans); Sᵀ = K·Qᵀ so Pᵀ and dSᵀ stay in
//       registers as the A operands of dV += Pᵀ·dO and dK += dSᵀ·Q; dS via shared memory for dQ.
//   v4  pipelined: cp.async double buffering of Q/dO, XOR-swizzled shared memory, causal block
//       skipping, 8 warps × 128 key rows, vector atomics for dQ.
//
// Commands (build: cmake --build <build> --target attention_backward):
//   attention_backward 3                 validate v3 on the awkward-shape sweep, then time it
//   attention_backward all               validate every version, then time every version
//   attention_backward run_all           validate every version, then the progression table on the
//                                        standard shape (bf16, hdim 128, 16 heads, 16k tokens)
// Options:
//   --seqlens 2048,4096,8192,16384       timing sequence lengths (batch = tokens / seqlen)
//   --tokens 16384 --heads 16 --hdim 128 --dtype bf16|fp16 --causal 0|1|both
//   --versions 0,2,4                     subset for all / run_all
//   --deterministic                      also validate the deterministic dQ mode (3 runs must be
//                                        bitwise equal) and time it
//   --peak 798                           bf16 tensor-core peak in TFLOP/s (default: measured)
//   --small                              validate small shapes only (for compute-sanitizer)
//   --only-dtype bf16 --only-hdim 64     validate one element type / head dim only (sanitizer runs)
//   --v1-max-seqlen 8192                 do not time v1 above this (16 blocks at 16k: seconds a run)
//   --no-validate / --no-time            skip a phase (timing unvalidated versions is refused)
//   --seed S                             input seed (default: fresh, printed)
//
// Every version is validated against the float64 CPU reference (Impl::kReference: out and LSE
// from the reference forward, dq/dk/dv from the reference backward) before any is timed; a
// version that fails is not timed and the exit code is 1.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backward_util.cuh"

using namespace flashlab;
using namespace flashlab::learn;

namespace {

constexpr int kNumVersions = 5;

std::map<int, int> validate(const std::vector<int>& versions, bool small, bool deterministic, const char* only_dtype,
                            int64_t only_hdim, uint64_t seed) {
  std::map<int, int> failures, skipped, passed;
  for (int v : versions) failures[v] = skipped[v] = passed[v] = 0;
  std::vector<testing::ProblemSpec> specs;
  DType keep = DType::kFloat32;
  if (only_dtype && !parse_dtype(only_dtype, &keep).ok()) only_dtype = nullptr;
  for (const testing::ProblemSpec& s : validation_specs(small))
    if ((!only_dtype || s.dtype == keep) && (only_hdim == 0 || s.head_dim == only_hdim)) specs.push_back(s);
  for (size_t n = 0; n < specs.size(); ++n) specs[n].data_seed = seed + n;  // fresh inputs per shape
  std::printf("== validation: %zu shapes x %zu versions%s, seed %llu\n", specs.size(), versions.size(),
              deterministic ? " (atomic and deterministic dQ)" : "", static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  const auto cases = prepare_cases(specs);
  for (const auto& c : cases) {
    for (int v : versions) {
      for (int det = 0; det <= (deterministic ? 1 : 0); ++det) {
        bool skip = false;
        const Verdict verdict = c->check(v, det == 1, &skip);
        const char* tag = skip ? "SKIP" : verdict.pass ? "ok  " : "FAIL";
        if (skip) ++skipped[v];
        else if (verdict.pass) ++passed[v];
        else ++failures[v];
        if (!verdict.pass || skip || std::getenv("LEARN_VERBOSE"))
          std::printf("  %s v%d%s %-40s %s\n", tag, v, det ? "det" : "   ", c->spec.describe().c_str(),
                      verdict.line.c_str());
      }
    }
  }
  for (int v : versions) std::printf("  v%d: %d passed, %d failed, %d skipped\n", v, passed[v], failures[v], skipped[v]);
  std::fflush(stdout);
  return failures;
}

struct Row {
  int version;
  bool det;
  int64_t seqlen;
  bool causal;
  double ms, tflops, pct;
  int64_t extra;
  double xcheck;  // max rel_l2 of dq, dk, dv against the first version timed on the same inputs
};

struct Grads {
  DeviceBuffer dq, dk, dv;
};

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
  const bool with_det = args.has("--deterministic");

  std::printf("== timing (backward): %s hdim %lld, %lld heads, %lld tokens; median ms over reps, L2 flushed; "
              "peak %.0f TFLOP/s\n", to_string(dtype), (long long)hdim, (long long)heads, (long long)tokens, peak);
  std::printf("  %-6s %-7s %-6s %10s %9s %7s %11s %9s %5s\n", "ver", "seqlen", "causal", "ms", "TFLOP/s", "%peak",
              "extra mem", "xcheck", "reps");
  for (bool causal : causals)
    for (int64_t seqlen : seqlens) {
      const testing::ProblemSpec spec = timing_spec(seqlen, causal, hdim, dtype, heads, tokens);
      TimingProblem tp;
      if (!tp.init(spec, /*backward=*/true, 4321 + seqlen)) {
        std::printf("  could not allocate the timing problem %s\n", spec.describe().c_str());
        continue;
      }
      const Status fst = forward_for_timing(tp);
      if (!fst.ok()) {
        std::printf("  no forward kernel could produce out/LSE for %s: %s\n", spec.describe().c_str(),
                    fst.to_string().c_str());
        continue;
      }
      const int64_t nq = spec.batch * spec.seqlen_q * spec.heads_q * spec.head_dim;
      const int64_t nk = spec.batch * spec.seqlen_k * spec.heads_kv * spec.head_dim;
      Grads first;  // the first version's gradients: every later one is cross-checked against them
      int first_version = -1;
      for (int v : versions) {
        if (v == 1 && seqlen > args.get_int("--v1-max-seqlen", 8192)) continue;
        for (int det = 0; det <= (with_det && v >= 2 ? 1 : 0); ++det) {
          BwdParams p = tp.bwd_params(v);
          p.deterministic = det == 1;
          const double flops = attention_flops(p).backward;
          PoolPeak pool;
          if (!tp.dq.poison() || !tp.dk.poison() || !tp.dv.poison() || !pool.begin()) continue;
          const Status st = run_backward(v, p);
          const int64_t extra = pool.end();
          if (!st.ok()) {
            std::printf("  v%d%-3s %-7lld %-6d %s\n", v, det ? "det" : "", (long long)seqlen, causal ? 1 : 0,
                        st.to_string().c_str());
            continue;
          }
          const int64_t bad = count_nonfinite(tp.dq.get(), dtype, nq) + count_nonfinite(tp.dk.get(), dtype, nk) +
                              count_nonfinite(tp.dv.get(), dtype, nk);
          double xcheck = -1;
          if (first_version < 0) {
            first_version = v;
            const bool ok = first.dq.allocate(nq * 2) && first.dk.allocate(nk * 2) && first.dv.allocate(nk * 2) &&
                            LEARN_CHECK(cudaMemcpy(first.dq.get(), tp.dq.get(), nq * 2, cudaMemcpyDeviceToDevice)) &&
                            LEARN_CHECK(cudaMemcpy(first.dk.get(), tp.dk.get(), nk * 2, cudaMemcpyDeviceToDevice)) &&
                            LEARN_CHECK(cudaMemcpy(first.dv.get(), tp.dv.get(), nk * 2, cudaMemcpyDeviceToDevice));
            if (!ok) first_version = 1000;  // no cross-check for this shape
          } else if (first_version < kNumVersions) {
            xcheck = std::max({device_rel_l2(tp.dq, first.dq, dtype, nq), device_rel_l2(tp.dk, first.dk, dtype, nk),
                               device_rel_l2(tp.dv, first.dv, dtype, nk)});
          }
          const Timing t = time_ms([&] { return run_backward(v, p); });
          if (!t.ok) {
            std::printf("  v%d%-3s %-7lld %-6d timing failed: %s\n", v, det ? "det" : "", (long long)seqlen,
                        causal ? 1 : 0, t.error.c_str());
            continue;
          }
          Row r{v, det == 1, seqlen, causal, t.median_ms, tflops(flops, t.median_ms), 0, extra, xcheck};
          r.pct = peak > 0 ? 100.0 * r.tflops / peak : 0;
          rows.push_back(r);
          char xc[32] = "-";
          if (xcheck >= 0) std::snprintf(xc, sizeof(xc), "%.1e", xcheck);
          std::printf("  v%d%-3s %-7lld %-6d %10.3f %9.1f %6.1f%% %11s %9s %5d%s\n", v, det ? "det" : "",
                      (long long)seqlen, causal ? 1 : 0, r.ms, r.tflops, r.pct, fmt_bytes(extra).c_str(), xc, t.reps,
                      bad != 0 ? "  NONFINITE OUTPUT" : "");
          std::fflush(stdout);
        }
      }
    }
  return rows;
}

// The progression table: one line per version (and deterministic variant), TFLOP/s then ms.
void print_progression(const std::vector<Row>& rows) {
  std::vector<std::pair<bool, int64_t>> cols;
  std::vector<std::pair<int, bool>> lines;
  for (const Row& r : rows) {
    if (std::find(cols.begin(), cols.end(), std::make_pair(r.causal, r.seqlen)) == cols.end())
      cols.push_back({r.causal, r.seqlen});
    if (std::find(lines.begin(), lines.end(), std::make_pair(r.version, r.det)) == lines.end())
      lines.push_back({r.version, r.det});
  }
  for (const char* what : {"TFLOP/s", "ms"}) {
    std::printf("\n== backward progression (%s)\n| version |", what);
    for (auto& c : cols) std::printf(" %s %lldk |", c.first ? "causal" : "full", (long long)(c.second / 1024));
    std::printf("\n|---|");
    for (size_t i = 0; i < cols.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (auto& l : lines) {
      std::printf("| v%d%s |", l.first, l.second ? " det" : "");
      for (auto& c : cols) {
        const Row* hit = nullptr;
        for (const Row& r : rows)
          if (r.version == l.first && r.det == l.second && r.causal == c.first && r.seqlen == c.second) hit = &r;
        if (!hit) std::printf(" - |");
        else if (what[0] == 'T') std::printf(" %.1f |", hit->tflops);
        else std::printf(" %.3f |", hit->ms);
      }
      std::printf("\n");
    }
  }
  std::printf("\ncsv,version,deterministic,seqlen,causal,ms,tflops,pct_peak,extra_bytes,xcheck\n");
  for (const Row& r : rows)
    std::printf("csv,%d,%d,%lld,%d,%.4f,%.2f,%.2f,%lld,%.3g\n", r.version, r.det ? 1 : 0, (long long)r.seqlen,
                r.causal ? 1 : 0, r.ms, r.tflops, r.pct, (long long)r.extra, r.xcheck);
}

void usage() {
  std::printf("usage: attention_backward <0..4 | all | run_all> [--seqlens 2048,4096] [--causal 0|1|both]\n"
              "         [--hdim 64|128] [--dtype bf16|fp16] [--heads 16] [--tokens 16384] [--versions 0,2]\n"
              "         [--deterministic] [--peak TFLOPS] [--small] [--only-dtype bf16] [--only-hdim 64]\n"
              "         [--v1-max-seqlen N]\n"
              "         [--no-validate] [--no-time] [--seed S]\n");
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
  std::printf("device: %s\n", device_name().c_str());
  const uint64_t seed = args.get("--seed") ? std::strtoull(args.get("--seed"), nullptr, 10) : fresh_seed() % 1000000007ULL;

  // 1. Validate every selected version before timing any.
  std::vector<int> timed = versions;
  int exit_code = 0;
  if (!args.has("--no-validate")) {
    const std::map<int, int> failures =
        validate(versions, args.has("--small"), args.has("--deterministic"), args.get("--only-dtype"),
                 args.get_int("--only-hdim", 0), seed);
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
  const std::vector<Row> rows = time_versions(timed, args, peak);
  if (what == "run_all") print_progression(rows);
  return exit_code;
}
