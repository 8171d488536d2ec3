// flashlab/status.h — error reporting for the public API.
//
// Every entry point returns a Status. A non-OK Status carries a code and a message that names the
// argument and the rule it broke, e.g. "heads_q (12) must be a multiple of heads_kv (5)". The API
// never aborts on user input and writes no output when it returns an error.
#pragma once

#include <string>
#include <utility>

namespace flashlab {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,  // the call is malformed (bad shape, null pointer, bad stride, ...)
  kUnsupported = 2,      // well-formed, but the selected implementation cannot run it
  kOutOfMemory = 3,      // a scratch allocation failed
  kDeviceError = 4,      // the device runtime reported an error
  kInternal = 5,         // a bug in flashlab
};

const char* to_string(StatusCode code);

class Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status Invalid(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
  static Status Unsupported(std::string msg) { return {StatusCode::kUnsupported, std::move(msg)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: heads_q (12) must be a multiple of heads_kv (5)"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace flashlab

// Propagate a non-OK Status to the caller.
#define FLASHLAB_RETURN_IF_ERROR(expr)          \
  do {                                          \
    ::flashlab::Status _fl_st = (expr);         \
    if (!_fl_st.ok()) return _fl_st;            \
  } while (0)
