"""FlashAttention-2's forward with Hopper's tensor memory accelerator (TMA): the Hopper step in Triton.

fa2.py loads a tile with a grid of pointers: every thread computes the addresses of its elements,
masks the rows past the sequence's end, and the compiler turns the loads into cp.async copies
(Ampere's asynchronous copy, one 16-byte piece per thread and instruction). Here the same kernel
describes each tensor once, on the host, as a TMA *tensor descriptor*

    TensorDescriptor(q, shape=(batch, seqlen, heads, head_dim), strides=q.stride(),
                     block_shape=(1, BLOCK_M, 1, head_dim))

and a tile is one instruction: desc.load([b, start_m, h, 0]) asks the TMA unit for the box of
1 x BLOCK_M x 1 x head_dim elements at those coordinates (PTX cp.async.bulk.tensor; it lands in
shared memory and an mbarrier says when). What changes for the kernel:
  - no address arithmetic and no load masks: the TMA unit computes the addresses, and rows past
    the tensor's end (seqlen, in its dimension 1) come back as zeros. Because the descriptor is
    4-D, a tile never reads the next sequence's rows: the end of dimension 1 is the end of this
    sequence. (A 2-D view (batch * seqlen, heads * head_dim) would read them, and a NaN there would
    reach P·V even with its score masked: 0 · NaN = NaN.)
  - the scores past seqlen_k are still masked (a zero key row gives a score of 0, not -inf);
  - the store clips: desc.store writes only the rows inside the tensor, so the ragged last
    query tile needs no store mask.
What TMA asks in return: the innermost stride 1, every other stride and the base address multiples
of 16 bytes (8 bf16 / fp16 elements), so the kernel refuses other layouts (ValueError) where fa2.py
takes any strides. TMA is Hopper's (sm_90 on): for an Ampere GPU Triton lowers the descriptors to
plain loads, without fa2.py's cp.async pipeline (sm_80, head dim 128: 488 bytes of spills in
resources.py's compile), so use fa2.py there.

The rest (online softmax in base 2, full / masked key blocks, causal ranges, GQA, LSE) is fa2.py's
forward line for line: read that first; the diff between the two kernels is this step. The backward
is fa2.py's (fa2_tma_attention uses it): the forward's outputs, out and LSE, are the same.

Not done here (FlashAttention-3's other Hopper steps, which this Triton cannot write by hand:
docs/learn/triton.md, "What you lose"): warp specialization (a producer warp issuing the TMA
copies), ping-pong between warpgroups, register reallocation. Whether Triton's compiler overlaps
the TMA copies with the products (num_stages) is what resources.py's report and a GPU timing show.
"""
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from ._common import LOG2E
from .fa2 import _finish, _forward_outputs, _key_range, _query_tile, fa2_backward, fwd_config

TMA_ALIGN_BYTES = 16  # the TMA unit's rule for the base address and every stride but the innermost


