"""flashlab._core through NumPy on the CPU backends (runs in CI: no torch, no GPU).

Every numeric check compares against the float64 reference in attention_reference.py, on inputs
already rounded to the tested dtype, with a tolerance relative to the error of storing the exact
result in that dtype. Outputs are poisoned with NaN before each call, so an element the library
did not write fails the check.
"""

import importlib
import sys
import zlib

import numpy as np
import pytest

import flashlab
from flashlab import _core
from attention_reference import check_close, numpy_attention

DTYPES = {"float32": np.float32, "float16": np.float16}

# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, options). Seqlens 1, 17, 113 and
# seqlen_q != seqlen_k both ways; GQA/MQA; both causal alignments (bottom-right with
# seqlen_q > seqlen_k leaves rows that see no key); window; softcap; ALiBi.
CASES = [
    (1, 1, 1, 1, 1, 32, {}),
    (2, 17, 17, 4, 2, 64, {"causal": True}),
    (1, 113, 17, 3, 1, 40, {"causal": True}),
    (2, 17, 113, 6, 2, 64, {"causal": True, "causal_align": "top_left"}),
    (1, 113, 113, 2, 2, 32, {"window": (16, 3)}),
    (1, 17, 113, 2, 1, 128, {"window": (7, -1), "causal_align": "top_left"}),
    (2, 17, 113, 4, 4, 64, {"softcap": 2.0, "softmax_scale": 0.5}),
    (1, 113, 17, 4, 2, 32, {"alibi": True, "causal": True}),
]


def case_id(case):
    b, sq, sk, hq, hkv, d, opts = case
    return f"b{b}_q{sq}_k{sk}_h{hq}x{hkv}_d{d}_" + "_".join(f"{k}={v}" for k, v in opts.items())


def make_inputs(rng, case, dtype):
    b, sq, sk, hq, hkv, d, opts = case
    q = rng.standard_normal((b, sq, hq, d)).astype(dtype)
    k = rng.standard_normal((b, sk, hkv, d)).astype(dtype)
    v = rng.standard_normal((b, sk, hkv, d)).astype(dtype)
    opts = dict(opts)
    if opts.pop("alibi", False):
        opts["alibi_slopes"] = rng.uniform(0.05, 0.5, size=(b, hq)).astype(np.float32)
    return q, k, v, opts


def core_kwargs(opts):
    """numpy_attention's options spelled for flashlab._core."""
    kw = dict(opts)
    left, right = kw.pop("window", (-1, -1))
    return dict(kw, window_left=left, window_right=right)


