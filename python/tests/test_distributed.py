"""flashlab.distributed: ring attention over torch.distributed (gloo on CPU), forward and backward.

Each case spawns 2 or 4 processes joined by a gloo group on 127.0.0.1. Every process draws the
same full-sequence inputs, runs ``ring_attention`` on its shard (zigzag for causal, contiguous
otherwise) and compares out, LSE and dq, dk, dv of its shard against single-process
``flashlab.torch.attention`` on the whole sequence, in fp32. The cases of one world size share
one process group (starting processes that import torch dominates the time on 2 cores).
"""

import os
import socket
import traceback

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import flashlab.distributed as fd  # noqa: E402
import flashlab.torch as fl  # noqa: E402

CASES = [  # (batch, seqlen, heads_q, heads_kv, head_dim), causal, softmax_scale (or "bf16"); fp32
    ((2, 64, 4, 4, 32), False, None),
    ((1, 128, 4, 4, 64), True, None),
    ((2, 96, 4, 2, 32), True, 0.3),  # GQA
    ((1, 256, 2, 1, 64), False, None),  # MQA
    ((1, 128, 2, 2, 64), True, "bf16"),  # bf16 inputs: partial outputs are rounded, so bf16 tolerance
]
RTOL = ATOL = 1e-4
BF16_TOL = 2e-2


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _inputs(shape, seed):
    b, s, hq, hkv, d = shape
    g = torch.Generator().manual_seed(seed)
    q, k, v = torch.randn(b, s, hq, d, generator=g), torch.randn(b, s, hkv, d, generator=g), \
        torch.randn(b, s, hkv, d, generator=g)
    dout = torch.randn(b, s, hq, d, generator=g)
    return q, k, v, dout


def _reference(q, k, v, dout, causal, scale):
    q, k, v = (x.clone().requires_grad_() for x in (q, k, v))
    out, lse = fl.attention(q, k, v, causal=causal, softmax_scale=scale, return_lse=True)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), dout)
    return {"out": out.detach(), "lse": lse, "dq": dq, "dk": dk, "dv": dv}


