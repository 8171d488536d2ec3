"""Tests of flashlab.triton (FlashAttention-1 and -2 in Triton), forward and backward.

Each case compares the kernel and a same-precision baseline (standard attention computed in the
kernel's dtype, the way an unfused PyTorch model would) against a float64 reference on the same
inputs, and requires err(kernel) <= FACTOR * err(baseline) + floor: the kernel must be about as
accurate as ordinary bf16/fp16 attention. Inputs are fresh random draws per case (never zeros);
the caching allocator is poisoned with NaN before each call so an unwritten output element shows.

Runs on a CUDA GPU; without one it is skipped, unless TRITON_INTERPRET=1 (Triton's CPU interpreter:
slow, so a reduced set, fp16 only — the interpreter mishandles bf16).

    pytest python/tests/test_triton.py                                   # on a GPU machine
    TRITON_INTERPRET=1 pytest python/tests/test_triton.py -x             # CPU, small shapes
"""
import math
import zlib
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
if not torch.cuda.is_available() and not INTERPRET:
    pytest.skip("flashlab.triton needs a CUDA GPU (or TRITON_INTERPRET=1)", allow_module_level=True)

from flashlab.triton import fa1_attention, fa2_attention, fa2_tma_attention  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ALGOS = {"fa2": fa2_attention, "fa1": fa1_attention, "fa2_tma": fa2_tma_attention}
DTYPES = [torch.float16] if INTERPRET else [torch.bfloat16, torch.float16]

# (seqlen_q, seqlen_k): 1, 17, 113, 1023; equal, and unequal both ways. Causal with seqlen_q >
# seqlen_k (bottom-right) leaves the first seqlen_q - seqlen_k rows without any key.
SEQLENS = [(1, 1), (17, 17), (113, 113), (1023, 1023), (17, 113), (113, 17), (1, 1023), (1023, 113), (113, 1023)]
if INTERPRET:
    SEQLENS = [(1, 1), (17, 17), (17, 113), (113, 17), (1, 70), (70, 33)]
HEAD_DIMS = [32, 64] if INTERPRET else [64, 128]
GROUPS = [1, 2, 8]   # heads_q / heads_kv: MHA, GQA, MQA (heads_q = 8)

OUT_FACTOR, GRAD_FACTOR = 2.0, 3.0


def poison_allocator():
    """Fill a block of the caching allocator with NaN and free it: the kernel's torch.empty outputs
    likely reuse it, so an element the kernel fails to write stays NaN and fails the test."""
    if DEVICE == "cuda":
        torch.empty(64 << 20, dtype=torch.uint8, device=DEVICE).view(torch.float16).fill_(float("nan"))


def reference(q, k, v, causal, scale, dtype):
    """Standard attention in `dtype` (float64 = the reference; q.dtype = the same-precision
    baseline). Differentiable. Returns (out, lse); rows with no visible key give 0 and -inf."""
    batch, seqlen_q, heads_q, _ = q.shape
    seqlen_k, heads_kv = k.shape[1], k.shape[2]
    qt, kt, vt = (x.to(dtype).transpose(1, 2) for x in (q, k, v))       # (batch, heads, seqlen, d)
    kt = kt.repeat_interleave(heads_q // heads_kv, dim=1)
    vt = vt.repeat_interleave(heads_q // heads_kv, dim=1)
    s = (qt @ kt.transpose(-1, -2)).float() * scale if dtype != torch.float64 else (qt @ kt.transpose(-1, -2)) * scale
    if causal:
        i = torch.arange(seqlen_q, device=q.device)[:, None]
        j = torch.arange(seqlen_k, device=q.device)[None, :]
        s = s.masked_fill(j > i + seqlen_k - seqlen_q, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isinf(lse), 0.0, lse)[..., None])  # exp(-inf) = 0 when empty
    out = (p.to(dtype) @ vt).transpose(1, 2)
    return out, lse


def make_inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, seed):
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q = torch.randn(batch, seqlen_q, heads_q, head_dim, device=DEVICE, dtype=dtype, generator=g)
    k = torch.randn(batch, seqlen_k, heads_kv, head_dim, device=DEVICE, dtype=dtype, generator=g)
    v = torch.randn(batch, seqlen_k, heads_kv, head_dim, device=DEVICE, dtype=dtype, generator=g)
    do = torch.randn(batch, seqlen_q, heads_q, head_dim, device=DEVICE, dtype=dtype, generator=g)
    return q, k, v, do


def max_err(x, ref):
    return (x.double() - ref.double()).abs().max().item() if x.numel() else 0.0


def check_close(name, got, base, ref, factor):
    assert not torch.isnan(got).any(), f"{name}: NaN in the output"
    err, err_base = max_err(got, ref), max_err(base, ref)
    # Floor: half a unit of rounding in got's dtype at the reference's magnitude (at least 0.01),
    # for cases where the baseline happens to be exact (e.g. dQ = 0 with a single key).
    floor = 0.5 * torch.finfo(got.dtype).eps * max(ref.abs().max().item() if ref.numel() else 0.0, 0.01)
    assert err <= factor * err_base + floor, f"{name}: max error {err:.3e} > {factor} x baseline {err_base:.3e} + {floor:.1e}"


