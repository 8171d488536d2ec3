"""The KV-cache path as torch custom ops (flashlab::kvcache_attention / kvcache_attention_out /
kvcache_combine), flashlab.torch.attention_with_kvcache / attention_combine and KVCacheDecoder,
on CPU tensors, against test_kvcache.py's float64 oracle (NaN-poisoned unfilled slots and unused
pages: they must not leak). Skipped without torch."""

import numpy as np
import pytest

import flashlab

torch = pytest.importorskip("torch")
import flashlab.torch as fl  # noqa: E402
from test_kvcache import TOL, build, check, combine_reference, reference, rng_for  # noqa: E402


def _t(x):
    return None if x is None else torch.from_numpy(np.ascontiguousarray(x))


def _want(P, **opts):
    return reference(P["q"], P["k_cache"], P["v_cache"], P["seqlens"], P["cache"], k=P["k"], v=P["v"], cos=P["cos"],
                     sin=P["sin"], leftpad=P["leftpad"], dtype=P["dtype"], **opts)  # fmt: skip


def _side(P):
    """The problem's side tensors (cache_batch_idx / block_table / cache_leftpad, page_layout)."""
    return {kk: (vv if kk == "page_layout" else _t(vv)) for kk, vv in P["kw"].items()}


def _check_caches(P, kc, vc, want_kc, want_vc):
    got_kc = kc.numpy()
    if P["cos"] is None:
        np.testing.assert_array_equal(got_kc, want_kc)
    else:
        np.testing.assert_array_equal(np.isnan(got_kc), np.isnan(want_kc))
        np.testing.assert_allclose(np.nan_to_num(got_kc), np.nan_to_num(want_kc), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(vc.numpy(), want_vc)  # NaN == NaN here: the poison stays put


CASES = [("contiguous", None), ("NHD", 1), ("NHD", 3), ("NHD", 16), ("HND", 3)]


@pytest.mark.parametrize("layout,page_size", CASES)
@pytest.mark.parametrize("sq", [1, 4])
@pytest.mark.parametrize("append", [False, True])
def test_op_matches_reference(layout, page_size, sq, append):
    """Contiguous (rows permuted by cache_batch_idx) and paged caches, GQA 4:1, decode and
    seqlen_q 4, with and without an in-place append; cache_seqlens is read, never written."""
    P = build(rng_for(f"op{layout}{page_size}{sq}{append}"), sq=sq, t_new=sq if append else 0,
              seqlens=(5, 0, 21) if append else (5, 4, 21),
              capacity=40, layout=layout, page_size=page_size or 4)  # fmt: skip
    want_out, want_lse, want_kc, want_vc = _want(P, causal=True)
    kc, vc, seqlens = _t(P["k_cache"].copy()), _t(P["v_cache"].copy()), _t(P["seqlens"])
    out, lse = fl.attention_with_kvcache(_t(P["q"]), kc, vc, seqlens, k=_t(P["k"]), v=_t(P["v"]), causal=True,
                                         **_side(P))  # fmt: skip
    assert out.dtype == torch.float32 and out.shape == P["q"].shape and lse.shape == (3, 8, sq)
    check("out", out.numpy(), want_out, TOL[np.float32])
    check("lse", lse.numpy(), want_lse, TOL[np.float32])
    _check_caches(P, kc, vc, want_kc, want_vc)
    np.testing.assert_array_equal(seqlens.numpy(), P["seqlens"])


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "NHD"])
def test_op_rotary_leftpad(interleaved, layout):
    P = build(rng_for(f"rot{interleaved}{layout}"), sq=2, t_new=2, seqlens=(7, 2, 13), leftpad=(3, 0, 1),
              capacity=24, layout=layout, page_size=3, rotary_dim=8)  # fmt: skip
    want_out, want_lse, want_kc, want_vc = _want(P, causal=True, interleaved=interleaved)
    kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
    out, lse = fl.attention_with_kvcache(
        _t(P["q"]), kc, vc, _t(P["seqlens"]), k=_t(P["k"]), v=_t(P["v"]), rotary_cos=_t(P["cos"]),
        rotary_sin=_t(P["sin"]), rotary_interleaved=interleaved, causal=True, **_side(P))  # fmt: skip
    check("out", out.numpy(), want_out, TOL[np.float32])
    check("lse", lse.numpy(), want_lse, TOL[np.float32])
    _check_caches(P, kc, vc, want_kc, want_vc)


