"""Sweep a few tile configurations of the FA2 kernels on the current GPU (how fa2.py's table was made).

    python -m flashlab.triton.tune [--hdims 64,128,256] [--seqlen 4096] [--tokens 16384] [--causal]

Shape: bf16, batch = tokens / seqlen, heads = 2048 / head_dim (the benchmark's grid). Each candidate
is timed with triton.testing.do_bench (CUDA events, L2 flushed, median); TFLOP/s from
flashlab.attention_flops (ms where the flashlab extension is not built). The backward sweeps the
dK/dV kernel's and the dQ kernel's configurations one at a time, the other held at its default, so
differences between rows of one group are the swept kernel's. Candidates that do not compile (too
much shared memory, too many registers) print as failed.
"""
import argparse

import torch
import triton.testing

from ._common import TileConfig
from .fa2 import bwd_configs, fa2_backward, fa2_forward, fwd_config

# Candidates: configurations that compile without register spills for sm_90 (resources.py).
FWD = {
    64: [(128, 64, 4, 3), (128, 128, 8, 3), (128, 64, 8, 3), (64, 64, 4, 4)],
    128: [(128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3), (64, 64, 4, 3)],
    256: [(64, 64, 8, 2), (128, 64, 8, 2), (128, 32, 8, 2), (64, 32, 4, 3)],
}
DKDV = {  # (query block streamed, key block owned, warps, stages)
    64: [(32, 128, 8, 3), (64, 128, 8, 2), (64, 128, 8, 3), (64, 64, 4, 3)],
    128: [(32, 128, 8, 3), (32, 128, 8, 2), (16, 128, 8, 2), (64, 128, 8, 2)],
    256: [(16, 64, 8, 2), (32, 64, 8, 2), (32, 32, 4, 2)],
}
DQ = {
    64: [(128, 64, 8, 2), (64, 64, 4, 3), (128, 32, 4, 3), (128, 64, 8, 3)],
    128: [(128, 64, 8, 2), (64, 64, 4, 3), (128, 64, 8, 3)],
    256: [(64, 32, 8, 2), (64, 64, 8, 2), (128, 32, 8, 2), (32, 64, 4, 2)],
}


def flops(batch, heads, seqlen, head_dim, causal):
    """(forward, backward) FLOPs from flashlab.attention_flops, the C++ library's mask-aware count, or
    (None, None) where the extension is not built (python/run_gpu_triton.sh's stub package)."""
    try:
        from flashlab import attention_flops
    except ImportError:
        return None, None
    return attention_flops(batch, seqlen, seqlen, heads, heads, head_dim, causal=causal)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--causal", action="store_true")
    args = ap.parse_args(argv)
    unit = "TFLOP/s" if flops(1, 1, 1, 8, False)[0] else "ms (flashlab extension not built: no FLOP count)"
    print(f"flashlab.triton.tune on {torch.cuda.get_device_name()}: bf16, seqlen {args.seqlen}, "
          f"causal {args.causal}; {unit} (median, do_bench); * = the current default")
    for d in (int(x) for x in args.hdims.split(",")):
        batch, heads, s = max(1, args.tokens // args.seqlen), 2048 // d, args.seqlen
        g = torch.Generator(device="cuda").manual_seed(d)
        q, k, v, do = (torch.randn(batch, s, heads, d, device="cuda", dtype=torch.bfloat16, generator=g)
                       for _ in range(4))
        fl, fl_bwd = flops(batch, heads, s, d, args.causal)
        out, lse = fa2_forward(q, k, v, args.causal)
        default_kv, default_q = bwd_configs(d)

        def run(label, fn, work, is_default):
            try:
                ms = triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median")
                value = f"{work / ms / 1e9:8.1f}" if work else f"{ms:8.3f}"
                print(f"  d={d:<3} {label:<22} {value}{' *' if is_default else ''}", flush=True)
            except Exception as e:  # a candidate that does not fit the chip is a result, not a crash
                print(f"  d={d:<3} {label:<22}   failed: {str(e).splitlines()[0][:80]}", flush=True)

        for c in FWD[d]:
            cfg = TileConfig(*c)
            run(f"fwd {cfg}", lambda: fa2_forward(q, k, v, args.causal, None, cfg), fl, cfg == fwd_config(d))
        for c in DKDV[d]:
            cfg = TileConfig(*c)
            run(f"bwd dkdv {cfg}", lambda: fa2_backward(do, q, k, v, out, lse, args.causal, None, (cfg, default_q)),
                fl_bwd, cfg == default_kv)
        for c in DQ[d]:
            cfg = TileConfig(*c)
            run(f"bwd dq {cfg}", lambda: fa2_backward(do, q, k, v, out, lse, args.causal, None, (default_kv, cfg)),
                fl_bwd, cfg == default_q)
        q = k = v = do = out = lse = None  # free this head_dim's tensors before the next
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