def run_case(algo, seqlen_q, seqlen_k, group, head_dim, dtype, causal, seed, batch=2, heads_q=8):
    heads_kv = heads_q // group
    q, k, v, do = make_inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, seed)
    scale = 1.0 / math.sqrt(head_dim)
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    ref_leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    base_leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]

    poison_allocator()
    out, lse = ALGOS[algo](*leaves, causal=causal, return_lse=True)
    out_ref, lse_ref = reference(*ref_leaves, causal, scale, torch.float64)
    out_base, _ = reference(*base_leaves, causal, scale, dtype)
    assert out.shape == q.shape and out.dtype == dtype
    assert lse.shape == (batch, heads_q, seqlen_q) and lse.dtype == torch.float32
    check_close("out", out, out_base, out_ref, OUT_FACTOR)

    # LSE: float32 vs float64 with the same -inf rows; finite rows within float32 rounding of
    # the dtype's scores (the inputs are already rounded to dtype, so only the arithmetic differs).
    empty = torch.isinf(lse_ref)
    assert torch.equal(torch.isinf(lse), empty) and not torch.isnan(lse).any()
    if (~empty).any():
        assert max_err(lse[~empty], lse_ref[~empty]) <= 1e-3 * (1 + lse_ref[~empty].abs().max().item())
    if empty.any():  # rows without a visible key: exactly 0
        assert out.transpose(1, 2)[empty].abs().max().item() == 0.0

    poison_allocator()
    grads = torch.autograd.grad(out, leaves, do)
    grads_ref = torch.autograd.grad(out_ref, ref_leaves, do.double())
    grads_base = torch.autograd.grad(out_base, base_leaves, do)
    for name, g, gb, gr, x in zip(("dq", "dk", "dv"), grads, grads_base, grads_ref, (q, k, v)):
        assert g.shape == x.shape and g.dtype == dtype
        check_close(name, g, gb, gr, GRAD_FACTOR)
    if empty.any():
        assert grads[0].transpose(1, 2)[empty].abs().max().item() == 0.0


CASES = [(sq, sk, GROUPS[i % len(GROUPS)]) for i, (sq, sk) in enumerate(SEQLENS)]


@pytest.mark.parametrize("algo", ["fa2", "fa1", "fa2_tma"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seqlen_q,seqlen_k,group", CASES)
def test_against_float64(algo, seqlen_q, seqlen_k, group, head_dim, dtype, causal):
    if algo == "fa1" and max(seqlen_q, seqlen_k) > 200 and head_dim == 128 and dtype == torch.float16:
        pytest.skip("FA1 is slow; its long cases run in bf16 only")
    seed = zlib.crc32(repr((algo, seqlen_q, seqlen_k, group, head_dim, dtype, causal)).encode())
    run_case(algo, seqlen_q, seqlen_k, group, head_dim, dtype, causal, seed)


@pytest.mark.parametrize("head_dim", [16, 32, 256] if not INTERPRET else [16])
@pytest.mark.parametrize("algo", ["fa2", "fa1", "fa2_tma"])
def test_other_head_dims(algo, head_dim):
    run_case(algo, 113, 200, 2, head_dim, torch.float16, True, seed=head_dim)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(50, 50), (50, 83), (83, 50), (33, 16)])
def test_small_tiles(seqlen_q, seqlen_k, causal):
    """16 x 16 tiles: short sequences then cross many tile edges and diagonal blocks, which is
    where the full/masked block split of the kernels could go wrong."""
    from flashlab.triton import fa1_backward, fa1_forward, fa2_backward, fa2_forward, fa2_tma_forward
    from flashlab.triton._common import TileConfig

    tiny = TileConfig(16, 16, 4, 2)
    q, k, v, do = make_inputs(2, seqlen_q, seqlen_k, 4, 2, 32, torch.float16, seed=seqlen_q * 1000 + seqlen_k)
    ref_leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    base_leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    out_ref, lse_ref = reference(*ref_leaves, causal, 32 ** -0.5, torch.float64)
    out_base, _ = reference(*base_leaves, causal, 32 ** -0.5, torch.float16)
    grads_ref = torch.autograd.grad(out_ref, ref_leaves, do.double())
    grads_base = torch.autograd.grad(out_base, base_leaves, do)
    for fwd, bwd, cfg in ((fa2_forward, fa2_backward, (tiny, tiny)), (fa1_forward, fa1_backward, tiny),
                          (fa2_tma_forward, fa2_backward, (tiny, tiny))):
        poison_allocator()
        out, lse = fwd(q, k, v, causal, None, tiny)
        check_close(f"{fwd.__name__} out", out, out_base, out_ref, OUT_FACTOR)
        assert torch.equal(torch.isinf(lse), torch.isinf(lse_ref))
        poison_allocator()
        grads = bwd(do, q, k, v, out, lse, causal, None, cfg)
        for name, g, gb, gr in zip(("dq", "dk", "dv"), grads, grads_base, grads_ref):
            check_close(f"{bwd.__name__} {name}", g, gb, gr, GRAD_FACTOR)