def run_forward_backward(q, k, v, dout, opts, impl):
    b, sq, hq, _ = q.shape
    out = np.full(q.shape, np.nan, dtype=q.dtype)
    lse = np.full((b, hq, sq), np.nan, dtype=np.float32)
    _core.forward(q, k, v, out, lse, impl=impl, **core_kwargs(opts))
    dq, dk, dv = (np.full(x.shape, np.nan, dtype=x.dtype) for x in (q, k, v))
    _core.backward(dout, q, k, v, out, lse, dq, dk, dv, impl=impl, **core_kwargs(opts))
    return {"out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv}


# cpu_flash on every case; the reference backend (already the C++ suite's oracle) on two.
RUNS = [(c, dt, "cpu_flash") for c in CASES for dt in DTYPES] + [
    (c, dt, "reference") for c in CASES[1:3] for dt in DTYPES
]


def check_vs_float64(case, dtype, impl):
    """One case through `impl`'s forward and backward against float64, on fresh inputs seeded by the
    case; returns the inputs, the options and the float64 result."""
    rng = np.random.default_rng(zlib.crc32(f"{case_id(case)}/{dtype}/{impl}".encode()))
    q, k, v, opts = make_inputs(rng, case, DTYPES[dtype])
    dout = rng.standard_normal(q.shape).astype(DTYPES[dtype])
    got = run_forward_backward(q, k, v, dout, opts, impl)
    exact = numpy_attention(q, k, v, dout, **opts)
    for name in ("out", "dq", "dk", "dv"):
        baseline = exact[name].astype(DTYPES[dtype])  # a perfect result, stored in the dtype
        check_close(name, got[name], exact[name], baseline, dtype, scale=exact["scale"][name])
    check_close("lse", got["lse"], exact["lse"], exact["lse"].astype(np.float32), "float32")
    return q, k, v, opts, exact


@pytest.mark.parametrize("case, dtype, impl", RUNS, ids=[f"{case_id(c)}-{dt}-{i}" for c, dt, i in RUNS])
def test_forward_backward_vs_float64(case, dtype, impl):
    check_vs_float64(case, dtype, impl)


def test_the_check_can_fail():
    """A 1% error in one element, or one NaN, is caught in every dtype."""
    rng = np.random.default_rng(0)
    q, k, v, _ = make_inputs(rng, CASES[1], np.float32)
    for dtype in DTYPES:
        exact = numpy_attention(q, k, v)["out"]
        baseline = exact.astype(DTYPES[dtype])
        bad = baseline.astype(np.float64)
        bad.flat[7] += 0.01 * np.abs(exact).max()
        with pytest.raises(AssertionError, match="max error"):
            check_close("out", bad, exact, baseline, dtype)
        bad.flat[7] = np.nan
        with pytest.raises(AssertionError, match="non-finite"):
            check_close("out", bad, exact, baseline, dtype)


def test_rows_without_keys_give_zero_and_minus_inf():
    rng = np.random.default_rng(1)
    q, k, v, _ = make_inputs(rng, (1, 9, 4, 2, 2, 32, {}), np.float32)
    out, lse = flashlab.attention(q, k, v, causal=True)  # bottom-right: rows 0..4 see no key
    assert np.all(out[:, :5] == 0.0)
    assert np.all(lse[:, :, :5] == -np.inf)
    assert np.all(np.isfinite(lse[:, :, 5:]))


def test_attention_convenience_allocates_outputs():
    rng = np.random.default_rng(2)
    q, k, v, _ = make_inputs(rng, (2, 17, 113, 4, 2, 64, {}), np.float16)
    out, lse = flashlab.attention(q, k, v)
    assert out.dtype == np.float16 and out.shape == q.shape
    assert lse.dtype == np.float32 and lse.shape == (2, 4, 17)
    exact = numpy_attention(q, k, v)
    check_close("out", out, exact["out"], exact["out"].astype(np.float16), "float16")
    dout = rng.standard_normal(q.shape).astype(np.float16)
    dq, dk, dv = flashlab.attention_backward(dout, q, k, v, out, lse)
    exact = numpy_attention(q, k, v, dout)
    check_close("dk", dk, exact["dk"], exact["dk"].astype(np.float16), "float16")


def test_strided_views_are_used_in_place():
    """Outer strides pass through unchanged: a head slice of a wider buffer needs no copy."""
    rng = np.random.default_rng(3)
    wide = rng.standard_normal((3, 2, 17, 6, 32)).astype(np.float32)
    q, k, v = wide[0, :, :, 1:5], wide[1, :, :, 0:2], wide[2, :, :, 2:4]  # (2, 17, h, 32) views
    q.flags.writeable = False  # read-only inputs are fine
    got, lse = flashlab.attention(q, k, v, causal=True)
    want, lse_want = flashlab.attention(*(np.ascontiguousarray(x) for x in (q, k, v)), causal=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(lse, lse_want)


def check_varlen_against_each_sequence(rng, lens_q, lens_k, **mask):
    """A packed fp32 batch (heads 4 / 2, head dim 32) through flashlab.attention and its backward
    with `mask`, each sequence against numpy_attention on that sequence alone."""
    hq, hkv, d = 4, 2, 32
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q = rng.standard_normal((cu_q[-1], hq, d)).astype(np.float32)
    k = rng.standard_normal((cu_k[-1], hkv, d)).astype(np.float32)
    v = rng.standard_normal((cu_k[-1], hkv, d)).astype(np.float32)
    dout = rng.standard_normal(q.shape).astype(np.float32)
    opts = dict(mask, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    out, lse = flashlab.attention(q, k, v, **opts)
    assert lse.shape == (hq, cu_q[-1])
    dq, dk, dv = flashlab.attention_backward(dout, q, k, v, out, lse, **opts)
    for b in range(len(lens_q)):
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        ex = numpy_attention(q[None, sq], k[None, sk], v[None, sk], dout[None, sq], **mask)
        for name, got in (("out", out[sq]), ("dq", dq[sq]), ("dk", dk[sk]), ("dv", dv[sk])):
            check_close(f"seq{b}.{name}", got[None], ex[name], ex[name].astype(np.float32), "float32",
                        scale=ex["scale"][name])  # fmt: skip
        check_close(f"seq{b}.lse", lse[:, sq][None], ex["lse"], ex["lse"].astype(np.float32), "float32")


def test_varlen_matches_each_sequence():
    check_varlen_against_each_sequence(np.random.default_rng(4), [5, 1, 17], [9, 17, 1], causal=True)


# ---------------------------------------------------------------------------------------------
# Dropout: the same seed and offset give the same mask in forward and backward, on every backend
# ---------------------------------------------------------------------------------------------
def dropout_problem(seed=5):
    rng = np.random.default_rng(seed)
    q, k, v, _ = make_inputs(rng, (1, 17, 23, 2, 1, 32, {}), np.float32)
    dout = rng.standard_normal(q.shape).astype(np.float32)
    return q, k, v, dout


def test_dropout_is_deterministic_and_seeded():
    q, k, v, _ = dropout_problem()
    a, lse_a = flashlab.attention(q, k, v, dropout_p=0.3, dropout_seed=7)
    b, lse_b = flashlab.attention(q, k, v, dropout_p=0.3, dropout_seed=7)
    c, _ = flashlab.attention(q, k, v, dropout_p=0.3, dropout_seed=8)
    d, _ = flashlab.attention(q, k, v, dropout_p=0.3, dropout_seed=7, dropout_offset=1)
    plain, lse_plain = flashlab.attention(q, k, v)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c) and not np.allclose(a, d)
    np.testing.assert_allclose(lse_a, lse_plain, rtol=1e-6)  # LSE is of the undropped softmax


def test_dropout_same_mask_on_both_backends():
    q, k, v, dout = dropout_problem()
    opts = dict(dropout_p=0.25, dropout_seed=11, dropout_offset=3)
    ref = run_forward_backward(q, k, v, dout, opts, "reference")
    fa2 = run_forward_backward(q, k, v, dout, opts, "cpu_flash")
    for name in ("out", "dq", "dk", "dv"):
        scale = np.abs(ref[name]).max()
        np.testing.assert_allclose(fa2[name], ref[name], rtol=1e-4, atol=1e-5 * scale, err_msg=name)


def test_dropout_backward_is_the_derivative_of_the_forward():
    """Directional finite differences of L = sum(out * dout): the backward used the forward's mask."""
    q, k, v, dout = dropout_problem(6)
    opts = dict(dropout_p=0.2, dropout_seed=3, impl="reference")
    out, lse = flashlab.attention(q, k, v, **opts)
    grads = dict(zip("qkv", flashlab.attention_backward(dout, q, k, v, out, lse, **opts)))
    rng = np.random.default_rng(7)
    eps = 1e-2
    for name in "qkv":
        args = {"q": q, "k": k, "v": v}
        u = rng.standard_normal(args[name].shape).astype(np.float32)

        def loss(sign):
            moved = dict(args, **{name: (args[name] + sign * eps * u).astype(np.float32)})
            o, _ = flashlab.attention(moved["q"], moved["k"], moved["v"], **opts)
            return float(np.sum(o.astype(np.float64) * dout))

        numeric = (loss(+1) - loss(-1)) / (2 * eps)
        analytic = float(np.sum(grads[name].astype(np.float64) * u))
        assert abs(numeric - analytic) <= 2e-3 * max(1.0, abs(analytic)), (name, numeric, analytic)


# ---------------------------------------------------------------------------------------------
# Attention sinks (CPU backends)
# ---------------------------------------------------------------------------------------------
SINK_CASES = [
    (2, 17, 17, 4, 2, 32, {"causal": True}),
    (1, 113, 17, 3, 1, 40, {"causal": True}),  # rows that see no key: lse = sink
    (2, 17, 113, 4, 4, 64, {"causal": True, "causal_align": "top_left", "window": (9, 0)}),
]


@pytest.mark.parametrize("impl", ["reference", "cpu_flash"])
@pytest.mark.parametrize("case", SINK_CASES, ids=case_id)
def test_sinks_vs_float64(case, impl):
    rng = np.random.default_rng(zlib.crc32(repr(case).encode()))
    q, k, v, _ = make_inputs(rng, case, np.float32)
    dout = rng.standard_normal(q.shape).astype(np.float32)
    hq = case[3]
    sinks = (np.log(case[2]) + rng.standard_normal(hq)).astype(np.float32)
    opts = dict(case[6])
    out, lse = flashlab.attention(q, k, v, sink_logits=sinks, impl=impl, **opts)
    dq, dk, dv, dsink = flashlab.attention_backward(dout, q, k, v, out, lse, sink_logits=sinks, impl=impl, **opts)
    want = numpy_attention(q, k, v, dout, sink_logits=sinks, **opts)
    np.testing.assert_allclose(lse, want["lse"], rtol=1e-5, atol=1e-5)
    for name, got in (("out", out), ("dq", dq), ("dk", dk), ("dv", dv)):
        np.testing.assert_allclose(got, want[name], rtol=0, atol=1e-4 * max(1.0, np.abs(want[name]).max()), err_msg=name)
    np.testing.assert_allclose(dsink, want["dsink"], rtol=1e-4, atol=1e-4)
    if case[1] > case[2]:  # bottom-right causal: the first rows see no key
        assert np.all(out[:, 0] == 0) and np.allclose(lse[:, :, 0], sinks[None, :])
    # Without dsink the backward returns three gradients; without sinks the result differs.
    plain, _ = flashlab.attention(q, k, v, impl=impl, **opts)
    assert not np.allclose(plain, out)


def test_dsink_is_the_derivative_of_the_forward():
    rng = np.random.default_rng(3)
    q, k, v, _ = make_inputs(rng, (1, 17, 23, 2, 1, 32, {}), np.float32)
    dout = rng.standard_normal(q.shape).astype(np.float32)
    sinks = np.array([2.5, 1.0], dtype=np.float32)
    out, lse = flashlab.attention(q, k, v, sink_logits=sinks, impl="reference")
    *_, dsink = flashlab.attention_backward(dout, q, k, v, out, lse, sink_logits=sinks, impl="reference")
    eps = 1e-2
    for h in range(2):
        def loss(sign):
            moved = sinks.copy()
            moved[h] += sign * eps
            o, _ = flashlab.attention(q, k, v, sink_logits=moved, impl="reference")
            return float(np.sum(o.astype(np.float64) * dout))

        numeric = (loss(+1) - loss(-1)) / (2 * eps)
        assert abs(numeric - dsink[h]) <= 2e-3 * max(1.0, abs(dsink[h])), (h, numeric, dsink[h])


def test_sink_errors():
    q = np.zeros((1, 4, 2, 8), np.float32)
    with pytest.raises(flashlab.FlashlabError, match=r"sink_logits.shape \(3,\) must be \(heads_q,\) = \(2,\)"):
        flashlab.attention(q, q, q, sink_logits=np.zeros(3, np.float32))
    with pytest.raises(flashlab.FlashlabError, match=r"sink_logits\[1\] \(nan\) must be finite or -inf"):
        flashlab.attention(q, q, q, sink_logits=np.array([0, np.nan], np.float32))


# ---------------------------------------------------------------------------------------------
# StreamingLLM sink tokens (CPU backends): the first keys stay visible left of the window
# ---------------------------------------------------------------------------------------------
SINK_TOKEN_CASES = [
    (2, 113, 113, 4, 2, 32, {"causal": True, "window": (8, 0), "sink_tokens": 4}),
    # more sinks than the window and than one 64-key block
    (1, 113, 113, 2, 2, 64, {"causal": True, "window": (16, 0), "sink_tokens": 70}),
    (1, 17, 113, 3, 1, 40, {"causal": True, "window": (5, 0), "sink_tokens": 1}),
    # top-left, seqlen_q > seqlen_k: the last rows' windows hold no key, their sinks still do
    (2, 113, 17, 4, 2, 32, {"causal": True, "causal_align": "top_left", "window": (3, 0), "sink_tokens": 4}),
    # bottom-right, seqlen_q > seqlen_k: the first rows see no key, sinks included
    (1, 113, 17, 2, 1, 32, {"causal": True, "window": (3, 0), "sink_tokens": 4}),
    (1, 113, 113, 2, 2, 32, {"window": (6, 9), "sink_tokens": 4, "softcap": 2.0}),
    (1, 113, 113, 2, 1, 32, {"window": (30, -1), "causal_align": "top_left", "sink_tokens": 70, "alibi": True}),
]
SINK_TOKEN_RUNS = [(c, dt, "cpu_flash") for c in SINK_TOKEN_CASES for dt in DTYPES] + [
    (c, "float32", "reference") for c in SINK_TOKEN_CASES[:2]
]


@pytest.mark.parametrize("case, dtype, impl", SINK_TOKEN_RUNS,
                         ids=[f"{case_id(c)}-{dt}-{i}" for c, dt, i in SINK_TOKEN_RUNS])  # fmt: skip
def test_sink_tokens_vs_float64(case, dtype, impl):
    q, k, v, opts, exact = check_vs_float64(case, dtype, impl)
    # The sinks matter here: without them the result differs.
    plain = numpy_attention(q, k, v, **dict(opts, sink_tokens=0))
    assert not np.allclose(plain["out"], exact["out"])


def test_sink_tokens_varlen_with_a_sequence_shorter_than_the_sinks():
    check_varlen_against_each_sequence(np.random.default_rng(11), [3, 40, 17], [2, 90, 17], causal=True,
                                       window=(5, 0), sink_tokens=4)


def test_sink_tokens_with_sink_logits():
    """Both kinds of sink at once: the tokens in the mask, the logits in the denominator."""
    rng = np.random.default_rng(12)
    q, k, v, _ = make_inputs(rng, (1, 113, 113, 4, 2, 32, {}), np.float32)
    dout = rng.standard_normal(q.shape).astype(np.float32)
    sinks = (np.log(113) + rng.standard_normal(4)).astype(np.float32)
    opts = dict(causal=True, window=(10, 0), sink_tokens=3)
    out, lse = flashlab.attention(q, k, v, sink_logits=sinks, **opts)
    dq, dk, dv, dsink = flashlab.attention_backward(dout, q, k, v, out, lse, sink_logits=sinks, **opts)
    want = numpy_attention(q, k, v, dout, sink_logits=sinks, **opts)
    np.testing.assert_allclose(lse, want["lse"], rtol=1e-5, atol=1e-5)
    for name, got in (("out", out), ("dq", dq), ("dk", dk), ("dv", dv)):
        np.testing.assert_allclose(got, want[name], rtol=0, atol=1e-4 * max(1.0, np.abs(want[name]).max()), err_msg=name)
    np.testing.assert_allclose(dsink, want["dsink"], rtol=1e-4, atol=1e-4)


def test_sink_tokens_errors():
    q = np.zeros((1, 4, 2, 8), np.float32)
    with pytest.raises(flashlab.FlashlabError, match=r"sink_tokens \(-1\) must be >= 0") as e:
        poisoned_call(q, q, q, sink_tokens=-1)
    assert e.value.code == "invalid_argument"
    with pytest.raises(flashlab.FlashlabError, match="sink_tokens must be >= 0"):
        flashlab.attention_flops(1, 4, 4, 1, 1, 8, sink_tokens=-1)


# ---------------------------------------------------------------------------------------------
# Errors: the Status message arrives as a Python exception, and no output is written
# ---------------------------------------------------------------------------------------------
def poisoned_call(q, k, v, out_shape=None, lse_shape=None, **kw):
    out = np.full(out_shape or q.shape, np.nan, dtype=q.dtype)
    b, sq, hq = q.shape[0], q.shape[1], q.shape[2]
    lse = np.full(lse_shape or (b, hq, sq), np.nan, dtype=np.float32)
    try:
        _core.forward(q, k, v, out, lse, **kw)
    finally:
        assert np.isnan(out).all() and np.isnan(lse).all(), "a refused call wrote output"


def qkv(hq=4, hkv=2, d=32, dtype=np.float32, sq=17, sk=17):
    rng = np.random.default_rng(8)
    return (rng.standard_normal((2, s, h, d)).astype(dtype) for s, h in ((sq, hq), (sk, hkv), (sk, hkv)))


def test_error_heads_not_divisible():
    q, k, v = qkv(hq=4, hkv=3)
    with pytest.raises(flashlab.FlashlabError, match=r"heads_q \(4\) must be a multiple of heads_kv \(3\)") as e:
        poisoned_call(q, k, v)
    assert isinstance(e.value, ValueError) and e.value.code == "invalid_argument"


def test_error_last_dim_not_contiguous():
    q, k, v = qkv(d=64)
    with pytest.raises(flashlab.FlashlabError, match=r"q.dim_stride \(2\) must be 1"):
        poisoned_call(q[..., ::2], k[..., ::2], v[..., ::2])


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda q, k, v: (q, k.astype(np.float16), v.astype(np.float16)), r"q, k, v must have one dtype"),
        (lambda q, k, v: (q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)),
         r"q.dtype \(float64\) is not supported"),
        (lambda q, k, v: (q, k, v[:, :5]), r"v.shape\[1\] \(seqlen_k\) = 5 must equal k.shape\[1\] = 17"),
        (lambda q, k, v: (q, k[..., :16], v[..., :16]), r"k.shape\[3\] \(head_dim\) = 16 must equal q.shape\[3\] = 32"),
        # Only k is wrong: k is blamed, not v (v agrees with q).
        (lambda q, k, v: (q, k[..., :16], v), r"k.shape\[3\] \(head_dim\) = 16 must equal q.shape\[3\] = 32"),
        (lambda q, k, v: (q, k, v[..., :16]), r"v.shape\[3\] \(head_dim\) = 16 must equal q.shape\[3\] = 32"),
        (lambda q, k, v: (q, k[:1], v), r"k.shape\[0\] \(batch\) = 1 must equal q.shape\[0\] = 2"),
        (lambda q, k, v: (q[0], k[0], v[0]), r"q has 3 dimensions .* expected 4"),
    ],
    ids=["dtype_mix", "float64", "kv_seqlen", "head_dim", "k_head_dim", "v_head_dim", "k_batch", "ndim"],
)
def test_error_shapes_and_dtypes(mutate, message):
    q, k, v = mutate(*qkv())
    with pytest.raises(flashlab.FlashlabError, match=message):
        poisoned_call(q, k, v)


