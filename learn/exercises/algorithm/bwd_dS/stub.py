"""Exercise algorithm/bwd_dS — the gradient through the softmax: dS = P ∘ (dP − D).

For one row p = softmax(s), the Jacobian is J = diag(p) − p pᵀ, so ds_j = p_j (dp_j − sum_i p_i dp_i).
For all rows: dS = P ∘ (dP − D) with D_r = rowsum(P ∘ dP)_r = dO_r . O_r (algorithm/bwd_preprocess_D),
D broadcast along each ROW (one value per query). Masked entries have P = 0, hence dS = 0.
docs/algorithm.md, section 5.
"""

import numpy as np


def softmax_grad(p, dp, D):
    """p, dp: (Nq, Nk) float64; D: (Nq,). Returns dS: (Nq, Nk)."""
    raise NotImplementedError
