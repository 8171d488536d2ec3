"""python -m flashlab.bench_decode (python/flashlab/bench_decode.py) without a GPU: argument parsing,
the bytes and TB/s formula, the shuffled block table, the markdown from synthetic records, main()'s
exit code 2 without CUDA, and one benchmark point run end to end on CPU tensors (flashlab's CPU
kernels and SDPA's CPU flash backend against the float32 reference; a stub timer)."""

import json
import math

import pytest

torch = pytest.importorskip("torch")
import flashlab.bench_decode as bd  # noqa: E402


def test_defaults_are_the_issue_shape():
    a = bd.parse_args([])
    assert (a.batch, a.seqlen_q, a.heads, a.heads_kv, a.head_dim) == (32, 1, 32, 8, 128)
    assert a.cache_lens == [1024, 4096, 16384, 65536]
    assert a.page_sizes == [0]
    assert a.impls == ["flashlab", "flashlab_decoder", "sdpa_cudnn", "sdpa_flash", "sdpa_efficient", "flex"]
    assert a.budget_ms == 100.0
    assert a.out == "bench-decode-out"


def test_lists_and_bad_arguments():
    a = bd.parse_args(["--cache-lens", "256, 512", "--page-sizes", "0,1,16", "--impls", "flashlab,sdpa_flash",
                       "--seqlen-q", "4", "--heads-kv", "4", "--budget-ms", "20", "--out", "x"])
    assert (a.cache_lens, a.page_sizes, a.impls) == ([256, 512], [0, 1, 16], ["flashlab", "sdpa_flash"])
    assert (a.seqlen_q, a.heads_kv, a.budget_ms, a.out) == (4, 4, 20.0, "x")
    for bad in (["--impls", "flashlab,fa9"], ["--heads-kv", "5"], ["--page-sizes", "-1"],
                ["--cache-lens", "2", "--seqlen-q", "4"]):
        with pytest.raises(SystemExit):
            bd.parse_args(bad)


def test_bytes_and_tbps():
    # The issue shape at 64k: 32 * 65536 * 8 * 128 * 2 (K, V) * 2 bytes = 8.59 GB.
    assert bd.kv_bytes(32, 65536, 8, 128) == 32 * 65536 * 8 * 128 * 4 == 8_589_934_592
    assert bd.kv_bytes(1, 10, 2, 64, elem_bytes=4) == 10 * 2 * 64 * 2 * 4
    assert bd.tbps(1e12, 1000.0) == pytest.approx(1.0)
    assert bd.tbps(bd.kv_bytes(32, 65536, 8, 128), 2.856) == pytest.approx(3.008, abs=1e-3)


@pytest.mark.parametrize("batch,pages", [(32, 64), (3, 7), (1, 1)])
def test_shuffled_block_table(batch, pages):
    t = bd.shuffled_block_table(torch, batch, pages, seed=5)
    assert t.shape == (batch, pages) and t.dtype == torch.int32
    assert sorted(t.flatten().tolist()) == list(range(batch * pages))          # every page exactly once
    assert torch.equal(t, bd.shuffled_block_table(torch, batch, pages, seed=5))  # fixed seed
    if batch * pages > 8:
        assert not torch.equal(t.flatten(), torch.arange(batch * pages, dtype=torch.int32))  # shuffled
    assert bd.pages_per_seq(100, 16) == 7 and bd.pages_per_seq(4096, 16) == 256


def test_an_expanded_view_cannot_replace_the_copy():
    """Why a peer that refuses enable_gqa gets a copy: head h -> K/V head h // group has no strides."""
    k = torch.zeros(2, 8, 5, 4)
    with pytest.raises(RuntimeError):
        k.unsqueeze(2).expand(2, 8, 4, 5, 4).view(2, 32, 5, 4)
    assert k.unsqueeze(2).expand(2, 8, 1, 5, 4).view(2, 8, 5, 4).data_ptr() == k.data_ptr()


