// flashlab/params.h — the plain parameter structs at the API boundary.
//
// No framework types: raw pointers, explicit int64 strides, sizes and flags. Every tensor uses the
// (batch, seqlen, heads, head_dim) layout with the last dimension contiguous; the three outer
// strides are given in elements (not bytes). LSE uses (batch, heads_q, seqlen_q) with the row
// dimension contiguous.
//
// Variable-length batches: set cu_seqlens_q / cu_seqlens_k (int32, batch + 1 entries, on the same
// device as the tensors). Then q/k/v/out are packed as (total_tokens, heads, head_dim): batch
// strides are ignored, token t of sequence b sits at row cu_seqlens[b] + t, seqlen_q / seqlen_k
// are the maximum lengths (an upper bound on every sequence), and LSE is (heads_q, total_q) with
// lse_head_stride between heads. The CUDA backends cannot check the bound without reading
// cu_seqlens on the host (a synchronization they never make): a longer sequence is the caller's
// error and its result is undefined (its extra rows are not computed; cuda_sm80's backward sizes
// its workspace from the bound). total_q / total_k, when given, are the packed tensors' row counts
// (q and out: total_q; k and v: total_k; at least cu_seqlens[batch]); cuda_sm90 needs them: its
// TMA descriptors span exactly those rows, so a tile that reaches past the last sequence reads
// zeros instead of memory past the tensor. Without them impl=auto leaves varlen to cuda_sm80.
#pragma once

#include <cstdint>
#include <limits>

#include "flashlab/dtype.h"

namespace flashlab {

enum class Device : int { kCPU = 0, kCUDA = 1 };

// Which implementation runs the call. kAuto picks the fastest available one for the device.
enum class Impl : int {
  kAuto = 0,
  kReference = 1,  // CPU, float64, materializes S and P: the oracle for every test
  kCpuFlash = 2,   // CPU FlashAttention-2: tiled, online softmax, multithreaded
  // Learning kernels (learn/, CUDA): v0 standard, v1 FA-1, v2 FA-2, v3 tensor cores, v4 pipelined.
  kLearnV0 = 10,
  kLearnV1 = 11,
  kLearnV2 = 12,
  kLearnV3 = 13,
  kLearnV4 = 14,
  kCudaSm80 = 20,  // production CuTe kernels, Ampere and later
  kCudaSm90 = 21,  // production Hopper kernels
};

// How the causal diagonal (and the sliding window) is anchored when seqlen_q != seqlen_k.
//   kBottomRight (FlashAttention-2): query i sees key j iff j <= i + (seqlen_k - seqlen_q)
//   kTopLeft (PyTorch SDPA is_causal): query i sees key j iff j <= i
enum class CausalAlign : int { kBottomRight = 0, kTopLeft = 1 };

// One attention tensor: base pointer and strides (in elements) of its three outer dimensions.
// dim_stride must be 1 (the last dimension is contiguous); it exists so that bindings can pass a
// framework tensor's strides through unchanged and get a clear error instead of a wrong answer.
struct TensorRef {
  const void* ptr = nullptr;
  int64_t batch_stride = 0;
  int64_t row_stride = 0;
  int64_t head_stride = 0;
  int64_t dim_stride = 1;
};
struct MutTensorRef {
  void* ptr = nullptr;
  int64_t batch_stride = 0;
  int64_t row_stride = 0;
  int64_t head_stride = 0;
  int64_t dim_stride = 1;
  // A writable tensor can be read: `p.q = contiguous(q, ...)` works for a non-const `q` too.
  operator TensorRef() const { return TensorRef{ptr, batch_stride, row_stride, head_stride, dim_stride}; }
};

// Everything the forward and backward passes share: shapes, masking and score modifications.
struct AttentionConfig {
  // --- element type and placement
  DType dtype = DType::kBFloat16;  // of q, k, v, out (and dout, dq, dk, dv)
  Device device = Device::kCPU;
  Impl impl = Impl::kAuto;

  // --- sizes
  int64_t batch = 0;
  int64_t seqlen_q = 0;  // with cu_seqlens: the maximum query length
  int64_t seqlen_k = 0;  // with cu_seqlens: the maximum key length
  int64_t heads_q = 0;
  int64_t heads_kv = 0;  // heads_q must be a multiple: GQA (ratio > 1) and MQA (heads_kv = 1)
  int64_t head_dim = 0;

