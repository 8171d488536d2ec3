"""Exercise triton/online_softmax — a row too long for one block: online softmax over column blocks.

One program per row again, but now the row is walked in blocks of BLOCK columns (n_cols > BLOCK).
Pass 1 keeps a running max m and a running sum l of exp(x - m), FlashAttention's online softmax:

    m_new = max(m, max(x_block))
    l     = l * exp(m - m_new) + sum(exp(x_block - m_new))     # rescale the old sum to the new max
    m     = m_new

Start from m = -inf, l = 0 (scalars: e.g. tl.max of a block of -inf, or tl.full((), ..., tl.float32)).
After pass 1: lse = m + log(l) (store it), and pass 2 walks the blocks again and stores
exp(x - lse) = exp(x - m) / l. Load the lanes past n_cols as -inf. The first block's m is -inf,
and exp(-inf - m_new) = 0 is right there, since m_new is finite (every row has a column).

Useful: for start in range(0, n_cols, BLOCK): ...; tl.maximum(a, b); tl.log; tl.exp.
"""
import triton
import triton.language as tl


@triton.jit
def online_softmax_kernel(x_ptr, out_ptr, lse_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    # TODO: pass 1: running m, l over the column blocks; store lse = m + log(l); pass 2: store exp(x - lse).
    pass


def softmax_lse(x, out, lse, BLOCK=32):
    """Row softmax of x (n_rows, n_cols) into out, and each row's log-sum-exp into lse (n_rows,)."""
    raise NotImplementedError  # TODO: delete this line once online_softmax_kernel is written
    n_rows, n_cols = x.shape
    online_softmax_kernel[(n_rows,)](x, out, lse, n_cols, x.stride(0), out.stride(0), BLOCK=BLOCK)
    return out, lse