@triton.jit
def _fwd_tma_inner(acc, l_i, m_i, q, desc_k, desc_v, b, h_kv, start, end, offs_m, offs_n,
                   seqlen_q, seqlen_k, qk_scale,
                   MASKED: tl.constexpr, CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    """fa2._fwd_inner with the K and V tiles from TMA: no pointers, no load masks."""
    for start_n in range(start, end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = desc_k.load([b, start_n, h_kv, 0]).reshape(BLOCK_N, HEAD_DIM)      # zeros past seqlen_k
        s = tl.dot(q, tl.trans(k)) * qk_scale                                  # (BLOCK_M, BLOCK_N)
        if MASKED:
            cols = start_n + offs_n
            visible = cols[None, :] < seqlen_k
            if CAUSAL:
                visible = visible & (cols[None, :] <= offs_m[:, None] + (seqlen_k - seqlen_q))
            s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        if MASKED:
            m_new = tl.where(m_new == float("-inf"), 0.0, m_new)               # a row with no key yet
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = desc_v.load([b, start_n, h_kv, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.jit(do_not_specialize=["seqlen_q", "seqlen_k"])
def _fwd_tma_kernel(desc_q, desc_k, desc_v, desc_o, LSE, seqlen_q, seqlen_k, heads_q, group, qk_scale,
                    CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    bh, b, h, h_kv, start_m = _query_tile(heads_q, group, CAUSAL, BLOCK_M)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    q = desc_q.load([b, start_m, h, 0]).reshape(BLOCK_M, HEAD_DIM)             # zeros past seqlen_q

    end, full_end = _key_range(start_m, seqlen_q, seqlen_k, CAUSAL, BLOCK_M, BLOCK_N)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    acc, l_i, m_i = _fwd_tma_inner(acc, l_i, m_i, q, desc_k, desc_v, b, h_kv, 0, full_end, offs_m, offs_n,
                                   seqlen_q, seqlen_k, qk_scale, False, CAUSAL, HEAD_DIM, BLOCK_N)
    acc, l_i, m_i = _fwd_tma_inner(acc, l_i, m_i, q, desc_k, desc_v, b, h_kv, full_end, end, offs_m, offs_n,
                                   seqlen_q, seqlen_k, qk_scale, True, CAUSAL, HEAD_DIM, BLOCK_N)

    out, lse = _finish(acc, l_i, m_i)
    desc_o.store([b, start_m, h, 0], out.to(desc_o.dtype).reshape(1, BLOCK_M, 1, HEAD_DIM))  # clipped at seqlen_q
    tl.store(LSE + bh.to(tl.int64) * seqlen_q + offs_m, lse, mask=offs_m < seqlen_q)


def tma_descriptor(name, t, block_rows):
    """A TMA descriptor of a (batch, seqlen, heads, head_dim) tensor whose box is one tile of
    block_rows rows of one head. ValueError where TMA cannot describe the layout."""
    elem = t.element_size()
    if t.stride(3) != 1:
        raise ValueError(f"{name}.stride(3) = {t.stride(3)}: TMA needs the head dim contiguous (stride 1); "
                         f"use fa2_attention or {name}.contiguous()")
    bad = [i for i in range(3) if (t.stride(i) * elem) % TMA_ALIGN_BYTES]
    if bad or t.data_ptr() % TMA_ALIGN_BYTES:
        what = f"{name}.stride({bad[0]}) = {t.stride(bad[0])} elements" if bad else f"{name}'s address"
        raise ValueError(f"{what} is not a multiple of {TMA_ALIGN_BYTES} bytes, which TMA needs; "
                         f"use fa2_attention or {name}.contiguous()")
    return TensorDescriptor(t, list(t.shape), list(t.stride()), [1, block_rows, 1, t.shape[3]])


def fa2_tma_forward(q, k, v, causal=False, softmax_scale=None, config=None):
    """Raw forward with TMA tiles: returns (out, lse), as fa2.fa2_forward. No autograd."""
    (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, scale), out, lse = _forward_outputs(q, k, v, softmax_scale)
    if out.numel() == 0:
        return out, lse
    if k.numel() == 0:                      # no key at all: every row is empty (TMA takes no 0-sized box)
        return out.zero_(), lse.fill_(float("-inf"))
    cfg = config or fwd_config(head_dim)
    descs = [tma_descriptor("q", q, cfg.block_m), tma_descriptor("k", k, cfg.block_n),
             tma_descriptor("v", v, cfg.block_n), tma_descriptor("out", out, cfg.block_m)]
    grid = (triton.cdiv(seqlen_q, cfg.block_m), batch * heads_q)
    _fwd_tma_kernel[grid](*descs, lse, seqlen_q, seqlen_k, heads_q, heads_q // heads_kv, scale * LOG2E,
                          CAUSAL=bool(causal), HEAD_DIM=head_dim, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                          num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return out, lse


fa2_tma_backward = fa2_backward  # the same out and LSE: fa2.py's backward serves this forward
