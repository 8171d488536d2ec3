"""FlashAttention-1 in Triton: the paper's Algorithm 1 (forward) and Algorithm 2 (backward).

Dao et al. 2022, "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness".
The structure is kept on purpose, slow parts included, so that fa2.py reads as the fix:

Forward (Algorithm 1), one program per (batch, head):
    O = 0, l = 0, m = -inf in device memory (float32 here; the paper keeps the input precision)
    for each key block j:                         load Kj, Vj once          (outer loop)
        for each query block i:                   load Qi, Oi, li, mi       (inner loop)
            S = Qi·Kjᵀ·scale;  m~ = rowmax(S);  P~ = exp(S - m~);  l~ = rowsum(P~)
            m_new = max(mi, m~);  l_new = exp(mi - m_new)·li + exp(m~ - m_new)·l~
            Oi = (li·exp(mi - m_new)·Oi + exp(m~ - m_new)·P~·Vj) / l_new
            write Oi, l_new, m_new back to device memory
  Every inner step reads and writes a whole O tile: seqlen_k / BLOCK_N round trips per element.
  And only batch x heads programs exist: at seqlen 16k with 16 heads, 16 of the H100's 132 SMs work.

Backward (Algorithm 2), one program per (batch, kv head):
    for each key block j:                         load Kj, Vj; dKj = dVj = 0 in registers
        for each query head of the GQA group, for each query block i:
            load Qi, Oi, dOi, dQi, LSEi
            P = exp(S - LSE)      (the paper writes diag(l)^-1·exp(S - m): the same numbers)
            dVj += Pᵀ·dOi;  dP = dOi·Vjᵀ;  Di = rowsum(dOi ∘ Oi);  dS = P∘(dP - Di)
            dQi += scale·dS·Kj    read-modify-write in device memory (float32)
            dKj += scale·dSᵀ·Qi
        write dKj, dVj
  The program owns every query row of its heads, so the dQ read-modify-write has no race between
  programs. Inside one program it does have a hazard the paper's pseudo-code hides: the thread that
  loads a dQ (or O) element in the next outer iteration need not be the thread that stored it, so a
  barrier (tl.debug_barrier, i.e. __syncthreads) follows every store that a later load reads back.
"""
import torch
import triton
import triton.language as tl

from ._common import LN2, LOG2E, TileConfig, check_inputs, strides4

_LOG2E = tl.constexpr(LOG2E)


def fa1_config(head_dim, backward=False):
    """Tile sizes: spill-free on sm_90 (see fa2.py's note); FA1 is the slow reference of the
    lesson, so no timing went into them. The backward holds Kj, Vj, dKj and dVj at once."""
    if not backward:
        return TileConfig(64, 64, 4, 2) if head_dim <= 128 else TileConfig(32, 32, 4, 2)
    if head_dim <= 64:
        return TileConfig(64, 64, 8, 2)
    return TileConfig(32, 64, 8, 2) if head_dim <= 128 else TileConfig(32, 32, 8, 2)


