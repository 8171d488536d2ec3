// PLACEHOLDER — being written (foundation issue). Returns kUnsupported until then.
#include "api/backend.h"
namespace flashlab { namespace detail {
Status cpu_flash_backward(const BwdParams&) { return Status::Unsupported("cpu_flash backward not written yet"); } }}
