"""python -m flashlab.bench_decode — decode attention against a K/V cache: flashlab beside its
peers, in one run on one GPU (the decode counterpart of python -m flashlab.bench).

Implementations (--impls, comma-separated; default: all):
    flashlab          flashlab.flash_attn_interface.flash_attn_with_kvcache (num_splits=0: auto)
    flashlab_decoder  flashlab.torch.KVCacheDecoder: plan() once per point (not timed), run() timed
    sdpa_cudnn, sdpa_flash, sdpa_efficient
                      torch.nn.functional.scaled_dot_product_attention under
                      torch.nn.attention.sdpa_kernel(one backend), contiguous caches only
    flex              torch.nn.attention.flex_attention.flex_attention under torch.compile (compiled
                      once: flashlab.bench.compiled_flex), contiguous and paged caches
Peers (the "ratio" column divides by the best of them at each point): sdpa_* and flex.

Shapes (defaults: the project's issue-14 decode shape): bf16, --batch 32 sequences of --seqlen-q
query tokens (default 1), --heads 32 query heads and --heads-kv 8 K/V heads (GQA), --head-dim 128,
for each cache length L in --cache-lens and each page size P in --page-sizes. P = 0: a contiguous
cache (batch, L, heads_kv, head_dim); P > 0: pages (batch * ceil(L / P), P, heads_kv, head_dim)
and a block_table (batch, ceil(L / P)) int32 that is a shuffled permutation of the pages (the pages
of a sequence lie scattered in memory). Every sequence's cache is full: cache_seqlens = L (int32 on
the device). q, K and V come from torch.randn with a fixed generator, on the GPU.

SDPA gets q as (batch, heads, seqlen_q, head_dim) and K/V as (batch, heads_kv, L, head_dim), both
transposed views of the same memory, with enable_gqa=True. A backend that refuses GQA is retried
with K/V expanded to the query heads, which is a copy (no strides map query head h to K/V head
h // group without one), made outside the timed call. Such a point says so in its note: the call
then reads heads / heads_kv times the cache's bytes, while its TB/s still counts the cache's bytes
(the same numerator for every implementation, so TB/s compares times). With seqlen_q > 1 the
mask is causal and bottom-right aligned against the cache (the last query sees every key): flashlab
gets causal=True, SDPA torch.nn.attention.bias.causal_lower_right(seqlen_q, L).

FlexAttention gets the same views of a contiguous cache with enable_gqa=True, no block mask at
seqlen_q 1 and one from create_block_mask for the bottom-right causal mask. A paged cache is one
pool of keys: K/V as (1, heads_kv, batch * pages * P, head_dim) views (batch 1, broadcast against
the queries' batch), and the block table becomes a BlockMask (BlockMask.from_kv_blocks) whose KV
block is one page: sequence b's KV blocks are its pages' physical ids, those every query sees whole
marked full (the kernel skips the mask_mod there), the others partial, where a mask_mod on the
physical key index (the page's owner and logical index, from the block table inverted, and the
causal rule) masks what a query must not see. The kernel then reads only the sequence's pages.
It does not run (a note instead) where a page is not a multiple of 16 keys (its key tile is at
most one KV block and at least 16 keys wide: pages of 1 and 8 fail to compile, H200, torch 2.11),
where heads / heads_kv is not a power of two (its decode kernel), or on pages with seqlen_q > 128
(one query block here). With torch 2.11 its kernel does not compile where K or V has 2^31
elements or more (the issue shape at 64k: int64 indexing, "Ternary expression with dynamic
condition has inconsistent types int64 and int32"), a note too. torch.compile compiles at the
first call of each point (about 10 s); that call is made in preparation, outside the timing.

Correctness: before timing, each implementation's output is compared with a float32 reference
(softmax(q k^T / sqrt(head_dim)) v from the same bf16 inputs, GQA by repeat_interleave, computed
on the GPU in chunks of the batch); max |delta| is recorded, and an implementation above 0.05 (or
with a NaN) is marked WRONG and not timed.

Timing: flashlab.bench.Timer — CUDA events around each call, a warm-up call first, L2 flushed with
a 256 MiB buffer before each call, median of the calls that fit --budget-ms. --flush write (the
default, the figures of record) zeroes the buffer: the call then also writes back up to 50 MB of
dirty lines (SDPA cuDNN's step at 1k: 61 µs against 50.5 after a read flush, H100), for every
implementation alike;
--flush read sums it instead (clean L2). Eager calls by default: where a call's host-side work
outlasts the flush queued before it (~90 µs), the GPU idles and the wait is in the time, as a
serving loop without CUDA graphs sees it. --graph captures each call in a CUDA graph once and
times replays: the GPU's time alone. Each point also records the host time of one eager call
(perf_counter, the GPU drained first), a table of its own in the output.
TB/s = batch * L * heads_kv * head_dim * 2 (K and V) * 2 bytes / median time: the bandwidth of
reading the cache once.

Output: a markdown table (stdout and DIR/bench.md) and DIR/results.jsonl, one record per
(implementation, L, page size) with ms, tbps, ratio, max_abs and note. docs/kvcache.md, "Decode
benchmark in Python", says how to run it.

    python -m flashlab.bench_decode [--batch 32] [--heads 32] [--heads-kv 8] [--head-dim 128]
        [--seqlen-q 1] [--cache-lens 1024,4096,16384,65536] [--page-sizes 0,16]
        [--impls flashlab,flashlab_decoder,sdpa_cudnn,sdpa_flash,sdpa_efficient,flex]
        [--budget-ms 100] [--out DIR]
"""
import argparse
import gc
import json
import math
import os
import sys
import warnings