def _rec(impl, L, page, tbps=None, note="", max_abs=1e-3):
    return dict(impl=impl, cache_len=L, page_size=page, batch=32, seqlen_q=1, heads=32, heads_kv=8, head_dim=128,
                bytes=bd.kv_bytes(32, L, 8, 128), ms=(bd.kv_bytes(32, L, 8, 128) / tbps / 1e9 if tbps else None),
                tbps=tbps, ratio=None, max_abs=max_abs, reps=10 if tbps else 0, note=note,
                host_us=(40.0 + L / 1024 if tbps else None))


def _synthetic():
    recs = [_rec("flashlab", 1024, 0, 2.0), _rec("flashlab_decoder", 1024, 0, 2.2),
            _rec("sdpa_flash", 1024, 0, 1.6), _rec("sdpa_cudnn", 1024, 0, 0.8),
            _rec("sdpa_efficient", 1024, 0, 1.0, note="K/V copied to 32 heads outside the timing (...)"),
            _rec("flashlab", 4096, 0, None, note="WRONG: max abs delta 0.3 > 0.05", max_abs=0.3),
            _rec("flashlab_decoder", 4096, 0, 2.5), _rec("sdpa_flash", 4096, 0, 2.0),
            _rec("sdpa_cudnn", 4096, 0, None, note="failed: RuntimeError: no kernel", max_abs=None),
            _rec("sdpa_efficient", 4096, 0, 1.0),
            _rec("flashlab", 1024, 16, 1.5), _rec("flashlab_decoder", 1024, 16, 1.4),
            _rec("sdpa_flash", 1024, 16, None, note="contiguous only", max_abs=None)]
    bd.add_ratios([r for r in recs if r["page_size"] == 0 and r["cache_len"] == 1024])
    bd.add_ratios([r for r in recs if r["page_size"] == 0 and r["cache_len"] == 4096])
    bd.add_ratios([r for r in recs if r["page_size"] == 16])
    return recs


def test_ratios_divide_by_the_best_peer_at_the_point():
    recs = _synthetic()
    by = {(r["impl"], r["cache_len"], r["page_size"]): r for r in recs}
    assert by[("flashlab", 1024, 0)]["ratio"] == pytest.approx(2.0 / 1.6)
    assert by[("flashlab_decoder", 4096, 0)]["ratio"] == pytest.approx(2.5 / 2.0)
    assert by[("sdpa_flash", 1024, 0)]["ratio"] == pytest.approx(1.0)
    assert by[("sdpa_cudnn", 1024, 0)]["ratio"] == pytest.approx(0.5)
    assert by[("flashlab", 4096, 0)]["ratio"] is None          # WRONG: no TB/s
    assert by[("flashlab", 1024, 16)]["ratio"] is None         # paged: no peer at that point
    # The records as results.jsonl holds them (JSON-clean: no NaN, no tensors).
    for r in recs:
        assert json.loads(json.dumps(r)) == r


