// tests/gpu/test_cuda_kvcache.cpp — the CUDA KV-cache path (src/cuda/decode/: attention, fused and
// standalone append with rotary, sinks, combine; impl auto) against the CPU float64 reference on the
// same 16-bit inputs.
//
// Sweep (attention): bf16 / fp16; head dims 64, 128, 256 and off-bucket 40, 72, 200; GQA groups 1,
// 4, 8; seqlen_q 1..16; ragged cache lengths including 0, and 5 % long caches (B 1, 4k-64k keys);
// contiguous caches (with and without
// cache_batch_idx) and paged ones (page sizes 1, 3, 16, 64, 256; NHD and HND); leftpad; causal,
// windows (with StreamingLLM sink tokens), softcap, ALiBi; splits auto / 1 / 3 / 7 and fixed split
// sizes; the fused append (seqlen_new 1..17) with rotary (NeoX / interleaved, rotary_dim = head_dim
// or about half), sinks;
// impl auto / cuda_sm80 / cuda_sm90. Unfilled cache slots and the outputs are NaN-poisoned: a slot
// that leaks or a row left unwritten fails; the cache after the call must equal the reference's
// bit for bit. AppendSweep: kvcache_append alone (bf16, fp16, fp32, vector and scalar paths),
// the whole cache compared bit for bit; AppendRotaryNearTies: the rotation's rounding at the
// dtype's ties. Skips without a GPU.
//   FLASHLAB_KV_SWEEP=N (default 300) attention cases, FLASHLAB_KV_APPEND_SWEEP=N (default 200)
//   append cases, FLASHLAB_KV_COMBINE_SWEEP=N (default 100) combine cases; FLASHLAB_KV_SEED.
//   FLASHLAB_DECODE_KERNEL=tile (default) | v5: the kernel the sweep runs (src/cuda/decode/decode.h).
//   FLASHLAB_KV_BENCH=1: the Bandwidth test (both kernels at issue 14's shapes: contiguous, paged
//   16 and 1, B 1 at 128k, B 64, speculative; FLASHLAB_KV_BENCH_ONLY=N one of them), AppendBandwidth
//   (the append against cudaMemcpy) and FusedDecodeBandwidth (a decode step with and without the
//   fused append + rotary).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda/decode/decode.h"  // the kernel switch (test hook: set_decode_kernel)
#include "flashlab/flashlab.h"

