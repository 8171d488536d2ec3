// src/cuda/sm90/fwd_launch.h — from FwdArguments to a Hopper forward launch on the caller's stream.
//
// run_fwd<dtype, head_dim>() is what the generated instantiations compile: the tile of
// tile_size.h, the kernel from its pieces (flash_fwd_kernel.h), the TMA descriptors built on the
// host (three cuTensorMapEncodeTiled calls inside make_tma_copy), then the launch. No host
// synchronization, no allocation. Dropout and varlen never reach it (api_sm90.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda/common/block_range.h"
#include "cuda/common/kernel_args.h"
#include "cuda/common/launch.h"
#include "cuda/common/tile_scheduler.h"
#include "cuda/common/variant.h"
#include "cuda/sm90/epilogue_fwd.h"
#include "cuda/sm90/flash_fwd_kernel.h"
#include "cuda/sm90/kernel_traits.h"
#include "cuda/sm90/mainloop_fwd.h"
#include "cuda/sm90/tile_size.h"

namespace flashlab {
namespace sm90 {

constexpr const char* kImplName = "cuda_sm90";

// kSinks: compiled for StreamingLLM sink tokens (common::ScoreVariant's kSinks; run_fwd launches
// it when they change the mask). kScoreMods = false: without the code of softcap and ALiBi
// (ScoreVariant::score_mods; launch_tile picks it for the calls without them).
template <typename Traits, typename StagesT = AllStages, bool kSinks = false, bool kScoreMods = true>
using FwdKernel =
    FlashFwdKernel<MainloopFwd<Traits>, EpilogueFwd<Traits>, common::PersistentFwdTileScheduler,
                   common::ScoreVariant<Traits::kBlockM, Traits::kBlockN, kSinks, kScoreMods>, StagesT>;

// How a launch hands out its tiles (tile_size.h has the rules and their measurements): the grid's
// CTAs at most, and whether they take tiles from the dynamic scheduler's counter (then one CTA per
// SM). Static: persistent CTAs, one per SM, each running tiles in waves
// (common::PersistentFwdTileScheduler), or one CTA per tile (INT32_MAX).
// FLASHLAB_SM90_FWD_CTAS=N caps the grid at N CTAs instead (A/B measurements; the tests force
// several tiles per CTA on small shapes with it); FLASHLAB_SM90_FWD_DYNAMIC (tile_size.h
// fwd_counts_tiles) turns the dynamic scheduler off or on. Read at each launch (getenv: well under
// a microsecond, beside a launch's several).
struct FwdSchedule {
  int max_ctas;
  bool dynamic;
};
inline FwdSchedule fwd_schedule(const common::FwdArguments& args, int block_m, int block_n, int head_dim,
                                int sm_count, bool dynamic_capable) {
  const bool dynamic =
      dynamic_capable && args.tile_counter != nullptr && fwd_counts_tiles(args, head_dim, block_m, block_n, sm_count);
  const char* forced = std::getenv("FLASHLAB_SM90_FWD_CTAS");
  if (forced != nullptr && *forced != '\0') {
    const long long n = std::strtoll(forced, nullptr, 10);
    if (n > 0) return {n < INT32_MAX ? static_cast<int>(n) : INT32_MAX, dynamic};
  }
  if (dynamic) return {sm_count, true};
  const FwdWorkShape w = fwd_work_shape(args);
  const FwdTileCounts n = fwd_tile_counts(args.seq, block_m, block_n);
  const bool persistent =
      fwd_persistent(w.same_work, w.fixed && w.no_left, args.seq.seqlen_k, n.key_blocks, n.tiles, head_dim, sm_count);
  return {persistent ? sm_count : INT32_MAX, false};
}

template <typename Kernel>
Status launch_fwd(const common::FwdArguments& args, cudaStream_t stream) {
  constexpr int kSmem = Kernel::kSharedStorageBytes;
  static_assert(kSmem <= 227 * 1024, "tile_size.h promises <= 227 KiB of shared memory (H100 / H200)");
  // No query rows: nothing to launch, and TMA descriptors of empty tensors would be refused.
  if (args.seq.batch == 0 || args.seq.heads_q == 0 || args.seq.seqlen_q == 0) return Status::Ok();
  if (args.seq.cu_seqlens_q != nullptr && !Kernel::kVarlenCapable)  // run_fwd never picks it
    return Status(StatusCode::kInternal, "impl cuda_sm90: a varlen call on a tile of three consumer warpgroups");
  typename Kernel::Params params = Kernel::to_params(args);
  int device = 0;
  const common::DeviceFacts* facts = nullptr;
  FLASHLAB_RETURN_IF_ERROR(common::current_device(&device, &facts));
  const FwdSchedule schedule = fwd_schedule(args, Kernel::kBlockM, Kernel::kBlockN, Kernel::kHeadDim,
                                            facts->sm_count, Kernel::kDynamicCapable);
  const dim3 grid = Kernel::grid(params, schedule.max_ctas);
  FLASHLAB_RETURN_IF_ERROR(
      common::prepare_kernel<&device_kernel<Kernel>>(kSmem, kImplName, "forward", Kernel::kHeadDim));
  if (schedule.dynamic) {
    params.scheduler.counter = args.tile_counter;
    params.scheduler.group = fwd_l2_group(args, Kernel::kHeadDim, int(sizeof(typename Kernel::Element)));
    FLASHLAB_RETURN_IF_ERROR(common::cuda_error(cudaMemsetAsync(args.tile_counter, 0, sizeof(int), stream),
                                                kImplName, "forward tile counter"));
  }
  device_kernel<Kernel><<<grid, Kernel::kThreads, kSmem, stream>>>(params);
  return common::cuda_error(cudaGetLastError(), kImplName, "forward kernel launch");
}

// A tile's two kernels: the one without softcap and ALiBi code for the calls without them (3 %
// faster at head dims 64 and 128 up to 2k, H200, session 38: docs/perf.md), else the general one.
// Where the plain kernel spilled (tile_size.h fwd_has_plain_kernel: nvcc 13.0) the general one
// runs every call.
template <typename Traits>
Status launch_tile(const common::FwdArguments& args, cudaStream_t s) {
  if constexpr (fwd_has_plain_kernel(Traits::kHeadDim, {Traits::kBlockM, Traits::kBlockN, Traits::kStages})) {
    using Plain = FwdKernel<Traits, AllStages, false, false>;
    if (!Plain::Variant::score_mods(args.score)) return launch_fwd<Plain>(args, s);
  }
  return launch_fwd<FwdKernel<Traits>>(args, s);
}

// The products a tile shape computes for this call: the sum over query tiles of kBlockM x the key
// blocks the tile visits (common::KeyBlockRange, the kernel's own rule), so a causal diagonal or a
// ragged last tile counts what it wastes. Host only, over at most kShortSeqlen / kBlockM tiles.
template <int kBlockM, int kBlockN>
int64_t fwd_tile_work(const common::FwdArguments& args) {
  common::WorkTile t;
  t.q_len = args.seq.seqlen_q;
  t.k_len = args.seq.seqlen_k;
  int64_t blocks = 0;
  for (t.m_block = 0; int64_t(t.m_block) * kBlockM < t.q_len; ++t.m_block) {
    const common::KeyBlockRange<kBlockM, kBlockN> range(args.score, t);
    if (!range.empty()) blocks += range.n_max - range.n_min;
  }
  return blocks * kBlockM;
}

// FLASHLAB_SM90_FWD_TILE=MxN (e.g. 128x176) forces the tile of that shape where the head dim's
// bucket compiles it (tile_size.h: the default, short and long tiles), for A/B measurements and
// tests; a shape the bucket lacks: the default tile; unset or empty: the rules below. Read once per
// launch: true when set, with the shape in *tile ({0, 0, 0}, which matches no tile, if it is not MxN).
inline bool forced_fwd_tile(FwdTileSize* tile) {
  const char* forced = std::getenv("FLASHLAB_SM90_FWD_TILE");
  if (forced == nullptr || *forced == '\0') return false;
  int m = 0, n = 0, end = 0;
  *tile = std::sscanf(forced, "%dx%d%n", &m, &n, &end) == 2 && forced[end] == '\0' ? FwdTileSize{m, n, 0}
                                                                                      : FwdTileSize{0, 0, 0};
  return true;
}
constexpr bool same_shape(FwdTileSize a, FwdTileSize b) { return a.block_m == b.block_m && a.block_n == b.block_n; }

// Head dims with a second, narrower tile (tile_size.h fwd_short_tile_size): the narrow one when it
// computes enough fewer products to beat the wide tile's better efficiency, on short query
// sequences (causal 512: 1,280 rows x blocks at 128 x 128 against 1,728 at 192 x 128).
template <typename Wide, typename Narrow>
bool use_short_tile(const common::FwdArguments& args) {
  if (args.seq.seqlen_q > kShortSeqlen) return false;
  const int64_t wide = fwd_tile_work<Wide::kBlockM, Wide::kBlockN>(args);
  const int64_t narrow = fwd_tile_work<Narrow::kBlockM, Narrow::kBlockN>(args);
  return narrow * 100 < wide * kShortTileEfficiencyPct;
}

// Head dims with a wider key block for long key sequences (tile_size.h fwd_long_tile_size): any
// mask but a sliding window's left edge.
inline bool use_long_tile(const common::FwdArguments& args) {
  return args.score.window_left < 0 && args.seq.seqlen_k >= kLongTileMinSeqlenK;
}

template <DType kDType, int kHeadDim>
Status run_fwd(const common::FwdArguments& args, void* stream) {
  using Element = typename common::ElementOf<kDType>::type;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  constexpr FwdTileSize kTile = fwd_tile_size(kHeadDim);
  using Traits = FwdTraits<kHeadDim, kTile.block_m, kTile.block_n, kTile.stages, Element>;
#if defined(FLASHLAB_SM90_ABLATION)
  // The stage table of docs/perf.md: a build with -DFLASHLAB_SM90_ABLATION picks FlashAttention-3's
  // techniques at run time from FLASHLAB_SM90_STAGES (serial | pingpong | overlap | all), on the
  // default tile. Never in a normal build: each variant is one more kernel per instantiation.
  const char* stages = std::getenv("FLASHLAB_SM90_STAGES");
  if (stages != nullptr && std::strcmp(stages, "serial") == 0)
    return launch_fwd<FwdKernel<Traits, Stages<true, false, false>>>(args, s);
  if (stages != nullptr && std::strcmp(stages, "pingpong") == 0)
    return launch_fwd<FwdKernel<Traits, Stages<true, true, false>>>(args, s);
  if (stages != nullptr && std::strcmp(stages, "overlap") == 0)
    return launch_fwd<FwdKernel<Traits, Stages<true, false, true>>>(args, s);
#endif
  // StreamingLLM sink tokens change the mask only beside a left window (mask.h, sink_keys): then
  // the kSinks kernel on its own tile (tile_size.h fwd_sinks_tile_size); FLASHLAB_SM90_FWD_TILE
  // does not apply. Without a left window the call is the same as without sink tokens.
  if (sink_tokens_change_mask(args.score)) {
    if constexpr (kHeadDim > kMaxSinkTokensHeadDim) {  // sm90_supports refused the call
      return Status(StatusCode::kInternal, "impl cuda_sm90: sink tokens above head dim 192");
    } else {
      constexpr FwdTileSize kSinkTile = fwd_sinks_tile_size(kHeadDim);
      using SinkTraits = FwdTraits<kHeadDim, kSinkTile.block_m, kSinkTile.block_n, kSinkTile.stages, Element>;
      static_assert(FwdKernel<SinkTraits>::kVarlenCapable, "the sink-token tile takes varlen too");
      return launch_fwd<FwdKernel<SinkTraits, AllStages, true>>(args, s);
    }
  }
  FwdTileSize want{};
  const bool forced = forced_fwd_tile(&want);
  // Varlen runs on two consumer warpgroups (FlashFwdKernel::kVarlenCapable): where the default
  // tile has three (hdim 64's 192 x 128), the short tile (128 x 128), whatever is forced.
  constexpr bool kDefaultTakesVarlen = FwdKernel<Traits>::kVarlenCapable;
  const bool varlen_elsewhere = !kDefaultTakesVarlen && args.seq.cu_seqlens_q != nullptr;
  if (forced && same_shape(want, kTile) && !varlen_elsewhere) return launch_tile<Traits>(args, s);
  if constexpr (fwd_short_tile_size(kHeadDim).block_m != 0) {
    constexpr FwdTileSize kShort = fwd_short_tile_size(kHeadDim);
    using ShortTraits = FwdTraits<kHeadDim, kShort.block_m, kShort.block_n, kShort.stages, Element>;
    static_assert(kDefaultTakesVarlen || FwdKernel<ShortTraits>::kVarlenCapable, "varlen needs a tile to run on");
    if (varlen_elsewhere || (forced ? same_shape(want, kShort) : use_short_tile<Traits, ShortTraits>(args)))
      return launch_tile<ShortTraits>(args, s);
  } else {
    static_assert(kDefaultTakesVarlen, "varlen needs a tile to run on");
  }
  if constexpr (fwd_long_tile_size(kHeadDim).block_m != 0) {
    constexpr FwdTileSize kLong = fwd_long_tile_size(kHeadDim);
    using LongTraits = FwdTraits<kHeadDim, kLong.block_m, kLong.block_n, kLong.stages, Element>;
    if (forced ? same_shape(want, kLong) : use_long_tile(args)) return launch_tile<LongTraits>(args, s);
  }
  return launch_tile<Traits>(args, s);
}

}  // namespace sm90
}  // namespace flashlab
