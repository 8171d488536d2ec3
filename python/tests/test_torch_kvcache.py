"""The KV-cache path as torch custom ops (flashlab::kvcache_attention / kvcache_attention_out /
kvcache_combine), flashlab.torch.attention_with_kvcache / attention_combine and KVCacheDecoder,
on CPU tensors, against test_kvcache.py's float64 oracle (NaN-poisoned unfilled slots and unused
pages: they must not leak). Skipped without torch."""

import numpy as np
import pytest

import flashlab

torch = pytest.importorskip("torch")
import flashlab.torch as fl  # noqa: E402
from test_kvcache import TOL, build, check, combine_reference, reference, rng_for, sink_logits  # noqa: E402
from test_torch import _PassThrough  # noqa: E402  (a dispatch mode that only forwards)


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


@pytest.mark.parametrize("layout,page_size", [("contiguous", None), ("NHD", 3), ("HND", 16)])
@pytest.mark.parametrize("splits", [dict(num_splits=1), dict(num_splits=3)])
@pytest.mark.parametrize("append", [False, True])
def test_op_sinks(layout, page_size, splits, append):
    """sink_logits through flashlab::kvcache_attention: GQA 4:1, contiguous and paged caches,
    num_splits 1 and 3; without an append a sequence with cache length 0 gets out 0 and
    lse = sink_h (head 2's sink is -inf: no sink, lse -inf). Sinks given in float64 with a step
    are converted (fp32, contiguous)."""
    rng = rng_for(f"op-sinks{layout}{page_size}{splits}{append}")
    P = build(rng, sq=2, t_new=2 if append else 0, seqlens=(9, 0, 21), capacity=32, layout=layout,
              page_size=page_size or 4)  # fmt: skip
    sinks = sink_logits(rng)
    want_out, want_lse, want_kc, want_vc = _want(P, causal=append, sinks=sinks)
    kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
    strided = torch.from_numpy(np.repeat(sinks.astype(np.float64), 2))[::2]
    out, lse = fl.attention_with_kvcache(_t(P["q"]), kc, vc, _t(P["seqlens"]), k=_t(P["k"]), v=_t(P["v"]),
                                         causal=append, sink_logits=strided, **splits, **_side(P))  # fmt: skip
    check("out", out.numpy(), want_out, TOL[np.float32])
    check("lse", lse.numpy(), want_lse, TOL[np.float32])
    _check_caches(P, kc, vc, want_kc, want_vc)
    if not append:
        assert (out[1] == 0).all()
        check("empty rows' lse", lse[1].numpy(), np.broadcast_to(sinks[:, None], (8, 2)).astype(np.float64), 1e-6)


def test_op_sinks_bf16_and_errors():
    """bf16 with sinks against the reference on the rounded inputs; a sink vector of the wrong
    shape or holding NaN is refused and the cache (with an append) is not written."""
    rng = rng_for("op-sinks-bf16")
    P = build(rng, sq=1, t_new=1, seqlens=(9, 0, 21), capacity=32, layout="NHD", page_size=4)
    for name in ("q", "k_cache", "v_cache", "k", "v"):
        P[name] = _t(P[name]).to(torch.bfloat16).float().numpy()
    sinks = sink_logits(rng)
    want_out, want_lse, _, _ = _want(P, causal=True, sinks=sinks)
    bf = {name: _t(P[name]).to(torch.bfloat16) for name in ("q", "k_cache", "v_cache", "k", "v")}
    out, lse = fl.attention_with_kvcache(bf["q"], bf["k_cache"], bf["v_cache"], _t(P["seqlens"]), k=bf["k"],
                                         v=bf["v"], causal=True, sink_logits=_t(sinks), num_splits=3,
                                         **_side(P))  # fmt: skip
    assert out.dtype == torch.bfloat16
    check("bf16 out", out.float().numpy(), want_out, 3e-2)
    check("bf16 lse", lse.numpy(), want_lse, 3e-2)
    kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
    nan = torch.zeros(8)
    nan[1] = float("nan")
    for bad, match in ((torch.zeros(2), r"sink_logits.shape \(2,\) must be \(heads_q,\)"),
                       (nan, r"sink_logits\[1\] \(nan\) must be finite or -inf")):  # fmt: skip
        with pytest.raises(flashlab.FlashlabError, match=match):
            fl.attention_with_kvcache(_t(P["q"]), kc, vc, _t(P["seqlens"]), k=_t(P["k"]), v=_t(P["v"]),
                                      sink_logits=bad, **_side(P))  # fmt: skip
        np.testing.assert_array_equal(kc.numpy(), P["k_cache"])
        np.testing.assert_array_equal(vc.numpy(), P["v_cache"])


