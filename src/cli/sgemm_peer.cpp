#include "cli/sgemm_peer.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>
#include <random>

namespace flashlab {
namespace cli {

bool sgemm_core_is_generic(const std::string& core) {
  // Pre-AVX kernel sets of OpenBLAS's DYNAMIC_ARCH build.
  for (const char* old : {"Prescott", "Katmai", "Coppermine", "Northwood", "Banias", "Core2", "Penryn",
                          "Dunnington", "Nehalem", "Atom", "Opteron", "Barcelona"})
    if (core == old) return true;
  return false;
}

SgemmResult sgemm_shape(double flops) {
  // 3 * 9000^2 * 4 bytes ~ 0.9 GiB: enough work for a stable time, little enough for any machine.
  constexpr int64_t kMaxDim = 9000;
  SgemmResult r;
  const int64_t d = std::clamp<int64_t>(std::llround(std::cbrt(flops / 2)), 16, kMaxDim);
  r.m = r.n = r.k = d;
  r.flops = 2.0 * static_cast<double>(d) * d * d;
  return r;
}

Status run_sgemm(int threads, const TimingPlan& plan, const IterationCallback& cb, SgemmResult* r) {
  std::vector<float> a, b, c;
  try {
    a.resize(static_cast<size_t>(r->m * r->k));
    b.resize(static_cast<size_t>(r->k * r->n));
    c.resize(static_cast<size_t>(r->m * r->n));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory, "sgemm peer: cannot allocate its matrices");
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);

  openblas_set_num_threads(threads);
  r->threads = openblas_get_num_threads();
  r->core = openblas_get_corename();
  const auto call = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(r->m),
                static_cast<blasint>(r->n), static_cast<blasint>(r->k), 1.0f, a.data(),
                static_cast<blasint>(r->k), b.data(), static_cast<blasint>(r->n), 0.0f, c.data(),
                static_cast<blasint>(r->n));
  };
  using clock = std::chrono::steady_clock;
  r->ms.clear();
  for (int i = 0; i < std::max(plan.warmup, 1); ++i) call();  // first call spins up the threads
  double spent = 0;
  for (int i = 0; i < plan.iters; ++i) {
    const auto t0 = clock::now();
    call();
    r->ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
    spent += r->ms.back();
    if (cb) cb(i + 1, plan.iters);
    if (plan.budget_s > 0 && spent > plan.budget_s * 1e3) break;
  }
  return Status::Ok();
}

}  // namespace cli
}  // namespace flashlab
