"""FlashAttention-2 in Triton: forward and backward, for a learner.

Forward (one program per (query block, batch, head)):
    for each key block j:                 S = Q·Kjᵀ·scale        (BLOCK_M, BLOCK_N), on chip only
        m_new = max(m, rowmax(S));        P = exp(S - m_new);    alpha = exp(m - m_new)
        l = alpha·l + rowsum(P);          O = alpha·O + P·Vj;     m = m_new
    O /= l;  LSE = m + log(l)
  The running state (O, l, m) lives in registers for the whole loop: the difference from
  FlashAttention-1 (fa1.py), whose outer loop is over keys and whose O, l, m go back to device memory
  after every block.

Backward (three launches):
    1. preprocess   Delta_i = rowsum(dO_i ∘ O_i)                 (one float per query row)
    2. dK/dV        one program per (key block, batch, kv head):  for each query block i of each
                    query head of the group: P = exp(S - LSE), dV += Pᵀ·dO, dP = dO·Vᵀ,
                    dS = P∘(dP - Delta), dK += dSᵀ·Q.  dK and dV stay in registers: no atomics,
                    and GQA needs no extra buffer (the program loops over the heads of its group).
    3. dQ           one program per (query block, batch, head):  the same S, P, dP, dS recomputed
                    over key blocks, dQ += dS·K.
  dQ gets its own kernel rather than atomics: the dK/dV program meets every (query block, key block)
  pair, so it could add dS·K into a float32 dQ with tl.atomic_add (5 products, FA2's paper). A
  separate pass costs two more products (QKᵀ and dO·Vᵀ again: 7 instead of 5) but is deterministic
  (the same bits every run), needs no float32 dQ buffer nor a zeroing pass, and its stores are
  plain. docs/learn/triton.md discusses the trade (and exercise 2 builds the atomic version).

Masks: a key block is "full" when every query row of the tile sees every key in it; those blocks run
a mask-free copy of the loop body (MASKED=False); only blocks that cross the causal diagonal or the
end of the sequence pay for the mask. Causal masks are bottom-right aligned: row i sees key j iff
j <= i + seqlen_k - seqlen_q; rows that see no key get O = 0 and LSE = -inf.

Scores are kept in base 2 (the scale times log2(e) is folded into one multiply): see _common.py.
"""
import torch
import triton
import triton.language as tl

from ._common import LN2, LOG2E, TileConfig, check_inputs, strides4

# Python floats a @triton.jit function may read must be declared constexpr.
_LOG2E = tl.constexpr(LOG2E)
_LN2 = tl.constexpr(LN2)


# The one place tile sizes are chosen. Every choice compiles for sm_90 without register spills but
# the d 256 dK/dV one (112 bytes, the fewest of its candidates)
# (`python -m flashlab.triton.resources` prints registers, spills, shared memory and wgmma counts
# with no GPU); `python -m flashlab.triton.tune` times the candidates on a GPU (not yet run on the
# H100 for these defaults: docs/learn/triton.md).
# The O accumulator (block_m x head_dim floats) and, backward, dK and dV (2 x block_n x head_dim
# floats) must fit the registers of num_warps warps: 255 per thread at most.
def fwd_config(head_dim):
    if head_dim <= 64:
        return TileConfig(block_m=128, block_n=64, num_warps=4, num_stages=3)
    if head_dim <= 128:
        return TileConfig(block_m=128, block_n=64, num_warps=8, num_stages=3)
    return TileConfig(block_m=64, block_n=64, num_warps=8, num_stages=2)    # 4 warps spill at 256


def bwd_configs(head_dim):
    """(dK/dV config, dQ config). In the dK/dV kernel block_n is the key block a program owns and
    block_m the query block it streams: a short block_m keeps the transposed scores small."""
    if head_dim <= 64:
        return TileConfig(32, 128, 8, 3), TileConfig(128, 64, 8, 2)
    if head_dim <= 128:
        return TileConfig(32, 128, 8, 3), TileConfig(128, 64, 8, 2)
    return TileConfig(16, 64, 8, 2), TileConfig(64, 32, 8, 2)


