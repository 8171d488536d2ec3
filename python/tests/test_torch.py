"""flashlab.torch: the custom ops, autograd, torch.compile and CUDA graphs.

CPU tests run wherever torch is installed; CUDA tests need a GPU and a CUDA build of libflashlab
(python/run_gpu.sh runs them on the lent H100). References: torch autograd on float64 copies of
the inputs (exact), and for the tolerance a same-precision baseline: the exact result rounded to
the dtype on the CPU (cpu_flash computes in fp32), PyTorch SDPA in the dtype on CUDA where its
semantics match, else the reference evaluated in the dtype (flash-attn's test convention).
"""

import zlib

import pytest

torch = pytest.importorskip("torch")

import flashlab  # noqa: E402
import flashlab.torch as fl  # noqa: E402
from attention_reference import check_close, to_numpy, torch_attention, torch_term_scales  # noqa: E402

# From flashlab's view (a CUDA build that sees a device) and torch's build, without calling
# torch.cuda.is_available(): see python/tests/conftest.py on the import-order crash.
_INFO = flashlab.build_info()
HAS_CUDA = _INFO["cuda_compiled"] and _INFO["cuda_device_count"] > 0 and torch.version.cuda is not None
cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and a CUDA build of libflashlab")
NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def inputs(shape, dtype, device, seed):
    """Fresh random q, k, v, dout (leaf tensors needing grad), never zeros."""
    b, sq, sk, hq, hkv, d = shape
    g = torch.Generator(device="cpu").manual_seed(seed)

    def randn(*s):
        return torch.randn(*s, generator=g).to(device=device, dtype=dtype)

    q, k, v = randn(b, sq, hq, d), randn(b, sk, hkv, d), randn(b, sk, hkv, d)
    dout = randn(b, sq, hq, d)
    return [x.requires_grad_() for x in (q, k, v)] + [dout]


def forward_backward(fn, q, k, v, dout, **opts):
    """out, lse and the three gradients of sum(out * dout) through `fn` (autograd)."""
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    out, lse = fn(q, k, v, **opts)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    return {"out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv}


def flashlab_fn(q, k, v, **opts):
    return fl.attention(q, k, v, return_lse=True, **opts)


def exact(q, k, v, dout, **opts):
    """Float64 reference on q's device (so that long sequences stay fast on the GPU)."""
    q64, k64, v64, d64 = (x.detach().double() for x in (q, k, v, dout))
    return forward_backward(torch_attention, q64, k64, v64, d64, **opts)


def check_all(got, want, base, dtype, scales, names=("out", "dq", "dk", "dv"), factor=2.0):
    for name in names:
        check_close(name, to_numpy(got[name]), to_numpy(want[name]), to_numpy(base[name]), NAMES[dtype],
                    factor=factor, scale=scales[name])


# ---------------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------------
CPU_CASES = [  # (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim), options
    ((1, 1, 1, 1, 1, 32), {}),
    ((2, 17, 113, 4, 2, 64), {"causal": True}),
    ((1, 113, 17, 6, 2, 40), {"causal": True}),  # rows that see no key
    ((2, 17, 17, 2, 1, 64), {"causal": True, "causal_align": "top_left"}),
    ((1, 113, 113, 4, 4, 32), {"window": (9, 2), "softcap": 3.0}),
    ((2, 17, 113, 4, 2, 64), {"alibi": True, "softmax_scale": 0.3}),
    # StreamingLLM sink tokens: 4 left of a short window; 70 (more than one 64-key block), top-left
    ((1, 113, 113, 4, 2, 32), {"causal": True, "window": (8, 0), "sink_tokens": 4}),
    ((2, 17, 113, 2, 1, 64), {"causal": True, "causal_align": "top_left", "window": (3, 0), "sink_tokens": 70}),
]


def case_opts(case, device):
    shape, opts = case
    opts = dict(opts)
    if opts.pop("alibi", False):
        g = torch.Generator().manual_seed(1)
        opts["alibi_slopes"] = (torch.rand(shape[0], shape[3], generator=g) * 0.5 + 0.05).to(device)
    return opts


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=lambda d: NAMES[d])
@pytest.mark.parametrize("case", CPU_CASES, ids=lambda c: "x".join(map(str, c[0])) + str(c[1]))
def test_cpu_vs_float64(case, dtype):
    q, k, v, dout = inputs(case[0], dtype, "cpu", seed=zlib.crc32(str(case).encode()))
    opts = case_opts(case, "cpu")
    got = forward_backward(flashlab_fn, q, k, v, dout, **opts)
    want = exact(q, k, v, dout, **opts)
    base = {n: want[n].to(dtype) for n in want}  # a perfect result stored in the dtype
    check_all(got, want, base, dtype, torch_term_scales(q, k, v, dout, opts.get("softmax_scale")))
    check_close("lse", to_numpy(got["lse"]), to_numpy(want["lse"]), to_numpy(want["lse"].float()), "float32")
    assert got["out"].dtype == dtype and got["lse"].dtype == torch.float32