@pytest.mark.parametrize("check_device_data", [False, True])
def test_bad_side_tensors_write_nothing(check_device_data):
    """On CPU tensors the int32 side tensors are always checked (check_device_data changes nothing
    there): cache_seqlens past the capacity, a page index out of range, an append that does not
    fit raise FlashlabError (code invalid_argument) and write nothing, through the function and a
    KVCacheDecoder planned with the flag."""
    P = build(rng_for("torch-side"), sq=1, t_new=2, seqlens=(5, 0, 9), layout="NHD", page_size=3, capacity=12)
    kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
    table = P["kw"]["block_table"]
    bad = table.copy()
    bad[1, 0] = 1000
    cases = [
        (np.array([5, 13, 9], np.int32), table, r"cache_seqlens\[1\] \(13\) must be in \[0, capacity \(12\)\]"),
        (np.array([5, 0, 11], np.int32), table, r"cache too short for the append"),
        (P["seqlens"], bad, r"block_table\[1\]\[0\] \(1000\) out of range"),
    ]
    dec = fl.KVCacheDecoder().plan(3, 12, 8, 2, 16, torch.float32, "cpu", seqlen_new=2, page_size=3,
                                   check_device_data=check_device_data)  # fmt: skip
    for seqlens, bt, match in cases:
        with pytest.raises(flashlab.FlashlabError, match=match) as e:
            fl.attention_with_kvcache(_t(P["q"]), kc, vc, _t(seqlens), k=_t(P["k"]), v=_t(P["v"]), block_table=_t(bt),
                                      check_device_data=check_device_data)  # fmt: skip
        assert not isinstance(e.value, flashlab.UnsupportedError) and e.value.code == "invalid_argument"
        with pytest.raises(flashlab.FlashlabError, match=match):
            dec.run(_t(P["q"]), kc, vc, _t(seqlens), _t(bt), k=_t(P["k"]), v=_t(P["v"]))
        np.testing.assert_array_equal(kc.numpy(), P["k_cache"])
        np.testing.assert_array_equal(vc.numpy(), P["v_cache"])
    # valid data: the flag changes nothing
    want_out, want_lse, want_kc, want_vc = _want(P)
    out, lse = dec.run(_t(P["q"]), kc, vc, _t(P["seqlens"]), _t(table), k=_t(P["k"]), v=_t(P["v"]))
    check("out", out.numpy(), want_out, TOL[np.float32])
    check("lse", lse.numpy(), want_lse, TOL[np.float32])
    _check_caches(P, kc, vc, want_kc, want_vc)


def test_eager_calls_skip_the_dispatcher_and_match_the_ops(monkeypatch):
    """Eager attention_with_kvcache / KVCacheDecoder.run call the ops' Python kernels directly
    (host time: flashlab.torch._eager); under a dispatch mode they go through flashlab::
    kvcache_attention(_out). Same bits, same appended caches, either way."""
    import flashlab._torch_kvcache as tk

    calls = {"op": 0, "op_out": 0}

    def counting(name, op):
        def call(*args):
            calls[name] += 1
            return op(*args)
        return call

    monkeypatch.setattr(tk, "_KV", counting("op", tk._KV))
    monkeypatch.setattr(tk, "_KV_OUT", counting("op_out", tk._KV_OUT))
    P = build(rng_for("eager-kv"), sq=2, t_new=2, seqlens=(5, 0, 9), capacity=16, layout="NHD", page_size=3)
    side = _side(P)
    dec = fl.KVCacheDecoder().plan(3, side["block_table"].shape[1] * 3, 8, 2, 16,
                                   torch.float32, "cpu", seqlen_q=2, seqlen_new=2, page_size=3, causal=True)

    def run():
        kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
        out, lse = fl.attention_with_kvcache(_t(P["q"]), kc, vc, _t(P["seqlens"]), k=_t(P["k"]), v=_t(P["v"]),
                                             causal=True, **side)  # fmt: skip
        kc2, vc2 = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
        out2, lse2 = dec.run(_t(P["q"]), kc2, vc2, _t(P["seqlens"]), side["block_table"], k=_t(P["k"]), v=_t(P["v"]))
        return [out, lse, kc, vc, out2.clone(), lse2.clone(), kc2, vc2]

    eager = run()
    assert calls == {"op": 0, "op_out": 0}
    with _PassThrough():
        through_ops = run()
    assert calls == {"op": 1, "op_out": 1}
    for got, want in zip(eager, through_ops):
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    want_out, want_lse, want_kc, want_vc = _want(P, causal=True)
    check("eager out", eager[0].numpy(), want_out, TOL[np.float32])
    check("eager lse", eager[1].numpy(), want_lse, TOL[np.float32])
    _check_caches(P, eager[2], eager[3], want_kc, want_vc)


