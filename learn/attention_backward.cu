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
#include "program.cuh"

using namespace flashlab;
using namespace flashlab::learn;

namespace {

constexpr int kNumVersions = 5;

std::map<int, int> validate(const std::vector<int>& versions, bool small, bool deterministic, const char* only_dtype,
                            int64_t only_hdim, uint64_t seed) {
  ValidationTally tally(versions);
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
        if (tally.record(v, skip, verdict))
          std::printf("  %s v%d%s %-40s %s\n", ValidationTally::tag(skip, verdict), v, det ? "det" : "   ",
                      c->spec.describe().c_str(), verdict.line.c_str());
      }
    }
  }
  return tally.finish();
}

struct Grads {
  DeviceBuffer dq, dk, dv;
};

// Times every version (and with --deterministic its deterministic dQ mode, v2..v4) on every shape
// of the sweep; xcheck is the max rel_l2 of dq, dk, dv against the first version timed.
std::vector<TimedRow> time_versions(const std::vector<int>& versions, const Args& args, double peak) {
  std::vector<TimedRow> rows;
  const TimingSweep sweep(args);
  const DType dtype = sweep.dtype;
  const bool with_det = args.has("--deterministic");
  sweep.print_header(" (backward)", peak);
  std::printf("  %-6s %-7s %-6s %10s %9s %7s %11s %9s %5s\n", "ver", "seqlen", "causal", "ms", "TFLOP/s", "%peak",
              "extra mem", "xcheck", "reps");
  for (bool causal : sweep.causals)
    for (int64_t seqlen : sweep.seqlens) {
      const testing::ProblemSpec spec = sweep.spec(seqlen, causal);
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
          const TimedRow r = make_row(v, det == 1, seqlen, causal, t, flops, peak, extra, xcheck);
          rows.push_back(r);
          std::printf("  v%d%-3s %-7lld %-6d %10.3f %9.1f %6.1f%% %11s %9s %5d%s\n", v, det ? "det" : "",
                      (long long)seqlen, causal ? 1 : 0, r.ms, r.tflops, r.pct, fmt_bytes(extra).c_str(),
                      fmt_xcheck(xcheck).c_str(), t.reps, bad != 0 ? "  NONFINITE OUTPUT" : "");
          std::fflush(stdout);
        }
      }
    }
  return rows;
}

// The progression table: one line per version (and deterministic variant) that was timed, then csv.
void print_progression(const std::vector<TimedRow>& rows) {
  std::vector<std::pair<int, bool>> lines;
  for (const TimedRow& r : rows)
    if (std::find(lines.begin(), lines.end(), std::make_pair(r.version, r.det)) == lines.end())
      lines.push_back({r.version, r.det});
  print_progression_table("backward progression", rows, lines);
  std::printf("\ncsv,version,deterministic,seqlen,causal,ms,tflops,pct_peak,extra_bytes,xcheck\n");
  for (const TimedRow& r : rows)
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
  const Args args{argc, argv};
  Command cmd;
  if (!parse_command(args, kNumVersions, &cmd)) {
    usage();
    return 2;
  }
  std::printf("device: %s\n", device_name().c_str());
  const uint64_t seed = program_seed(args);

  // 1. Validate every selected version before timing any.
  std::vector<int> timed = cmd.versions;
  int exit_code = 0;
  if (!args.has("--no-validate")) {
    const std::map<int, int> failures =
        validate(cmd.versions, args.has("--small"), args.has("--deterministic"), args.get("--only-dtype"),
                 args.get_int("--only-hdim", 0), seed);
    timed = versions_to_time(cmd.versions, failures, &exit_code);
  }
  if (args.has("--no-time")) return exit_code;

  // 2. The bf16 tensor-core peak the percentages refer to.
  const double peak = program_peak(args);

  // 3. Time.
  const std::vector<TimedRow> rows = time_versions(timed, args, peak);
  if (cmd.progression) print_progression(rows);
  return exit_code;
}