@triton.jit
def _visible(rows, cols, seqlen_q, seqlen_k, CAUSAL: tl.constexpr):
    """(BLOCK_M, BLOCK_N) mask of the (query, key) pairs that exist and pass the causal mask."""
    ok = (rows[:, None] < seqlen_q) & (cols[None, :] < seqlen_k)
    if CAUSAL:
        ok = ok & (cols[None, :] <= rows[:, None] + (seqlen_k - seqlen_q))
    return ok


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _fa1_fwd_kernel(Q, K, V, O, M, L,
                    sqb, sqm, sqh, sqd, skb, skn, skh, skd, svb, svn, svh, svd, sob, som, soh, sod,
                    seqlen_q, seqlen_k, heads_q, group, qk_scale,
                    CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    bh = tl.program_id(0)
    b = bh // heads_q
    h = bh % heads_q
    h_kv = h // group
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_base = Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
    o_base = O + b.to(tl.int64) * sob + h.to(tl.int64) * soh
    ml_base = bh.to(tl.int64) * seqlen_q
    for start_n in range(0, seqlen_k, BLOCK_N):                               # outer loop: K/V blocks
        cols = start_n + offs_n
        kv_mask = cols[:, None] < seqlen_k
        k = tl.load(K + b.to(tl.int64) * skb + h_kv.to(tl.int64) * skh + cols[:, None] * skn + offs_d[None, :] * skd,
                    mask=kv_mask, other=0.0)                                   # (BLOCK_N, D)
        v = tl.load(V + b.to(tl.int64) * svb + h_kv.to(tl.int64) * svh + cols[:, None] * svn + offs_d[None, :] * svd,
                    mask=kv_mask, other=0.0)
        lo = 0
        if CAUSAL:  # query rows before start_n - shift see no key of this block: skip their tiles
            lo = tl.maximum(start_n - (seqlen_k - seqlen_q), 0) // BLOCK_M * BLOCK_M
        for start_m in range(lo, seqlen_q, BLOCK_M):                          # inner loop: Q blocks
            rows = start_m + offs_m
            row_ok = rows < seqlen_q
            q = tl.load(q_base + rows[:, None] * sqm + offs_d[None, :] * sqd, mask=row_ok[:, None], other=0.0)
            o_ptrs = o_base + rows[:, None] * som + offs_d[None, :] * sod
            o = tl.load(o_ptrs, mask=row_ok[:, None], other=0.0)              # (BLOCK_M, D) fp32
            m_i = tl.load(M + ml_base + rows, mask=row_ok, other=float("-inf"))
            l_i = tl.load(L + ml_base + rows, mask=row_ok, other=0.0)

            s = tl.dot(q, tl.trans(k)) * qk_scale                              # (BLOCK_M, BLOCK_N), base 2
            s = tl.where(_visible(rows, cols, seqlen_q, seqlen_k, CAUSAL), s, float("-inf"))
            m_blk = tl.max(s, 1)                                               # m~
            m_blk_safe = tl.where(m_blk == float("-inf"), 0.0, m_blk)         # row with no key here
            p = tl.math.exp2(s - m_blk_safe[:, None])                          # P~
            l_blk = tl.sum(p, 1)                                               # l~
            m_new = tl.maximum(m_i, m_blk)
            m_new_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            a_old = tl.math.exp2(m_i - m_new_safe)                             # exp(mi - m_new)
            a_blk = tl.math.exp2(m_blk_safe - m_new_safe)                      # exp(m~ - m_new)
            a_blk = tl.where(m_blk == float("-inf"), 0.0, a_blk)
            l_new = a_old * l_i + a_blk * l_blk
            pv = tl.dot(p.to(v.dtype), v)                                      # P~·Vj, (BLOCK_M, D)
            o = (o * (l_i * a_old)[:, None] + pv * a_blk[:, None]) / tl.where(l_new == 0.0, 1.0, l_new)[:, None]

            tl.store(o_ptrs, o, mask=row_ok[:, None])                         # the round trip
            tl.store(M + ml_base + rows, m_new, mask=row_ok)
            tl.store(L + ml_base + rows, l_new, mask=row_ok)
            tl.debug_barrier()  # the next outer iteration's loads may run on other threads


def fa1_forward(q, k, v, causal=False, softmax_scale=None, config=None):
    """Raw forward: returns (out, lse). No autograd; see fa1_attention."""
    batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, scale = check_inputs(q, k, v, softmax_scale)
    # The algorithm's state in device memory: O (float32 for accuracy), m and l (base-2 units).
    o = torch.zeros((batch, seqlen_q, heads_q, head_dim), dtype=torch.float32, device=q.device)
    m = torch.full((batch, heads_q, seqlen_q), float("-inf"), dtype=torch.float32, device=q.device)
    l = torch.zeros((batch, heads_q, seqlen_q), dtype=torch.float32, device=q.device)
    if o.numel() > 0 and seqlen_k > 0:
        cfg = config or fa1_config(head_dim)
        _fa1_fwd_kernel[(batch * heads_q,)](
            q, k, v, o, m, l, *strides4(q), *strides4(k), *strides4(v), *strides4(o),
            seqlen_q, seqlen_k, heads_q, heads_q // heads_kv, scale * LOG2E,
            CAUSAL=bool(causal), HEAD_DIM=head_dim, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    # LSE = m + log(l) (in base 2, then to natural log); l = 0 (no visible key) gives -inf.
    lse = (m + torch.log2(l)) * LN2
    return o.to(q.dtype), lse


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _fa1_bwd_kernel(Q, K, V, O, DO, LSE, DQ, DK, DV,
                    sqb, sqm, sqh, sqd, skb, skn, skh, skd, svb, svn, svh, svd,
                    sob, som, soh, sod, sdb, sdm, sdh, sdd, sqgb, sqgm, sqgh, sqgd,
                    sdkb, sdkn, sdkh, sdkd, sdvb, sdvn, sdvh, sdvd,
                    seqlen_q, seqlen_k, heads_q, heads_kv, group, qk_scale, softmax_scale,
                    CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    bh = tl.program_id(0)
    b = bh // heads_kv
    h_kv = bh % heads_kv
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(0, seqlen_k, BLOCK_N):                               # outer loop: K/V blocks
        cols = start_n + offs_n
        kv_ok = cols[:, None] < seqlen_k
        k = tl.load(K + b.to(tl.int64) * skb + h_kv.to(tl.int64) * skh + cols[:, None] * skn + offs_d[None, :] * skd,
                    mask=kv_ok, other=0.0)
        v = tl.load(V + b.to(tl.int64) * svb + h_kv.to(tl.int64) * svh + cols[:, None] * svn + offs_d[None, :] * svd,
                    mask=kv_ok, other=0.0)
        dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
        dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
        lo = 0
        if CAUSAL:
            lo = tl.maximum(start_n - (seqlen_k - seqlen_q), 0) // BLOCK_M * BLOCK_M
        for g in range(0, group):                                             # query heads of this K/V head
            h = h_kv * group + g
            for start_m in range(lo, seqlen_q, BLOCK_M):                      # inner loop: Q blocks
                rows = start_m + offs_m
                rmask = rows[:, None] < seqlen_q
                q = tl.load(Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh + rows[:, None] * sqm + offs_d[None, :] * sqd,
                            mask=rmask, other=0.0)
                o = tl.load(O + b.to(tl.int64) * sob + h.to(tl.int64) * soh + rows[:, None] * som + offs_d[None, :] * sod,
                            mask=rmask, other=0.0)
                do = tl.load(DO + b.to(tl.int64) * sdb + h.to(tl.int64) * sdh + rows[:, None] * sdm + offs_d[None, :] * sdd,
                             mask=rmask, other=0.0)
                dq_ptrs = DQ + b.to(tl.int64) * sqgb + h.to(tl.int64) * sqgh + rows[:, None] * sqgm + offs_d[None, :] * sqgd
                dq = tl.load(dq_ptrs, mask=rmask, other=0.0)                  # (BLOCK_M, D) fp32
                lse = tl.load(LSE + (b * heads_q + h).to(tl.int64) * seqlen_q + rows, mask=rows < seqlen_q, other=0.0)

                s = tl.dot(q, tl.trans(k)) * qk_scale                          # (BLOCK_M, BLOCK_N), base 2
                p = tl.math.exp2(s - lse[:, None] * _LOG2E)
                # Masked after the exp: a row with no key has LSE = -inf, exp2 gives +inf, dropped here.
                p = tl.where(_visible(rows, cols, seqlen_q, seqlen_k, CAUSAL), p, 0.0)
                dv += tl.dot(tl.trans(p.to(do.dtype)), do)                     # dVj += Pᵀ·dOi
                dp = tl.dot(do, tl.trans(v))                                   # dP = dOi·Vjᵀ
                d_i = tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)          # Di = rowsum(dOi ∘ Oi)
                ds = p * (dp - d_i[:, None])                                   # dS = P∘(dP - Di)
                dq += tl.dot(ds.to(k.dtype), k) * softmax_scale                # dQi += scale·dS·Kj
                dk += tl.dot(tl.trans(ds.to(q.dtype)), q)                      # dKj += dSᵀ·Qi
                tl.store(dq_ptrs, dq, mask=rmask)                              # the round trip
                tl.debug_barrier()
        dk_ptrs = DK + b.to(tl.int64) * sdkb + h_kv.to(tl.int64) * sdkh + cols[:, None] * sdkn + offs_d[None, :] * sdkd
        dv_ptrs = DV + b.to(tl.int64) * sdvb + h_kv.to(tl.int64) * sdvh + cols[:, None] * sdvn + offs_d[None, :] * sdvd
        tl.store(dk_ptrs, (dk * softmax_scale).to(DK.dtype.element_ty), mask=kv_ok)
        tl.store(dv_ptrs, dv.to(DV.dtype.element_ty), mask=kv_ok)


def fa1_backward(do, q, k, v, out, lse, causal=False, softmax_scale=None, config=None):
    """Raw backward: returns (dq, dk, dv) for the forward that produced out and lse."""
    batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, scale = check_inputs(q, k, v, softmax_scale)
    dq = torch.zeros((batch, seqlen_q, heads_q, head_dim), dtype=torch.float32, device=q.device)
    dk = torch.zeros((batch, seqlen_k, heads_kv, head_dim), dtype=k.dtype, device=k.device)
    dv = torch.zeros_like(dk)
    if dq.numel() > 0 and dk.numel() > 0:
        cfg = config or fa1_config(head_dim, backward=True)
        _fa1_bwd_kernel[(batch * heads_kv,)](
            q, k, v, out, do, lse, dq, dk, dv, *strides4(q), *strides4(k), *strides4(v), *strides4(out),
            *strides4(do), *strides4(dq), *strides4(dk), *strides4(dv),
            seqlen_q, seqlen_k, heads_q, heads_kv, heads_q // heads_kv, scale * LOG2E, scale,
            CAUSAL=bool(causal), HEAD_DIM=head_dim, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return dq.to(q.dtype), dk, dv
