// src/cli/runner.h — runs one implementation on a host Problem, wherever the implementation lives.
//
// The benchmark (bench.cpp) talks to every implementation through this interface: the CPU runner
// calls the API on the Problem's host buffers; the CUDA runner (cuda_runner.cu, only in CUDA
// builds) mirrors the Problem in device memory, runs there and copies outputs back, so that the
// checks always read the host Problem.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "flashlab/flashlab.h"
#include "testing/problem.h"

namespace flashlab {
namespace cli {

// Called after each timed iteration (i of n) so long runs can show progress.
using IterationCallback = std::function<void(int i, int n)>;

struct TimingPlan {
  int warmup = 1;
  int iters = 10;
  double budget_s = 0;  // > 0: stop after this much timed work (at least one iteration)
};

class ImplRunner {
 public:
  virtual ~ImplRunner() = default;

  // Poisons the outputs, runs the forward once and leaves out / lse in the host Problem.
  // *ms gets the call's time, *peak_bytes the peak extra memory of the call (-1: unknown).
  virtual Status forward_once(double* ms, int64_t* peak_bytes) = 0;
  // Same for the backward, reading out / lse from the host Problem (the caller puts the
  // reference's forward outputs there so every implementation differentiates the same thing).
  virtual Status backward_once(double* ms, int64_t* peak_bytes) = 0;

  // Times repeated calls (outputs are not checked). Fills *ms with one entry per timed iteration.
  virtual Status time_forward(const TimingPlan& plan, const IterationCallback& cb,
                              std::vector<double>* ms) = 0;
  virtual Status time_backward(const TimingPlan& plan, const IterationCallback& cb,
                               std::vector<double>* ms) = 0;
};

// The CPU runner: `problem` must outlive it.
std::unique_ptr<ImplRunner> make_cpu_runner(testing::Problem* problem, Impl impl, int threads);

#if defined(FLASHLAB_WITH_CUDA)
// The CUDA runner (cuda_runner.cu). Fails with kDeviceError / kOutOfMemory when the device
// buffers cannot be set up.
Status make_cuda_runner(testing::Problem* problem, Impl impl, std::unique_ptr<ImplRunner>* out);
#endif

}  // namespace cli
}  // namespace flashlab
