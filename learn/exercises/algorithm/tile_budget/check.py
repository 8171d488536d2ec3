"""Spec of algorithm/tile_budget: shared memory and registers of a Hopper forward tile, element by element."""

from grading import equal

CONCEPT = "tile budget: Q, K, V (per stage) and O in shared memory; S, P, O registers per consumer thread"
NEEDS_GPU = False

LIMIT = 227 * 1024  # bytes of shared memory per block on the H100 / H200
BARRIERS = 1024     # bytes the kernel reserves for its mbarriers (kernel_traits.h kSeparateO)


def tile_bytes(rows, cols):
    return rows * cols * 2  # 16-bit elements


def exact(d, m, n, stages):
    qkv = tile_bytes(m, d) + sum(tile_bytes(n, d) for _ in range(2 * stages))
    sep = qkv + tile_bytes(m, d) + BARRIERS <= LIMIT
    rows, threads = 64, 128  # one consumer warpgroup
    s = rows * n // threads
    regs = s + s // 2 + rows * d // threads
    return qkv, sep, regs


def check(mod, rng):
    # The tiles of src/cuda/sm90/tile_size.h (head dim, block_m, block_n, stages) and its table's
    # numbers, then shapes that sit on the limit (the barriers decide), then random ones.
    cases = [(32, 128, 128, 2), (64, 192, 128, 2), (64, 128, 128, 2), (96, 128, 128, 2), (96, 128, 192, 2),
             (128, 128, 128, 2), (128, 128, 176, 2), (128, 128, 128, 3), (192, 128, 112, 2), (256, 128, 80, 2),
             (64, 104, 400, 2), (64, 128, 195, 4), (128, 128, 192, 2), (64, 192, 144, 2)]
    for _ in range(6):
        cases.append((8 * int(rng.integers(1, 33)), 64 * int(rng.integers(1, 4)), 16 * int(rng.integers(1, 17)),
                      int(rng.integers(1, 5))))
    for d, m, n, st in cases:
        qkv, sep, regs = exact(d, m, n, st)
        name = f"hdim {d}, {m} x {n}, {st} stages"
        equal(name, int(mod.smem_bytes(d, m, n, st)), qkv, what="Q + K + V bytes")
        equal(name, bool(mod.separate_o(d, m, n, st, LIMIT, BARRIERS)), sep, what="O's own staging tile fits")
        equal(name, int(mod.accumulator_registers(d, n)), regs, what="S + P + O registers per thread")
    # The numbers quoted in tile_size.h and docs/learn/05-hopper.md.
    equal("hdim 128, 128 x 176 (tile_size.h)", int(mod.smem_bytes(128, 128, 176, 2)), 208 * 1024, what="bytes")
    equal("hdim 128, 128 x 176 (tile_size.h)", bool(mod.separate_o(128, 128, 176, 2, LIMIT, BARRIERS)), False,
          what="O's own tile")
    equal("hdim 128, 128 x 176 (tile_size.h)", int(mod.accumulator_registers(128, 176)), 196, what="registers")
    equal("hdim 96, 128 x 192 (tile_size.h)", bool(mod.separate_o(96, 128, 192, 2, LIMIT, BARRIERS)), True,
          what="O's own tile")
