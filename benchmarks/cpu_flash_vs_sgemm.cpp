// benchmarks/cpu_flash_vs_sgemm.cpp — cpu_flash forward next to OpenBLAS sgemm, same run, same threads.
//
// The question it answers: how close does FlashAttention on the CPU come to the machine's best
// matrix multiply? For each attention shape it times
//   flash  flashlab::attention_forward(impl cpu_flash), FLOPs from flashlab::attention_flops
//          (mask-aware: a causal mask halves them);
//   sgemm  cblas_sgemm on square n x n x n fp32 matrices with 2n³ ≈ the same FLOPs;
// alternating the two (so both see the same machine load), after warm-up, and reports the median
// of --reps runs of each, in GFLOP/s, and the ratio flash / sgemm. Each timed call is followed by
// a pause: OpenBLAS's worker threads keep spinning for ~2^28 cycles (0.1 s) after a call and
// libgomp's for a while after a parallel region, and a spinning peer thread on a 2-core machine
// halves the speed of whichever side runs next.
//
//   build-x/benchmarks/cpu_flash_vs_sgemm                 # the standard table (all shapes below)
//   build-x/benchmarks/cpu_flash_vs_sgemm --seqlen 2048 --hdim 64 --dtype bf16 --causal 1 --reps 9
// Options: --threads N (default 2, also for OpenBLAS) --reps N --seqlen N --hdim N --heads N
//          --dtype fp32|fp16|bf16 --causal 0|1 --backward (times the backward instead, vs 2.5x FLOPs)
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu/scratch.h"
#include "flashlab/flashlab.h"
#include "testing/problem.h"

namespace {

namespace ft = flashlab::testing;
using flashlab::DType;
using flashlab::Impl;

struct Options {
  int threads = 2;
  int reps = 7;
  bool backward = false;
  // A single shape when seqlen > 0; otherwise the standard table.
  int64_t seqlen = 0, hdim = 64, heads = 0;
  DType dtype = DType::kFloat32;
  int causal = 0;
};

double seconds_of(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown cpu";
}

struct Shape {
  int64_t seqlen, hdim, heads;
  DType dtype;
  bool causal;
};

// Times one shape; returns flash / sgemm.
double run_shape(const Shape& sh, const Options& opt) {
  ft::ProblemSpec spec;
  spec.batch = 1, spec.seqlen_q = spec.seqlen_k = sh.seqlen, spec.heads_q = spec.heads_kv = sh.heads;
  spec.head_dim = sh.hdim, spec.dtype = sh.dtype, spec.causal = sh.causal;
  ft::Problem pb(spec);
  flashlab::FwdParams fp = pb.fwd_params(Impl::kCpuFlash);
  fp.num_threads = opt.threads;
  flashlab::BwdParams bp = pb.bwd_params(Impl::kCpuFlash);
  bp.num_threads = opt.threads;
  const flashlab::AttentionFlops af = pb.flops();
  const double flops = opt.backward ? af.backward : af.forward;
  if (!flashlab::attention_forward(fp).ok()) return 0;  // also gives the backward its out and LSE

  // The sgemm peer: n x n x n with 2n³ closest to the attention FLOPs, n a multiple of 16.
  const int n = std::max(16, static_cast<int>(std::lround(std::cbrt(flops / 2) / 16)) * 16);
  std::vector<float> a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  const double gemm_flops = 2.0 * n * n * double(n);

  auto flash = [&] {
    const flashlab::Status st = opt.backward ? flashlab::attention_backward(bp) : flashlab::attention_forward(fp);
    if (!st.ok()) std::fprintf(stderr, "cpu_flash: %s\n", st.to_string().c_str()), std::exit(1);
  };
  auto sgemm = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  };
  auto settle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(150)); };
  for (int w = 0; w < 2; ++w) sgemm(), settle(), flash(), settle();  // warm-up: pools, page faults
  flashlab::detail::scratch_reset_peak();
  const int64_t live = flashlab::detail::scratch_peak_bytes();
  std::vector<double> tf, tg;
  for (int r = 0; r < opt.reps; ++r) {
    tg.push_back(seconds_of(sgemm));
    settle();
    tf.push_back(seconds_of(flash));
    settle();
  }
  const double f_rate = flops / median(tf) / 1e9, g_rate = gemm_flops / median(tg) / 1e9;
  std::printf("%-8s %5s %6s %5ld %5ld %4ld | %9.2f %8.1f | %5d %8.2f %8.1f | %5.2f | %7.0f\n",
              opt.backward ? "backward" : "forward", flashlab::to_string(sh.dtype), sh.causal ? "causal" : "full",
              long(sh.seqlen), long(sh.hdim), long(sh.heads), median(tf) * 1e3, f_rate, n, median(tg) * 1e3, g_rate,
              f_rate / g_rate, (flashlab::detail::scratch_peak_bytes() - live) / 1024.0);
  std::fflush(stdout);
  return f_rate / g_rate;
}

