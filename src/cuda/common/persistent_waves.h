// src/cuda/common/persistent_waves.h — the Hopper forward's tile orders and its persistent CTAs'
// wave rule (common::PersistentFwdTileScheduler), host and device: tests/test_persistent_waves.cpp
// checks them on the CPU (every tile once, one per CTA per wave, causal tiles balanced, the
// dynamic order longest first within its L2 groups).
#pragma once

#include <cstdint>

#include "flashlab/config.h"  // FLASHLAB_HD

namespace flashlab {
namespace common {

// The tile that CTA `cta` of `ctas` takes in wave k: k * ctas + (cta + k) mod ctas. The waves are
// consecutive runs of `ctas` tiles; the rotation by k moves each CTA to a different query block
// from wave to wave (else, with ctas a multiple of the query blocks per head, a CTA would get the
// same one, and the same causal cost, in every wave). In the last wave it may exceed the tile count.
FLASHLAB_HD int64_t wave_tile(int k, int cta, int ctas) { return int64_t(k) * ctas + (cta + k) % ctas; }

// Tiles are numbered query block fastest, each head's last query block first: tile t is query
// block m_blocks - 1 - t mod m_blocks of (head, sequence) bh = t / m_blocks. The remainder comes
// from the quotient (one division): computed apart, the hdim-64 192 x 128 forward spilled 20 bytes.
struct WaveTileCoords {
  int bh;       // (head, sequence) index: head fastest
  int m_block;  // query block
};
FLASHLAB_HD WaveTileCoords wave_tile_coords(int t, int m_blocks) {
  const int bh = t / m_blocks;
  return {bh, m_blocks - 1 - (t - bh * m_blocks)};
}

// The dynamic scheduler's order (CTAs take the next tile from a counter: fwd_launch.h). The
// (head, sequence) pairs go in groups of `group` whose K and V fit in L2 together; inside a group
// the tiles go longest first: the last query block of each of its pairs, then the next-to-last,
// and so on; the groups follow one another. Longest first is what lets the counter balance causal
// tiles (the last tiles handed out are the shortest); the groups keep the tiles that run together
// on a few heads' K and V, as wave_tile_coords' order does. The last group holds the remaining
// bh_count mod group pairs (or group). group = 1 is wave_tile_coords' order.
FLASHLAB_HD WaveTileCoords grouped_tile_coords(int t, int m_blocks, int group, int bh_count) {
  const int per_group = group * m_blocks;  // <= the tile count (group <= bh_count): an int
  const int g = t / per_group;
  const int first = g * group;
  const int size = bh_count - first < group ? bh_count - first : group;
  const int r = t - g * per_group;
  const int m_rev = r / size;
  return {first + (r - m_rev * size), m_blocks - 1 - m_rev};
}

}  // namespace common
}  // namespace flashlab
