"""flashlab.torch.attention(..., sink_logits=s): attention sinks, learnable, through the custom ops.

The reference is the sinks' definition written out in float64 torch ops: softmax over the keys plus
one extra column holding the logit sink_h, whose value row is zero; torch autograd on it gives dq,
dk, dv and dsink (no hand-written backward). It is cross-checked against the NumPy reference's
closed-form dsink (attention_reference.numpy_attention). CPU tests run wherever torch is installed
(impl "auto" is cpu_flash on the CPU, and "reference"); the CUDA tests (bf16, impl "auto" and
"cuda_sm80") skip themselves without a GPU and a CUDA build of libflashlab.
"""

import zlib

import pytest

torch = pytest.importorskip("torch")

import flashlab  # noqa: E402
import flashlab.torch as fl  # noqa: E402
from attention_reference import check_close, to_numpy, torch_attention, torch_term_scales  # noqa: E402
from test_torch import NAMES, case_opts, check_all, cuda_only, flashlab_fn, forward_backward, inputs  # noqa: E402


# ---------------------------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------------------------
def sinks_reference(q, k, v, sink_logits, **opts):
    """(out, lse) of attention with sinks, in q's dtype, differentiable in q, k, v and sink_logits:
    attention_reference.torch_attention with its sink column (see there)."""
    return torch_attention(q, k, v, sink_logits=sink_logits, **opts)


