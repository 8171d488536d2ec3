"""Solution for algorithm/paged_kv (the task is in stub.py)."""

import numpy as np


def gather_pages(cache, page_table, seqlen):
    page_size = cache.shape[1]
    n_pages = -(-seqlen // page_size)
    pages = [cache[page_table[p]] for p in range(n_pages)]
    return np.concatenate(pages, axis=0)[:seqlen] if pages else cache[:0, 0]
