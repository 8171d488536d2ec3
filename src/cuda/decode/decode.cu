// src/cuda/decode/decode.cu — the CUDA KV-cache attention (decode_kernel.cuh, decode_tile_kernel.cuh)
// behind the C++ API: what it supports, its workspace, which kernel runs (decode.h: v5 or tile), and
// the launches. Called from src/api/kvcache.cpp after the generic validation. Host-only planning:
// the split count comes from sizes the host knows (the cache capacity, batch, heads); the kernels
// read cache_seqlens, leftpad, block_table and cache_batch_idx on the device, so a call never
// synchronizes (unless check_device_data asks for the host checks).
//
// One call, in stream order: [append k_new / v_new, rotate q into the workspace] (append_kernel.cuh,
// one launch, when k_new or rotary is given) -> decode kernel (reads the updated cache, with
// L = cache_seqlens + seqlen_new - leftpad) -> [combine_kernel.cuh when split].
//
// Workspace layout (256-byte aligned sections): o_partial (splits, batch, seqlen_q, heads_q,
// head_dim) fp32 | lse_partial (splits, batch, heads_q, seqlen_q) fp32 | q_rot (batch, seqlen_q,
// heads_q, head_dim) in the dtype; each section is absent (0 bytes) when unused.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "api/backend.h"
#include "api/validate.h"
#include "cuda/common/launch.h"
#include "cuda/decode/combine_kernel.cuh"
#include "cuda/decode/decode.h"
#include "cuda/decode/decode_kernel.cuh"
#include "cuda/decode/decode_tile_kernel.cuh"
#include "cuda/decode/kvcache_ops.h"
#include "flashlab/kvcache.h"
#include "flashlab/mask.h"

#ifdef FLASHLAB_DECODE_TIMELINE
#include <cstdio>
#include <cstdlib>
#include <vector>
#endif