// About 8.6 GFLOP of forward work per shape (seqlen 2048, hdim 64, 8 heads), whatever the shape.
int64_t default_heads(int64_t seqlen, int64_t hdim) {
  const double target = 4.0 * 64 * 2048.0 * 2048.0 * 8;
  return std::max<int64_t>(1, std::llround(target / (4.0 * hdim * double(seqlen) * seqlen)));
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](const char* name) -> const char* {
      if (i + 1 >= argc) std::fprintf(stderr, "%s needs a value\n", name), std::exit(2);
      return argv[++i];
    };
    if (a == "--threads") o->threads = std::atoi(next("--threads"));
    else if (a == "--reps") o->reps = std::max(1, std::atoi(next("--reps")));
    else if (a == "--seqlen") o->seqlen = std::atoll(next("--seqlen"));
    else if (a == "--hdim") o->hdim = std::atoll(next("--hdim"));
    else if (a == "--heads") o->heads = std::atoll(next("--heads"));
    else if (a == "--causal") o->causal = std::atoi(next("--causal"));
    else if (a == "--backward") o->backward = true;
    else if (a == "--dtype") {
      const flashlab::Status st = flashlab::parse_dtype(next("--dtype"), &o->dtype);
      if (!st.ok()) return std::fprintf(stderr, "%s\n", st.to_string().c_str()), false;
    } else {
      std::fprintf(stderr, "unknown option %s (see the file comment)\n", a.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, &opt)) return 2;
  openblas_set_num_threads(opt.threads);
  std::printf("cpu_flash vs OpenBLAS sgemm — %s, %d threads, median of %d (%s)\n", cpu_name().c_str(), opt.threads,
              opt.reps, openblas_get_config());
  std::printf("%-8s %5s %6s %5s %5s %4s | %9s %8s | %5s %8s %8s | %5s | %7s\n", "pass", "dtype", "mask", "seq",
              "hdim", "hds", "flash ms", "GFLOP/s", "n", "sgemm ms", "GFLOP/s", "ratio", "scr KiB");
  std::vector<Shape> shapes;
  if (opt.seqlen > 0) {
    const int64_t heads = opt.heads > 0 ? opt.heads : default_heads(opt.seqlen, opt.hdim);
    shapes.push_back({opt.seqlen, opt.hdim, heads, opt.dtype, opt.causal != 0});
  } else {
    for (bool causal : {false, true})
      for (DType dt : {DType::kFloat32, DType::kBFloat16}) shapes.push_back({2048, 64, 8, dt, causal});
    for (auto [s, d] : {std::pair<int64_t, int64_t>{512, 64}, {4096, 64}, {2048, 128}, {512, 128}, {4096, 128}})
      for (bool causal : {false, true}) shapes.push_back({s, d, default_heads(s, d), DType::kFloat32, causal});
  }
  double worst = 1e9;
  for (const Shape& sh : shapes) worst = std::min(worst, run_shape(sh, opt));
  std::printf("lowest ratio: %.2f\n", worst);
  return 0;
}
