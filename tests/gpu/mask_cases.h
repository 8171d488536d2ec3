// tests/gpu/mask_cases.h — the mask configurations the block-skipping tests share
// (test_sm80_mask.cu for the forward's KeyBlockRange, test_sm80_bwd_mask.cu for the backward's
// QueryBlockRange): a case, the config and row mask every backend derives from it, the ScoreArgs
// common/kernel_args.cpp builds from it, and the hand-picked cases both tests check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/common/kernel_args.h"
#include "flashlab/mask.h"
#include "flashlab/params.h"

namespace flashlab {
namespace sm80_test {

struct MaskCase {
  int q_len, k_len;
  bool causal, bottom_right;
  int64_t left, right;
  int64_t sink = 0;  // StreamingLLM sink tokens (cuda_sm80's kSinks kernels)
  std::string describe() const {
    return "sq " + std::to_string(q_len) + " sk " + std::to_string(k_len) + (causal ? " causal" : "") +
           (bottom_right ? " br" : " tl") + " window " + std::to_string(left) + "," + std::to_string(right) +
           (sink > 0 ? " sink " + std::to_string(sink) : "");
  }
};

inline AttentionConfig mask_config(const MaskCase& c) {
  AttentionConfig cfg;
  cfg.causal = c.causal;
  cfg.causal_align = c.bottom_right ? CausalAlign::kBottomRight : CausalAlign::kTopLeft;
  cfg.window_left = c.left;
  cfg.window_right = c.right;
  cfg.sink_tokens = c.sink;
  return cfg;
}

// The reference mask: what flashlab::key_visible() is checked against.
inline RowMask reference_mask(const MaskCase& c) {
  return make_row_mask(mask_config(c), c.q_len, c.k_len);
}

// ScoreArgs as common/kernel_args.cpp builds them (through make_row_mask, so causal becomes right = 0).
inline common::ScoreArgs score_params(const MaskCase& c) {
  const RowMask rm = reference_mask(c);
  common::ScoreArgs p;
  p.bottom_right = c.bottom_right;
  p.window_left = rm.left;
  p.window_right = rm.right;
  p.sink_tokens = static_cast<int32_t>(rm.sink);
  return p;
}

// Both alignments, seqlen_q > seqlen_k and < (rows that see nothing), windows on either side,
// empty sequences; sink tokens inside one block, across blocks, past the window's edge.
inline const std::vector<MaskCase>& handpicked_mask_cases() {
  static const std::vector<MaskCase> cases = {
      {1, 1, false, true, -1, -1},     {1, 300, true, false, -1, -1},  {300, 1, true, true, -1, -1},
      {300, 1, true, false, -1, -1},   {203, 113, true, true, -1, -1}, {113, 203, true, true, -1, -1},
      {113, 203, true, false, -1, -1}, {256, 256, true, true, -1, -1}, {1023, 1023, false, true, 64, 0},
      {500, 700, false, true, 0, 0},   {700, 500, false, false, 5, 7}, {129, 1000, false, true, -1, 100},
      {0, 10, true, true, -1, -1},     {10, 0, false, true, -1, -1},   {64, 64, true, true, 0, -1},
      {203, 113, true, true, 8, -1, 4},   {113, 203, true, false, 3, -1, 70}, {1023, 1023, false, true, 64, 0, 200},
      {500, 700, false, true, 0, 0, 1},   {129, 1000, false, true, 16, 100, 65}, {300, 300, true, true, 0, -1, 300},
  };
  return cases;
}

}  // namespace sm80_test
}  // namespace flashlab
