// src/cuda/sm80/api_sm80.cpp — impl cuda_sm80 behind the C++ API: what it supports, and the
// translation of the public FwdParams / BwdParams into the kernels' FwdKernelParams /
// BwdKernelParams (with the backward's workspace carved from the caller's buffer).
//
// The dispatcher (src/api/dispatch.cpp) has validated the generic rules and resolved
// softmax_scale. This file compiles with the host compiler: it sees the kernels only through
// run_fwd<dtype, D>() / run_bwd<dtype, D>() declarations (fwd_params.h, bwd_params.h), defined by
// the generated instantiations.
// Status: verified on the H100 (tests/gpu); the first choice of kAuto for CUDA calls (dispatch.cpp).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "api/backend.h"
#include "api/validate.h"
#include "cuda/sm80/bwd_params.h"
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

using BwdFn = Status (*)(const sm80::BwdKernelParams&, void*);

// The same for the backward (bwd_table.inc).
BwdFn find_backward(DType dtype, int bucket) {
#define FLASHLAB_SM80_ROW(DT, D) \
  if (dtype == DType::DT && bucket == D) return &sm80::run_bwd<DType::DT, D>;
#include "cuda/sm80/instantiations/bwd_table.inc"
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

sm80::BwdWorkspaceLayout bwd_layout(const BwdParams& p) {
  return sm80::bwd_workspace_layout(p.batch, p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv, p.head_dim,
                                    p.deterministic);
}

// The forward's translation gives the shared pieces (sequence, score, dropout); the rest is the
// backward's. `ws` is the caller's workspace, already checked to be large enough.
sm80::BwdKernelParams make_bwd_params(const BwdParams& p, char* ws) {
  FwdParams f;
  static_cast<AttentionConfig&>(f) = p;
  f.q = p.q;
  f.k = p.k;
  f.v = p.v;
  const sm80::FwdKernelParams fk = make_fwd_params(f);
  sm80::BwdKernelParams k;
  k.seq = fk.seq;
  k.score = fk.score;
  k.dropout = fk.dropout;
  k.dropout_enabled = fk.dropout_enabled;
  k.deterministic = p.deterministic;

  sm80::BwdInputParams& in = k.in;
  in.q = p.q.ptr;
  in.k = p.k.ptr;
  in.v = p.v.ptr;
  in.out = p.out.ptr;
  in.dout = p.dout.ptr;
  in.q_batch_stride = p.q.batch_stride;
  in.q_row_stride = p.q.row_stride;
  in.q_head_stride = p.q.head_stride;
  in.k_batch_stride = p.k.batch_stride;
  in.k_row_stride = p.k.row_stride;
  in.k_head_stride = p.k.head_stride;
  in.v_batch_stride = p.v.batch_stride;
  in.v_row_stride = p.v.row_stride;
  in.v_head_stride = p.v.head_stride;
  in.o_batch_stride = p.out.batch_stride;
  in.o_row_stride = p.out.row_stride;
  in.o_head_stride = p.out.head_stride;
  in.do_batch_stride = p.dout.batch_stride;
  in.do_row_stride = p.dout.row_stride;
  in.do_head_stride = p.dout.head_stride;
  in.head_dim = static_cast<int>(p.head_dim);
  in.kv_group = static_cast<int>(p.heads_q / p.heads_kv);

  const sm80::BwdWorkspaceLayout w = bwd_layout(p);
  auto section = [&](int64_t offset) { return offset < 0 ? nullptr : reinterpret_cast<float*>(ws + offset); };
  sm80::BwdRowParams& r = k.rows;
  r.lse = p.lse;
  r.lse_batch_stride = p.lse_batch_stride;
  r.lse_head_stride = p.lse_head_stride;
  r.dsum = section(w.dsum);
  r.rows_q = p.batch * p.seqlen_q;

  sm80::BwdGradParams& g = k.grad;
  g.dq = p.dq.ptr;
  g.dq_batch_stride = p.dq.batch_stride;
  g.dq_row_stride = p.dq.row_stride;
  g.dq_head_stride = p.dq.head_stride;
  g.dq_accum = section(w.dq_accum);
  g.dk = p.dk.ptr;
  g.dv = p.dv.ptr;
  g.dk_batch_stride = p.dk.batch_stride;
  g.dk_row_stride = p.dk.row_stride;
  g.dk_head_stride = p.dk.head_stride;
  g.dv_batch_stride = p.dv.batch_stride;
  g.dv_row_stride = p.dv.row_stride;
  g.dv_head_stride = p.dv.head_stride;
  g.dkv_mode = p.heads_q == p.heads_kv ? sm80::DkvMode::kDirect
               : p.deterministic       ? sm80::DkvMode::kPartial
                                       : sm80::DkvMode::kAtomic;
  g.dk_accum = section(w.dk_accum);
  g.dv_accum = section(w.dv_accum);
  g.heads_acc = static_cast<int>(p.deterministic ? p.heads_q : p.heads_kv);
  g.heads_kv = static_cast<int>(p.heads_kv);
  g.rows_k = p.batch * p.seqlen_k;
  return k;
}

}  // namespace

