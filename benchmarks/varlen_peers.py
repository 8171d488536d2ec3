"""benchmarks/varlen_peers.py — packed (varlen) attention, forward and backward, flashlab beside the
peers that take packed sequences, in one process on one GPU.

Implementations (each a row; one that does not import or refuses the call prints why):
  flashlab:auto        flashlab.torch.attention(cu_seqlens_q=..., impl="auto")  (cuda_sm90 on an H100/H200)
  flashlab:cuda_sm80   the same, impl="cuda_sm80"
  fa4                  flash_attn.cute.flash_attn_varlen_func (FlashAttention-4), where
                       ../shared/tools/prepare_fa4_peer.sh put it on the path
  sdpa_flash           SDPA's FlashAttention-2 kernel on a nested (jagged) tensor, one per batch
  sdpa_cudnn           SDPA's cuDNN kernel on the same nested tensor

Timing as python -m flashlab.bench (its Timer: L2 flushed between calls, CUDA events, median of the
reps that fit the budget); the backward is autograd.grad of a retained forward output. FLOPs are
flashlab.attention_flops per sequence, summed (the grid's count: the visible (query, key) pairs,
causal L(L+1)/2 of a length-L sequence; forward 4·pairs·heads·head_dim, backward 2.5× that).

usage: python benchmarks/varlen_peers.py [--hdims 64,128] [--mixes long,short] [--causal both]
                                         [--tokens 32768] [--budget-ms 150]
  long   sequences 8192, 4096, 2048, 1024, 512, 300, 1500, 7000 (24,872 tokens; --tokens ignored)
  short  sequences of 100-1,000 tokens (seeded) until --tokens
"""
import argparse
import random

LONG = [8192, 4096, 2048, 1024, 512, 300, 1500, 7000]


def lengths(mix, tokens, seed=1):
    if mix == "long":
        return list(LONG)
    rng, out = random.Random(seed), []
    while sum(out) < tokens:
        out.append(rng.randint(100, 1000))
    return out


def flops(lens, heads, hdim, causal, backward):
    """flashlab.attention_flops (the grid's mask-aware count) summed over the sequences."""
    from flashlab import attention_flops
    return sum(attention_flops(1, n, n, heads, heads, hdim, causal=causal)[1 if backward else 0] for n in lens)


def make_impls(torch):
    """name -> fn(q, k, v, cu, max_len, lens, causal) on packed (total, heads, dim) tensors, or a reason."""
    impls = {}
    try:
        import flashlab.torch as fl

        def flashlab_impl(impl):
            def run(q, k, v, cu, mx, lens, causal):
                return fl.attention(q, k, v, causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=mx,
                                    max_seqlen_k=mx, impl=impl)
            return run
        impls["flashlab:auto"] = flashlab_impl("auto")
        impls["flashlab:cuda_sm80"] = flashlab_impl("cuda_sm80")
    except Exception as e:  # noqa: BLE001
        impls["flashlab:auto"] = impls["flashlab:cuda_sm80"] = f"flashlab.torch not importable: {e}"
    try:
        from flash_attn.cute import flash_attn_varlen_func

        def fa4(q, k, v, cu, mx, lens, causal):
            out = flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=causal)
            return out[0] if isinstance(out, tuple) else out
        impls["fa4"] = fa4
    except Exception as e:  # noqa: BLE001
        impls["fa4"] = f"flash_attn.cute not importable ({type(e).__name__})"

    def sdpa(backend):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        kind = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]

        def run(q, k, v, cu, mx, lens, causal):
            offs = cu.to(torch.int64)
            nq, nk, nv = (torch.nested.nested_tensor_from_jagged(t, offs).transpose(1, 2) for t in (q, k, v))
            with sdpa_kernel(kind):
                o = torch.nn.functional.scaled_dot_product_attention(nq, nk, nv, is_causal=causal)
            return o.transpose(1, 2).values()
        return run
    impls["sdpa_flash"] = sdpa("flash")
    impls["sdpa_cudnn"] = sdpa("cudnn")
    return impls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hdims", default="64,128")
    ap.add_argument("--mixes", default="long,short")
    ap.add_argument("--causal", default="both", choices=["both", "0", "1"])
    ap.add_argument("--tokens", type=int, default=32768, help="tokens of the short mix")
    ap.add_argument("--width", type=int, default=2048, help="heads = width / head_dim")
    ap.add_argument("--budget-ms", type=float, default=150.0)
    args = ap.parse_args()
    import torch
    from flashlab.bench import Timer

    timer, impls = Timer(torch, args.budget_ms), make_impls(torch)
    causals = {"both": [False, True], "0": [False], "1": [True]}[args.causal]
    print(f"# {torch.cuda.get_device_name()}; bf16; TFLOP/s (ms); L2 flushed, median; ratio = flashlab:auto / best peer")
    print("| mix | hdim | causal | pass | " + " | ".join(impls) + " | ratio |")
    print("|---|---|---|---|" + "---|" * (len(impls) + 1))
    for mix in args.mixes.split(","):
        lens = lengths(mix, args.tokens)
        for hdim in (int(h) for h in args.hdims.split(",")):
            heads = args.width // hdim
            total, mx = sum(lens), max(lens)
            cu = torch.tensor([0] + [sum(lens[:i + 1]) for i in range(len(lens))], dtype=torch.int32, device="cuda")
            g = torch.Generator(device="cuda").manual_seed(hdim)
            q, k, v, do = (torch.randn(total, heads, hdim, device="cuda", dtype=torch.bfloat16, generator=g)
                           for _ in range(4))
            for t in (q, k, v):
                t.requires_grad_(True)
            for causal in causals:
                for ps in ("fwd", "bwd"):
                    cells, tf = [], {}
                    for name, fn in impls.items():
                        if isinstance(fn, str):
                            cells.append("–")
                            continue
                        out = None
                        try:
                            if ps == "fwd":
                                call = lambda: fn(q, k, v, cu, mx, lens, causal)  # noqa: E731
                            else:
                                out = fn(q, k, v, cu, mx, lens, causal)
                                call = lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)  # noqa: E731
                            ms, _ = timer(call, 1000.0)
                            tf[name] = flops(lens, heads, hdim, causal, ps == "bwd") / ms / 1e9
                            cells.append(f"{tf[name]:.1f} ({ms:.3f})")
                        except Exception as e:  # noqa: BLE001 - a refusal is a cell, not a crash
                            cells.append(f"n/a: {type(e).__name__}")
                            print(f"# {name} {mix} d{hdim} causal={causal} {ps}: {str(e).strip().splitlines()[0][:150] if str(e).strip() else ''}")
                        finally:
                            out = None  # noqa: F841
                    peers = [x for n, x in tf.items() if not n.startswith("flashlab")]
                    ratio = f"{tf['flashlab:auto'] / max(peers):.2f}" if peers and "flashlab:auto" in tf else "–"
                    print(f"| {mix} ({len(lens)} seqs, {total} tokens) | {hdim} | {int(causal)} | {ps} | "
                          + " | ".join(cells) + f" | {ratio} |", flush=True)
    for name, fn in impls.items():
        if isinstance(fn, str):
            print(f"# {name}: {fn}")


if __name__ == "__main__":
    main()