def _check_case(rank, world, shape, causal, scale, seed, group=None):
    q, k, v, dout = _inputs(shape, seed)
    tol = RTOL
    if scale == "bf16":
        q, k, v, dout = (x.bfloat16() for x in (q, k, v, dout))
        scale, tol = None, BF16_TOL
    want = _reference(q, k, v, dout, causal, scale)
    if causal:
        def shard(x, dim=1):
            return fd.zigzag_shard(x, rank, world, dim=dim)
    else:
        def shard(x, dim=1):
            return x.chunk(world, dim=dim)[rank]
    ql, kl, vl = (shard(x).clone().requires_grad_() for x in (q, k, v))
    if not causal:  # strided shards straight from chunk() (views of the full tensors)
        ql, kl, vl = (shard(x.clone().requires_grad_()) for x in (q, k, v))
    out, lse = fd.ring_attention(ql, kl, vl, group=group, causal=causal, softmax_scale=scale, return_lse=True)
    dq, dk, dv = torch.autograd.grad(out, (ql, kl, vl), shard(dout))
    got = {"out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv}
    errors = []
    for name, g in got.items():
        w = shard(want[name], dim=2 if name == "lse" else 1)
        if g.shape != w.shape or g.dtype != w.dtype or not torch.allclose(g, w, rtol=tol, atol=tol):
            err = (g.float() - w.float()).abs().max().item() if g.shape == w.shape else "shape"
            errors.append(f"{name}: max abs err {err} ({tuple(g.shape)} vs {tuple(w.shape)})")
    return errors


# Head dims 64 and 128: the GPU test (test_distributed_nccl.py) runs these on a library built with
# FLASHLAB_HEAD_DIMS="64;128" (tools/gpu_sm90.sh ring), which has no kernel for head dim 32.
VARLEN_CASES = [  # global sequence lengths (each divides by 2 x 4), heads_q, heads_kv, head_dim, causal
    ([16, 0, 40, 8, 64], 4, 4, 64, True),
    ([24, 56, 8], 4, 2, 128, False),  # GQA
    ([32, 8, 16], 2, 1, 64, True),  # MQA
    ([12, 4, 20], 2, 2, 64, "contiguous"),  # non-causal, contiguous shards: odd local lengths at 4 ranks
]


def _contiguous_varlen(x, cu, rank, world):
    """Each sequence cut into `world` contiguous parts; this rank's part of each (non-causal only)."""
    c = [int(v) for v in cu.tolist()]
    parts = [x[c[b]:c[b + 1]].chunk(world, dim=0)[rank] if c[b + 1] > c[b] else x[:0] for b in range(len(c) - 1)]
    return torch.cat(parts, dim=0), torch.div(cu, world, rounding_mode="floor").to(torch.int32)


def _check_varlen_case(rank, world, lens, hq, hkv, d, causal, seed, device="cpu", dtype=torch.float32, tol=RTOL):
    """Packed sequences (zigzag_shard_varlen; causal "contiguous": non-causal with contiguous
    per-sequence shards) through ring_attention against one process's varlen attention of the
    whole batch: out, LSE, dq, dk, dv of this rank's rows, max error <= tol x max(1, largest
    reference value). Shared with test_distributed_nccl.py (bf16 on GPUs)."""
    shard_fn = _contiguous_varlen if causal == "contiguous" else fd.zigzag_shard_varlen
    causal = causal is True
    g = torch.Generator().manual_seed(seed)
    total = sum(lens)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int32, device=device)
    q, dout = (torch.randn(total, hq, d, generator=g).to(device, dtype) for _ in range(2))
    k, v = (torch.randn(total, hkv, d, generator=g).to(device, dtype) for _ in range(2))
    qr, kr, vr = (x.clone().requires_grad_() for x in (q, k, v))
    out, lse = fl.attention(qr, kr, vr, causal=causal, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens),
                            max_seqlen_k=max(lens), return_lse=True)  # fmt: skip
    dq, dk, dv = torch.autograd.grad(out, (qr, kr, vr), dout)
    want = {"out": out.detach(), "lse": lse, "dq": dq, "dk": dk, "dv": dv}

    def shard(x, name=""):
        if name == "lse":  # (heads, total): shard the rows of its transpose
            return shard_fn(x.t(), cu, rank, world)[0].t()
        return shard_fn(x, cu, rank, world)[0]

    cu_l = shard_fn(q, cu, rank, world)[1]
    ql, kl, vl = (shard(x).requires_grad_() for x in (q, k, v))
    o, l = fd.ring_attention(ql, kl, vl, causal=causal, return_lse=True, cu_seqlens=cu_l)
    got = dict(zip(("out", "lse"), (o, l)))
    got.update(zip(("dq", "dk", "dv"), torch.autograd.grad(o, (ql, kl, vl), shard(dout))))
    errors = []
    for name, gv in got.items():
        w = shard(want[name], name)
        if gv.shape != w.shape or gv.dtype != w.dtype or not torch.isfinite(gv.float()).all():
            errors.append(f"{name}: {tuple(gv.shape)} {gv.dtype} vs {tuple(w.shape)} {w.dtype}, or non-finite values")
            continue
        err = (gv.float() - w.float()).abs().max().item() if gv.numel() else 0.0
        scale = max(w.float().abs().max().item() if w.numel() else 0.0, 1.0)
        if err > tol * scale:
            errors.append(f"{name}: max abs err {err:.3g} (largest value {scale:.3g})")
    if shard_fn is fd.zigzag_shard_varlen:  # the zigzag shards reassemble
        parts = [fd.zigzag_shard_varlen(q, cu, r, world)[0] for r in range(world)]
        if not torch.equal(fd.zigzag_unshard_varlen(parts, cu), q):
            errors.append("zigzag_unshard_varlen(shards) != x")
    return errors


