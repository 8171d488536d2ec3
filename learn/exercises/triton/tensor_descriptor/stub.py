"""Exercise triton/tensor_descriptor — tiles through tensor descriptors (Hopper's TMA), in 4-D.

A tensor descriptor describes a whole tensor once, on the host, with the box (block) a load moves:

    desc = TensorDescriptor(x, shape=list(x.shape), strides=list(x.stride()), block_shape=[1, 16, 1, 32])

and in the kernel desc.load([i0, i1, i2, i3]) returns the box whose first element is at those
coordinates. Elements outside the tensor read as zero (per dimension: past seqlen in dimension 1
is outside), and desc.store([...], box) writes only the elements inside it. On Hopper each load is
one TMA copy (cp.async.bulk.tensor): the copy engine computes every address and checks the bounds.
The rules: the innermost stride 1, every other stride and the base address multiples of 16 bytes.
python/flashlab/triton/fa2_tma.py loads FlashAttention's Q, K and V tiles this way.

Write tile_sums: x is (batch, seqlen, heads, dim) float32 and out (batch, n_tiles, heads, dim),
n_tiles = ceil(seqlen / BLOCK_S), with
    out[b, t, h, :] = sum of x[b, s, h, :] over the rows s of tile t: t * BLOCK_S <= s < min((t + 1) * BLOCK_S, seqlen).
One program per (tile t, b * heads + h). seqlen is not a multiple of BLOCK_S, and in memory the row
after sequence b's last is sequence b + 1's first: describe x in 4-D, so that the end of a sequence
is the end of a dimension (a 2-D view (batch * seqlen, heads * dim) would add the next sequence's
rows to a last tile). Write the descriptors in tile_sums and the kernel's body.
"""
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401 - for tile_sums


@triton.jit
def tile_sums_kernel(x_desc, out_desc, heads, BLOCK_S: tl.constexpr, DIM: tl.constexpr):
    # TODO: this program's tile t and (b, h); load x's (1, BLOCK_S, 1, DIM) box at row t * BLOCK_S
    # of sequence b, head h; reshape it to (BLOCK_S, DIM); sum its rows; store the (1, 1, 1, DIM)
    # box at [b, t, h, 0] of out.
    pass


def tile_sums(x, out, BLOCK_S=16):
    """out[b, t, h, :] = the sum of tile t's rows of x[b, :, h, :]; dim a power of two (>= 4)."""
    raise NotImplementedError  # TODO: delete this line once the descriptors and the kernel are written
    batch, seqlen, heads, dim = x.shape
    x_desc = None  # TODO: x's TensorDescriptor, 4-D, box (1, BLOCK_S, 1, dim)
    out_desc = None  # TODO: out's TensorDescriptor, box (1, 1, 1, dim)
    grid = (triton.cdiv(seqlen, BLOCK_S), batch * heads)
    tile_sums_kernel[grid](x_desc, out_desc, heads, BLOCK_S=BLOCK_S, DIM=dim)
    return out