@pytest.mark.parametrize("table_dtype", [torch.bfloat16, torch.float16])
def test_sixteen_bit_rotary_tables(table_dtype):
    """bf16 / fp16 rotary tables are read as they are (no conversion), as their exact fp32 values:
    the same bits as fp32 tables holding those values, from the op and from the decoder."""
    P = build(rng_for("tables16"), sq=2, t_new=2, seqlens=(5, 0, 9), capacity=16, layout="NHD", page_size=3,
              rotary_dim=8)  # fmt: skip
    side = _side(P)
    cos16, sin16 = (_t(P[x]).to(table_dtype) for x in ("cos", "sin"))
    results = []
    for cos, sin in ((cos16.float(), sin16.float()), (cos16, sin16)):
        kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
        out, lse = fl.attention_with_kvcache(_t(P["q"]), kc, vc, _t(P["seqlens"]), k=_t(P["k"]), v=_t(P["v"]),
                                             rotary_cos=cos, rotary_sin=sin, causal=True, **side)  # fmt: skip
        results.append([out, lse, kc, vc])
    for got, want in zip(results[1], results[0]):
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    import flashlab._torch_kvcache as tk

    assert all(t.dtype == table_dtype for t in tk._tables(cos16, sin16))  # passed on, not converted
    # mixed table types: both converted to fp32, the same answer
    kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
    out, _ = fl.attention_with_kvcache(_t(P["q"]), kc, vc, _t(P["seqlens"]), k=_t(P["k"]), v=_t(P["v"]),
                                       rotary_cos=cos16, rotary_sin=sin16.float(), causal=True, **side)  # fmt: skip
    torch.testing.assert_close(out, results[0][0], rtol=0, atol=0, equal_nan=True)


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
            torch.zeros(2, 3, dtype=torch.int32), "NHD", None, True, -1, -1, 0.0, None, None, 0, 0, False,
            "auto")  # fmt: skip
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


@pytest.mark.parametrize("page_size", [None, 3])
def test_decoder_sinks(page_size):
    """KVCacheDecoder planned with sinks=True takes sink_logits in every run (and must: given
    exactly when planned); GQA 4:1, num_splits 3, a sequence with an empty cache before the append."""
    layout = "contiguous" if page_size is None else "HND"
    rng = rng_for(f"decoder-sinks{page_size}")
    P = build(rng, sq=1, t_new=1, seqlens=(5, 0, 21), capacity=24, layout=layout, page_size=page_size or 4,
              permute_rows=False)  # fmt: skip
    sinks = sink_logits(rng)
    want_out, want_lse, want_kc, want_vc = _want(P, causal=True, sinks=sinks)
    kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
    cap = kc.shape[1] if page_size is None else P["kw"]["block_table"].shape[1] * page_size
    opts = dict(seqlen_new=1, page_size=page_size, page_layout="NHD" if page_size is None else "HND")
    dec = fl.KVCacheDecoder().plan(3, cap, 8, 2, 16, torch.float32, "cpu", causal=True, num_splits=3, sinks=True,
                                   **opts)  # fmt: skip
    args = (_t(P["q"]), kc, vc, _t(P["seqlens"]), _t(P["kw"].get("block_table")))
    out, lse = dec.run(*args, k=_t(P["k"]), v=_t(P["v"]), sink_logits=_t(sinks))
    check("decoder sinks out", out.numpy(), want_out, TOL[np.float32])
    check("decoder sinks lse", lse.numpy(), want_lse, TOL[np.float32])
    _check_caches(P, kc, vc, want_kc, want_vc)
    with pytest.raises(flashlab.FlashlabError, match=r"sink_logits must be given exactly when planned"):
        dec.run(*args, k=_t(P["k"]), v=_t(P["v"]))
    plain = fl.KVCacheDecoder().plan(3, cap, 8, 2, 16, torch.float32, "cpu", **opts)
    with pytest.raises(flashlab.FlashlabError, match=r"sink_logits must be given exactly when planned"):
        plain.run(*args, k=_t(P["k"]), v=_t(P["v"]), sink_logits=_t(sinks))