@pytest.mark.parametrize("bad", [None, "list", 1.0], ids=["None", "list", "float"])
@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_error_non_array_inputs_name_the_argument(which, bad):
    q, k, v = qkv()
    args = {"q": q, "k": k, "v": v}
    args[which] = args[which].tolist() if bad == "list" else bad
    with pytest.raises(TypeError, match=rf"flashlab: {which} must be a NumPy array .* not {type(args[which]).__name__}"):
        flashlab.attention(args["q"], args["k"], args["v"])


def test_error_non_array_inputs_backward():
    q, k, v = qkv()
    out, lse = flashlab.attention(q, k, v)
    with pytest.raises(TypeError, match=r"flashlab: lse must be a NumPy array .* not NoneType"):
        flashlab.attention_backward(out, q, k, v, out, None)
    with pytest.raises(TypeError, match=r"flashlab: dout must be a NumPy array .* not list"):
        flashlab.attention_backward(out.tolist(), q, k, v, out, lse)


def test_error_output_shapes():
    q, k, v = qkv()
    with pytest.raises(flashlab.FlashlabError, match=r"out.shape \(2, 17, 4, 16\) must equal q.shape"):
        poisoned_call(q, k, v, out_shape=(2, 17, 4, 16))
    with pytest.raises(flashlab.FlashlabError, match=r"lse.shape \(2, 17, 4\) must be \(batch, heads_q, seqlen_q\)"):
        poisoned_call(q, k, v, lse_shape=(2, 17, 4))


