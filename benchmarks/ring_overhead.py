"""Where a ring step's time goes, on one GPU in one process (no communication): the attention call,
the LSE output, the merge (the Triton kernel and the torch operations), the dtype conversions, and
four blocks with three merges against four plain calls.

    python benchmarks/ring_overhead.py      # CUDA; prints one line per shape (ms, CUDA events, median)

docs/perf.md, "Ring attention over NCCL", quotes it; benchmarks/ring_scaling.py measures the ring.
"""

import statistics

import torch

import flashlab.distributed as fd
import flashlab.torch as fl


def _ms(fn, n=10):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    if not torch.cuda.is_available():
        raise SystemExit("ring_overhead: needs a CUDA device")
    opts = fd._options(None, False, (None, None, 0, 0))  # no scale override, non-causal, dense
    for seq, heads in ((32768, 16), (65536, 8)):
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(1, seq, heads, 128, generator=g, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o, lse = fd._FWD(q, k, v, *opts)
        acc, acc_lse = o.float(), lse.float().clone()

        def ring_in_one_process(steps=4):
            o_i, l_i = fd._FWD(q, k, v, *opts)
            out, out_lse = o_i.float(), l_i.float()
            for _ in range(steps - 1):
                o_i, l_i = fd._FWD(q, k, v, *opts)
                fd._merge_(out, out_lse, o_i, l_i)
            return out.to(torch.bfloat16)

        with torch.no_grad():
            r = {
                "attention": _ms(lambda: fl.attention(q, k, v)),
                "attention + lse": _ms(lambda: fd._FWD(q, k, v, *opts)),
                "merge (ring's)": _ms(lambda: fd._merge_(acc, acc_lse, o, lse)),
                "merge (torch ops)": _ms(lambda: fd._merge_torch(acc, acc_lse, o, lse)),
                "bf16 -> fp32": _ms(lambda: o.float()),
                "fp32 -> bf16": _ms(lambda: acc.to(torch.bfloat16)),
                "4 blocks + 3 merges": _ms(ring_in_one_process, 5),
            }
        print(f"{torch.cuda.get_device_name()} b1 s{seq} h{heads} d128 bf16: "
              + ", ".join(f"{name} {t:.3f} ms" for name, t in r.items()), flush=True)


if __name__ == "__main__":
    main()