@triton.jit
def _fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, start, end, offs_m, offs_n,
               seqlen_q, seqlen_k, qk_scale, stride_kn, stride_vn,
               MASKED: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr):
    """Online softmax over key blocks [start, end). MASKED=False is the fast copy for full blocks."""
    for start_n in range(start, end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n                                                # (BLOCK_N,)
        if MASKED:
            k = tl.load(k_ptrs + start_n * stride_kn, mask=cols[:, None] < seqlen_k, other=0.0)
        else:
            k = tl.load(k_ptrs + start_n * stride_kn)                          # (BLOCK_N, D)
        s = tl.dot(q, tl.trans(k)) * qk_scale                                  # (BLOCK_M, BLOCK_N)
        if MASKED:
            visible = cols[None, :] < seqlen_k
            if CAUSAL:
                visible = visible & (cols[None, :] <= offs_m[:, None] + (seqlen_k - seqlen_q))
            s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))                                  # (BLOCK_M,)
        if MASKED:
            # A row that has seen no key yet has m_new = -inf; exp2(-inf - -inf) would be NaN.
            # Subtracting 0 instead gives p = 0 and alpha = 0: the row stays empty.
            m_new = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_new[:, None])                                   # (BLOCK_M, BLOCK_N)
        alpha = tl.math.exp2(m_i - m_new)                                      # rescales the old state
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_ptrs + start_n * stride_vn, mask=cols[:, None] < seqlen_k, other=0.0)
        else:
            v = tl.load(v_ptrs + start_n * stride_vn)                          # (BLOCK_N, D)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])                   # (BLOCK_M, D), fp32
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _query_tile(heads_q, group, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr):
    """This program's query tile: (bh, b, h, h_kv, start_m) from the grid (query block, batch * heads_q).
    Causal tiles are taken last first: the tiles near the end see the most keys, so issuing them
    first shortens the last wave. GQA: `group` query heads share K/V head h_kv."""
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    bh = tl.program_id(1)
    h = bh % heads_q
    return bh, bh // heads_q, h, h // group, pid_m * BLOCK_M