def run(fn, q, k, v, sinks, dout, **opts):
    """out, lse and the gradients of sum(out * dout) in q, k, v and the sinks (autograd)."""
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    sinks = sinks.detach().clone().requires_grad_()
    out, lse = fn(q, k, v, sinks, **opts)
    dq, dk, dv, dsink = torch.autograd.grad(out, (q, k, v, sinks), dout)
    return {"out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv, "dsink": dsink}


def flashlab_sinks(q, k, v, sinks, **opts):
    return fl.attention(q, k, v, sink_logits=sinks, return_lse=True, **opts)


def exact(q, k, v, sinks, dout, **opts):
    """The float64 reference on q's device; the sinks stay fp32 values, widened."""
    q64, k64, v64, d64 = (x.detach().double() for x in (q, k, v, dout))
    if opts.get("alibi_slopes") is not None:
        opts = dict(opts, alibi_slopes=opts["alibi_slopes"].double())
    return run(sinks_reference, q64, k64, v64, sinks.double(), d64, **opts)


def check_sinks(got, want, base, dtype, q, k, v, sinks, dout, opts, lse_scale=None):
    """out, dq, dk, dv against the float64 reference with `base` as the same-precision baseline
    (test_torch.check_all), lse in fp32, and dsink (fp32 (heads_q,)) against the exact value with
    the baseline an implementation of this precision gets: dsink from `out` rounded to the dtype
    (the backward reads the stored out), plus a floor in units of the size of the terms summed."""
    check_all(got, want, base, dtype, torch_term_scales(q, k, v, dout, opts.get("softmax_scale")))
    check_close("lse", to_numpy(got["lse"]), to_numpy(want["lse"]), to_numpy(want["lse"].float()), "float32",
                scale=lse_scale)  # fmt: skip
    assert got["dsink"].dtype == torch.float32 and got["dsink"].shape == want["dsink"].shape
    lse = want["lse"].detach()  # (b, hq, sq) float64
    p_sink = torch.exp(sinks.detach().to(lse).view(1, -1, 1) - lse)  # the sink's share of each row
    dout64, out64 = dout.detach().double(), want["out"].detach()
    d_rounded = (dout64 * out64.to(dtype).double()).sum(-1).transpose(1, 2)  # D_i from the stored out
    base_dsink = -(p_sink * d_rounded).sum(dim=(0, 2))
    term_scale = (p_sink * (dout64 * out64).abs().sum(-1).transpose(1, 2)).sum(dim=(0, 2)).max().item()
    check_close("dsink", to_numpy(got["dsink"]), to_numpy(want["dsink"]), to_numpy(base_dsink), NAMES[dtype],
                scale=term_scale)  # fmt: skip


def sinks_for(heads_q, device, seed):
    """fp32 sinks around the scores' size (some above, some below a row's log-sum-exp of keys)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(heads_q, generator=g) * 1.5 + 0.5).to(device)


# ---------------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------------
CPU_CASES = [  # (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim), options
    ((1, 1, 1, 1, 1, 32), {}),
    ((2, 17, 23, 4, 4, 32), {}),
    ((2, 17, 113, 4, 2, 64), {"causal": True}),  # GQA 2:1
    ((1, 113, 17, 6, 3, 40), {"causal": True}),  # rows that see no key: out 0, lse = sink
    ((2, 17, 17, 8, 2, 64), {"causal": True, "causal_align": "top_left"}),  # GQA 4:1
    ((1, 57, 41, 4, 2, 32), {"window": (3, 0)}),  # the window hides every key from the first 16 rows
    ((1, 113, 113, 4, 4, 32), {"window": (9, 2), "softcap": 3.0}),
    ((2, 17, 113, 4, 2, 64), {"alibi": True, "softmax_scale": 0.3}),
]


def case_id(case):
    return "x".join(map(str, case[0])) + str(case[1])


def run_case(case, dtype, device, impl):
    """One case's inputs (seeded by its id), flashlab's result and the float64 reference's:
    (q, k, v, dout, sinks, opts, got, want)."""
    seed = zlib.crc32(case_id(case).encode())
    q, k, v, dout = inputs(case[0], dtype, device, seed=seed)
    sinks = sinks_for(case[0][3], device, seed)
    opts = case_opts(case, device)
    got = run(flashlab_sinks, q, k, v, sinks, dout, impl=impl, **opts)
    want = exact(q, k, v, sinks, dout, **opts)
    return q, k, v, dout, sinks, opts, got, want


@pytest.mark.parametrize("impl", ["auto", "reference"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=lambda d: NAMES[d])
@pytest.mark.parametrize("case", CPU_CASES, ids=case_id)
def test_cpu_sinks_vs_float64(case, dtype, impl):
    q, k, v, dout, sinks, opts, got, want = run_case(case, dtype, "cpu", impl)
    base = {n: want[n].to(dtype) for n in ("out", "dq", "dk", "dv")}  # a perfect result stored in the dtype
    check_sinks(got, want, base, dtype, q, k, v, sinks, dout, opts)
    assert got["out"].dtype == dtype and got["lse"].dtype == torch.float32


def test_cpu_rows_without_keys_keep_the_sink():
    """Rows that see no key (bottom-right causal with seqlen_q > seqlen_k): out exactly 0, lse the
    sink (not -inf; to the last bit or so: cpu_flash's epilogue m + log(l) may round it by an ulp),
    zero dq, and no share in dsink."""
    q, k, v, dout = inputs((2, 29, 11, 4, 2, 32), torch.float32, "cpu", seed=21)
    sinks = sinks_for(4, "cpu", 21)
    got = run(flashlab_sinks, q, k, v, sinks, dout, causal=True)
    empty = slice(0, 29 - 11)  # rows 0..17 see no key
    assert torch.equal(got["out"][:, empty], torch.zeros_like(got["out"][:, empty]))
    torch.testing.assert_close(got["lse"][:, :, empty], sinks.view(1, 4, 1).expand(2, 4, 18), rtol=3e-7, atol=0)
    assert torch.equal(got["dq"][:, empty], torch.zeros_like(got["dq"][:, empty]))
    # The same rows with a dout of zero on every row that sees keys: dsink gets nothing.
    dout_empty_only = torch.zeros_like(dout)
    dout_empty_only[:, empty] = dout[:, empty]
    only = run(flashlab_sinks, q, k, v, sinks, dout_empty_only, causal=True)
    assert torch.equal(only["dsink"], torch.zeros(4))


def test_cpu_minus_inf_sink_is_no_sink():
    """A sink of -inf is no sink: that head's out, lse (-inf on rows without keys) and gradients
    equal the call without sinks, and its dsink is 0, not NaN. (heads_q = heads_kv: head 0's dk,
    dv come from query head 0 alone.)"""
    q, k, v, dout = inputs((1, 23, 11, 2, 2, 32), torch.float32, "cpu", seed=30)
    got = run(flashlab_sinks, q, k, v, torch.tensor([float("-inf"), 0.5]), dout, causal=True)
    plain = forward_backward(flashlab_fn, q, k, v, dout, causal=True)
    assert torch.isinf(plain["lse"][:, 0]).any()  # rows without keys: -inf with or without the sink
    for name in ("out", "dq", "dk", "dv"):
        torch.testing.assert_close(got[name][:, :, 0], plain[name][:, :, 0], rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(got["lse"][:, 0], plain["lse"][:, 0], rtol=1e-6, atol=1e-7)  # -inf == -inf
    assert got["dsink"][0] == 0 and torch.isfinite(got["dsink"]).all()


def test_cpu_sinks_varlen_with_an_empty_sequence():
    """Packed sequences (cu_seqlens), one of them with no key at all: lse (heads_q, total_q) is the
    sink there; everything against the reference run sequence by sequence with shared sinks."""
    cu_q, cu_k = [0, 5, 12, 20], [0, 7, 7, 30]
    hq, hkv, d = 4, 2, 32
    g = torch.Generator().manual_seed(22)
    q, dout = torch.randn(20, hq, d, generator=g), torch.randn(20, hq, d, generator=g)
    k, v = torch.randn(30, hkv, d, generator=g), torch.randn(30, hkv, d, generator=g)
    sinks = sinks_for(hq, "cpu", 22)

    def packed(q, k, v, sinks, **opts):
        return fl.attention(q, k, v, sink_logits=sinks, cu_seqlens_q=torch.tensor(cu_q, dtype=torch.int32),
                            cu_seqlens_k=torch.tensor(cu_k, dtype=torch.int32), max_seqlen_q=8, max_seqlen_k=23,
                            return_lse=True, **opts)  # fmt: skip

    def per_sequence(q, k, v, sinks, **opts):
        outs, lses = [], []
        for i in range(3):
            qs, ks, vs = q[cu_q[i]:cu_q[i + 1]], k[cu_k[i]:cu_k[i + 1]], v[cu_k[i]:cu_k[i + 1]]
            o, lse = sinks_reference(qs[None], ks[None], vs[None], sinks, **opts)
            outs.append(o[0])
            lses.append(lse[0])
        return torch.cat(outs), torch.cat(lses, dim=-1)

    got = run(packed, q, k, v, sinks, dout, causal=True)
    want = run(per_sequence, q.double(), k.double(), v.double(), sinks.double(), dout.double(), causal=True)
    assert got["lse"].shape == (hq, 20)
    assert torch.equal(got["out"][5:12], torch.zeros(7, hq, d))
    torch.testing.assert_close(got["lse"][:, 5:12], sinks[:, None].expand(hq, 7), rtol=3e-7, atol=0)
    for name in ("out", "lse", "dq", "dk", "dv", "dsink"):
        torch.testing.assert_close(got[name], want[name].float(), rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


def test_sinks_reference_agrees_with_numpy():
    """The column-of-sinks reference under autograd == numpy_attention's closed-form backward
    (dsink = -sum exp(sink - lse) D): two derivations of the same gradient."""
    from attention_reference import numpy_attention

    q, k, v, dout = inputs((2, 17, 23, 4, 2, 32), torch.float64, "cpu", seed=23)
    sinks = sinks_for(4, "cpu", 23).double()
    opts = {"causal": True, "softcap": 2.0, "window": (5, -1)}
    t = run(sinks_reference, q, k, v, sinks, dout, **opts)
    n = numpy_attention(*(to_numpy(x) for x in (q, k, v, dout)), sink_logits=to_numpy(sinks), **opts)
    for name in ("out", "lse", "dq", "dk", "dv", "dsink"):
        torch.testing.assert_close(t[name], torch.from_numpy(n[name]), rtol=1e-10, atol=1e-12)


def test_cpu_frozen_sinks_and_sinks_only_grad():
    """Sinks that do not require grad: dq, dk, dv as with learnable ones, no gradient for the sinks.
    Sinks that are the only input requiring grad: their gradient alone flows."""
    q, k, v, dout = inputs((2, 17, 23, 4, 2, 32), torch.float32, "cpu", seed=24)
    sinks = sinks_for(4, "cpu", 24)
    learn = run(flashlab_sinks, q, k, v, sinks, dout, causal=True)
    qf, kf, vf = (x.detach().clone().requires_grad_() for x in (q, k, v))
    frozen = sinks.clone()
    out = fl.attention(qf, kf, vf, sink_logits=frozen, causal=True)
    out.backward(dout)
    assert frozen.grad is None and not frozen.requires_grad
    for name, x in (("dq", qf), ("dk", kf), ("dv", vf)):
        torch.testing.assert_close(x.grad, learn[name], rtol=0, atol=0)
    s = sinks.clone().requires_grad_()
    out = fl.attention(q.detach(), k.detach(), v.detach(), sink_logits=s, causal=True)
    assert out.requires_grad
    (ds,) = torch.autograd.grad(out, s, dout)
    torch.testing.assert_close(ds, learn["dsink"], rtol=0, atol=0)
    # A step-2 view (stride 2) is accepted (copied inside the op); its gradient lands in the base.
    base = torch.stack([sinks, torch.zeros(4)], dim=1).reshape(8).requires_grad_()
    out = fl.attention(q.detach(), k.detach(), v.detach(), sink_logits=base[::2], causal=True)
    (dbase,) = torch.autograd.grad(out, base, dout)
    torch.testing.assert_close(dbase[::2], learn["dsink"], rtol=0, atol=0)
    assert torch.equal(dbase[1::2], torch.zeros(4))


def test_cpu_sinks_with_dropout():
    """Dropout and sinks together: backends agree on the mask (reference is the oracle), dsink too."""
    q, k, v, dout = inputs((1, 17, 23, 4, 2, 32), torch.float32, "cpu", seed=25)
    sinks = sinks_for(4, "cpu", 25)
    torch.manual_seed(1)
    fa2 = run(flashlab_sinks, q, k, v, sinks, dout, dropout_p=0.3, impl="cpu_flash")
    torch.manual_seed(1)
    ref = run(flashlab_sinks, q, k, v, sinks, dout, dropout_p=0.3, impl="reference")
    for name in ("out", "lse", "dq", "dk", "dv", "dsink"):
        torch.testing.assert_close(fa2[name], ref[name], rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: torch.zeros(4, dtype=torch.float64), flashlab.FlashlabError,
         r"sink_logits.dtype \(torch.float64\) must be torch.float32"),
        (lambda: torch.zeros(4, dtype=torch.bfloat16), flashlab.FlashlabError, r"sink_logits.float\(\)"),
        (lambda: torch.zeros(2), flashlab.FlashlabError, r"sink_logits.shape \(2,\) must be \(heads_q,\) = \(4,\)"),
        (lambda: torch.zeros(1, 4), flashlab.FlashlabError, r"sink_logits.shape \(1, 4\) must be \(heads_q,\)"),
        (lambda: torch.zeros(4, device="meta"), flashlab.FlashlabError,
         r"sink_logits is on meta; it must be on q's device \(cpu\)"),
        (lambda: [0.0] * 4, TypeError, "sink_logits must be a torch.Tensor"),
    ],
    ids=["float64", "bfloat16", "heads_kv", "2d", "device", "list"],
)
def test_cpu_sinks_validation(make, error, message):
    q, k, v, _ = inputs((1, 17, 17, 4, 2, 32), torch.float32, "cpu", seed=26)
    with pytest.raises(error, match=message):
        fl.attention(q, k, v, sink_logits=make())


def test_opcheck_with_sinks():
    """torch.library.opcheck on both ops with sinks: fwd with learnable sinks, bwd with and without
    the sink gradient (its 4th result then (heads_q,) or (0,))."""
    q, k, v, dout = inputs((2, 17, 23, 4, 2, 32), torch.float32, "cpu", seed=27)
    sinks = sinks_for(4, "cpu", 27).requires_grad_()
    args = (q, k, v, None, None, 0, 0, None, sinks, None, None, True, "bottom_right", -1, -1, 0.0, 0.0, False,
            "auto")  # fmt: skip
    torch.library.opcheck(torch.ops.flashlab.fwd.default, args)
    out, lse = torch.ops.flashlab.fwd(*args)
    bwd_args = (dout, q.detach(), k.detach(), v.detach(), out.detach(), lse) + args[3:8] + (sinks.detach(),) + args[9:]
    for sink_grad in (True, False):
        torch.library.opcheck(torch.ops.flashlab.bwd.default, bwd_args + (sink_grad,))
        dsink = torch.ops.flashlab.bwd(*bwd_args, sink_grad)[3]
        assert dsink.dtype == torch.float32 and dsink.shape == ((4,) if sink_grad else (0,))
    # Without sinks the 4th result is always the empty tensor.
    no_sinks = bwd_args[:11] + (None,) + bwd_args[12:]
    assert torch.ops.flashlab.bwd(*no_sinks, True)[3].shape == (0,)


def test_cpu_compile_fullgraph_with_sinks():
    """torch.compile(fullgraph=True) with learnable sinks: no graph break, results bit for bit eager's."""
    q, k, v, dout = inputs((2, 113, 113, 4, 2, 64), torch.float32, "cpu", seed=28)
    sinks = sinks_for(4, "cpu", 28)
    torch._dynamo.reset()
    compiled = torch.compile(flashlab_sinks, fullgraph=True)  # raises on any graph break
    eager = run(flashlab_sinks, q, k, v, sinks, dout, causal=True, deterministic=True)
    got = run(compiled, q, k, v, sinks, dout, causal=True, deterministic=True)
    for name in eager:
        torch.testing.assert_close(got[name], eager[name], rtol=0, atol=0, msg=lambda m: f"{name}: {m}")


# ---------------------------------------------------------------------------------------------
# CUDA: bf16 against the float64 reference (run on the GPU machine; skipped here without one)
# ---------------------------------------------------------------------------------------------
CUDA_CASES = [  # (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim), options
    ((1, 1, 1, 1, 1, 64), {}),
    ((2, 128, 128, 8, 2, 64), {"causal": True}),  # GQA 4:1
    ((2, 113, 203, 6, 2, 128), {"causal": True}),  # GQA 3:1
    ((1, 203, 113, 4, 4, 128), {"causal": True}),  # seqlen_q > seqlen_k: rows that see no key
    ((2, 1023, 1023, 8, 4, 128), {}),
    ((1, 512, 1500, 8, 2, 64), {"window": (128, 0)}),
    ((2, 257, 257, 4, 2, 64), {"softcap": 30.0, "alibi": True}),
]


@cuda_only
@pytest.mark.parametrize("impl", ["auto", "cuda_sm80"])
@pytest.mark.parametrize("case", CUDA_CASES, ids=case_id)
def test_cuda_sinks_vs_float64(case, impl):
    """bf16, out / dq / dk / dv against the float64 reference with the reference evaluated in
    bf16 as the baseline (test_torch's CUDA convention), lse in fp32, dsink as on the CPU."""
    dtype = torch.bfloat16
    q, k, v, dout, sinks, opts, got, want = run_case(case, dtype, "cuda", impl)
    low = run(sinks_reference, q, k, v, sinks, dout, **opts)  # the reference in bf16
    score_scale = opts.get("softmax_scale", case[0][5] ** -0.5) * q.abs().max().item() * k.abs().max().item()
    check_sinks(got, want, low, dtype, q, k, v, sinks, dout, opts, lse_scale=score_scale)


@cuda_only
@pytest.mark.parametrize("impl", ["auto", "cuda_sm80"])
def test_cuda_sinks_deterministic(impl):
    """deterministic=True: two backward passes give dq, dk, dv and dsink bit for bit."""
    q, k, v, dout = inputs((2, 1023, 1023, 8, 2, 128), torch.bfloat16, "cuda", seed=29)
    sinks = sinks_for(8, "cuda", 29)
    a = run(flashlab_sinks, q, k, v, sinks, dout, causal=True, deterministic=True, impl=impl)
    b = run(flashlab_sinks, q, k, v, sinks, dout, causal=True, deterministic=True, impl=impl)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=lambda m: f"{name}: {m}")
