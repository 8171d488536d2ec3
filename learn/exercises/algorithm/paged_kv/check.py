"""Spec of algorithm/paged_kv: shuffled page tables, partial last pages, attention on the result."""

import numpy as np
from grading import close, equal, randn
from reference import forward

CONCEPT = "paged KV cache: page table -> contiguous keys, the partial last page"
NEEDS_GPU = False


def check(mod, rng):
    for num_pages, page_size, d, seqlen in ((8, 4, 3, 13), (6, 3, 2, 9), (5, 16, 4, 1), (10, 2, 3, 17)):
        cache = randn(rng, num_pages, page_size, d)
        table = rng.permutation(num_pages)
        flat = cache[table].reshape(-1, d)[:seqlen]
        got = mod.gather_pages(cache, table.copy(), seqlen)
        name = f"{num_pages} pages of {page_size}, seqlen {seqlen}"
        equal(name, np.shape(got), flat.shape, what="shape")
        close(name, got, flat, rtol=0, atol=0, what="keys")
        q = randn(rng, 2, d)
        close(f"{name}: attention over the gathered keys", forward(q, got, got, 0.7)["out"],
              forward(q, flat, flat, 0.7)["out"], rtol=1e-12, atol=1e-12, what="out")
