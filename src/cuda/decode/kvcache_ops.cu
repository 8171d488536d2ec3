// src/cuda/decode/kvcache_ops.cu — the CUDA KV-cache operations besides the attention (decode.cu):
// the append (standalone kvcache_append, and the launch the fused path of attention_with_kvcache
// shares), the public attention_combine, and the host copy of the side arrays that
// check_device_data asks for. Called from src/api/kvcache.cpp after the generic validation.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "api/backend.h"
#include "cuda/common/launch.h"
#include "cuda/decode/append_kernel.cuh"
#include "cuda/decode/combine_kernel.cuh"
#include "cuda/decode/kvcache_ops.h"
#include "flashlab/kvcache.h"

namespace flashlab {
namespace detail {
namespace {

constexpr int kAppendThreads = 256;

bool aligned16(const void* ptr, std::initializer_list<int64_t> strides, int64_t es) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return false;
  for (int64_t s : strides)
    if ((s * es) % 16 != 0) return false;
  return true;
}

// Rows the append kernel walks: (b, t, kv head) rows of K and V (batch · seqlen_new · heads_kv), Q rows.
int64_t kv_rows(const KvCacheParams& p) { return p.k_new.ptr != nullptr ? p.batch * p.seqlen_new * p.heads_kv : 0; }
int64_t q_rows(const KvCacheParams& p, bool rotate_q) { return rotate_q ? p.batch * p.seqlen_q * p.heads_q : 0; }

template <typename T, int kVec>
Status launch_typed(const decode::AppendParams& ap, cudaStream_t stream) {
  int device = 0;
  const common::DeviceFacts* facts = nullptr;
  FLASHLAB_RETURN_IF_ERROR(common::current_device(&device, &facts));
  const int64_t total = (int64_t(ap.kv_rows) + ap.q_rows) * ap.vecs_per_row;  // a K + V pair or a Q vector each
  // Enough CTAs to fill every SM a few times over (8 CTAs of 256 threads fill an H100 SM); past
  // that the grid-stride loop takes the rest.
  int64_t blocks = (total + kAppendThreads - 1) / kAppendThreads;
  const int64_t cap = int64_t(facts->sm_count) * 32;
  if (blocks > cap) blocks = cap;
  decode::AppendParams launch = ap;
  launch.set_divisors();
  decode::append_kernel<T, kVec><<<static_cast<unsigned>(blocks), kAppendThreads, 0, stream>>>(launch);
  return common::cuda_error(cudaGetLastError(), "cuda", "kvcache append launch");
}

template <typename T>
Status launch_dtype(decode::AppendParams ap, const KvCacheParams& p, bool vec, cudaStream_t stream) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  decode::set_rotary(&ap, p, vec ? kVec : 1);
  if (vec) {
    ap.vecs_per_row = ap.head_dim / kVec;
    return launch_typed<T, kVec>(ap, stream);
  }
  ap.vecs_per_row = ap.head_dim;
  return launch_typed<T, 1>(ap, stream);
}

}  // namespace

int64_t rotated_q_bytes(const KvCacheParams& p) {
  if (p.rotary_cos == nullptr) return 0;
  return (p.batch * p.seqlen_q * p.heads_q * p.head_dim * dtype_size(p.dtype) + 255) / 256 * 256;
}

Status append_supports(const KvCacheParams& p, bool attend) {
  // Worst case one element per thread; half of INT_MAX leaves the grid-stride step room.
  const int64_t elems = (2 * kv_rows(p) + q_rows(p, attend && p.rotary_cos != nullptr)) * p.head_dim;
  if (elems > INT_MAX / 2)
    return Status::Unsupported("the CUDA KV-cache append: batch x seqlen_new x heads x head_dim (" +
                               std::to_string(elems) + " elements) must stay below 2^30 per call");
  return Status::Ok();
}

