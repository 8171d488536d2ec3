"""Float64 attention references and the error check shared by the Python tests.

The semantics are flashlab's (include/flashlab/params.h, mask.h): s = scale * q.k, then softcap
(s = cap * tanh(s / cap)), then ALiBi (s -= slope * |i + shift - j|), then the interval mask;
LSE in natural log; a row that sees no key gives out 0, LSE -inf and zero gradients; query head h
reads kv head h // (heads_q // heads_kv). StreamingLLM sink tokens: the first sink_tokens keys are
visible besides the window, never right of the row's right bound.

numpy_attention: plain NumPy (no torch), with the backward written out (CI runs it).
torch_attention: the same in torch ops, any dtype; the tests differentiate it with autograd.
"""

import numpy as np


def visible(seqlen_q, seqlen_k, causal=False, causal_align="bottom_right", window=(-1, -1), sink_tokens=0):
    """(seqlen_q, seqlen_k) bool: which keys each query sees, and the diagonal shift."""
    shift = seqlen_k - seqlen_q if causal_align == "bottom_right" else 0
    left, right = window
    if causal:
        right = 0
    i = np.arange(seqlen_q)[:, None] + shift  # the key on each row's diagonal
    j = np.arange(seqlen_k)[None, :]
    keep = np.ones((seqlen_q, seqlen_k), dtype=bool)
    if left >= 0:
        keep &= j >= i - left
    if right >= 0:
        keep &= j <= i + right
    if sink_tokens > 0:  # the first keys, left of the window too, never right of the right bound
        keep |= (j < sink_tokens) & ((j <= i + right) if right >= 0 else True)
    return keep, shift


def _slopes(alibi_slopes, batch, heads):
    if alibi_slopes is None:
        return np.zeros((batch, heads))
    a = np.asarray(alibi_slopes, dtype=np.float64)
    return np.broadcast_to(a, (batch, heads)) if a.ndim == 1 else a


