// src/cli/progress.h — progress lines on stderr for long benchmark runs.
//
// On a terminal one line is rewritten in place ("cpu_flash forward: timing 3/10"); when stderr is
// a file or a pipe (CI logs) only the start of each phase is printed, one line each.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

namespace flashlab {
namespace cli {

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), tty_(isatty(fileno(stderr)) != 0) {}
  ~Progress() { done(); }

  // Starts a phase: "reference forward: check run".
  void phase(const std::string& what) {
    if (!enabled_) return;
    what_ = what;
    if (tty_) {
      std::fprintf(stderr, "\r\033[K[flashlab] %s", what.c_str());
      open_ = true;
    } else {
      std::fprintf(stderr, "[flashlab] %s\n", what.c_str());
    }
    std::fflush(stderr);
  }
  // Iteration i of at most n within the current phase (terminal only).
  void iteration(int i, int n) {
    if (!enabled_ || !tty_) return;
    std::fprintf(stderr, "\r\033[K[flashlab] %s %d/%d", what_.c_str(), i, n);
    std::fflush(stderr);
  }
  // Clears the progress line before the results are printed.
  void done() {
    if (enabled_ && tty_ && open_) std::fprintf(stderr, "\r\033[K");
    open_ = false;
  }

 private:
  bool enabled_;
  bool tty_;
  bool open_ = false;
  std::string what_;
};

}  // namespace cli
}  // namespace flashlab
