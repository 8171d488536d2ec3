// PLACEHOLDER — being written (foundation issue). Returns kUnsupported until then.
#include "api/backend.h"
namespace flashlab { namespace detail {
Status reference_forward(const FwdParams&) { return Status::Unsupported("reference forward not written yet"); } }}
