"""Exercise triton/block_ptr — tiles through block pointers: tl.make_block_ptr and boundary_check.

A block pointer describes a 2-D tile of a strided tensor in one object, instead of a hand-built
block of pointers (base + rows[:, None] * stride_m + cols[None, :] * stride_n):

    x_blk = tl.make_block_ptr(base=x_ptr, shape=(M, N), strides=(stride_xm, stride_xn),
                              offsets=(row0, col0), block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    x = tl.load(x_blk, boundary_check=(0, 1), padding_option="zero")
    tl.store(out_blk, y, boundary_check=(0, 1))

`shape` is the whole tensor, `offsets` where this program's tile starts, `order` lists the
dimensions fastest-varying first ((1, 0): rows are contiguous). boundary_check names the
dimensions to clip against `shape`: without it a tile that sticks out past row M or column N reads
and writes out of bounds. (FlashAttention kernels advance such pointers along K with tl.advance.)

Write scale_kernel: out = alpha * x, one program per (BLOCK_M, BLOCK_N) tile, program (pid_m,
pid_n) on rows pid_m * BLOCK_M.. and columns pid_n * BLOCK_N... x is a column slice of a wider
matrix (its row stride is larger than N); M and N are not multiples of the blocks.
"""
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, alpha, M, N, stride_xm, stride_xn, stride_om, stride_on,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # TODO: block pointers for x and out at this program's tile; load with boundary_check, store alpha * x.
    pass


def scale(x, out, alpha, BLOCK_M=16, BLOCK_N=16):
    """out = alpha * x for 2-D float32 tensors of the same shape (any strides)."""
    raise NotImplementedError  # TODO: delete this line once scale_kernel is written
    M, N = x.shape
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    scale_kernel[grid](x, out, alpha, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return out
