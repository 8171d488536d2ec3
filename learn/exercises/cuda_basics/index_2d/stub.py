"""Exercise cuda_basics/index_2d — row and column of a thread in a 2-D grid.

A 2-D launch has blocks of blockDim.x * blockDim.y threads in a grid of gridDim.x * gridDim.y
blocks. For a row-major matrix (H rows, W columns) the convention is x = column, y = row:

    col = blockIdx.x * blockDim.x + threadIdx.x        (threadIdx.x varies fastest inside a warp,
    row = blockIdx.y * blockDim.y + threadIdx.y         so a warp walks along a row: coalesced)

The checker launches grid = (ceil(W / blockDim.x), ceil(H / blockDim.y)); both edges may be
partial, so test both bounds. Write `fill(ctx, out, H, W)`: out[row, col] = 1000 * row + col for
every cell of the (H, W) int64 matrix out (index it as ctx.store(out, (row, col), value)).
"""


def fill(ctx, out, H, W):
    raise NotImplementedError
