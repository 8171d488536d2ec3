// PLACEHOLDER — being written (foundation issue). Returns kUnsupported until then.
#include "api/backend.h"
namespace flashlab { namespace detail {
Status cpu_flash_forward(const FwdParams&) { return Status::Unsupported("cpu_flash forward not written yet"); } }}
