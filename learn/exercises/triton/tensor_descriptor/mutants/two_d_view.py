"""Mutant: x described as the 2-D view (batch * seqlen, heads * dim): a sequence's last tile reads
the next sequence's first rows (only the last sequence's tail is outside the tensor)."""
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def tile_sums_kernel(x_desc, out_desc, heads, seqlen, BLOCK_S: tl.constexpr, DIM: tl.constexpr):
    t = tl.program_id(0)
    b = tl.program_id(1) // heads
    h = tl.program_id(1) % heads
    rows = x_desc.load([b * seqlen + t * BLOCK_S, h * DIM])
    out_desc.store([b, t, h, 0], tl.sum(rows, 0).reshape(1, 1, 1, DIM))


def tile_sums(x, out, BLOCK_S=16):
    batch, seqlen, heads, dim = x.shape
    flat = x.view(batch * seqlen, heads * dim)
    x_desc = TensorDescriptor(flat, list(flat.shape), list(flat.stride()), [BLOCK_S, dim])
    out_desc = TensorDescriptor(out, list(out.shape), list(out.stride()), [1, 1, 1, dim])
    grid = (triton.cdiv(seqlen, BLOCK_S), batch * heads)
    tile_sums_kernel[grid](x_desc, out_desc, heads, seqlen, BLOCK_S=BLOCK_S, DIM=dim)
    return out