namespace {

using namespace flashlab;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// float <-> 16-bit (round to nearest even), as the reference reads them.
uint16_t to_bits(float x, DType dt) {
  if (dt == DType::kBFloat16) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  // fp16 through the compiler's conversion
  const _Float16 h = static_cast<_Float16>(x);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
float from_bits(uint16_t b, DType dt) {
  if (dt == DType::kBFloat16) {
    const uint32_t u = uint32_t(b) << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  }
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}

template <typename T>
struct Dev {
  T* ptr = nullptr;
  explicit Dev(const std::vector<T>& h) {
    if (cudaMalloc(&ptr, std::max<size_t>(16, h.size() * sizeof(T))) == cudaSuccess && !h.empty())
      cudaMemcpy(ptr, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~Dev() { cudaFree(ptr); }
  std::vector<T> get(size_t n) const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};

// Rotary tables of max_pos rows, rot_dim / 2 angles each: pos · 10000^(−2i / rot_dim), as fp32.
// With tdt bf16 / fp16 the values are rounded to tdt and their 16-bit patterns kept in cos16 /
// sin16: the GPU reads those, the host's reference the fp32 values, which are the same numbers
// (the library reads a 16-bit table as its exact fp32 values).
struct RotaryTables {
  std::vector<float> cos, sin;
  std::vector<uint16_t> cos16, sin16;
};
RotaryTables rotary_tables(int64_t max_pos, int64_t rot_dim, DType tdt = DType::kFloat32) {
  RotaryTables t;
  for (int64_t pos = 0; pos < max_pos; ++pos)
    for (int64_t i = 0; i < rot_dim / 2; ++i) {
      const double th = pos * std::pow(10000.0, -2.0 * i / rot_dim);
      t.cos.push_back(static_cast<float>(std::cos(th)));
      t.sin.push_back(static_cast<float>(std::sin(th)));
    }
  if (tdt != DType::kFloat32)
    for (size_t i = 0; i < t.cos.size(); ++i) {
      t.cos[i] = round_to(tdt, t.cos[i]);
      t.sin[i] = round_to(tdt, t.sin[i]);
      t.cos16.push_back(to_bits(t.cos[i], tdt));
      t.sin16.push_back(to_bits(t.sin[i], tdt));
    }
  return t;
}

TEST(CudaKvCache, SweepAgainstReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: the CUDA KV-cache path not exercised";
  const int n_cases = env_int("FLASHLAB_KV_SWEEP", 300);
  std::mt19937_64 rng(static_cast<uint64_t>(env_int("FLASHLAB_KV_SEED", 7)));
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  std::normal_distribution<float> n01(0.f, 1.f);
  int failed = 0, ran = 0, ran_long = 0, ran_sq16 = 0, ran_sink_tokens = 0;
  for (int it = 0; it < n_cases && failed < 10; ++it) {
    const DType dt = chance(0.5) ? DType::kBFloat16 : DType::kFloat16;
    const int64_t d = pick({64, 128, 256, 40, 72, 200, 128, 128});
    const int64_t hk = pick({1, 2, 4}), group = pick({1, 4, 8}), hq = hk * group;
    // Long caches (8k-64k keys, issue 14's range) on a small batch and few query rows, so the CPU
    // float64 reference stays a few seconds; otherwise up to 3000 keys.
    const bool long_cache = chance(0.05);
    const int64_t B = long_cache ? 1 : pick({1, 2, 3, 5});
    const int64_t sq = chance(0.6) ? 1 : long_cache ? pick({2, 4}) : pick({2, 4, 7, 16});
    const int64_t long_len = pick({8192, 16384, 65536});
    // The fused append (k_new / v_new appended before the attention), rotary, sinks, and which
    // impl names the CUDA path (auto picks it on a CUDA device; cuda_sm90 is an alias).
    const int64_t snew = chance(0.4) ? pick({1, 1, 2, 7, 17}) : 0;
    const bool rotary = chance(0.3);
    const int64_t rot_dim = rotary ? (chance(0.5) ? d : std::max<int64_t>(2, (d / 2) & ~int64_t(1))) : 0;
    const RotaryStyle style = chance(0.5) ? RotaryStyle::kNeoX : RotaryStyle::kInterleaved;
    const bool sinks = chance(0.3);
    const Impl impl = pick({0, 0, 1, 2}) == 0 ? Impl::kAuto : chance(0.5) ? Impl::kCudaSm80 : Impl::kCudaSm90;
    const bool paged = chance(0.6);
    const int64_t page = pick({1, 3, 16, 64, 256});
    const KvLayout layout = chance(0.5) ? KvLayout::kNHD : KvLayout::kHND;
    std::vector<int32_t> lens(B), lpad(B, 0);
    const bool use_lp = chance(0.2);
    const bool causal = chance(0.5);
    int64_t maxlen = 1;
    for (int64_t b = 0; b < B; ++b) {
      lens[b] = static_cast<int32_t>(
          long_cache ? std::uniform_int_distribution<int64_t>(long_len / 2, long_len)(rng)
          : chance(0.1) ? 0
                        : std::uniform_int_distribution<int>(1, chance(0.2) ? 3000 : 300)(rng));
      if (use_lp && lens[b] > 0) lpad[b] = std::uniform_int_distribution<int>(0, lens[b])(rng);
      // causal / window / rotary need seqlen_q <= the attended length (after the append)
      if (lens[b] - lpad[b] + snew < sq) lens[b] = static_cast<int32_t>(lpad[b] + sq - snew);
      maxlen = std::max<int64_t>(maxlen, lens[b] + snew);
    }
    KvCacheParams p;
    p.device = Device::kCPU;
    p.impl = Impl::kReference;
    p.dtype = p.cache_dtype = dt;
    p.batch = B;
    p.seqlen_q = sq;
    p.heads_q = hq;
    p.heads_kv = hk;
    p.head_dim = d;
    p.causal = causal;
    if (chance(0.3)) p.window_left = pick({0, 5, 100});
    if (p.window_left >= 0 && chance(0.6)) p.sink_tokens = pick({1, 4, 70});
    if (!causal && chance(0.1)) p.window_right = pick({0, 3});
    if (chance(0.15)) p.softcap = 5.0f;
    std::vector<float> slopes;
    if (chance(0.15)) {
      for (int64_t h = 0; h < hq; ++h) slopes.push_back(std::pow(2.0f, -8.0f * (h + 1) / hq));
      p.alibi_slopes = slopes.data();
    }
    if (chance(0.3)) {
      p.split_size = pick({64, 100, 512});
    } else {
      p.num_splits = static_cast<int>(pick({0, 0, 1, 3, 7}));
    }

    // The cache, NaN everywhere, then the keys written: slots [leftpad, len).
    const uint16_t nan_bits = to_bits(NAN, dt);
    std::vector<int32_t> table, bidx;
    int64_t elems, max_pages = 0, pages = 0, rows = 0, cap;
    if (paged) {
      max_pages = (maxlen + page - 1) / page + 1;
      pages = B * max_pages + 2;
      std::vector<int32_t> perm(pages);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      table.assign(B * max_pages, 0);
      for (int64_t i = 0; i < B * max_pages; ++i) table[i] = perm[i];
      cap = max_pages * page;
      elems = pages * page * hk * d;
    } else {
      cap = maxlen + 5;
      rows = B + 1;
      for (int64_t b = 0; b < B; ++b) bidx.push_back(static_cast<int32_t>(rows - 1 - b));
      elems = rows * cap * hk * d;
    }
    std::vector<uint16_t> kc(elems, nan_bits), vc(elems, nan_bits);
    const bool use_bidx = !paged && chance(0.5);
    MutTensorRef kref = paged ? paged_cache(kc.data(), layout, page, hk, d) : contiguous(kc.data(), cap, hk, d);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = lpad[b]; s < lens[b]; ++s)
        for (int64_t h = 0; h < hk; ++h) {
          int64_t off;
          if (paged) {
            off = table[b * max_pages + s / page] * kref.batch_stride + (s % page) * kref.row_stride +
                  h * kref.head_stride;
          } else {
            off = (use_bidx ? bidx[b] : b) * kref.batch_stride + s * kref.row_stride + h * kref.head_stride;
          }
          for (int64_t e = 0; e < d; ++e) {
            kc[off + e] = to_bits(n01(rng), dt);
            vc[off + e] = to_bits(n01(rng), dt);
          }
        }
    std::vector<uint16_t> q(B * sq * hq * d), k_new(B * snew * hk * d), v_new(k_new.size());
    for (auto& x : q) x = to_bits(n01(rng), dt);
    for (auto& x : k_new) x = to_bits(n01(rng), dt);
    for (auto& x : v_new) x = to_bits(n01(rng), dt);
    // The tables' type on the GPU: fp32, bf16 or fp16 (rotary_tables).
    const int64_t max_pos = maxlen + 1;
    const DType tdt = !rotary ? DType::kFloat32 : chance(0.34) ? DType::kBFloat16 : chance(0.5) ? DType::kFloat16
                                                                                                : DType::kFloat32;
    RotaryTables tables = rotary ? rotary_tables(max_pos, rot_dim, tdt) : RotaryTables{};
    std::vector<float>&cos_t = tables.cos, &sin_t = tables.sin;
    const std::vector<uint16_t>&cos16 = tables.cos16, &sin16 = tables.sin16;
    std::vector<float> sink_v;
    for (int64_t h = 0; sinks && h < hq; ++h) sink_v.push_back(h % 3 == 2 ? -INFINITY : 1.0f + n01(rng));
    // The device caches before the reference appends into the host ones.
    Dev<uint16_t> dk(kc), dv(vc);
    std::vector<uint16_t> out_ref(q.size(), nan_bits);
    std::vector<float> lse_ref(B * hq * sq, NAN);

    p.q = contiguous(q.data(), sq, hq, d);
    p.out = contiguous(out_ref.data(), sq, hq, d);
    p.lse = lse_ref.data();
    p.lse_batch_stride = hq * sq;
    p.lse_head_stride = sq;
    p.k_cache = kref;
    p.v_cache = paged ? paged_cache(vc.data(), layout, page, hk, d) : contiguous(vc.data(), cap, hk, d);
    if (paged) {
      p.block_table = table.data();
      p.max_pages = max_pages;
      p.num_pages = pages;
      p.page_size = page;
      p.page_layout = layout;
    } else {
      p.batch_cache = rows;
      p.max_seqlen_cache = cap;
      if (use_bidx) p.cache_batch_idx = bidx.data();
    }
    p.cache_seqlens = lens.data();
    if (use_lp) p.cache_leftpad = lpad.data();
    if (snew > 0) {
      p.k_new = contiguous(k_new.data(), snew, hk, d);
      p.v_new = contiguous(v_new.data(), snew, hk, d);
      p.seqlen_new = snew;
    }
    if (rotary) {
      p.rotary_cos = cos_t.data();
      p.rotary_sin = sin_t.data();
      p.rotary_dim = rot_dim;
      p.rotary_max_pos = max_pos;
      p.rotary_style = style;
    }
    if (sinks) p.sink_logits = sink_v.data();
    const std::string what = "case " + std::to_string(it) + ": " + to_string(dt) + " d" + std::to_string(d) + " B" +
                             std::to_string(B) + " hq" + std::to_string(hq) + " hk" + std::to_string(hk) + " sq" +
                             std::to_string(sq) + (paged ? " paged" + std::to_string(page) : " contiguous") +
                             (causal ? " causal" : "") + " splits " + std::to_string(p.num_splits) + "/" +
                             std::to_string(p.split_size) + " new " + std::to_string(snew) +
                             (rotary ? " rotary" + std::to_string(rot_dim) + (style == RotaryStyle::kNeoX ? "neox" : "gptj") +
                                           " tables " + to_string(tdt)
                                     : "") +
                             (sinks ? " sinks" : "") +
                             (p.sink_tokens > 0 ? " window " + std::to_string(p.window_left) + " sink_tokens " +
                                                      std::to_string(p.sink_tokens)
                                                : "") +
                             " impl " + to_string(impl);
    Status st = attention_with_kvcache(p);
    ASSERT_TRUE(st.ok()) << what << " (reference): " << st.to_string();

    // The same on the GPU.
    Dev<uint16_t> dq(q), dkn(k_new), dvn(v_new), dout(std::vector<uint16_t>(q.size(), nan_bits));
    Dev<float> dlse(std::vector<float>(lse_ref.size(), NAN)), dslopes(slopes), dcos(cos_t), dsin(sin_t), dsink(sink_v);
    Dev<int32_t> dlens(lens), dlp(lpad), dtable(table), dbidx(bidx);
    Dev<uint16_t> dcos16(cos16), dsin16(sin16);
    KvCacheParams g = p;
    g.device = Device::kCUDA;
    g.impl = impl;
    g.q.ptr = dq.ptr;
    g.k_new.ptr = snew > 0 ? dkn.ptr : nullptr;
    g.v_new.ptr = snew > 0 ? dvn.ptr : nullptr;
    g.rotary_cos = !rotary ? nullptr : tdt == DType::kFloat32 ? static_cast<const void*>(dcos.ptr) : dcos16.ptr;
    g.rotary_sin = !rotary ? nullptr : tdt == DType::kFloat32 ? static_cast<const void*>(dsin.ptr) : dsin16.ptr;
    g.rotary_dtype = tdt;
    g.sink_logits = sinks ? dsink.ptr : nullptr;
    g.out.ptr = dout.ptr;
    g.lse = dlse.ptr;
    g.k_cache.ptr = dk.ptr;
    g.v_cache.ptr = dv.ptr;
    g.cache_seqlens = dlens.ptr;
    g.cache_leftpad = use_lp ? dlp.ptr : nullptr;
    g.block_table = paged ? dtable.ptr : nullptr;
    g.cache_batch_idx = use_bidx ? dbidx.ptr : nullptr;
    g.alibi_slopes = slopes.empty() ? nullptr : dslopes.ptr;
    int64_t ws = 0;
    st = kvcache_workspace_size(g, &ws);
    ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
    void* wsp = nullptr;
    if (ws > 0) {
      ASSERT_EQ(cudaMalloc(&wsp, ws), cudaSuccess);
    }
    g.workspace = wsp;
    g.workspace_bytes = ws;
    st = attention_with_kvcache(g);
    const cudaError_t e = cudaDeviceSynchronize();
    cudaFree(wsp);
    ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
    ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e);
    ++ran;
    ran_long += long_cache ? 1 : 0;
    ran_sq16 += sq == 16 ? 1 : 0;
    ran_sink_tokens += p.sink_tokens > 0 ? 1 : 0;
    const std::vector<uint16_t> out = dout.get(q.size());
    const std::vector<float> lse = dlse.get(lse_ref.size());
    // The fused append stores bit for bit what the reference stores (NaN slots included).
    const bool cache_same = dk.get(kc.size()) == kc && dv.get(vc.size()) == vc;
    double err2 = 0, ref2 = 0, max_abs = 0, max_ref = 0, lse_err = 0;
    bool nan = false;
    for (size_t i = 0; i < out.size(); ++i) {
      const double a = from_bits(out[i], dt), r = from_bits(out_ref[i], dt);
      if (std::isnan(a)) nan = true;
      err2 += (a - r) * (a - r);
      ref2 += r * r;
      max_abs = std::max(max_abs, std::fabs(a - r));
      max_ref = std::max(max_ref, std::fabs(r));
    }
    for (size_t i = 0; i < lse.size(); ++i) {
      if (std::isinf(lse_ref[i]) && lse[i] == lse_ref[i]) continue;
      if (std::isnan(lse[i])) nan = true;
      lse_err = std::max(lse_err, double(std::fabs(lse[i] - lse_ref[i])));
    }
    const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
    if (nan || !cache_same || rel > 2e-2 || max_abs > 4e-2 * std::max(1.0, max_ref) || lse_err > 2e-3) {
      ++failed;
      ADD_FAILURE() << what << ": rel_l2 " << rel << " max_abs " << max_abs << " lse_err " << lse_err
                    << (nan ? " NaN in the output" : "") << (cache_same ? "" : " cache differs after the append");
    }
  }
  std::printf("[ kv sweep ] kernel %s: %d cases run (%d with a 4k-64k cache, %d with seqlen_q 16, %d with sink "
              "tokens), %d failed\n",
              detail::decode_kernel_name(detail::decode_kernel()), ran, ran_long, ran_sq16, ran_sink_tokens, failed);
}

// FLASHLAB_KV_BENCH=1: decode bandwidth at issue 14's shapes, bf16, hdim 128, median of 20 timed
// calls, TB/s of K and V bytes read once. Each scenario runs under both kernels (v5, then tile:
// set_decode_kernel, same buffers and workspace), and the tile kernel's output is compared with
// v5's (max |difference|); the environment's choice is restored at the end.
//   B 32, GQA 32/8, one query, contiguous, L 1k / 4k / 16k / 64k  (the table)
//   the same at L 4k / 64k on a paged cache, pages of 16 and of 1 (NHD, pages shuffled)
//   B 1, GQA 32/8, L 128k (split-KV);  B 64, GQA 32/4, L 1k
//   seqlen_q 4 and 8 (speculative, causal bottom-right), B 32, GQA 64/8, L 8k
//   B 32, GQA 32/8, L 1k / 4k in one page per sequence, NHD and HND (HND: each head's keys contiguous)
// FLASHLAB_KV_BENCH_ONLY=N runs scenario N alone (0-based, in the order above).
struct BenchScenario {
  int64_t B, hq, hk, L, sq, page;
  KvLayout layout = KvLayout::kNHD;
};
TEST(CudaKvCache, Bandwidth) {
  if (!have_gpu() || env_int("FLASHLAB_KV_BENCH", 0) == 0) GTEST_SKIP() << "FLASHLAB_KV_BENCH=1 and a GPU";
  const detail::DecodeKernel env_kernel = detail::decode_kernel();
  const std::vector<BenchScenario> scenarios = {
      {32, 32, 8, 1024, 1, 0},  {32, 32, 8, 4096, 1, 0},  {32, 32, 8, 16384, 1, 0}, {32, 32, 8, 65536, 1, 0},
      {32, 32, 8, 4096, 1, 16}, {32, 32, 8, 65536, 1, 16}, {32, 32, 8, 4096, 1, 1},  {32, 32, 8, 65536, 1, 1},
      {1, 32, 8, 131072, 1, 0}, {64, 32, 4, 1024, 1, 0},  {32, 64, 8, 8192, 4, 0},  {32, 64, 8, 8192, 8, 0},
      {32, 32, 8, 1024, 1, 1024}, {32, 32, 8, 1024, 1, 1024, KvLayout::kHND},
      {32, 32, 8, 4096, 1, 4096}, {32, 32, 8, 4096, 1, 4096, KvLayout::kHND}};
  const int64_t only = env_int("FLASHLAB_KV_BENCH_ONLY", -1);
  for (size_t si = 0; si < scenarios.size(); ++si) {
    if (only >= 0 && int64_t(si) != only) continue;
    const BenchScenario sc = scenarios[si];
    const int64_t B = sc.B, hq = sc.hq, hk = sc.hk, d = 128, L = sc.L, sq = sc.sq, page = sc.page;
    KvCacheParams p;
    p.device = Device::kCUDA;
    p.impl = Impl::kCudaSm80;
    p.dtype = p.cache_dtype = DType::kBFloat16;
    p.batch = B;
    p.seqlen_q = sq;
    p.heads_q = hq;
    p.heads_kv = hk;
    p.head_dim = d;
    p.softmax_scale = 0.088f;
    p.causal = sq > 1;  // speculative steps: bottom-right causal against the cache
    std::vector<uint16_t> q(B * sq * hq * d, 0x3f80), kv(B * L * hk * d, 0x3c00);
    std::vector<int32_t> lens(B, static_cast<int32_t>(L));
    Dev<uint16_t> dq(q), dout(q), dk(kv), dv(kv);
    Dev<int32_t> dlens(lens);
    p.q = contiguous(dq.ptr, sq, hq, d);
    p.out = contiguous(static_cast<void*>(dout.ptr), sq, hq, d);
    std::vector<int32_t> table;
    for (int64_t i = 0; page > 0 && i < B * L / page; ++i) table.push_back(static_cast<int32_t>(i));
    std::mt19937 shuffle_rng(7);
    std::shuffle(table.begin(), table.end(), shuffle_rng);  // neighbouring pages far apart
    Dev<int32_t> dtable(table);
    if (page > 0) {
      p.k_cache = paged_cache(static_cast<void*>(dk.ptr), sc.layout, page, hk, d);
      p.v_cache = paged_cache(static_cast<void*>(dv.ptr), sc.layout, page, hk, d);
      p.block_table = dtable.ptr;
      p.max_pages = L / page;
      p.num_pages = B * L / page;
      p.page_size = page;
      p.page_layout = sc.layout;
    } else {
      p.k_cache = contiguous(static_cast<void*>(dk.ptr), L, hk, d);
      p.v_cache = contiguous(static_cast<void*>(dv.ptr), L, hk, d);
      p.max_seqlen_cache = L;
    }
    p.cache_seqlens = dlens.ptr;
    int64_t ws = 0;
    ASSERT_TRUE(kvcache_workspace_size(p, &ws).ok());
    void* wsp = nullptr;
    if (ws > 0) {
      ASSERT_EQ(cudaMalloc(&wsp, ws), cudaSuccess);
    }
    p.workspace = wsp;
    p.workspace_bytes = ws;
    cudaEvent_t a, z;
    cudaEventCreate(&a);
    cudaEventCreate(&z);
    std::vector<uint16_t> out_v5;
    for (const detail::DecodeKernel kernel : {detail::DecodeKernel::kV5, detail::DecodeKernel::kTile}) {
      detail::set_decode_kernel(kernel);
      std::vector<float> ms;
      for (int r = 0; r < 25; ++r) {
        cudaEventRecord(a);
        const Status st = attention_with_kvcache(p);
        ASSERT_TRUE(st.ok()) << st.to_string();
        cudaEventRecord(z);
        cudaEventSynchronize(z);
        float t = 0;
        cudaEventElapsedTime(&t, a, z);
        if (r >= 5) ms.push_back(t);
      }
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << detail::decode_kernel_name(kernel);
      const std::vector<uint16_t> out = dout.get(q.size());
      double diff = 0;
      if (kernel == detail::DecodeKernel::kV5) {
        out_v5 = out;
      } else {
        for (size_t i = 0; i < out.size(); ++i) {
          const double d = std::fabs(double(from_bits(out[i], DType::kBFloat16)) -
                                     double(from_bits(out_v5[i], DType::kBFloat16)));
          diff = std::isnan(d) ? INFINITY : std::max(diff, d);
        }
      }
      std::sort(ms.begin(), ms.end());
      const double bytes = 2.0 * B * L * hk * d * 2;
      std::printf("[ kv bench ] %-4s B %lld GQA %lld/%lld d %lld L %lld sq %lld page %lld%s: %.3f ms, %.2f TB/s "
                  "(workspace %lld B)",
                  detail::decode_kernel_name(kernel), (long long)B, (long long)hq, (long long)hk,
                  (long long)d, (long long)L, (long long)sq, (long long)page,
                  sc.layout == KvLayout::kHND ? " HND" : "", ms[ms.size() / 2],
                  bytes / (ms[ms.size() / 2] * 1e-3) / 1e12, (long long)ws);
      if (kernel == detail::DecodeKernel::kTile) std::printf(", max |tile - v5| %.3g", diff);
      std::printf("\n");
      EXPECT_LE(diff, 1e-2) << "scenario " << si << ": the tile kernel's output differs from v5's";
    }
    detail::set_decode_kernel(env_kernel);
    cudaEventDestroy(a);
    cudaEventDestroy(z);
    cudaFree(wsp);
  }
}

// ---- helpers for the tests below: element buffers of any dtype (bf16 / fp16 as bits, fp32 as float)
size_t esize(DType dt) { return dt == DType::kFloat32 ? 4 : 2; }
void put(std::vector<uint8_t>& buf, int64_t i, float x, DType dt) {
  if (dt == DType::kFloat32) {
    std::memcpy(&buf[i * 4], &x, 4);
  } else {
    const uint16_t b = to_bits(x, dt);
    std::memcpy(&buf[i * 2], &b, 2);
  }
}
float get(const std::vector<uint8_t>& buf, int64_t i, DType dt) {
  if (dt == DType::kFloat32) {
    float x;
    std::memcpy(&x, &buf[i * 4], 4);
    return x;
  }
  uint16_t b;
  std::memcpy(&b, &buf[i * 2], 2);
  return from_bits(b, dt);
}

// The CPU reference's params of an append (one query per sequence, heads_q = heads_kv).
KvCacheParams cpu_append_params(DType dt, int64_t batch, int64_t heads_kv, int64_t head_dim) {
  KvCacheParams p;
  p.device = Device::kCPU;
  p.impl = Impl::kReference;
  p.dtype = p.cache_dtype = dt;
  p.batch = batch;
  p.seqlen_q = 1;
  p.heads_q = p.heads_kv = heads_kv;
  p.head_dim = head_dim;
  return p;
}
// kvcache_append with the CPU params, then with the GPU's; both must succeed (ASSERT_NO_FATAL_FAILURE
// at the call site stops the test otherwise).
void run_append_pair(const KvCacheParams& cpu, const KvCacheParams& gpu, const std::string& what) {
  Status st = kvcache_append(cpu);
  ASSERT_TRUE(st.ok()) << what << " (cpu): " << st.to_string();
  st = kvcache_append(gpu);
  const cudaError_t e = cudaDeviceSynchronize();
  ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
  ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e);
}

// kvcache_append alone, CUDA against the CPU (kv::append) on copies of the same cache: the whole
// cache must come back bit for bit (the new slots, and every other slot still NaN or as it was).
// bf16 / fp16 / fp32; head dims with 16-byte rows (the vector path) and without (36, 20 in 16 bits:
// the scalar path), and k_new with a padded head stride (scalar path); rotary off / NeoX /
// interleaved, rotary_dim = head_dim, half of it, or 2; paged page sizes 1, 3, 16, 64, 256 in NHD
// and HND; contiguous with and without cache_batch_idx; leftpad; seqlen_new 1..33.
TEST(CudaKvCache, AppendSweep) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int n_cases = env_int("FLASHLAB_KV_APPEND_SWEEP", 200);
  std::mt19937_64 rng(static_cast<uint64_t>(env_int("FLASHLAB_KV_SEED", 7)) + 1000);
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  auto chance = [&](double pr) { return std::uniform_real_distribution<double>(0, 1)(rng) < pr; };
  std::normal_distribution<float> n01(0.f, 1.f);
  int failed = 0;
  for (int it = 0; it < n_cases && failed < 10; ++it) {
    const DType dt = pick({0, 1, 2}) == 0 ? DType::kFloat32 : chance(0.5) ? DType::kBFloat16 : DType::kFloat16;
    const int64_t d = pick({64, 128, 256, 40, 72, 200, 36, 20, 128});
    const int64_t hk = pick({1, 2, 4, 8}), B = pick({1, 2, 3, 5}), snew = pick({1, 1, 2, 7, 17, 33});
    const bool paged = chance(0.6);
    const int64_t page = pick({1, 3, 16, 64, 256});
    const KvLayout layout = chance(0.5) ? KvLayout::kNHD : KvLayout::kHND;
    const bool use_lp = chance(0.3), use_bidx = !paged && chance(0.5), pad_new = chance(0.2);
    const int rot = static_cast<int>(pick({0, 1, 2}));  // off, NeoX, interleaved
    const int64_t rot_dim = rot == 0 ? 0 : pick({d, std::max<int64_t>(2, (d / 2) & ~int64_t(1)), 2});
    std::vector<int32_t> lens(B), lpad(B, 0);
    int64_t maxlen = 1;
    for (int64_t b = 0; b < B; ++b) {
      lens[b] = std::uniform_int_distribution<int>(0, chance(0.2) ? 1500 : 120)(rng);
      if (use_lp && lens[b] > 0) lpad[b] = std::uniform_int_distribution<int>(0, lens[b])(rng);
      maxlen = std::max<int64_t>(maxlen, lens[b] + snew);
    }
    KvCacheParams p = cpu_append_params(dt, B, hk, d);
    std::vector<int32_t> table, bidx;
    int64_t elems, max_pages = 0, pages = 0, rows = 0, cap = 0;
    if (paged) {
      max_pages = (maxlen + page - 1) / page + 1;
      pages = B * max_pages + 2;
      std::vector<int32_t> perm(pages);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      table.assign(perm.begin(), perm.begin() + B * max_pages);
      cap = max_pages * page;
      elems = pages * page * hk * d;
    } else {
      cap = maxlen + 3;
      rows = B + 1;
      for (int64_t b = 0; b < B; ++b) bidx.push_back(static_cast<int32_t>(rows - 1 - b));
      elems = rows * cap * hk * d;
    }
    const size_t es = esize(dt);
    std::vector<uint8_t> kc(elems * es), vc(elems * es);
    for (int64_t e = 0; e < elems; ++e) {  // old contents: random here and there, NaN elsewhere
      put(kc, e, chance(0.3) ? n01(rng) : NAN, dt);
      put(vc, e, chance(0.3) ? n01(rng) : NAN, dt);
    }
    const int64_t new_hs = pad_new ? d + 1 : d;  // a padded head stride: no 16-byte rows
    std::vector<uint8_t> kn(B * snew * hk * new_hs * es), vn(kn.size());
    for (int64_t e = 0; e < B * snew * hk * new_hs; ++e) {
      put(kn, e, n01(rng), dt);
      put(vn, e, n01(rng), dt);
    }
    // The tables' type on the GPU (fp32, bf16, fp16; rotary_tables).
    const DType tdt = !rot ? DType::kFloat32 : chance(0.34) ? DType::kBFloat16 : chance(0.5) ? DType::kFloat16
                                                                                             : DType::kFloat32;
    RotaryTables tables = rot ? rotary_tables(maxlen + 1, rot_dim, tdt) : RotaryTables{};
    std::vector<float>&cos_t = tables.cos, &sin_t = tables.sin;
    const std::vector<uint16_t>&cos16 = tables.cos16, &sin16 = tables.sin16;
    Dev<uint8_t> dk(kc), dv(vc), dkn(kn), dvn(vn);
    Dev<int32_t> dlens(lens), dlp(lpad), dtable(table), dbidx(bidx);
    Dev<float> dcos(cos_t), dsin(sin_t);
    Dev<uint16_t> dcos16(cos16), dsin16(sin16);
    auto fill = [&](KvCacheParams& q, void* k, void* v, const void* knp, const void* vnp) {
      if (paged) {
        q.k_cache = paged_cache(k, layout, page, hk, d);
        q.v_cache = paged_cache(v, layout, page, hk, d);
        q.max_pages = max_pages;
        q.num_pages = pages;
        q.page_size = page;
        q.page_layout = layout;
      } else {
        q.k_cache = contiguous(k, cap, hk, d);
        q.v_cache = contiguous(v, cap, hk, d);
        q.batch_cache = rows;
        q.max_seqlen_cache = cap;
      }
      q.k_new = TensorRef{knp, snew * hk * new_hs, hk * new_hs, new_hs, 1};
      q.v_new = TensorRef{vnp, snew * hk * new_hs, hk * new_hs, new_hs, 1};
      q.seqlen_new = snew;
      if (rot) {
        q.rotary_dim = rot_dim;
        q.rotary_max_pos = maxlen + 1;
        q.rotary_style = rot == 1 ? RotaryStyle::kNeoX : RotaryStyle::kInterleaved;
      }
    };
    fill(p, kc.data(), vc.data(), kn.data(), vn.data());
    p.cache_seqlens = lens.data();
    p.cache_leftpad = use_lp ? lpad.data() : nullptr;
    p.block_table = paged ? table.data() : nullptr;
    p.cache_batch_idx = use_bidx ? bidx.data() : nullptr;
    p.rotary_cos = rot ? cos_t.data() : nullptr;
    p.rotary_sin = rot ? sin_t.data() : nullptr;
    KvCacheParams g = p;
    fill(g, dk.ptr, dv.ptr, dkn.ptr, dvn.ptr);
    g.device = Device::kCUDA;
    g.impl = Impl::kAuto;
    g.cache_seqlens = dlens.ptr;
    g.cache_leftpad = use_lp ? dlp.ptr : nullptr;
    g.block_table = paged ? dtable.ptr : nullptr;
    g.cache_batch_idx = use_bidx ? dbidx.ptr : nullptr;
    g.rotary_cos = !rot ? nullptr : tdt == DType::kFloat32 ? static_cast<const void*>(dcos.ptr) : dcos16.ptr;
    g.rotary_sin = !rot ? nullptr : tdt == DType::kFloat32 ? static_cast<const void*>(dsin.ptr) : dsin16.ptr;
    g.rotary_dtype = tdt;
    const std::string what = "append case " + std::to_string(it) + ": " + to_string(dt) + " d" + std::to_string(d) +
                             " B" + std::to_string(B) + " hk" + std::to_string(hk) + " new" + std::to_string(snew) +
                             (paged ? " paged" + std::to_string(page) + (layout == KvLayout::kNHD ? "NHD" : "HND")
                                    : " contiguous") +
                             (use_bidx ? " bidx" : "") + (use_lp ? " leftpad" : "") + (pad_new ? " padded" : "") +
                             " rotary " + std::to_string(rot) + "/" + std::to_string(rot_dim) + " tables " + to_string(tdt);
    ASSERT_NO_FATAL_FAILURE(run_append_pair(p, g, what));
    if (dk.get(kc.size()) != kc || dv.get(vc.size()) != vc) {
      ++failed;
      ADD_FAILURE() << what << ": the cache differs from the CPU append";
    }
  }
  std::printf("[ kv append sweep ] %d cases, %d failed\n", n_cases, failed);
}