def test_error_options():
    q, k, v = qkv()
    with pytest.raises(flashlab.FlashlabError, match="causal_align"):
        poisoned_call(q, k, v, causal_align="middle")
    with pytest.raises(flashlab.FlashlabError, match=r"dropout_p \(1\) must be in \[0, 1\)"):
        poisoned_call(q, k, v, dropout_p=1.0)
    with pytest.raises(flashlab.FlashlabError, match="impl"):
        poisoned_call(q, k, v, impl="no_such_impl")


def test_error_cuda_impl_on_cpu_is_unsupported():
    q, k, v = qkv()
    with pytest.raises(flashlab.UnsupportedError, match="learn_v4") as e:
        poisoned_call(q, k, v, impl="learn_v4")
    assert e.value.code == "unsupported"


def test_error_varlen_offsets_past_the_tensor():
    q, k, v = (x[0] for x in qkv())  # (17, heads, 32) packed
    cu = np.array([0, 10, 20], dtype=np.int32)
    with pytest.raises(flashlab.FlashlabError, match=r"cu_seqlens_q\[-1\] \(20\) exceeds q.shape\[0\] \(17"):
        poisoned_call(q, k, v, lse_shape=(4, 17), cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=10, max_seqlen_k=10)


def test_implementations_and_build_info():
    names = {i["name"] for i in flashlab.implementations()}
    assert {"reference", "cpu_flash"} <= names
    info = flashlab.build_info()
    assert info["version"] == flashlab.__version__