def numpy_attention(q, k, v, dout=None, *, softmax_scale=None, causal=False,
                    causal_align="bottom_right", window=(-1, -1), softcap=0.0, alibi_slopes=None,
                    sink_logits=None, sink_tokens=0):  # fmt: skip
    """Float64 forward (and backward when dout is given) on (batch, seqlen, heads, head_dim).

    Returns a dict with out, lse and, with dout, dq, dk, dv (and dsink with sink_logits; all
    float64). sink_logits (heads_q,): one more term exp(sink) in every row's softmax sum."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    group = hq // hkv
    scale = d**-0.5 if softmax_scale is None else softmax_scale
    keep, shift = visible(sq, sk, causal, causal_align, window, sink_tokens)
    # Heads first: (b, h, s, d); kv heads repeated for GQA.
    qh = q.transpose(0, 2, 1, 3)
    kh = np.repeat(k.transpose(0, 2, 1, 3), group, axis=1)
    vh = np.repeat(v.transpose(0, 2, 1, 3), group, axis=1)
    s = scale * qh @ kh.transpose(0, 1, 3, 2)
    if softcap > 0:
        t = np.tanh(s / softcap)
        s = softcap * t
    dist = np.abs(np.arange(sq)[:, None] + shift - np.arange(sk)[None, :])
    s = s - _slopes(alibi_slopes, b, hq)[:, :, None, None] * dist
    s = np.where(keep, s, -np.inf)
    sink = np.full((1, hq, 1, 1), -np.inf)
    if sink_logits is not None:
        sink = np.asarray(sink_logits, dtype=np.float64).reshape(1, hq, 1, 1)
    m = np.maximum(s.max(axis=-1, keepdims=True), sink)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m_safe)  # exp(-inf) = 0 on masked keys
    z = e.sum(axis=-1, keepdims=True) + np.exp(sink - m_safe)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.where(z > 0, np.log(z) + m_safe, -np.inf)
        p = np.where(z > 0, e / z, 0.0)
    oh = p @ vh
    # "scale": the size of the terms each result sums, the unit of a correct implementation's
    # rounding error even where the exact result cancels to 0 (dq of a row that sees one key).
    res = {"out": oh.transpose(0, 2, 1, 3), "lse": lse[..., 0], "scale": {"out": np.abs(v).max()}}
    if dout is None:
        return res
    doh = np.asarray(dout, dtype=np.float64).transpose(0, 2, 1, 3)
    dvh = p.transpose(0, 1, 3, 2) @ doh
    dp = doh @ vh.transpose(0, 1, 3, 2)
    res["scale"].update(dq=scale * np.abs(dp).max() * np.abs(k).max(),
                        dk=scale * np.abs(dp).max() * np.abs(q).max(), dv=np.abs(doh).max())
    D = (doh * oh).sum(axis=-1, keepdims=True)
    ds = p * (dp - D)
    if sink_logits is not None:  # dL/dsink = -sum over batch and rows of exp(sink - lse) * D
        with np.errstate(invalid="ignore"):
            p_sink = np.where(np.isfinite(sink), np.exp(sink - lse), 0.0)
        res["dsink"] = -(p_sink * D).sum(axis=(0, 2, 3))
    if softcap > 0:
        ds = ds * (1 - t * t)
    dqh = scale * ds @ kh
    dkh = scale * ds.transpose(0, 1, 3, 2) @ qh

    def fold(x):  # (b, hq, s, d) -> (b, s, hkv, d): sum each GQA group
        return x.reshape(b, hkv, group, x.shape[2], d).sum(axis=2).transpose(0, 2, 1, 3)

    res.update(dq=dqh.transpose(0, 2, 1, 3), dk=fold(dkh), dv=fold(dvh))
    return res


def torch_attention(q, k, v, *, softmax_scale=None, causal=False, causal_align="bottom_right",
                    window=(-1, -1), softcap=0.0, alibi_slopes=None, sink_logits=None,
                    sink_tokens=0):  # fmt: skip
    """numpy_attention's forward in torch ops, differentiable, in q's dtype. Returns (out, lse).

    sink_logits (heads_q,): attention sinks, differentiable too: one more score column (logit
    sink_h, after scale / softcap / ALiBi / mask, not itself scaled) with a zero value row. A row
    that sees no key keeps the sink column alone: P = 1 there, out 0, lse = sink_h."""
    import torch

    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    scale = d**-0.5 if softmax_scale is None else softmax_scale
    keep, shift = visible(sq, sk, causal, causal_align, window, sink_tokens)
    keep = torch.from_numpy(keep).to(q.device)
    qh = q.transpose(1, 2)
    kh = k.transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    vh = v.transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    s = scale * (qh @ kh.transpose(-1, -2))
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    if alibi_slopes is not None:
        dist = torch.from_numpy(np.abs(np.arange(sq)[:, None] + shift - np.arange(sk)[None, :]))
        slopes = alibi_slopes.to(s.dtype)
        slopes = slopes.expand(b, hq) if slopes.dim() == 1 else slopes
        s = s - slopes[:, :, None, None] * dist.to(s.device, s.dtype)
    s = s.masked_fill(~keep, float("-inf"))
    if sink_logits is not None:
        s = torch.cat([s, sink_logits.to(s.dtype).view(1, hq, 1, 1).expand(b, hq, sq, 1)], dim=-1)
        vh = torch.cat([vh, vh.new_zeros(b, hq, 1, d)], dim=-2)  # the sink's value: zero
        return (torch.softmax(s, dim=-1) @ vh).transpose(1, 2), torch.logsumexp(s, dim=-1)
    # A row with no visible key would give NaN (softmax of all -inf) and NaN gradients; flashlab's
    # contract is out 0, LSE -inf, gradients 0. So such rows get finite dummy scores, then P = 0.
    has_key = keep.any(dim=-1, keepdim=True)
    s = torch.where(has_key, s, torch.zeros_like(s))
    lse = torch.logsumexp(s, dim=-1).masked_fill(~has_key[..., 0], float("-inf"))
    p = torch.softmax(s, dim=-1) * has_key
    out = (p @ vh).transpose(1, 2)
    return out, lse


# Error floors in units of the tensor's scale (max |exact|): the part of the error a correct
# implementation makes that the dtype-rounding baseline does not show (fp32 arithmetic, and
# outputs whose baseline happens to be tiny). Values as in tests/test_cpu_flash.cpp.
FLOOR = {"float32": 2e-5, "float16": 2e-4, "bfloat16": 1e-3}


def check_close(name, got, exact, baseline, dtype_name, factor=2.0, scale=None):
    """|got - exact| <= factor * |baseline - exact| + floor, in max norm; NaN never passes.

    `baseline` is what an implementation of the same precision gets (exact rounded to the dtype,
    or a low-precision reference); all three are float64 NumPy arrays. The floor is
    FLOOR[dtype_name] times the larger of max |exact| and `scale` (the size of the summed terms)."""
    got, exact, baseline = (np.asarray(x, dtype=np.float64) for x in (got, exact, baseline))
    assert got.shape == exact.shape, f"{name}: shape {got.shape} != {exact.shape}"
    finite = np.isfinite(exact)
    # -inf LSE rows must match exactly; everything else must be finite.
    assert np.array_equal(np.isfinite(got), finite), f"{name}: non-finite values differ from the reference"
    assert np.all(got[~finite] == exact[~finite]), f"{name}: infinite values differ"
    if not finite.any():
        return
    g, e, bl = got[finite], exact[finite], baseline[finite]
    err = np.abs(g - e).max()
    base = np.abs(bl - e).max()
    unit = max(np.abs(e).max(), scale or 0.0, 1e-30) * FLOOR[dtype_name]
    tol = factor * base + unit
    assert err <= tol, f"{name}: max error {err:.3e} > tol {tol:.3e} (baseline {base:.3e}, floor {unit:.3e})"


def torch_term_scales(q, k, v, dout, softmax_scale=None):
    """numpy_attention's "scale" entries for torch tensors (any device; computed in float64)."""
    q, k, v, dout = (x.detach().double() for x in (q, k, v, dout))
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
    vh = v.transpose(1, 2).repeat_interleave(q.shape[2] // k.shape[2], dim=1)
    dp = (dout.transpose(1, 2) @ vh.transpose(-1, -2)).abs().max().item()
    return {"out": v.abs().max().item(), "dq": scale * dp * k.abs().max().item(),
            "dk": scale * dp * q.abs().max().item(), "dv": dout.abs().max().item()}  # fmt: skip


def to_numpy(t):
    """float64 NumPy copy of a torch tensor (any dtype, any device)."""
    return t.detach().double().cpu().numpy()
