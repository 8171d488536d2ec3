"""Mutant: the box loaded at row t instead of row t * BLOCK_S: a load's coordinates are elements,
not boxes."""
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def tile_sums_kernel(x_desc, out_desc, heads, BLOCK_S: tl.constexpr, DIM: tl.constexpr):
    t = tl.program_id(0)
    b = tl.program_id(1) // heads
    h = tl.program_id(1) % heads
    rows = x_desc.load([b, t, h, 0]).reshape(BLOCK_S, DIM)
    out_desc.store([b, t, h, 0], tl.sum(rows, 0).reshape(1, 1, 1, DIM))


def tile_sums(x, out, BLOCK_S=16):
    batch, seqlen, heads, dim = x.shape
    x_desc = TensorDescriptor(x, list(x.shape), list(x.stride()), [1, BLOCK_S, 1, dim])
    out_desc = TensorDescriptor(out, list(out.shape), list(out.stride()), [1, 1, 1, dim])
    grid = (triton.cdiv(seqlen, BLOCK_S), batch * heads)
    tile_sums_kernel[grid](x_desc, out_desc, heads, BLOCK_S=BLOCK_S, DIM=dim)
    return out