Status sm80_backward_workspace_size(const BwdParams& p, int64_t* bytes) {
  *bytes = bwd_layout(p).bytes;
  return Status::Ok();
}

Status sm80_supports(const AttentionConfig& c, bool backward) {
  if (c.device != Device::kCUDA)
    return Status::Unsupported(std::string("impl ") + kName + " runs on cuda, but device is " +
                               to_string(c.device));
  if (c.dtype != DType::kBFloat16 && c.dtype != DType::kFloat16)
    return Status::Unsupported(std::string("dtype ") + to_string(c.dtype) + " is not supported by impl " +
                               kName + ": supported bf16, fp16");
  if (c.head_dim > 256 || c.head_dim % 8 != 0)
    return unsupported_value("head_dim", c.head_dim, kName,
                             "multiples of 8 up to 256 (run in the buckets 32, 64, 96, 128, 192, 256)");
  const int bucket = sm80::head_dim_bucket(static_cast<int>(c.head_dim));
  const bool built =
      backward ? find_backward(c.dtype, bucket) != nullptr : find_forward(c.dtype, bucket) != nullptr;
  if (!built)
    return Status::Unsupported(std::string(backward ? "backward: " : "") + "head_dim " +
                               std::to_string(c.head_dim) + " (bucket " + std::to_string(bucket) +
                               ") with dtype " + to_string(c.dtype) +
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

Status sm80_backward(const BwdParams& p) {
  FLASHLAB_RETURN_IF_ERROR(check_alignment_bwd(p, 16, kName));
  if (p.lse == nullptr)
    return Status::Invalid("lse is null: impl cuda_sm80's backward needs the forward's LSE");
  // All scratch is the caller's: check it before anything is launched (nothing written on error).
  const int64_t need = bwd_layout(p).bytes;
  if (p.workspace_bytes < need)
    return Status::Invalid("workspace_bytes (" + std::to_string(p.workspace_bytes) +
                           ") is too small for impl cuda_sm80's backward: it needs " + std::to_string(need) +
                           " bytes (backward_workspace_size() returns it)");
  if (need > 0 && p.workspace == nullptr)
    return Status::Invalid("workspace is null: impl cuda_sm80's backward needs " + std::to_string(need) +
                           " bytes of device workspace (backward_workspace_size() returns it)");
  if (reinterpret_cast<uintptr_t>(p.workspace) % 16 != 0)
    return Status::Invalid("workspace must be 16-byte aligned for impl cuda_sm80 (cudaMalloc memory is)");
  const BwdFn fn = find_backward(p.dtype, sm80::head_dim_bucket(static_cast<int>(p.head_dim)));
  if (fn == nullptr)
    return Status(StatusCode::kInternal, "impl cuda_sm80: no backward kernel for a supported call");
  return fn(make_bwd_params(p, static_cast<char*>(p.workspace)), p.stream);
}

}  // namespace detail
}  // namespace flashlab