@pytest.mark.parametrize("splits", [dict(num_splits=1), dict(num_splits=3), dict(split_size=4)])
def test_op_splits_window_softcap_alibi(splits):
    rng = rng_for(f"splits{splits}")
    P = build(rng, sq=4, t_new=1, seqlens=(9, 3, 30), capacity=40, layout="NHD", page_size=16)
    alibi = rng.uniform(0.05, 0.5, (8,)).astype(np.float32)
    want_out, want_lse, _, _ = _want(P, causal=True, window=(6, 0), softcap=2.5, alibi=alibi, scale=0.4)
    out, lse = fl.attention_with_kvcache(
        _t(P["q"]), _t(P["k_cache"].copy()), _t(P["v_cache"].copy()), _t(P["seqlens"]).long(), k=_t(P["k"]),
        v=_t(P["v"]), causal=True, window_size=(6, 0), softcap=2.5, alibi_slopes=_t(alibi), softmax_scale=0.4,
        **splits, **_side(P))  # fmt: skip
    check("out", out.numpy(), want_out, TOL[np.float32])
    check("lse", lse.numpy(), want_lse, TOL[np.float32])


def test_combine_ops():
    rng = rng_for("combine-ops")
    op = rng.standard_normal((3, 2, 2, 4, 8)).astype(np.float32)
    lp = rng.standard_normal((3, 2, 4, 2)).astype(np.float32)
    lp[:, 0, 1, 0] = -np.inf  # a row with every split empty: out 0, lse -inf
    want_out, want_lse = combine_reference(op, lp)
    out, lse = fl.attention_combine(_t(op), _t(lp))
    check("combine out", out.numpy(), want_out, 1e-6)
    check("combine lse", lse.numpy(), want_lse, 1e-6)
    dst = torch.empty(2, 2, 4, 8, dtype=torch.bfloat16)
    res, _ = fl.attention_combine(_t(op), _t(lp), out=dst)
    assert res is dst
    torch.testing.assert_close(dst.float(), out, rtol=1e-2, atol=1e-2)


def test_torch_compile_fullgraph():
    """torch.compile(fullgraph=True) traces the ops through their fake kernels; the in-place
    append reaches the caller's cache (functionalization copies it back)."""
    P = build(rng_for("compile"), sq=1, t_new=1, seqlens=(5, 0, 9), capacity=16, layout="NHD", page_size=3)
    want_out, want_lse, want_kc, want_vc = _want(P, causal=True)
    side = _side(P)

    def step(q, kc, vc, seqlens, k, v, block_table):
        out, lse = fl.attention_with_kvcache(q, kc, vc, seqlens, k=k, v=v, block_table=block_table, causal=True)
        merged, _ = fl.attention_combine(out.unsqueeze(0), lse.unsqueeze(0))
        return merged * 1.0, lse

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
    out, lse = compiled(_t(P["q"]), kc, vc, _t(P["seqlens"]), _t(P["k"]), _t(P["v"]), side["block_table"])
    check("compiled out", out.numpy(), want_out, TOL[np.float32])
    check("compiled lse", lse.numpy(), want_lse, TOL[np.float32])
    _check_caches(P, kc, vc, want_kc, want_vc)


def test_fake_kernels_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 3, 8, 64, dtype=torch.bfloat16)
        kc = torch.empty(5, 16, 2, 64, dtype=torch.bfloat16)
        out, lse = torch.ops.flashlab.kvcache_attention(
            q, kc, kc.clone(), torch.zeros(2, dtype=torch.int32), None, None, None, None, False, None, None,
            torch.zeros(2, 3, dtype=torch.int32), "NHD", None, True, -1, -1, 0.0, None, 0, 0, "auto")  # fmt: skip
        assert out.shape == q.shape and out.dtype == q.dtype
        assert lse.shape == (2, 8, 3) and lse.dtype == torch.float32
        o, l_ = torch.ops.flashlab.kvcache_combine(torch.empty(4, 2, 3, 8, 64), torch.empty(4, 2, 8, 3), torch.float16)
        assert o.shape == (2, 3, 8, 64) and o.dtype == torch.float16 and l_.shape == (2, 8, 3)


