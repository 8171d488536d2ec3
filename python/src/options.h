// python/src/options.h — what the Python extensions share without a tensor type: the error that
// carries a flashlab::Status to Python, and the scalar options of an attention call.
//
// flashlab._core (nanobind, DLPack tensors: tensor_args.h) and flashlab._torch_ext (torch
// tensors: torch_ext.cpp) both compile options.cpp, so a scalar option means the same in both.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include "flashlab/flashlab.h"

namespace flashlab_py {

// A failed call. Each module turns it into flashlab.FlashlabError, or flashlab.UnsupportedError
// for StatusCode::kUnsupported, carrying status.message().
class StatusError : public std::exception {
 public:
  explicit StatusError(flashlab::Status s) : status_(std::move(s)) {}
  const flashlab::Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  flashlab::Status status_;
};

[[noreturn]] void fail(const std::string& message);  // throws StatusError(kInvalidArgument)
void throw_if_error(const flashlab::Status& status);

// The scalar options shared by the forward and backward calls.
struct Options {
  std::optional<double> softmax_scale;
  bool causal = false;
  std::string causal_align = "bottom_right";
  int64_t window_left = -1;
  int64_t window_right = -1;
  double softcap = 0.0;
  double dropout_p = 0.0;
  uint64_t dropout_seed = 0;
  uint64_t dropout_offset = 0;
  std::string impl = "auto";
  int num_threads = 0;
  uintptr_t stream = 0;
  int64_t sink_tokens = 0;  // StreamingLLM sink tokens; last, so that brace lists without it keep 0
};
void set_options(const Options& o, flashlab::AttentionConfig* c);

}  // namespace flashlab_py
