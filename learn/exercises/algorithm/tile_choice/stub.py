"""Exercise algorithm/tile_choice — which tile shape computes fewer products for this call.

A kernel computes whole tiles: a query tile of Br rows times every key block of Bc keys it visits
(algorithm/block_skipping: the blocks that hold a key some row of the tile sees), even where rows
lie past seqlen_q (the last tile's padding) or the mask hides part of a block (the causal diagonal).
Its work is therefore

  products(Br, Bc) = sum over query tiles b of Br x (key blocks tile b visits)

(in "rows x key blocks"; multiply by Bc x head_dim x 4 for FLOPs). cuda_sm90's hdim-64 forward has
two tiles, 192 x 128 (faster per product: at 16k it ran 531 TFLOP/s against 456 for 128 x 128, a
ratio of 0.86) and 128 x 128. Before each short call it counts both and takes the narrow one when

  products(narrow) < efficiency x products(wide)          (efficiency = 0.86)

(src/cuda/sm90/fwd_launch.h use_short_tile; docs/learn/05-hopper.md section 8b). Masks: bottom-right
causal (if causal), no window. seqlen_q, seqlen_k >= 1.

1. products(seqlen_q, seqlen_k, causal, block_m, block_n) -> int.
2. choose(seqlen_q, seqlen_k, causal, wide, narrow, efficiency) -> "wide" or "narrow"
   (wide and narrow are (block_m, block_n) pairs).
Worked example: causal, seqlen 512: 1,280 at 128 x 128, 1,728 at 192 x 128 -> "narrow".
"""


def products(seqlen_q, seqlen_k, causal, block_m, block_n):
    raise NotImplementedError


def choose(seqlen_q, seqlen_k, causal, wide, narrow, efficiency):
    raise NotImplementedError