def test_references_agree():
    """The torch reference (used with autograd here) matches the hand-written NumPy one."""
    from attention_reference import numpy_attention

    q, k, v, dout = inputs((2, 17, 23, 4, 2, 32), torch.float64, "cpu", seed=3)
    opts = {"causal": True, "softcap": 2.0, "window": (5, -1)}
    t = forward_backward(torch_attention, q, k, v, dout, **opts)
    n = numpy_attention(*(to_numpy(x) for x in (q, k, v, dout)), **opts)
    for name in ("out", "lse", "dq", "dk", "dv"):
        torch.testing.assert_close(t[name], torch.from_numpy(n[name]), rtol=1e-10, atol=1e-12)


def test_cpu_noncontiguous_inputs():
    """Views with arbitrary outer strides (here heads-major storage) give the contiguous result."""
    q, k, v, dout = inputs((2, 17, 23, 4, 2, 32), torch.float32, "cpu", seed=4)
    qt, kt, vt = (x.detach().transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v))
    assert not qt.is_contiguous()
    got = forward_backward(flashlab_fn, qt, kt, vt, dout, causal=True)
    want = forward_backward(flashlab_fn, q, k, v, dout, causal=True)
    for name in got:
        torch.testing.assert_close(got[name], want[name], rtol=0, atol=0)


def test_cpu_dropout_seeded_by_torch_generator():
    q, k, v, dout = inputs((1, 17, 23, 2, 1, 32), torch.float32, "cpu", seed=5)
    torch.manual_seed(0)
    a = forward_backward(flashlab_fn, q, k, v, dout, dropout_p=0.3)
    torch.manual_seed(0)
    b = forward_backward(flashlab_fn, q, k, v, dout, dropout_p=0.3)
    c = forward_backward(flashlab_fn, q, k, v, dout, dropout_p=0.3)  # next seed
    gen = torch.Generator().manual_seed(0)
    d = forward_backward(flashlab_fn, q, k, v, dout, dropout_p=0.3, generator=gen)
    for name in ("out", "dq", "dk", "dv"):
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0)
        torch.testing.assert_close(a[name], d[name], rtol=0, atol=0)
    assert not torch.allclose(a["out"], c["out"])
    # Backends agree on the mask, forward and backward (the reference impl is the oracle).
    torch.manual_seed(1)
    fa2 = forward_backward(flashlab_fn, q, k, v, dout, dropout_p=0.3, impl="cpu_flash")
    torch.manual_seed(1)
    ref = forward_backward(flashlab_fn, q, k, v, dout, dropout_p=0.3, impl="reference")
    for name in ("out", "dq", "dk", "dv"):
        torch.testing.assert_close(fa2[name], ref[name], rtol=1e-4, atol=1e-5)


def test_cpu_lse_is_not_differentiable_and_errors_surface():
    q, k, v, _ = inputs((1, 17, 17, 4, 2, 32), torch.float32, "cpu", seed=6)
    out, lse = fl.attention(q, k, v, return_lse=True)
    assert out.requires_grad and not lse.requires_grad
    k3 = torch.randn(1, 17, 3, 32)
    with pytest.raises(flashlab.FlashlabError, match=r"heads_q \(4\) must be a multiple of heads_kv \(3\)"):
        fl.attention(q, k3, k3)
    with pytest.raises(flashlab.FlashlabError, match="must have one dtype"):
        fl.attention(q, k.half(), v.half())


