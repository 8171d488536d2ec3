#!/usr/bin/env python3
"""tools/tile_schedule_model.py — a model of how the Hopper forward's tile schedules balance causal
tiles (docs/learn/05-hopper.md §8b, docs/perf.md session 41). No GPU: pure arithmetic.

A tile (one query block of one head) costs its key blocks plus an overhead per tile: OVER_PERSISTENT
for a persistent CTA (the next tile's loads hide under this one), OVER_FRESH for a new CTA. Three
schedules on G = 132 SMs, each reported as the busiest SM's load / the average work:
  static   persistent CTAs in static waves: CTA c takes tile k*G + (c + k) mod G in wave k
  one      one CTA per tile, in tile order, each to the first free SM (the hardware)
  dynamic  persistent CTAs taking the next tile from a counter when free, longest first within
           groups of heads whose K and V fit in 32 MiB (common::grouped_tile_coords)
Session 40 measured static / one on the H200; the model gives 0.85 at hdim 128 1k (0.87 measured),
1.06 at 4k (1.06), 1.45 at 16k (1.51).

  python3 tools/tile_schedule_model.py
"""
import heapq
import math

G, OVER_PERSISTENT, OVER_FRESH, L2_GROUP_BYTES = 132, 0.5, 1.5, 32 << 20


def causal_blocks(block_m, block_n, seqlen):
    """Key blocks a causal query block m visits (seqlen_q = seqlen_k)."""
    return lambda m: math.ceil(min(seqlen, (m + 1) * block_m) / block_n)


def greedy(costs, overhead):
    """Each tile to the first free SM, in the given order: the busiest SM's finish time."""
    free = [(0.0, c) for c in range(G)]
    for w in costs:
        t, c = heapq.heappop(free)
        heapq.heappush(free, (t + w + overhead, c))
    return max(t for t, _ in free)


def static_waves(costs, overhead):
    load, k = [0.0] * G, 0
    while k * G < len(costs):
        for c in range(G):
            t = k * G + (c + k) % G
            if t < len(costs):
                load[c] += costs[t] + overhead
        k += 1
    return max(load)


def main():
    print(f"{'shape (b x h x s, hdim, tile)':36s} {'static':>7s} {'one':>7s} {'dynamic':>8s}  static/one  dynamic/best")
    for b, h, s, d, bm, bn in [(16, 16, 1024, 128, 128, 128), (8, 16, 2048, 128, 128, 128), (4, 16, 4096, 128, 128, 128),
                               (2, 16, 8192, 128, 128, 176), (1, 16, 16384, 128, 128, 176), (16, 32, 1024, 64, 128, 128),
                               (4, 32, 4096, 64, 192, 128), (2, 32, 4096, 64, 192, 128), (12, 16, 1536, 192, 128, 112),
                               (16, 8, 1024, 256, 128, 80)]:
        m_blocks, blocks = math.ceil(s / bm), causal_blocks(bm, bn, s)
        pairs = b * h
        tile_order = [blocks(m) for _ in range(pairs) for m in reversed(range(m_blocks))]
        group = max(1, min(pairs, L2_GROUP_BYTES // (s * d * 2 * 2)))
        grouped = [blocks(m) for g0 in range(0, pairs, group) for m in reversed(range(m_blocks))
                   for _ in range(g0, min(pairs, g0 + group))]
        mean = sum(tile_order) / G
        st, one = static_waves(tile_order, OVER_PERSISTENT) / mean, greedy(tile_order, OVER_FRESH) / mean
        dyn = greedy(grouped, OVER_PERSISTENT) / mean
        print(f"{f'{b} x {h} x {s}, {d}, {bm}x{bn}':36s} {st:7.3f} {one:7.3f} {dyn:8.3f}  {st / one:10.3f}  {dyn / min(st, one):12.3f}")


if __name__ == "__main__":
    main()
