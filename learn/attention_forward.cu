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
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness.cuh"
#include "program.cuh"

using namespace flashlab;
using namespace flashlab::learn;

namespace {

constexpr int kNumVersions = 5;

// Runs the validation sweep for `versions`; returns the number of failures per version.
std::map<int, int> validate(const std::vector<int>& versions, bool small, uint64_t seed) {
  ValidationTally tally(versions);
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
      if (tally.record(v, skip, verdict))
        std::printf("  %s v%d %-40s %s\n", ValidationTally::tag(skip, verdict), v, spec.describe().c_str(),
                    verdict.line.c_str());
    }
  }
  return tally.finish();
}

// Times every version on every shape of the sweep; each output is cross-checked against v0's
// (xcheck, when v0 is timed too).
std::vector<TimedRow> time_versions(const std::vector<int>& versions, const Args& args, double peak) {
  std::vector<TimedRow> rows;
  const TimingSweep sweep(args);
  const DType dtype = sweep.dtype;
  sweep.print_header("", peak);
  std::printf("  %-4s %-7s %-6s %10s %9s %7s %11s %9s %5s\n", "ver", "seqlen", "causal", "ms", "TFLOP/s", "%peak",
              "extra mem", "vs v0", "reps");
  for (bool causal : sweep.causals)
    for (int64_t seqlen : sweep.seqlens) {
      const testing::ProblemSpec spec = sweep.spec(seqlen, causal);
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
        const TimedRow r = make_row(v, false, seqlen, causal, t, flops, peak, extra, xcheck);
        rows.push_back(r);
        std::printf("  v%-3d %-7lld %-6d %10.3f %9.1f %6.1f%% %11s %9s %5d%s\n", v, (long long)seqlen,
                    causal ? 1 : 0, r.ms, r.tflops, r.pct, fmt_bytes(extra).c_str(),
                    fmt_xcheck(xcheck).c_str(), t.reps, bad != 0 ? "  NONFINITE OUTPUT" : "");
        std::fflush(stdout);
      }
    }
  return rows;
}

// The progression table: one line per timed version (even one whose shapes all failed), then csv.
void print_progression(const std::vector<TimedRow>& rows, const std::vector<int>& versions) {
  std::vector<std::pair<int, bool>> lines;
  for (int v : versions) lines.push_back({v, false});
  print_progression_table("progression", rows, lines);
  std::printf("\ncsv,version,seqlen,causal,ms,tflops,pct_peak,extra_bytes,xcheck_vs_v0\n");
  for (const TimedRow& r : rows)
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
  const Args args{argc, argv};
  Command cmd;
  if (!parse_command(args, kNumVersions, &cmd)) {
    usage();
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: the learning kernels need a GPU\n");
    return 1;
  }
  std::printf("device: %s\n", device_name().c_str());
  const uint64_t seed = program_seed(args);

  // 1. Validate every selected version before timing any.
  std::vector<int> timed = cmd.versions;
  int exit_code = 0;
  if (!args.has("--no-validate"))
    timed = versions_to_time(cmd.versions, validate(cmd.versions, args.has("--small"), seed), &exit_code);
  if (args.has("--no-time")) return exit_code;

  // 2. The bf16 tensor-core peak the percentages refer to.
  const double peak = program_peak(args);

  // 3. Time.
  keep_pool_memory();
  const std::vector<TimedRow> rows = time_versions(timed, args, peak);
  if (cmd.progression) print_progression(rows, timed);
  return exit_code;
}
