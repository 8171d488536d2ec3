"""Mutant: causal mask top-left aligned (col <= row): wrong whenever Nq != Nk."""
import triton
import triton.language as tl


@triton.jit
def attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, seqlen_q, seqlen_k, scale,
                    stride_q, stride_k, stride_v, stride_o,
                    CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + rows[:, None] * stride_q + dims[None, :], mask=rows[:, None] < seqlen_q, other=0.0)
    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    for start in range(0, seqlen_k, BLOCK_N):
        cols = start + offs_n
        kv_ok = cols[:, None] < seqlen_k
        k = tl.load(k_ptr + cols[:, None] * stride_k + dims[None, :], mask=kv_ok, other=0.0)
        v = tl.load(v_ptr + cols[:, None] * stride_v + dims[None, :], mask=kv_ok, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        visible = cols[None, :] < seqlen_k
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_use[:, None])
        alpha = tl.exp(m - m_use)
        l = l * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m = m_new
    empty = l == 0.0
    o = acc / tl.where(empty, 1.0, l)[:, None]
    lse = tl.where(empty, float("-inf"), m + tl.log(l))
    row_ok = rows < seqlen_q
    tl.store(o_ptr + rows[:, None] * stride_o + dims[None, :], o, mask=row_ok[:, None])
    tl.store(lse_ptr + rows, lse, mask=row_ok)


def attention(q, k, v, o, lse, scale, causal, BLOCK_M=16, BLOCK_N=16):
    """o = softmax(q kᵀ · scale, causal bottom-right) v and lse per query row; q (Nq, D), k, v (Nk, D)."""
    seqlen_q, head_dim = q.shape
    seqlen_k = k.shape[0]
    attn_fwd_kernel[(triton.cdiv(seqlen_q, BLOCK_M),)](
        q, k, v, o, lse, seqlen_q, seqlen_k, scale, q.stride(0), k.stride(0), v.stride(0), o.stride(0),
        CAUSAL=causal, HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return o, lse