Status launch_append(const KvCacheParams& p, void* q_rot, bool* launched) {
  if (launched != nullptr) *launched = false;
  decode::AppendParams ap;
  decode::set_new_rows(&ap, p);
  ap.k_cache = p.k_cache.ptr;
  ap.v_cache = p.v_cache.ptr;
  ap.k_batch_stride = p.k_cache.batch_stride;
  ap.k_row_stride = p.k_cache.row_stride;
  ap.k_head_stride = p.k_cache.head_stride;
  ap.v_batch_stride = p.v_cache.batch_stride;
  ap.v_row_stride = p.v_cache.row_stride;
  ap.v_head_stride = p.v_cache.head_stride;
  ap.block_table = p.block_table;
  ap.block_table_stride = p.block_table_batch_stride ? p.block_table_batch_stride : p.max_pages;
  ap.page_size = p.block_table != nullptr ? p.page_size : 1;
  ap.cache_batch_idx = p.cache_batch_idx;
  ap.cache_seqlens = p.cache_seqlens;
  ap.cache_leftpad = p.cache_leftpad;
  ap.capacity = p.block_table != nullptr ? p.max_pages * p.page_size : p.max_seqlen_cache;
  ap.batch = static_cast<int>(p.batch);
  ap.seqlen_new = static_cast<int>(p.seqlen_new);
  ap.heads_kv = static_cast<int>(p.heads_kv);
  ap.head_dim = static_cast<int>(p.head_dim);
  ap.q = q_rot != nullptr ? p.q.ptr : nullptr;
  ap.q_batch_stride = p.q.batch_stride;
  ap.q_row_stride = p.q.row_stride;
  ap.q_head_stride = p.q.head_stride;
  ap.q_rot = q_rot;
  ap.seqlen_q = static_cast<int>(p.seqlen_q);
  ap.heads_q = static_cast<int>(p.heads_q);
  ap.kv_rows = static_cast<int>(kv_rows(p));
  ap.q_rows = static_cast<int>(q_rows(p, q_rot != nullptr));
  if (ap.kv_rows == 0 && ap.q_rows == 0) return Status::Ok();

  // 16-byte vectors where every row start is 16-byte aligned (pointers and strides) and a row is
  // whole vectors; else one element per thread (correct for any layout, slower).
  const int64_t es = dtype_size(p.dtype);
  bool vec = (p.head_dim * es) % 16 == 0;
  if (ap.kv_rows > 0)
    vec = vec && aligned16(p.k_new.ptr, {p.k_new.batch_stride, p.k_new.row_stride, p.k_new.head_stride}, es) &&
          aligned16(p.v_new.ptr, {p.v_new.batch_stride, p.v_new.row_stride, p.v_new.head_stride}, es) &&
          aligned16(p.k_cache.ptr, {p.k_cache.batch_stride, p.k_cache.row_stride, p.k_cache.head_stride}, es) &&
          aligned16(p.v_cache.ptr, {p.v_cache.batch_stride, p.v_cache.row_stride, p.v_cache.head_stride}, es);
  if (ap.q_rows > 0)
    vec = vec && aligned16(p.q.ptr, {p.q.batch_stride, p.q.row_stride, p.q.head_stride}, es) &&
          aligned16(q_rot, {}, es);
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  if (launched != nullptr) *launched = true;
  switch (p.dtype) {
    case DType::kBFloat16: return launch_dtype<__nv_bfloat16>(ap, p, vec, stream);
    case DType::kFloat16: return launch_dtype<__half>(ap, p, vec, stream);
    case DType::kFloat32: return launch_dtype<float>(ap, p, vec, stream);
    default: return Status::Unsupported(std::string("dtype ") + to_string(p.dtype) + " is not supported by the CUDA append");
  }
}

Status cuda_kvcache_append(const KvCacheParams& p) { return launch_append(p, nullptr); }