def test_extension_exports_only_its_init():
    """_core (and _torch_ext where built) must not export symbols beyond their PyInit (python/CMakeLists.txt:
    an exported static copy of libstdc++ in the module crashed torch and libflashlab on the GPU machine)."""
    import shutil
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("ELF dynamic symbol table check (Linux)")
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("binutils nm not installed")
    modules = [("_core", _core.__file__)]
    import glob
    import os

    # flashlab._torch_ext (built where torch has CUDA) is linked the same way; found without
    # importing it (that would import torch).
    modules += [("_torch_ext", f) for f in glob.glob(os.path.join(os.path.dirname(_core.__file__), "_torch_ext*.so"))]
    for name, path in modules:
        out = subprocess.run([nm, "-D", "--defined-only", path], capture_output=True, text=True, check=True)
        names = [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]
        assert f"PyInit_{name}" in names
        extra = [n for n in names if n != f"PyInit_{name}"]
        assert not extra, f"{name} exports {len(extra)} more symbols, e.g. {extra[:5]}"


# ---------------------------------------------------------------------------------------------
# The FLOP count (flashlab.attention_flops) against a brute-force count of visible pairs
# ---------------------------------------------------------------------------------------------
def brute_force_pairs(seqlen_q, seqlen_k, causal=False, causal_align="bottom_right", window=(-1, -1),
                      sink_tokens=0):  # fmt: skip
    """Visible (i, j) pairs from the definition in params.h: query i sees key j iff
    i + shift - left <= j <= i + shift + right (-1 = unbounded), causal adding j <= i + shift;
    a key j < sink_tokens needs only the right bound."""
    shift = seqlen_k - seqlen_q if causal_align == "bottom_right" else 0
    left, right = window
    n = 0
    for i in range(seqlen_q):
        for j in range(seqlen_k):
            d = i + shift
            if causal and j > d:
                continue
            if left >= 0 and j < d - left and j >= sink_tokens:
                continue
            if right >= 0 and j > d + right:
                continue
            n += 1
    return n