// The rotation's rounding near the dtype's rounding boundaries (append_kernel.cuh, dot2_to_dtype:
// fp32 arithmetic where it decides the rounding, the double computation where it cannot). Keys of
// powers of two (and ±0, and random values) and cos entries 1 + an odd multiple of half a bf16 /
// fp16 ulp make x0·cos a tie of the dtype; sin entries of 0 (exact ties) and of ±2^-16 ... 2^-130
// put the exact value just above or below it, on both sides of where the fp32 answer stops being
// trusted. The cache must equal the CPU append's bit for bit: bf16 and fp16, NeoX and interleaved,
// head dim 128 (vectors) and 36 (element by element).
TEST(CudaKvCache, AppendRotaryNearTies) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(static_cast<uint64_t>(env_int("FLASHLAB_KV_SEED", 7)) + 3000);
  auto uni = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  std::normal_distribution<float> n01(0.f, 1.f);
  const int64_t B = 2, hk = 2, snew = 64, max_pos = 80;
  const std::vector<int32_t> lens = {0, 5};
  const int sin_exps[] = {16, 18, 20, 21, 22, 23, 24, 25, 26, 30, 40, 60, 100, 130};
  int failed = 0, cases = 0;
  for (DType dt : {DType::kBFloat16, DType::kFloat16})
    for (int64_t d : {128, 36})
      for (RotaryStyle style : {RotaryStyle::kNeoX, RotaryStyle::kInterleaved}) {
        ++cases;
        const int64_t half = d / 2, cap = max_pos;
        std::vector<float> cos_t(max_pos * half), sin_t(max_pos * half);
        for (size_t i = 0; i < cos_t.size(); ++i) {
          const int odd = 2 * uni(16) + 1;
          const int kind = uni(5);
          cos_t[i] = kind == 0 ? 1.0f + odd * 0x1p-8f                            // bf16 ties (x a power of 2)
                     : kind == 1 ? 1.0f + odd * 0x1p-11f                         // fp16 ties
                     : kind == 2 ? -(0.5f + odd * 0x1p-9f)                       // bf16 ties, negative
                     : kind == 3 ? 0.5f + odd * 0x1p-12f                         // fp16 ties
                                 : std::uniform_real_distribution<float>(-1, 1)(rng);
          const int sk = uni(4);
          sin_t[i] = sk == 0 ? 0.0f
                     : sk == 3 ? std::uniform_real_distribution<float>(-1, 1)(rng)
                               : (uni(2) ? 1.0f : -1.0f) * std::ldexp(1.0f, -sin_exps[uni(14)]) * (1 + uni(3));
        }
        const size_t es = esize(dt);
        const int64_t elems = B * cap * hk * d;
        std::vector<uint8_t> kc(elems * es), vc(elems * es), kn(B * snew * hk * d * es), vn(kn.size());
        for (int64_t e = 0; e < elems; ++e) {
          put(kc, e, NAN, dt);
          put(vc, e, NAN, dt);
        }
        for (int64_t e = 0; e < B * snew * hk * d; ++e) {
          const int kind = uni(8);
          const float x = kind < 5 ? (uni(2) ? 1.0f : -1.0f) * std::ldexp(1.0f, uni(9) - 4)
                          : kind == 5 ? (uni(2) ? 0.0f : -0.0f)
                                      : n01(rng);
          put(kn, e, x, dt);
          put(vn, e, n01(rng), dt);
        }
        Dev<uint8_t> dk(kc), dv(vc), dkn(kn), dvn(vn);
        Dev<int32_t> dlens(lens);
        Dev<float> dcos(cos_t), dsin(sin_t);
        KvCacheParams p = cpu_append_params(dt, B, hk, d);
        p.batch_cache = B;
        p.max_seqlen_cache = cap;
        p.seqlen_new = snew;
        p.rotary_dim = d;
        p.rotary_max_pos = max_pos;
        p.rotary_style = style;
        KvCacheParams g = p;
        p.k_cache = contiguous(kc.data(), cap, hk, d);
        p.v_cache = contiguous(vc.data(), cap, hk, d);
        p.k_new = contiguous(static_cast<const void*>(kn.data()), snew, hk, d);
        p.v_new = contiguous(static_cast<const void*>(vn.data()), snew, hk, d);
        p.cache_seqlens = lens.data();
        p.rotary_cos = cos_t.data();
        p.rotary_sin = sin_t.data();
        g.device = Device::kCUDA;
        g.impl = Impl::kAuto;
        g.k_cache = contiguous(static_cast<void*>(dk.ptr), cap, hk, d);
        g.v_cache = contiguous(static_cast<void*>(dv.ptr), cap, hk, d);
        g.k_new = contiguous(static_cast<const void*>(dkn.ptr), snew, hk, d);
        g.v_new = contiguous(static_cast<const void*>(dvn.ptr), snew, hk, d);
        g.cache_seqlens = dlens.ptr;
        g.rotary_cos = dcos.ptr;
        g.rotary_sin = dsin.ptr;
        g.rotary_dtype = DType::kFloat32;
        const std::string what = std::string("near ties: ") + to_string(dt) + " d" + std::to_string(d) +
                                 (style == RotaryStyle::kNeoX ? " NeoX" : " interleaved");
        ASSERT_NO_FATAL_FAILURE(run_append_pair(p, g, what));
        const std::vector<uint8_t> got = dk.get(kc.size());
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < elems; ++i)
          if (std::memcmp(&got[i * es], &kc[i * es], es) != 0 && bad++ == 0) first = i;
        if (bad > 0 || dv.get(vc.size()) != vc) {
          ++failed;
          ADD_FAILURE() << what << ": " << bad << " K elements differ from the CPU append (first at " << first
                        << ": GPU " << get(got, first < 0 ? 0 : first, dt) << ", CPU "
                        << get(kc, first < 0 ? 0 : first, dt) << ")";
        }
      }
  std::printf("[ kv append near ties ] %d cases, %d failed\n", cases, failed);
}

