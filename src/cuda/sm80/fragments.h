// src/cuda/sm80/fragments.h — views and conversions of the MMA register fragments.
//
// The m16n8k16 accumulator of one thread holds, per 16x8 tile, values v0 v1 on row g and v2 v3 on
// row g + 8, columns 2t and 2t + 1 (g = lane / 4, t = lane % 4). CuTe gives the fragment of a
// (BLK_M, BLK_N) tile the shape ((2, 2), MMA_M, MMA_N) with mode 0 = (column pair, row half).
// The softmax wants (row, column) indexing; P·V wants the same numbers as an A operand.
#pragma once

#include <cute/tensor.hpp>

#include <cutlass/array.h>
#include <cutlass/numeric_conversion.h>

#include "cuda/common/math.h"

namespace flashlab {
namespace sm80 {

using namespace cute;
// The architecture-neutral pieces (src/cuda/common/) are used unqualified in sm80's code.
using namespace common;

// ((2, 2), MMA_M, MMA_N) -> ((2, MMA_M), (2, MMA_N)): mode 0 indexes the thread's rows, mode 1 its
// columns, so row reductions are loops over mode 1.
template <typename Layout>
__device__ __forceinline__ constexpr auto rowcol_layout(Layout const& acc) {
  static_assert(decltype(rank(acc))::value == 3, "expects an MMA accumulator ((2,2), MMA_M, MMA_N)");
  static_assert(decltype(rank<0>(acc))::value == 2 && decltype(size<0>(acc))::value == 4,
                "expects the SM80 16x8 accumulator value layout (column pair, row half)");
  return make_layout(make_layout(get<0, 1>(acc), get<1>(acc)), make_layout(get<0, 0>(acc), get<2>(acc)));
}

// A view of an accumulator (or of anything laid out like one) with (row, col) indexing.
template <typename TensorT>
__device__ __forceinline__ auto rowcol_view(TensorT&& t) {
  return make_tensor(t.data(), rowcol_layout(t.layout()));
}

// ((2, 2), MMA_M, MMA_N) accumulator -> ((2, 2, 2), MMA_M, MMA_N / 2) A operand of m16n8k16.
// The A fragment of a 16x16 k-step is (column pair, row half, column half): two neighbouring
// n8 accumulator tiles are exactly one k16 A tile, so P never leaves the registers.
template <typename Layout>
__device__ __forceinline__ constexpr auto acc_to_a_layout(Layout const& acc) {
  static_assert(decltype(size<2>(acc))::value % 2 == 0,
                "P·V needs an even number of n8 tiles (BLK_N % 16 == 0)");
  auto split = logical_divide(acc, Shape<Underscore, Underscore, _2>{});  // ((2, 2), MMA_M, (2, MMA_N / 2))
  return make_layout(make_layout(get<0>(split), get<2, 0>(split)), get<1>(split), get<2, 1>(split));
}

// fp32 fragment -> a new register fragment of `To` with the same layout (packed cvt, 2 per op).
template <typename To, typename Engine, typename Layout>
__device__ __forceinline__ auto convert_fragment(Tensor<Engine, Layout> const& t) {
  using From = typename Engine::value_type;
  constexpr int kN = decltype(size(t))::value;
  static_assert(decltype(cosize(t.layout()))::value == kN, "expects a compact register fragment");
  Tensor out = make_tensor<To>(t.layout());
  cutlass::NumericArrayConverter<To, From, kN> convert;
  *reinterpret_cast<cutlass::Array<To, kN>*>(out.data()) =
      convert(*reinterpret_cast<cutlass::Array<From, kN> const*>(t.data()));
  return out;
}

}  // namespace sm80
}  // namespace flashlab