@pytest.mark.parametrize("layout,page_size", [("contiguous", None), ("NHD", 3), ("HND", 16)])
def test_op_and_decoder_sink_tokens(layout, page_size):
    """StreamingLLM sink tokens through flashlab::kvcache_attention and KVCacheDecoder: the first
    keys after leftpad stay visible left of the window (sequence 1 keeps fewer keys than sinks);
    with the append, GQA 4:1, num_splits 3."""
    P = build(rng_for(f"op-sinktok{layout}{page_size}"), sq=1, t_new=1, seqlens=(20, 3, 30), leftpad=(4, 1, 0),
              capacity=40, layout=layout, page_size=page_size or 4, permute_rows=False)  # fmt: skip
    want_out, want_lse, want_kc, want_vc = _want(P, causal=True, window=(3, 0), sink_tokens=5)
    kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
    out, lse = fl.attention_with_kvcache(_t(P["q"]), kc, vc, _t(P["seqlens"]), k=_t(P["k"]), v=_t(P["v"]),
                                         causal=True, window_size=(3, 0), num_splits=3, sink_tokens=5,
                                         **_side(P))  # fmt: skip
    check("op sink tokens out", out.numpy(), want_out, TOL[np.float32])
    check("op sink tokens lse", lse.numpy(), want_lse, TOL[np.float32])
    _check_caches(P, kc, vc, want_kc, want_vc)
    kc, vc = _t(P["k_cache"].copy()), _t(P["v_cache"].copy())
    cap = kc.shape[1] if page_size is None else P["kw"]["block_table"].shape[1] * page_size
    opts = dict(seqlen_new=1, page_size=page_size, page_layout="NHD" if page_size is None else layout)
    dec = fl.KVCacheDecoder().plan(3, cap, 8, 2, 16, torch.float32, "cpu", causal=True, window_size=(3, 0),
                                   num_splits=3, sink_tokens=5, **opts)  # fmt: skip
    side = _side(P)
    out, lse = dec.run(_t(P["q"]), kc, vc, _t(P["seqlens"]), side.get("block_table"), k=_t(P["k"]), v=_t(P["v"]),
                       cache_leftpad=side["cache_leftpad"])  # fmt: skip
    check("decoder sink tokens out", out.numpy(), want_out, TOL[np.float32])
    check("decoder sink tokens lse", lse.numpy(), want_lse, TOL[np.float32])


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
            None, None, False, None, None, _t(P["kw"]["block_table"]), "NHD", None, True, -1, -1, 0.0, None, None, 2,
            0, False, "auto")  # fmt: skip
    torch.library.opcheck(torch.ops.flashlab.kvcache_attention.default, args)
    out, lse = torch.ops.flashlab.kvcache_attention(*args)
    torch.library.opcheck(torch.ops.flashlab.kvcache_attention_out.default,
                          args + (torch.empty_like(out), torch.empty_like(lse), None))  # fmt: skip
    # with sinks (the schema's Tensor? sink_logits) and check_device_data
    sinks = torch.linspace(-1.0, 2.0, 8)
    with_sinks = args[:19] + (sinks, 2, 0, True, "auto")
    torch.library.opcheck(torch.ops.flashlab.kvcache_attention.default, with_sinks)
    torch.library.opcheck(torch.ops.flashlab.kvcache_attention_out.default,
                          with_sinks + (torch.empty_like(out), torch.empty_like(lse), None))  # fmt: skip
    # with StreamingLLM sink tokens (the last argument, after the _out variant's buffers) left of a window
    with_sink_tokens = args[:15] + (1, -1) + args[17:]
    torch.library.opcheck(torch.ops.flashlab.kvcache_attention.default, with_sink_tokens + (2,))
    torch.library.opcheck(torch.ops.flashlab.kvcache_attention_out.default,
                          with_sink_tokens + (torch.empty_like(out), torch.empty_like(lse), None, 2))  # fmt: skip
    parts = (torch.stack([out, out]), torch.stack([lse, lse]))
    torch.library.opcheck(torch.ops.flashlab.kvcache_combine.default, parts + (None,))
    torch.library.opcheck(torch.ops.flashlab.kvcache_combine_out.default,
                          parts + (torch.empty_like(out), torch.empty_like(lse)))  # fmt: skip