// attention_combine on CUDA against the CPU reference_combine: random split counts (1..64),
// empty splits (-inf) and all-empty rows, strided outputs, fp32 / bf16 / fp16 out.
TEST(CudaKvCache, CombineSweep) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const int n_cases = env_int("FLASHLAB_KV_COMBINE_SWEEP", 100);
  std::mt19937_64 rng(static_cast<uint64_t>(env_int("FLASHLAB_KV_SEED", 7)) + 2000);
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  std::uniform_real_distribution<double> u01(0, 1);
  std::normal_distribution<float> n01(0.f, 1.f);
  int failed = 0;
  for (int it = 0; it < n_cases && failed < 10; ++it) {
    const DType dt = pick({0, 1, 2}) == 0 ? DType::kFloat32 : u01(rng) < 0.5 ? DType::kBFloat16 : DType::kFloat16;
    const int64_t S = pick({1, 2, 3, 7, 17, 64}), B = pick({1, 2, 3}), Q = pick({1, 2, 5}), H = pick({1, 4, 8}),
                  D = pick({8, 40, 64, 128, 130, 256});
    std::vector<float> op(S * B * Q * H * D), lp(S * B * H * Q);
    for (float& x : op) x = n01(rng);
    for (float& x : lp) x = u01(rng) < 0.2 ? -INFINITY : 4.f * n01(rng);
    for (int64_t s = 0; s < S; ++s) lp[((s * B + 0) * H + 0) * Q + (Q - 1)] = -INFINITY;  // one all-empty row
    const int64_t out_hs = D + 8;  // a padded head stride in the output
    const size_t es = esize(dt);
    std::vector<uint8_t> out_ref(B * Q * H * out_hs * es), out0(out_ref.size());
    for (int64_t e = 0; e < B * Q * H * out_hs; ++e) put(out0, e, NAN, dt);
    out_ref = out0;
    std::vector<float> lse_ref(B * H * Q, NAN);
    CombineParams c;
    c.dtype = dt;
    c.num_splits = S;
    c.batch = B;
    c.seqlen_q = Q;
    c.heads = H;
    c.head_dim = D;
    c.out_partial = op.data();
    c.out_partial_head_stride = D;
    c.out_partial_row_stride = H * D;
    c.out_partial_batch_stride = Q * H * D;
    c.out_partial_split_stride = B * Q * H * D;
    c.lse_partial = lp.data();
    c.lse_partial_head_stride = Q;
    c.lse_partial_batch_stride = H * Q;
    c.lse_partial_split_stride = B * H * Q;
    c.out = MutTensorRef{out_ref.data(), Q * H * out_hs, H * out_hs, out_hs, 1};
    c.lse = lse_ref.data();
    c.lse_head_stride = Q;
    c.lse_batch_stride = H * Q;
    ASSERT_TRUE(attention_combine(c).ok());
    Dev<float> dop(op), dlp(lp), dlse(std::vector<float>(lse_ref.size(), NAN));
    Dev<uint8_t> dout(out0);
    CombineParams g = c;
    g.device = Device::kCUDA;
    g.out_partial = dop.ptr;
    g.lse_partial = dlp.ptr;
    g.out.ptr = dout.ptr;
    g.lse = dlse.ptr;
    const Status st = attention_combine(g);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint8_t> out = dout.get(out0.size());
    const std::vector<float> lse = dlse.get(lse_ref.size());
    // fp32 arithmetic against float64 rounded to the dtype: a few fp32 ulps, or one ulp of the
    // 16-bit dtype (plus the fp32 error that can tip a rounding); the padding must stay NaN.
    const double ulp = dt == DType::kFloat32 ? 0.0 : dt == DType::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
    double worst = 0;
    bool bad = false;
    for (int64_t r = 0; r < B * Q * H; ++r)
      for (int64_t e = 0; e < out_hs; ++e) {
        const float a = get(out, r * out_hs + e, dt), x = get(out_ref, r * out_hs + e, dt);
        if (e >= D) {
          bad |= !std::isnan(a);
          continue;
        }
        if (std::isnan(a)) bad = true;
        const double tol = 1e-5 * (1 + std::fabs(x)) + ulp * std::fabs(x);
        worst = std::max(worst, std::fabs(double(a) - x) / tol);
      }
    for (size_t i = 0; i < lse.size(); ++i) {
      if (std::isinf(lse_ref[i])) {
        bad |= lse[i] != lse_ref[i];
      } else {
        worst = std::max(worst, std::fabs(double(lse[i]) - lse_ref[i]) / (1e-5 * (1 + std::fabs(lse_ref[i]))));
      }
    }
    if (bad || worst > 1.0) {
      ++failed;
      ADD_FAILURE() << "combine case " << it << " " << to_string(dt) << " S" << S << " B" << B << " Q" << Q << " H"
                    << H << " D" << D << ": worst error / tolerance " << worst << (bad ? " (NaN or padding written)" : "");
    }
  }
  std::printf("[ kv combine sweep ] %d cases, %d failed\n", n_cases, failed);
}