Status cuda_attention_combine(const CombineParams& p) {
  if (p.num_splits > INT_MAX || p.batch * p.seqlen_q * p.heads > INT_MAX || p.head_dim > INT_MAX)
    return Status::Unsupported("attention_combine on CUDA: batch x seqlen_q x heads must fit its grid (< 2^31)");
  decode::CombineArgs a;
  a.num_splits = static_cast<int>(p.num_splits);
  a.batch = static_cast<int>(p.batch);
  a.seqlen_q = static_cast<int>(p.seqlen_q);
  a.heads = static_cast<int>(p.heads);
  a.head_dim = static_cast<int>(p.head_dim);
  a.o_partial = p.out_partial;
  a.o_split_stride = p.out_partial_split_stride;
  a.o_batch_stride = p.out_partial_batch_stride;
  a.o_row_stride = p.out_partial_row_stride;
  a.o_head_stride = p.out_partial_head_stride;
  a.lse_partial = p.lse_partial;
  a.l_split_stride = p.lse_partial_split_stride;
  a.l_batch_stride = p.lse_partial_batch_stride;
  a.l_head_stride = p.lse_partial_head_stride;
  a.out = p.out.ptr;
  a.out_batch_stride = p.out.batch_stride;
  a.out_row_stride = p.out.row_stride;
  a.out_head_stride = p.out.head_stride;
  a.lse = p.lse;
  a.lse_batch_stride = p.lse_batch_stride;
  a.lse_head_stride = p.lse_head_stride;
  return launch_combine(a, p.dtype, static_cast<cudaStream_t>(p.stream));
}

Status launch_combine(const decode::CombineArgs& a, DType dtype, cudaStream_t stream, bool pdl) {
  const unsigned rows = static_cast<unsigned>(int64_t(a.batch) * a.seqlen_q * a.heads);
  if (rows == 0) return Status::Ok();
  // A thread per column up to 128 (a warp at least): head dims <= 128 take one pass.
  const int threads = a.head_dim >= 128 ? 128 : (a.head_dim + 31) / 32 * 32;
  cudaError_t e = cudaSuccess;
  switch (dtype) {
    case DType::kBFloat16:
      e = common::launch_kernel(decode::combine_kernel<__nv_bfloat16>, dim3(rows), dim3(threads), 0, stream, pdl, a);
      break;
    case DType::kFloat16:
      e = common::launch_kernel(decode::combine_kernel<__half>, dim3(rows), dim3(threads), 0, stream, pdl, a);
      break;
    case DType::kFloat32:
      e = common::launch_kernel(decode::combine_kernel<float>, dim3(rows), dim3(threads), 0, stream, pdl, a);
      break;
    default: return Status::Unsupported(std::string("dtype ") + to_string(dtype) + " is not supported by the CUDA combine");
  }
  return common::cuda_error(e, "cuda", "combine launch");
}

Status cuda_fetch_side_arrays(const KvCacheParams& p, SideArrays* out) {
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  auto fetch = [&](const int32_t* src, int64_t n, std::vector<int32_t>* dst) {
    dst->clear();
    if (src == nullptr || n == 0) return cudaSuccess;
    dst->resize(static_cast<size_t>(n));
    return cudaMemcpyAsync(dst->data(), src, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream);
  };
  const int64_t bts = p.block_table_batch_stride ? p.block_table_batch_stride : p.max_pages;
  // The table's last row needs only max_pages entries (its stride may pass the allocation).
  const int64_t table_n = p.batch > 0 ? (p.batch - 1) * bts + p.max_pages : 0;
  for (const cudaError_t e : {fetch(p.cache_seqlens, p.batch, &out->seqlens), fetch(p.cache_leftpad, p.batch, &out->leftpad),
                              fetch(p.cache_batch_idx, p.batch, &out->batch_idx),
                              fetch(p.block_table, table_n, &out->table), cudaStreamSynchronize(stream)})
    FLASHLAB_RETURN_IF_ERROR(common::cuda_error(e, "cuda", "check_device_data: copying the side arrays to the host"));
  return Status::Ok();
}

}  // namespace detail
}  // namespace flashlab