@pytest.mark.parametrize("page_size", [None, 16])
def test_decoder_plan_run(page_size):
    """run() writes into the plan's buffers, twice gives identical bits (the append rewrites the
    same slots: cache_seqlens is not advanced), and matches the reference."""
    layout = "contiguous" if page_size is None else "NHD"
    P = build(rng_for(f"decoder{page_size}"), sq=1, t_new=1, seqlens=(5, 0, 21), capacity=40, layout=layout,
              page_size=page_size or 4, permute_rows=False)  # fmt: skip
    want_out, want_lse, want_kc, want_vc = _want(P, causal=True)
    kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
    dec = fl.KVCacheDecoder().plan(3, kc.shape[1] if page_size is None else P["kw"]["block_table"].shape[1] * 16,
                                   8, 2, 16, torch.float32, "cpu", seqlen_new=1, page_size=page_size, causal=True,
                                   num_splits=2)  # fmt: skip
    assert dec.workspace_bytes == 0  # the CPU needs none
    args = (_t(P["q"]), kc, vc, _t(P["seqlens"]), _t(P["kw"].get("block_table")))
    out, lse = dec.run(*args, k=_t(P["k"]), v=_t(P["v"]))
    assert out is dec.out and lse is dec.lse
    first_out, first_lse = out.clone(), lse.clone()
    out2, lse2 = dec.run(*args, k=_t(P["k"]), v=_t(P["v"]))
    assert out2.data_ptr() == first_out.data_ptr() or out2 is dec.out
    assert torch.equal(out2, first_out) and torch.equal(lse2, first_lse)
    check("decoder out", out.numpy(), want_out, TOL[np.float32])
    check("decoder lse", lse.numpy(), want_lse, TOL[np.float32])
    _check_caches(P, kc, vc, want_kc, want_vc)
    mine = torch.empty_like(out)
    res, _ = dec.run(*args, k=_t(P["k"]), v=_t(P["v"]), out=mine)
    assert res is mine and torch.equal(mine, first_out)
    with pytest.raises(flashlab.FlashlabError, match="does not match the plan"):
        dec.run(_t(P["q"])[:2], *args[1:], k=_t(P["k"]), v=_t(P["v"]))
    with pytest.raises(flashlab.FlashlabError, match="seqlen_new = 1"):
        dec.run(*args)


def test_errors_write_nothing():
    """A page index out of range, mismatched dtypes, a too-short cache: a clear FlashlabError and
    the caches untouched (through the op, the decoder and flash_attn_with_kvcache)."""
    from flashlab.flash_attn_interface import flash_attn_with_kvcache

    P = build(rng_for("torch-errors"), sq=1, t_new=2, seqlens=(5, 0, 9), layout="NHD", page_size=3, capacity=12)
    bad = P["kw"]["block_table"].copy()
    bad[2, 1] = P["k_cache"].shape[0]
    kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())

    def untouched():
        np.testing.assert_array_equal(kc.numpy(), P["k_cache"])
        np.testing.assert_array_equal(vc.numpy(), P["v_cache"])

    with pytest.raises(flashlab.FlashlabError, match=r"block_table\[2\]\[1\] \(\d+\) out of range"):
        fl.attention_with_kvcache(_t(P["q"]), kc, vc, _t(P["seqlens"]), k=_t(P["k"]), v=_t(P["v"]),
                                  block_table=_t(bad))  # fmt: skip
    untouched()
    with pytest.raises(flashlab.FlashlabError, match="must have k_cache's dtype"):
        fl.attention_with_kvcache(_t(P["q"]), kc, vc, _t(P["seqlens"]), k=_t(P["k"]).half(), v=_t(P["v"]),
                                  block_table=_t(P["kw"]["block_table"]))  # fmt: skip
    untouched()
    with pytest.raises(flashlab.FlashlabError, match="must equal dtype"):
        flash_attn_with_kvcache(_t(P["q"]).half(), kc, vc, _t(P["k"]), _t(P["v"]), cache_seqlens=_t(P["seqlens"]),
                                page_table=_t(P["kw"]["block_table"]))  # fmt: skip
    untouched()
    dec = fl.KVCacheDecoder().plan(3, 12, 8, 2, 16, torch.float32, "cpu", seqlen_new=2, page_size=3)
    with pytest.raises(flashlab.FlashlabError, match="out of range"):
        dec.run(_t(P["q"]), kc, vc, _t(P["seqlens"]), _t(bad), k=_t(P["k"]), v=_t(P["v"]))
    untouched()
    with pytest.raises(TypeError, match="cache_seqlens must hold integers"):
        fl.attention_with_kvcache(_t(P["q"]), kc, vc, _t(P["seqlens"]).float())
    with pytest.raises(flashlab.UnsupportedError, match="qv"):
        flash_attn_with_kvcache(_t(P["q"]), kc, vc, qv=_t(P["q"]))


