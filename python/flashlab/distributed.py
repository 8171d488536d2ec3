"""flashlab.distributed — context parallelism: ring attention over torch.distributed.

    import torch.distributed as dist, flashlab.distributed as fd
    # every rank holds its shard of the sequence: (batch, seqlen_local, heads, head_dim)
    q, k, v = (fd.zigzag_shard(x, rank, world) for x in (q_full, k_full, v_full))  # causal layout
    out = fd.ring_attention(q, k, v, causal=True)          # this rank's rows of the full attention
    out.sum().backward()                                    # dq, dk, dv of this rank's shard

K/V blocks travel around the ring of ranks (rank r receives from r - 1 and sends to r + 1). While a
block is computed the next one is already on its way (``dist.batch_isend_irecv``); each block
gives a partial (out_i, lse_i) through ``flashlab::fwd``, merged exactly through the log-sum-exp
(``merge_partial``). The backward is the ring backward: per block pair ``flashlab::bwd`` with the
merged (global) out and lse gives exact dq contributions (summed here) and dk/dv contributions for
the visiting block, which travel on with it and reach their owner after the last step; all sums
in fp32. docs/distributed.md has the algorithm, what has been verified (gloo on the CPU, NCCL on
4 H200s) and the scaling measured (benchmarks/ring_scaling.py).

Causal attention expects the zigzag layout (``zigzag_shard``): the sequence is cut into 2R
chunks and rank r holds chunks r and 2R-1-r, so every rank does the same amount of work.
Non-causal attention takes plain contiguous shards (any layout works: every pair is full).
Packed variable-length batches (``cu_seqlens``) split every sequence the same way
(``zigzag_shard_varlen``).
"""

from typing import List, Optional, Sequence

try:
    import torch
    import torch.distributed as dist
except ModuleNotFoundError as _e:
    if _e.name not in ("torch", "torch.distributed"):
        raise
    raise ImportError("flashlab.distributed needs PyTorch with torch.distributed", name="torch") from _e
from torch import Tensor

from . import torch as _fl  # noqa: F401  (registers the flashlab::fwd / flashlab::bwd ops)

__all__ = ["ring_attention", "merge_partial", "zigzag_shard", "zigzag_unshard", "zigzag_shard_varlen",
           "zigzag_unshard_varlen"]

_FWD = torch.ops.flashlab.fwd.default
_BWD = torch.ops.flashlab.bwd.default


# ---------------------------------------------------------------------------------------------
# Sharding
# ---------------------------------------------------------------------------------------------
def zigzag_shard(x: Tensor, rank: int, world: int, dim: int = 1) -> Tensor:
    """Rank `rank`'s zigzag shard of `x` along `dim`: chunks `rank` and `2*world-1-rank` of the
    sequence cut into 2*world equal chunks (the length must divide by 2*world)."""
    n = x.shape[dim]
    if n % (2 * world):
        raise ValueError(f"zigzag_shard: length {n} along dim {dim} is not a multiple of 2*world={2 * world}")
    chunks = x.chunk(2 * world, dim=dim)
    return torch.cat([chunks[rank], chunks[2 * world - 1 - rank]], dim=dim)


def zigzag_unshard(shards: Sequence[Tensor], dim: int = 1) -> Tensor:
    """The full sequence from the zigzag shards of every rank, in rank order (inverse of
    ``zigzag_shard``; e.g. the list filled by ``dist.all_gather``)."""
    world = len(shards)
    chunks: List[Optional[Tensor]] = [None] * (2 * world)
    for r, s in enumerate(shards):
        first, second = s.chunk(2, dim=dim)
        chunks[r], chunks[2 * world - 1 - r] = first, second
    return torch.cat(chunks, dim=dim)


def zigzag_shard_varlen(x: Tensor, cu_seqlens: Tensor, rank: int, world: int):
    """Rank `rank`'s zigzag shard of packed variable-length sequences: x (total, ...) with sequence
    b at rows [cu_seqlens[b], cu_seqlens[b+1]); every length must divide by 2*world. Returns
    (shard, cu_local): the shard packs, per sequence, its chunks `rank` and `2*world-1-rank`;
    cu_local = cu_seqlens // world (int32, on cu_seqlens' device), the same on every rank."""
    cu = [int(c) for c in cu_seqlens.tolist()]
    parts = []
    for b in range(len(cu) - 1):
        parts.append(zigzag_shard(x[cu[b]:cu[b + 1]], rank, world, dim=0))
    shard = torch.cat(parts, dim=0) if parts else x[:0]
    return shard, torch.div(cu_seqlens, world, rounding_mode="floor").to(torch.int32)