def test_opcheck():
    """torch.library.opcheck: schema, fake (meta) kernels, autograd registration, AOT dispatch."""
    q, k, v, dout = inputs((2, 17, 23, 4, 2, 32), torch.float32, "cpu", seed=7)
    args = (q, k, v, None, None, 0, 0, None, None, None, None, True, "bottom_right", -1, -1, 0.0, 0.0, False, "auto")
    torch.library.opcheck(torch.ops.flashlab.fwd.default, args)
    out, lse = torch.ops.flashlab.fwd(*args)
    bwd_args = (dout, q.detach(), k.detach(), v.detach(), out.detach(), lse) + args[3:] + (False,)  # no dsink
    torch.library.opcheck(torch.ops.flashlab.bwd.default, bwd_args)
    # StreamingLLM sink tokens (each op's last argument, default 0): 3 keys left of a window of 4.
    args = args[:13] + (4, -1) + args[15:]
    torch.library.opcheck(torch.ops.flashlab.fwd.default, args + (3,))
    out, lse = torch.ops.flashlab.fwd(*args, 3)
    bwd_args = (dout, q.detach(), k.detach(), v.detach(), out.detach(), lse) + args[3:] + (False, 3)
    torch.library.opcheck(torch.ops.flashlab.bwd.default, bwd_args)


class _PassThrough(torch.utils._python_dispatch.TorchDispatchMode):
    """A dispatch mode that only forwards: with it active, calls must go through the ops."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_cpu_eager_path_skips_the_dispatcher_and_matches_the_ops(monkeypatch):
    """Eager calls run flashlab::fwd / bwd's Python kernels without the dispatcher (host time:
    flashlab.torch._eager); under a dispatch mode, a requested double backward or torch.compile
    (compile_check) they go through the ops. Both give the same bits."""
    calls = {"fwd": 0, "bwd": 0}

    class Counting:  # the op, counting its calls (redispatch: the autograd kernel's, not counted)
        def __init__(self, name, op):
            self.name, self.op, self.redispatch = name, op, op.redispatch

        def __call__(self, *args):
            calls[self.name] += 1
            return self.op(*args)

    monkeypatch.setattr(fl, "_FWD", Counting("fwd", fl._FWD))
    monkeypatch.setattr(fl, "_BWD", Counting("bwd", fl._BWD))
    q, k, v, dout = inputs((2, 33, 47, 4, 2, 32), torch.float32, "cpu", seed=21)
    sinks = torch.randn(4, generator=torch.Generator().manual_seed(3)).requires_grad_()
    opts = dict(causal=True, window=(20, 3), sink_logits=sinks)

    def run():
        q2, k2, v2, s2 = (x.detach().clone().requires_grad_() for x in (q, k, v, sinks))
        out, lse = fl.attention(q2, k2, v2, return_lse=True, **{**opts, "sink_logits": s2})
        return [out, lse, *torch.autograd.grad(out, (q2, k2, v2, s2), dout)]

    eager = run()
    assert calls == {"fwd": 0, "bwd": 0}
    with _PassThrough():
        through_ops = run()
    assert calls == {"fwd": 1, "bwd": 1}
    for got, want in zip(eager, through_ops):
        assert torch.equal(got, want)
    # No grad needed: the kernel alone, same bits.
    with torch.no_grad():
        assert torch.equal(fl.attention(q, k, v, **opts), eager[0])
    assert calls["fwd"] == 1
    # create_graph: the backward goes through flashlab::bwd, whose autograd kernel refuses a
    # second derivative.
    q2 = q.detach().clone().requires_grad_()
    out = fl.attention(q2, k, v, **opts)
    (dq,) = torch.autograd.grad(out, (q2,), dout, create_graph=True)
    # (through fl._BWD from the Python Function; from _torch_ext's node, the op by the dispatcher)
    assert calls["bwd"] == (1 if fl._ext_active() is not None else 2)
    assert "_BwdFunction" in type(dq.grad_fn).__name__  # flashlab::bwd's autograd kernel
    with pytest.raises(RuntimeError, match="double backward is not supported"):
        torch.autograd.grad(dq.sum(), (q2,))


def _torch_ext_or_skip():
    """flashlab._torch_ext where this build has it; CI's must (tools/setup.sh installs torch with CUDA)."""
    import os

    if fl._ext is None:
        assert os.environ.get("CI") != "true", "CI builds flashlab._torch_ext: it failed to build or import"
        pytest.skip("flashlab._torch_ext is not built here (torch without CUDA, or no CUDA toolkit)")
    if fl._ext_active() is None:
        pytest.skip("FLASHLAB_TORCH_EXT=0")
    return fl._ext


