// learn/kernels/backward_v3.cu — version 3 of the backward pass (being written).
#include "kernels/backward_common.cuh"

namespace flashlab {
namespace learn_bwd {
Status backward_v3(const BwdParams&) { return Status::Unsupported("learn_v3 backward: not written yet"); }
}  // namespace learn_bwd
}  // namespace flashlab
