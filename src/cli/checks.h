// src/cli/checks.h — the pass/fail rule of `flashlab bench`.
//
// Every output tensor is compared against the float64 reference run on the same (dtype-rounded)
// inputs. A tensor passes when
//   * every element is finite where the reference is (poisoned = unwritten elements are NaN),
//   * rel_l2  = ||got - ref||_2 / ||ref||_2            <= tol.rel_l2, and
//   * max_abs = max |got - ref|                        <= tol.max_abs * max(1, max|ref|).
// The relative L2 bound judges overall accuracy; the max bound catches a few wrong rows (a masked
// edge case, one bad tile) that the L2 norm of a large tensor would hide. A reference that is
// (nearly) zero everywhere — dq and dk when every query sees a single key, so P = 1 and dS = 0 —
// makes rel_l2 a ratio of rounding noises: below an RMS of kNegligibleRms the rel_l2 bound is not
// applied and the max bound (floored at 1) decides. LSE (fp32, natural log) is compared
// absolutely: max |got - ref| <= tol.lse_abs, and -inf (a row that sees no key) must be exactly
// -inf.
#pragma once

#include <string>
#include <vector>

#include "flashlab/dtype.h"
#include "testing/problem.h"

namespace flashlab {
namespace cli {

struct Tolerance {
  double rel_l2 = 0;
  double max_abs = 0;  // times max(1, max|ref|)
  double lse_abs = 0;
  std::string describe() const;  // "rel_l2 <= 0.01, max_abs <= 0.02 x max(1, max|ref|), lse <= 0.001"
};

// Defaults per dtype: a few units of the storage rounding (bf16 2^-8, fp16 2^-11, fp32 2^-24)
// above what two correct implementations that round differently can disagree by.
Tolerance default_tolerance(DType dtype);

// Inputs are N(0, 1): a reference whose RMS is a thousandth of that is zero up to rounding.
constexpr double kNegligibleRms = 1e-3;

// One tensor's comparison.
struct TensorCheck {
  std::string name;  // "out", "lse", "dq", ...
  testing::ErrorStats err;
  double ref_max_abs = 0;       // max |ref|, the scale of the max_abs bound
  bool rel_l2_applies = true;   // false: the reference is negligible (see above), or no reference
  bool pass = false;
};

TensorCheck check_tensor(const std::string& name, const testing::HostTensor& got,
                         const testing::HostTensor& ref, const Tolerance& tol);
// LSE: the first `count` elements are the logical ones (the buffer has at least one element).
TensorCheck check_lse(const std::vector<float>& got, const std::vector<float>& ref, size_t count,
                      const Tolerance& tol);
// Without a reference (too big to run): only "every element was written and is not NaN".
TensorCheck check_written(const std::string& name, const testing::HostTensor& got);
TensorCheck check_lse_written(const std::vector<float>& got, size_t count);

}  // namespace cli
}  // namespace flashlab