def _grads_both_ways(monkeypatch, q, k, v, dout, wrt=None, **opts):
    """(out, lse, grads) through _torch_ext's C++ node and through the Python Function."""
    results = []
    for ext in (fl._ext, None):
        monkeypatch.setattr(fl, "_ext", ext)
        leaves = [x.detach().clone().requires_grad_(x.requires_grad) for x in (q, k, v)]
        sinks = opts.get("sink_logits")
        if sinks is not None:
            opts["sink_logits"] = sinks.detach().clone().requires_grad_(sinks.requires_grad)
        out, lse = fl.attention(*leaves, return_lse=True, **opts)
        if ext is not None:
            assert out.grad_fn.name() == "FlashlabAttentionBackward"
        else:
            assert "_FwdFunction" in type(out.grad_fn).__name__
        targets = [leaves[i] for i in (wrt or (0, 1, 2))]
        if sinks is not None and sinks.requires_grad:
            targets.append(opts["sink_logits"])
        if opts.get("dropout_p"):
            torch.manual_seed(0)  # the seed is drawn in the forward; nothing else is random
        results.append((out, lse, torch.autograd.grad(out, targets, dout)))
    return results


@pytest.mark.parametrize("case", ["gqa_causal_window_sinks", "varlen_alibi", "dropout_softcap", "frozen_sinks_dq_only",
                                  "noncontiguous_dout", "sink_tokens"])
def test_cpu_torch_ext_node_matches_the_python_function(monkeypatch, case):
    """The C++ autograd node (flashlab._torch_ext) gives the Python Function's bits, feature by feature."""
    _torch_ext_or_skip()
    q, k, v, dout = inputs((2, 33, 47, 4, 2, 32), torch.float32, "cpu", seed=31)
    g = torch.Generator().manual_seed(32)
    opts, wrt = {}, None
    if case == "gqa_causal_window_sinks":
        opts = dict(causal=True, window=(20, 3), sink_logits=torch.randn(4, generator=g).requires_grad_())
    elif case == "varlen_alibi":
        lens_q, lens_k = [5, 0, 17], [9, 3, 30]
        cu = lambda lens: torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)  # noqa: E731
        q = torch.randn(sum(lens_q), 4, 32, generator=g).requires_grad_()
        k, v = (torch.randn(sum(lens_k), 2, 32, generator=g).requires_grad_() for _ in range(2))
        dout = torch.randn(sum(lens_q), 4, 32, generator=g)
        opts = dict(cu_seqlens_q=cu(lens_q), cu_seqlens_k=cu(lens_k), max_seqlen_q=17, max_seqlen_k=30,
                    causal=True, alibi_slopes=torch.rand(3, 4, generator=g))
    elif case == "dropout_softcap":
        torch.manual_seed(7)
        opts = dict(dropout_p=0.25, softcap=3.0, generator=torch.Generator().manual_seed(9))
    elif case == "frozen_sinks_dq_only":
        opts, wrt = dict(sink_logits=torch.randn(4, generator=g), causal_align="top_left", causal=True), (0,)
    elif case == "sink_tokens":  # StreamingLLM sink tokens: the node keeps them for its backward
        opts = dict(causal=True, window=(5, 0), sink_tokens=6)
    else:
        dout = dout.transpose(1, 2).contiguous().transpose(1, 2)
        opts = dict(softmax_scale=0.3, deterministic=True)
    if case == "dropout_softcap":  # the same generator state for both runs
        gen_state = opts["generator"].get_state()
        (a, b) = [], []
        for ext, out in ((fl._ext, a), (None, b)):
            opts["generator"].set_state(gen_state)
            monkeypatch.setattr(fl, "_ext", ext)
            q2, k2, v2 = (x.detach().clone().requires_grad_() for x in (q, k, v))
            o = fl.attention(q2, k2, v2, **opts)
            out += [o, *torch.autograd.grad(o, (q2, k2, v2), dout)]
        for x, y in zip(a, b):
            assert torch.equal(x, y)
        return
    (out_c, lse_c, grads_c), (out_p, lse_p, grads_p) = _grads_both_ways(monkeypatch, q, k, v, dout, wrt, **opts)
    assert torch.equal(out_c, out_p) and torch.equal(lse_c, lse_p)
    assert len(grads_c) == len(grads_p)
    for x, y in zip(grads_c, grads_p):
        assert x is not None and torch.isfinite(x).all() and torch.equal(x, y)