FLOP_MASKS = [  # (seqlen_q, seqlen_k, options)
    (37, 37, {}),
    (23, 61, {}),
    (37, 37, {"causal": True}),
    (61, 23, {"causal": True}),  # bottom-right: the first 38 rows see no key
    (23, 61, {"causal": True}),
    (61, 23, {"causal": True, "causal_align": "top_left"}),
    (23, 61, {"causal": True, "causal_align": "top_left"}),
    (50, 50, {"window": (7, 3)}),
    (23, 61, {"window": (7, 0), "causal_align": "top_left"}),
    (61, 23, {"window": (-1, 4)}),
    (40, 70, {"window": (5, 9), "causal": True}),  # causal: window_right does not widen it
    (70, 40, {"window": (0, 0)}),
    (50, 50, {"window": (3, 0), "causal": True, "sink_tokens": 4}),
    (23, 61, {"window": (2, 5), "sink_tokens": 70}),  # more sinks than keys
    (61, 23, {"window": (1, 0), "causal": True, "causal_align": "top_left", "sink_tokens": 2}),
]


@pytest.mark.parametrize("sq, sk, opts", FLOP_MASKS, ids=[f"q{m[0]}_k{m[1]}_{m[2]}" for m in FLOP_MASKS])
def test_attention_flops_counts_visible_pairs(sq, sk, opts):
    window = opts.get("window", (-1, -1))
    kw = {"causal": opts.get("causal", False), "causal_align": opts.get("causal_align", "bottom_right"),
          "window_left": window[0], "window_right": window[1], "sink_tokens": opts.get("sink_tokens", 0)}  # fmt: skip
    pairs = brute_force_pairs(sq, sk, kw["causal"], kw["causal_align"], window, kw["sink_tokens"])
    batch, heads_q, heads_kv, head_dim = 3, 4, 2, 40
    fwd, bwd = flashlab.attention_flops(batch, sq, sk, heads_q, heads_kv, head_dim, **kw)
    assert fwd == 4 * head_dim * pairs * batch * heads_q
    assert bwd == 2.5 * fwd


