"""KV-cache inference from Python: flashlab.attention_with_kvcache / kvcache_append /
attention_combine (NumPy, runs in CI) and flash_attn_interface.flash_attn_with_kvcache /
flash_attn_combine (torch, CPU; skipped without torch).

The oracle is a small float64 NumPy implementation of docs/kvcache.md written here (not flashlab):
per sequence it gathers the keys slot by slot from the cache layout, appends the new keys (rotated
and rounded to the dtype), rotates the queries at their positions, and evaluates the masked
softmax, with attention sinks as one more logit per head in the denominator and no value, and
StreamingLLM sink tokens (the first keys after leftpad) visible left of the window.
Unfilled and left-padded slots and unused pages are NaN-poisoned: they must not leak.
"""

import zlib

import numpy as np
import pytest

import flashlab

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def rng_for(name):
    seed = zlib.crc32(name.encode()) ^ np.random.SeedSequence().entropy % (1 << 31)
    print(f"seed {seed}")
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------------------------
def rotate(x, cos, sin, pos, interleaved):
    """x (..., d) float64 rotated at position pos (docs/kvcache.md, "Rotary")."""
    rd = 2 * cos.shape[1]
    c, s = cos[pos].astype(np.float64), sin[pos].astype(np.float64)
    y = x.copy()
    if interleaved:
        x0, x1 = x[..., 0:rd:2], x[..., 1:rd:2]
        y[..., 0:rd:2], y[..., 1:rd:2] = x0 * c - x1 * s, x0 * s + x1 * c
    else:
        h = rd // 2
        x0, x1 = x[..., :h], x[..., h:rd]
        y[..., :h], y[..., h:rd] = x0 * c - x1 * s, x0 * s + x1 * c
    return y


