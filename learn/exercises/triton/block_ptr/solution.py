"""Solution for triton/block_ptr (the task is in stub.py)."""
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, alpha, M, N, stride_xm, stride_xn, stride_om, stride_on,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offsets = (tl.program_id(0) * BLOCK_M, tl.program_id(1) * BLOCK_N)
    x_blk = tl.make_block_ptr(base=x_ptr, shape=(M, N), strides=(stride_xm, stride_xn),
                              offsets=offsets, block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    o_blk = tl.make_block_ptr(base=out_ptr, shape=(M, N), strides=(stride_om, stride_on),
                              offsets=offsets, block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    x = tl.load(x_blk, boundary_check=(0, 1), padding_option="zero")
    tl.store(o_blk, alpha * x, boundary_check=(0, 1))


def scale(x, out, alpha, BLOCK_M=16, BLOCK_N=16):
    """out = alpha * x for 2-D float32 tensors of the same shape (any strides)."""
    M, N = x.shape
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    scale_kernel[grid](x, out, alpha, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return out
