// PLACEHOLDER — being written (foundation issue). Returns kUnsupported until then.
#include "api/backend.h"
namespace flashlab { namespace detail {
Status reference_backward(const BwdParams&) { return Status::Unsupported("reference backward not written yet"); } }}