def test_attention_flops_varlen_sums_each_sequence():
    lens_q, lens_k = [5, 0, 31, 17], [9, 4, 12, 17]
    cu_q, cu_k = np.cumsum([0] + lens_q), np.cumsum([0] + lens_k)
    for causal, align, window in [(False, "bottom_right", (-1, -1)), (True, "bottom_right", (-1, -1)),
                                  (True, "top_left", (3, -1)), (False, "bottom_right", (2, 5))]:  # fmt: skip
        pairs = sum(brute_force_pairs(sq, sk, causal, align, window) for sq, sk in zip(lens_q, lens_k))
        fwd, bwd = flashlab.attention_flops(len(lens_q), max(lens_q), max(lens_k), 2, 1, 16, causal=causal,
                                            causal_align=align, window_left=window[0], window_right=window[1],
                                            cu_seqlens_q=cu_q.astype(np.int32), cu_seqlens_k=list(cu_k))  # fmt: skip
        assert fwd == 4 * 16 * pairs * 2 and bwd == 2.5 * fwd


def test_attention_flops_errors():
    with pytest.raises(flashlab.FlashlabError, match="given together"):
        flashlab.attention_flops(1, 4, 4, 1, 1, 8, cu_seqlens_q=[0, 4])
    with pytest.raises(flashlab.FlashlabError, match=r"cu_seqlens_k has 2 entries; expected batch \+ 1 = 3"):
        flashlab.attention_flops(2, 4, 4, 1, 1, 8, cu_seqlens_q=[0, 4, 8], cu_seqlens_k=[0, 4])
    with pytest.raises(flashlab.FlashlabError, match="non-decreasing"):
        flashlab.attention_flops(2, 4, 4, 1, 1, 8, cu_seqlens_q=[0, 4, 3], cu_seqlens_k=[0, 4, 8])
    with pytest.raises(flashlab.FlashlabError, match="causal_align"):
        flashlab.attention_flops(1, 4, 4, 1, 1, 8, causal=True, causal_align="diagonal")
    with pytest.raises(flashlab.FlashlabError, match="window"):
        flashlab.attention_flops(1, 4, 4, 1, 1, 8, window_left=-2)


