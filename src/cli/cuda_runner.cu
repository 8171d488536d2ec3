// The CUDA runner: mirrors a host Problem in device memory (testing::DeviceProblem: same strides,
// padding included, same LSE layout), runs a CUDA implementation there and copies the outputs back
// so the checks read the host Problem.
//
// Timing: CUDA events around each call on our own stream, after the warm-up; before every timed
// call a 256 MiB memset evicts the inputs from L2 (H100 L2 is 50 MiB), so each iteration starts
// cold as it would inside a model. Poisoning: memset 0xFF, a NaN in fp32, fp16 and bf16.
// Peak extra memory: the workspace the API asked for plus any growth of used device memory
// (cudaMemGetInfo) across the first call; an allocation freed inside the call is not seen.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "cli/cuda_timing.h"
#include "cli/runner.h"
#include "testing/device_problem.h"

namespace flashlab {
namespace cli {
namespace {

using testing::cuda_status;
using testing::DeviceBuffer;
#define CLI_CUDA(expr, what) FLASHLAB_RETURN_IF_ERROR(cuda_status((expr), (what)))

class CudaRunner : public ImplRunner {
 public:
  Status init(testing::Problem* pb, Impl impl) {
    FLASHLAB_RETURN_IF_ERROR(timing_.init());
    FLASHLAB_RETURN_IF_ERROR(dev_.init(pb));
    // The host params (sizes, flags) with every tensor on the device.
    fwd_ = dev_.fwd_params(impl, timing_.stream);
    bwd_ = dev_.bwd_params(impl, timing_.stream);

    // The backward's workspace is asked for on first use: an implementation may support the
    // forward of a configuration but not its backward.
    int64_t fwd_ws = 0;
    FLASHLAB_RETURN_IF_ERROR(forward_workspace_size(fwd_, &fwd_ws));
    FLASHLAB_RETURN_IF_ERROR(fwd_ws_.allocate(static_cast<size_t>(fwd_ws), "forward workspace"));
    fwd_.workspace = fwd_ws_.get();
    fwd_.workspace_bytes = fwd_ws;
    CLI_CUDA(cudaDeviceSynchronize(), "set-up");
    return Status::Ok();
  }

  Status forward_once(double* ms, int64_t* peak_bytes) override {
    FLASHLAB_RETURN_IF_ERROR(dev_.poison_forward_outputs());
    FLASHLAB_RETURN_IF_ERROR(
        measured([&] { return attention_forward(fwd_); }, fwd_ws_.bytes(), ms, peak_bytes));
    return dev_.download_forward_outputs();
  }

  Status backward_once(double* ms, int64_t* peak_bytes) override {
    FLASHLAB_RETURN_IF_ERROR(prepare_backward());
    FLASHLAB_RETURN_IF_ERROR(dev_.poison_backward_outputs());
    FLASHLAB_RETURN_IF_ERROR(
        measured([&] { return attention_backward(bwd_); }, bwd_ws_.bytes(), ms, peak_bytes));
    return dev_.download_backward_outputs();
  }

  Status time_forward(const TimingPlan& plan, const IterationCallback& cb, std::vector<double>* ms) override {
    return timed([&] { return attention_forward(fwd_); }, plan, cb, ms);
  }
  Status time_backward(const TimingPlan& plan, const IterationCallback& cb,
                       std::vector<double>* ms) override {
    FLASHLAB_RETURN_IF_ERROR(prepare_backward());
    return timed([&] { return attention_backward(bwd_); }, plan, cb, ms);
  }

 private:
  // The backward reads out and lse: the host Problem holds the reference's forward outputs.
  Status prepare_backward() {
    if (!bwd_ws_ready_) {
      int64_t bytes = 0;
      FLASHLAB_RETURN_IF_ERROR(backward_workspace_size(bwd_, &bytes));
      FLASHLAB_RETURN_IF_ERROR(bwd_ws_.allocate(static_cast<size_t>(bytes), "backward workspace"));
      bwd_.workspace = bwd_ws_.get();
      bwd_.workspace_bytes = bytes;
      bwd_ws_ready_ = true;
    }
    return dev_.upload_forward_outputs();
  }

  // One call: event time, and the workspace plus any growth of used device memory.
  template <typename Call>
  Status measured(Call call, size_t workspace, double* ms, int64_t* peak_bytes) {
    size_t free0 = 0, free1 = 0, total = 0;
    CLI_CUDA(cudaMemGetInfo(&free0, &total), "cudaMemGetInfo");
    CLI_CUDA(cudaEventRecord(timing_.start, timing_.stream), "cudaEventRecord");
    FLASHLAB_RETURN_IF_ERROR(call());
    CLI_CUDA(cudaEventRecord(timing_.stop, timing_.stream), "cudaEventRecord");
    CLI_CUDA(cudaStreamSynchronize(timing_.stream), "the kernel");
    CLI_CUDA(cudaGetLastError(), "the kernel");
    float t = 0;
    CLI_CUDA(cudaEventElapsedTime(&t, timing_.start, timing_.stop), "cudaEventElapsedTime");
    CLI_CUDA(cudaMemGetInfo(&free1, &total), "cudaMemGetInfo");
    *ms = t;
    *peak_bytes = static_cast<int64_t>(workspace) + (free0 > free1 ? int64_t(free0 - free1) : 0);
    return Status::Ok();
  }

  template <typename Call>
  Status timed(Call call, const TimingPlan& plan, const IterationCallback& cb, std::vector<double>* ms) {
    return timing_.time(call, plan, cb, ms);
  }

  CudaTiming timing_;
  testing::DeviceProblem dev_;
  DeviceBuffer fwd_ws_, bwd_ws_;
  bool bwd_ws_ready_ = false;
  FwdParams fwd_;
  BwdParams bwd_;
};

}  // namespace

Status make_cuda_runner(testing::Problem* problem, Impl impl, std::unique_ptr<ImplRunner>* out) {
  std::unique_ptr<CudaRunner> r(new CudaRunner());
  FLASHLAB_RETURN_IF_ERROR(r->init(problem, impl));
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace cli
}  // namespace flashlab