class Cache:
    """Where slot s of sequence b lives in k_cache / v_cache."""

    def __init__(self, kind, rows=None, block_table=None, page_size=None):
        self.kind, self.rows, self.block_table, self.page_size = kind, rows, block_table, page_size

    def index(self, b, s):
        if self.kind == "contiguous":
            return (self.rows[b], s)
        page, off = self.block_table[b, s // self.page_size], s % self.page_size
        return (page, off) if self.kind == "NHD" else (page, slice(None), off)


def reference(q, k_cache, v_cache, seqlens, cache, *, k=None, v=None, cos=None, sin=None, interleaved=False,
              leftpad=None, scale=None, causal=False, window=(-1, -1), softcap=0.0, alibi=None, sinks=None,
              sink_tokens=0, dtype=np.float32):  # fmt: skip
    """(out, lse, k_cache_after, v_cache_after) in float64 (caches in their dtype). `sinks` (heads_q,):
    one more logit sink_h in every row's softmax with no value; a row without keys gets out 0 and
    lse = sink_h (-inf without sinks)."""
    b_, sq, hq, d = q.shape
    hk = k_cache.shape[-2] if cache.kind != "HND" else k_cache.shape[1]
    g = hq // hk
    scale = 1 / np.sqrt(d) if scale is None else scale
    t = 0 if k is None else k.shape[1]
    kc, vc = k_cache.copy(), v_cache.copy()
    out = np.zeros((b_, sq, hq, d))
    lse = np.full((b_, hq, sq), -np.inf)
    for b in range(b_):
        lp = 0 if leftpad is None else int(leftpad[b])
        n = int(seqlens[b])
        for i in range(t):  # the append, keys rotated at their positions and stored in the dtype
            kn = k[b, i].astype(np.float64)
            if cos is not None:
                kn = rotate(kn, cos, sin, n - lp + i, interleaved)
            kc[cache.index(b, n + i)] = kn.astype(dtype)
            vc[cache.index(b, n + i)] = v[b, i]
        L = n + t - lp
        K = np.array([kc[cache.index(b, s)] for s in range(lp, lp + L)], dtype=np.float64).reshape(L, hk, d)
        V = np.array([vc[cache.index(b, s)] for s in range(lp, lp + L)], dtype=np.float64).reshape(L, hk, d)
        for i in range(sq):
            pos = L - sq + i
            qi = q[b, i].astype(np.float64)
            if cos is not None:
                qi = rotate(qi, cos, sin, pos, interleaved).astype(dtype).astype(np.float64)
            for h in range(hq):
                sink = -np.inf if sinks is None else float(sinks[h])
                s = scale * (K[:, h // g] @ qi[h])
                if softcap > 0:
                    s = softcap * np.tanh(s / softcap)
                j = np.arange(L)
                if alibi is not None:
                    slope = alibi[h] if alibi.ndim == 1 else alibi[b, h]
                    s = s - slope * np.abs(pos - j)
                right_ok = np.ones(L, bool)  # the row's right bound
                if causal:
                    right_ok &= j <= pos
                if window[1] >= 0:
                    right_ok &= j <= pos + window[1]
                vis = right_ok & (j >= pos - window[0]) if window[0] >= 0 else right_ok.copy()
                vis |= right_ok & (j < sink_tokens)  # sink tokens: keys 0.. after leftpad, left of the window
                if not vis.any():
                    lse[b, h, i] = sink  # out stays 0: the sink has no value
                    continue
                s = s[vis]
                m = max(s.max(), sink)
                p = np.exp(s - m)
                den = p.sum() + np.exp(sink - m)  # exp(-inf) = 0: no sink
                lse[b, h, i] = m + np.log(den)
                out[b, i, h] = (p / den) @ V[vis, h // g]
    return out, lse, kc, vc


def check(name, got, want, tol):
    got = np.asarray(got, dtype=np.float64)
    assert not np.isnan(got).any(), f"{name}: NaN in the result (a poisoned slot leaked?)"
    with np.errstate(invalid="ignore"):  # -inf - -inf where both are -inf (checked below)
        err = np.abs(got - want)
    bound = tol * (1 + np.abs(want))
    ok = (err <= bound) | (np.isinf(want) & (got == want))
    assert ok.all(), f"{name}: max error {np.nanmax(np.where(np.isinf(want), 0, err)):.3g} > tol {tol}"


TOL = {np.float32: 2e-5, np.float16: 4e-3}


# ---------------------------------------------------------------------------------------------
# Building a problem
# ---------------------------------------------------------------------------------------------
def build(rng, *, batch=3, sq=1, hq=8, hk=2, d=16, seqlens=(5, 0, 9), t_new=0, capacity=16, layout="contiguous",
          page_size=4, permute_rows=True, leftpad=None, dtype=np.float32, rotary_dim=0):
    """Fresh random inputs; every slot that is not a key is NaN."""
    seqlens = np.array(seqlens, dtype=np.int32)
    lp = np.zeros(batch, np.int32) if leftpad is None else np.array(leftpad, dtype=np.int32)
    q = rng.standard_normal((batch, sq, hq, d)).astype(dtype)
    if layout == "contiguous":
        rows = rng.permutation(batch + 2)[:batch].astype(np.int32) if permute_rows else np.arange(batch, dtype=np.int32)
        shape = (batch + 2, capacity, hk, d)
        cache = Cache("contiguous", rows=rows)
    else:
        max_pages = -(-capacity // page_size)
        num_pages = batch * max_pages + 3
        perm = rng.permutation(num_pages).astype(np.int32)
        bt = perm[: batch * max_pages].reshape(batch, max_pages).copy()
        for b in range(batch):  # pages past what the sequence uses are padding
            used = -(-(int(seqlens[b]) + t_new) // page_size)
            bt[b, used:] = -1
        shape = (num_pages, page_size, hk, d) if layout == "NHD" else (num_pages, hk, page_size, d)
        cache = Cache(layout, block_table=bt, page_size=page_size)
    kc = np.full(shape, np.nan, dtype=dtype)
    vc = np.full(shape, np.nan, dtype=dtype)
    for b in range(batch):
        for s in range(int(lp[b]), int(seqlens[b])):
            kc[cache.index(b, s)] = rng.standard_normal((hk, d))
            vc[cache.index(b, s)] = rng.standard_normal((hk, d))
    k = v = None
    if t_new:
        k = rng.standard_normal((batch, t_new, hk, d)).astype(dtype)
        v = rng.standard_normal((batch, t_new, hk, d)).astype(dtype)
    cos = sin = None
    if rotary_dim:
        ang = rng.uniform(0, 2 * np.pi, (capacity + 4, rotary_dim // 2))
        cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    kw = {}
    if layout == "contiguous":
        if permute_rows:
            kw["cache_batch_idx"] = cache.rows
    else:
        kw["block_table"] = cache.block_table
        kw["page_layout"] = layout
    if leftpad is not None:
        kw["cache_leftpad"] = lp
    return dict(q=q, k_cache=kc, v_cache=vc, seqlens=seqlens, cache=cache, k=k, v=v, cos=cos, sin=sin,
                leftpad=None if leftpad is None else lp, kw=kw, dtype=dtype)


def run_and_check(P, name, **opts):
    """Calls flashlab.attention_with_kvcache with each CPU impl (the float64 reference and
    cpu_flash) and checks out, lse and the caches (in place); returns cpu_flash's (out, lse)."""
    got = None
    for impl in ("reference", "cpu_flash"):
        got = run_and_check_impl(P, f"{name} [{impl}]", impl, **opts)
    return got


def run_and_check_impl(P, name, impl, **opts):
    ref_opts = {kk: opts[kk] for kk in ("causal", "window", "softcap", "alibi", "scale", "interleaved", "sinks",
                                        "sink_tokens") if kk in opts}  # fmt: skip
    want_out, want_lse, want_kc, want_vc = reference(
        P["q"], P["k_cache"], P["v_cache"], P["seqlens"], P["cache"], k=P["k"], v=P["v"], cos=P["cos"],
        sin=P["sin"], leftpad=P["leftpad"], dtype=P["dtype"], **ref_opts)
    kc, vc = P["k_cache"].copy(), P["v_cache"].copy()
    out, lse = flashlab.attention_with_kvcache(
        P["q"], kc, vc, P["seqlens"], k=P["k"], v=P["v"], rotary_cos=P["cos"], rotary_sin=P["sin"],
        rotary_interleaved=opts.get("interleaved", False), softmax_scale=opts.get("scale"),
        causal=opts.get("causal", False), window_size=opts.get("window", (-1, -1)),
        softcap=opts.get("softcap", 0.0), alibi_slopes=opts.get("alibi"), num_splits=opts.get("num_splits", 0),
        split_size=opts.get("split_size", 0), sink_logits=opts.get("sinks"), sink_tokens=opts.get("sink_tokens", 0),
        check_device_data=opts.get("check_device_data", False), impl=impl, **P["kw"])
    tol = TOL[P["dtype"]]
    check(f"{name} out", out, want_out, tol)
    check(f"{name} lse", lse, want_lse, tol)
    # The caches: the appended slots hold the new (rotated) keys and values, nothing else changed
    # (NaN poison stays exactly where it was: assert_array_equal treats NaN == NaN).
    if P["cos"] is None:
        np.testing.assert_array_equal(kc, want_kc)
    else:
        np.testing.assert_allclose(kc, want_kc, rtol=1e-6 if P["dtype"] == np.float32 else 1e-3, atol=1e-6)
        np.testing.assert_array_equal(np.isnan(kc), np.isnan(want_kc))
    np.testing.assert_array_equal(vc, want_vc)
    return out, lse


# ---------------------------------------------------------------------------------------------
# NumPy: attention_with_kvcache
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sq", [1, 4])
@pytest.mark.parametrize("causal", [False, True])
def test_contiguous_cache_batch_idx_append_gqa(sq, causal):
    """Decode (seqlen_q 1) and seqlen_q 4 with an append of as many keys, GQA 4:1, ragged lengths
    including an empty cache, rows picked by cache_batch_idx."""
    P = build(rng_for(f"contig{sq}{causal}"), sq=sq, t_new=sq, seqlens=(5, 0, 9), capacity=16)
    run_and_check(P, f"contiguous sq={sq} causal={causal}", causal=causal)


@pytest.mark.parametrize("sq", [1, 4])
def test_contiguous_no_append(sq):
    """Read-only cache (a NumPy array that is not writable works without an append); a sequence with
    an empty cache and no append attends to nothing: out 0, lse -inf."""
    P = build(rng_for(f"noappend{sq}"), sq=sq, seqlens=(7, 0, 12), permute_rows=False, capacity=12)
    P["k_cache"].flags.writeable = False
    P["v_cache"].flags.writeable = False
    out, lse = run_and_check(P, f"no append sq={sq}")
    assert (out[1] == 0).all() and np.isneginf(lse[1]).all()


@pytest.mark.parametrize("page_size", [1, 3, 16])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("sq", [1, 4])
def test_paged(page_size, layout, sq):
    P = build(rng_for(f"paged{page_size}{layout}{sq}"), sq=sq, t_new=sq, seqlens=(13, 0, 20), capacity=40,
              layout=layout, page_size=page_size)
    run_and_check(P, f"paged {layout} page_size={page_size} sq={sq}", causal=True)


@pytest.mark.parametrize("layout", ["contiguous", "NHD"])
def test_leftpad(layout):
    P = build(rng_for(f"leftpad{layout}"), sq=2, t_new=2, seqlens=(9, 4, 11), leftpad=(3, 4, 0), capacity=16,
              layout=layout, page_size=3)
    run_and_check(P, f"leftpad {layout}", causal=True)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rotary_dim", [8, 16])
def test_rotary(interleaved, rotary_dim):
    P = build(rng_for(f"rot{interleaved}{rotary_dim}"), sq=3, t_new=3, seqlens=(6, 2, 9), leftpad=(2, 0, 1),
              capacity=16, rotary_dim=rotary_dim, layout="NHD", page_size=5)
    run_and_check(P, f"rotary dim={rotary_dim} interleaved={interleaved}", causal=True, interleaved=interleaved)


@pytest.mark.parametrize("splits", [dict(num_splits=1), dict(num_splits=3), dict(split_size=2), dict(split_size=5)])
def test_splits(splits):
    P = build(rng_for(f"split{splits}"), sq=2, t_new=2, seqlens=(30, 0, 17), capacity=40, layout="HND", page_size=7)
    run_and_check(P, f"splits {splits}", causal=True, **splits)


def test_window_softcap_alibi_scale():
    rng = rng_for("features")
    P = build(rng, sq=3, t_new=3, seqlens=(12, 3, 20), capacity=24)
    alibi = rng.uniform(0.05, 0.5, (3, 8)).astype(np.float32)
    run_and_check(P, "window/softcap/alibi/scale", causal=True, window=(5, 0), softcap=3.0, alibi=alibi, scale=0.3)
    P = build(rng, sq=2, seqlens=(12, 3, 20), capacity=24)
    run_and_check(P, "window two-sided", window=(4, 1), alibi=alibi[0])


def test_fp16_rotary_tables():
    """float16 rotary tables are read as they are, as their exact values (the reference takes the
    same values in float64)."""
    P = build(rng_for("tables16"), sq=2, t_new=2, seqlens=(5, 0, 9), layout="NHD", page_size=3, rotary_dim=8)
    P["cos"], P["sin"] = P["cos"].astype(np.float16), P["sin"].astype(np.float16)
    run_and_check(P, "float16 tables", causal=True)


def test_fp16():
    P = build(rng_for("fp16"), sq=2, t_new=2, seqlens=(5, 0, 9), dtype=np.float16, layout="NHD", page_size=3,
              rotary_dim=8)
    run_and_check(P, "fp16", causal=True)


# ---------------------------------------------------------------------------------------------
# NumPy: StreamingLLM sink tokens (docs/kvcache.md, "Mask and scores")
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sink_tokens", [1, 4, 30])
@pytest.mark.parametrize("layout,page_size,splits", [("contiguous", None, dict(num_splits=1)),
                                                     ("NHD", 3, dict(num_splits=3)), ("HND", 1, dict(split_size=5)),
                                                     ("NHD", 16, dict(num_splits=0))])  # fmt: skip
def test_sink_tokens(sink_tokens, layout, page_size, splits):
    """The first sink_tokens keys after leftpad stay visible left of a window that leaves them:
    leftpad (sequence 1 keeps 3 keys, fewer than 4 sinks), the append with rotary, paged caches and
    every split setting; against the oracle on both CPU impls. Without the sinks the result differs."""
    P = build(rng_for(f"sinktok{sink_tokens}{layout}{page_size}{splits}"), sq=2, t_new=2, seqlens=(30, 3, 40),
              leftpad=(5, 2, 0), capacity=48, layout=layout, page_size=page_size or 4, rotary_dim=8)  # fmt: skip
    out, lse = run_and_check(P, f"sink_tokens={sink_tokens} {layout}", causal=True, window=(4, 0),
                             sink_tokens=sink_tokens, **splits)  # fmt: skip
    plain, _, _, _ = reference(P["q"], P["k_cache"], P["v_cache"], P["seqlens"], P["cache"], k=P["k"], v=P["v"],
                               cos=P["cos"], sin=P["sin"], leftpad=P["leftpad"], causal=True, window=(4, 0))  # fmt: skip
    assert not np.allclose(out, plain, atol=1e-3)


def test_sink_tokens_fp16_features():
    rng = rng_for("sinktok-fp16")
    P = build(rng, sq=3, t_new=3, seqlens=(12, 3, 20), capacity=24, dtype=np.float16, layout="HND", page_size=3)
    alibi = rng.uniform(0.05, 0.5, (3, 8)).astype(np.float32)
    run_and_check(P, "sink tokens fp16", causal=True, window=(2, 0), sink_tokens=2, softcap=3.0, alibi=alibi,
                  sinks=sink_logits(rng))  # fmt: skip
    P = build(rng, sq=2, seqlens=(12, 3, 20), capacity=24)  # not causal: a window on both sides
    run_and_check(P, "sink tokens two-sided window", window=(3, 1), sink_tokens=3)


def test_sink_tokens_errors_write_nothing():
    P = build(rng_for("sinktok-err"), sq=1, t_new=1, seqlens=(5, 0, 9))
    kc = P["k_cache"].copy()
    with pytest.raises(flashlab.FlashlabError, match=r"sink_tokens \(-1\) must be >= 0"):
        flashlab.attention_with_kvcache(P["q"], kc, P["v_cache"].copy(), P["seqlens"], k=P["k"], v=P["v"],
                                        sink_tokens=-1, **P["kw"])  # fmt: skip
    np.testing.assert_array_equal(kc, P["k_cache"])


# ---------------------------------------------------------------------------------------------
# NumPy: attention sinks (docs/kvcache.md, "Attention sinks")
# ---------------------------------------------------------------------------------------------
def sink_logits(rng, hq=8):
    """One logit per query head around the rows' LSE, so the sinks matter: head 2's is -inf (no
    sink), head 5's large (it takes most of the weight)."""
    sinks = rng.uniform(-1.0, 3.0, hq).astype(np.float32)
    sinks[2] = -np.inf
    sinks[5] = 6.0
    return sinks


SINK_CASES = [
    dict(layout="contiguous", splits=dict(num_splits=1)),
    dict(layout="contiguous", splits=dict(num_splits=3)),
    dict(layout="NHD", page_size=3, splits=dict(num_splits=3)),
    dict(layout="HND", page_size=16, splits=dict(split_size=4)),
    dict(layout="NHD", page_size=1, splits=dict(num_splits=0)),
]


@pytest.mark.parametrize("case", SINK_CASES, ids=lambda c: f"{c['layout']}{c.get('page_size', '')}-{c['splits']}")
def test_sinks_empty_cache(case):
    """GQA 4:1, no append, a sequence with cache length 0: its rows see no key and get out 0 and
    lse = sink_h (-inf for the head without a sink); the others include the sink in the softmax."""
    rng = rng_for(f"sinks-empty{case}")
    P = build(rng, sq=2, seqlens=(13, 0, 21), capacity=24, layout=case["layout"], page_size=case.get("page_size", 4))
    sinks = sink_logits(rng)
    out, lse = run_and_check(P, f"sinks {case}", sinks=sinks, **case["splits"])
    assert (out[1] == 0).all()
    # cpu_flash keeps the sink in base 2 (sink * log2 e) and converts back: within an ulp or so.
    check("empty rows' lse", lse[1], np.broadcast_to(sinks[:, None], (8, 2)).astype(np.float64), 1e-6)


@pytest.mark.parametrize("sq", [1, 4])
@pytest.mark.parametrize("layout,page_size", [("contiguous", None), ("NHD", 3), ("HND", 5)])
def test_sinks_append_causal_splits(sq, layout, page_size):
    """With an in-place append, causal, seqlen_q 1 and 4, GQA 4:1, num_splits 3 (and 1): the sink is
    merged after the splits, so every split setting is the same math."""
    rng = rng_for(f"sinks-append{sq}{layout}{page_size}")
    P = build(rng, sq=sq, t_new=sq, seqlens=(5, 0, 17), capacity=24, layout=layout, page_size=page_size or 4,
              leftpad=(2, 0, 1))  # fmt: skip
    sinks = sink_logits(rng)
    for splits in (dict(num_splits=3), dict(num_splits=1)):
        run_and_check(P, f"sinks append {layout} sq={sq} {splits}", causal=True, sinks=sinks, **splits)


def test_sinks_with_features_and_fp16():
    """Sinks beside window, softcap, ALiBi and a scale (fp32), and in fp16."""
    rng = rng_for("sinks-features")
    P = build(rng, sq=3, t_new=3, seqlens=(12, 3, 20), capacity=24)
    alibi = rng.uniform(0.05, 0.5, (3, 8)).astype(np.float32)
    run_and_check(P, "sinks+features", causal=True, window=(5, 0), softcap=3.0, alibi=alibi, scale=0.3,
                  sinks=sink_logits(rng), num_splits=3)  # fmt: skip
    P = build(rng, sq=2, t_new=2, seqlens=(5, 0, 9), dtype=np.float16, layout="NHD", page_size=3)
    run_and_check(P, "sinks fp16", causal=True, sinks=sink_logits(rng))


def test_sinks_minus_inf_is_no_sink():
    """Every sink -inf gives what no sinks give; float64 sinks are converted to float32."""
    P = build(rng_for("sinks-neginf"), sq=2, t_new=2, seqlens=(7, 0, 11), capacity=16)
    def run(**sinks):
        return flashlab.attention_with_kvcache(P["q"], P["k_cache"].copy(), P["v_cache"].copy(), P["seqlens"],
                                               k=P["k"], v=P["v"], causal=True, **sinks, **P["kw"])  # fmt: skip

    for a, b in zip(run(), run(sink_logits=np.full(8, -np.inf))):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


def test_sinks_errors_write_nothing():
    P = build(rng_for("sinks-errors"), sq=1, t_new=2, seqlens=(5, 0, 9), layout="NHD", page_size=3, capacity=12)
    error_case(P, r"sink_logits.shape \(2,\) must be \(heads_q,\) = \(8,\)", sink_logits=np.zeros(2, np.float32))
    nan = np.zeros(8, np.float32)
    nan[3] = np.nan
    error_case(P, r"sink_logits\[3\] \(nan\) must be finite or -inf", sink_logits=nan)
    error_case(P, r"sink_logits\[0\] \(inf\) must be finite or -inf", sink_logits=np.full(8, np.inf, np.float32))
    # _core takes float32 only (the NumPy front converts)
    out = np.empty_like(P["q"])
    with pytest.raises(flashlab.FlashlabError, match=r"sink_logits.dtype \(float64\) must be float32"):
        flashlab._core.attention_with_kvcache(P["q"], P["k_cache"].copy(), P["v_cache"].copy(), P["seqlens"], out,
                                              sink_logits=np.zeros(8), **P["kw"])  # fmt: skip


def test_kvcache_append_alone():
    P = build(rng_for("append"), sq=1, t_new=3, seqlens=(5, 0, 9), layout="HND", page_size=3, rotary_dim=16)
    _, _, want_kc, want_vc = reference(P["q"], P["k_cache"], P["v_cache"], P["seqlens"], P["cache"], k=P["k"],
                                       v=P["v"], cos=P["cos"], sin=P["sin"])
    kc, vc = P["k_cache"].copy(), P["v_cache"].copy()
    flashlab.kvcache_append(kc, vc, P["seqlens"], P["k"], P["v"], rotary_cos=P["cos"], rotary_sin=P["sin"], **P["kw"])
    np.testing.assert_allclose(kc, want_kc, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.isnan(kc), np.isnan(want_kc))
    np.testing.assert_array_equal(vc, want_vc)


def test_core_poisoned_outputs_and_strided_lse():
    """_core writes every element of caller-provided (NaN-poisoned) out and lse."""
    P = build(rng_for("core"), sq=2, t_new=2, seqlens=(3, 0, 6))
    want_out, want_lse, _, _ = reference(P["q"], P["k_cache"], P["v_cache"], P["seqlens"], P["cache"], k=P["k"],
                                         v=P["v"], causal=True)
    out = np.full(P["q"].shape, np.nan, np.float32)
    lse_buf = np.full((3, 8, 4), np.nan, np.float32)
    lse = lse_buf[:, :, :2]  # rows contiguous, a gap between heads
    flashlab._core.attention_with_kvcache(P["q"], P["k_cache"].copy(), P["v_cache"].copy(), P["seqlens"], out, lse,
                                          k=P["k"], v=P["v"], causal=True, **P["kw"])
    check("out", out, want_out, 2e-5)
    check("lse", lse, want_lse, 2e-5)
    assert np.isnan(lse_buf[:, :, 2:]).all()


# ---------------------------------------------------------------------------------------------
# NumPy: attention_combine
# ---------------------------------------------------------------------------------------------
def combine_reference(op, lp):
    op, lp = op.astype(np.float64), lp.astype(np.float64)
    m = lp.max(axis=0)
    m_safe = np.where(np.isneginf(m), 0, m)
    w = np.exp(lp - m_safe)  # (splits, b, h, sq)
    den = w.sum(axis=0)
    lse = np.where(den > 0, m_safe + np.log(np.where(den > 0, den, 1)), -np.inf)
    wt = np.transpose(w, (0, 1, 3, 2))[..., None]  # (splits, b, sq, h, 1)
    den_t = np.transpose(den, (0, 2, 1))  # (b, sq, h)
    out = (wt * op).sum(axis=0) / np.where(den_t > 0, den_t, 1)[..., None]
    return out, lse


@pytest.mark.parametrize("out_dtype", [None, np.float16])
def test_combine(out_dtype):
    rng = rng_for("combine")
    s, b, sq, h, d = 4, 2, 3, 5, 8
    op = rng.standard_normal((s, b, sq, h, d)).astype(np.float32)
    lp = rng.uniform(-3, 3, (s, b, h, sq)).astype(np.float32)
    lp[1] = -np.inf  # a split with no visible key
    op[1] = np.nan  # ... whose output must not be read
    lp[:, 1, 2, 0] = -np.inf  # a row whose every split is empty
    op[:, 1, 0, 2] = np.nan
    want_out, want_lse = combine_reference(np.nan_to_num(op), lp)
    out, lse = flashlab.attention_combine(op, lp, out_dtype=out_dtype)
    assert out.dtype == (np.float32 if out_dtype is None else out_dtype)
    check("combine out", out, want_out, 2e-5 if out_dtype is None else 2e-3)
    check("combine lse", lse, want_lse, 2e-5)
    assert (out[1, 0, 2] == 0).all() and np.isneginf(lse[1, 2, 0])


def test_combine_matches_split_attention():
    """Two halves of the keys attended separately (no append) and combined = the whole."""
    P = build(rng_for("combine2"), sq=2, seqlens=(10, 7, 12), permute_rows=False, capacity=12)
    q, kc, vc = P["q"], np.nan_to_num(P["k_cache"]), np.nan_to_num(P["v_cache"])
    lens = P["seqlens"]
    first = np.minimum(lens, 5).astype(np.int32)
    o1, l1 = flashlab.attention_with_kvcache(q, kc, vc, first)
    # the second half: keys [5, len) as their own cache
    kc2, vc2 = np.zeros_like(kc), np.zeros_like(vc)
    kc2[:, :7], vc2[:, :7] = kc[:, 5:], vc[:, 5:]
    o2, l2 = flashlab.attention_with_kvcache(q, kc2, vc2, np.maximum(lens - 5, 0).astype(np.int32))
    out, lse = flashlab.attention_combine(np.stack([o1, o2]), np.stack([l1, l2]))
    whole, whole_lse = flashlab.attention_with_kvcache(q, kc, vc, lens)
    check("combined", out, whole.astype(np.float64), 2e-5)
    check("combined lse", lse, whole_lse.astype(np.float64), 2e-5)


# ---------------------------------------------------------------------------------------------
# Errors: a clear exception, nothing written
# ---------------------------------------------------------------------------------------------
def error_case(P, match, exc=flashlab.FlashlabError, **over):
    kc, vc = P["k_cache"].copy(), P["v_cache"].copy()
    args = dict(k=P["k"], v=P["v"], **P["kw"])
    args.update(over.pop("kw", {}))
    q = over.pop("q", P["q"])
    kc = over.pop("k_cache", kc)
    vc = over.pop("v_cache", vc)
    before_k, before_v = kc.copy(), vc.copy()
    with pytest.raises(exc, match=match):
        flashlab.attention_with_kvcache(q, kc, vc, over.pop("seqlens", P["seqlens"]), **args, **over)
    np.testing.assert_array_equal(kc, before_k)
    np.testing.assert_array_equal(vc, before_v)


def test_errors():
    rng = rng_for("errors")
    P = build(rng, sq=1, t_new=2, seqlens=(5, 0, 9), layout="NHD", page_size=3, capacity=12)
    bad = P["kw"]["block_table"].copy()
    bad[2, 1] = P["k_cache"].shape[0]  # past the last page
    error_case(P, r"block_table\[2\]\[1\] \(\d+\) out of range", kw=dict(block_table=bad))
    # page_size mismatch between k_cache and v_cache
    vbad = np.zeros((P["v_cache"].shape[0], 4) + P["v_cache"].shape[2:], np.float32)
    error_case(P, r"v_cache.shape .* must equal k_cache.shape", v_cache=vbad)
    # a table too short for the append: capacity 4 pages * 3 = 12 < 9 + 2 + 2
    k3 = rng.standard_normal((3, 4, 2, 16)).astype(np.float32)
    full = np.where(P["kw"]["block_table"] < 0, 0, P["kw"]["block_table"]).astype(np.int32)
    error_case(P, r"cache too short for the append", kw=dict(k=k3, v=k3.copy(), block_table=full))
    # dtypes
    error_case(P, r"cache_dtype \(fp16\) must equal dtype \(fp32\)|must equal dtype",
               k_cache=P["k_cache"].astype(np.float16), v_cache=P["v_cache"].astype(np.float16),
               kw=dict(k=P["k"].astype(np.float16), v=P["v"].astype(np.float16)))
    error_case(P, r"k and v .* must have k_cache's dtype", kw=dict(k=P["k"].astype(np.float16)))
    error_case(P, r"cache_seqlens.dtype \(int64\) must be int32|cache_seqlens", seqlens=np.array([5, 0, 99]))
    error_case(P, r"page_layout \('XYZ'\)", kw=dict(page_layout="XYZ"))
    error_case(P, r"set num_splits .* or split_size .*, not both", num_splits=2, split_size=4)
    # append into a read-only cache
    ro = P["k_cache"].copy()
    ro.flags.writeable = False
    with pytest.raises(flashlab.FlashlabError, match="k_cache must be a writable tensor"):
        flashlab.attention_with_kvcache(P["q"], ro, P["v_cache"].copy(), P["seqlens"], k=P["k"], v=P["v"], **P["kw"])
    # combine: shapes
    with pytest.raises(flashlab.FlashlabError, match="lse_partial.shape"):
        flashlab.attention_combine(np.zeros((2, 1, 1, 2, 4), np.float32), np.zeros((2, 1, 1, 3), np.float32))


def test_contiguous_errors():
    P = build(rng_for("errors2"), sq=1, t_new=1, seqlens=(5, 0, 9), capacity=10)
    rows = P["kw"]["cache_batch_idx"].copy()
    rows[0] = 5
    error_case(P, r"cache_batch_idx\[0\] \(5\) out of range", kw=dict(cache_batch_idx=rows))
    error_case(P, r"cache too short for the append", seqlens=np.array([5, 0, 10], np.int32))
    error_case(P, r"seqlen_q \(2\) > attended length", q=np.zeros((3, 2, 8, 16), np.float32), causal=True)


@pytest.mark.parametrize("check_device_data", [False, True])
def test_bad_side_arrays_write_nothing(check_device_data):
    """On the CPU the int32 side arrays are host memory and always checked entry by entry
    (docs/kvcache.md, "Validation"), with check_device_data or without: cache_seqlens past the
    capacity or negative, an append that does not fit, a page index out of range all raise
    FlashlabError (invalid_argument, not UnsupportedError) and write nothing."""
    P = build(rng_for("side-arrays"), sq=1, t_new=2, seqlens=(5, 0, 9), layout="NHD", page_size=3, capacity=12)
    opts = dict(check_device_data=check_device_data)
    error_case(P, r"cache_seqlens\[1\] \(13\) must be in \[0, capacity \(12\)\]",
               seqlens=np.array([5, 13, 9], np.int32), **opts)  # fmt: skip
    error_case(P, r"cache_seqlens\[0\] \(-1\) must be in \[0, capacity", seqlens=np.array([-1, 0, 9], np.int32), **opts)
    error_case(P, r"cache too short for the append: cache_seqlens\[2\] \(11\)", seqlens=np.array([5, 0, 11], np.int32),
               **opts)  # fmt: skip
    bad = P["kw"]["block_table"].copy()
    bad[0, 1] = -3
    error_case(P, r"block_table\[0\]\[1\] \(-3\) out of range", kw=dict(block_table=bad), **opts)
    kc = P["k_cache"].copy()
    with pytest.raises(flashlab.FlashlabError) as e:
        flashlab.attention_with_kvcache(P["q"], kc, P["v_cache"].copy(), P["seqlens"], k=P["k"], v=P["v"],
                                        block_table=bad, page_layout="NHD", **opts)  # fmt: skip
    assert not isinstance(e.value, flashlab.UnsupportedError) and e.value.code == "invalid_argument"
    np.testing.assert_array_equal(kc, P["k_cache"])
    # Contiguous: a cache row out of range.
    P = build(rng_for("side-arrays2"), sq=1, t_new=1, seqlens=(5, 0, 9), capacity=10)
    rows = P["kw"]["cache_batch_idx"].copy()
    rows[2] = -1
    error_case(P, r"cache_batch_idx\[2\] \(-1\) out of range", kw=dict(cache_batch_idx=rows), **opts)


def test_check_device_data_valid_data_same_result():
    """With valid data the flag changes nothing on the CPU: the same bits."""
    P = build(rng_for("cdd-same"), sq=2, t_new=2, seqlens=(5, 0, 9), layout="HND", page_size=3, capacity=12)
    runs = []
    for flag in (False, True):
        kc, vc = P["k_cache"].copy(), P["v_cache"].copy()
        out, lse = flashlab.attention_with_kvcache(P["q"], kc, vc, P["seqlens"], k=P["k"], v=P["v"], causal=True,
                                                   check_device_data=flag, **P["kw"])  # fmt: skip
        runs.append((out, lse, kc, vc))
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)
    run_and_check(P, "check_device_data", causal=True, check_device_data=True)


# ---------------------------------------------------------------------------------------------
# torch: flash_attn_interface.flash_attn_with_kvcache / flash_attn_combine (CPU)
# ---------------------------------------------------------------------------------------------
_REQ = __import__("inspect").Parameter.empty
FLASH_ATTN_KVCACHE_PARAMS = [
    ("q", _REQ), ("k_cache", _REQ), ("v_cache", _REQ), ("k", None), ("v", None), ("rotary_cos", None),
    ("rotary_sin", None), ("cache_seqlens", None), ("cache_batch_idx", None), ("cache_leftpad", None),
    ("block_table", None), ("softmax_scale", None), ("causal", False), ("window_size", (-1, -1)),
    ("softcap", 0.0), ("rotary_interleaved", True), ("alibi_slopes", None), ("num_splits", 0),
    ("return_softmax_lse", False),
]
# flash-attn 3's keywords, keyword-only after flash-attn 2's positional order (page_table is
# block_table; the rest raise UnsupportedError when set, or are scheduling hints that are ignored).
FLASH_ATTN3_KVCACHE_KEYWORDS = [
    ("page_table", None), ("qv", None), ("q_descale", None), ("k_descale", None), ("v_descale", None),
    ("cu_seqlens_q", None), ("cu_seqlens_k_new", None), ("max_seqlen_q", None), ("rotary_seqlens", None),
    ("attention_chunk", 0), ("scheduler_metadata", None), ("pack_gqa", None), ("sm_margin", 0),
]
# flashlab's own keywords, keyword-only after flash-attn 3's: StreamingLLM sink tokens.
FLASHLAB_KVCACHE_KEYWORDS = [("sink_tokens", 0)]


@needs_torch
def test_flash_attn_with_kvcache_signature():
    import inspect

    from flashlab import flash_attn_interface as fa

    params = list(inspect.signature(fa.flash_attn_with_kvcache).parameters.values())
    n = len(FLASH_ATTN_KVCACHE_PARAMS)
    assert [(p.name, p.default) for p in params[:n]] == FLASH_ATTN_KVCACHE_PARAMS
    assert [(p.name, p.default) for p in params[n:]] == FLASH_ATTN3_KVCACHE_KEYWORDS + FLASHLAB_KVCACHE_KEYWORDS
    assert all(p.kind == p.KEYWORD_ONLY for p in params[n:])


def _t(x, dtype):
    return None if x is None else torch.from_numpy(np.ascontiguousarray(x)).to(dtype)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("layout", ["contiguous", "NHD"])
@pytest.mark.parametrize("interleaved", [True, False])
def test_flash_attn_with_kvcache_torch(dtype, layout, interleaved):
    from flashlab.flash_attn_interface import flash_attn_with_kvcache

    tdt = getattr(torch, dtype)
    P = build(rng_for(f"torch{dtype}{layout}{interleaved}"), sq=2, t_new=2, seqlens=(5, 0, 9), leftpad=(1, 0, 2),
              layout=layout, page_size=4, rotary_dim=8)
    # inputs rounded to the dtype first, so that the float64 reference sees what torch sees
    for name in ("q", "k_cache", "v_cache", "k", "v"):
        P[name] = _t(P[name], tdt).float().numpy()
    want_out, want_lse, want_kc, want_vc = reference(
        P["q"], P["k_cache"], P["v_cache"], P["seqlens"], P["cache"], k=P["k"], v=P["v"], cos=P["cos"],
        sin=P["sin"], interleaved=interleaved, leftpad=P["leftpad"], causal=True,
        dtype=np.float32)
    kc, vc = _t(P["k_cache"], tdt), _t(P["v_cache"], tdt)
    kw = {kk: torch.from_numpy(vv) for kk, vv in P["kw"].items() if kk != "page_layout"}
    out, lse = flash_attn_with_kvcache(
        _t(P["q"], tdt), kc, vc, _t(P["k"], tdt), _t(P["v"], tdt), rotary_cos=torch.from_numpy(P["cos"]),
        rotary_sin=torch.from_numpy(P["sin"]), cache_seqlens=torch.from_numpy(P["seqlens"]), causal=True,
        rotary_interleaved=interleaved, return_softmax_lse=True, **kw)
    assert out.dtype == tdt and lse.dtype == torch.float32
    tol = 2e-5 if dtype == "float32" else 3e-2
    check("torch out", out.float().numpy(), want_out, tol)
    check("torch lse", lse.numpy(), want_lse, tol)
    got_kc = kc.float().numpy()
    np.testing.assert_array_equal(np.isnan(got_kc), np.isnan(want_kc))
    np.testing.assert_allclose(np.nan_to_num(got_kc), np.nan_to_num(want_kc), rtol=tol, atol=tol)
    np.testing.assert_array_equal(vc.float().numpy(), want_vc)


@needs_torch
def test_flash_attn_with_kvcache_torch_int_seqlens_and_combine():
    from flashlab.flash_attn_interface import flash_attn_combine, flash_attn_with_kvcache

    g = torch.Generator().manual_seed(zlib.crc32(b"torch-int"))
    q = torch.randn(2, 1, 4, 8, generator=g)
    kc, vc = torch.randn(2, 6, 2, 8, generator=g), torch.randn(2, 6, 2, 8, generator=g)
    out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=6)
    assert isinstance(out, torch.Tensor)
    a, la = flash_attn_with_kvcache(q, kc[:, :3], vc[:, :3], cache_seqlens=3, return_softmax_lse=True)
    b, lb = flash_attn_with_kvcache(q, kc[:, 3:], vc[:, 3:], cache_seqlens=3, return_softmax_lse=True)
    merged, lse = flash_attn_combine(torch.stack([a, b]), torch.stack([la, lb]))
    torch.testing.assert_close(merged, out, rtol=1e-5, atol=1e-5)
    dst = torch.empty_like(out, dtype=torch.bfloat16)
    res, _ = flash_attn_combine(torch.stack([a, b]), torch.stack([la, lb]), out=dst)
    assert res is dst
    torch.testing.assert_close(dst.float(), out, rtol=1e-2, atol=1e-2)
    with pytest.raises(flashlab.FlashlabError, match="cache too short"):
        flash_attn_with_kvcache(q, kc, vc, k=torch.randn(2, 1, 2, 8), v=torch.randn(2, 1, 2, 8), cache_seqlens=6)


@needs_torch
def test_flash_attn_with_kvcache_torch_features():
    """Window, softcap, ALiBi (batch, nheads), num_splits, int64 cache_seqlens, a q that requires
    grad, a paged cache of page size 1; then a dtype mismatch is refused without writing the cache."""
    from flashlab.flash_attn_interface import flash_attn_with_kvcache

    rng = rng_for("torch-features")
    P = build(rng, sq=3, t_new=3, seqlens=(12, 3, 20), capacity=24, layout="NHD", page_size=1)
    alibi = rng.uniform(0.05, 0.5, (3, 8)).astype(np.float32)
    want_out, want_lse, _, _ = reference(
        P["q"], P["k_cache"], P["v_cache"], P["seqlens"], P["cache"], k=P["k"], v=P["v"], causal=True,
        window=(5, 0), softcap=3.0, alibi=alibi, scale=0.3)
    kc, vc = torch.from_numpy(P["k_cache"].copy()), torch.from_numpy(P["v_cache"].copy())
    q = torch.from_numpy(P["q"]).requires_grad_()
    out, lse = flash_attn_with_kvcache(
        q, kc, vc, torch.from_numpy(P["k"]), torch.from_numpy(P["v"]),
        cache_seqlens=torch.from_numpy(P["seqlens"]).long(), block_table=torch.from_numpy(P["kw"]["block_table"]),
        softmax_scale=0.3, causal=True, window_size=(5, 0), softcap=3.0, alibi_slopes=torch.from_numpy(alibi),
        num_splits=3, return_softmax_lse=True)
    check("torch features out", out.numpy(), want_out, 2e-5)
    check("torch features lse", lse.numpy(), want_lse, 2e-5)
    before = P["k_cache"].copy()
    kc2 = torch.from_numpy(before.copy())
    with pytest.raises(flashlab.FlashlabError, match="must equal dtype"):
        flash_attn_with_kvcache(
            q.detach().to(torch.bfloat16), kc2, torch.from_numpy(P["v_cache"].copy()), torch.from_numpy(P["k"]),
            torch.from_numpy(P["v"]), cache_seqlens=torch.from_numpy(P["seqlens"]),
            block_table=torch.from_numpy(P["kw"]["block_table"]))
    np.testing.assert_array_equal(kc2.numpy(), before)


@needs_torch
def test_flash_attn_with_kvcache_torch_sink_tokens():
    """flashlab's keyword sink_tokens through flash_attn_with_kvcache: torch tensors (bf16 too) and
    NumPy arrays, against the oracle."""
    from flashlab.flash_attn_interface import flash_attn_with_kvcache

    P = build(rng_for("torch-sinktok"), sq=2, t_new=2, seqlens=(20, 4, 33), leftpad=(3, 1, 0), capacity=40,
              layout="NHD", page_size=4)  # fmt: skip
    want_out, want_lse, _, _ = reference(
        P["q"], P["k_cache"], P["v_cache"], P["seqlens"], P["cache"], k=P["k"], v=P["v"], leftpad=P["leftpad"],
        causal=True, window=(3, 0), sink_tokens=4)
    kw = {kk: torch.from_numpy(vv) for kk, vv in P["kw"].items() if kk != "page_layout"}
    for dtype, tol in ((torch.float32, 2e-5), (torch.bfloat16, 3e-2)):
        out, lse = flash_attn_with_kvcache(
            torch.from_numpy(P["q"]).to(dtype), _t(P["k_cache"], dtype), _t(P["v_cache"], dtype),
            _t(P["k"], dtype), _t(P["v"], dtype), cache_seqlens=torch.from_numpy(P["seqlens"]), causal=True,
            window_size=(3, 0), return_softmax_lse=True, sink_tokens=4, **kw)  # fmt: skip
        if dtype == torch.float32:
            check("torch sink tokens out", out.numpy(), want_out, tol)
            check("torch sink tokens lse", lse.numpy(), want_lse, tol)
        else:  # bf16 inputs: a loose check against the fp32 oracle
            np.testing.assert_allclose(out.float().numpy(), want_out, atol=tol * 4, rtol=0)
    nkw = {kk: vv for kk, vv in P["kw"].items() if kk != "page_layout"}
    out, lse = flash_attn_with_kvcache(P["q"], P["k_cache"].copy(), P["v_cache"].copy(), P["k"], P["v"],
                                       cache_seqlens=P["seqlens"], causal=True, window_size=(3, 0),
                                       return_softmax_lse=True, sink_tokens=4, **nkw)  # fmt: skip
    check("numpy sink tokens out", out, want_out, 2e-5)


def _has_cuda():
    info = flashlab.build_info()
    return torch is not None and info["cuda_compiled"] and info["cuda_device_count"] > 0 and torch.version.cuda is not None


@pytest.mark.skipif(not _has_cuda(), reason="needs torch, a CUDA device and a CUDA build of libflashlab")
def test_cuda_tensors_reach_the_cpp_api():
    """CUDA tensors go through the flash-attn entry points to the CUDA KV-cache path: the fused
    append writes the cache on the device, and out matches the same call on CPU tensors."""
    from flashlab.flash_attn_interface import flash_attn_with_kvcache

    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 1, 4, 64, generator=g).to(torch.bfloat16)
    kc = torch.randn(2, 16, 1, 64, generator=g).to(torch.bfloat16)
    vc = torch.randn(2, 16, 1, 64, generator=g).to(torch.bfloat16)
    k = torch.randn(2, 1, 1, 64, generator=g).to(torch.bfloat16)
    v = torch.randn(2, 1, 1, 64, generator=g).to(torch.bfloat16)
    kc_cpu, vc_cpu = kc.clone(), vc.clone()
    want = flash_attn_with_kvcache(q, kc_cpu, vc_cpu, k, v, cache_seqlens=3)
    kc_gpu, vc_gpu = kc.cuda(), vc.cuda()
    got = flash_attn_with_kvcache(q.cuda(), kc_gpu, vc_gpu, k.cuda(), v.cuda(), cache_seqlens=3)
    assert torch.equal(kc_gpu.cpu(), kc_cpu) and torch.equal(vc_gpu.cpu(), vc_cpu)  # the append, bit for bit
    torch.testing.assert_close(got.cpu().float(), want.float(), atol=2e-2, rtol=2e-2)