def test_cpu_torch_ext_node_autograd_rules():
    """The C++ node keeps autograd's rules: saved tensors checked for in-place changes, the graph
    freed after a backward unless retained, LSE not differentiable, modes see the op, no forward AD."""
    _torch_ext_or_skip()
    q, k, v, dout = inputs((1, 17, 17, 2, 2, 16), torch.float32, "cpu", seed=33)
    out, lse = fl.attention(q, k, v, causal=True, return_lse=True)
    assert out.grad_fn.name() == "FlashlabAttentionBackward" and lse.grad_fn is None and not lse.requires_grad
    first = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    again = torch.autograd.grad(out, (q, k, v), dout)
    for x, y in zip(first, again):
        assert torch.equal(x, y)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(out, (q, k, v), dout)
    out = fl.attention(q, k, v)
    with torch.no_grad():
        k.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(out, (q,), dout)
    # A dispatch mode active during the backward sees flashlab::bwd (the node takes the op).
    seen = []

    class Recording(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    out = fl.attention(q, k, v)
    with Recording():
        via_op = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    assert any("flashlab.bwd" in name for name in seen)
    direct = torch.autograd.grad(out, (q, k, v), dout)
    for x, y in zip(via_op, direct):
        assert torch.equal(x, y)
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        qd = fwAD.make_dual(q.detach(), torch.randn_like(q))
        with pytest.raises(RuntimeError, match="forward-mode derivative"):
            fl.attention(qd, k, v)


def compile_check(device, dtype, atol):
    q, k, v, dout = inputs((2, 113, 113, 4, 2, 64), dtype, device, seed=8)
    torch._dynamo.reset()
    compiled = torch.compile(flashlab_fn, fullgraph=True)  # raises on any graph break
    eager = forward_backward(flashlab_fn, q, k, v, dout, causal=True, deterministic=True)
    got = forward_backward(compiled, q, k, v, dout, causal=True, deterministic=True)
    for name in eager:
        torch.testing.assert_close(got[name], eager[name], rtol=0, atol=atol)


def test_cpu_compile_fullgraph():
    compile_check("cpu", torch.float32, atol=0)


# ---------------------------------------------------------------------------------------------
# CUDA (impl auto = cuda_sm90 forward on sm_90, cuda_sm80 otherwise and for the rest: bf16/fp16,
# head dims up to 256, every feature)
# ---------------------------------------------------------------------------------------------
CUDA_SHAPES = [  # (batch, seqlen_q, seqlen_k, heads_q, heads_kv), causal
    ((1, 1, 1, 1, 1), False),
    ((2, 17, 17, 4, 2), True),
    ((1, 113, 203, 6, 2), True),
    ((2, 203, 113, 4, 4), True),  # seqlen_q > seqlen_k: rows that see no key
    ((1, 1023, 1023, 8, 1), True),
    ((1, 512, 1500, 8, 2), False),
    ((1, 4224, 4224, 4, 4), False),
]


def sdpa_applies(q, k, causal):
    """SDPA's is_causal mask is top-left: the same as flashlab's bottom-right only when square."""
    return not causal or q.shape[1] == k.shape[1]


def sdpa(q, k, v, causal):
    """SDPA in the inputs' dtype, (batch, seqlen, heads, dim) in and out; returns (out, None)."""
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
        enable_gqa=q.shape[2] != k.shape[2])  # fmt: skip
    return out.transpose(1, 2), None