namespace flashlab {
namespace detail {
namespace {

constexpr const char* kName = "the CUDA KV-cache path";

#ifdef FLASHLAB_DECODE_TIMELINE
// The timeline build's host side (decode_timeline.cuh): with FLASHLAB_DECODE_TL=path, an L2 flush
// before the tile kernel and its CTAs' marks written to path after it. Synchronizes: eager calls
// only (not inside CUDA-graph capture).
__global__ void timeline_flush_kernel(const float4* a, int64_t n, float* sink) {
  float acc = 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float4 v = a[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 12345.0f) *sink = acc;  // never true (zeros): keeps the reads
}
void timeline_before(cudaStream_t s) {
  if (std::getenv("FLASHLAB_DECODE_TL") == nullptr) return;
  static float4* buf = nullptr;
  static float* sink = nullptr;
  const int64_t n = (int64_t(512) << 20) / 16;
  if (buf == nullptr) {
    cudaMalloc(&buf, n * 16);
    cudaMemset(buf, 0, n * 16);
    cudaMalloc(&sink, 4);
  }
  void* marks = nullptr;  // 0: a mark the call does not reach
  cudaGetSymbolAddress(&marks, decode::g_decode_tl);
  cudaMemsetAsync(marks, 0, sizeof(unsigned long long) * decode::kTimelineCtas * 8, s);
  timeline_flush_kernel<<<1056, 512, 0, s>>>(buf, n, sink);
  cudaStreamSynchronize(s);
}
void timeline_after(cudaStream_t s, unsigned ctas) {
  const char* path = std::getenv("FLASHLAB_DECODE_TL");
  if (path == nullptr) return;
  cudaStreamSynchronize(s);
  std::vector<unsigned long long> h(size_t(decode::kTimelineCtas) * 8);
  cudaMemcpyFromSymbol(h.data(), decode::g_decode_tl, h.size() * 8);
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return;
  std::fprintf(f, "cta,smid,t0,t1,t2,t3,t4,t5,t6\n");
  for (unsigned i = 0; i < ctas && i < unsigned(decode::kTimelineCtas); ++i) {
    const unsigned long long* r = &h[size_t(i) * 8];
    std::fprintf(f, "%u,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n", i, r[7], r[0], r[1], r[2], r[3], r[4],
                 r[5], r[6]);
  }
  std::fclose(f);
}
#else
void timeline_before(cudaStream_t) {}
void timeline_after(cudaStream_t, unsigned) {}
#endif

int64_t capacity(const KvCacheParams& p) {
  return p.block_table != nullptr ? p.max_pages * p.page_size : p.max_seqlen_cache;
}
// The tile kernel's row groups (decode_tile_kernel.cuh, cta_rows): 2 (32 rows per CTA, two warps
// per 16 rows, 32 keys each) where a kv head has more than 16 query rows (hdim <= 128) and those
// CTAs alone reach one per SM; else 1 (16 rows per CTA, the warps split the keys). Measured on the
// H100 (docs/perf.md, "Row groups for many query rows"; B 32, L 8k, TB/s, row groups 1 / 2 / 4): GQA 64/8
// seqlen_q 4 2.78 / 2.85 / 2.29, seqlen_q 8 1.92 / 2.29 / 2.04, seqlen_q 16 0.97 / 1.17 / 1.04,
// GQA 32/8 seqlen_q 8 2.78 / 2.86 / 2.29; MQA 32/1 (32 CTAs: split-bound; 2 groups halve the CTAs
// and double the splits) 1.88 / 1.71 / 1.52. 4 groups (64 rows, a warp per 16 rows with all 64 keys
// of a tile) are never ahead: not launched.
int tile_row_groups(const KvCacheParams& p, int sm_count) {
  const int64_t rows = p.seqlen_q * (p.heads_q / p.heads_kv);
  if (p.head_dim > 128 || rows <= decode::kTileRows) return 1;
  const int64_t ctas = p.batch * p.heads_kv * ((rows + decode::cta_rows(2) - 1) / decode::cta_rows(2));
  return ctas >= sm_count ? 2 : 1;
}
// Query rows per CTA: v5 4 (kRows), tile 16 · row groups (kTileRows = the MMA's M).
int rows_per_cta(const KvCacheParams& p, DecodeKernel kernel, int sm_count) {
  return kernel == DecodeKernel::kTile ? decode::cta_rows(tile_row_groups(p, sm_count)) : decode::kRows;
}
int row_chunks(const KvCacheParams& p, DecodeKernel kernel, int sm_count) {
  const int64_t rows = p.seqlen_q * (p.heads_q / p.heads_kv);
  const int per_cta = rows_per_cta(p, kernel, sm_count);
  return static_cast<int>((rows + per_cta - 1) / per_cta);
}

// CTAs of a kernel resident on one SM (what its __launch_bounds__ asks and shared memory allows).
int ctas_per_sm(const KvCacheParams& p, DecodeKernel kernel) {
  return kernel == DecodeKernel::kTile ? decode::tile_shape(static_cast<int>(p.head_dim)).min_blocks
                                       : decode::kMinBlocks;
}

// Splits of the keys: split_size fixes the keys per split (the count covers the capacity; splits
// past a sequence's length write LSE -inf, which the combine skips); num_splits > 0 is the count.
// Auto: a split costs a pipeline fill, fp32 partials and the combine, so split only as far as the
// memory system needs CTAs. With ctas = batch x heads_kv x query-row chunks:
// - the tile kernel on a contiguous cache: one of its CTAs alone on an SM streams ~30 GB/s on the
//   H100, so ~100 CTAs saturate the DRAM. ctas <= SMs: floor(SMs / ctas) splits (one wave of one
//   CTA per SM); SMs < ctas <= resident slots (every CTA resident): none;
// - else (more CTAs than slots; a paged cache, 35-40 % slower at one CTA per SM with pages of 16
//   and of 256 keys alike, cause not profiled; the v5 kernel): the fewest splits whose CTAs fill
//   the resident slots' waves (slots = CTAs per SM x SMs) within 5 % of the best fill any count
//   reaches, a count n filling  ctas·n / (slots · ceil(ctas·n / slots)).
// Always at most 64 splits and at least 512 keys per split. Measured on the H100 (CUDA-graph
// replays, docs/perf.md, "Decode: the split rule, one CTA per SM"): B 1 GQA 32/8 at 128k 16 splits
// 2.83-2.88 TB/s (the fill rule's 32: 2.75), B 4 at 8k 4 (2.39-2.42; 8: 2.33), B 12 at 4k none
// (2.73; 4: 2.38), B 16 at 4k none (2.81; 2: 2.10-2.66); B 2 at 64k in pages of 16 keys needs the
// fill rule's 16 splits (2.57; 8: 1.71); B 40 at 4k (320 CTAs) the fill rule's 4 (3.81 on an H200;
// 1: 3.50). (Session 10's sweep, before the tile kernel lost 2/3 of its instructions, had found
// one CTA per SM 20 % slower.)
int regular_splits(const KvCacheParams& p, int sm_count, DecodeKernel kernel) {
  const int64_t cap = capacity(p);
  if (p.split_size > 0) {
    const int64_t n = (cap + p.split_size - 1) / p.split_size;
    return static_cast<int>(n < 1 ? 1 : n);
  }
  if (p.num_splits > 0) return p.num_splits;
  const int64_t ctas = p.batch * p.heads_kv * row_chunks(p, kernel, sm_count);
  const int64_t slots = int64_t(sm_count) * ctas_per_sm(p, kernel);
  if (ctas <= 0 || slots <= 0) return 1;
  int64_t n_max = (cap + 511) / 512;
  if (n_max > 64) n_max = 64;
  if (n_max < 1) n_max = 1;
  if (kernel == DecodeKernel::kTile && p.block_table == nullptr && ctas <= slots) {
    const int64_t n = ctas <= sm_count ? sm_count / ctas : 1;
    return static_cast<int>(n < n_max ? n : n_max);
  }
  auto fill = [&](int64_t n) {
    const int64_t c = ctas * n;
    return static_cast<double>(c) / static_cast<double>(slots * ((c + slots - 1) / slots));
  };
  double best = 0;
  for (int64_t n = 1; n <= n_max; ++n) best = fill(n) > best ? fill(n) : best;
  for (int64_t n = 1; n <= n_max; ++n)
    if (fill(n) >= best - 0.05) return static_cast<int>(n);
  return 1;
}

// StreamingLLM sink tokens take one more split, the last (decode_kernel.cuh, DecodeParams::sink_split),
// where a left window can hide them; without one every row's window starts at key 0 and the sinks
// change nothing. The splits above ignore it: it reads at most sink_tokens keys.
int sink_split(const KvCacheParams& p) { return sink_tokens_change_mask(p) ? 1 : 0; }
int num_splits(const KvCacheParams& p, int sm_count, DecodeKernel kernel) {
  return regular_splits(p, sm_count, kernel) + sink_split(p);
}

int64_t round256(int64_t bytes) { return (bytes + 255) / 256 * 256; }
// The split partials' bytes (o_partial, then lse_partial), the first sections of the workspace.
int64_t partial_bytes(const KvCacheParams& p, int splits) {
  if (splits <= 1) return 0;
  const int64_t rows = int64_t(splits) * p.batch * p.seqlen_q * p.heads_q;
  return round256(rows * p.head_dim * 4) + round256(rows * 4);
}
int64_t workspace_bytes(const KvCacheParams& p, int splits) { return partial_bytes(p, splits) + rotated_q_bytes(p); }

bool aligned16(const void* ptr, std::initializer_list<int64_t> strides, int64_t es) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return false;
  for (int64_t s : strides)
    if ((s * es) % 16 != 0) return false;
  return true;
}

// The head-dim bucket a call's kernels are instantiated for (kD: 64, 128 or 256).
int head_dim_bucket(int64_t head_dim) {
  return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256;
}

int tile_smem_bytes(const KvCacheParams& p, int sm_count) {
  const int rg = tile_row_groups(p, sm_count);
  auto bytes = [&](auto d) {  // d: std::integral_constant<int, head-dim bucket>
    constexpr int kD = decltype(d)::value;
    return static_cast<int>(rg == 2 ? sizeof(decode::TileSmem<kD, 2>) : sizeof(decode::TileSmem<kD, 1>));
  };
  switch (head_dim_bucket(p.head_dim)) {
    case 64:
      return bytes(std::integral_constant<int, 64>{});
    case 128:
      return bytes(std::integral_constant<int, 128>{});
    default:
      return static_cast<int>(sizeof(decode::TileSmem<256, 1>));
  }
}

// The kernel a call runs: the chosen one, except that the tile kernel needs its shared memory
// (sm_80 / sm_90 allow 163 / 227 KiB a block; sm_86 / sm_89 99 KiB, less than hdim 128 / 256's
// 103 / 105.5 KiB: those run v5).
DecodeKernel effective_kernel(const KvCacheParams& p, const common::DeviceFacts& facts) {
  const DecodeKernel k = decode_kernel();
  return k == DecodeKernel::kTile && tile_smem_bytes(p, facts.sm_count) > facts.smem_optin ? DecodeKernel::kV5 : k;
}

// How a call launches: the stream, the tile kernel's row groups, and programmatic
// dependent launch (common/launch.h; sm_90 and later): the decode kernel as the dependent of a fused
// append (its launch and prologue overlap the append), the combine as the decode kernel's.
struct Launch {
  cudaStream_t stream = nullptr;
  int row_groups = 1;
  bool pdl_decode = false, pdl_combine = false;
};

// One instantiation of the tile kernel: paged or contiguous, 1 or 2 row groups, and with the code of
// softcap, ALiBi, the fused append and the queries' rotation or (a plain call) without it.
template <typename T, int kD, bool kPaged, int kRowGroups, bool kFeatures>
Status launch_tile_kernel(const decode::DecodeParams& dp, dim3 grid, const Launch& l) {
  const int smem = static_cast<int>(sizeof(decode::TileSmem<kD, kRowGroups>));
  constexpr auto kernel = decode::decode_tile_kernel<T, kD, kPaged, kRowGroups, kFeatures>;
  FLASHLAB_RETURN_IF_ERROR((common::prepare_kernel<kernel>(smem, "cuda_sm80", "decode tile kernel", kD)));
  return common::cuda_error(common::launch_kernel(kernel, grid, dim3(decode::tile_shape(kD).warps * 32), smem,
                                                  l.stream, l.pdl_decode, dp),
                            "cuda", "decode kernel launch");
}
template <typename T, int kD, bool kPaged, int kRowGroups>
Status launch_tile(const decode::DecodeParams& dp, dim3 grid, const Launch& l) {
  return decode::plain_call(dp) ? launch_tile_kernel<T, kD, kPaged, kRowGroups, false>(dp, grid, l)
                                : launch_tile_kernel<T, kD, kPaged, kRowGroups, true>(dp, grid, l);
}

// The tile kernel's instantiation for this call: paged or not, l.row_groups (2 only at hdim <= 128,
// tile_row_groups' rule); any other count is an internal error rather than no launch at all.
template <typename T, int kD>
Status launch_tile_for(const decode::DecodeParams& dp, dim3 grid, const Launch& l) {
  const bool paged = dp.block_table != nullptr;
  if constexpr (kD <= 128) {
    if (l.row_groups == 2)
      return paged ? launch_tile<T, kD, true, 2>(dp, grid, l) : launch_tile<T, kD, false, 2>(dp, grid, l);
  }
  if (l.row_groups != 1)
    return Status(StatusCode::kInternal, "decode tile kernel: no instantiation with " +
                                             std::to_string(l.row_groups) + " row groups at head-dim bucket " +
                                             std::to_string(kD));
  return paged ? launch_tile<T, kD, true, 1>(dp, grid, l) : launch_tile<T, kD, false, 1>(dp, grid, l);
}

template <typename T, int kD>
Status launch(const decode::DecodeParams& dp, dim3 grid, DecodeKernel kernel, const Launch& l) {
  // Both launches report their own errors (cudaLaunchKernelEx's result).
  if (kernel == DecodeKernel::kTile) {
    FLASHLAB_RETURN_IF_ERROR((launch_tile_for<T, kD>(dp, grid, l)));
  } else {
    FLASHLAB_RETURN_IF_ERROR(common::cuda_error(
        common::launch_kernel(decode::decode_kernel<T, kD>, grid, dim3(decode::kThreads), 0, l.stream, l.pdl_decode, dp),
        "cuda", "decode kernel launch"));
  }
  if (dp.num_splits == 1) return Status::Ok();
  // The partials' layouts (decode_kernel.cuh, merge_and_store) as strides.
  const int64_t row = int64_t(dp.heads_q) * dp.head_dim;
  decode::CombineArgs a;
  a.num_splits = dp.num_splits;
  a.batch = dp.batch;
  a.seqlen_q = dp.seqlen_q;
  a.heads = dp.heads_q;
  a.head_dim = dp.head_dim;
  a.o_partial = dp.o_partial;
  a.o_row_stride = row;
  a.o_batch_stride = dp.seqlen_q * row;
  a.o_split_stride = dp.batch * a.o_batch_stride;
  a.o_head_stride = dp.head_dim;
  a.lse_partial = dp.lse_partial;
  a.l_head_stride = dp.seqlen_q;
  a.l_batch_stride = int64_t(dp.heads_q) * dp.seqlen_q;
  a.l_split_stride = dp.batch * a.l_batch_stride;
  a.out = dp.out;
  a.out_batch_stride = dp.o_batch_stride;
  a.out_row_stride = dp.o_row_stride;
  a.out_head_stride = dp.o_head_stride;
  a.lse = dp.lse;
  a.lse_batch_stride = dp.lse_batch_stride;
  a.lse_head_stride = dp.lse_head_stride;
  a.sink_logits = dp.sink_logits;
  return launch_combine(a, std::is_same<T, __half>::value ? DType::kFloat16 : DType::kBFloat16, l.stream,
                        l.pdl_combine);
}

template <typename T>
Status launch_dtype(const decode::DecodeParams& dp, dim3 grid, DecodeKernel kernel, const Launch& l) {
  switch (head_dim_bucket(dp.head_dim)) {
    case 64:
      return launch<T, 64>(dp, grid, kernel, l);
    case 128:
      return launch<T, 128>(dp, grid, kernel, l);
    default:
      return launch<T, 256>(dp, grid, kernel, l);
  }
}

DecodeKernel kernel_from_env() {
  const char* v = std::getenv("FLASHLAB_DECODE_KERNEL");
  return v != nullptr && std::strcmp(v, "v5") == 0 ? DecodeKernel::kV5 : DecodeKernel::kTile;
}
std::atomic<int>& kernel_choice() {
  static std::atomic<int> choice{static_cast<int>(kernel_from_env())};  // read once
  return choice;
}

// FLASHLAB_DECODE_PDL=0 (read once): ordinary launches instead of programmatic dependent ones for
// the decode kernel after a fused append and for the combine; an A/B knob. CUDA-graph replays on
// the H100 (docs/perf.md, session 25) showed the decode kernel of a fused step starting 1 µs after
// the append but running ~9 µs longer than alone (61.5 against 52 µs at 1k), also when it waited
// for the append only before its last tile: whether the dependent launch itself costs that is
// the open question this knob answers.
bool pdl_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("FLASHLAB_DECODE_PDL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

}  // namespace

DecodeKernel decode_kernel() {
  return static_cast<DecodeKernel>(kernel_choice().load(std::memory_order_relaxed));
}
void set_decode_kernel(DecodeKernel kernel) {
  kernel_choice().store(static_cast<int>(kernel), std::memory_order_relaxed);
}
const char* decode_kernel_name(DecodeKernel kernel) {
  return kernel == DecodeKernel::kTile ? "tile" : "v5";
}

Status cuda_kvcache_supports(const KvCacheParams& p, bool attend) {
  // The decode kernels are mma.sync (sm_80 and later) code; cuda_sm90 names the same path, as a
  // caller that picks an implementation per device would.
  if (p.impl != Impl::kAuto && p.impl != Impl::kCudaSm80 && p.impl != Impl::kCudaSm90)
    return Status::Unsupported(std::string("impl ") + to_string(p.impl) + " does not run " + kName +
                               ": use impl auto, cuda_sm80 or cuda_sm90 (the same kernels)");
  FLASHLAB_RETURN_IF_ERROR(append_supports(p, attend));
  if (!attend) {
    if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16 && p.dtype != DType::kFloat32)
      return Status::Unsupported(std::string("dtype ") + to_string(p.dtype) +
                                 " is not supported by the CUDA append: supported bf16, fp16, fp32");
    return Status::Ok();
  }
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16)
    return Status::Unsupported(std::string("dtype ") + to_string(p.dtype) + " is not supported by " + kName +
                               ": supported bf16, fp16");
  if (p.head_dim > 256 || p.head_dim % 8 != 0)
    return unsupported_value("head_dim", p.head_dim, kName, "multiples of 8 up to 256");
  const int64_t es = 2;
  // With rotary the kernels read q from the workspace copy (aligned), not from p.q.
  const bool q_ok = p.rotary_cos != nullptr || aligned16(p.q.ptr, {p.q.batch_stride, p.q.row_stride, p.q.head_stride}, es);
  if (!q_ok || !aligned16(p.out.ptr, {p.out.batch_stride, p.out.row_stride, p.out.head_stride}, es) ||
      !aligned16(p.k_cache.ptr, {p.k_cache.batch_stride, p.k_cache.row_stride, p.k_cache.head_stride}, es) ||
      !aligned16(p.v_cache.ptr, {p.v_cache.batch_stride, p.v_cache.row_stride, p.v_cache.head_stride}, es))
    return Status::Unsupported(std::string(kName) +
                               " needs 16-byte aligned q, out, k_cache, v_cache and strides that are multiples of 8 "
                               "elements");
  // The grid is one dimension (decode_kernel.cuh, cta_work); with splits, run() checks again. v5's
  // row chunks (4 rows) outnumber the tile kernel's (16).
  if (p.batch * p.heads_kv * row_chunks(p, DecodeKernel::kV5, 0) > INT32_MAX)
    return Status::Unsupported(std::string(kName) + ": batch x heads_kv x seqlen_q x group too large for its grid");
  return Status::Ok();
}