def test_markdown():
    md = bd.render_markdown(_synthetic(), "## header")
    assert md.startswith("## header")
    lines = md.splitlines()
    assert "### contiguous cache" in lines
    assert "### paged cache, page size 16 (shuffled block table)" in lines
    contiguous = lines[lines.index("### contiguous cache"):]
    assert "| impl | 1k | 4k |" in contiguous
    assert "| flashlab | 2.00 (1.25) | WRONG |" in contiguous
    assert "| flashlab_decoder | 2.20 (1.38) | 2.50 (1.25) |" in contiguous
    assert "| sdpa_efficient | 1.00 (0.62)* | 1.00 (0.50) |" in contiguous   # * = a note under the table
    assert "| sdpa_cudnn | 0.80 (0.50) | – |" in contiguous
    assert "- flashlab: WRONG: max abs delta 0.3 > 0.05" in contiguous
    assert "- sdpa_cudnn: failed: RuntimeError: no kernel" in contiguous
    assert "- sdpa_efficient: K/V copied to 32 heads outside the timing (...)" in contiguous
    paged = lines[lines.index("### paged cache, page size 16 (shuffled block table)"):]
    assert "| flashlab | 1.50 |  |" in paged                  # no ratio: no peer timed at that point
    assert "| sdpa_flash | – |  |" in paged
    assert "- sdpa_flash: contiguous only" in paged
    # Every record in the details table, with max |delta|; a | inside a note is escaped.
    assert "| 4096 | 0 | flashlab |  |  |  | 3.00e-01 | 0 |  | WRONG: max abs delta 0.3 > 0.05 |" in lines
    assert "| 4096 | 0 | flashlab_decoder | 0.2147 | 2.500 | 1.250 | 1.00e-03 | 10 | 44 |  |" in lines
    md = bd.render_markdown([_rec("flashlab", 1024, 0, None, note="failed: a|b")], "")
    assert "| 1024 | 0 | flashlab |  |  |  | 1.00e-03 | 0 |  | failed: a\\|b |" in md.splitlines()
    assert sum(1 for x in lines if x.startswith("| 1024 | ") or x.startswith("| 4096 | ")) == 13
    # The host-time table under each page size's table: µs of one eager call, blank where not timed.
    host = contiguous[contiguous.index("Host time of one eager call, µs (median; the GPU drained before each call):"):]
    assert "| flashlab | 41 |  |" in host and "| flashlab_decoder | 41 | 44 |" in host


