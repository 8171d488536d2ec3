"""Mutant: no shared tile: 5 global reads per thread (right values, too much traffic)."""


def stencil(ctx, a, out, H, W):
    r = ctx.blockIdx.y * 16 + ctx.threadIdx.y
    c = ctx.blockIdx.x * 16 + ctx.threadIdx.x
    if r < H and c < W:
        total = 4 * (yield ctx.load(a, (r, c)))
        for gr, gc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= gr < H and 0 <= gc < W:
                total -= yield ctx.load(a, (gr, gc))
        yield ctx.store(out, (r, c), total)
