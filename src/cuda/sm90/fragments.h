// src/cuda/sm90/fragments.h — views of the wgmma register fragments, and one wgmma batch.
//
// The m64nNk16 accumulator of a warpgroup gives thread t of warp w rows 16w + t/4 and 16w + t/4 + 8
// of the 64, columns 2(t%4) + {0, 1} + 8j for j < N/8: the m16n8 accumulator's assignment repeated
// N/8 times. CuTe's fragment is ((2, 2, N/8), MMA_M, MMA_N), mode 0 = (column pair, row half, n8
// tile). So the quad reductions (common/math.h), ScoreVariant and Dropout work unchanged on the
// (row, col) view below.
#pragma once

#include <cute/tensor.hpp>

#include <cutlass/array.h>
#include <cutlass/numeric_conversion.h>

namespace flashlab {
namespace sm90 {

using namespace cute;

// ((2, 2, N/8), MMA_M, MMA_N) -> ((2, MMA_M), (2, (N/8, MMA_N))): rows, then columns as
// (column pair, n8 tiles), the shape common::Dropout::keep_bits and ScoreVariant expect.
template <class AccLayout>
CUTE_HOST_DEVICE constexpr auto rowcol_layout(AccLayout const& acc) {
  static_assert(decltype(rank(acc))::value == 3 && decltype(rank<0>(acc))::value == 3,
                "expects a wgmma accumulator ((2, 2, N/8), MMA_M, MMA_N)");
  return make_layout(make_layout(get<0, 1>(acc), get<1>(acc)),
                     make_layout(get<0, 0>(acc), make_layout(get<0, 2>(acc), get<2>(acc))));
}
template <typename TensorT>
CUTE_DEVICE auto rowcol_view(TensorT&& t) {
  return make_tensor(t.data(), rowcol_layout(t.layout()));
}

// The same registers as the A operand of an RS wgmma: pairs of n8 column tiles are one k16 slice,
// ((2, 2, N/8), MMA_M, MMA_N) -> ((2, 2, 2), MMA_M, N/16 · MMA_N). No data moves: P never leaves
// the registers between the softmax and P·V.
template <class AccLayout>
CUTE_HOST_DEVICE constexpr auto acc_as_a_operand(AccLayout const& acc) {
  auto values = get<0>(acc);                                                    // (2, 2, N/8)
  auto octets = logical_divide(get<2>(values), _2{});                           // (2, N/16)
  auto a_values = make_layout(get<0>(values), get<1>(values), get<0>(octets));  // (2, 2, 2)
  auto a_k = coalesce(make_layout(get<1>(octets), get<2>(acc)));                // (N/16 · MMA_N)
  return make_layout(a_values, get<1>(acc), a_k);
}

// fp32 fragment -> `out` (16-bit, same layout), two values per cvt.
template <typename EngineIn, typename LayoutIn, typename EngineOut, typename LayoutOut>
CUTE_DEVICE void convert_into(Tensor<EngineIn, LayoutIn> const& in, Tensor<EngineOut, LayoutOut>& out) {
  using From = typename EngineIn::value_type;
  using To = typename EngineOut::value_type;
  constexpr int kN = decltype(size(in))::value;
  static_assert(decltype(size(out))::value == kN, "same number of values");
  cutlass::NumericArrayConverter<To, From, kN> convert;
  *reinterpret_cast<cutlass::Array<To, kN>*>(out.data()) =
      convert(*reinterpret_cast<cutlass::Array<From, kN> const*>(in.data()));
}

// C (+)= A·B over the K mode as one wgmma batch, issued and committed but not waited for (the
// caller's warpgroup_wait<N> retires it). kZeroInit: C = A·B (the first k-step overwrites C).
// kARegisters must be said: cute::is_rmem is also true of a tensor of GMMA smem descriptors.
// Between the arrive and the wait nothing may touch C or a register A: ptxas would serialize the
// batch (C7510-C7519, which the build's ptxas gate turns into an error).
template <bool kZeroInit, bool kARegisters, class TiledMma, class TA, class TB, class TC>
CUTE_DEVICE void gemm_issue(TiledMma& mma, TA const& a, TB const& b, TC& c) {
  if constexpr (kARegisters) warpgroup_fence_operand(const_cast<TA&>(a));
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  mma.accumulate_ = kZeroInit ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
  CUTE_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    cute::gemm(mma, a(_, _, k), b(_, _, k), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(c);
  if constexpr (kARegisters) warpgroup_fence_operand(const_cast<TA&>(a));
}

}  // namespace sm90
}  // namespace flashlab
