// PLACEHOLDER — full validation is being written.
#include "flashlab/flashlab.h"
namespace flashlab {
Status validate_forward(const FwdParams&) { return Status::Ok(); }
Status validate_backward(const BwdParams&) { return Status::Ok(); }
}