// One decode problem on the GPU (contiguous cache, bf16; 17 / 113 / 1023 keys, GQA 8/2), from
// host data; the fields a test varies are set by `tweak` on the CUDA params.
struct GpuProblem {
  int64_t B = 3, hq = 8, hk = 2, d = 128, cap = 1100, sq = 1, snew = 1;
  DType dt = DType::kBFloat16;
  std::vector<int32_t> lens{17, 113, 1023 - 1};
  std::vector<uint16_t> q, kc, vc, kn, vn;
  std::vector<float> sinks, cos_t, sin_t;
  KvCacheParams host;  // device kCPU, impl reference, host pointers
  explicit GpuProblem(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> n01(0.f, 1.f);
    const uint16_t nan_bits = to_bits(NAN, dt);
    q.resize(B * sq * hq * d);
    kn.resize(B * snew * hk * d);
    vn.resize(kn.size());
    kc.assign(B * cap * hk * d, nan_bits);
    vc = kc;
    for (auto* v : {&q, &kn, &vn})
      for (auto& x : *v) x = to_bits(n01(rng), dt);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t e = 0; e < lens[b] * hk * d; ++e) {
        kc[b * cap * hk * d + e] = to_bits(n01(rng), dt);
        vc[b * cap * hk * d + e] = to_bits(n01(rng), dt);
      }
    for (int64_t h = 0; h < hq; ++h) sinks.push_back(h == 3 ? -INFINITY : 2.0f + n01(rng));
    RotaryTables t = rotary_tables(cap + 1, d);
    cos_t = std::move(t.cos);
    sin_t = std::move(t.sin);
    host.device = Device::kCPU;
    host.impl = Impl::kReference;
    host.dtype = host.cache_dtype = dt;
    host.batch = B;
    host.seqlen_q = sq;
    host.heads_q = hq;
    host.heads_kv = hk;
    host.head_dim = d;
    host.causal = true;
    host.max_seqlen_cache = cap;
    host.seqlen_new = snew;
    host.rotary_dim = d;
    host.rotary_max_pos = cap + 1;
    host.rotary_style = RotaryStyle::kNeoX;
  }
  // p's pointers set to the given buffers (host or device).
  void point(KvCacheParams* p, const void* qp, void* out, float* lse, void* k, void* v, const void* knp,
             const void* vnp, const int32_t* seqlens, const float* sink, const float* cs, const float* sn) const {
    p->q = contiguous(qp, sq, hq, d);
    p->out = contiguous(out, sq, hq, d);
    p->lse = lse;
    p->lse_batch_stride = hq * sq;
    p->lse_head_stride = sq;
    p->k_cache = contiguous(k, cap, hk, d);
    p->v_cache = contiguous(v, cap, hk, d);
    p->k_new = contiguous(knp, snew, hk, d);
    p->v_new = contiguous(vnp, snew, hk, d);
    p->cache_seqlens = seqlens;
    p->sink_logits = sink;
    p->rotary_cos = cs;
    p->rotary_sin = sn;
  }
};