@pytest.mark.parametrize("algo", ["fa2", "fa1", "fa2_tma"])
def test_strided_inputs(algo):
    """q, k, v as views into one packed (batch, seqlen, 3, heads, d) tensor, and a transposed dO:
    the kernels read the strides, they never assume contiguity (fa2_tma: strides of 16 bytes' multiples,
    which a packed tensor has)."""
    g = torch.Generator(device=DEVICE).manual_seed(7)
    dtype = torch.float16
    qkv = torch.randn(2, 77, 3, 4, 64, device=DEVICE, dtype=dtype, generator=g)
    q, k, v = qkv.unbind(2)
    do = torch.randn(2, 4, 77, 64, device=DEVICE, dtype=dtype, generator=g).transpose(1, 2)
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    out = ALGOS[algo](*leaves, causal=True)
    grads = torch.autograd.grad(out, leaves, do)
    contig = [x.detach().contiguous().requires_grad_() for x in (q, k, v)]
    out_c = ALGOS[algo](*contig, causal=True)
    grads_c = torch.autograd.grad(out_c, contig, do.contiguous())
    assert torch.equal(out, out_c)
    for a, b in zip(grads, grads_c):
        assert torch.equal(a, b)


def test_softmax_scale_and_fresh_inputs():
    """A non-default scale, and two fresh draws giving different outputs (the kernel computes
    on its inputs, not on anything cached)."""
    q, k, v, _ = make_inputs(1, 65, 65, 2, 2, 64, torch.float16, seed=11)
    out, lse = fa2_attention(q, k, v, softmax_scale=0.3, return_lse=True)
    ref, lse_ref = reference(q, k, v, False, 0.3, torch.float64)
    base, _ = reference(q, k, v, False, 0.3, torch.float16)
    check_close("out", out, base, ref, OUT_FACTOR)
    q2, k2, v2, _ = make_inputs(1, 65, 65, 2, 2, 64, torch.float16, seed=12)
    assert not torch.equal(fa2_attention(q2, k2, v2), fa2_attention(q, k, v))


def test_errors_name_the_argument():
    q, k, v, _ = make_inputs(1, 8, 8, 4, 4, 64, torch.float16, seed=1)
    with pytest.raises(ValueError, match="head_dim"):
        fa2_attention(q[..., :48], k[..., :48], v[..., :48])
    with pytest.raises(ValueError, match="heads_kv"):
        fa2_attention(q, k[:, :, :3], v[:, :, :3])
    with pytest.raises(TypeError, match="dtype"):
        fa2_attention(q.float(), k.float(), v.float())
    with pytest.raises(ValueError, match="4-D"):
        fa1_attention(q[0], k[0], v[0])


def test_empty_key_sequence():
    """seqlen_k = 0: every row sees no key -> out 0, LSE -inf, gradients 0."""
    q, k, v, do = make_inputs(1, 5, 0, 2, 2, 64, torch.float16, seed=3)
    for fn in ALGOS.values():
        leaves = [x.detach().requires_grad_() for x in (q, k, v)]
        out, lse = fn(*leaves, return_lse=True)
        assert out.abs().max().item() == 0.0 and torch.isinf(lse).all() and (lse < 0).all()
        dq, dk, dv = torch.autograd.grad(out, leaves, do)
        assert dq.abs().max().item() == 0.0 and dk.numel() == 0


def test_tma_layouts_it_refuses():
    """fa2_tma: what a TMA descriptor cannot describe is a ValueError naming the tensor and the rule,
    before any launch: a stride that is not a multiple of 16 bytes (520 here), a head dim that is
    not contiguous. fa2 takes both."""
    g = torch.Generator(device=DEVICE).manual_seed(5)
    padded = torch.randn(1, 8, 4 * 64 + 4, device=DEVICE, dtype=torch.float16, generator=g)
    q = padded[..., :256].view(1, 8, 4, 64)                       # seqlen stride 260 elements: 520 bytes
    k = torch.randn(1, 8, 4, 64, device=DEVICE, dtype=torch.float16, generator=g)
    with pytest.raises(ValueError, match=r"q.stride\(1\) = 260 elements is not a multiple of 16 bytes"):
        fa2_tma_attention(q, k, k)
    kt = torch.randn(1, 8, 64, 4, device=DEVICE, dtype=torch.float16, generator=g).transpose(2, 3)
    with pytest.raises(ValueError, match=r"k.stride\(3\) = 4: TMA needs the head dim contiguous"):
        fa2_tma_attention(k, kt, k)
    assert (fa2_attention(q, k, k) - fa2_tma_attention(q.contiguous(), k, k)).abs().max().item() <= 4e-3
