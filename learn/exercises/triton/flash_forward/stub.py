"""Exercise triton/flash_forward — FlashAttention's forward for one query block, in Triton.

One program per block of BLOCK_M query rows (one head; q (Nq, D), k and v (Nk, D), rows contiguous
in their last dimension, row strides given). The program loads its Q tile once, then walks the
keys in blocks of BLOCK_N with the online softmax of the online_softmax exercise, now per row:

    S     = tl.dot(q, tl.trans(k)) * scale                   (BLOCK_M, BLOCK_N), fp32
    S     = -inf where the key is past seqlen_k, or (CAUSAL) where col > row + (seqlen_k - seqlen_q)
    m_new = max(m, rowmax(S));  P = exp(S - m_new);  alpha = exp(m - m_new)
    l     = alpha * l + rowsum(P);  acc = alpha[:, None] * acc + tl.dot(P, v);  m = m_new

and at the end O = acc / l and LSE = m + log(l). The causal mask is bottom-right aligned: row i
sees key j iff j <= i + seqlen_k - seqlen_q. When Nq > Nk the first rows see no key at all: they
must end with O = 0 and LSE = -inf, never NaN. While a row has seen no key, m_new is -inf and
exp(S - m_new) is exp(-inf - -inf) = NaN: subtract 0 instead for such rows
(m_use = tl.where(m_new == -inf, 0, m_new)), and divide by 1 instead of l = 0 at the end.

Start from m = -inf, l = 0, acc = 0 (tl.full / tl.zeros of shape (BLOCK_M,) and (BLOCK_M,
HEAD_DIM)). Mask the loads of the Q rows past seqlen_q and the K/V rows past seqlen_k (other=0.0),
and the stores. tl.dot needs every dimension >= 16 (the checker uses HEAD_DIM 16 and 32). A real
kernel skips the key blocks a causal tile cannot see (the algorithm exercise block_skipping);
here visiting them all is allowed. Compare python/flashlab/triton/fa2.py, the full kernel.
"""
import triton
import triton.language as tl


@triton.jit
def attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, seqlen_q, seqlen_k, scale,
                    stride_q, stride_k, stride_v, stride_o,
                    CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # TODO: the Q tile; m, l, acc; the loop over key blocks (mask, online softmax, tl.dot with v);
    # O = acc / l (0 for rows that saw no key), LSE = m + log(l) (-inf for them); masked stores.
    pass


def attention(q, k, v, o, lse, scale, causal, BLOCK_M=16, BLOCK_N=16):
    """o = softmax(q kᵀ · scale, causal bottom-right) v and lse per query row; q (Nq, D), k, v (Nk, D)."""
    raise NotImplementedError  # TODO: delete this line once attn_fwd_kernel is written
    seqlen_q, head_dim = q.shape
    seqlen_k = k.shape[0]
    attn_fwd_kernel[(triton.cdiv(seqlen_q, BLOCK_M),)](
        q, k, v, o, lse, seqlen_q, seqlen_k, scale, q.stride(0), k.stride(0), v.stride(0), o.stride(0),
        CAUSAL=causal, HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return o, lse