from flashlab.bench import FLUSH_MODES, Skip, Timer, compiled_flex, environment, progress

OURS = ("flashlab", "flashlab_decoder")
PEERS = ("sdpa_cudnn", "sdpa_flash", "sdpa_efficient", "flex")
SDPA_BACKENDS = {"sdpa_cudnn": "CUDNN_ATTENTION", "sdpa_flash": "FLASH_ATTENTION",   # torch SDPBackend names
                 "sdpa_efficient": "EFFICIENT_ATTENTION"}
IMPLS = OURS + PEERS
DEFAULT_CACHE_LENS = "1024,4096,16384,65536"
TOLERANCE = 0.05      # max |delta| against the float32 reference above which a result is WRONG
CAP_MS = 1000.0       # Timer's cap: a call longer than this is timed once (decode calls take ms)
REF_CHUNK_BYTES = 2 << 30  # the float32 reference's working set per chunk of the batch


# ------------------------------------------------------------------------------------ shapes

def kv_bytes(batch, cache_len, heads_kv, head_dim, elem_bytes=2):
    """Bytes of K and V one decode step reads: the whole (full) cache, once."""
    return batch * cache_len * heads_kv * head_dim * 2 * elem_bytes


def tbps(nbytes, ms):
    """Terabytes (1e12 bytes) per second of nbytes moved in ms milliseconds."""
    return nbytes / (ms * 1e-3) / 1e12