Status cuda_kvcache_workspace_size(const KvCacheParams& p, int64_t* bytes) {
  int device = 0;
  const common::DeviceFacts* facts = nullptr;
  FLASHLAB_RETURN_IF_ERROR(common::current_device(&device, &facts));
  // Either kernel's plan fits (the larger of the two): the choice may change between this call and
  // the attention call (set_decode_kernel).
  const int splits_v5 = num_splits(p, facts->sm_count, DecodeKernel::kV5);
  const int splits_tile = num_splits(p, facts->sm_count, DecodeKernel::kTile);
  *bytes = workspace_bytes(p, splits_v5 > splits_tile ? splits_v5 : splits_tile);
  return Status::Ok();
}

Status cuda_attention_with_kvcache(const KvCacheParams& p) {
  int device = 0;
  const common::DeviceFacts* facts = nullptr;
  FLASHLAB_RETURN_IF_ERROR(common::current_device(&device, &facts));
  if (facts->major < 8)
    return Status::Unsupported(std::string(kName) + " needs compute capability 8.0 or newer");
  const DecodeKernel kernel = effective_kernel(p, *facts);
  const int splits = num_splits(p, facts->sm_count, kernel);
  const int64_t ctas = int64_t(splits) * p.batch * p.heads_kv * row_chunks(p, kernel, facts->sm_count);
  if (ctas > INT32_MAX)
    return Status::Unsupported(std::string(kName) + ": " + std::to_string(splits) +
                               " splits x batch x heads_kv x query-row chunks exceed its grid (2^31 - 1 CTAs)");
  const int64_t need = workspace_bytes(p, splits);
  if (need > 0 && (p.workspace == nullptr || p.workspace_bytes < need))
    return Status::Invalid("workspace_bytes (" + std::to_string(p.workspace_bytes) + ") is too small for " + kName +
                           ": it needs " + std::to_string(need) + " bytes (kvcache_workspace_size() returns it)");
  if (need > 0 && reinterpret_cast<uintptr_t>(p.workspace) % 256 != 0)
    return Status::Invalid("workspace must be 256-byte aligned (cudaMalloc memory is)");

  // The fused append first (same stream: the decode kernel sees the new keys). With rotary the tile
  // kernel rotates the queries itself as it loads them, where q is 16-byte aligned (its loads), the
  // tables allow 8-element vectors (rotary_vec: rotary_dim a multiple of 16, tables 16-byte aligned)
  // and seqlen_q <= kStagedRows (it stages the tables' rows of the queries' positions in shared
  // memory: decode_tile_kernel.cuh, stage_tables); else (v5, or those not met) the append
  // writes them rotated to the workspace's last section and the decode kernel reads them there once
  // the append has completed.
  const int64_t es = 2;
  const bool tables_ok = p.rotary_cos == nullptr || decode::rotary_vec_ok(p, 8);
  const bool q_rotate = p.rotary_cos != nullptr && kernel == DecodeKernel::kTile && tables_ok &&
                        p.seqlen_q <= decode::kStagedRows &&
                        aligned16(p.q.ptr, {p.q.batch_stride, p.q.row_stride, p.q.head_stride}, es);
  void* q_rot = p.rotary_cos != nullptr && !q_rotate ? static_cast<char*>(p.workspace) + partial_bytes(p, splits)
                                                     : nullptr;
  // A decode step's few new keys (seqlen_new <= new_rows_cap: 16 at hdim <= 128 with one row group)
  // are appended by the tile kernel itself (decode_tile_kernel.cuh, stage_new_rows): one
  // launch, not the append kernel's and then this one's. Larger appends (chunked prefill) keep the
  // append kernel's parallelism.
  const bool append_in_kernel =
      kernel == DecodeKernel::kTile && p.k_new.ptr != nullptr &&
      p.seqlen_new <=
          decode::new_rows_cap(head_dim_bucket(p.head_dim), tile_row_groups(p, facts->sm_count)) &&
      q_rot == nullptr && tables_ok &&
      aligned16(p.k_new.ptr, {p.k_new.batch_stride, p.k_new.row_stride, p.k_new.head_stride}, es) &&
      aligned16(p.v_new.ptr, {p.v_new.batch_stride, p.v_new.row_stride, p.v_new.head_stride}, es);
  bool appended = false;  // an append kernel was launched (the decode kernel is then its dependent)
  if ((p.k_new.ptr != nullptr && !append_in_kernel) || q_rot != nullptr)
    FLASHLAB_RETURN_IF_ERROR(launch_append(p, q_rot, &appended));

  decode::DecodeParams dp;
  dp.q = q_rot != nullptr ? q_rot : p.q.ptr;
  dp.q_head_stride = q_rot != nullptr ? p.head_dim : p.q.head_stride;
  dp.q_row_stride = q_rot != nullptr ? p.heads_q * p.head_dim : p.q.row_stride;
  dp.q_batch_stride = q_rot != nullptr ? p.seqlen_q * p.heads_q * p.head_dim : p.q.batch_stride;
  dp.out = p.out.ptr;
  dp.o_batch_stride = p.out.batch_stride;
  dp.o_row_stride = p.out.row_stride;
  dp.o_head_stride = p.out.head_stride;
  dp.lse = p.lse;
  dp.lse_batch_stride = p.lse_batch_stride;
  dp.lse_head_stride = p.lse_head_stride;
  dp.k = p.k_cache.ptr;
  dp.v = p.v_cache.ptr;
  dp.k_batch_stride = p.k_cache.batch_stride;
  dp.k_row_stride = p.k_cache.row_stride;
  dp.k_head_stride = p.k_cache.head_stride;
  dp.v_batch_stride = p.v_cache.batch_stride;
  dp.v_row_stride = p.v_cache.row_stride;
  dp.v_head_stride = p.v_cache.head_stride;
  dp.block_table = p.block_table;
  dp.block_table_stride = p.block_table_batch_stride ? p.block_table_batch_stride : p.max_pages;
  dp.page_size = p.block_table != nullptr ? static_cast<int>(p.page_size) : 1;
  // Every slot a kernel reads is < cache_seqlens + seqlen_new <= capacity + seqlen_new (the append's
  // rule, append_kernel.cuh): below 2^31 the page division is FastDiv's multiply-high.
  dp.page_fast = p.block_table != nullptr && capacity(p) + p.seqlen_new <= INT32_MAX;
  dp.page_div = common::FastDiv(dp.page_fast ? dp.page_size : 1);
  dp.cache_batch_idx = p.cache_batch_idx;
  dp.cache_seqlens = p.cache_seqlens;
  dp.cache_leftpad = p.cache_leftpad;
  dp.seqlen_new = static_cast<int>(p.seqlen_new);
  dp.guard = appended || q_rotate || append_in_kernel;  // the append's rule holds for the rotation alone too
  dp.append_in_kernel = append_in_kernel;
  if (append_in_kernel) decode::set_new_rows(&dp, p);
  dp.capacity = capacity(p);
  decode::set_rotary(&dp, p, 8);  // the tile kernel rotates 8-element vectors (q_rotate, rotate_new_keys)
  dp.q_rotate = q_rotate;
  dp.wait_first = q_rot != nullptr || p.cache_batch_idx != nullptr;
  dp.sink_logits = p.sink_logits;
  dp.batch = static_cast<int>(p.batch);
  dp.seqlen_q = static_cast<int>(p.seqlen_q);
  dp.heads_q = static_cast<int>(p.heads_q);
  dp.heads_kv = static_cast<int>(p.heads_kv);
  dp.group = static_cast<int>(p.heads_q / p.heads_kv);
  dp.head_dim = static_cast<int>(p.head_dim);
  dp.rows = dp.seqlen_q * dp.group;
  dp.scale = p.softmax_scale;
  dp.softcap = p.softcap;
  dp.alibi_slopes = p.alibi_slopes;
  dp.alibi_batch_stride = p.alibi_batch_stride;
  AttentionConfig c = p;
  c.causal_align = CausalAlign::kBottomRight;
  const RowMask m = make_row_mask(c, p.seqlen_q, 0);  // left / right with causal folded in
  dp.window_left = m.left;
  dp.window_right = m.right;
  dp.num_splits = splits;
  dp.split_size = p.split_size;
  dp.sink_tokens = p.sink_tokens;
  dp.sink_split = sink_split(p);
  if (splits > 1) {
    const int64_t rows = int64_t(splits) * p.batch * p.seqlen_q * p.heads_q;
    dp.o_partial = static_cast<float*>(p.workspace);
    dp.lse_partial = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + round256(rows * p.head_dim * 4));
  }
  if (p.batch == 0 || p.seqlen_q == 0 || p.heads_q == 0) return Status::Ok();
  const dim3 grid(static_cast<unsigned>(ctas));  // cta_work (decode_kernel.cuh) unflattens it
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  Launch l;
  l.stream = stream;
  l.row_groups = kernel == DecodeKernel::kTile ? tile_row_groups(p, facts->sm_count) : 1;
  l.pdl_decode = appended && facts->major >= 9 && pdl_enabled();
  l.pdl_combine = facts->major >= 9 && pdl_enabled();
  if (!appended) timeline_before(stream);  // nothing unless FLASHLAB_DECODE_TIMELINE
  const Status st = p.dtype == DType::kBFloat16 ? launch_dtype<__nv_bfloat16>(dp, grid, kernel, l)
                                                : launch_dtype<__half>(dp, grid, kernel, l);
  timeline_after(stream, grid.x);
  return st;
}

}  // namespace detail
}  // namespace flashlab