@cuda_only
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=lambda d: NAMES[d])
@pytest.mark.parametrize("case", CUDA_SHAPES, ids=lambda c: "x".join(map(str, c[0])) + ("_causal" if c[1] else ""))
def test_cuda_vs_float64_and_sdpa(case, dtype, head_dim):
    (b, sq, sk, hq, hkv), causal = case
    q, k, v, dout = inputs((b, sq, sk, hq, hkv, head_dim), dtype, "cuda", seed=sq * 7 + sk + head_dim)
    got = forward_backward(flashlab_fn, q, k, v, dout, causal=causal)
    want = exact(q, k, v, dout, causal=causal)
    scales = torch_term_scales(q, k, v, dout)
    # Baseline 1: the reference evaluated in the dtype (flash-attn's tests use the same).
    low = forward_backward(torch_attention, q, k, v, dout, causal=causal)
    check_all(got, want, low, dtype, scales)
    score_scale = head_dim**-0.5 * q.abs().max().item() * k.abs().max().item()  # LSE's error unit
    check_close("lse", to_numpy(got["lse"]), to_numpy(want["lse"]), to_numpy(want["lse"].float()), "float32",
                scale=score_scale)
    # Baseline 2: PyTorch SDPA in the dtype, where its mask is the same.
    if sdpa_applies(q, k, causal):
        peer = forward_backward(lambda q, k, v, **o: sdpa(q, k, v, causal), q, k, v, dout)
        check_all(got, want, peer, dtype, scales)


# StreamingLLM sink tokens on CUDA: impl auto runs cuda_sm90's forward on a Hopper GPU and cuda_sm80's
# backward (cuda_sm80 for both elsewhere);
# checked against float64 with the reference evaluated in the dtype as the baseline.
@cuda_only
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=lambda d: NAMES[d])
@pytest.mark.parametrize("case", [c for c in CPU_CASES if c[1].get("sink_tokens")],
                         ids=lambda c: "x".join(map(str, c[0])) + str(c[1]))
def test_cuda_sink_tokens_vs_float64(case, dtype):
    shape, opts = case
    shape = shape[:5] + (64,)  # a head dim every CUDA build has
    q, k, v, dout = inputs(shape, dtype, "cuda", seed=zlib.crc32(str(case).encode()))
    got = forward_backward(flashlab_fn, q, k, v, dout, **opts)
    want = exact(q, k, v, dout, **opts)
    low = forward_backward(torch_attention, q, k, v, dout, **opts)
    check_all(got, want, low, dtype, torch_term_scales(q, k, v, dout))


@cuda_only
def test_cuda_compile_fullgraph():
    compile_check("cuda", torch.bfloat16, atol=0)


