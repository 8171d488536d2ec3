// learn/kernels/backward_v4.cu — version 4 of the backward pass (being written).
#include "kernels/backward_common.cuh"

namespace flashlab {
namespace learn_bwd {
Status backward_v4(const BwdParams&) { return Status::Unsupported("learn_v4 backward: not written yet"); }
}  // namespace learn_bwd
}  // namespace flashlab
