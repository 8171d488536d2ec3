"""The KV-cache ops on a CUDA GPU: against a float64 reference, CUDA-graph capture of
KVCacheDecoder.run() (replay equals eager bit for bit), and the replay's time beside eager.
Skipped without torch, a CUDA device, or a flashlab build with CUDA."""
import math
import time

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)
import flashlab.torch as ft  # noqa: E402


def _reference(q, k_cache, v_cache, seqlens, block_table=None, page_size=None):
    """float64 softmax(q k^T / sqrt(d)) v over each sequence's first seqlens[b] keys (GQA)."""
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
            s = q[b, :, h].double().cpu() @ k[:, h // group].T / math.sqrt(d)
            m = s.max(dim=-1, keepdim=True).values
            p = torch.exp(s - m)
            out[b, :, h] = (p @ v[:, h // group]) / p.sum(-1, keepdim=True)
            lse[b, h] = (m.squeeze(-1) + torch.log(p.sum(-1)))
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
