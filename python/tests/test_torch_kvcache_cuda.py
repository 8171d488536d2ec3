"""The KV-cache ops on a CUDA GPU: against a float64 reference (also with attention sinks),
CUDA-graph capture of KVCacheDecoder.run() (replay equals eager bit for bit), the replay's time
beside eager, and check_device_data (bad side tensors refused with nothing written; refused during
capture). Skipped without torch, a CUDA device, or a flashlab build with CUDA."""
import math
import time

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)
import flashlab  # noqa: E402
import flashlab.torch as ft  # noqa: E402


def _reference(q, k_cache, v_cache, seqlens, block_table=None, page_size=None, sinks=None):
    """float64 softmax(q k^T / sqrt(d)) v over each sequence's first seqlens[b] keys (GQA). With
    `sinks` (heads_q,): one more logit sink_h per row with no value; an empty sequence gets out 0
    and lse = sink_h (-inf without sinks)."""
    b_, sq, hq, d = q.shape
    out = torch.empty(q.shape, dtype=torch.float64)
    lse = torch.empty((b_, hq, sq), dtype=torch.float64)
    for b in range(b_):
        n = int(seqlens[b])
        if block_table is not None:
            pages = block_table[b].long().cpu()
            k = k_cache[pages].reshape(-1, k_cache.shape[2], d)[:n]
            v = v_cache[pages].reshape(-1, v_cache.shape[2], d)[:n]
        else:
            k, v = k_cache[b, :n], v_cache[b, :n]
        k = k.double().cpu()
        v = v.double().cpu()
        group = hq // k.shape[1]
        for h in range(hq):
            sink = -math.inf if sinks is None else float(sinks[h])
            if n == 0:
                out[b, :, h], lse[b, h] = 0.0, sink
                continue
            s = q[b, :, h].double().cpu() @ k[:, h // group].T / math.sqrt(d)
            m = s.max(dim=-1, keepdim=True).values.clamp(min=sink)
            p = torch.exp(s - m)
            den = p.sum(-1, keepdim=True) + torch.exp(sink - m)  # 0 for a sink of -inf
            out[b, :, h] = (p @ v[:, h // group]) / den
            lse[b, h] = m.squeeze(-1) + torch.log(den.squeeze(-1))
    return out, lse


def _problem(batch, heads_q, heads_kv, d, capacity, page_size, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    dev = "cuda"
    q = torch.randn((batch, 1, heads_q, d), generator=g).to(dev, torch.bfloat16)
    seqlens = torch.randint(1, capacity + 1, (batch,), generator=g, dtype=torch.int32).to(dev)
    if page_size is None:
        k = torch.randn((batch, capacity, heads_kv, d), generator=g).to(dev, torch.bfloat16)
        v = torch.randn((batch, capacity, heads_kv, d), generator=g).to(dev, torch.bfloat16)
        table = None
    else:
        pages = -(-capacity // page_size)
        k = torch.randn((batch * pages, page_size, heads_kv, d), generator=g).to(dev, torch.bfloat16)
        v = torch.randn((batch * pages, page_size, heads_kv, d), generator=g).to(dev, torch.bfloat16)
        table = torch.randperm(batch * pages, generator=g).to(torch.int32).view(batch, pages).to(dev)
    return q, k, v, seqlens, table


@pytest.mark.parametrize("page_size", [None, 1, 16])
def test_cuda_decode_matches_float64(page_size):
    q, k, v, seqlens, table = _problem(4, 8, 2, 128, 777, page_size, seed=11 + (page_size or 0))
    out, lse = ft.attention_with_kvcache(q, k, v, seqlens, block_table=table)
    ref, ref_lse = _reference(q, k, v, seqlens.cpu(), table, page_size)
    assert torch.isfinite(out.float()).all()
    err = (out.double().cpu() - ref).abs().max().item()
    assert err < 2e-2 * ref.abs().max().item(), err
    assert (lse.double().cpu() - ref_lse).abs().max().item() < 1e-3


@pytest.mark.parametrize("page_size", [None, 16])
def test_decoder_graph_replay_equals_eager(page_size):
    batch, hq, hk, d, cap = 8, 32, 8, 128, 4096
    q, k, v, seqlens, table = _problem(batch, hq, hk, d, cap, page_size, seed=5)
    dec = ft.KVCacheDecoder().plan(batch, cap, hq, hk, d, torch.bfloat16, "cuda", page_size=page_size)
    out, lse = dec.run(q, k, v, seqlens, block_table=table)
    eager = (out.clone(), lse.clone())
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on the capture stream, as torch recommends
        dec.run(q, k, v, seqlens, block_table=table)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dec.run(q, k, v, seqlens, block_table=table)
    dec.out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(dec.out, eager[0]) and torch.equal(dec.lse, eager[1])
    # New device data, same buffers: the replay reads it (nothing host-side was baked in).
    q.copy_(torch.randn_like(q.float()).to(q.dtype))
    seqlens.copy_(torch.randint(1, cap + 1, seqlens.shape, dtype=torch.int32, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    replay = (dec.out.clone(), dec.lse.clone())
    out2, lse2 = dec.run(q, k, v, seqlens, block_table=table)
    torch.cuda.synchronize()
    assert torch.equal(replay[0], out2) and torch.equal(replay[1], lse2)
    # Time: replay beside eager (printed; the target is within 2 %).
    def timed(fn, n=50):
        fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / n * 1e6
    t_eager = timed(lambda: dec.run(q, k, v, seqlens, block_table=table))
    t_graph = timed(graph.replay)
    print(f"\n[graph] B {batch} GQA {hq}/{hk} d {d} cap {cap} page {page_size}: eager {t_eager:.1f} us, "
          f"replay {t_graph:.1f} us, replay/eager {t_graph / t_eager:.3f}")


def _sinks(heads_q, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    s = torch.rand((heads_q,), generator=g) * 4 - 1  # around the rows' LSE, so the sinks matter
    s[2] = -math.inf  # no sink for this head
    s[5] = 6.0  # a large one: most of the weight
    return s.cuda()


@pytest.mark.parametrize("page_size", [None, 1, 16])
@pytest.mark.parametrize("num_splits", [1, 3, 0])
def test_cuda_sinks_match_float64(page_size, num_splits):
    """sink_logits on CUDA (bf16, GQA 8/2, hdim 128; sequence 1 has an empty cache) against the
    float64 reference, for one split (merge_and_store adds the sink), 3 splits and auto (the
    combine kernel adds it)."""
    q, k, v, seqlens, table = _problem(4, 8, 2, 128, 777, page_size, seed=21 + (page_size or 0))
    seqlens[1] = 0
    sinks = _sinks(8, seed=3)
    out, lse = ft.attention_with_kvcache(q, k, v, seqlens, block_table=table, sink_logits=sinks, num_splits=num_splits)
    ref, ref_lse = _reference(q, k, v, seqlens.cpu(), table, page_size, sinks=sinks.cpu())
    assert torch.isfinite(out.float()).all()
    err = (out.double().cpu() - ref).abs().max().item()
    assert err < 2e-2 * ref.abs().max().item(), err
    lse64 = lse.double().cpu()
    assert torch.equal(torch.isinf(lse64), torch.isinf(ref_lse))
    finite = torch.isfinite(ref_lse)
    assert (lse64[finite] - ref_lse[finite]).abs().max().item() < 1e-3
    assert (out[1] == 0).all()
    torch.testing.assert_close(lse[1].cpu(), sinks.cpu()[:, None], rtol=1e-6, atol=1e-6)
    # every sink -inf: no sink
    none, none_lse = ft.attention_with_kvcache(q, k, v, seqlens, block_table=table, num_splits=num_splits)
    neg, neg_lse = ft.attention_with_kvcache(q, k, v, seqlens, block_table=table, num_splits=num_splits,
                                             sink_logits=torch.full_like(sinks, -math.inf))  # fmt: skip
    torch.testing.assert_close(neg, none)
    torch.testing.assert_close(neg_lse, none_lse)


@pytest.mark.parametrize("page_size", [None, 16])
def test_decoder_sinks_graph_replay_equals_eager(page_size):
    batch, hq, hk, d, cap = 4, 32, 8, 128, 1024
    q, k, v, seqlens, table = _problem(batch, hq, hk, d, cap, page_size, seed=9)
    sinks = _sinks(hq, seed=4)
    dec = ft.KVCacheDecoder().plan(batch, cap, hq, hk, d, torch.bfloat16, "cuda", page_size=page_size, sinks=True,
                                   num_splits=3)  # fmt: skip
    out, lse = dec.run(q, k, v, seqlens, block_table=table, sink_logits=sinks)
    eager = (out.clone(), lse.clone())
    ref, ref_lse = _reference(q, k, v, seqlens.cpu(), table, page_size, sinks=sinks.cpu())
    assert (out.double().cpu() - ref).abs().max().item() < 2e-2 * ref.abs().max().item()
    assert (lse.double().cpu() - ref_lse).abs().max().item() < 1e-3
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        dec.run(q, k, v, seqlens, block_table=table, sink_logits=sinks)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dec.run(q, k, v, seqlens, block_table=table, sink_logits=sinks)
    dec.out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(dec.out, eager[0]) and torch.equal(dec.lse, eager[1])
    sinks.add_(0.5)  # new sinks on the device: the replay reads them
    graph.replay()
    torch.cuda.synchronize()
    replay = (dec.out.clone(), dec.lse.clone())
    out2, lse2 = dec.run(q, k, v, seqlens, block_table=table, sink_logits=sinks)
    torch.cuda.synchronize()
    assert torch.equal(replay[0], out2) and torch.equal(replay[1], lse2)
    assert not torch.equal(out2, eager[0])


@pytest.mark.parametrize("page_size", [None, 16])
def test_cuda_check_device_data(page_size):
    """check_device_data=True: cache_seqlens past the capacity, an append that does not fit, a page
    index out of range raise FlashlabError (invalid_argument) before anything is launched: the
    cache is untouched. Valid data: the same bits as without the flag. A decoder planned with it
    refuses CUDA-graph capture (the check synchronizes) and still runs eagerly afterwards."""
    cap = 64
    q, k, v, seqlens, table = _problem(3, 8, 2, 64, cap, page_size, seed=13)
    seqlens.fill_(10)
    k_new = torch.randn((3, 2, 2, 64), device="cuda").to(torch.bfloat16)
    v_new = torch.randn((3, 2, 2, 64), device="cuda").to(torch.bfloat16)
    k0, v0 = k.clone(), v.clone()
    bad_cases = [(torch.tensor([10, cap + 5, 10], dtype=torch.int32, device="cuda"), table,
                  r"cache_seqlens\[1\] \(69\) must be in \[0, capacity \(64\)\]"),
                 (torch.tensor([10, 10, cap - 1], dtype=torch.int32, device="cuda"), table,
                  r"cache too short for the append")]  # fmt: skip
    if page_size is not None:
        bad = table.clone()
        bad[2, 0] = table.numel() + 7
        bad_cases.append((seqlens, bad, r"block_table\[2\]\[0\] \(\d+\) out of range"))
    for sl, bt, match in bad_cases:
        with pytest.raises(flashlab.FlashlabError, match=match) as e:
            ft.attention_with_kvcache(q, k, v, sl, k=k_new, v=v_new, block_table=bt, check_device_data=True)
        assert not isinstance(e.value, flashlab.UnsupportedError) and e.value.code == "invalid_argument"
        torch.cuda.synchronize()
        assert torch.equal(k, k0) and torch.equal(v, v0)
    ka, va = k.clone(), v.clone()
    with_check = ft.attention_with_kvcache(q, k, v, seqlens, k=k_new, v=v_new, block_table=table,
                                           check_device_data=True)  # fmt: skip
    without = ft.attention_with_kvcache(q, ka, va, seqlens, k=k_new, v=v_new, block_table=table)
    torch.cuda.synchronize()
    assert torch.equal(with_check[0], without[0]) and torch.equal(with_check[1], without[1])
    assert torch.equal(k, ka) and torch.equal(v, va)
    # The decoder: planned with check_device_data, eager runs check; capture is refused.
    dec = ft.KVCacheDecoder().plan(3, cap, 8, 2, 64, torch.bfloat16, "cuda", page_size=page_size,
                                   check_device_data=True)  # fmt: skip
    with pytest.raises(flashlab.FlashlabError, match="must be in"):
        dec.run(q, k, v, bad_cases[0][0], block_table=table)
    out, lse = dec.run(q, k, v, seqlens, block_table=table)
    eager = out.clone()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(flashlab.FlashlabError, match="CUDA-graph capture"):
        with torch.cuda.graph(graph):
            dec.run(q, k, v, seqlens, block_table=table)
    out, _ = dec.run(q, k, v, seqlens, block_table=table)
    torch.cuda.synchronize()
    assert torch.equal(out, eager)
