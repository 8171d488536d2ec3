"""Mutant: l is not rescaled when the max grows: the old terms stay relative to the old max."""
import triton
import triton.language as tl


@triton.jit
def online_softmax_kernel(x_ptr, out_ptr, lse_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x_row = x_ptr + row * stride_x
    m = tl.full((), float("-inf"), tl.float32)
    l = tl.full((), 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        l = l + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    lse = m + tl.log(l)
    tl.store(lse_ptr + row, lse)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
        tl.store(out_ptr + row * stride_out + start + cols, tl.exp(x - lse), mask=mask)


def softmax_lse(x, out, lse, BLOCK=32):
    """Row softmax of x (n_rows, n_cols) into out, and each row's log-sum-exp into lse (n_rows,)."""
    n_rows, n_cols = x.shape
    online_softmax_kernel[(n_rows,)](x, out, lse, n_cols, x.stride(0), out.stride(0), BLOCK=BLOCK)
    return out, lse