def test_bench_sdpa_flops_match_the_library():
    """learn/bench_sdpa.py is stand-alone (no extension on the machine it runs on) and keeps a
    closed form for its shapes; it must equal the library's count. Read from the source without
    importing the script (it imports torch)."""
    import ast
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "learn", "bench_sdpa.py")
    if not os.path.exists(path):
        pytest.skip("learn/bench_sdpa.py is not beside this checkout")
    tree = ast.parse(open(path).read())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "flops_forward")
    scope = {}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), scope)
    for s in (1, 2, 17, 128, 1000):
        for causal in (False, True):
            for align in ("bottom_right", "top_left"):
                want = flashlab.attention_flops(3, s, s, 5, 5, 64, causal=causal, causal_align=align)[0]
                assert scope["flops_forward"](3, 5, s, 64, causal) == want


@pytest.mark.parametrize("module", ["flashlab.torch", "flashlab.flash_attn_interface"])
def test_torch_fronts_without_torch_say_what_to_install(module, monkeypatch):
    # Simulate an environment without torch: `import torch` then raises ModuleNotFoundError.
    monkeypatch.setitem(sys.modules, "torch", None)
    for name in ("flashlab.torch", "flashlab.flash_attn_interface"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(ImportError, match=r"needs PyTorch.*pip install 'flashlab\[torch\]'"):
        importlib.import_module(module)
