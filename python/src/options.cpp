// python/src/options.cpp — see options.h.
#include "options.h"

#include <limits>

namespace flashlab_py {

void fail(const std::string& message) { throw StatusError(flashlab::Status::Invalid(message)); }

void throw_if_error(const flashlab::Status& status) {
  if (!status.ok()) throw StatusError(status);
}

void set_options(const Options& o, flashlab::AttentionConfig* c) {
  c->softmax_scale = o.softmax_scale ? static_cast<float>(*o.softmax_scale)
                                     : std::numeric_limits<float>::quiet_NaN();  // NaN: 1/sqrt(head_dim)
  c->causal = o.causal;
  if (o.causal_align == "bottom_right") {
    c->causal_align = flashlab::CausalAlign::kBottomRight;
  } else if (o.causal_align == "top_left") {
    c->causal_align = flashlab::CausalAlign::kTopLeft;
  } else {
    fail("causal_align ('" + o.causal_align + "') must be 'bottom_right' or 'top_left'");
  }
  c->window_left = o.window_left;
  c->window_right = o.window_right;
  c->sink_tokens = o.sink_tokens;
  c->softcap = static_cast<float>(o.softcap);
  c->dropout_p = static_cast<float>(o.dropout_p);
  c->dropout_seed = o.dropout_seed;
  c->dropout_offset = o.dropout_offset;
  throw_if_error(flashlab::parse_impl(o.impl, &c->impl));
  c->num_threads = o.num_threads;
  c->stream = reinterpret_cast<void*>(o.stream);
}

}  // namespace flashlab_py
