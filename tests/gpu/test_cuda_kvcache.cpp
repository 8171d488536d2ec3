// tests/gpu/test_cuda_kvcache.cpp — the CUDA KV-cache attention (src/cuda/decode/, experimental:
// impl cuda_sm80 named) against the CPU float64 reference on the same 16-bit inputs.
//
// Random cases: bf16 / fp16; head dims 64, 128, 256 and off-bucket 40, 72, 200; GQA groups 1, 4, 8;
// seqlen_q 1..7; ragged cache lengths including 0; contiguous caches (with and without
// cache_batch_idx) and paged ones (page sizes 1, 3, 16, 64, 256; NHD and HND); leftpad; causal,
// windows, softcap, ALiBi; splits auto / 1 / 3 / 7 and fixed split sizes. Unfilled cache slots and
// the outputs are NaN-poisoned: a slot that leaks or a row left unwritten fails. Skips without a GPU.
//   FLASHLAB_KV_SWEEP=N (default 300) cases; FLASHLAB_KV_SEED.
//   FLASHLAB_DECODE_KERNEL=tile (default) | v5: the kernel the sweep runs (src/cuda/decode/decode.h).
//   FLASHLAB_KV_BENCH=1: the Bandwidth test, both kernels per cache length.
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

TEST(CudaKvCache, SweepAgainstReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: the CUDA KV-cache path not exercised";
  const int n_cases = env_int("FLASHLAB_KV_SWEEP", 300);
  std::mt19937_64 rng(static_cast<uint64_t>(env_int("FLASHLAB_KV_SEED", 7)));
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  std::normal_distribution<float> n01(0.f, 1.f);
  int failed = 0, ran = 0;
  for (int it = 0; it < n_cases && failed < 10; ++it) {
    const DType dt = chance(0.5) ? DType::kBFloat16 : DType::kFloat16;
    const int64_t d = pick({64, 128, 256, 40, 72, 200, 128, 128});
    const int64_t hk = pick({1, 2, 4}), group = pick({1, 4, 8}), hq = hk * group;
    const int64_t B = pick({1, 2, 3, 5});
    const int64_t sq = chance(0.6) ? 1 : pick({2, 4, 7});
    const bool paged = chance(0.6);
    const int64_t page = pick({1, 3, 16, 64, 256});
    const KvLayout layout = chance(0.5) ? KvLayout::kNHD : KvLayout::kHND;
    std::vector<int32_t> lens(B), lpad(B, 0);
    const bool use_lp = chance(0.2);
    const bool causal = chance(0.5);
    int64_t maxlen = 1;
    for (int64_t b = 0; b < B; ++b) {
      lens[b] = static_cast<int32_t>(chance(0.1) ? 0 : std::uniform_int_distribution<int>(1, chance(0.2) ? 3000 : 300)(rng));
      if (use_lp && lens[b] > 0) lpad[b] = std::uniform_int_distribution<int>(0, lens[b])(rng);
      // causal / window need seqlen_q <= the attended length
      if (lens[b] - lpad[b] < sq) lens[b] = static_cast<int32_t>(lpad[b] + sq);
      maxlen = std::max<int64_t>(maxlen, lens[b]);
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
    if (chance(0.2)) p.window_left = pick({0, 5, 100});
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
    std::vector<uint16_t> q(B * sq * hq * d);
    for (auto& x : q) x = to_bits(n01(rng), dt);
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
    const std::string what = "case " + std::to_string(it) + ": " + to_string(dt) + " d" + std::to_string(d) + " B" +
                             std::to_string(B) + " hq" + std::to_string(hq) + " hk" + std::to_string(hk) + " sq" +
                             std::to_string(sq) + (paged ? " paged" + std::to_string(page) : " contiguous") +
                             (causal ? " causal" : "") + " splits " + std::to_string(p.num_splits) + "/" +
                             std::to_string(p.split_size);
    Status st = attention_with_kvcache(p);
    ASSERT_TRUE(st.ok()) << what << " (reference): " << st.to_string();

    // The same on the GPU.
    Dev<uint16_t> dq(q), dk(kc), dv(vc), dout(std::vector<uint16_t>(q.size(), nan_bits));
    Dev<float> dlse(std::vector<float>(lse_ref.size(), NAN)), dslopes(slopes);
    Dev<int32_t> dlens(lens), dlp(lpad), dtable(table), dbidx(bidx);
    KvCacheParams g = p;
    g.device = Device::kCUDA;
    g.impl = Impl::kCudaSm80;
    g.q.ptr = dq.ptr;
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
    const std::vector<uint16_t> out = dout.get(q.size());
    const std::vector<float> lse = dlse.get(lse_ref.size());
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
    if (nan || rel > 2e-2 || max_abs > 4e-2 * std::max(1.0, max_ref) || lse_err > 2e-3) {
      ++failed;
      ADD_FAILURE() << what << ": rel_l2 " << rel << " max_abs " << max_abs << " lse_err " << lse_err
                    << (nan ? " NaN in the output" : "");
    }
  }
  std::printf("[ kv sweep ] kernel %s: %d cases run, %d failed\n",
              detail::decode_kernel_name(detail::decode_kernel()), ran, failed);
}

// FLASHLAB_KV_BENCH=1: decode bandwidth, the shape (B 32, GQA 32/8, hdim 128, bf16,
// contiguous cache, one query), median of 20 timed calls: TB/s of K and V bytes read once; each
// cache length under both kernels (v5, then tile: set_decode_kernel, same buffers and workspace),
// and the tile kernel's output compared with v5's (max |difference|). The environment's choice
// is restored at the end. FLASHLAB_KV_BENCH_PAGE=N: a paged cache instead (page size N, a
// divisor of 1024; NHD, pages in order).
TEST(CudaKvCache, Bandwidth) {
  if (!have_gpu() || env_int("FLASHLAB_KV_BENCH", 0) == 0) GTEST_SKIP() << "FLASHLAB_KV_BENCH=1 and a GPU";
  const detail::DecodeKernel env_kernel = detail::decode_kernel();
  for (int64_t L : {1024, 4096, 16384, 65536}) {
    const int64_t B = 32, hq = 32, hk = 8, d = 128;
    KvCacheParams p;
    p.device = Device::kCUDA;
    p.impl = Impl::kCudaSm80;
    p.dtype = p.cache_dtype = DType::kBFloat16;
    p.batch = B;
    p.seqlen_q = 1;
    p.heads_q = hq;
    p.heads_kv = hk;
    p.head_dim = d;
    p.softmax_scale = 0.088f;
    std::vector<uint16_t> q(B * hq * d, 0x3f80), kv(B * L * hk * d, 0x3c00);
    std::vector<int32_t> lens(B, static_cast<int32_t>(L));
    Dev<uint16_t> dq(q), dout(q), dk(kv), dv(kv);
    Dev<int32_t> dlens(lens);
    p.q = contiguous(dq.ptr, 1, hq, d);
    p.out = contiguous(static_cast<void*>(dout.ptr), 1, hq, d);
    const int64_t page = env_int("FLASHLAB_KV_BENCH_PAGE", 0);
    std::vector<int32_t> table;
    for (int64_t i = 0; page > 0 && i < B * L / page; ++i) table.push_back(static_cast<int32_t>(i));
    Dev<int32_t> dtable(table);
    if (page > 0) {
      p.k_cache = paged_cache(static_cast<void*>(dk.ptr), KvLayout::kNHD, page, hk, d);
      p.v_cache = paged_cache(static_cast<void*>(dv.ptr), KvLayout::kNHD, page, hk, d);
      p.block_table = dtable.ptr;
      p.max_pages = L / page;
      p.num_pages = B * L / page;
      p.page_size = page;
      p.page_layout = KvLayout::kNHD;
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
        ASSERT_TRUE(attention_with_kvcache(p).ok());
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
      std::printf("[ kv bench ] %-4s B %lld GQA %lld/%lld d %lld L %lld page %lld: %.3f ms, %.2f TB/s "
                  "(workspace %lld B)",
                  detail::decode_kernel_name(kernel), (long long)B, (long long)hq, (long long)hk,
                  (long long)d, (long long)L, (long long)page, ms[ms.size() / 2],
                  bytes / (ms[ms.size() / 2] * 1e-3) / 1e12, (long long)ws);
      if (kernel == detail::DecodeKernel::kTile) std::printf(", max |tile - v5| %.3g", diff);
      std::printf("\n");
      EXPECT_LE(diff, 1e-2) << "L " << L << ": the tile kernel's output differs from v5's";
    }
    detail::set_decode_kernel(env_kernel);
    cudaEventDestroy(a);
    cudaEventDestroy(z);
    cudaFree(wsp);
  }
}

// Without impl cuda_sm80 named the experimental path is refused, and nothing is launched.
TEST(CudaKvCache, AutoRefusesWhileExperimental) {
  // Device memory where there is a GPU (host pointers would be refused for their placement first).
  std::vector<uint16_t> zeros(64, 0);
  Dev<uint16_t> buf(zeros);
  Dev<int32_t> lens(std::vector<int32_t>{1});
  alignas(16) static uint16_t host_buf[64];
  static int32_t host_lens[1] = {1};
  const bool gpu = have_gpu();
  void* data = gpu ? static_cast<void*>(buf.ptr) : static_cast<void*>(host_buf);
  KvCacheParams p;
  p.device = Device::kCUDA;
  p.dtype = p.cache_dtype = DType::kBFloat16;
  p.batch = 1;
  p.seqlen_q = 1;
  p.heads_q = p.heads_kv = 1;
  p.head_dim = 64;
  p.q = contiguous(static_cast<const void*>(data), 1, 1, 64);
  p.out = contiguous(data, 1, 1, 64);
  p.k_cache = p.v_cache = contiguous(data, 1, 1, 64);
  p.max_seqlen_cache = 1;
  p.cache_seqlens = gpu ? lens.ptr : host_lens;
  const Status st = attention_with_kvcache(p);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.to_string();
  if (gpu) {
    EXPECT_NE(st.message().find("experimental"), std::string::npos) << st.message();
  }
}

}  // namespace
