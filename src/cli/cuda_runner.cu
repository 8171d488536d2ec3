// The CUDA runner: mirrors a host Problem in device memory (same strides, padding included), runs
// a CUDA implementation there and copies the outputs back so the checks read the host Problem.
//
// Timing: CUDA events around each call on our own stream, after the warm-up; before every timed
// call a 256 MiB memset evicts the inputs from L2 (H100 L2 is 50 MiB), so each iteration starts
// cold as it would inside a model. Poisoning: memset 0xFF, a NaN in fp32, fp16 and bf16.
// Peak extra memory: the workspace the API asked for plus any growth of used device memory
// (cudaMemGetInfo) across the first call; an allocation freed inside the call is not seen.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/runner.h"

namespace flashlab {
namespace cli {
namespace {

Status cuda_status(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::Ok();
  const StatusCode code =
      e == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kDeviceError;
  return Status(code, what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
#define CLI_CUDA(expr, what) FLASHLAB_RETURN_IF_ERROR(cuda_status((expr), (what)))

constexpr size_t kL2FlushBytes = size_t(256) << 20;

// One device allocation, freed by the destructor.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  Status allocate(size_t n, const char* name) {
    bytes = n;
    if (n == 0) return Status::Ok();
    return cuda_status(cudaMalloc(&ptr, n),
                       std::string("cudaMalloc(") + name + ", " + std::to_string(n) + " bytes)");
  }
  Status upload(const void* host, const char* name) {
    if (bytes == 0) return Status::Ok();
    return cuda_status(cudaMemcpy(ptr, host, bytes, cudaMemcpyHostToDevice),
                       std::string("copy ") + name + " to the device");
  }
  Status download(void* host, const char* name) const {
    if (bytes == 0) return Status::Ok();
    return cuda_status(cudaMemcpy(host, ptr, bytes, cudaMemcpyDeviceToHost),
                       std::string("copy ") + name + " from the device");
  }
  Status poison() { return bytes ? cuda_status(cudaMemset(ptr, 0xff, bytes), "poison") : Status::Ok(); }
};

TensorRef dref(const testing::HostTensor& t, const DeviceBuffer& d) {
  return TensorRef{d.ptr, t.batch_stride, t.row_stride, t.head_stride, 1};
}
MutTensorRef dmut(const testing::HostTensor& t, DeviceBuffer& d) {
  return MutTensorRef{d.ptr, t.batch_stride, t.row_stride, t.head_stride, 1};
}

class CudaRunner : public ImplRunner {
 public:
  ~CudaRunner() override {
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status init(testing::Problem* pb, Impl impl) {
    pb_ = pb;
    CLI_CUDA(cudaStreamCreate(&stream_), "cudaStreamCreate");
    CLI_CUDA(cudaEventCreate(&start_), "cudaEventCreate");
    CLI_CUDA(cudaEventCreate(&stop_), "cudaEventCreate");
    struct Mirror {
      testing::HostTensor* host;
      DeviceBuffer* dev;
      const char* name;
      bool input;
    };
    const Mirror mirrors[] = {{&pb->q, &q_, "q", true},       {&pb->k, &k_, "k", true},
                              {&pb->v, &v_, "v", true},       {&pb->dout, &dout_, "dout", true},
                              {&pb->out, &out_, "out", false}, {&pb->dq, &dq_, "dq", false},
                              {&pb->dk, &dk_, "dk", false},   {&pb->dv, &dv_, "dv", false}};
    for (const Mirror& m : mirrors) {
      FLASHLAB_RETURN_IF_ERROR(m.dev->allocate(m.host->bytes.size(), m.name));
      if (m.input) FLASHLAB_RETURN_IF_ERROR(m.dev->upload(m.host->data(), m.name));
    }
    // LSE rows: varlen LSE is (heads_q, total_q); on the device the rows of one head are padded
    // to batch * seqlen_q, the bound the validator checks device strides against (it cannot read
    // the totals from device cu_seqlens without a sync).
    const testing::ProblemSpec& s = pb->spec;
    lse_rows_ = pb->varlen() ? s.heads_q : s.batch * s.heads_q;
    lse_width_ = pb->varlen() ? pb->lse_head_stride : s.seqlen_q;
    lse_pitch_ = pb->varlen() ? std::max(lse_width_, s.batch * s.seqlen_q) : lse_width_;
    FLASHLAB_RETURN_IF_ERROR(lse_.allocate(
        std::max<int64_t>(lse_rows_ * lse_pitch_, 1) * sizeof(float), "lse"));
    FLASHLAB_RETURN_IF_ERROR(upload_vector(pb->alibi_slopes, &alibi_, "alibi_slopes"));
    FLASHLAB_RETURN_IF_ERROR(upload_vector(pb->cu_seqlens_q, &cu_q_, "cu_seqlens_q"));
    FLASHLAB_RETURN_IF_ERROR(upload_vector(pb->cu_seqlens_k, &cu_k_, "cu_seqlens_k"));
    FLASHLAB_RETURN_IF_ERROR(flush_.allocate(kL2FlushBytes, "l2_flush"));

    // Start from the host params (sizes, flags) and point every tensor at device memory.
    fwd_ = pb->fwd_params(impl);
    bwd_ = pb->bwd_params(impl);
    point_at_device(&fwd_);
    point_at_device(&bwd_);
    fwd_.q = dref(pb->q, q_);
    fwd_.k = dref(pb->k, k_);
    fwd_.v = dref(pb->v, v_);
    fwd_.out = dmut(pb->out, out_);
    fwd_.lse = static_cast<float*>(lse_.ptr);
    fwd_.lse_head_stride = lse_pitch_;
    fwd_.lse_batch_stride = pb->varlen() ? 0 : s.heads_q * lse_pitch_;
    bwd_.q = fwd_.q;
    bwd_.k = fwd_.k;
    bwd_.v = fwd_.v;
    bwd_.out = dref(pb->out, out_);
    bwd_.dout = dref(pb->dout, dout_);
    bwd_.lse = static_cast<const float*>(lse_.ptr);
    bwd_.lse_head_stride = fwd_.lse_head_stride;
    bwd_.lse_batch_stride = fwd_.lse_batch_stride;
    bwd_.dq = dmut(pb->dq, dq_);
    bwd_.dk = dmut(pb->dk, dk_);
    bwd_.dv = dmut(pb->dv, dv_);

    // The backward's workspace is asked for on first use: an implementation may support the
    // forward of a configuration but not its backward.
    int64_t fwd_ws = 0;
    FLASHLAB_RETURN_IF_ERROR(forward_workspace_size(fwd_, &fwd_ws));
    FLASHLAB_RETURN_IF_ERROR(fwd_ws_.allocate(static_cast<size_t>(fwd_ws), "forward workspace"));
    fwd_.workspace = fwd_ws_.ptr;
    fwd_.workspace_bytes = fwd_ws;
    CLI_CUDA(cudaDeviceSynchronize(), "set-up");
    return Status::Ok();
  }

  Status forward_once(double* ms, int64_t* peak_bytes) override {
    FLASHLAB_RETURN_IF_ERROR(out_.poison());
    FLASHLAB_RETURN_IF_ERROR(lse_.poison());
    FLASHLAB_RETURN_IF_ERROR(
        measured([&] { return attention_forward(fwd_); }, fwd_ws_.bytes, ms, peak_bytes));
    FLASHLAB_RETURN_IF_ERROR(out_.download(pb_->out.data(), "out"));
    return copy_lse(cudaMemcpyDeviceToHost);
  }

  Status backward_once(double* ms, int64_t* peak_bytes) override {
    FLASHLAB_RETURN_IF_ERROR(prepare_backward());
    FLASHLAB_RETURN_IF_ERROR(dq_.poison());
    FLASHLAB_RETURN_IF_ERROR(dk_.poison());
    FLASHLAB_RETURN_IF_ERROR(dv_.poison());
    FLASHLAB_RETURN_IF_ERROR(
        measured([&] { return attention_backward(bwd_); }, bwd_ws_.bytes, ms, peak_bytes));
    FLASHLAB_RETURN_IF_ERROR(dq_.download(pb_->dq.data(), "dq"));
    FLASHLAB_RETURN_IF_ERROR(dk_.download(pb_->dk.data(), "dk"));
    return dv_.download(pb_->dv.data(), "dv");
  }

  Status time_forward(const TimingPlan& plan, const IterationCallback& cb,
                      std::vector<double>* ms) override {
    return timed([&] { return attention_forward(fwd_); }, plan, cb, ms);
  }
  Status time_backward(const TimingPlan& plan, const IterationCallback& cb,
                       std::vector<double>* ms) override {
    FLASHLAB_RETURN_IF_ERROR(prepare_backward());
    return timed([&] { return attention_backward(bwd_); }, plan, cb, ms);
  }

 private:
  template <typename T>
  static Status upload_vector(const std::vector<T>& v, DeviceBuffer* d, const char* name) {
    FLASHLAB_RETURN_IF_ERROR(d->allocate(v.size() * sizeof(T), name));
    return d->upload(v.data(), name);
  }

  void point_at_device(AttentionConfig* c) {
    c->device = Device::kCUDA;
    c->stream = stream_;
    c->alibi_slopes = c->alibi_slopes ? static_cast<const float*>(alibi_.ptr) : nullptr;
    c->cu_seqlens_q = c->cu_seqlens_q ? static_cast<const int32_t*>(cu_q_.ptr) : nullptr;
    c->cu_seqlens_k = c->cu_seqlens_k ? static_cast<const int32_t*>(cu_k_.ptr) : nullptr;
  }

  // The backward reads out and lse: the host Problem holds the reference's forward outputs.
  Status prepare_backward() {
    if (!bwd_ws_ready_) {
      int64_t bytes = 0;
      FLASHLAB_RETURN_IF_ERROR(backward_workspace_size(bwd_, &bytes));
      FLASHLAB_RETURN_IF_ERROR(bwd_ws_.allocate(static_cast<size_t>(bytes), "backward workspace"));
      bwd_.workspace = bwd_ws_.ptr;
      bwd_.workspace_bytes = bytes;
      bwd_ws_ready_ = true;
    }
    FLASHLAB_RETURN_IF_ERROR(out_.upload(pb_->out.data(), "out"));
    return copy_lse(cudaMemcpyHostToDevice);
  }

  // Host LSE rows are lse_width_ apart, device rows lse_pitch_ apart.
  Status copy_lse(cudaMemcpyKind kind) {
    if (lse_rows_ == 0 || lse_width_ == 0) return Status::Ok();
    const size_t host_pitch = lse_width_ * sizeof(float), dev_pitch = lse_pitch_ * sizeof(float);
    float* host = pb_->lse.data();
    const cudaError_t e =
        kind == cudaMemcpyDeviceToHost
            ? cudaMemcpy2D(host, host_pitch, lse_.ptr, dev_pitch, host_pitch, lse_rows_, kind)
            : cudaMemcpy2D(lse_.ptr, dev_pitch, host, host_pitch, host_pitch, lse_rows_, kind);
    return cuda_status(e, "copy lse");
  }

  // One call: event time, and the workspace plus any growth of used device memory.
  template <typename Call>
  Status measured(Call call, size_t workspace, double* ms, int64_t* peak_bytes) {
    size_t free0 = 0, free1 = 0, total = 0;
    CLI_CUDA(cudaMemGetInfo(&free0, &total), "cudaMemGetInfo");
    CLI_CUDA(cudaEventRecord(start_, stream_), "cudaEventRecord");
    FLASHLAB_RETURN_IF_ERROR(call());
    CLI_CUDA(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    CLI_CUDA(cudaStreamSynchronize(stream_), "the kernel");
    CLI_CUDA(cudaGetLastError(), "the kernel");
    float t = 0;
    CLI_CUDA(cudaEventElapsedTime(&t, start_, stop_), "cudaEventElapsedTime");
    CLI_CUDA(cudaMemGetInfo(&free1, &total), "cudaMemGetInfo");
    *ms = t;
    *peak_bytes = static_cast<int64_t>(workspace) + (free0 > free1 ? int64_t(free0 - free1) : 0);
    return Status::Ok();
  }

  template <typename Call>
  Status timed(Call call, const TimingPlan& plan, const IterationCallback& cb,
               std::vector<double>* ms) {
    ms->clear();
    for (int i = 0; i < plan.warmup; ++i) FLASHLAB_RETURN_IF_ERROR(call());
    CLI_CUDA(cudaStreamSynchronize(stream_), "warm-up");
    double spent = 0;
    for (int i = 0; i < plan.iters; ++i) {
      CLI_CUDA(cudaMemsetAsync(flush_.ptr, i & 0xff, flush_.bytes, stream_), "L2 flush");
      CLI_CUDA(cudaEventRecord(start_, stream_), "cudaEventRecord");
      FLASHLAB_RETURN_IF_ERROR(call());
      CLI_CUDA(cudaEventRecord(stop_, stream_), "cudaEventRecord");
      CLI_CUDA(cudaEventSynchronize(stop_), "the kernel");
      float t = 0;
      CLI_CUDA(cudaEventElapsedTime(&t, start_, stop_), "cudaEventElapsedTime");
      ms->push_back(t);
      spent += t;
      if (cb) cb(i + 1, plan.iters);
      if (plan.budget_s > 0 && spent > plan.budget_s * 1e3) break;
    }
    CLI_CUDA(cudaGetLastError(), "the kernel");
    return Status::Ok();
  }

  testing::Problem* pb_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  DeviceBuffer q_, k_, v_, dout_, out_, dq_, dk_, dv_, lse_, alibi_, cu_q_, cu_k_;
  DeviceBuffer fwd_ws_, bwd_ws_, flush_;
  bool bwd_ws_ready_ = false;
  int64_t lse_rows_ = 0, lse_width_ = 0, lse_pitch_ = 0;  // see init()
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
