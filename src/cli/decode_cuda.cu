// The CUDA decode runner (decode_runner.h): device copies of q, the caches and the side arrays,
// out / lse / the workspace on the device, attention_with_kvcache on the runner's stream.
//
// Timing: cuda_timing.h (CUDA events, an L2 flush before each timed call), as the training runner.
// Poisoning: every byte 0xFF, a NaN in fp32, fp16 and bf16.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "cli/cuda_timing.h"
#include "cli/decode_runner.h"
#include "testing/device_problem.h"

namespace flashlab {
namespace cli {
namespace {

using testing::cuda_status;
using testing::DeviceBuffer;
#define DECODE_CUDA(expr, what) FLASHLAB_RETURN_IF_ERROR(cuda_status((expr), (what)))

class CudaDecodeRunner : public DecodeRunner {
 public:
  Status init(const DecodeHostView& host, Impl impl) {
    host_ = host;
    FLASHLAB_RETURN_IF_ERROR(timing_.init());
    const KvCacheParams& h = host.params;
    FLASHLAB_RETURN_IF_ERROR(mirror(&q_, h.q.ptr, host.q_bytes, "q"));
    FLASHLAB_RETURN_IF_ERROR(mirror(&k_, h.k_cache.ptr, host.k_bytes, "k_cache"));
    FLASHLAB_RETURN_IF_ERROR(mirror(&v_, h.v_cache.ptr, host.v_bytes, "v_cache"));
    FLASHLAB_RETURN_IF_ERROR(mirror(&seqlens_, h.cache_seqlens, host.seqlens_count * 4, "cache_seqlens"));
    FLASHLAB_RETURN_IF_ERROR(mirror(&table_, h.block_table, host.table_count * 4, "block_table"));
    FLASHLAB_RETURN_IF_ERROR(out_.allocate(host.out_bytes, "out"));
    FLASHLAB_RETURN_IF_ERROR(lse_.allocate(host.lse_count * sizeof(float), "lse"));

    // The host params with every tensor on the device (same strides: the buffers are byte copies).
    p_ = h;
    p_.device = Device::kCUDA;
    p_.impl = impl;
    p_.stream = timing_.stream;
    p_.q.ptr = q_.get();
    p_.k_cache.ptr = k_.get();
    p_.v_cache.ptr = v_.get();
    p_.out.ptr = out_.get();
    p_.lse = h.lse != nullptr ? lse_.as<float>() : nullptr;
    p_.cache_seqlens = h.cache_seqlens != nullptr ? seqlens_.as<int32_t>() : nullptr;
    p_.block_table = h.block_table != nullptr ? table_.as<int32_t>() : nullptr;
    int64_t ws = 0;
    FLASHLAB_RETURN_IF_ERROR(kvcache_workspace_size(p_, &ws));
    FLASHLAB_RETURN_IF_ERROR(workspace_.allocate(static_cast<size_t>(ws), "workspace"));
    p_.workspace = workspace_.get();
    p_.workspace_bytes = ws;
    DECODE_CUDA(cudaDeviceSynchronize(), "set-up");
    return Status::Ok();
  }

  Status run_once() override {
    FLASHLAB_RETURN_IF_ERROR(out_.poison());
    FLASHLAB_RETURN_IF_ERROR(lse_.poison());
    DECODE_CUDA(cudaDeviceSynchronize(), "poison");
    FLASHLAB_RETURN_IF_ERROR(attention_with_kvcache(p_));
    DECODE_CUDA(cudaStreamSynchronize(timing_.stream), "the decode call");
    DECODE_CUDA(cudaGetLastError(), "the decode call");
    FLASHLAB_RETURN_IF_ERROR(out_.download(host_.params.out.ptr));
    if (host_.params.lse != nullptr) FLASHLAB_RETURN_IF_ERROR(lse_.download(host_.params.lse));
    return Status::Ok();
  }

  Status time(const TimingPlan& plan, const IterationCallback& cb, std::vector<double>* ms) override {
    return timing_.time([&] { return attention_with_kvcache(p_); }, plan, cb, ms);
  }

 private:
  // A device copy of `bytes` host bytes at `host` (nothing when host is null or bytes is 0).
  static Status mirror(DeviceBuffer* d, const void* host, size_t bytes, const char* name) {
    if (host == nullptr || bytes == 0) return Status::Ok();
    FLASHLAB_RETURN_IF_ERROR(d->allocate(bytes, name));
    return d->upload(host);
  }

  DecodeHostView host_;
  KvCacheParams p_;
  CudaTiming timing_;
  DeviceBuffer q_, k_, v_, seqlens_, table_, out_, lse_, workspace_;
};

}  // namespace

Status make_cuda_decode_runner(const DecodeHostView& host, Impl impl, std::unique_ptr<DecodeRunner>* out) {
  std::unique_ptr<CudaDecodeRunner> r(new CudaDecodeRunner());
  FLASHLAB_RETURN_IF_ERROR(r->init(host, impl));
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace cli
}  // namespace flashlab