def zigzag_unshard_varlen(shards: Sequence[Tensor], cu_seqlens: Tensor) -> Tensor:
    """The packed sequences from every rank's ``zigzag_shard_varlen`` shard, in rank order."""
    world = len(shards)
    cu = [int(c) for c in cu_seqlens.tolist()]
    seqs = []
    for b in range(len(cu) - 1):
        lo, hi = cu[b] // world, cu[b + 1] // world  # this sequence's rows in every shard
        seqs.append(zigzag_unshard([s[lo:hi] for s in shards], dim=0))
    return torch.cat(seqs, dim=0) if seqs else shards[0][:0]


# ---------------------------------------------------------------------------------------------
# The LSE merge
# ---------------------------------------------------------------------------------------------
def merge_partial(out: Tensor, lse: Tensor, out_i: Tensor, lse_i: Tensor):
    """Merge two partial attentions over disjoint key sets, exactly, in fp32.

    out, out_i: (batch, seqlen, heads, head_dim); lse, lse_i: (batch, heads, seqlen).
    lse' = logaddexp(lse, lse_i); out' = exp(lse - lse') out + exp(lse_i - lse') out_i.
    Rows where both are empty (lse = lse_i = -inf) stay out' = 0, lse' = -inf. Returns fp32
    (new tensors; the arguments are not changed).
    """
    acc, acc_lse = out.to(torch.float32, copy=True), lse.to(torch.float32, copy=True)
    _merge_(acc, acc_lse, out_i, lse_i.float())
    return acc, acc_lse


def _merge_(acc: Tensor, lse: Tensor, out_i: Tensor, lse_i: Tensor):
    """merge_partial in place: acc (fp32, may be a view) and lse (fp32, may be a view) absorb
    (out_i, lse_i). On CUDA one Triton kernel (_merge_kernel) where Triton is present, else torch
    operations (the CPU path, and the reference the GPU test compares the kernel with)."""
    if acc.is_cuda and acc.stride(-1) == 1 and out_i.stride(-1) == 1 and _triton() is not None:
        _merge_triton(acc, lse, out_i, lse_i)
    else:
        _merge_torch(acc, lse, out_i, lse_i)


def _merge_torch(acc: Tensor, lse: Tensor, out_i: Tensor, lse_i: Tensor):
    new = torch.logaddexp(lse, lse_i)
    finite = torch.isfinite(new)
    safe = torch.where(finite, new, torch.zeros_like(new))
    zero = torch.zeros_like(new)
    w = torch.where(finite, torch.exp(lse - safe), zero)
    w_i = torch.where(finite, torch.exp(lse_i - safe), zero)

    def rows(x):  # (batch, heads, seqlen) -> (batch, seqlen, heads, 1)
        return x.transpose(1, 2).contiguous().unsqueeze(-1)

    acc.mul_(rows(w))
    acc.addcmul_(out_i, rows(w_i))
    lse.copy_(new)


# The merge on the GPU. The torch operations above read and write acc twice and broadcast the
# weights over head_dim: 0.88 ms per merge at 32k tokens x 16 heads x 128 on an H200 (1.3 TB/s),
# 6 % of the 13.8 ms block it merges. The kernel reads acc and out_i once and writes acc once.
_TRITON = None  # (triton, kernel) once built; False where Triton is missing