def test_main_without_cuda_returns_2(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: main() would run the benchmark")
    out = tmp_path / "out"
    assert bd.main(["--out", str(out), "--cache-lens", "64"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    assert not out.exists()


class _Bar:
    n = 0

    def set_description(self, desc):
        pass

    def update(self, k=1):
        self.n += k


def _stub_timer(call, cap_ms):
    call()
    return 0.5, 3


_stub_timer.host_us = lambda call: 40.0  # flashlab.bench.Timer.host_us's place


@pytest.mark.parametrize("seqlen_q", [1, 3])
@pytest.mark.parametrize("page_size", [0, 16])
def test_a_point_on_cpu(seqlen_q, page_size):
    """One point end to end on CPU tensors: flashlab (CPU kernels) and SDPA's CPU flash backend
    agree with the float32 reference (bottom-right causal at seqlen_q 3; pages through a shuffled
    table, the last page part-filled); the CUDA-only SDPA backends become notes. FlexAttention is
    left out (torch.compile; its kernel is the GPU's): the tests below check its paged mapping."""
    try:
        import flashlab.torch  # noqa: F401 - the extension (any build: these are CPU tensors)
    except ImportError as e:
        pytest.skip(f"flashlab.torch not importable: {e}")
    args = bd.parse_args(["--batch", "3", "--heads", "8", "--heads-kv", "2", "--head-dim", "64",
                          "--seqlen-q", str(seqlen_q), "--cache-lens", "100",
                          "--impls", ",".join(x for x in bd.IMPLS if x != "flex")])
    bar = _Bar()
    recs = bd.run_point(torch, args, 100, page_size, _stub_timer, bar, device="cpu")
    assert bar.n == len(args.impls) == len(recs)
    by = {r["impl"]: r for r in recs}
    for name in ("flashlab", "flashlab_decoder"):
        assert by[name]["max_abs"] < 0.02, by[name]
        assert by[name]["note"] == ""
        assert by[name]["tbps"] == pytest.approx(bd.tbps(bd.kv_bytes(3, 100, 2, 64), 0.5))
    if page_size:
        assert all(by[p]["note"] == "contiguous only" and by[p]["tbps"] is None for p in bd.SDPA_BACKENDS)
        assert by["flashlab"]["ratio"] is None
    else:
        assert by["sdpa_flash"]["max_abs"] < 0.02 and by["sdpa_flash"]["note"] == ""
        assert by["sdpa_flash"]["ratio"] == pytest.approx(1.0)
        assert by["flashlab"]["ratio"] == pytest.approx(1.0)        # the stub timer: equal times


def test_reference_against_a_direct_computation():
    """The chunked, paged reference equals a one-shot float64 computation on the contiguous K/V."""
    args = bd.parse_args(["--batch", "5", "--heads", "4", "--heads-kv", "2", "--head-dim", "16", "--seqlen-q", "2",
                          "--cache-lens", "40"])
    inp = bd.make_inputs(torch, args, 40, 8, device="cpu")
    got = bd.reference(torch, inp, chunk_bytes=1)                 # one sequence per chunk
    k = inp["k_cache"][inp["block_table"].long()].flatten(1, 2).double()   # (B, 40, Hkv, D)
    v = inp["v_cache"][inp["block_table"].long()].flatten(1, 2).double()
    q = inp["q"].double()
    s = torch.einsum("bihd,bjhd->bhij", q, k.repeat_interleave(2, dim=2)) / math.sqrt(16)
    s = s.masked_fill(torch.tensor([[False] * 39 + [True], [False] * 40]), float("-inf"))  # bottom-right
    want = torch.einsum("bhij,bjhd->bihd", torch.softmax(s, -1), v.repeat_interleave(2, dim=2))
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


def test_sdpa_copy_fallback_is_noted(monkeypatch):
    """A backend that refuses enable_gqa: K/V copied outside the timing, said in the note."""
    import torch.nn.functional as F

    real = F.scaled_dot_product_attention

    def no_gqa(*a, enable_gqa=False, **kw):
        if enable_gqa:
            raise RuntimeError("No available kernel. Aborting execution.")
        return real(*a, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", no_gqa)
    args = bd.parse_args(["--batch", "2", "--heads", "8", "--heads-kv", "2", "--head-dim", "32", "--cache-lens", "50"])
    inp = bd.make_inputs(torch, args, 50, 0, device="cpu")
    shared = {}
    call, note = bd.prepare("sdpa_flash", torch, inp, shared)
    assert "K/V copied to 8 heads outside the timing" in note and "4x" in note and "No available kernel" in note
    assert shared["expanded"][0].shape == (2, 8, 50, 32)
    assert bd.check(call(), bd.reference(torch, inp)) < 0.02


def test_flex_paged_maps_invert_the_block_table():
    """owner and logical_page send every physical page back to its sequence and its index there."""
    table = bd.shuffled_block_table(torch, 4, 5, seed=3)
    owner, logical_page = bd.paged_flex_maps(torch, table)
    assert owner.shape == logical_page.shape == (20,) and owner.dtype == logical_page.dtype == torch.int32
    for b in range(4):
        for p in range(5):
            page = int(table[b, p])
            assert (int(owner[page]), int(logical_page[page])) == (b, p)


def test_flex_page_ok():
    assert all(bd.flex_page_ok(p) for p in (16, 64, 256))
    assert not any(bd.flex_page_ok(p) for p in (1, 3, 8, 24))


def _flex_paged(seqlen_q, B=2, n=3, P=16, L=40):
    """A shuffled table of B sequences of n pages of P over a full cache of L (the last page part-
    filled at L 40), its mask_mod evaluated densely with plain torch ops on the pool's physical keys:
    (table, mask_mod, visible (B, seqlen_q, B * n * P) bool)."""
    table = bd.shuffled_block_table(torch, B, n, seed=1)
    mod = bd.paged_flex_mask_mod(*bd.paged_flex_maps(torch, table), P, L, seqlen_q)
    i = dict(dtype=torch.int32)
    visible = mod(torch.arange(B, **i).view(B, 1, 1, 1), torch.zeros(1, 1, 1, 1, **i),
                  torch.arange(seqlen_q, **i).view(1, 1, seqlen_q, 1), torch.arange(B * n * P, **i).view(1, 1, 1, -1))
    return table, mod, visible[:, 0]


@pytest.mark.parametrize("seqlen_q", [1, 3])
def test_flex_paged_mask_mod(seqlen_q):
    """Query i of sequence b sees exactly its own keys at logical positions <= L - seqlen_q + i."""
    B, n, P, L = 2, 3, 16, 40
    table, _, visible = _flex_paged(seqlen_q)
    want = torch.zeros(B, seqlen_q, B * n * P, dtype=torch.bool)
    for b in range(B):
        for p in range(n):
            page = int(table[b, p])
            pos = p * P + torch.arange(P)
            want[b, :, page * P:(page + 1) * P] = pos[None, :] <= L - seqlen_q + torch.arange(seqlen_q)[:, None]
    assert torch.equal(visible, want)


@pytest.mark.parametrize("seqlen_q", [1, 3])
def test_flex_paged_blocks_agree_with_the_mask_mod(seqlen_q):
    """The block lists: a full block (mask_mod skipped) is a page every query sees whole, a partial
    one a page seen in part, and a page of the pool in neither list is seen by no query of b."""
    B, n, P, L = 2, 3, 16, 40
    table, _, visible = _flex_paged(seqlen_q)
    kv_num, kv_idx, full_num, full_idx = bd.paged_flex_blocks(torch, table, P, L, seqlen_q)
    assert kv_idx.shape == full_idx.shape == (B, 1, 1, B * n) and kv_num.shape == full_num.shape == (B, 1, 1)
    assert {t.dtype for t in (kv_num, kv_idx, full_num, full_idx)} == {torch.int32}
    per_page = visible.view(B, seqlen_q, B * n, P)
    for b in range(B):
        full = set(full_idx[b, 0, 0, :int(full_num[b, 0, 0])].tolist())
        partial = set(kv_idx[b, 0, 0, :int(kv_num[b, 0, 0])].tolist())
        assert len(full) == 2 and full | partial == set(table[b].tolist()) and not full & partial
        for page in range(B * n):
            seen = per_page[b, :, page]
            if page in full:
                assert seen.all()
            elif page in partial:
                assert seen.any() and not seen.all()
            else:
                assert not seen.any()


def test_flex_paged_block_mask_builds_on_cpu():
    """BlockMask.from_kv_blocks takes the lists (its inversion to query blocks indexes a dense table
    as wide as the pool's KV blocks); the block mask lists exactly each sequence's pages."""
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    B, n, P, L, Sq = 2, 3, 16, 40, 3
    table, mod, visible = _flex_paged(Sq)
    mask = fa.BlockMask.from_kv_blocks(*bd.paged_flex_blocks(torch, table, P, L, Sq), BLOCK_SIZE=(128, P),
                                       mask_mod=mod, seq_lengths=(Sq, B * n * P))
    assert tuple(mask.shape) == (B, 1, Sq, B * n * P)
    assert torch.equal(mask.to_dense()[:, 0, 0].bool(), visible.view(B, Sq, B * n, P).any(3).any(1))


def test_flex_skips_before_compiling():
    """The shapes FlexAttention's kernel does not take become notes before any compilation."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    for argv, page, why in ((["--heads", "6", "--heads-kv", "2"], 0, "power of two"),
                            ([], 8, "page 8"),
                            (["--seqlen-q", "130"], 16, "seqlen_q <= 128")):
        args = bd.parse_args(["--batch", "2", "--head-dim", "16", "--cache-lens", "160", "--heads", "4",
                              "--heads-kv", "2"] + argv)
        with pytest.raises(bd.Skip, match=why):
            bd.prepare("flex", torch, bd.make_inputs(torch, args, 160, page, device="cpu"), {})


def test_error_gist_keeps_where_and_why():
    """A compiler's exception starts with where it failed and ends with why: the note keeps both."""
    e = RuntimeError("CompilationError: at 194:23:\n    acc = forward_inner(\n"
                     "AssertionError('Ternary expression with dynamic condition has inconsistent types')")
    assert bd._error_gist(e) == ("RuntimeError: CompilationError: at 194:23: ... "
                                 "AssertionError('Ternary expression with dynamic condition has inconsistent types')")
    assert bd._error_gist(ValueError("one line Error")) == "ValueError: one line Error"
    assert bd._error_gist(ValueError("no match")) == "ValueError: no match"