// Runs p on the device, allocating its workspace; false on a failed call (reported).
bool run_gpu(KvCacheParams p, const std::string& what) {
  int64_t ws = 0;
  Status st = kvcache_workspace_size(p, &ws);
  if (!st.ok()) {
    ADD_FAILURE() << what << ": workspace: " << st.to_string();
    return false;
  }
  void* wsp = nullptr;
  if (ws > 0 && cudaMalloc(&wsp, ws) != cudaSuccess) return false;
  p.workspace = wsp;
  p.workspace_bytes = ws;
  st = attention_with_kvcache(p);
  const cudaError_t e = cudaDeviceSynchronize();
  cudaFree(wsp);
  if (!st.ok() || e != cudaSuccess) {
    ADD_FAILURE() << what << ": " << st.to_string() << " / " << cudaGetErrorString(e);
    return false;
  }
  return true;
}

// Sinks with the fused append + rotary (NeoX, full head dim) under splits 1, 7 and auto, and
// under both kernels: each against the float64 reference; the split settings agree closely.
// One GpuProblem against the CPU reference under splits 1, 7 and auto, both kernels; `tweak` sets
// the feature under test on the host params (the device params copy it).
void check_every_split_setting(uint64_t seed, void (*tweak)(KvCacheParams*)) {
  GpuProblem pr(seed);
  tweak(&pr.host);
  const size_t n_out = pr.q.size(), n_lse = pr.B * pr.hq * pr.sq;
  std::vector<uint16_t> kc_ref = pr.kc, vc_ref = pr.vc, out_ref(n_out);
  std::vector<float> lse_ref(n_lse);
  KvCacheParams h = pr.host;
  pr.point(&h, pr.q.data(), out_ref.data(), lse_ref.data(), kc_ref.data(), vc_ref.data(), pr.kn.data(), pr.vn.data(),
           pr.lens.data(), pr.sinks.data(), pr.cos_t.data(), pr.sin_t.data());
  ASSERT_TRUE(attention_with_kvcache(h).ok());
  const detail::DecodeKernel env_kernel = detail::decode_kernel();
  for (const detail::DecodeKernel kernel : {detail::DecodeKernel::kTile, detail::DecodeKernel::kV5}) {
    detail::set_decode_kernel(kernel);
    for (int splits : {1, 7, 0}) {
      const uint16_t nan_bits = to_bits(NAN, pr.dt);
      Dev<uint16_t> dq(pr.q), dk(pr.kc), dv(pr.vc), dkn(pr.kn), dvn(pr.vn), dout(std::vector<uint16_t>(n_out, nan_bits));
      Dev<float> dlse(std::vector<float>(n_lse, NAN)), dsink(pr.sinks), dcos(pr.cos_t), dsin(pr.sin_t);
      Dev<int32_t> dlens(pr.lens);
      KvCacheParams g = pr.host;
      g.device = Device::kCUDA;
      g.impl = Impl::kAuto;
      g.num_splits = splits;
      pr.point(&g, dq.ptr, dout.ptr, dlse.ptr, dk.ptr, dv.ptr, dkn.ptr, dvn.ptr, dlens.ptr, dsink.ptr, dcos.ptr, dsin.ptr);
      const std::string what = std::string(detail::decode_kernel_name(kernel)) + " splits " + std::to_string(splits);
      if (!run_gpu(g, what)) continue;
      EXPECT_TRUE(dk.get(pr.kc.size()) == kc_ref && dv.get(pr.vc.size()) == vc_ref) << what << ": cache after the append";
      const std::vector<uint16_t> out = dout.get(n_out);
      const std::vector<float> lse = dlse.get(n_lse);
      double max_abs = 0, lse_err = 0;
      for (size_t i = 0; i < n_out; ++i) {
        const double a = from_bits(out[i], pr.dt), r = from_bits(out_ref[i], pr.dt);
        max_abs = std::isnan(a) ? INFINITY : std::max(max_abs, std::fabs(a - r));
      }
      for (size_t i = 0; i < n_lse; ++i)
        lse_err = std::isnan(lse[i]) ? INFINITY : std::max(lse_err, double(std::fabs(lse[i] - lse_ref[i])));
      EXPECT_LE(max_abs, 2e-2) << what;
      EXPECT_LE(lse_err, 2e-3) << what;
    }
  }
  detail::set_decode_kernel(env_kernel);
}

TEST(CudaKvCache, SinksEverySplitSetting) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  check_every_split_setting(21, [](KvCacheParams*) {});
}

// impl auto on a CUDA device runs the CUDA path: bitwise what cuda_sm80 and cuda_sm90 (an alias)
// give; impl reference / cpu_flash on a CUDA device are refused (kUnsupported) with nothing written.
TEST(CudaKvCache, AutoDispatch) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  GpuProblem pr(5);
  const size_t n_out = pr.q.size(), n_lse = pr.B * pr.hq * pr.sq;
  std::vector<std::vector<uint16_t>> outs;
  for (const Impl impl : {Impl::kAuto, Impl::kCudaSm80, Impl::kCudaSm90, Impl::kReference, Impl::kCpuFlash}) {
    const uint16_t nan_bits = to_bits(NAN, pr.dt);
    Dev<uint16_t> dq(pr.q), dk(pr.kc), dv(pr.vc), dkn(pr.kn), dvn(pr.vn), dout(std::vector<uint16_t>(n_out, nan_bits));
    Dev<float> dlse(std::vector<float>(n_lse, NAN)), dsink(pr.sinks), dcos(pr.cos_t), dsin(pr.sin_t);
    Dev<int32_t> dlens(pr.lens);
    KvCacheParams g = pr.host;
    g.device = Device::kCUDA;
    g.impl = impl;
    pr.point(&g, dq.ptr, dout.ptr, dlse.ptr, dk.ptr, dv.ptr, dkn.ptr, dvn.ptr, dlens.ptr, dsink.ptr, dcos.ptr, dsin.ptr);
    if (impl == Impl::kReference || impl == Impl::kCpuFlash) {
      const Status st = attention_with_kvcache(g);
      EXPECT_EQ(st.code(), StatusCode::kUnsupported) << to_string(impl) << ": " << st.to_string();
      EXPECT_TRUE(dk.get(pr.kc.size()) == pr.kc) << to_string(impl) << ": cache written";
      continue;
    }
    ASSERT_TRUE(run_gpu(g, to_string(impl)));
    outs.push_back(dout.get(n_out));
  }
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_TRUE(outs[0] == outs[1]) << "auto and cuda_sm80 differ";
  EXPECT_TRUE(outs[0] == outs[2]) << "auto and cuda_sm90 differ";
}

TEST(CudaKvCache, SinkTokensEverySplitSetting) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  // StreamingLLM sink tokens (the sink split, decode_kernel.cuh) beside a window of 4 keys, with
  // the learnable sinks of GpuProblem; the caches hold 17 / 113 / 1022 keys + 1 appended.
  check_every_split_setting(22, [](KvCacheParams* p) {
    p->window_left = 4;
    p->sink_tokens = 3;
  });
  // More sink tokens than the shortest sequence's keys, a wider window.
  check_every_split_setting(23, [](KvCacheParams* p) {
    p->window_left = 40;
    p->sink_tokens = 70;
  });
}

