"""The cuda_basics warp simulator (learn/exercises/cuda_basics/sim.py): its counts and its errors."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "learn" / "exercises"))
from cuda_basics import sim  # noqa: E402


def copy_strided(ctx, x, y, stride):
    i = ctx.threadIdx.x
    v = yield ctx.load(x, i * stride)
    yield ctx.store(y, i, v)


def test_coalesced_fp32_load_is_4_sectors():
    x, y = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    st = sim.launch(copy_strided, 1, 32, x, y, 1)
    assert st.sectors("load") == 4 and st.sectors("store") == 4
    assert st.requests("global", "load") == 1
    np.testing.assert_array_equal(y, x)


def test_stride_32_fp32_load_is_32_sectors():
    x, y = np.arange(32 * 32, dtype=np.float32), np.zeros(32, np.float32)
    st = sim.launch(copy_strided, 1, 32, x, y, 32)
    assert st.sectors("load") == 32 and st.sectors("store") == 4
    np.testing.assert_array_equal(y, x[::32])


def test_fp64_and_broadcast_sectors():
    x, y = np.arange(64, dtype=np.float64), np.zeros(32, np.float64)
    assert sim.launch(copy_strided, 1, 32, x, y, 1).sectors("load") == 8
    assert sim.launch(copy_strided, 1, 32, x, y, 0).sectors("load") == 1


def transpose_tile(ctx, a, out, pad):
    tile = ctx.shared("tile", (32, 32 + pad), np.float32)
    tx, ty = ctx.threadIdx.x, ctx.threadIdx.y
    v = yield ctx.load(a, (ty, tx))
    yield ctx.store(tile, (ty, tx), v)
    yield ctx.syncthreads()
    v = yield ctx.load(tile, (tx, ty))  # a warp (fixed ty) reads a COLUMN of the tile
    yield ctx.store(out, (ty, tx), v)


@pytest.mark.parametrize("pad, way", [(0, 32), (1, 1)])
def test_shared_transpose_bank_conflicts(pad, way):
    a = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    out = np.zeros_like(a)
    st = sim.launch(transpose_tile, 1, (32, 32), a, out, pad)
    np.testing.assert_array_equal(out, a.T)
    assert st.max_way("store", "tile") == 1          # a row write is conflict-free either way
    assert st.max_way("load", "tile") == way
    assert st.wavefronts("load", "tile") == 32 * way
    assert st.sectors("load", "a") == st.sectors("store", "out") == 32 * 4
    assert st.barriers == 1


def test_broadcast_is_not_a_conflict():
    def k(ctx, out):
        s = ctx.shared("s", (64,), np.float32)
        if ctx.tid == 0:
            yield ctx.store(s, 0, 5.0)
        yield ctx.syncthreads()
        v = yield ctx.load(s, 0)
        yield ctx.store(out, ctx.tid, v)
    out = np.zeros(64, np.float32)
    st = sim.launch(k, 1, 64, out)
    assert st.max_way("load") == 1 and (out == 5).all()


def test_missing_barrier_is_a_race():
    def k(ctx, out, sync):
        s = ctx.shared("s", (64,), np.float32)
        yield ctx.store(s, ctx.tid, float(ctx.tid))
        if sync:
            yield ctx.syncthreads()
        v = yield ctx.load(s, 63 - ctx.tid)
        yield ctx.store(out, ctx.tid, v)
    out = np.zeros(64, np.float32)
    sim.launch(k, 1, 64, out, True)
    np.testing.assert_array_equal(out, np.arange(64)[::-1])
    with pytest.raises(sim.SimError, match="race"):
        sim.launch(k, 1, 64, out, False)


def test_write_write_race_and_atomics():
    def k(ctx, out, atomic):
        s = ctx.shared("s", (1,), np.int32)
        if ctx.tid == 0:
            yield ctx.store(s, 0, 0)
        yield ctx.syncthreads()
        if atomic:
            yield ctx.atomic_add(s, 0, 1)
        else:
            v = yield ctx.load(s, 0)
            yield ctx.store(s, 0, v + 1)
        yield ctx.syncthreads()
        if ctx.tid == 0:
            v = yield ctx.load(s, 0)
            yield ctx.store(out, 0, v)
    out = np.zeros(1, np.int32)
    sim.launch(k, 1, 96, out, True)
    assert out[0] == 96
    with pytest.raises(sim.SimError, match="race"):
        sim.launch(k, 1, 96, out, False)


def test_global_atomics_count_every_thread():
    def k(ctx, h):
        yield ctx.atomic_add(h, ctx.tid % 3, 1)
    h = np.zeros(3, np.int64)
    sim.launch(k, 4, 50, h)
    assert h.tolist() == [68, 68, 64]


def test_shuffles():
    def k(ctx, out, mode):
        v = ctx.lane + 100 * ctx.warp
        if mode == "xor":
            for m in (16, 8, 4, 2, 1):
                v += yield ctx.shfl_xor(v, m)
        else:
            v = yield ctx.shfl_down(v, 1)
        yield ctx.store(out, ctx.tid, v)
    out = np.zeros(64, np.int64)
    sim.launch(k, 1, 64, out, "xor")
    assert (out[:32] == sum(range(32))).all() and (out[32:] == sum(range(32)) + 3200).all()
    sim.launch(k, 1, 64, out, "down")
    assert out[0] == 1 and out[30] == 31 and out[31] == 31 and out[32] == 101


def test_shuffle_from_inactive_lane():
    def k(ctx, out):
        v = 1.0
        if ctx.lane < 16:
            v = yield ctx.shfl_xor(v, 16)
        yield ctx.store(out, ctx.tid, v)
    with pytest.raises(sim.SimError, match="not executing"):
        sim.launch(k, 1, 32, np.zeros(32))


def test_errors():
    def oob(ctx, x):
        yield ctx.store(x, ctx.tid, 1.0)
    with pytest.raises(sim.SimError, match="out-of-bounds access x\\[10\\]"):
        sim.launch(oob, 1, 32, np.zeros(10))

    def early_return(ctx, x):
        if ctx.tid >= 10:
            return
        yield ctx.syncthreads()
    with pytest.raises(sim.SimError, match="not reached"):
        sim.launch(early_return, 1, 32, np.zeros(10))

    def no_yield(ctx, x):
        v = ctx.load(x, 0)
        yield ctx.store(x, 0, v + 1)
    with pytest.raises(sim.SimError, match="without `yield`|used as a value"):
        sim.launch(no_yield, 1, 1, np.zeros(1))

    def not_a_generator(ctx, x):
        ctx.store(x, 0, 1.0)
    with pytest.raises(sim.SimError, match="generator"):
        sim.launch(not_a_generator, 1, 1, np.zeros(1))


def test_uninitialized_shared_is_nan_and_2d_indices():
    def k(ctx, out):
        s = ctx.shared("s", (4, 8), np.float32)
        v = yield ctx.load(s, (ctx.threadIdx.y, ctx.threadIdx.x))
        yield ctx.store(out, (ctx.blockIdx.y * 4 + ctx.threadIdx.y, ctx.blockIdx.x * 8 + ctx.threadIdx.x), v)
    out = np.zeros((8, 16), np.float32)
    st = sim.launch(k, (2, 2), (8, 4), out)
    assert np.isnan(out).all() and st.smem_bytes == 4 * 8 * 4


def test_lanes_reconverge_after_a_branch():
    """Lanes that skipped a load wait for the others: the shuffle and the store run as one instruction."""
    def k(ctx, x, out, n):
        i = ctx.tid
        v = (yield ctx.load(x, i)) if i < n else 0.0
        for m in (16, 8, 4, 2, 1):
            v += yield ctx.shfl_xor(v, m)
        yield ctx.store(out, i, v)
    x, out = np.arange(5, dtype=np.float64), np.zeros(32)
    st = sim.launch(k, 1, 32, x, out, 5)
    assert (out == 10).all()
    assert st.requests("global", "store") == 1 and st.sectors("store") == 8
    assert st.requests("warp", "shfl_xor") == 5
