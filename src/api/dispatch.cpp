// PLACEHOLDER — the dispatcher is being written.
#include <cmath>
#include "api/backend.h"
namespace flashlab {
Status attention_forward(const FwdParams& p0) {
  FwdParams p = p0;
  if (!std::isfinite(p.softmax_scale)) p.softmax_scale = 1.0f / std::sqrt((float)p.head_dim);
  if (p.impl == Impl::kReference) return detail::reference_forward(p);
  return detail::cpu_flash_forward(p);
}
Status attention_backward(const BwdParams& p0) {
  BwdParams p = p0;
  if (!std::isfinite(p.softmax_scale)) p.softmax_scale = 1.0f / std::sqrt((float)p.head_dim);
  if (p.impl == Impl::kReference) return detail::reference_backward(p);
  return detail::cpu_flash_backward(p);
}
}
