"""A tiny CUDA thread-block simulator for the cuda_basics exercises (docs/learn/exercises.md).

A kernel is a Python GENERATOR function `kernel(ctx, *args)`, run once per thread. Every memory
access, barrier and shuffle is a request that the thread YIELDS to the simulator:

    v = yield ctx.load(x, i)                 x[i]   (x: a NumPy array = global memory, or shared)
    yield ctx.store(y, (r, c), v)            y[r, c] = v
    old = yield ctx.atomic_add(h, b, 1)      atomicAdd(&h[b], 1)
    tile = ctx.shared("tile", (32, 33), np.float32)   __shared__ float tile[32][33] (no yield)
    yield ctx.syncthreads()                  __syncthreads()
    v = yield ctx.shfl_xor(v, 16)            __shfl_xor_sync(0xffffffff, v, 16)
    v = yield ctx.shfl_down(v, 16)           __shfl_down_sync(0xffffffff, v, 16)

ctx.threadIdx / blockIdx / blockDim / gridDim have .x .y .z; ctx.tid is the linear thread index in
the block (x fastest), ctx.lane = tid % 32, ctx.warp = tid // 32. Arithmetic is plain Python/NumPy.
A helper that itself yields requests is a generator too: call it with `yield from helper(...)`.

The model (simple on purpose):
* Blocks run one after another. In a block, threads are grouped in warps of 32 consecutive tids.
  Warp 0 runs until all its threads wait at a barrier or have returned, then warp 1, and so on;
  when every live thread waits, the barrier opens and the round repeats.
* Inside a warp, threads run in LOCKSTEP (SIMT): each running thread stops at its next request;
  the lanes that are furthest behind in the code (lowest position in the kernel's bytecode) run
  their requests together as one step, the others wait. So after an `if` the lanes reconverge, and
  a shuffle is executed by all the lanes that reach it together. The requests of one step with the
  same kind and array form ONE warp instruction.
* Cost of a warp instruction on global memory: the number of distinct 32-byte sectors it touches
  (arrays start sector-aligned). On shared memory: the bank-conflict degree n (n-way), 32 banks of
  4 bytes; n = the largest number of DISTINCT 4-byte words that fall in one bank (the same word
  read by many lanes is a broadcast and counts once). 1 = conflict-free.
* Errors (SimError): out-of-bounds indices, a shuffle that reads a lane which is not executing it,
  a __syncthreads() that some thread of the block never reaches, a request used without `yield`,
  and RACES on shared memory: between two barriers, two different threads touch the same shared
  address and at least one of them writes it (atomics among themselves do not race).
* Shared memory starts as garbage (NaN for floats): read-before-write shows up in the values.
Not modelled: timing, caches, L1/L2, memory ordering beyond barriers, __syncwarp, vector loads, the
real instruction stream. On a GPU, measure the same kernels with Nsight Compute (ncu).
"""

import inspect

import numpy as np

WARP, SECTOR, BANKS = 32, 32, 32


class SimError(Exception):
    pass


class Dim3(tuple):
    x = property(lambda s: s[0])
    y = property(lambda s: s[1])
    z = property(lambda s: s[2])


def dim3(v):
    v = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
    return Dim3(tuple(int(a) for a in v) + (1,) * (3 - len(v)))


class Shared:
    """A __shared__ array of one block; .data is its NumPy array (C order)."""

    def __init__(self, name, shape, dtype):
        self.name, self.data = name, np.empty(shape, dtype)
        if np.issubdtype(self.data.dtype, np.floating):
            self.data[...] = np.nan
        else:
            self.data.view(np.uint8)[...] = 0xAB


class Req:
    """One request a thread yields. Using it as a value means the `yield` was forgotten."""
    __slots__ = ("op", "arr", "idx", "val")

    def __init__(self, op, arr=None, idx=None, val=None):
        self.op, self.arr, self.idx, self.val = op, arr, idx, val


def _forgot(self, *a):
    raise SimError(f"ctx.{self.op}(...) used as a value: write `v = yield ctx.{self.op}(...)`")


for _m in ("add radd sub rsub mul rmul truediv rtruediv floordiv mod pow neg lt le gt ge "
           "float int index bool").split():
    setattr(Req, f"__{_m}__", _forgot)


