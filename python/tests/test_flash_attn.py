"""flashlab.flash_attn_interface: flash-attn 2.x names, defaults, layouts and return values.

CPU tests run wherever torch is installed (every feature, varlen included); CUDA tests need a GPU
and a CUDA build of libflashlab (varlen included there too; ``block_table`` in
``flash_attn_varlen_func`` is refused with a clear error: paged caches go through
``flash_attn_with_kvcache``).
"""

import inspect
import zlib

import pytest

torch = pytest.importorskip("torch")

import flashlab  # noqa: E402
from flashlab import flash_attn_interface as fa  # noqa: E402
from attention_reference import check_close, to_numpy, torch_attention, torch_term_scales  # noqa: E402

# From flashlab's view (a CUDA build that sees a device) and torch's build, without calling
# torch.cuda.is_available(): see python/tests/conftest.py on the import-order crash.
_INFO = flashlab.build_info()
HAS_CUDA = _INFO["cuda_compiled"] and _INFO["cuda_device_count"] > 0 and torch.version.cuda is not None
cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and a CUDA build of libflashlab")

_COMMON = [("dropout_p", 0.0), ("softmax_scale", None), ("causal", False), ("window_size", (-1, -1)),
           ("softcap", 0.0), ("alibi_slopes", None), ("deterministic", False), ("return_attn_probs", False)]  # fmt: skip
_REQ = inspect.Parameter.empty
# flash-attn 2.x (flash_attn/flash_attn_interface.py): positional names, then defaults, in order.
FLASH_ATTN_SIGNATURES = {
    "flash_attn_func": [("q", _REQ), ("k", _REQ), ("v", _REQ)] + _COMMON,
    "flash_attn_qkvpacked_func": [("qkv", _REQ)] + _COMMON,
    "flash_attn_kvpacked_func": [("q", _REQ), ("kv", _REQ)] + _COMMON,
    "flash_attn_varlen_func": [("q", _REQ), ("k", _REQ), ("v", _REQ), ("cu_seqlens_q", _REQ),
                               ("cu_seqlens_k", _REQ), ("max_seqlen_q", _REQ), ("max_seqlen_k", _REQ)]
    + _COMMON + [("block_table", None)],
    "flash_attn_varlen_qkvpacked_func": [("qkv", _REQ), ("cu_seqlens", _REQ), ("max_seqlen", _REQ)] + _COMMON,
    "flash_attn_varlen_kvpacked_func": [("q", _REQ), ("kv", _REQ), ("cu_seqlens_q", _REQ), ("cu_seqlens_k", _REQ),
                                        ("max_seqlen_q", _REQ), ("max_seqlen_k", _REQ)] + _COMMON,
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(FLASH_ATTN_SIGNATURES))
def test_signature_matches_flash_attn(name):
    params = inspect.signature(getattr(fa, name)).parameters
    assert [(p.name, p.default) for p in params.values()] == FLASH_ATTN_SIGNATURES[name]


def rand(*shape, dtype=torch.float32, device="cpu", seed=0, grad=True):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(device=device, dtype=dtype).requires_grad_(grad)


def grads(fn, *tensors, dout):
    """Runs fn on fresh leaf copies; returns (result, gradients of sum(out * dout))."""
    leaves = [t.detach().clone().requires_grad_() for t in tensors]
    res = fn(*leaves)
    out = res[0] if isinstance(res, tuple) else res
    return res, torch.autograd.grad(out, leaves, dout)


# ---------------------------------------------------------------------------------------------
# CPU: every feature
# ---------------------------------------------------------------------------------------------
CASES = [  # (batch, seqlen_q, seqlen_k, heads, heads_k, head_dim), flash_attn_func options
    ((2, 17, 113, 6, 2, 64), {"causal": True}),
    ((1, 113, 17, 4, 4, 32), {"causal": True}),
    ((2, 113, 113, 4, 1, 32), {"window_size": (13, 4)}),
    ((1, 17, 113, 4, 2, 64), {"softcap": 4.0, "softmax_scale": 0.2}),
    ((2, 17, 113, 4, 2, 32), {"alibi": (4,), "causal": True}),
    ((2, 113, 17, 4, 2, 32), {"alibi": (2, 4)}),
]


