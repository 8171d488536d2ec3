// learn/kernels/backward_common.cu — arguments, workspace, and the pre/post-processing kernels
// shared by the FA-style backward versions (v1..v4). See backward_common.cuh.
#include <algorithm>
#include <cmath>

#include "kernels/backward_common.cuh"

namespace flashlab {
namespace learn_bwd {

namespace {
Strides strides_of(const TensorRef& t) { return Strides{t.batch_stride, t.row_stride, t.head_stride}; }
Strides strides_of(const MutTensorRef& t) { return Strides{t.batch_stride, t.row_stride, t.head_stride}; }
int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t align256(int64_t x) { return round_up(x, 256); }
}  // namespace

BwdArgs make_args(const BwdParams& p) {
  BwdArgs a{};
  static_cast<learn::KernelShape&>(a) = learn::make_kernel_shape(p);
  a.q = p.q.ptr;
  a.k = p.k.ptr;
  a.v = p.v.ptr;
  a.o = p.out.ptr;
  a.dout = p.dout.ptr;
  a.dq = p.dq.ptr;
  a.dk = p.dk.ptr;
  a.dv = p.dv.ptr;
  a.q_st = strides_of(p.q);
  a.k_st = strides_of(p.k);
  a.v_st = strides_of(p.v);
  a.o_st = strides_of(p.out);
  a.do_st = strides_of(p.dout);
  a.dq_st = strides_of(p.dq);
  a.dk_st = strides_of(p.dk);
  a.dv_st = strides_of(p.dv);
  a.lse = p.lse;
  a.lse_batch_stride = p.lse_batch_stride;
  a.lse_head_stride = p.lse_head_stride;
  a.group = static_cast<int>(p.heads_q / p.heads_kv);
  a.dtype = p.dtype;
  a.scale = p.softmax_scale;
  a.shift = static_cast<int>(p.seqlen_k - p.seqlen_q);
  a.rows_pad = static_cast<int>(round_up(p.seqlen_q, kRowPad));
  return a;
}

// Layout: dq_acc | lse2 | dvec | dq_turn, each 256-byte aligned.
int64_t workspace_bytes(const BwdParams& p, int turn_block_m) {
  const int64_t bh = p.batch * p.heads_q;
  const int64_t rows_pad = round_up(p.seqlen_q, kRowPad);
  int64_t n = align256(bh * p.seqlen_q * p.head_dim * 4);  // dq_acc
  n += 2 * align256(bh * rows_pad * 4);                     // lse2, dvec
  if (turn_block_m > 0) n += align256(bh * ((p.seqlen_q + turn_block_m - 1) / turn_block_m) * 4);
  return n;
}

Status acquire_workspace(const BwdParams& p, int turn_block_m, BwdArgs* a, Workspace* ws) {
  ws->stream = static_cast<cudaStream_t>(p.stream);
  ws->bytes = workspace_bytes(p, turn_block_m);
  if (p.workspace != nullptr && p.workspace_bytes >= ws->bytes) {
    ws->base = p.workspace;
    ws->owned = false;
  } else {
    const cudaError_t e = cudaMallocAsync(&ws->base, ws->bytes, ws->stream);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error so later calls do not see it
      return Status(StatusCode::kOutOfMemory, "learn backward: cannot allocate " +
                                                  std::to_string(ws->bytes) + " bytes of workspace");
    }
    LEARN_CUDA_TRY(e);
    ws->owned = true;
  }
  const int64_t bh = p.batch * p.heads_q;
  char* c = static_cast<char*>(ws->base);
  a->dq_acc = reinterpret_cast<float*>(c);
  c += align256(bh * p.seqlen_q * p.head_dim * 4);
  a->lse2 = reinterpret_cast<float*>(c);
  c += align256(bh * a->rows_pad * 4);
  a->dvec = reinterpret_cast<float*>(c);
  c += align256(bh * a->rows_pad * 4);
  a->dq_turn = turn_block_m > 0 ? reinterpret_cast<int*>(c) : nullptr;
  a->turn_block_m = turn_block_m;
  return Status::Ok();
}

Status release_workspace(Workspace* ws) {
  if (ws->owned && ws->base != nullptr) LEARN_CUDA_TRY(cudaFreeAsync(ws->base, ws->stream));
  ws->base = nullptr;
  ws->owned = false;
  return Status::Ok();
}

namespace {

// One warp per (batch, head, row) of the padded row range.
template <typename T>
__global__ void bwd_preprocess_kernel(BwdArgs a) {
  const int warps_per_block = blockDim.x / 32;
  const int64_t row_id = static_cast<int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t total = static_cast<int64_t>(a.batch) * a.heads_q * a.rows_pad;
  if (row_id >= total) return;
  const int i = static_cast<int>(row_id % a.rows_pad);
  const int h = static_cast<int>((row_id / a.rows_pad) % a.heads_q);
  const int b = static_cast<int>(row_id / (static_cast<int64_t>(a.rows_pad) * a.heads_q));
  const int64_t stat = row_stat_index(a, b, h, i);
  if (i >= a.seqlen_q) {  // padding row: contributes nothing (P = exp2(x − inf) = 0)
    if (lane == 0) {
      a.lse2[stat] = INFINITY;
      a.dvec[stat] = 0.0f;
    }
    return;
  }
  const T* o = static_cast<const T*>(a.o) + elem_index(a.o_st, b, i, h);
  const T* dout = static_cast<const T*>(a.dout) + elem_index(a.do_st, b, i, h);
  float sum = 0.0f;
  for (int d = lane; d < a.head_dim; d += 32) sum += to_float(o[d]) * to_float(dout[d]);
  if (a.dq_acc != nullptr) {  // v0 has no accumulator
    float* acc = a.dq_acc + dq_acc_index(a, b, h, i);
    for (int d = lane; d < a.head_dim; d += 32) acc[d] = 0.0f;
  }
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (lane == 0) {
    const float lse = a.lse[b * a.lse_batch_stride + h * a.lse_head_stride + i];
    // A row that sees no key has LSE = -inf and must get P = 0 everywhere: with +inf in its place,
    // exp2(s − lse2) = 0 for every finite s, so no kernel needs a special case.
    a.lse2[stat] = lse == -INFINITY ? INFINITY : lse * kLog2e;
    a.dvec[stat] = sum;
  }
}

template <typename T>
__global__ void bwd_postprocess_dq_kernel(BwdArgs a) {
  const int64_t total = static_cast<int64_t>(a.batch) * a.heads_q * a.seqlen_q * a.head_dim;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(e % a.head_dim);
    const int64_t r = e / a.head_dim;  // (b, h, i) in dq_acc order
    const int i = static_cast<int>(r % a.seqlen_q);
    const int h = static_cast<int>((r / a.seqlen_q) % a.heads_q);
    const int b = static_cast<int>(r / (static_cast<int64_t>(a.seqlen_q) * a.heads_q));
    T* dq = static_cast<T*>(a.dq) + elem_index(a.dq_st, b, i, h);
    dq[d] = from_float<T>(a.scale * a.dq_acc[e]);
  }
}

}  // namespace