  // --- scores: s = softmax_scale * q·k, then softcap, then ALiBi, then the mask
  float softmax_scale = std::numeric_limits<float>::quiet_NaN();  // NaN: 1/sqrt(head_dim)
  float softcap = 0.0f;  // > 0: s = softcap * tanh(s / softcap)
  // ALiBi: s -= slope[b, h] * |i + shift - j| (shift as for the causal diagonal). fp32, heads_q
  // slopes per batch entry; alibi_batch_stride = 0 shares one set of slopes across the batch.
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;
  // Attention sinks (gpt-oss, FA3's "learnable sink"): fp32, heads_q logits, one per query head,
  // on `device`; null = off. The sink of head h joins every row's softmax denominator with no value:
  //   LSE_i = log(exp(sink_h) + Σ_j exp(s_ij)),  P_ij = exp(s_ij − LSE_i),  out_i = Σ_j P_ij v_j,
  // in the units of the final (scaled, softcapped, ALiBi'd) scores s. A row that sees no key gets
  // out = 0 and LSE = sink_h; a sink of −inf is the same as none. (docs/algorithm.md, "Sinks")
  const float* sink_logits = nullptr;

  // --- mask
  bool causal = false;
  CausalAlign causal_align = CausalAlign::kBottomRight;
  // Sliding window, anchored like the causal diagonal: query i sees key j iff
  //   i + shift - window_left <= j <= i + shift + window_right   (-1 = unbounded on that side).
  // causal is the same as window_right = 0.
  int64_t window_left = -1;
  int64_t window_right = -1;
  // StreamingLLM sink tokens: the first sink_tokens keys stay visible to every row whose right
  // bound reaches them, left of its window too (0 = off; docs/design/sink-tokens.md). Query i
  // sees key j < sink_tokens iff j <= i + shift + right bound. Every backend but the learning
  // kernels has them; cuda_sm90 refuses them in the forward above head dim 128 and in the
  // deterministic backward (kUnsupported; impl=auto runs cuda_sm80 there).
  int64_t sink_tokens = 0;

  // --- dropout on the attention probabilities (training). Keep-mask from Philox-4x32-10, keyed
  // as docs/dropout.md describes, so every backend draws the same mask for the same seed/offset.
  float dropout_p = 0.0f;  // in [0, 1)
  uint64_t dropout_seed = 0;
  uint64_t dropout_offset = 0;

  // --- variable-length batches (see the file comment); both or neither
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  // Rows of the packed tensors with cu_seqlens (-1: not given; ignored without cu_seqlens).
  int64_t total_q = -1;
  int64_t total_k = -1;

  // --- execution
  void* stream = nullptr;     // cudaStream_t for CUDA backends; ignored on the CPU
  int num_threads = 0;        // CPU backends: 0 = all hardware threads
  void* workspace = nullptr;  // device scratch of at least *_workspace_size() bytes (CUDA; the
                              // forward's is optional: flashlab.h forward_workspace_size)
  int64_t workspace_bytes = 0;
};

struct FwdParams : AttentionConfig {
  TensorRef q, k, v;
  MutTensorRef out;
  float* lse = nullptr;  // (batch, heads_q, seqlen_q) fp32; may be null when not needed
  int64_t lse_batch_stride = 0;
  int64_t lse_head_stride = 0;
};

struct BwdParams : AttentionConfig {
  TensorRef q, k, v, out, dout;
  const float* lse = nullptr;  // from the forward pass (required)
  int64_t lse_batch_stride = 0;
  int64_t lse_head_stride = 0;
  MutTensorRef dq, dk, dv;
  bool deterministic = false;  // no atomics whose order changes the result
  // With sink_logits: heads_q fp32 gradients dL/dsink_h = −Σ_{b,i} exp(sink_h − LSE_i) · D_i,
  // D_i = rowsum(dout_i ∘ out_i); written (not accumulated). Optional: null = not computed.
  float* dsink = nullptr;
};

// Strides of a contiguous (batch, seqlen, heads, head_dim) tensor.
inline TensorRef contiguous(const void* p, int64_t seqlen, int64_t heads, int64_t head_dim) {
  return TensorRef{p, seqlen * heads * head_dim, heads * head_dim, head_dim, 1};
}
inline MutTensorRef contiguous(void* p, int64_t seqlen, int64_t heads, int64_t head_dim) {
  return MutTensorRef{p, seqlen * heads * head_dim, heads * head_dim, head_dim, 1};
}

}  // namespace flashlab