class Ctx:
    def __init__(self, block, tid, bid, bdim, gdim):
        self._block, self._made, self._yielded = block, 0, 0
        self.tid, self.blockIdx, self.blockDim, self.gridDim = tid, bid, bdim, gdim
        self.threadIdx = Dim3((tid % bdim.x, tid // bdim.x % bdim.y, tid // (bdim.x * bdim.y)))
        self.lane, self.warp = tid % WARP, tid // WARP

    def _req(self, *a):
        self._made += 1
        return Req(*a)

    def shared(self, name, shape, dtype=np.float32):
        return self._block.shared(name, shape, dtype)

    def load(self, arr, idx):
        return self._req("load", arr, idx)

    def store(self, arr, idx, val):
        return self._req("store", arr, idx, val)

    def atomic_add(self, arr, idx, val):
        return self._req("atomic_add", arr, idx, val)

    def syncthreads(self):
        return self._req("syncthreads")

    def shfl_xor(self, val, mask):
        return self._req("shfl_xor", None, mask, val)

    def shfl_down(self, val, delta):
        return self._req("shfl_down", None, delta, val)


class Stats:
    """What a launch did: one record (space, op, array name, lanes, cost) per warp instruction."""

    def __init__(self):
        self.records, self.barriers, self.smem_bytes = [], 0, 0

    def select(self, space=None, op=None, name=None):
        return [r for r in self.records if (space is None or r[0] == space)
                and (op is None or r[1] == op) and (name is None or r[2] == name)]

    def sectors(self, op=None, name=None):
        """Global-memory 32-byte sectors touched, summed over warp instructions."""
        return sum(r[4] for r in self.select("global", op, name))

    def requests(self, space=None, op=None, name=None):
        """Number of warp instructions."""
        return len(self.select(space, op, name))

    def max_way(self, op=None, name=None):
        """Worst shared-memory bank conflict (1 = none; 0 = no shared access)."""
        return max((r[4] for r in self.select("shared", op, name)), default=0)

    def wavefronts(self, op=None, name=None):
        """Shared-memory passes: the sum of n-way over shared warp instructions."""
        return sum(r[4] for r in self.select("shared", op, name))

    def __repr__(self):
        return (f"Stats(global load sectors {self.sectors('load')}, store sectors "
                f"{self.sectors('store')}, shared max {self.max_way()}-way, barriers {self.barriers})")


class _Block:
    def __init__(self, stats):
        self.arrays, self.stats, self.log = {}, stats, {}

    def shared(self, name, shape, dtype):
        a = self.arrays.get(name)
        if a is None:
            a = self.arrays[name] = Shared(name, shape, dtype)
            self.stats.smem_bytes = max(self.stats.smem_bytes, sum(s.data.nbytes for s in self.arrays.values()))
        elif a.data.shape != tuple(np.atleast_1d(shape)) or a.data.dtype != np.dtype(dtype):
            raise SimError(f"shared array {name!r} declared twice with different shape or dtype")
        return a

    def touch(self, name, flat, tid, op):
        """Race check for one shared access; the log is cleared at each barrier."""
        w, readers, atomics = self.log.setdefault((name, flat), [None, set(), set()])
        others = lambda s: s - {tid}  # noqa: E731
        if (w is not None and w != tid) or (op != "load" and others(readers)) or \
                (op != "atomic_add" and others(atomics)):
            other = w if w is not None and w != tid else min(others(readers) | others(atomics))
            raise SimError(f"race on shared {name!r} (flat index {flat}): thread {tid} {op}s it after "
                           f"thread {other} touched it since the last __syncthreads()")
        if op == "store":
            self.log[(name, flat)][0] = tid
        else:
            (readers if op == "load" else atomics).add(tid)


def _flat(arr, idx, name):
    idx = idx if isinstance(idx, tuple) else (idx,)
    if len(idx) != arr.ndim:
        raise SimError(f"{name}: index {idx} has {len(idx)} coordinates, the array has {arr.ndim}")
    f = 0
    for i, n in zip(idx, arr.shape):
        if not isinstance(i, (int, np.integer)):
            raise SimError(f"{name}: index {idx} is not made of integers")
        if not 0 <= i < n:
            raise SimError(f"out-of-bounds access {name}{list(int(j) for j in idx)} (shape {arr.shape})")
        f = f * n + int(i)
    return f


def _memory(group, block, names, stats):
    op, arr = group[0][1].op, group[0][1].arr
    if isinstance(arr, Shared):
        space, name, data = "shared", arr.name, arr.data
    elif isinstance(arr, np.ndarray):
        space, name, data = "global", names.get(id(arr), "array"), arr
    else:
        raise SimError(f"ctx.{op}: expected a NumPy array or a ctx.shared array, got {type(arr).__name__}")
    flats = [_flat(data, r.idx, name) for _, r in group]
    size = data.itemsize
    if space == "global":
        cost = len({f * size // SECTOR for f in flats})
    else:
        words = {w for f in flats for w in range(f * size // 4, (f * size + size - 1) // 4 + 1)}
        cost = max(np.bincount([w % BANKS for w in words], minlength=BANKS))
    stats.records.append((space, op, name, len(group), int(cost)))
    out, flat_data = [], data.reshape(-1)
    for (tid, r), f in zip(group, flats):
        if space == "shared":
            block.touch(name, f, tid, op)
        if op == "load":
            out.append(flat_data[f])
        elif op == "store":
            flat_data[f] = r.val
            out.append(None)
        else:
            out.append(flat_data[f].copy())
            flat_data[f] = flat_data[f] + r.val
    return out


def _shuffle(group, stats):
    vals = {tid % WARP: r.val for tid, r in group}
    out = []
    for tid, r in group:
        lane = tid % WARP
        if r.op == "shfl_xor":
            if not 0 < r.idx < WARP:
                raise SimError(f"shfl_xor mask {r.idx} is not in 1..31")
            src = lane ^ r.idx
        else:
            src = lane + r.idx if lane + r.idx < WARP else lane
        if src not in vals:
            raise SimError(f"{r.op}: lane {lane} reads lane {src}, which is not executing this shuffle")
        out.append(vals[src])
    stats.records.append(("warp", group[0][1].op, None, len(group), 1))
    return out


def _site(g):
    """Where a suspended thread is in the code (bytecode offsets, through `yield from`)."""
    key = []
    while inspect.isgenerator(g) and g.gi_frame is not None:
        key.append(g.gi_frame.f_lasti)
        g = g.gi_yieldfrom
    return tuple(key)


def _run_block(kernel, bid, gdim, bdim, args, names, stats):
    n = bdim.x * bdim.y * bdim.z
    block = _Block(stats)
    ctxs = [Ctx(block, t, bid, bdim, gdim) for t in range(n)]
    gens = [kernel(c, *args) for c in ctxs]
    if not inspect.isgenerator(gens[0]):
        raise SimError("the kernel must be a generator function: its memory accesses are `yield ctx.load(...)`")
    state, send, pend = ["run"] * n, [None] * n, [None] * n
    warps = [range(w, min(n, w + WARP)) for w in range(0, n, WARP)]

    def advance(t):  # run thread t up to its next request
        try:
            r = gens[t].send(send[t])
        except StopIteration:
            state[t] = "done"
            if ctxs[t]._made != ctxs[t]._yielded:
                raise SimError(f"thread {t}: a ctx request was made without `yield` (it did nothing)")
            return
        if not isinstance(r, Req):
            raise SimError(f"thread {t} yielded {r!r}; yield only ctx.load/store/... requests")
        ctxs[t]._yielded += 1
        pend[t] = r
        if r.op == "syncthreads":
            state[t] = "sync"

    while True:
        for warp in warps:
            while True:
                for t in warp:
                    if state[t] == "run" and pend[t] is None:
                        advance(t)
                ready = [t for t in warp if state[t] == "run"]
                if not ready:
                    break
                sites = {t: _site(gens[t]) for t in ready}
                first = min(sites.values())  # the lanes furthest behind in the code go first
                groups = {}
                for t in ready:
                    if sites[t] == first:
                        groups.setdefault((pend[t].op, id(pend[t].arr)), []).append((t, pend[t]))
                for (op, _), g in groups.items():
                    res = _shuffle(g, stats) if op.startswith("shfl") else _memory(g, block, names, stats)
                    for (t, _), v in zip(g, res):
                        send[t], pend[t] = v, None
        waiting = [t for t in range(n) if state[t] == "sync"]
        if not waiting:
            return
        done = [t for t in range(n) if state[t] == "done"]
        if done:
            raise SimError(f"__syncthreads() not reached by every thread of block {tuple(bid)}: thread "
                           f"{done[0]} returned while thread {waiting[0]} waits (early return or a barrier in a branch)")
        stats.barriers += 1
        block.log.clear()
        for t in waiting:
            state[t], send[t], pend[t] = "run", None, None


def launch(kernel, grid, block, *args):
    """Run kernel<<<grid, block>>>(*args) (ctx comes first); returns Stats. Arrays are modified in place."""
    gdim, bdim = dim3(grid), dim3(block)
    if min(gdim) < 1 or min(bdim) < 1 or bdim.x * bdim.y * bdim.z > 1024:
        raise SimError(f"bad launch configuration grid {tuple(gdim)} block {tuple(bdim)} (at most 1024 threads)")
    params = list(inspect.signature(kernel).parameters)[1:]
    names = {id(a): p for p, a in zip(params, args) if isinstance(a, np.ndarray)}
    if any(isinstance(a, np.ndarray) and not a.flags.c_contiguous for a in args):
        raise SimError("global arrays must be C-contiguous")
    stats = Stats()
    for bz in range(gdim.z):
        for by in range(gdim.y):
            for bx in range(gdim.x):
                _run_block(kernel, Dim3((bx, by, bz)), gdim, bdim, args, names, stats)
    return stats