// Bad inputs: an error Status and not a byte of the cache, out or lse written. Host-checkable rules
// always; device data (cache_seqlens, block_table, leftpad) with check_device_data. Without it the
// standalone append's guard still writes nothing for a sequence that does not fit.
TEST(CudaKvCache, BadInputsWriteNothing) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  GpuProblem pr(9);
  struct Bad {
    const char* what;
    void (*mutate)(KvCacheParams&, std::vector<int32_t>& lens, std::vector<int32_t>& table);
    bool paged;
    const char* message;
  };
  const Bad cases[] = {
      {"page_size 0", [](KvCacheParams& p, std::vector<int32_t>&, std::vector<int32_t>&) { p.page_size = 0; }, true,
       "page_size (0)"},
      {"dtype mismatch",
       [](KvCacheParams& p, std::vector<int32_t>&, std::vector<int32_t>&) { p.cache_dtype = DType::kFloat16; }, false,
       "cache_dtype (fp16) must equal dtype (bf16)"},
      {"append longer than the cache",
       [](KvCacheParams& p, std::vector<int32_t>&, std::vector<int32_t>&) { p.seqlen_new = p.max_seqlen_cache + 1; },
       false, "cache too short"},
      {"cache too short (device data)",
       [](KvCacheParams& p, std::vector<int32_t>& lens, std::vector<int32_t>&) {
         p.check_device_data = true;
         lens[1] = static_cast<int32_t>(p.max_seqlen_cache);
       },
       false, "cache too short for the append: cache_seqlens[1]"},
      {"page entry out of range (device data)",
       [](KvCacheParams& p, std::vector<int32_t>&, std::vector<int32_t>& table) {
         p.check_device_data = true;
         table[1] = static_cast<int32_t>(p.num_pages);  // sequence 0's second page (18 slots)
       },
       true, "block_table[0][1]"},
  };
  for (const Bad& c : cases) {
    std::vector<int32_t> lens = pr.lens, table;
    const int64_t page = 16, max_pages = pr.cap / page;
    for (int64_t i = 0; i < pr.B * max_pages; ++i) table.push_back(static_cast<int32_t>(i));
    const uint16_t nan_bits = to_bits(NAN, pr.dt);
    Dev<uint16_t> dq(pr.q), dk(pr.kc), dv(pr.vc), dkn(pr.kn), dvn(pr.vn), dout(std::vector<uint16_t>(pr.q.size(), nan_bits));
    Dev<float> dlse(std::vector<float>(pr.B * pr.hq, NAN)), dcos(pr.cos_t), dsin(pr.sin_t);
    KvCacheParams g = pr.host;
    g.device = Device::kCUDA;
    g.impl = Impl::kAuto;
    if (c.paged) {
      g.block_table = nullptr;  // set below, after the mutation of the host table
      g.max_pages = max_pages;
      g.num_pages = pr.B * max_pages;
      g.page_size = page;
    }
    c.mutate(g, lens, table);
    Dev<int32_t> dlens(lens), dtable(table);
    pr.point(&g, dq.ptr, dout.ptr, dlse.ptr, dk.ptr, dv.ptr, dkn.ptr, dvn.ptr, dlens.ptr, nullptr, dcos.ptr, dsin.ptr);
    if (c.paged) {
      // the same bytes seen as 16-slot pages of a (B · max_pages, 16, hk, d) cache
      g.k_cache = paged_cache(dk.ptr, KvLayout::kNHD, page, pr.hk, pr.d);
      g.v_cache = paged_cache(dv.ptr, KvLayout::kNHD, page, pr.hk, pr.d);
      g.block_table = dtable.ptr;
    }
    g.workspace = nullptr;
    g.workspace_bytes = 0;
    const Status st = attention_with_kvcache(g);
    const Status st2 = kvcache_append(g);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.what;
    EXPECT_FALSE(st.ok()) << c.what;
    EXPECT_FALSE(st2.ok()) << c.what;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << c.what << ": " << st.message();
    EXPECT_TRUE(dk.get(pr.kc.size()) == pr.kc && dv.get(pr.vc.size()) == pr.vc) << c.what << ": cache written";
    EXPECT_TRUE(dout.get(pr.q.size()) == std::vector<uint16_t>(pr.q.size(), nan_bits)) << c.what << ": out written";
  }
  // The device guard: sequence 1 does not fit; without check_device_data the append returns Ok,
  // writes sequences 0 and 2 and nothing of sequence 1.
  std::vector<int32_t> lens = pr.lens;
  lens[1] = static_cast<int32_t>(pr.cap);
  Dev<uint16_t> dk(pr.kc), dv(pr.vc), dkn(pr.kn), dvn(pr.vn);
  Dev<int32_t> dlens(lens);
  KvCacheParams g = pr.host;
  g.device = Device::kCUDA;
  g.impl = Impl::kAuto;
  g.rotary_cos = g.rotary_sin = nullptr;
  g.rotary_dim = 0;
  g.k_cache = contiguous(static_cast<void*>(dk.ptr), pr.cap, pr.hk, pr.d);
  g.v_cache = contiguous(static_cast<void*>(dv.ptr), pr.cap, pr.hk, pr.d);
  g.k_new = contiguous(static_cast<const void*>(dkn.ptr), pr.snew, pr.hk, pr.d);
  g.v_new = contiguous(static_cast<const void*>(dvn.ptr), pr.snew, pr.hk, pr.d);
  g.cache_seqlens = dlens.ptr;
  ASSERT_TRUE(kvcache_append(g).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // Expected: sequences 0 and 2 get their token at slot cache_seqlens[b] (no rotary: the bits of
  // k_new), nothing else changes (sequence 1's slot would be row 2's slot 0).
  std::vector<uint16_t> want_k = pr.kc, want_v = pr.vc;
  for (int64_t b : {0, 2})
    for (int64_t e = 0; e < pr.hk * pr.d; ++e) {
      want_k[(b * pr.cap + lens[b]) * pr.hk * pr.d + e] = pr.kn[b * pr.hk * pr.d + e];
      want_v[(b * pr.cap + lens[b]) * pr.hk * pr.d + e] = pr.vn[b * pr.hk * pr.d + e];
    }
  EXPECT_TRUE(dk.get(pr.kc.size()) == want_k) << "k cache: the guarded append wrote the wrong slots";
  EXPECT_TRUE(dv.get(pr.vc.size()) == want_v) << "v cache: the guarded append wrote the wrong slots";
}

// The device guard in the fused attention with rotary (docs/kvcache.md, "Validation"): sequence 1's
// append does not fit, so without check_device_data nothing of it is written and its outputs are
// NaN, while sequences 0 and 2 match the reference run without sequence 1. With q 16-byte aligned
// and one element off (the append rotates the queries into the workspace either way; the rotated
// queries of sequence 1 are NaN).
TEST(CudaKvCache, FusedGuardNaNQueries) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  GpuProblem pr(13);
  std::vector<int32_t> lens = pr.lens;
  lens[1] = static_cast<int32_t>(pr.cap);  // no room for its token
  // The reference: the valid sequences alone (sequence 1's length set to one that fits; its
  // output is not compared).
  std::vector<int32_t> ref_lens = pr.lens;
  std::vector<uint16_t> kc = pr.kc, vc = pr.vc, out_ref(pr.q.size(), 0);
  std::vector<float> lse_ref(pr.B * pr.hq * pr.sq, 0.0f);
  KvCacheParams h = pr.host;
  pr.point(&h, pr.q.data(), out_ref.data(), lse_ref.data(), kc.data(), vc.data(), pr.kn.data(), pr.vn.data(),
           ref_lens.data(), nullptr, pr.cos_t.data(), pr.sin_t.data());
  ASSERT_TRUE(attention_with_kvcache(h).ok());
  const uint16_t nan_bits = to_bits(NAN, pr.dt);
  const int64_t row = pr.sq * pr.hq * pr.d;  // one sequence's outputs
  for (bool unaligned : {false, true}) {
    const std::string what = unaligned ? "q unaligned" : "q aligned";
    std::vector<uint16_t> q_dev(pr.q.size() + 1, nan_bits);
    std::copy(pr.q.begin(), pr.q.end(), q_dev.begin() + (unaligned ? 1 : 0));
    Dev<uint16_t> dq(q_dev), dk(pr.kc), dv(pr.vc), dkn(pr.kn), dvn(pr.vn), dout(std::vector<uint16_t>(pr.q.size(), 0));
    Dev<float> dlse(std::vector<float>(lse_ref.size(), 0.0f)), dcos(pr.cos_t), dsin(pr.sin_t);
    Dev<int32_t> dlens(lens);
    KvCacheParams g = pr.host;
    g.device = Device::kCUDA;
    g.impl = Impl::kAuto;
    pr.point(&g, dq.ptr + (unaligned ? 1 : 0), dout.ptr, dlse.ptr, dk.ptr, dv.ptr, dkn.ptr, dvn.ptr, dlens.ptr, nullptr,
             dcos.ptr, dsin.ptr);
    ASSERT_TRUE(run_gpu(g, what));
    const std::vector<uint16_t> out = dout.get(pr.q.size());
    const std::vector<uint16_t> k_after = dk.get(pr.kc.size());
    for (int64_t b = 0; b < pr.B; ++b) {
      double max_abs = 0;
      int64_t nans = 0;
      for (int64_t e = b * row; e < (b + 1) * row; ++e) {
        const double a = from_bits(out[e], pr.dt);
        if (std::isnan(a)) {
          ++nans;
          continue;
        }
        max_abs = std::max(max_abs, std::fabs(a - from_bits(out_ref[e], pr.dt)));
      }
      if (b == 1) {
        EXPECT_EQ(nans, row) << what << ": the failed sequence's outputs must all be NaN; its first outputs "
                             << from_bits(out[b * row], pr.dt) << ", " << from_bits(out[b * row + 1], pr.dt) << ", "
                             << from_bits(out[b * row + pr.d], pr.dt) << "; lse " << dlse.get(lse_ref.size())[b * pr.hq * pr.sq];
        // its slot (row 1, slot cap - 1 + 1 would be out of range): nothing of row 1 changed
        EXPECT_TRUE(std::equal(k_after.begin() + pr.cap * pr.hk * pr.d, k_after.begin() + 2 * pr.cap * pr.hk * pr.d,
                               pr.kc.begin() + pr.cap * pr.hk * pr.d))
            << what << ": the failed sequence's cache row was written";
      } else {
        EXPECT_EQ(nans, 0) << what << ": sequence " << b << " has NaN outputs";
        EXPECT_LT(max_abs, 3e-2) << what << ": sequence " << b << " differs from the reference";
      }
    }
  }
}