def check_features_vs_float64(case, dtype, device):
    (b, sq, sk, h, hk, d), opts = case
    seed = zlib.crc32(str(case).encode())
    q, k, v = rand(b, sq, h, d, dtype=dtype, seed=seed, device=device), \
        rand(b, sk, hk, d, dtype=dtype, seed=seed + 1, device=device), \
        rand(b, sk, hk, d, dtype=dtype, seed=seed + 2, device=device)  # fmt: skip
    dout = rand(b, sq, h, d, dtype=dtype, seed=seed + 3, grad=False, device=device)
    opts = dict(opts)
    if "alibi" in opts:
        opts["alibi_slopes"] = (torch.rand(*opts.pop("alibi"), generator=torch.Generator().manual_seed(seed)) * 0.5).to(device)
    (out, lse, s_dmask), got = grads(lambda q, k, v: fa.flash_attn_func(q, k, v, return_attn_probs=True, **opts),
                                     q, k, v, dout=dout)  # fmt: skip
    assert s_dmask is None and lse.shape == (b, h, sq) and lse.dtype == torch.float32
    ref_opts = {"causal": opts.get("causal", False), "window": opts.get("window_size", (-1, -1)),
                "softcap": opts.get("softcap", 0.0), "softmax_scale": opts.get("softmax_scale"),
                "alibi_slopes": opts.get("alibi_slopes")}  # fmt: skip
    (want_out, want_lse), want = grads(lambda q, k, v: torch_attention(q, k, v, **ref_opts),
                                       q.double(), k.double(), v.double(), dout=dout.double())  # fmt: skip
    if device == "cpu":  # baseline: the exact result stored in the dtype
        low_out, low = want_out.to(dtype), tuple(w.to(dtype) for w in want)
    else:  # the GPU kernel rounds P and dS to the dtype: baseline = the reference evaluated in the dtype
        (low_out, _), low = grads(lambda q, k, v: torch_attention(q, k, v, **ref_opts), q, k, v, dout=dout)
    scales = torch_term_scales(q, k, v, dout, opts.get("softmax_scale"))
    dname = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}[dtype]
    for name, g, w, lo in zip(("out", "dq", "dk", "dv"), (out,) + got, (want_out,) + want, (low_out,) + low):
        check_close(name, to_numpy(g), to_numpy(w), to_numpy(lo), dname, scale=scales[name])
    check_close("lse", to_numpy(lse), to_numpy(want_lse), to_numpy(want_lse.float()), "float32")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])) + str(c[1]))
def test_flash_attn_func_cpu_vs_float64(case, dtype):
    check_features_vs_float64(case, dtype, "cpu")


def test_window_past_every_key_is_unbounded():
    q, k, v = (rand(1, 17, 2, 32, seed=s) for s in range(3))
    plain = fa.flash_attn_func(q, k, v, causal=True)
    wide = fa.flash_attn_func(q, k, v, causal=True, window_size=(17, 40))
    torch.testing.assert_close(wide, plain, rtol=0, atol=0)


def test_packed_variants_match_flash_attn_func():
    b, s, h, d = 2, 33, 4, 32
    qkv = rand(b, s, 3, h, d, seed=1)
    dout = rand(b, s, h, d, seed=2, grad=False)
    (out, d_qkv) = grads(lambda x: fa.flash_attn_qkvpacked_func(x, causal=True), qkv, dout=dout)
    (want, dq_dk_dv) = grads(lambda q, k, v: fa.flash_attn_func(q, k, v, causal=True), *qkv.unbind(2), dout=dout)
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    torch.testing.assert_close(d_qkv[0], torch.stack(dq_dk_dv, dim=2), rtol=0, atol=0)

    q, kv = rand(b, s, h, d, seed=3), rand(b, 51, 2, 2, d, seed=4)
    (out, (dq, dkv)) = grads(lambda q, kv: fa.flash_attn_kvpacked_func(q, kv), q, kv, dout=dout)
    (want, (wq, wk, wv)) = grads(lambda q, k, v: fa.flash_attn_func(q, k, v), q, *kv.unbind(2), dout=dout)
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    torch.testing.assert_close(dq, wq, rtol=0, atol=0)
    torch.testing.assert_close(dkv, torch.stack((wk, wv), dim=2), rtol=0, atol=0)


def varlen_problem(seed=5, h=4, hk=2, d=32, dtype=torch.float32, device="cpu"):
    lens_q, lens_k = [5, 1, 17, 9], [9, 17, 1, 9]
    cu_q = torch.tensor([0] + lens_q, dtype=torch.int32).cumsum(0, dtype=torch.int32).to(device)
    cu_k = torch.tensor([0] + lens_k, dtype=torch.int32).cumsum(0, dtype=torch.int32).to(device)
    q = rand(sum(lens_q), h, d, seed=seed, dtype=dtype, device=device)
    k = rand(sum(lens_k), hk, d, seed=seed + 1, dtype=dtype, device=device)
    v = rand(sum(lens_k), hk, d, seed=seed + 2, dtype=dtype, device=device)
    dout = rand(sum(lens_q), h, d, seed=seed + 3, dtype=dtype, device=device, grad=False)
    return q, k, v, dout, cu_q, cu_k, max(lens_q), max(lens_k)


