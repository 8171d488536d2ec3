"""Exercise algorithm/bwd_preprocess_D — the backward's preprocessing: D = rowsum(dO ∘ O).

The softmax backward needs, for every query row r, D_r = sum_j P_rj dP_rj — a sum over a whole row
of P, which a tiled kernel never holds. But dP = dO V^T and O = P V, so

    D_r = sum_j P_rj (dO_r . V_j) = dO_r . sum_j P_rj V_j = dO_r . O_r

a length-d dot product per row, from O and dO alone (docs/algorithm.md, section 5). Use O, the
NORMALIZED forward output. Rows that saw no key have O = 0, hence D = 0.
"""

import numpy as np


def preprocess_D(o, do):
    """o, do: (Nq, d) float64. Returns D: (Nq,)."""
    raise NotImplementedError
