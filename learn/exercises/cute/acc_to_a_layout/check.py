"""Spec of cute/acc_to_a_layout: flashlab's acc_to_a_layout rebuilt with pycute, and the PTX meaning."""

from grading import Fail
from cute.common import as_layout, cute, same_function

CONCEPT = "acc_to_a_layout: ((2,2),MMA_M,MMA_N) -> ((2,2,2),MMA_M,MMA_N/2); n-tiles 2k, 2k+1 = A of k-step k"
NEEDS_GPU = False


def ref(mm, mn):
    c = cute()
    acc = c.Layout(((2, 2), mm, mn), ((1, 2), 4, 4 * mm))
    split = c.logical_divide(acc, (None, None, c.Layout(2)))
    return c.make_layout(c.make_layout(split[0], split[2][0]), split[1], split[2][1])


def check(mod, rng):
    cute()
    for mm, mn in [(1, 2), (1, 8), (2, 8), (4, 16), (int(rng.integers(1, 5)), 2 * int(rng.integers(1, 9)))]:
        name = f"MMA_M {mm}, MMA_N {mn}"
        got = mod.acc_to_a(mm, mn)
        same_function(name, got, ref(mm, mn), what="A layout")
        lay = as_layout(name, got)
        for lane in range(32):  # the PTX meaning: A value v of (m tile, k step) = that element of P
            g, q = lane // 4, lane % 4
            for a in range(8):
                for mt in range(mm):
                    for ks in range(mn // 2):
                        r = lay((a, mt, ks))
                        v, rm, nt = r % 4, (r // 4) % mm, r // (4 * mm)
                        c_at = (16 * rm + g + 8 * (v // 2), 8 * nt + 2 * q + v % 2)
                        a_at = (16 * mt + g + 8 * ((a // 2) % 2), 16 * ks + 2 * q + a % 2 + 8 * (a // 4))
                        if c_at != a_at:
                            raise Fail(name, f"A value {a} of m tile {mt}, k step {ks} reads register {r}, "
                                             f"P{c_at}, not P{a_at}")