def varlen_matches_each_sequence(device, dtype, d, opts, rtol, atol):
    """flash_attn_varlen_func on varlen_problem() against flash_attn_func on each sequence alone:
    out, lse, dq, dk, dv row by row. Returns the varlen call's lse and s_dmask."""
    q, k, v, dout, cu_q, cu_k, mq, mk = varlen_problem(d=d, dtype=dtype, device=device)
    (out, lse, s_dmask), (dq, dk, dv) = grads(
        lambda q, k, v: fa.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, return_attn_probs=True, **opts),
        q, k, v, dout=dout)  # fmt: skip
    for i in range(len(cu_q) - 1):
        sq, sk = slice(int(cu_q[i]), int(cu_q[i + 1])), slice(int(cu_k[i]), int(cu_k[i + 1]))
        (o, l, _), (gq, gk, gv) = grads(
            lambda q, k, v: fa.flash_attn_func(q, k, v, return_attn_probs=True, **opts),
            q[None, sq], k[None, sk], v[None, sk], dout=dout[None, sq])  # fmt: skip
        for name, got, want in (("out", out[sq], o[0]), ("lse", lse[:, sq], l[0]), ("dq", dq[sq], gq[0]),
                                ("dk", dk[sk], gk[0]), ("dv", dv[sk], gv[0])):  # fmt: skip
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, msg=lambda m: f"seq {i} {name}: {m}")
    return lse, s_dmask, q


def test_varlen_cpu_matches_each_sequence():
    lse, s_dmask, q = varlen_matches_each_sequence("cpu", torch.float32, 32, {"causal": True, "window_size": (6, -1)},
                                                   rtol=1e-5, atol=1e-6)  # fmt: skip
    assert s_dmask is None and lse.shape == (q.shape[1], q.shape[0])


def test_varlen_packed_variants_match_varlen_func():
    q, k, v, dout, cu_q, cu_k, mq, mk = varlen_problem(h=2, hk=2)
    want = fa.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, causal=True)
    kv = torch.stack((k, v), dim=1)
    got = fa.flash_attn_varlen_kvpacked_func(q, kv, cu_q, cu_k, mq, mk, causal=True)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    qkv = torch.stack((q[:18], k[:18], v[:18]), dim=1)  # self-attention on the first 18 tokens
    cu = torch.tensor([0, 5, 6, 18], dtype=torch.int32)
    got = fa.flash_attn_varlen_qkvpacked_func(qkv, cu, 12)
    want = fa.flash_attn_varlen_func(q[:18], k[:18], v[:18], cu, cu, 12, 12)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_block_table_is_refused():
    q, k, v, _, cu_q, cu_k, mq, mk = varlen_problem()
    with pytest.raises(flashlab.UnsupportedError, match="block_table"):
        fa.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, block_table=torch.zeros(1, 1, dtype=torch.int32))


# ---------------------------------------------------------------------------------------------
# CUDA
# ---------------------------------------------------------------------------------------------
@cuda_only
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_flash_attn_func_cuda_vs_float64(dtype):
    b, sq, sk, h, hk, d = 2, 203, 330, 8, 2, 128
    q, k, v = rand(b, sq, h, d, dtype=dtype, device="cuda", seed=1), \
        rand(b, sk, hk, d, dtype=dtype, device="cuda", seed=2), rand(b, sk, hk, d, dtype=dtype, device="cuda", seed=3)  # fmt: skip
    dout = rand(b, sq, h, d, dtype=dtype, device="cuda", seed=4, grad=False)
    (out, lse, _), got = grads(lambda q, k, v: fa.flash_attn_func(q, k, v, causal=True, return_attn_probs=True),
                               q, k, v, dout=dout)  # fmt: skip
    (want_out, want_lse), want = grads(lambda q, k, v: torch_attention(q, k, v, causal=True),
                                       q.double(), k.double(), v.double(), dout=dout.double())  # fmt: skip
    (low_out, _), low = grads(lambda q, k, v: torch_attention(q, k, v, causal=True), q, k, v, dout=dout)
    scales = torch_term_scales(q, k, v, dout)
    dname = {torch.float16: "float16", torch.bfloat16: "bfloat16"}[dtype]
    for name, g, w, lo in zip(("out", "dq", "dk", "dv"), (out,) + got, (want_out,) + want, (low_out,) + low):
        check_close(name, to_numpy(g), to_numpy(w), to_numpy(lo), dname, scale=scales[name])
    assert lse.shape == (b, h, sq) and torch.isfinite(lse).all()


@cuda_only
def test_qkvpacked_cuda_matches_unpacked():
    qkv = rand(2, 129, 3, 4, 64, dtype=torch.bfloat16, device="cuda", seed=6)
    got = fa.flash_attn_qkvpacked_func(qkv, causal=True)
    want = fa.flash_attn_func(*(x.contiguous() for x in qkv.unbind(2)), causal=True)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@cuda_only
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])) + str(c[1]))
def test_flash_attn_func_cuda_features_vs_float64(case):
    """Every feature of CASES on the GPU (impl auto: cuda_sm90 forward on sm_90, cuda_sm80 for the rest)."""
    check_features_vs_float64(case, torch.bfloat16, "cuda")


@cuda_only
def test_varlen_cuda_matches_each_sequence():
    # The same kernel on the same rows: equal up to the order of GQA's dK/dV sums.
    varlen_matches_each_sequence("cuda", torch.bfloat16, 64,
                                 {"causal": True, "window_size": (6, -1), "deterministic": True},
                                 rtol=1e-2, atol=1e-2)  # fmt: skip