// Median ms of `fn` over 20 timed calls after 5 warm-up calls (device events).
template <typename Fn>
double median_ms(Fn fn) {
  cudaEvent_t a, z;
  cudaEventCreate(&a);
  cudaEventCreate(&z);
  std::vector<float> ms;
  for (int r = 0; r < 25; ++r) {
    cudaEventRecord(a);
    fn();
    cudaEventRecord(z);
    cudaEventSynchronize(z);
    float t = 0;
    cudaEventElapsedTime(&t, a, z);
    if (r >= 5) ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(z);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// FLASHLAB_KV_BENCH=1: the standalone append's bandwidth (bytes read + written: k_new and v_new
// once each way) against cudaMemcpy D2D of the same bytes in the same process: B 32, heads_kv 8,
// hdim 128, bf16, seqlen_new 1024 (a prefill chunk) and 1 (a decode step: launch-bound).
TEST(CudaKvCache, AppendBandwidth) {
  if (!have_gpu() || env_int("FLASHLAB_KV_BENCH", 0) == 0) GTEST_SKIP() << "FLASHLAB_KV_BENCH=1 and a GPU";
  const int64_t B = 32, hk = 8, d = 128;
  // FLASHLAB_KV_APPEND_ONLY=N runs case N only (in the order printed: 1024 new tokens contiguous,
  // + rotary, paged 16, + rotary, then the same for 1 token), e.g. one kernel under ncu.
  const int64_t only = env_int("FLASHLAB_KV_APPEND_ONLY", -1);
  int64_t case_index = -1;
  for (int64_t snew : {1024, 1}) {
    const int64_t cap = 2048, new_elems = B * snew * hk * d;
    std::vector<uint16_t> nw(new_elems, 0x3f80), cache(B * cap * hk * d, 0x3c00);
    std::vector<float> cs((cap + 1) * d / 2, 0.5f);
    std::vector<int32_t> lens(B, 512);
    Dev<uint16_t> dkn(nw), dvn(nw), dk(cache), dv(cache);
    Dev<float> dcos(cs), dsin(cs);
    Dev<int32_t> dlens(lens);
    const std::vector<int64_t> pages = {0, 16};
    for (int64_t page : pages)
      for (bool rotary : {false, true}) {
        if (++case_index, only >= 0 && case_index != only) continue;
        std::vector<int32_t> table;
        for (int64_t i = 0; page > 0 && i < B * cap / page; ++i) table.push_back(static_cast<int32_t>(i));
        Dev<int32_t> dtable(table);
        KvCacheParams p;
        p.device = Device::kCUDA;
        p.dtype = p.cache_dtype = DType::kBFloat16;
        p.batch = B;
        p.seqlen_q = 1;
        p.heads_q = p.heads_kv = hk;
        p.head_dim = d;
        if (page > 0) {
          p.k_cache = paged_cache(static_cast<void*>(dk.ptr), KvLayout::kNHD, page, hk, d);
          p.v_cache = paged_cache(static_cast<void*>(dv.ptr), KvLayout::kNHD, page, hk, d);
          p.block_table = dtable.ptr;
          p.max_pages = cap / page;
          p.num_pages = B * cap / page;
          p.page_size = page;
        } else {
          p.k_cache = contiguous(static_cast<void*>(dk.ptr), cap, hk, d);
          p.v_cache = contiguous(static_cast<void*>(dv.ptr), cap, hk, d);
          p.max_seqlen_cache = cap;
        }
        p.k_new = contiguous(static_cast<const void*>(dkn.ptr), snew, hk, d);
        p.v_new = contiguous(static_cast<const void*>(dvn.ptr), snew, hk, d);
        p.seqlen_new = snew;
        p.cache_seqlens = dlens.ptr;
        if (rotary) {
          p.rotary_cos = dcos.ptr;
          p.rotary_sin = dsin.ptr;
          p.rotary_dim = d;
          p.rotary_max_pos = cap + 1;
        }
        bool ok = true;
        const double t = median_ms([&] { ok = ok && kvcache_append(p).ok(); });
        ASSERT_TRUE(ok);
        // The same bytes through cudaMemcpy: k_new -> cache rows, v_new -> cache rows.
        const size_t bytes = new_elems * 2;
        const double t_copy = median_ms([&] {
          cudaMemcpyAsync(dk.ptr, dkn.ptr, bytes, cudaMemcpyDeviceToDevice);
          cudaMemcpyAsync(dv.ptr, dvn.ptr, bytes, cudaMemcpyDeviceToDevice);
        });
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const double moved = 2.0 * 2 * bytes;  // read + written, k and v
        std::printf("[ kv append bench ] B %lld hk %lld d %lld new %lld %s%s: %.4f ms, %.1f GB/s; cudaMemcpy "
                    "%.4f ms, %.1f GB/s; ratio %.2f\n",
                    (long long)B, (long long)hk, (long long)d, (long long)snew,
                    page > 0 ? ("paged " + std::to_string(page)).c_str() : "contiguous", rotary ? " rotary" : "", t,
                    moved / (t * 1e-3) / 1e9, t_copy, moved / (t_copy * 1e-3) / 1e9, t_copy / t);
      }
  }
}

// FLASHLAB_KV_BENCH=1: a decode step with and without the fused append of one token + NeoX rotary
// (B 32, GQA 32/8, hdim 128, bf16, contiguous, L 1k / 4k / 64k keys attended either way), the
// default kernel: ms and TB/s of K/V read.
TEST(CudaKvCache, FusedDecodeBandwidth) {
  if (!have_gpu() || env_int("FLASHLAB_KV_BENCH", 0) == 0) GTEST_SKIP() << "FLASHLAB_KV_BENCH=1 and a GPU";
  for (int64_t L : {1024, 4096, 65536}) {
    const int64_t B = 32, hq = 32, hk = 8, d = 128;
    std::vector<uint16_t> q(B * hq * d, 0x3f80), kv(B * L * hk * d, 0x3c00), nw(B * hk * d, 0x3f00);
    std::vector<float> cs((L + 1) * d / 2, 0.7f);
    Dev<uint16_t> dq(q), dout(q), dk(kv), dv(kv), dkn(nw), dvn(nw);
    Dev<float> dcos(cs), dsin(cs);
    Dev<int32_t> dfull(std::vector<int32_t>(B, static_cast<int32_t>(L))), dless(std::vector<int32_t>(B, static_cast<int32_t>(L - 1)));
    for (bool fused : {false, true}) {
      KvCacheParams p;
      p.device = Device::kCUDA;
      p.dtype = p.cache_dtype = DType::kBFloat16;
      p.batch = B;
      p.seqlen_q = 1;
      p.heads_q = hq;
      p.heads_kv = hk;
      p.head_dim = d;
      p.softmax_scale = 0.088f;
      p.q = contiguous(static_cast<const void*>(dq.ptr), 1, hq, d);
      p.out = contiguous(static_cast<void*>(dout.ptr), 1, hq, d);
      p.k_cache = contiguous(static_cast<void*>(dk.ptr), L, hk, d);
      p.v_cache = contiguous(static_cast<void*>(dv.ptr), L, hk, d);
      p.max_seqlen_cache = L;
      p.cache_seqlens = fused ? dless.ptr : dfull.ptr;
      if (fused) {
        p.k_new = contiguous(static_cast<const void*>(dkn.ptr), 1, hk, d);
        p.v_new = contiguous(static_cast<const void*>(dvn.ptr), 1, hk, d);
        p.seqlen_new = 1;
        p.rotary_cos = dcos.ptr;
        p.rotary_sin = dsin.ptr;
        p.rotary_dim = d;
        p.rotary_max_pos = L + 1;
      }
      int64_t ws = 0;
      ASSERT_TRUE(kvcache_workspace_size(p, &ws).ok());
      void* wsp = nullptr;
      if (ws > 0) {
        ASSERT_EQ(cudaMalloc(&wsp, ws), cudaSuccess);
      }
      p.workspace = wsp;
      p.workspace_bytes = ws;
      bool ok = true;
      const double t = median_ms([&] { ok = ok && attention_with_kvcache(p).ok(); });
      ASSERT_TRUE(ok);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      cudaFree(wsp);
      const double bytes = 2.0 * B * L * hk * d * 2;
      std::printf("[ kv fused bench ] %s B %lld GQA %lld/%lld d %lld L %lld %s: %.3f ms, %.2f TB/s\n",
                  detail::decode_kernel_name(detail::decode_kernel()), (long long)B, (long long)hq, (long long)hk,
                  (long long)d, (long long)L, fused ? "append 1 + rotary" : "decode only     ", t,
                  bytes / (t * 1e-3) / 1e12);
    }
  }
}

}  // namespace