def _triton():
    global _TRITON
    if _TRITON is None:
        try:
            import triton
            import triton.language as tl
        except ImportError:
            _TRITON = False
            return None

        @triton.jit
        def _merge_kernel(acc, lse, o, lse_i, n_rows, heads, seqlen,
                          a_sb, a_ss, a_sh, l_sb, l_sh, l_ss, o_sb, o_ss, o_sh, i_sb, i_sh, i_ss,
                          D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr):  # fmt: skip
            # BLOCK_R rows (b, s, h) of acc: lse' = m + log(e + e_i), acc' = (e acc + e_i o) / (e + e_i)
            # with m = max(lse, lse_i), e = exp(lse - m), e_i = exp(lse_i - m); rows with no keys on
            # either side (lse = lse_i = -inf) keep acc' = 0, lse' = -inf.
            r = (tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
            in_r = r < n_rows
            h = r % heads
            s = (r // heads) % seqlen
            b = r // (heads * seqlen)
            l_ptr = lse + b * l_sb + h * l_sh + s * l_ss
            l0 = tl.load(l_ptr, mask=in_r, other=float("-inf"))
            l1 = tl.load(lse_i + b * i_sb + h * i_sh + s * i_ss, mask=in_r, other=float("-inf"))
            m = tl.maximum(l0, l1)
            finite = m > float("-inf")
            m = tl.where(finite, m, 0.0)
            e0 = tl.exp(l0 - m)
            e1 = tl.exp(l1 - m)
            tot = tl.where(finite, e0 + e1, 1.0)
            w0 = tl.where(finite, e0 / tot, 0.0)
            w1 = tl.where(finite, e1 / tot, 0.0)
            d = tl.arange(0, BLOCK_D)
            mask = in_r[:, None] & (d < D)[None, :]
            a_ptr = acc + (b * a_sb + s * a_ss + h * a_sh)[:, None] + d[None, :]
            a = tl.load(a_ptr, mask=mask, other=0.0)
            x = tl.load(o + (b * o_sb + s * o_ss + h * o_sh)[:, None] + d[None, :], mask=mask, other=0.0)
            tl.store(a_ptr, a * w0[:, None] + x.to(tl.float32) * w1[:, None], mask=mask)
            tl.store(l_ptr, tl.where(finite, m + tl.log(tot), float("-inf")), mask=in_r)

        _TRITON = (triton, _merge_kernel)
    return _TRITON or None


def _merge_triton(acc: Tensor, lse: Tensor, out_i: Tensor, lse_i: Tensor):
    triton, kernel = _TRITON
    batch, seqlen, heads, d = acc.shape
    n_rows = batch * seqlen * heads
    block_d = triton.next_power_of_2(d)
    block_r = max(1, 2048 // block_d)
    kernel[(triton.cdiv(n_rows, block_r),)](
        acc, lse, out_i, lse_i, n_rows, heads, seqlen,
        acc.stride(0), acc.stride(1), acc.stride(2), lse.stride(0), lse.stride(1), lse.stride(2),
        out_i.stride(0), out_i.stride(1), out_i.stride(2), lse_i.stride(0), lse_i.stride(1), lse_i.stride(2),
        D=d, BLOCK_D=block_d, BLOCK_R=block_r, num_warps=4)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Ring communication
# ---------------------------------------------------------------------------------------------
# How the ring moves blocks: "overlap" (the library's behaviour: the next block travels while the
# current one is computed), or, for benchmarks/ring_scaling.py only, "serial" (each transfer is
# waited for before the compute that follows it is queued: communication not hidden) and "none"
# (nothing travels; every step computes this rank's own block again: the same kernels and shapes,
# wrong results, the compute-only time). Set through _comm_mode(); never for real use.
_COMM_MODES = ("overlap", "serial", "none")
_comm = "overlap"


class _comm_mode:
    """``with _comm_mode("serial"): ...`` — the benchmark's switch (see _COMM_MODES)."""

    def __init__(self, mode: str):
        if mode not in _COMM_MODES:
            raise ValueError(f"comm mode {mode!r} is not one of {_COMM_MODES}")
        self.mode = mode

    def __enter__(self):
        global _comm
        self.prev, _comm = _comm, self.mode

    def __exit__(self, *exc):
        global _comm
        _comm = self.prev


class _Ring:
    """Neighbours of this rank in `group` and asynchronous exchanges with them."""

    def __init__(self, group):
        self.group = group
        self.world = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.comm = _comm  # fixed for the forward and its backward

        def glob(r):
            return r if group is None else dist.get_global_rank(group, r)

        self.next = glob((self.rank + 1) % self.world)
        self.prev = glob((self.rank - 1) % self.world)

    def exchange(self, tensors: Sequence[Tensor], tag: int):
        """Post sends of `tensors` to the next rank and receives of same-shaped buffers from the
        previous one; returns (buffers, requests): wait on the requests before reading buffers."""
        if self.comm == "none":  # benchmark only: the block stays here
            return list(tensors), []
        tensors = [t.contiguous() for t in tensors]  # gloo and NCCL send dense tensors
        bufs = [torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in tensors]
        ops = []
        for i, (t, b) in enumerate(zip(tensors, bufs)):
            ops.append(dist.P2POp(dist.irecv, b, self.prev, self.group, tag + i))
            ops.append(dist.P2POp(dist.isend, t, self.next, self.group, tag + i))
        # One batch (NCCL: one ncclGroupStart/End). An earlier version posted the sends and
        # receives one by one, and its first NCCL run hung (cause not confirmed); batched, the NCCL
        # tests pass (docs/distributed.md).
        reqs = dist.batch_isend_irecv(ops)
        if self.comm == "serial":  # benchmark only: the transfer before whatever is queued next
            _wait(reqs)
            reqs = []
        return bufs, reqs


def _wait(reqs):
    for r in reqs:
        r.wait()


# ---------------------------------------------------------------------------------------------
# Per-step blocks: which queries meet which keys, and with which mask
# ---------------------------------------------------------------------------------------------
_ALL, _FIRST, _SECOND = "all", "first", "second"  # a shard's rows: all, or the half of each sequence


def _plan(step: int, rank: int, world: int, causal: bool):
    """(query rows, key rows, causal) for the block of rank (rank - step) visiting `rank`.

    Zigzag (causal): rank r holds chunks (r, 2R-1-r) of each sequence. Own block: one causal call
    (chunk pairs: same chunk causal, the earlier key chunk full, the later one skipped). A block
    from an earlier rank j < r: its first chunk j is before both query chunks (full), its second
    2R-1-j after both (skipped). From a later rank j > r: both its chunks are after query chunk r
    (skipped) and before query chunk 2R-1-r (full)."""
    if not causal:
        return _ALL, _ALL, False
    if step == 0:
        return _ALL, _ALL, True
    if (rank - step) % world < rank:
        return _ALL, _FIRST, False
    return _SECOND, _ALL, False


class _Dense:
    """Shards (batch, seqlen_local, heads, head_dim); LSE (batch, heads, seqlen_local). A half is
    a slice of the sequence dimension."""

    def __init__(self, q: Tensor):
        n = q.shape[1]
        self.rows = {_ALL: slice(0, n), _FIRST: slice(0, n // 2), _SECOND: slice(n // 2, n)}

    def take(self, t: Tensor, part: str) -> Tensor:  # the part's rows of q, k, v, out, dout
        return t if part == _ALL else t[:, self.rows[part]].contiguous()

    def take_lse(self, t: Tensor, part: str) -> Tensor:
        return t if part == _ALL else t[:, :, self.rows[part]].contiguous()

    def varlen(self, part_q: str, part_k: str):  # cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k
        return None, None, 0, 0

    def merge(self, out: Tensor, lse: Tensor, part: str, o_i: Tensor, l_i: Tensor):
        r = self.rows[part]
        _merge_(out[:, r], lse[:, :, r], o_i, l_i)  # in place, through views

    def add(self, acc: Tensor, part: str, g: Tensor):
        acc[:, self.rows[part]].add_(g)


class _Packed:
    """Variable-length shards packed (total_local, heads, head_dim), sequence b at rows
    [cu[b], cu[b+1]); LSE (heads, total_local). A half is the first or second half of every
    sequence's rows (index_select / index_add along the rows)."""

    def __init__(self, q: Tensor, cu: Tensor, max_seqlen: int, causal: bool):
        self.cu, self.max = cu, max_seqlen
        self.cu_half = torch.div(cu, 2, rounding_mode="floor")
        self.index = {}
        if not causal:  # only causal steps take halves (and only they need even lengths)
            return
        # Row j of the halves' packing (cu_half) is row j - cu_half[b] of sequence b's first half:
        # computed without reading cu on the host (no synchronization; every length is even, so the
        # halves hold total / 2 rows each).
        j = torch.arange(q.shape[0] // 2, device=q.device, dtype=cu.dtype)
        b = torch.searchsorted(self.cu_half[1:].contiguous(), j, right=True)
        first = (cu[b] + (j - self.cu_half[b])).long()
        self.index = {_FIRST: first, _SECOND: first + (self.cu_half[b + 1] - self.cu_half[b]).long()}

    def take(self, t: Tensor, part: str) -> Tensor:
        return t if part == _ALL else t.index_select(0, self.index[part])

    def take_lse(self, t: Tensor, part: str) -> Tensor:
        return t if part == _ALL else t.index_select(1, self.index[part])

    def varlen(self, part_q: str, part_k: str):
        def cu_max(part):
            return (self.cu, self.max) if part == _ALL else (self.cu_half, self.max // 2)

        (cq, mq), (ck, mk) = cu_max(part_q), cu_max(part_k)
        return cq, ck, mq, mk

    def merge(self, out: Tensor, lse: Tensor, part: str, o_i: Tensor, l_i: Tensor):
        if part == _ALL:  # (1, total, heads, d) and (1, heads, total): the dense merge's layout
            _merge_(out.unsqueeze(0), lse.unsqueeze(0), o_i.unsqueeze(0), l_i.unsqueeze(0))
            return
        i = self.index[part]
        o, l = out.index_select(0, i), lse.index_select(1, i)
        _merge_(o.unsqueeze(0), l.unsqueeze(0), o_i.unsqueeze(0), l_i.unsqueeze(0))
        out.index_copy_(0, i, o)
        lse.index_copy_(1, i, l)

    def add(self, acc: Tensor, part: str, g: Tensor):
        if part == _ALL:
            acc.add_(g)
        else:
            acc.index_add_(0, self.index[part], g.to(acc.dtype))


def _options(scale, causal, varlen):
    # flashlab::fwd / bwd options after (q, k, v) / (dout, q, k, v, out, lse): varlen (cu_seqlens_q,
    # cu_seqlens_k, max_seqlen_q, max_seqlen_k) or none; no ALiBi, sinks, dropout, window or
    # softcap; equal lengths on the diagonal, so either causal alignment fits. (bwd takes one more
    # argument, sink_grad: False here.)
    return (*varlen, None, None, None, scale, causal, "bottom_right", -1, -1, 0.0, 0.0, False, "auto")


# ---------------------------------------------------------------------------------------------
# Forward and backward
# ---------------------------------------------------------------------------------------------
_TAG_KV, _TAG_DKV = 0, 2  # k, v use tags 0, 1; dk, dv use 2, 3 (per step, tags repeat in order)


def _ring_forward(q, k, v, ring: _Ring, causal: bool, scale, lay):
    out = lse = None
    kv = (k, v)
    for step in range(ring.world):
        reqs = []
        if step + 1 < ring.world:  # the next block is on its way while this one is computed
            nxt, reqs = ring.exchange(kv, _TAG_KV)
        qp, kp, c = _plan(step, ring.rank, ring.world, causal)
        o_i, l_i = _FWD(lay.take(q, qp), lay.take(kv[0], kp), lay.take(kv[1], kp),
                        *_options(scale, c, lay.varlen(qp, kp)))  # fmt: skip
        if out is None:  # step 0 covers every query row (the diagonal, or every key)
            out, lse = o_i.float(), l_i.float()
        else:  # in place, into this step's rows
            lay.merge(out, lse, qp, o_i, l_i.float())
        _wait(reqs)
        if step + 1 < ring.world:
            kv = tuple(nxt)
    return out, lse


def _ring_backward(dout, q, k, v, out, lse, ring: _Ring, causal: bool, scale, lay):
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    kv = (k, v)
    dkv_reqs, dkv_in = [], None
    for step in range(ring.world):
        reqs = []
        if step + 1 < ring.world:
            nxt, reqs = ring.exchange(kv, _TAG_KV)
        qp, kp, c = _plan(step, ring.rank, ring.world, causal)
        g = _BWD(lay.take(dout, qp), lay.take(q, qp), lay.take(kv[0], kp), lay.take(kv[1], kp), lay.take(out, qp),
                 lay.take_lse(lse, qp), *_options(scale, c, lay.varlen(qp, kp)), False)  # fmt: skip
        lay.add(dq, qp, g[0])
        # The visiting block's gradient so far came from the previous rank (it held the block one
        # step earlier): this rank's part is added to it in place, and it travels on with the block.
        if step > 0:
            _wait(dkv_reqs)
            dk_i, dv_i = dkv_in
        else:
            dk_i = torch.zeros(k.shape, dtype=torch.float32, device=k.device)
            dv_i = torch.zeros(v.shape, dtype=torch.float32, device=v.device)
        lay.add(dk_i, kp, g[1])
        lay.add(dv_i, kp, g[2])
        if ring.world == 1:  # nothing travels: the block is this rank's own
            dkv_in = (dk_i, dv_i)
            break
        dkv_in, dkv_reqs = ring.exchange((dk_i, dv_i), _TAG_DKV)
        _wait(reqs)
        if step + 1 < ring.world:
            kv = tuple(nxt)
    # After the last step each block's gradient has been sent once more: to its owner.
    _wait(dkv_reqs)
    dk, dv = dkv_in
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, group, causal, scale, cu_seqlens, max_seqlen):
        ring = _Ring(group)
        lay = _Dense(q) if cu_seqlens is None else _Packed(q, cu_seqlens, max_seqlen, causal)
        out32, lse = _ring_forward(q, k, v, ring, causal, scale, lay)
        out = out32.to(q.dtype)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.ring, ctx.causal, ctx.scale, ctx.lay = ring, causal, scale, lay
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _ring_backward(dout.contiguous(), q, k, v, out, lse, ctx.ring, ctx.causal, ctx.scale, ctx.lay)
        return dq, dk, dv, None, None, None, None, None


def ring_attention(q: Tensor, k: Tensor, v: Tensor, group=None, causal: bool = False,
                   softmax_scale: Optional[float] = None, return_lse: bool = False,
                   cu_seqlens: Optional[Tensor] = None, max_seqlen: Optional[int] = None):  # fmt: skip
    """Attention over a sequence sharded across the ranks of `group` (default: the world).

    Args:
        q: this rank's query shard (batch, seqlen_local, heads_q, head_dim); k, v: its key/value
            shard (batch, seqlen_local, heads_kv, head_dim), heads_kv dividing heads_q (GQA/MQA).
            Every rank's shard has the same shape.
        causal: causal attention over the whole sequence; the shards must be in the zigzag layout
            (``zigzag_shard`` / ``zigzag_shard_varlen``). Non-causal: any layout (usually contiguous).
        softmax_scale: default 1/sqrt(head_dim).
        return_lse: also return this rank's rows of the global log-sum-exp, fp32
            (batch, heads_q, seqlen_local), or (heads_q, total_local) packed; not differentiable.
        cu_seqlens: variable-length sequences: q, k, v are packed (total_local, heads, head_dim),
            this rank's part of sequence b at rows [cu_seqlens[b], cu_seqlens[b+1]); int32 (batch + 1,)
            on q's device, the same on every rank (each sequence is split evenly:
            ``zigzag_shard_varlen`` returns it). Causal needs every local length even.
        max_seqlen: the longest local sequence (read from cu_seqlens when not given: one host sync).

    Returns:
        ``out`` (like q: this rank's rows of the full attention), or ``(out, lse)``.
        Differentiable in q, k, v (the ring backward).

    Every rank must call it (collective). Tested with gloo on the CPU (CI) and with NCCL on 2 and 4
    GPUs (python/tests/test_distributed_nccl.py, against one-GPU attention; docs/distributed.md).
    """
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("ring_attention needs an initialized torch.distributed process group")
    if k.shape != v.shape or q.shape[:-2] != k.shape[:-2]:
        raise ValueError("ring_attention: q, k, v shards must have the same tokens and k, v one shape")
    if cu_seqlens is None:
        if q.dim() != 4:
            raise ValueError(f"ring_attention: q must be (batch, seqlen_local, heads, head_dim), got {tuple(q.shape)}")
        if causal and q.shape[1] % 2:
            raise ValueError("ring_attention(causal=True) takes zigzag shards: seqlen_local must be even")
    else:
        if q.dim() != 3:
            raise ValueError(f"ring_attention: with cu_seqlens q must be packed (total_local, heads, head_dim), "
                             f"got {tuple(q.shape)}")  # fmt: skip
        if cu_seqlens.dim() != 1 or cu_seqlens.dtype != torch.int32 or cu_seqlens.device != q.device:
            raise ValueError("ring_attention: cu_seqlens must be int32 (batch + 1,) on q's device")
        if cu_seqlens.device.type == "cpu":  # checked where it costs no synchronization
            lens = cu_seqlens[1:] - cu_seqlens[:-1]
            if int(cu_seqlens[0]) != 0 or int(cu_seqlens[-1]) != q.shape[0] or bool((lens < 0).any()):
                raise ValueError("ring_attention: cu_seqlens must rise from 0 to q.shape[0]")
            if causal and bool((lens % 2).any()):
                raise ValueError("ring_attention(causal=True) takes zigzag shards: every local length must be even")
        if max_seqlen is None:
            max_seqlen = int((cu_seqlens[1:] - cu_seqlens[:-1]).max()) if cu_seqlens.numel() > 1 else 0
    out, lse = _RingAttention.apply(q, k, v, group, causal, softmax_scale, cu_seqlens, max_seqlen)
    return (out, lse) if return_lse else out