def test_flash_attn_interface_numpy_and_page_table():
    """flash_attn_with_kvcache / flash_attn_combine keep taking NumPy arrays (NumPy out), and the
    flash-attn 3 spelling page_table= equals block_table=."""
    from flashlab.flash_attn_interface import flash_attn_combine, flash_attn_with_kvcache

    P = build(rng_for("fa-numpy"), sq=1, t_new=0, seqlens=(5, 2, 9), layout="NHD", page_size=3, capacity=12)
    want_out, want_lse, _, _ = _want(P)
    out, lse = flash_attn_with_kvcache(P["q"], P["k_cache"], P["v_cache"], cache_seqlens=P["seqlens"],
                                       block_table=P["kw"]["block_table"], return_softmax_lse=True)  # fmt: skip
    assert isinstance(out, np.ndarray)
    check("numpy out", out, want_out, TOL[np.float32])
    check("numpy lse", lse, want_lse, TOL[np.float32])
    t_out = flash_attn_with_kvcache(_t(P["q"]), _t(P["k_cache"]), _t(P["v_cache"]), cache_seqlens=_t(P["seqlens"]),
                                    page_table=_t(P["kw"]["block_table"]))  # fmt: skip
    check("page_table out", t_out.numpy(), want_out, TOL[np.float32])
    m_out, m_lse = flash_attn_combine(out[None], lse[None])
    check("numpy combine", m_out, want_out, TOL[np.float32])


def test_opcheck():
    """torch.library.opcheck: the schemas (the caches declared mutated), fake kernels, AOT dispatch.
    The append rewrites the same slots on every call (cache_seqlens is not advanced), so the
    repeated calls opcheck makes see the same inputs."""
    P = build(rng_for("opcheck"), sq=2, t_new=2, seqlens=(5, 0, 9), capacity=16, layout="NHD", page_size=3)
    args = (_t(P["q"]), _t(P["k_cache"].copy()), _t(P["v_cache"].copy()), _t(P["seqlens"]), _t(P["k"]), _t(P["v"]),
            None, None, False, None, None, _t(P["kw"]["block_table"]), "NHD", None, True, -1, -1, 0.0, None, 2, 0,
            "auto")  # fmt: skip
    torch.library.opcheck(torch.ops.flashlab.kvcache_attention.default, args)
    out, lse = torch.ops.flashlab.kvcache_attention(*args)
    torch.library.opcheck(torch.ops.flashlab.kvcache_attention_out.default,
                          args + (torch.empty_like(out), torch.empty_like(lse), None))  # fmt: skip
    parts = (torch.stack([out, out]), torch.stack([lse, lse]))
    torch.library.opcheck(torch.ops.flashlab.kvcache_combine.default, parts + (None,))
    torch.library.opcheck(torch.ops.flashlab.kvcache_combine_out.default,
                          parts + (torch.empty_like(out), torch.empty_like(lse)))  # fmt: skip
