"""Spec of cute/mma_tv_layout: the learner's layouts, evaluated by pycute, against the PTX ISA."""

from grading import Fail
from cute.common import as_layout, cute, mode_sizes

CONCEPT = "TV layout of mma.m16n8k16: C = ((4,8),(2,2)):((32,1),(16,8)) maps (thread, value) -> m + 16n"
NEEDS_GPU = False


def ptx_c(t, v):
    g, q = t // 4, t % 4
    return (g + 8 * (v // 2)) + 16 * (2 * q + v % 2)


def ptx_a(t, v):
    g, q = t // 4, t % 4
    return (g + 8 * ((v // 2) % 2)) + 16 * (2 * q + v % 2 + 8 * (v // 4))


def check(mod, rng):
    cute()
    for name, got, nv, ptx in (("C", mod.c_layout(), 4, ptx_c), ("A", mod.a_layout(), 8, ptx_a)):
        lay = as_layout(f"{name} layout", got)
        if mode_sizes(lay) != (32, nv):
            raise Fail(f"{name} layout", f"{lay}: mode sizes {mode_sizes(lay)}, expected (32, {nv})")
        for t in range(32):
            for v in range(nv):
                if lay((t, v)) != ptx(t, v):
                    idx = ptx(t, v)
                    raise Fail(f"{name} layout", f"{lay}: (thread {t}, value {v}) -> {lay((t, v))}, the PTX "
                                                 f"ISA puts it at {idx} (m {idx % 16}, col {idx // 16})")