def pages_per_seq(cache_len, page_size):
    return -(-cache_len // page_size)


def shuffled_block_table(torch, batch, num_pages_per_seq, seed=0, device="cpu"):
    """(batch, num_pages_per_seq) int32: a random permutation of the batch * num_pages_per_seq pages
    (each page used exactly once, a sequence's pages scattered over the pool)."""
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(batch * num_pages_per_seq, generator=g)
    return perm.to(torch.int32).view(batch, num_pages_per_seq).to(device)


def make_inputs(torch, args, cache_len, page_size, device="cuda"):
    """q (batch, seqlen_q, heads, head_dim), the caches, cache_seqlens and block_table (or None).
    (device: "cuda"; the tests run the same code on "cpu".)"""
    B, Sq, H, Hkv, D = args.batch, args.seqlen_q, args.heads, args.heads_kv, args.head_dim
    dtype = torch.bfloat16
    seed = cache_len * 1000 + page_size
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(B, Sq, H, D, device=device, dtype=dtype, generator=g)
    if page_size == 0:
        shape, table = (B, cache_len, Hkv, D), None
    else:
        n = pages_per_seq(cache_len, page_size)
        shape, table = (B * n, page_size, Hkv, D), shuffled_block_table(torch, B, n, seed, device)
    k_cache = torch.randn(shape, device=device, dtype=dtype, generator=g)
    v_cache = torch.randn(shape, device=device, dtype=dtype, generator=g)
    seqlens = torch.full((B,), cache_len, dtype=torch.int32, device=device)
    return dict(q=q, k_cache=k_cache, v_cache=v_cache, cache_seqlens=seqlens, block_table=table,
                cache_len=cache_len, page_size=page_size, causal=Sq > 1)


def reference(torch, inp, chunk_bytes=REF_CHUNK_BYTES):
    """float32 softmax(q k^T / sqrt(D)) v, (batch, seqlen_q, heads, head_dim), bottom-right causal
    when seqlen_q > 1; K/V gathered through the block table when paged, GQA by repeat_interleave.
    Chunked over the batch so that the float32 copies stay near chunk_bytes."""
    q, kc, vc, table, L = inp["q"], inp["k_cache"], inp["v_cache"], inp["block_table"], inp["cache_len"]
    B, Sq, H, D = q.shape
    group = H // kc.shape[2]
    per_seq = 4 * (2 * L * kc.shape[2] * D + 2 * L * H * D + 2 * H * Sq * L)  # fp32 K/V, expanded, scores
    chunk = max(1, min(B, chunk_bytes // per_seq))
    out = torch.empty(B, Sq, H, D, dtype=torch.float32, device=q.device)
    mask = None
    if inp["causal"]:  # query i sees keys j <= L - Sq + i
        i = torch.arange(Sq, device=q.device)[:, None]
        j = torch.arange(L, device=q.device)[None, :]
        mask = j > L - Sq + i
    for b0 in range(0, B, chunk):
        b1 = min(B, b0 + chunk)
        if table is None:
            k, v = kc[b0:b1, :L], vc[b0:b1, :L]
        else:
            idx = table[b0:b1].long()
            k, v = kc[idx].flatten(1, 2)[:, :L], vc[idx].flatten(1, 2)[:, :L]
        k = k.float().transpose(1, 2).repeat_interleave(group, dim=1)   # (c, H, L, D)
        v = v.float().transpose(1, 2).repeat_interleave(group, dim=1)
        s = torch.matmul(q[b0:b1].float().transpose(1, 2), k.transpose(-1, -2)) / math.sqrt(D)  # (c, H, Sq, L)
        if mask is not None:
            s.masked_fill_(mask, float("-inf"))
        out[b0:b1] = torch.matmul(torch.softmax(s, dim=-1), v).transpose(1, 2)
        del k, v, s
    return out


# ------------------------------------------------------------------------------------ implementations

def _sync(torch, t):
    if t.is_cuda:
        torch.cuda.synchronize()


def _first_line(e):
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:100]}" if text else type(e).__name__


def _error_gist(e):
    """_first_line, and the last line naming an error where that differs: a compiler's exception
    (torch.compile's InductorError) starts with where it failed and ends with why."""
    why = [line.strip() for line in str(e).splitlines() if "Error" in line]
    last = why[-1][:120] if why else ""
    first = _first_line(e)
    return first if not last or last in first else f"{first} ... {last}"


def prepare(name, torch, inp, shared):
    """(call, note) for one implementation at one point: call() -> out (batch, seqlen_q, heads,
    head_dim), everything that is not the step itself (planning, copies) done here. Raises Skip."""
    q, kc, vc, seqlens, table = (inp[x] for x in ("q", "k_cache", "v_cache", "cache_seqlens", "block_table"))
    causal = inp["causal"]
    if name == "flashlab":
        try:
            from flashlab.flash_attn_interface import flash_attn_with_kvcache
        except Exception as e:  # noqa: BLE001 - any import failure means "not available"
            raise Skip(f"flashlab.flash_attn_interface not importable ({_first_line(e)})")
        kw = dict(cache_seqlens=seqlens, causal=causal, num_splits=0)
        if table is not None:
            kw["block_table"] = table
        return (lambda: flash_attn_with_kvcache(q, kc, vc, **kw)), ""
    if name == "flashlab_decoder":
        try:
            import flashlab.torch as fl
        except Exception as e:  # noqa: BLE001
            raise Skip(f"flashlab.torch not importable ({_first_line(e)})")
        B, Sq, H, D = q.shape
        dec = fl.KVCacheDecoder().plan(B, inp["cache_len"], H, kc.shape[2], D, dtype=q.dtype, device=q.device,
                                       seqlen_q=Sq, page_size=inp["page_size"] or None, causal=causal, num_splits=0)
        return (lambda: dec.run(q, kc, vc, seqlens, block_table=table)[0]), ""
    if name == "flex":
        return prepare_flex(torch, inp)
    if name in PEERS:
        if table is not None:
            raise Skip("contiguous only")
        return prepare_sdpa(name, torch, inp, shared)
    raise Skip(f"unknown implementation {name!r}")


def prepare_sdpa(name, torch, inp, shared):
    """SDPA on one backend: enable_gqa=True on (batch, heads_kv, L, head_dim) views of the cache.
    Where the backend refuses GQA, K/V expanded to the query heads. That cannot be a view: query
    head h reads K/V head h // group, which no stride expresses for group > 1 (expand() then view()
    raises; reshape() copies), so it is a copy (repeat_interleave), made here, outside the timing,
    once per point for every SDPA backend that needs it; the note says so."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, SDPA_BACKENDS[name])
    q = inp["q"].transpose(1, 2)                                           # (B, H, Sq, D)
    k, v = inp["k_cache"].transpose(1, 2), inp["v_cache"].transpose(1, 2)  # (B, Hkv, L, D), views
    H, Sq, Hkv, L = q.shape[1], q.shape[2], k.shape[1], k.shape[2]
    group = H // Hkv
    mask = None
    if inp["causal"]:  # bottom-right: the last query sees every key
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(Sq, L)

    def make(kk, vv, gqa):
        def call():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, enable_gqa=gqa).transpose(1, 2)
        return call

    def refusal(call):
        """None if call() runs, else the first line of its error."""
        try:
            with warnings.catch_warnings():      # "kernel not used because ...": the note says it
                warnings.simplefilter("ignore")
                call()
            _sync(torch, q)
            return None
        except Exception as e:  # noqa: BLE001 - a refusal is the next attempt, then a note
            return _first_line(e)

    call = make(k, v, group > 1)
    err = refusal(call)
    if err is None:
        return call, ""
    if group == 1:
        raise Skip(f"failed: {err}")
    if "expanded" not in shared:
        try:
            shared["expanded"] = (k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1))
        except Exception as e:  # noqa: BLE001 - e.g. out of memory at 64k (4 x 8.6 GB)
            shared["expanded"] = _first_line(e)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    if isinstance(shared["expanded"], str):
        raise Skip(f"failed: enable_gqa: {err}; K/V copied to {H} heads: {shared['expanded']}")
    call = make(*shared["expanded"], False)
    err2 = refusal(call)
    if err2 is not None:
        raise Skip(f"failed: enable_gqa: {err}; K/V copied to {H} heads: " + ("the same" if err2 == err else err2))
    return call, (f"K/V copied to {H} heads outside the timing (enable_gqa refused: {_short(err)}): "
                  f"the call reads {group}x the cache's bytes; TB/s counts the cache's")


def prepare_flex(torch, inp):
    """FlexAttention (compiled once: flashlab.bench.compiled_flex) on views of the cache, paged
    caches included: the pool of pages as one sequence of keys of batch 1, the block table as a
    block mask of one page per KV block (full caches: cache_seqlens = L). One call is made here: it
    compiles the kernel for the shape (tens of seconds), which is kept out of the timing."""
    try:
        from torch.nn.attention.flex_attention import BlockMask, create_block_mask
        fn = compiled_flex(torch)
    except ImportError as e:
        raise Skip(f"flex_attention not importable ({_first_line(e)})")
    q = inp["q"].transpose(1, 2)                                           # (B, H, Sq, D)
    kc, vc, table, P, L = (inp[x] for x in ("k_cache", "v_cache", "block_table", "page_size", "cache_len"))
    _, H, Sq, D = q.shape
    Hkv = kc.shape[2]
    group = H // Hkv
    if group & (group - 1):
        raise Skip("flex: query heads per K/V head must be a power of two (FlexAttention's decode kernel)")
    if table is None:
        k, v = kc.transpose(1, 2), vc.transpose(1, 2)                      # (B, Hkv, L, D), views
        mask, note = None, ""
        if inp["causal"]:  # bottom-right: query i sees keys j <= L - Sq + i
            mask = create_block_mask(lambda b, h, q_idx, kv_idx: kv_idx <= L - Sq + q_idx, None, None, Sq, L,
                                     device=q.device)
    else:
        if not flex_page_ok(P):
            raise Skip(f"flex: a KV block is one page here; FlexAttention's key tile needs a page of a multiple "
                       f"of 16 keys (page {P})")
        if Sq > 128:
            raise Skip("flex: the paged block mask here has one query block of 128 (seqlen_q <= 128)")
        pool = kc.shape[0] * P
        k = kc.view(1, pool, Hkv, D).transpose(1, 2)                       # (1, Hkv, pool, D), views
        v = vc.view(1, pool, Hkv, D).transpose(1, 2)
        owner, logical_page = paged_flex_maps(torch, table)
        mask = BlockMask.from_kv_blocks(*paged_flex_blocks(torch, table, P, L, Sq), BLOCK_SIZE=(128, P),
                                        mask_mod=paged_flex_mask_mod(owner, logical_page, P, L, Sq),
                                        seq_lengths=(Sq, pool))
        note = "one page per KV block (BlockMask.from_kv_blocks), K/V as one pool of batch 1"
    gqa = H != Hkv

    def call():
        return fn(q, k, v, block_mask=mask, enable_gqa=gqa).transpose(1, 2)

    try:
        call()
        _sync(torch, q)
    except Exception as e:  # noqa: BLE001 - a shape the compiler or the kernel refuses is a note
        raise Skip(f"failed: {_error_gist(e)}")
    return call, note


def flex_page_ok(page_size):
    """Whether FlexAttention can take one page as its KV block: its key tile is at most one KV
    block (and divides it) and cannot be narrower than Triton's dot, 16 keys."""
    return page_size >= 16 and page_size % 16 == 0


def paged_flex_maps(torch, block_table):
    """(owner, logical_page), int32 of length batch * pages on the table's device: the sequence each
    physical page of the pool belongs to and its index in that sequence (the block table inverted;
    every page is used once)."""
    B, n = block_table.shape
    dev = block_table.device
    pages = block_table.flatten().long()
    owner = torch.empty(B * n, dtype=torch.int32, device=dev)
    logical_page = torch.empty(B * n, dtype=torch.int32, device=dev)
    owner[pages] = torch.arange(B, dtype=torch.int32, device=dev).repeat_interleave(n)
    logical_page[pages] = torch.arange(n, dtype=torch.int32, device=dev).repeat(B)
    return owner, logical_page


def paged_flex_mask_mod(owner, logical_page, page_size, cache_len, seqlen_q):
    """FlexAttention's mask_mod on the pool's physical key index: the key is in the query's sequence
    and its logical position is visible (bottom-right causal; at seqlen_q 1: below L, which masks
    the tail of a last page that L does not fill). The whole rule, not only what the partial blocks
    need, so that it is right wherever it is applied (a dense evaluation too)."""
    last = cache_len - seqlen_q

    def mask_mod(b, h, q_idx, kv_idx):
        page = kv_idx // page_size
        logical = logical_page[page] * page_size + kv_idx % page_size
        return (owner[page] == b) & (logical <= last + q_idx)
    return mask_mod


def paged_flex_blocks(torch, block_table, page_size, cache_len, seqlen_q):
    """(kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices) for BlockMask.from_kv_blocks,
    one page per KV block and one query block, full caches of cache_len: sequence b's pages that
    every query sees whole are full blocks (no mask_mod), the rest partial. Counts (B, 1, 1); ids
    (B, 1, 1, B * n) int32, padded with 0: the last dimension spans every KV block of the pool, as
    from_kv_blocks inverts the lists into a dense table of that width (an id beyond it would index
    out of it)."""
    B, n = block_table.shape
    nfull = min(n, (cache_len - seqlen_q + 1) // page_size)   # page p is full when (p + 1) P - 1 <= L - Sq

    def lists(ids):
        idx = torch.zeros(B, 1, 1, B * n, dtype=torch.int32, device=block_table.device)
        idx[:, 0, 0, :ids.shape[1]] = ids
        return torch.full((B, 1, 1), ids.shape[1], dtype=torch.int32, device=block_table.device), idx

    return (*lists(block_table[:, nfull:]), *lists(block_table[:, :nfull]))


def _short(text, n=70):
    return text if len(text) <= n else text[:n - 3] + "..."


# ------------------------------------------------------------------------------------ the run

def check(out, ref):
    """max |out - ref| as a float (nan when out has a NaN)."""
    d = (out.float() - ref).abs()
    return float("nan") if bool(d.isnan().any()) else float(d.max())


def add_ratios(records):
    """ratio = tbps / the best peer's tbps at the same (cache_len, page_size); None without one."""
    best = {}
    for r in records:
        if r["impl"] in PEERS and r["tbps"]:
            key = (r["cache_len"], r["page_size"])
            best[key] = max(best.get(key, 0.0), r["tbps"])
    for r in records:
        b = best.get((r["cache_len"], r["page_size"]))
        r["ratio"] = r["tbps"] / b if r["tbps"] and b else None
    return records


def blank_record(name, args, cache_len, page_size, note=""):
    return dict(impl=name, cache_len=cache_len, page_size=page_size, batch=args.batch, seqlen_q=args.seqlen_q,
                heads=args.heads, heads_kv=args.heads_kv, head_dim=args.head_dim,
                bytes=kv_bytes(args.batch, cache_len, args.heads_kv, args.head_dim),
                ms=None, tbps=None, ratio=None, max_abs=None, reps=0, host_us=None, note=note)


def run_point(torch, args, cache_len, page_size, timer, bar, device="cuda"):
    """The records of one (cache_len, page_size): inputs, reference, then check and time each."""
    recs = []
    inp = make_inputs(torch, args, cache_len, page_size, device)
    ref = reference(torch, inp)
    shared = {}
    for name in args.impls:
        bar.set_description(f"{name} L {cache_len} page {page_size}")
        rec = blank_record(name, args, cache_len, page_size)
        try:
            call, rec["note"] = prepare(name, torch, inp, shared)
            out = call()
            _sync(torch, out)
            rec["max_abs"] = check(out, ref)
            del out
            if not rec["max_abs"] <= TOLERANCE:     # also catches NaN
                rec["note"] = f"WRONG: max abs delta {rec['max_abs']:.3g} > {TOLERANCE}" + (
                    f"; {rec['note']}" if rec["note"] else "")
            else:
                ms, reps = timer(call, CAP_MS)
                rec.update(ms=ms, tbps=tbps(rec["bytes"], ms), reps=reps, host_us=timer.host_us(call))
        except Skip as e:
            rec["note"] = str(e)
        except Exception as e:  # noqa: BLE001 - an unsupported point is a note, not a crash
            what = "unsupported" if "Unsupported" in type(e).__name__ else "failed"
            rec["note"] = f"{what}: {_first_line(e)}"
        finally:
            call = None  # noqa: F841 - drops tensors the closure holds (a decoder's buffers)
            _sync(torch, inp["q"])
        recs.append(rec)
        bar.update()
    del inp, ref, shared
    return add_ratios(recs)


def run(args, records, path_jsonl):
    import torch

    timer = Timer(torch, args.budget_ms, flush=args.flush, graph=args.graph)
    bar = progress(len(args.cache_lens) * len(args.page_sizes) * len(args.impls))
    for page_size in args.page_sizes:
        for cache_len in args.cache_lens:
            try:
                recs = run_point(torch, args, cache_len, page_size, timer, bar)
            except Exception as e:  # noqa: BLE001 - e.g. the inputs do not fit: every impl gets the note
                recs = [blank_record(name, args, cache_len, page_size, f"point failed: {_first_line(e)}")
                        for name in args.impls]
                bar.update(len(records) + len(recs) - bar.n)   # the implementations the point did not reach
            records += recs
            with open(path_jsonl, "a") as fh:
                fh.writelines(json.dumps(r) + "\n" for r in recs)
            gc.collect()
            torch.cuda.empty_cache()
    bar.close()
    return records


# ------------------------------------------------------------------------------------ output

def _len_label(n):
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def _cell(r):
    if r is None:
        return ""
    if r["note"].startswith("WRONG"):
        return "WRONG"
    if not r["tbps"]:
        return "–"
    cell = f"{r['tbps']:.2f}" + (f" ({r['ratio']:.2f})" if r["ratio"] else "")
    return cell + ("*" if r["note"] else "")


def render_markdown(records, header):
    """The tables: one per page size (rows: implementations, columns: cache lengths; cells TB/s
    and the ratio to the best peer), notes under each, then every record with ms and max |delta|."""
    impls = list(dict.fromkeys(r["impl"] for r in records))
    lens = sorted({r["cache_len"] for r in records})
    index = {(r["impl"], r["cache_len"], r["page_size"]): r for r in records}
    lines = [header, "",
             "Cells: TB/s of K/V read (ratio to the best peer at that point: max of " + ", ".join(PEERS) + "). "
             f"WRONG: max |delta| against the float32 reference above {TOLERANCE} (or NaN), not timed; "
             "* and –: see the notes under the table."]
    for page_size in sorted({r["page_size"] for r in records}):
        title = "contiguous cache" if page_size == 0 else f"paged cache, page size {page_size} (shuffled block table)"
        lines += ["", f"### {title}", "",
                  "| impl | " + " | ".join(_len_label(n) for n in lens) + " |",
                  "|---|" + "---|" * len(lens)]
        notes = []
        for name in impls:
            cells = [_cell(index.get((name, n, page_size))) for n in lens]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
            for n in lens:
                r = index.get((name, n, page_size))
                if r is not None and r["note"]:
                    notes.append(f"{name}: {r['note']}")
        lines += [""] + [f"- {n}" for n in dict.fromkeys(notes)]
        lines += ["", "Host time of one eager call, µs (median; the GPU drained before each call):", "",
                  "| impl | " + " | ".join(_len_label(n) for n in lens) + " |", "|---|" + "---|" * len(lens)]
        for name in impls:
            cells = [(index.get((name, n, page_size)) or {}).get("host_us") for n in lens]
            lines.append(f"| {name} | " + " | ".join("" if c is None else f"{c:.0f}" for c in cells) + " |")
    lines += ["", "<details><summary>Every point: ms, TB/s, ratio to the best peer, max |delta|, host µs</summary>",
              "", "| L | page | impl | ms | TB/s | ratio | max abs delta | reps | host µs | note |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        ms = f"{r['ms']:.4f}" if r["ms"] else ""
        tb = f"{r['tbps']:.3f}" if r["tbps"] else ""
        ratio = f"{r['ratio']:.3f}" if r["ratio"] else ""
        err = "" if r["max_abs"] is None else f"{r['max_abs']:.2e}"
        note = r["note"].replace("|", "\\|")   # a | inside a cell would end it
        host = "" if r.get("host_us") is None else f"{r['host_us']:.0f}"
        lines.append(f"| {r['cache_len']} | {r['page_size']} | {r['impl']} | {ms} | {tb} | {ratio} | {err} "
                     f"| {r['reps']} | {host} | {note} |")
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def _int_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m flashlab.bench_decode", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seqlen-q", type=int, default=1, help="query tokens per sequence (> 1: causal)")
    ap.add_argument("--heads", type=int, default=32, help="query heads")
    ap.add_argument("--heads-kv", type=int, default=8, help="K/V heads (divides --heads)")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--cache-lens", default=DEFAULT_CACHE_LENS, help="comma list of cache lengths L")
    ap.add_argument("--page-sizes", default="0", help="comma list; 0 = contiguous cache, P > 0 = pages of P")
    ap.add_argument("--impls", default=",".join(IMPLS), help="comma list of: " + ", ".join(IMPLS))
    ap.add_argument("--budget-ms", type=float, default=100.0, help="timed milliseconds per point")
    ap.add_argument("--flush", choices=FLUSH_MODES, default="write",
                    help="how L2 is flushed before each call (flashlab.bench.Timer): write zeroes 256 MiB "
                         "(the call then writes back ~50 MB of dirty lines), read sums it")
    ap.add_argument("--graph", action="store_true",
                    help="time CUDA-graph replays of each call (the GPU's time without the host's)")
    ap.add_argument("--out", default="bench-decode-out")
    args = ap.parse_args(argv)
    args.cache_lens = _int_list(args.cache_lens)
    args.page_sizes = _int_list(args.page_sizes)
    args.impls = [x.strip() for x in args.impls.split(",") if x.strip()]
    unknown = [x for x in args.impls if x not in IMPLS]
    if unknown:
        ap.error(f"unknown implementation(s) {', '.join(unknown)}; known: {', '.join(IMPLS)}")
    if min(args.batch, args.seqlen_q, args.heads, args.heads_kv, args.head_dim) < 1 or args.heads % args.heads_kv:
        ap.error("batch, seqlen-q, heads, heads-kv, head-dim must be >= 1 and heads-kv must divide heads")
    if not args.cache_lens or min(args.cache_lens) < args.seqlen_q:
        ap.error("every cache length must be >= seqlen-q")
    if not args.page_sizes or min(args.page_sizes) < 0:
        ap.error("page sizes: 0 (contiguous) or > 0")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("python -m flashlab.bench_decode needs torch with a CUDA GPU", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("python -m flashlab.bench_decode needs a CUDA GPU", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    path_jsonl = os.path.join(args.out, "results.jsonl")
    header = ("## flashlab.bench_decode: decode attention against a K/V cache, bf16\n\n"
              + environment(argv, module="flashlab.bench_decode")
              + f"\n- shape: batch {args.batch}, seqlen_q {args.seqlen_q}"
              + (" (causal, bottom-right)" if args.seqlen_q > 1 else "")
              + f", heads {args.heads} / heads_kv {args.heads_kv}, head_dim {args.head_dim}; full caches "
              + "(cache_seqlens = L); page size 0 = contiguous, else a shuffled block table"
              + f"\n- {args.budget_ms:.0f} ms of timed calls per point, median; L2 flushed between calls "
              + f"({args.flush} flush){'; CUDA-graph replays' if args.graph else ''}; "
              + "TB/s = batch * L * heads_kv * head_dim * 2 (K, V) * 2 bytes / time")
    open(path_jsonl, "w").close()
    records = run(args, [], path_jsonl)
    md = render_markdown(records, header)
    with open(os.path.join(args.out, "bench.md"), "w") as fh:
        fh.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
