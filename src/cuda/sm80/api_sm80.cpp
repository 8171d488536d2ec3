// src/cuda/sm80/api_sm80.cpp — impl cuda_sm80 behind the C++ API: what it supports, and the
// translation of the public FwdParams into the kernel's FwdKernelParams.
//
// The dispatcher (src/api/dispatch.cpp) has validated the generic rules and resolved
// softmax_scale. This file compiles with the host compiler: it sees the kernels only through
// run_fwd<dtype, D>() declarations (fwd_params.h), defined by the generated instantiations.
// Status: compiled, not yet verified on a GPU; kAuto never selects this implementation.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "api/backend.h"
#include "api/validate.h"
#include "cuda/sm80/fwd_params.h"
#include "cuda/sm80/tile_size.h"
#include "flashlab/mask.h"
#include "flashlab/philox.h"
#include "flashlab_build_config.h"

namespace flashlab {
namespace detail {
namespace {

constexpr const char* kName = "cuda_sm80";
// Sequence positions are int inside the kernel (and i + shift - j must fit): cap the lengths.
constexpr int64_t kMaxSeqlen = int64_t(1) << 30;
constexpr int64_t kMaxGridYZ = 65535;  // heads_q -> gridDim.y, batch -> gridDim.z
// A window of 2^32 keys reaches past every key of a sequence of <= 2^30, so larger windows are
// clamped to it (equivalent, and i + shift ± window can no longer overflow int64).
constexpr int64_t kWindowCap = int64_t(1) << 32;

using FwdFn = Status (*)(const sm80::FwdKernelParams&, void*);

// The instantiation for (dtype, head-dim bucket), or null when this build did not compile it.
FwdFn find_forward(DType dtype, int bucket) {
#define FLASHLAB_SM80_ROW(DT, D) \
  if (dtype == DType::DT && bucket == D) return &sm80::run_fwd<DType::DT, D>;
#include "cuda/sm80/instantiations/fwd_table.inc"
#undef FLASHLAB_SM80_ROW
  (void)dtype;
  (void)bucket;
  return nullptr;
}

Status cuda_error(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Status(StatusCode::kDeviceError, std::string("impl cuda_sm80: ") + what + ": " +
                                              cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

int64_t cap_window(int64_t w) {
  return w > kWindowCap ? kWindowCap : w;
}

sm80::FwdKernelParams make_fwd_params(const FwdParams& p) {
  sm80::FwdKernelParams k;
  k.seq.batch = static_cast<int>(p.batch);
  k.seq.heads_q = static_cast<int>(p.heads_q);
  k.seq.seqlen_q = static_cast<int>(p.seqlen_q);
  k.seq.seqlen_k = static_cast<int>(p.seqlen_k);
  k.seq.cu_seqlens_q = p.cu_seqlens_q;
  k.seq.cu_seqlens_k = p.cu_seqlens_k;

  sm80::MainloopParams& m = k.mainloop;
  m.q = p.q.ptr;
  m.k = p.k.ptr;
  m.v = p.v.ptr;
  m.q_batch_stride = p.q.batch_stride;
  m.q_row_stride = p.q.row_stride;
  m.q_head_stride = p.q.head_stride;
  m.k_batch_stride = p.k.batch_stride;
  m.k_row_stride = p.k.row_stride;
  m.k_head_stride = p.k.head_stride;
  m.v_batch_stride = p.v.batch_stride;
  m.v_row_stride = p.v.row_stride;
  m.v_head_stride = p.v.head_stride;
  m.head_dim = static_cast<int>(p.head_dim);
  m.kv_group = static_cast<int>(p.heads_q / p.heads_kv);

  // The interval mask exactly as every backend builds it: causal becomes window_right = 0.
  const RowMask row_mask = make_row_mask(p, p.seqlen_q, p.seqlen_k);
  sm80::ScoreParams& s = k.score;
  s.softmax_scale = p.softmax_scale;
  s.softcap = p.softcap;
  s.alibi_slopes = p.alibi_slopes;
  s.alibi_batch_stride = p.alibi_batch_stride;
  s.bottom_right = p.causal_align == CausalAlign::kBottomRight;
  s.window_left = cap_window(row_mask.left);
  s.window_right = cap_window(row_mask.right);

  k.dropout_enabled = p.dropout_p > 0.0f;
  k.dropout.seed = p.dropout_seed;
  k.dropout.offset = p.dropout_offset;
  k.dropout.threshold = dropout_threshold(p.dropout_p);
  k.dropout.keep_scale = k.dropout_enabled ? static_cast<float>(1.0 / (1.0 - double(p.dropout_p))) : 1.0f;

  sm80::EpilogueParams& e = k.epilogue;
  e.o = p.out.ptr;
  e.o_batch_stride = p.out.batch_stride;
  e.o_row_stride = p.out.row_stride;
  e.o_head_stride = p.out.head_stride;
  e.lse = p.lse;
  e.lse_batch_stride = p.lse_batch_stride;
  e.lse_head_stride = p.lse_head_stride;
  e.head_dim = static_cast<int>(p.head_dim);
  return k;
}

}  // namespace

Status sm80_supports(const AttentionConfig& c, bool backward) {
  if (c.device != Device::kCUDA)
    return Status::Unsupported(std::string("impl ") + kName + " runs on cuda, but device is " +
                               to_string(c.device));
  if (backward) return Status::Unsupported("impl cuda_sm80: backward is not implemented yet");
  if (c.dtype != DType::kBFloat16 && c.dtype != DType::kFloat16)
    return Status::Unsupported(std::string("dtype ") + to_string(c.dtype) + " is not supported by impl " +
                               kName + ": supported bf16, fp16");
  if (c.head_dim > 256 || c.head_dim % 8 != 0)
    return unsupported_value("head_dim", c.head_dim, kName,
                             "multiples of 8 up to 256 (run in the buckets 32, 64, 96, 128, 192, 256)");
  const int bucket = sm80::head_dim_bucket(static_cast<int>(c.head_dim));
  if (find_forward(c.dtype, bucket) == nullptr)
    return Status::Unsupported("head_dim " + std::to_string(c.head_dim) + " (bucket " +
                               std::to_string(bucket) + ") with dtype " + to_string(c.dtype) +
                               " is not compiled into this build of impl " + kName + " (built: head dims " +
                               FLASHLAB_BUILD_HEAD_DIMS + ", dtypes " + FLASHLAB_BUILD_DTYPES +
                               "): reconfigure with -DFLASHLAB_HEAD_DIMS=... "
                               "-DFLASHLAB_DTYPES=...");
  if (c.seqlen_q > kMaxSeqlen) return unsupported_value("seqlen_q", c.seqlen_q, kName, "<= 2^30");
  if (c.seqlen_k > kMaxSeqlen) return unsupported_value("seqlen_k", c.seqlen_k, kName, "<= 2^30");
  if (c.heads_q > kMaxGridYZ) return unsupported_value("heads_q", c.heads_q, kName, "<= 65535 (grid y)");
  if (c.batch > kMaxGridYZ) return unsupported_value("batch", c.batch, kName, "<= 65535 (grid z)");

  // The kernels use sm_80 instructions (cp.async, bf16 mma.sync, ldmatrix).
  int device = 0, major = 0, minor = 0;
  FLASHLAB_RETURN_IF_ERROR(cuda_error(cudaGetDevice(&device), "cudaGetDevice"));
  FLASHLAB_RETURN_IF_ERROR(cuda_error(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute"));
  FLASHLAB_RETURN_IF_ERROR(cuda_error(
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute"));
  if (major < 8)
    return Status::Unsupported("impl cuda_sm80 needs compute capability 8.0 or newer; device " +
                               std::to_string(device) + " is " + std::to_string(major) + "." +
                               std::to_string(minor));
  return Status::Ok();
}

Status sm80_forward(const FwdParams& p) {
  // 16-byte cp.async loads and stores: pointers and outer strides must allow them.
  FLASHLAB_RETURN_IF_ERROR(check_alignment_fwd(p, 16, kName));
  const FwdFn fn = find_forward(p.dtype, sm80::head_dim_bucket(static_cast<int>(p.head_dim)));
  if (fn == nullptr) return Status(StatusCode::kInternal, "impl cuda_sm80: no kernel for a supported call");
  return fn(make_fwd_params(p), p.stream);
}

Status sm80_backward(const BwdParams&) {
  return Status::Unsupported("impl cuda_sm80: backward is not implemented yet");
}

}  // namespace detail
}  // namespace flashlab
