#include "cli/checks.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace flashlab {
namespace cli {

std::string Tolerance::describe() const {
  std::ostringstream os;
  os << "rel_l2 <= " << rel_l2 << ", max_abs <= " << max_abs << " x max(1, max|ref|)"
     << ", lse max_abs <= " << lse_abs;
  return os.str();
}

Tolerance default_tolerance(DType dtype) {
  // Two correct implementations disagree by about one unit in the last place of the storage type
  // (both round their float64/fp32 result to it), more where a kernel rounds P or dS to the
  // storage type before a matrix product (the GPU kernels do) and the backward's dS row sums
  // cancel. The bounds leave room for that and still fail a wrong scale, mask or missing term.
  switch (dtype) {
    case DType::kBFloat16: return Tolerance{2e-2, 4e-2, 2e-3};  // bf16 eps 2^-8 = 3.9e-3
    case DType::kFloat16: return Tolerance{4e-3, 8e-3, 2e-3};   // fp16 eps 2^-11 = 4.9e-4
    case DType::kFloat32: return Tolerance{1e-4, 2e-4, 1e-4};   // fp32 sums of ~1e4 terms
    default: return Tolerance{0, 0, 0};                          // nothing accepts fp8 yet
  }
}

namespace {
// max |x| and the RMS of x over the finite logical elements.
void magnitude(const testing::HostTensor& t, double* max_abs, double* rms) {
  double m = 0, sq = 0;
  int64_t n = 0;
  for (int64_t b = 0; b < t.batch; ++b)
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t h = 0; h < t.heads; ++h)
        for (int64_t d = 0; d < t.dim; ++d) {
          const double x = std::fabs(t.get(b, r, h, d));
          ++n;
          if (!std::isfinite(x)) continue;
          m = std::max(m, x);
          sq += x * x;
        }
  *max_abs = m;
  *rms = n ? std::sqrt(sq / n) : 0;
}
}  // namespace

TensorCheck check_tensor(const std::string& name, const testing::HostTensor& got,
                         const testing::HostTensor& ref, const Tolerance& tol) {
  TensorCheck c;
  c.name = name;
  c.err = testing::compare(got, ref);
  double ref_rms = 0;
  magnitude(ref, &c.ref_max_abs, &ref_rms);
  c.rel_l2_applies = ref_rms >= kNegligibleRms;
  // NaN comparisons are false, so a NaN error (should compare() ever report one) fails too.
  const bool rel_ok = !c.rel_l2_applies || c.err.rel_l2 <= tol.rel_l2;
  c.pass = c.err.finite() && rel_ok && c.err.max_abs <= tol.max_abs * std::max(1.0, c.ref_max_abs);
  return c;
}

TensorCheck check_lse(const std::vector<float>& got, const std::vector<float>& ref, size_t count,
                      const Tolerance& tol) {
  TensorCheck c;
  c.name = "lse";
  const std::vector<float> g(got.begin(), got.begin() + count), w(ref.begin(), ref.begin() + count);
  c.err = testing::compare_lse(g, w);
  for (float x : w)
    if (std::isfinite(x)) c.ref_max_abs = std::max(c.ref_max_abs, static_cast<double>(std::fabs(x)));
  c.rel_l2_applies = false;  // judged by its absolute error
  c.pass = c.err.finite() && c.err.max_abs <= tol.lse_abs;
  return c;
}

TensorCheck check_written(const std::string& name, const testing::HostTensor& got) {
  TensorCheck c;
  c.name = name;
  for (int64_t b = 0; b < got.batch; ++b)
    for (int64_t r = 0; r < got.rows; ++r)
      for (int64_t h = 0; h < got.heads; ++h)
        for (int64_t d = 0; d < got.dim; ++d) {
          ++c.err.count;
          if (!std::isfinite(got.get(b, r, h, d))) ++c.err.nonfinite;
        }
  c.err.max_abs = c.err.rel_l2 = std::nan("");  // unknown without a reference
  c.rel_l2_applies = false;
  c.pass = c.err.finite();
  return c;
}

TensorCheck check_lse_written(const std::vector<float>& got, size_t count) {
  TensorCheck c;
  c.name = "lse";
  c.rel_l2_applies = false;
  for (size_t i = 0; i < count; ++i) {
    const float x = got[i];
    ++c.err.count;
    if (std::isnan(x) || (std::isinf(x) && x > 0)) ++c.err.nonfinite;  // -inf: a row with no key
  }
  c.err.max_abs = c.err.rel_l2 = std::nan("");
  c.pass = c.err.finite();
  return c;
}

}  // namespace cli
}  // namespace flashlab
