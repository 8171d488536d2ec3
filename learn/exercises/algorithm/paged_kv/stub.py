"""Exercise algorithm/paged_kv — gather a paged KV cache into contiguous keys.

A paged KV cache (vLLM's PagedAttention; flash_attn_with_kvcache's block_table) stores keys in
fixed-size PAGES of a shared pool: cache has shape (num_pages, page_size, d). A sequence of length
seqlen owns the pages listed in its page table, in order: its key t lives in page
page_table[t // page_size], slot t % page_size. Pages are not contiguous and not in order.

Return the sequence's keys as one contiguous (seqlen, d) array. The last page is usually only
partly filled (seqlen need not be a multiple of page_size): take its first seqlen % page_size
slots, do not drop them and do not read past them. page_table may list more pages than needed.
"""

import numpy as np


def gather_pages(cache, page_table, seqlen):
    """cache (num_pages, page_size, d); page_table: 1-D ints. Returns (seqlen, d)."""
    raise NotImplementedError