Status launch_preprocess(const BwdArgs& a, cudaStream_t stream) {
  if (a.dq_turn != nullptr) {
    const int64_t n = static_cast<int64_t>(a.batch) * a.heads_q *
                      ((a.seqlen_q + a.turn_block_m - 1) / a.turn_block_m);
    LEARN_CUDA_TRY(cudaMemsetAsync(a.dq_turn, 0, n * sizeof(int), stream));
  }
  const int64_t rows = static_cast<int64_t>(a.batch) * a.heads_q * a.rows_pad;
  if (rows == 0) return Status::Ok();
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((rows + threads / 32 - 1) / (threads / 32));
  LEARN_DTYPE_SWITCH(a.dtype, T, [&] { bwd_preprocess_kernel<T><<<blocks, threads, 0, stream>>>(a); });
  LEARN_LAUNCH_TRY();
  return Status::Ok();
}

Status launch_postprocess_dq(const BwdArgs& a, cudaStream_t stream) {
  const int threads = 256;
  const int64_t total = static_cast<int64_t>(a.batch) * a.heads_q * a.seqlen_q * a.head_dim;
  if (total == 0) return Status::Ok();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + threads - 1) / threads, 65536));
  LEARN_DTYPE_SWITCH(a.dtype, T, [&] { bwd_postprocess_dq_kernel<T><<<blocks, threads, 0, stream>>>(a); });
  LEARN_LAUNCH_TRY();
  return Status::Ok();
}

Status zero_dq_acc(const BwdArgs& a, cudaStream_t stream) {
  return learn::cuda_status(
      cudaMemsetAsync(a.dq_acc, 0, sizeof(float) * a.batch * a.heads_q * a.seqlen_q * a.head_dim, stream),
      "cudaMemsetAsync(dq_acc)", __FILE__, __LINE__);
}

}  // namespace learn_bwd
}  // namespace flashlab
