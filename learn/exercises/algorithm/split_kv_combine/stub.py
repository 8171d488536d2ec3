"""Exercise algorithm/split_kv_combine — split-KV (flash-decoding) partials and their exact merge.

With few queries (decoding) one query block cannot fill the GPU, so the KEYS are split into S
chunks processed in parallel. Chunk s covers keys [s*c, min((s+1)*c, Nk)) with c = ceil(Nk / S)
(the last chunks may be short or EMPTY). Each chunk produces a normalized partial output and its
LSE over its own keys only:

    O_s = softmax(S[:, chunk]) V[chunk]        LSE_s = logsumexp(S[:, chunk])
    (an empty chunk, or a row that sees none of the chunk's keys: O_s = 0, LSE_s = -inf)

The combine is exact, because exp(LSE_s) is the chunk's share of the softmax denominator:

    LSE = log sum_s exp(LSE_s)           O = sum_s exp(LSE_s - LSE) O_s

Compute the log-sum-exp with the max subtracted (LSE values of a few hundred or thousand are
normal: exp overflows), and keep a row whose every LSE_s is -inf at O = 0, LSE = -inf, no NaN.
No mask in split_partials (every row sees every key); combine must handle -inf anywhere.
"""

import numpy as np


def split_partials(q, k, v, scale, num_splits):
    """q (Nq, d), k and v (Nk, d). Returns (outs (S, Nq, d), lses (S, Nq)) as arrays or lists."""
    raise NotImplementedError


def combine(outs, lses):
    """outs (S, Nq, d), lses (S, Nq) float64 (lses may hold -inf). Returns (out (Nq, d), lse (Nq,))."""
    raise NotImplementedError