@triton.jit
def _key_range(start_m, seqlen_q, seqlen_k, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(end, full_end) for the query tile starting at row start_m: keys [0, end) are seen by some row
    of the tile, keys [0, full_end) (whole key blocks) by every row: those blocks need no mask.
    Causal masks are bottom-right aligned. Shared by the forward and the dQ kernel (and fa2_tma.py)."""
    if CAUSAL:
        shift = seqlen_k - seqlen_q
        end = tl.minimum(seqlen_k, start_m + BLOCK_M + shift)
        full_end = tl.minimum(seqlen_k, start_m + 1 + shift)
    else:
        end = seqlen_k
        full_end = seqlen_k
    end = tl.maximum(end, 0)
    full_end = tl.maximum(full_end, 0) // BLOCK_N * BLOCK_N
    return end, full_end


@triton.jit
def _finish(acc, l_i, m_i):
    """The forward's epilogue: O = acc / l and LSE = (m + log2 l) · ln 2 (natural log). l = 0 only for
    a row that saw no key: O = 0 and LSE = -inf, by definition."""
    empty = l_i == 0.0
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    lse = tl.where(empty, float("-inf"), (m_i + tl.math.log2(tl.where(empty, 1.0, l_i))) * _LN2)
    return out, lse


# Triton specializes integer arguments equal to 1 or divisible by 16; the kernels gain nothing
# from that for seqlens, so they are exempt (fewer compiled variants across awkward shapes).
@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _fwd_kernel(Q, K, V, O, LSE,
                sqb, sqm, sqh, sqd, skb, skn, skh, skd, svb, svn, svh, svd, sob, som, soh, sod,
                seqlen_q, seqlen_k, heads_q, group, qk_scale,
                CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    bh, b, h, h_kv, start_m = _query_tile(heads_q, group, CAUSAL, BLOCK_M)   # causal: longest tiles first
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    # 64-bit base offsets: batch * stride can pass 2^31 elements on large inputs.
    q_base = Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
    k_ptrs = K + b.to(tl.int64) * skb + h_kv.to(tl.int64) * skh + offs_n[:, None] * skn + offs_d[None, :] * skd
    v_ptrs = V + b.to(tl.int64) * svb + h_kv.to(tl.int64) * svh + offs_n[:, None] * svn + offs_d[None, :] * svd
    row_ok = offs_m[:, None] < seqlen_q
    q = tl.load(q_base + offs_m[:, None] * sqm + offs_d[None, :] * sqd, mask=row_ok, other=0.0)

    end, full_end = _key_range(start_m, seqlen_q, seqlen_k, CAUSAL, BLOCK_M, BLOCK_N)   # this tile's keys

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, 0, full_end, offs_m, offs_n,
                               seqlen_q, seqlen_k, qk_scale, skn, svn, False, CAUSAL, BLOCK_N)
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_ptrs, v_ptrs, full_end, end, offs_m, offs_n,
                               seqlen_q, seqlen_k, qk_scale, skn, svn, True, CAUSAL, BLOCK_N)

    out, lse = _finish(acc, l_i, m_i)
    o_ptrs = O + b.to(tl.int64) * sob + h.to(tl.int64) * soh + offs_m[:, None] * som + offs_d[None, :] * sod
    tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=row_ok)
    tl.store(LSE + bh.to(tl.int64) * seqlen_q + offs_m, lse, mask=offs_m < seqlen_q)


def _forward_outputs(q, k, v, softmax_scale):
    """check_inputs' tuple, and the forward's outputs (uninitialized): out (batch, seqlen_q, heads_q,
    head_dim) in q's dtype, lse (batch, heads_q, seqlen_q) float32. fa2_forward's and fa2_tma's."""
    dims = check_inputs(q, k, v, softmax_scale)
    batch, seqlen_q, _, heads_q, _, head_dim, _ = dims
    out = torch.empty((batch, seqlen_q, heads_q, head_dim), dtype=q.dtype, device=q.device)
    lse = torch.empty((batch, heads_q, seqlen_q), dtype=torch.float32, device=q.device)
    return dims, out, lse


def fa2_forward(q, k, v, causal=False, softmax_scale=None, config=None):
    """Raw forward: returns (out, lse). No autograd; see fa2_attention."""
    (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, scale), out, lse = _forward_outputs(q, k, v, softmax_scale)
    if out.numel() == 0:
        return out, lse
    cfg = config or fwd_config(head_dim)
    grid = (triton.cdiv(seqlen_q, cfg.block_m), batch * heads_q)
    _fwd_kernel[grid](q, k, v, out, lse, *strides4(q), *strides4(k), *strides4(v), *strides4(out),
                      seqlen_q, seqlen_k, heads_q, heads_q // heads_kv, scale * LOG2E,
                      CAUSAL=bool(causal), HEAD_DIM=head_dim, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                      num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return out, lse


# ----------------------------------------------------------------------------------------- backward

@triton.jit(do_not_specialize=["seqlen_q"])
def _bwd_preprocess(O, DO, DELTA, sob, som, soh, sod, sdb, sdm, sdh, sdd, seqlen_q, heads_q,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """Delta_i = rowsum(dO_i ∘ O_i) = rowsum(P_i ∘ dP_i): the term every dS_ij needs."""
    bh = tl.program_id(1)
    b = bh // heads_q
    h = bh % heads_q
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m[:, None] < seqlen_q
    o = tl.load(O + b.to(tl.int64) * sob + h.to(tl.int64) * soh + offs_m[:, None] * som + offs_d[None, :] * sod,
                mask=row_ok, other=0.0)
    do = tl.load(DO + b.to(tl.int64) * sdb + h.to(tl.int64) * sdh + offs_m[:, None] * sdm + offs_d[None, :] * sdd,
                 mask=row_ok, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + bh.to(tl.int64) * seqlen_q + offs_m, delta, mask=offs_m < seqlen_q)


@triton.jit
def _dkdv_inner(dk, dv, k, v, q_ptrs, do_ptrs, lse_ptr, delta_ptr, start, end, offs_n, offs_mb,
                seqlen_q, seqlen_k, qk_scale, stride_qm, stride_dom,
                MASKED: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr):
    """Stream query blocks [start, end) past one key block. Everything is computed transposed
    (keys along rows: Sᵀ = K·Qᵀ), so that dV += Pᵀ·dO and dK += dSᵀ·Q need no transposed P."""
    for start_m in range(start, end, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        rows = start_m + offs_mb                                               # (BLOCK_M,)
        if MASKED:
            q = tl.load(q_ptrs + start_m * stride_qm, mask=rows[:, None] < seqlen_q, other=0.0)
            do = tl.load(do_ptrs + start_m * stride_dom, mask=rows[:, None] < seqlen_q, other=0.0)
            lse = tl.load(lse_ptr + rows, mask=rows < seqlen_q, other=0.0)
            delta = tl.load(delta_ptr + rows, mask=rows < seqlen_q, other=0.0)
        else:
            q = tl.load(q_ptrs + start_m * stride_qm)                          # (BLOCK_M, D)
            do = tl.load(do_ptrs + start_m * stride_dom)                       # (BLOCK_M, D)
            lse = tl.load(lse_ptr + rows)
            delta = tl.load(delta_ptr + rows)
        s_t = tl.dot(k, tl.trans(q)) * qk_scale                                # (BLOCK_N, BLOCK_M)
        p_t = tl.math.exp2(s_t - lse[None, :] * _LOG2E)            # P = exp(S - LSE)
        if MASKED:
            # Zero after the exp: a row with no visible key has LSE = -inf and exp2 gives +inf,
            # which the where() drops (no NaN: nothing multiplies the inf before it is dropped).
            visible = rows[None, :] < seqlen_q
            if CAUSAL:
                visible = visible & (offs_n[:, None] <= rows[None, :] + (seqlen_k - seqlen_q))
            p_t = tl.where(visible, p_t, 0.0)
        dv += tl.dot(p_t.to(do.dtype), do)                                     # (BLOCK_N, D)
        dp_t = tl.dot(v, tl.trans(do))                                         # (BLOCK_N, BLOCK_M)
        ds_t = p_t * (dp_t - delta[None, :])
        dk += tl.dot(ds_t.to(q.dtype), q)                                      # (BLOCK_N, D)
    return dk, dv


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _bwd_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV,
                     sqb, sqm, sqh, sqd, skb, skn, skh, skd, svb, svn, svh, svd, sdb, sdm, sdh, sdd,
                     sdkb, sdkn, sdkh, sdkd, sdvb, sdvn, sdvh, sdvd,
                     seqlen_q, seqlen_k, heads_q, heads_kv, group, qk_scale, softmax_scale,
                     CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    bh = tl.program_id(1)
    b = bh // heads_kv
    h_kv = bh % heads_kv
    start_n = tl.program_id(0) * BLOCK_N
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_mb = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    key_ok = offs_n[:, None] < seqlen_k
    k = tl.load(K + b.to(tl.int64) * skb + h_kv.to(tl.int64) * skh + offs_n[:, None] * skn + offs_d[None, :] * skd,
                mask=key_ok, other=0.0)                                        # (BLOCK_N, D)
    v = tl.load(V + b.to(tl.int64) * svb + h_kv.to(tl.int64) * svh + offs_n[:, None] * svn + offs_d[None, :] * svd,
                mask=key_ok, other=0.0)
    # Keys past seqlen_k were loaded as 0; their dK/dV rows are garbage that is never stored, and
    # rows of a matrix product do not mix, so no mask is needed for them inside the loops.

    # Query range. Causal: rows before first_row see no key of this block; from full_row on, every
    # row sees every key of it. Query blocks past seqlen_q // BLOCK_M need the row-bound mask.
    q_end = tl.cdiv(seqlen_q, BLOCK_M) * BLOCK_M
    q_full_end = seqlen_q // BLOCK_M * BLOCK_M
    if CAUSAL:
        shift = seqlen_k - seqlen_q
        first_row = tl.maximum(start_n - shift, 0)
        lo = first_row // BLOCK_M * BLOCK_M
        full_row = tl.maximum(start_n + BLOCK_N - 1 - shift, 0)
        lo_full = tl.cdiv(full_row, BLOCK_M) * BLOCK_M
    else:
        lo = 0
        lo_full = 0

    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    for g in range(0, group):                       # GQA: every query head that reads this K/V head
        h = h_kv * group + g
        q_ptrs = Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh + offs_mb[:, None] * sqm + offs_d[None, :] * sqd
        do_ptrs = DO + b.to(tl.int64) * sdb + h.to(tl.int64) * sdh + offs_mb[:, None] * sdm + offs_d[None, :] * sdd
        row_base = (b * heads_q + h).to(tl.int64) * seqlen_q
        # Three ranges: the diagonal blocks (masked), the full blocks, the ragged last block.
        dk, dv = _dkdv_inner(dk, dv, k, v, q_ptrs, do_ptrs, LSE + row_base, DELTA + row_base,
                             lo, tl.minimum(lo_full, q_end), offs_n, offs_mb, seqlen_q, seqlen_k, qk_scale,
                             sqm, sdm, True, CAUSAL, BLOCK_M)
        dk, dv = _dkdv_inner(dk, dv, k, v, q_ptrs, do_ptrs, LSE + row_base, DELTA + row_base,
                             lo_full, q_full_end, offs_n, offs_mb, seqlen_q, seqlen_k, qk_scale,
                             sqm, sdm, False, CAUSAL, BLOCK_M)
        dk, dv = _dkdv_inner(dk, dv, k, v, q_ptrs, do_ptrs, LSE + row_base, DELTA + row_base,
                             tl.maximum(lo_full, q_full_end), q_end, offs_n, offs_mb, seqlen_q, seqlen_k,
                             qk_scale, sqm, sdm, True, CAUSAL, BLOCK_M)

    dk_ptrs = DK + b.to(tl.int64) * sdkb + h_kv.to(tl.int64) * sdkh + offs_n[:, None] * sdkn + offs_d[None, :] * sdkd
    dv_ptrs = DV + b.to(tl.int64) * sdvb + h_kv.to(tl.int64) * sdvh + offs_n[:, None] * sdvn + offs_d[None, :] * sdvd
    tl.store(dk_ptrs, (dk * softmax_scale).to(DK.dtype.element_ty), mask=key_ok)   # dK = scale·dSᵀQ
    tl.store(dv_ptrs, dv.to(DV.dtype.element_ty), mask=key_ok)


@triton.jit
def _dq_inner(dq, q, do, lse, delta, k_ptrs, v_ptrs, start, end, offs_m, offs_n,
              seqlen_q, seqlen_k, qk_scale, stride_kn, stride_vn,
              MASKED: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr):
    for start_n in range(start, end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        if MASKED:
            k = tl.load(k_ptrs + start_n * stride_kn, mask=cols[:, None] < seqlen_k, other=0.0)
            v = tl.load(v_ptrs + start_n * stride_vn, mask=cols[:, None] < seqlen_k, other=0.0)
        else:
            k = tl.load(k_ptrs + start_n * stride_kn)                          # (BLOCK_N, D)
            v = tl.load(v_ptrs + start_n * stride_vn)
        s = tl.dot(q, tl.trans(k)) * qk_scale                                  # (BLOCK_M, BLOCK_N)
        p = tl.math.exp2(s - lse[:, None])
        if MASKED:
            visible = cols[None, :] < seqlen_k
            if CAUSAL:
                visible = visible & (cols[None, :] <= offs_m[:, None] + (seqlen_k - seqlen_q))
            p = tl.where(visible, p, 0.0)
        dp = tl.dot(do, tl.trans(v))                                           # (BLOCK_M, BLOCK_N)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)                                     # (BLOCK_M, D)
    return dq


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _bwd_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ,
                   sqb, sqm, sqh, sqd, skb, skn, skh, skd, svb, svn, svh, svd, sdb, sdm, sdh, sdd,
                   sdqb, sdqm, sdqh, sdqd,
                   seqlen_q, seqlen_k, heads_q, group, qk_scale, softmax_scale,
                   CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    bh, b, h, h_kv, start_m = _query_tile(heads_q, group, CAUSAL, BLOCK_M)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seqlen_q
    q = tl.load(Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + b.to(tl.int64) * sdb + h.to(tl.int64) * sdh + offs_m[:, None] * sdm + offs_d[None, :] * sdd,
                 mask=row_ok[:, None], other=0.0)
    lse = tl.load(LSE + bh.to(tl.int64) * seqlen_q + offs_m, mask=row_ok, other=0.0) * _LOG2E
    delta = tl.load(DELTA + bh.to(tl.int64) * seqlen_q + offs_m, mask=row_ok, other=0.0)
    k_ptrs = K + b.to(tl.int64) * skb + h_kv.to(tl.int64) * skh + offs_n[:, None] * skn + offs_d[None, :] * skd
    v_ptrs = V + b.to(tl.int64) * svb + h_kv.to(tl.int64) * svh + offs_n[:, None] * svn + offs_d[None, :] * svd

    end, full_end = _key_range(start_m, seqlen_q, seqlen_k, CAUSAL, BLOCK_M, BLOCK_N)   # the forward's ranges

    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    dq = _dq_inner(dq, q, do, lse, delta, k_ptrs, v_ptrs, 0, full_end, offs_m, offs_n,
                   seqlen_q, seqlen_k, qk_scale, skn, svn, False, CAUSAL, BLOCK_N)
    dq = _dq_inner(dq, q, do, lse, delta, k_ptrs, v_ptrs, full_end, end, offs_m, offs_n,
                   seqlen_q, seqlen_k, qk_scale, skn, svn, True, CAUSAL, BLOCK_N)
    dq_ptrs = DQ + b.to(tl.int64) * sdqb + h.to(tl.int64) * sdqh + offs_m[:, None] * sdqm + offs_d[None, :] * sdqd
    tl.store(dq_ptrs, (dq * softmax_scale).to(DQ.dtype.element_ty), mask=row_ok[:, None])


def fa2_backward(do, q, k, v, out, lse, causal=False, softmax_scale=None, configs=None):
    """Raw backward: returns (dq, dk, dv) for the forward that produced out and lse."""
    batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, scale = check_inputs(q, k, v, softmax_scale)
    dq = torch.empty((batch, seqlen_q, heads_q, head_dim), dtype=q.dtype, device=q.device)
    dk = torch.empty((batch, seqlen_k, heads_kv, head_dim), dtype=k.dtype, device=k.device)
    dv = torch.empty_like(dk)
    if dq.numel() == 0 or dk.numel() == 0:            # nothing to attend: every gradient is zero
        return dq.zero_(), dk.zero_(), dv.zero_()
    cfg_kv, cfg_q = configs or bwd_configs(head_dim)
    group = heads_q // heads_kv
    delta = torch.empty_like(lse)
    pre_m = 64
    _bwd_preprocess[(triton.cdiv(seqlen_q, pre_m), batch * heads_q)](
        out, do, delta, *strides4(out), *strides4(do), seqlen_q, heads_q, HEAD_DIM=head_dim, BLOCK_M=pre_m)
    common = (*strides4(q), *strides4(k), *strides4(v), *strides4(do))
    _bwd_dkdv_kernel[(triton.cdiv(seqlen_k, cfg_kv.block_n), batch * heads_kv)](
        q, k, v, do, lse, delta, dk, dv, *common, *strides4(dk), *strides4(dv),
        seqlen_q, seqlen_k, heads_q, heads_kv, group, scale * LOG2E, scale,
        CAUSAL=bool(causal), HEAD_DIM=head_dim, BLOCK_M=cfg_kv.block_m, BLOCK_N=cfg_kv.block_n,
        num_warps=cfg_kv.num_warps, num_stages=cfg_kv.num_stages)
    _bwd_dq_kernel[(triton.cdiv(seqlen_q, cfg_q.block_m), batch * heads_q)](
        q, k, v, do, lse, delta, dq, *common, *strides4(dq),
        seqlen_q, seqlen_k, heads_q, group, scale * LOG2E, scale,
        CAUSAL=bool(causal), HEAD_DIM=head_dim, BLOCK_M=cfg_q.block_m, BLOCK_N=cfg_q.block_n,
        num_warps=cfg_q.num_warps, num_stages=cfg_q.num_stages)
    return dq, dk, dv