def _worker(rank, world, port, cases, result_dir):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    lines = []
    try:
        for i, (shape, causal, scale) in enumerate(cases):
            try:
                errors = _check_case(rank, world, shape, causal, scale, seed=1000 + i)
            except Exception:
                errors = [traceback.format_exc()]
            lines += [f"case {shape} causal={causal} scale={scale}: {e}" for e in errors]
        for i, (lens, hq, hkv, d, causal) in enumerate(VARLEN_CASES):
            try:
                errors = _check_varlen_case(rank, world, lens, hq, hkv, d, causal, seed=4000 + i)
            except Exception:
                errors = [traceback.format_exc()]
            lines += [f"varlen case {lens} h{hq}/{hkv} d{d} causal={causal}: {e}" for e in errors]
        if world == 2:  # benchmarks/ring_scaling.py's "serial" mode: same results, transfers not overlapped
            with fd._comm_mode("serial"):
                for i, (shape, causal, scale) in enumerate(CASES[:3]):
                    try:
                        errors = _check_case(rank, world, shape, causal, scale, seed=3000 + i)
                    except Exception:
                        errors = [traceback.format_exc()]
                    lines += [f"serial case {shape} causal={causal}: {e}" for e in errors]
        if world == 4:  # subgroups {0, 1} and {2, 3}: group ranks differ from global ranks
            groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
            group = groups[rank // 2]
            for i, (shape, causal, scale) in enumerate(CASES[:2]):
                try:
                    errors = _check_case(rank % 2, 2, shape, causal, scale, seed=2000 + i, group=group)
                except Exception:
                    errors = [traceback.format_exc()]
                lines += [f"subgroup case {shape} causal={causal}: {e}" for e in errors]
        # zigzag_unshard inverts zigzag_shard through an all_gather
        x = torch.arange(2 * 4 * world * 3.0).reshape(2, 4 * world, 3)
        parts = [torch.empty(2, 4, 3) for _ in range(world)]
        dist.all_gather(parts, fd.zigzag_shard(x, rank, world))
        if not torch.equal(fd.zigzag_unshard(parts), x):
            lines.append("zigzag_unshard(all_gather(zigzag_shard)) != x")
        dist.barrier()
    finally:
        dist.destroy_process_group()
    with open(os.path.join(result_dir, f"rank{rank}.txt"), "w") as f:
        f.write("\n".join(lines))


@pytest.mark.parametrize("world", [1, 2, 4])
def test_ring_attention_matches_single_process(world, tmp_path):
    mp = pytest.importorskip("torch.multiprocessing")
    mp.spawn(_worker, args=(world, _free_port(), CASES, str(tmp_path)), nprocs=world, join=True)
    failures = []
    for r in range(world):
        text = (tmp_path / f"rank{r}.txt").read_text()
        failures += [f"rank {r}: {line}" for line in text.splitlines() if line]
    assert not failures, "\n".join(failures)


def test_zigzag_shard_layout():
    x = torch.arange(8).reshape(1, 8)
    assert fd.zigzag_shard(x, 0, 2).tolist() == [[0, 1, 6, 7]]
    assert fd.zigzag_shard(x, 1, 2).tolist() == [[2, 3, 4, 5]]
    assert torch.equal(fd.zigzag_unshard([fd.zigzag_shard(x, r, 2) for r in range(2)]), x)
    with pytest.raises(ValueError):
        fd.zigzag_shard(torch.zeros(1, 6), 0, 2)


def test_merge_partial_is_exact():
    g = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(1, 16, 2, 32, generator=g), torch.randn(1, 24, 2, 32, generator=g), \
        torch.randn(1, 24, 2, 32, generator=g)
    o1, l1 = fl.attention(q, k[:, :10], v[:, :10], return_lse=True)
    o2, l2 = fl.attention(q, k[:, 10:], v[:, 10:], return_lse=True)
    o, l = fl.attention(q, k, v, return_lse=True)
    mo, ml = fd.merge_partial(o1, l1, o2, l2)
    torch.testing.assert_close(mo, o, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ml, l, rtol=1e-5, atol=1e-5)
    # an empty partial (lse = -inf) leaves the other unchanged; two empty rows stay empty
    mo, ml = fd.merge_partial(o1, l1, torch.zeros_like(o2), torch.full_like(l2, float("-inf")))
    torch.testing.assert_close(mo, o1)
    mo, ml = fd.merge_partial(torch.zeros_like(o1), torch.full_like(l1, float("-inf")),
                              torch.zeros_like(o2), torch.full_like(l2, float("-inf")))
    assert torch.all(mo == 0) and torch.all(ml == float("-inf"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the Triton merge needs CUDA")
def test_merge_triton_matches_torch():
    """The ring's GPU merge (one Triton kernel) against its torch operations, on views as the ring
    passes them (the second half of the rows of acc and lse), head dims 128 and 72 (not a power of
    two), bf16 partials, rows empty on one side and on both (lse -inf, out 0)."""
    if fd._triton() is None:
        pytest.skip("Triton is not installed")
    for d in (128, 72):
        g = torch.Generator(device="cuda").manual_seed(d)
        acc = torch.randn(2, 64, 3, d, device="cuda", generator=g)
        lse = torch.randn(2, 3, 64, device="cuda", generator=g) * 4
        o = torch.randn(2, 32, 3, d, device="cuda", generator=g).bfloat16()
        li = torch.randn(2, 3, 32, device="cuda", generator=g) * 4
        lse[:, :, 40], acc[:, 40] = float("-inf"), 0.0  # row 40 = row 8 of the half
        li[:, :, 8] = float("-inf")
        o[:, 8] = 0.0
        li[:, 1, 20] = float("-inf")  # empty on the partial's side only
        got_acc, got_lse, want_acc, want_lse = acc.clone(), lse.clone(), acc.clone(), lse.clone()
        fd._merge_triton(got_acc[:, 32:], got_lse[:, :, 32:], o, li)
        fd._merge_torch(want_acc[:, 32:], want_lse[:, :, 32:], o, li)
        torch.testing.assert_close(got_acc, want_acc, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got_lse, want_lse, rtol=1e-5, atol=1e-5)
        assert torch.equal(got_acc[:, :32], acc[:, :32]) and torch.all(got_acc[:, 40] == 0)
        assert torch.all(got_lse[:, :, 40] == float("-inf"))


def test_requires_process_group():
    if dist.is_initialized():
        pytest.skip("a process group is already initialized")
    q = torch.zeros(1, 4, 1, 32)
    with pytest.raises(RuntimeError, match="process group"):
        fd.ring_attention(q, q, q)


def test_ring_scaling_benchmark_runs_on_cpu(tmp_path):
    """benchmarks/ring_scaling.py end to end with gloo on the CPU (tiny shapes): every configuration
    timed, the tables and the JSON written."""
    import json
    import pathlib
    import subprocess
    import sys

    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "ring_scaling.py"
    if not path.exists():
        pytest.skip("benchmarks/ring_scaling.py is not beside this checkout of the tests")
    run = subprocess.run([sys.executable, str(path), "--device", "cpu", "--gpus", "1,2", "--weak", "64",
                          "--strong", "128:2", "--head-dim", "32", "--iters", "1", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[ring] N=2 weak" in run.stdout  # the progress lines
    results = json.loads((tmp_path / "ring_scaling.json").read_text())
    # N=1: weak and strong, causal and not (single); N=2: weak x 3 modes x 2 + strong x 2 (overlap)
    assert len(results) == 4 + 8
    assert all(r["fwd_ms"] > 0 and r["fwd_bwd_ms"] > 0 for r in results)
    # The one-GPU weak baseline also timed as N calls back to back, for N = 2 (and only there).
    singles = [r for r in results if r["mode"] == "single"]
    for r in singles:
        want = {"2"} if r["kind"] == "weak" else set()
        assert set(r["back_to_back"]) == want, r
        assert all(v["fwd_ms"] > 0 and v["fwd_bwd_ms"] > 0 for v in r["back_to_back"].values())
    text = (tmp_path / "ring_scaling.md").read_text()
    assert "Weak scaling" in text and "Strong scaling" in text and "overlap over none" in text
    assert "vs one call" in text