@cuda_only
def test_cuda_graph_capture_and_replay():
    """Forward + backward captured in one CUDA graph; replays on new data match eager calls."""
    q, k, v, dout = inputs((2, 203, 203, 8, 2, 128), torch.bfloat16, "cuda", seed=9)
    opts = dict(causal=True, deterministic=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph (allocator pools, lazy init)
        for _ in range(2):
            out = fl.attention(q, k, v, **opts)
            out.backward(dout)
    torch.cuda.current_stream().wait_stream(side)
    for x in (q, k, v):
        x.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fl.attention(q, k, v, **opts)
        out.backward(dout)
    for seed in (10, 11):
        fresh = inputs((2, 203, 203, 8, 2, 128), torch.bfloat16, "cuda", seed=seed)
        with torch.no_grad():
            for static, new in zip((q, k, v, dout), fresh):
                static.copy_(new)
        graph.replay()
        want = forward_backward(flashlab_fn, q, k, v, dout, **opts)
        torch.cuda.synchronize()
        for name, got in (("out", out), ("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
            torch.testing.assert_close(got, want[name], rtol=0, atol=0, msg=lambda m: f"{name}: {m}")


@cuda_only
def test_cuda_side_stream():
    q, k, v, dout = inputs((2, 113, 113, 4, 2, 64), torch.float16, "cuda", seed=12)
    want = forward_backward(flashlab_fn, q, k, v, dout, causal=True, deterministic=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = forward_backward(flashlab_fn, q, k, v, dout, causal=True, deterministic=True)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=0, atol=0)


@cuda_only
@pytest.mark.parametrize(
    "change, message",
    [
        ({"dtype": torch.float32}, r"dtype fp32 is not supported by impl cuda_sm(80|90)"),
        ({"head_dim": 264}, r"head_dim \(264\) is not supported by impl cuda_sm(80|90)"),
        ({"head_dim": 100}, r"head_dim \(100\) is not supported by impl cuda_sm(80|90): supported multiples of 8"),
        ({"softcap": 5.0, "impl": "learn_v4"}, "softcap is not supported by impl learn_v4"),
        ({"head_dim": 96, "impl": "learn_v4"}, r"head_dim \(96\) is not supported by impl learn_v4: supported 64, 128"),
        ({"sink_tokens": 4, "impl": "learn_v4"},
         r"sink_tokens \(StreamingLLM sink tokens\) is not supported by impl learn_v4"),
    ],
    ids=["fp32", "head_dim264", "head_dim100", "learn_v4_softcap", "learn_v4_head_dim", "learn_v4_sink_tokens"],
)
def test_cuda_unsupported_features_raise(change, message):
    change = dict(change)
    d, dtype = change.pop("head_dim", 64), change.pop("dtype", torch.bfloat16)
    q, k, v, _ = inputs((1, 17, 17, 2, 2, d), dtype, "cuda", seed=13)
    with pytest.raises(flashlab.UnsupportedError, match=message):
        fl.attention(q, k, v, causal=True, **change)


@cuda_only
@pytest.mark.parametrize("node", ["cpp", "python"])
def test_cuda_backward_error_surfaces_from_the_autograd_node(monkeypatch, node):
    """A backward the chosen implementation refuses raises flashlab.UnsupportedError in the caller of
    autograd (from _torch_ext's node through the engine's thread, or from the Python Function):
    cuda_sm90 named explicitly runs the forward, but not a backward whose dout is broadcast over
    the rows (a row stride of 0, which TMA cannot describe)."""
    if node == "python":
        monkeypatch.setenv("FLASHLAB_TORCH_EXT", "0")
    q, k, v, dout = inputs((1, 17, 17, 2, 2, 64), torch.bfloat16, "cuda", seed=14)
    dout = dout[:, :1].expand_as(dout)
    assert dout.stride(1) == 0
    try:
        out = fl.attention(q, k, v, causal=True, impl="cuda_sm90")
    except flashlab.UnsupportedError as e:
        pytest.skip(f"cuda_sm90 forward not available here: {e}")
    for _ in range(2):  # the error leaves the node usable: a second try raises the same
        with pytest.raises(flashlab.UnsupportedError, match=r"dout\.row_stride \(0\)") as info:
            torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        assert info.value.code == "unsupported"


def test_bench_impl_env_knob(monkeypatch):
    """flashlab.bench's flashlab:<impl>@VAR=VALUE runs each call with VAR=VALUE and restores the
    environment afterwards (the same-process A/B of a library knob); a malformed one is skipped."""
    import os

    from flashlab import bench

    monkeypatch.setenv("FLASHLAB_BENCH_TEST_KNOB", "before")
    seen = []
    real = fl.attention

    def spy(*args, **kwargs):
        seen.append(os.environ.get("FLASHLAB_BENCH_TEST_KNOB"))
        return real(*args, **kwargs)

    monkeypatch.setattr(fl, "attention", spy)
    call = bench.make_impl("flashlab:cpu_flash@FLASHLAB_BENCH_TEST_KNOB=7", torch)
    q, k, v, _ = inputs((1, 5, 5, 2, 2, 8), torch.float32, "cpu", seed=11)
    out = call(q, k, v, True)
    assert seen == ["7"] and os.environ["FLASHLAB_BENCH_TEST_KNOB"] == "before"
    ref = real(q, k, v, causal=True, impl="cpu_flash")
    assert torch.equal(out, ref)
    with pytest.raises(bench.Skip):
        bench.make_impl("flashlab:cpu_flash@NOVALUE", torch)
