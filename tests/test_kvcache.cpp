// tests/test_kvcache.cpp — attention_with_kvcache, kvcache_append and attention_combine on the CPU
// (docs/kvcache.md) against an independent brute force: the test places its own logical keys into
// a contiguous or paged cache (NaN everywhere else), appends and rotates by hand, gathers a dense
// (L, heads_kv, head_dim) K/V per sequence and runs the training path's `reference` with causal
// bottom-right. Every check_case runs twice: impl reference (float64) and impl cpu_flash (fp32
// FlashAttention-2 over the gathered keys, src/cpu/kvcache_cpu_flash.cpp), each against the same
// brute force with its own tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "cpu/kvcache_reference.h"
#include "flashlab/flashlab.h"

namespace {

using namespace flashlab;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Case {
  int64_t hq = 4, hk = 2, d = 16, sq = 1, seqlen_new = 0;
  std::vector<int> cache_lens{5, 17};
  std::vector<int> leftpad;  // empty: none
  bool paged = false;
  int64_t page_size = 16;
  KvLayout layout = KvLayout::kNHD;
  bool batch_idx = false;
  int64_t rotary_dim = 0;
  RotaryStyle style = RotaryStyle::kNeoX;
  bool causal = true;
  int64_t window_left = -1;
  float softcap = 0.0f;
  bool alibi = false;
  int num_splits = 1;
  int64_t split_size = 0;
  bool sinks = false;  // per-head attention sink logits
  int64_t sink_tokens = 0;  // StreamingLLM sink tokens
  uint64_t seed = 1;
  Impl impl = Impl::kReference;
};

constexpr Impl kCpuImpls[] = {Impl::kReference, Impl::kCpuFlash};

// The hand-written rotation: pairs (2i, 2i+1) interleaved, (i, i + rd/2) NeoX.
void rotate(std::vector<double>& x, int64_t rd, RotaryStyle style, const std::vector<float>& cs,
            const std::vector<float>& sn, int64_t pos) {
  const std::vector<double> y = x;
  for (int64_t i = 0; i < rd / 2; ++i) {
    const double c = cs[pos * (rd / 2) + i], s = sn[pos * (rd / 2) + i];
    if (style == RotaryStyle::kInterleaved) {
      x[2 * i] = y[2 * i] * c - y[2 * i + 1] * s;
      x[2 * i + 1] = y[2 * i + 1] * c + y[2 * i] * s;
    } else {
      x[i] = y[i] * c - y[i + rd / 2] * s;
      x[i + rd / 2] = y[i + rd / 2] * c + y[i] * s;
    }
  }
}

struct World {
  Case c;
  int64_t B, cap, rows = 0, pages = 0, max_pages = 0;
  std::vector<float> q, k_cache, v_cache, k_new, v_new, out, lse, cos_t, sin_t, slopes, sinks;
  std::vector<int32_t> seqlens, leftpad, batch_idx, table;
  std::vector<float> want_k_cache, want_v_cache;  // the cache image after the append
  // logical content: slot -> value, per (b, slot, hk, d); NaN where not a key
  std::vector<float> lk, lv;
  KvCacheParams p;

  int64_t lp(int64_t b) const { return c.leftpad.empty() ? 0 : c.leftpad[b]; }
  int64_t L(int64_t b) const { return c.cache_lens[b] + c.seqlen_new - lp(b); }
  int64_t off(int64_t b, int64_t slot, int64_t h) const {  // element offset in the cache storage
    if (c.paged) {
      const int64_t page = table[b * max_pages + slot / c.page_size], s = slot % c.page_size;
      return c.layout == KvLayout::kNHD ? ((page * c.page_size + s) * c.hk + h) * c.d
                                        : ((page * c.hk + h) * c.page_size + s) * c.d;
    }
    const int64_t r = c.batch_idx ? batch_idx[b] : b;
    return ((r * cap + slot) * c.hk + h) * c.d;
  }

  explicit World(const Case& cs) : c(cs), B(static_cast<int64_t>(cs.cache_lens.size())) {
    std::mt19937_64 rng(c.seed);
    std::normal_distribution<float> n01(0.f, 1.f);
    int64_t need = 1;
    for (int64_t b = 0; b < B; ++b) need = std::max<int64_t>(need, c.cache_lens[b] + c.seqlen_new);
    if (c.paged) {
      max_pages = (need + c.page_size - 1) / c.page_size + 1;
      pages = B * max_pages + 3;
      std::vector<int32_t> perm(pages);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      table.assign(B * max_pages, -1);
      int64_t next = 0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t k = 0; k < (c.cache_lens[b] + c.seqlen_new + c.page_size - 1) / c.page_size; ++k)
          table[b * max_pages + k] = perm[next++];
      cap = max_pages * c.page_size;
      k_cache.assign(pages * c.page_size * c.hk * c.d, kNaN);
    } else {
      cap = need + 2;
      rows = B + 2;
      if (c.batch_idx) {
        for (int64_t b = 0; b < B; ++b) batch_idx.push_back(static_cast<int32_t>(rows - 1 - b));
      }
      k_cache.assign(rows * cap * c.hk * c.d, kNaN);
    }
    v_cache = k_cache;
    for (int64_t b = 0; b < B; ++b) {
      seqlens.push_back(c.cache_lens[b]);
      leftpad.push_back(static_cast<int32_t>(lp(b)));
    }
    lk.assign(B * cap * c.hk * c.d, kNaN);
    lv = lk;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = lp(b); s < c.cache_lens[b]; ++s)
        for (int64_t h = 0; h < c.hk; ++h)
          for (int64_t e = 0; e < c.d; ++e) {
            const int64_t li = ((b * cap + s) * c.hk + h) * c.d + e;
            lk[li] = n01(rng);
            lv[li] = n01(rng);
            k_cache[off(b, s, h) + e] = lk[li];
            v_cache[off(b, s, h) + e] = lv[li];
          }
    auto fill = [&](std::vector<float>& t, int64_t n) {
      t.resize(n);
      for (float& x : t) x = n01(rng);
    };
    fill(q, B * c.sq * c.hq * c.d);
    if (c.seqlen_new) {
      fill(k_new, B * c.seqlen_new * c.hk * c.d);
      fill(v_new, B * c.seqlen_new * c.hk * c.d);
    }
    out.assign(B * c.sq * c.hq * c.d, 7.0f);
    lse.assign(B * c.hq * c.sq, 7.0f);
    const int64_t max_pos = need + 3;
    if (c.rotary_dim) {
      for (int64_t pos = 0; pos < max_pos; ++pos)
        for (int64_t i = 0; i < c.rotary_dim / 2; ++i) {
          const double th = pos * std::pow(10000.0, -2.0 * i / c.rotary_dim);
          cos_t.push_back(static_cast<float>(std::cos(th)));
          sin_t.push_back(static_cast<float>(std::sin(th)));
        }
    }
    for (int64_t h = 0; h < c.hq; ++h) slopes.push_back(0.25f / (h + 1));
    // Sinks around the scores' size (a sink far below every score would change nothing); head 1's
    // sink is -inf (= no sink for that head).
    for (int64_t h = 0; h < c.hq; ++h) sinks.push_back(h == 1 ? -INFINITY : 1.0f + 0.5f * n01(rng));

    // Expected cache after the append, and the logical new keys (rotated, rounded to fp32).
    want_k_cache = k_cache;
    want_v_cache = v_cache;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < c.seqlen_new; ++t)
        for (int64_t h = 0; h < c.hk; ++h) {
          std::vector<double> x(c.d);
          const int64_t ni = ((b * c.seqlen_new + t) * c.hk + h) * c.d;
          for (int64_t e = 0; e < c.d; ++e) x[e] = k_new[ni + e];
          const int64_t slot = c.cache_lens[b] + t;
          if (c.rotary_dim) rotate(x, c.rotary_dim, c.style, cos_t, sin_t, slot - lp(b));
          for (int64_t e = 0; e < c.d; ++e) {
            const int64_t li = ((b * cap + slot) * c.hk + h) * c.d + e;
            lk[li] = static_cast<float>(x[e]);
            lv[li] = v_new[ni + e];
            want_k_cache[off(b, slot, h) + e] = lk[li];
            want_v_cache[off(b, slot, h) + e] = lv[li];
          }
        }

    p.dtype = DType::kFloat32;
    p.cache_dtype = DType::kFloat32;
    p.impl = c.impl;
    p.batch = B;
    p.seqlen_q = c.sq;
    p.heads_q = c.hq;
    p.heads_kv = c.hk;
    p.head_dim = c.d;
    p.causal = c.causal;
    p.window_left = c.window_left;
    p.sink_tokens = c.sink_tokens;
    p.softcap = c.softcap;
    p.alibi_slopes = c.alibi ? slopes.data() : nullptr;
    p.q = contiguous(q.data(), c.sq, c.hq, c.d);
    p.out = contiguous(out.data(), c.sq, c.hq, c.d);
    p.lse = lse.data();
    p.lse_batch_stride = c.hq * c.sq;
    p.lse_head_stride = c.sq;
    if (c.paged) {
      p.k_cache = paged_cache(k_cache.data(), c.layout, c.page_size, c.hk, c.d);
      p.v_cache = paged_cache(v_cache.data(), c.layout, c.page_size, c.hk, c.d);
      p.block_table = table.data();
      p.max_pages = max_pages;
      p.num_pages = pages;
      p.page_size = c.page_size;
      p.page_layout = c.layout;
    } else {
      p.k_cache = contiguous(k_cache.data(), cap, c.hk, c.d);
      p.v_cache = contiguous(v_cache.data(), cap, c.hk, c.d);
      p.batch_cache = rows;
      p.max_seqlen_cache = cap;
      p.cache_batch_idx = c.batch_idx ? batch_idx.data() : nullptr;
    }
    p.cache_seqlens = seqlens.data();
    p.cache_leftpad = c.leftpad.empty() ? nullptr : leftpad.data();
    if (c.seqlen_new) {
      p.k_new = contiguous(k_new.data(), c.seqlen_new, c.hk, c.d);
      p.v_new = contiguous(v_new.data(), c.seqlen_new, c.hk, c.d);
      p.seqlen_new = c.seqlen_new;
    }
    if (c.rotary_dim) {
      p.rotary_cos = cos_t.data();
      p.rotary_sin = sin_t.data();
      p.rotary_dim = c.rotary_dim;
      p.rotary_max_pos = max_pos;
      p.rotary_style = c.style;
    }
    p.num_splits = c.num_splits;
    p.split_size = c.split_size;
    p.sink_logits = c.sinks ? sinks.data() : nullptr;
  }

  // The brute force for sequence b: dense K/V, rotated q, the training reference.
  void expected(int64_t b, std::vector<float>* o, std::vector<float>* l) const {
    const int64_t n = L(b);
    o->assign(c.sq * c.hq * c.d, 0.0f);
    l->assign(c.hq * c.sq, -INFINITY);
    if (n == 0) {  // no key: out 0, lse = the sink (-inf without)
      for (int64_t h = 0; c.sinks && h < c.hq; ++h)
        for (int64_t i = 0; i < c.sq; ++i) (*l)[h * c.sq + i] = sinks[h];
      return;
    }
    std::vector<float> K(n * c.hk * c.d), V(K.size()), Q(c.sq * c.hq * c.d);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t e = 0; e < c.hk * c.d; ++e) {
        K[j * c.hk * c.d + e] = lk[(b * cap + lp(b) + j) * c.hk * c.d + e];
        V[j * c.hk * c.d + e] = lv[(b * cap + lp(b) + j) * c.hk * c.d + e];
      }
    for (int64_t i = 0; i < c.sq; ++i)
      for (int64_t h = 0; h < c.hq; ++h) {
        std::vector<double> x(c.d);
        for (int64_t e = 0; e < c.d; ++e) x[e] = q[((b * c.sq + i) * c.hq + h) * c.d + e];
        if (c.rotary_dim) rotate(x, c.rotary_dim, c.style, cos_t, sin_t, n - c.sq + i);
        for (int64_t e = 0; e < c.d; ++e) Q[(i * c.hq + h) * c.d + e] = static_cast<float>(x[e]);
      }
    FwdParams f;
    f.dtype = DType::kFloat32;
    f.impl = Impl::kReference;
    f.batch = 1;
    f.seqlen_q = c.sq;
    f.seqlen_k = n;
    f.heads_q = c.hq;
    f.heads_kv = c.hk;
    f.head_dim = c.d;
    f.causal = c.causal;
    f.window_left = c.window_left;
    f.sink_tokens = c.sink_tokens;  // key 0 is the first attended key (slot leftpad)
    f.softcap = c.softcap;
    f.alibi_slopes = c.alibi ? slopes.data() : nullptr;
    f.sink_logits = c.sinks ? sinks.data() : nullptr;
    f.q = contiguous(Q.data(), c.sq, c.hq, c.d);
    f.k = contiguous(K.data(), n, c.hk, c.d);
    f.v = contiguous(V.data(), n, c.hk, c.d);
    f.out = contiguous(o->data(), c.sq, c.hq, c.d);
    f.lse = l->data();
    f.lse_batch_stride = c.hq * c.sq;
    f.lse_head_stride = c.sq;
    const Status st = attention_forward(f);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Tolerances against the fp32 brute force (itself the float64 reference rounded to fp32): the
// float64 path is off by the final rounding only. cpu_flash computes in fp32 with an online
// softmax; test_cpu_flash.cpp bounds that by compute_floor = 1e-5 * (1 + |score|). Here 1e-5
// relative suffices (every case also passes at 5e-6, 2026-11-24), while a wrong key, position or
// mask is off by O(1) (checked by breaking the leftpad offset and the query's rotary position).
double out_tol(Impl impl) { return impl == Impl::kCpuFlash ? 1e-5 : 2e-6; }
double lse_tol(Impl impl) { return impl == Impl::kCpuFlash ? 1e-5 : 2e-6; }

void check_one(const Case& cs) {
  World w(cs);
  const Status st = attention_with_kvcache(w.p);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(same_bits(w.k_cache, w.want_k_cache)) << "k cache after the append";
  EXPECT_TRUE(same_bits(w.v_cache, w.want_v_cache)) << "v cache after the append";
  for (int64_t b = 0; b < w.B; ++b) {
    std::vector<float> o, l;
    w.expected(b, &o, &l);
    for (int64_t i = 0; i < cs.sq; ++i)
      for (int64_t h = 0; h < cs.hq; ++h) {
        const float gl = w.lse[(b * cs.hq + h) * cs.sq + i], wl = l[h * cs.sq + i];
        if (std::isinf(wl)) {
          EXPECT_EQ(gl, wl) << "b " << b << " i " << i << " h " << h;
        } else {
          EXPECT_NEAR(gl, wl, lse_tol(cs.impl) * std::max(1.0f, std::abs(wl))) << "b " << b << " i " << i << " h " << h;
        }
        for (int64_t e = 0; e < cs.d; ++e) {
          const float g = w.out[((b * cs.sq + i) * cs.hq + h) * cs.d + e], x = o[(i * cs.hq + h) * cs.d + e];
          ASSERT_FALSE(std::isnan(g)) << "NaN leaked: b " << b << " i " << i << " h " << h;
          ASSERT_NEAR(g, x, out_tol(cs.impl) * std::max(1.0f, std::abs(x)))
              << "b " << b << " i " << i << " h " << h << " e " << e;
        }
      }
  }
}

void check_case(const Case& cs) {
  for (Impl impl : kCpuImpls) {
    Case c = cs;
    c.impl = impl;
    SCOPED_TRACE(testing::Message() << "impl " << to_string(impl));
    check_one(c);
  }
}

TEST(KvCache, ContiguousDecode) {
  for (int len : {1, 17, 113}) {
    Case c;
    c.cache_lens = {len, std::max(1, len / 2), 1};
    check_case(c);
  }
}

TEST(KvCache, PageSizesAndLayouts) {
  for (int64_t ps : {1, 3, 16, 64})
    for (KvLayout lay : {KvLayout::kNHD, KvLayout::kHND})
      for (int64_t sq : {1, 4}) {
        Case c;
        c.paged = true;
        c.page_size = ps;
        c.layout = lay;
        c.sq = sq;
        c.seqlen_new = sq;
        c.cache_lens = {0, 1, 17, 113};
        c.seed = ps * 10 + sq;
        SCOPED_TRACE(testing::Message() << "page_size " << ps << " layout " << static_cast<int>(lay) << " sq " << sq);
        check_case(c);
      }
}

TEST(KvCache, GqaAndQueryLengths) {
  for (int64_t group : {1, 4, 8})
    for (int64_t sq : {1, 2, 5, 16}) {
      Case c;
      c.hk = 2;
      c.hq = 2 * group;
      c.sq = sq;
      c.cache_lens = {17, 40, 113};
      c.seed = group * 100 + sq;
      SCOPED_TRACE(testing::Message() << "group " << group << " sq " << sq);
      check_case(c);
    }
}

TEST(KvCache, CacheBatchIdxLeftpadAndMasks) {
  Case c;
  c.batch_idx = true;
  c.cache_lens = {20, 9, 33};
  c.leftpad = {3, 0, 33};  // the last sequence keeps only its appended keys
  c.seqlen_new = 2;
  c.sq = 2;
  check_case(c);
  c.window_left = 4;
  c.softcap = 5.0f;
  c.alibi = true;
  check_case(c);
  c.causal = false;
  c.window_left = -1;
  c.sq = 3;
  check_case(c);
}

TEST(KvCache, AppendWithRotaryBothStyles) {
  for (RotaryStyle st : {RotaryStyle::kInterleaved, RotaryStyle::kNeoX})
    for (int64_t rd : {16, 8})
      for (bool paged : {false, true}) {
        Case c;
        c.rotary_dim = rd;
        c.style = st;
        c.paged = paged;
        c.page_size = 3;
        c.seqlen_new = 3;
        c.sq = 3;
        c.cache_lens = {0, 17, 5};
        c.leftpad = {0, 4, 2};
        SCOPED_TRACE(testing::Message() << "style " << static_cast<int>(st) << " rd " << rd << " paged " << paged);
        check_case(c);
      }
}

TEST(KvCache, AppendOnly) {
  Case c;
  c.paged = true;
  c.page_size = 3;
  c.seqlen_new = 4;
  c.rotary_dim = 8;
  c.style = RotaryStyle::kInterleaved;
  c.cache_lens = {0, 7};
  World w(c);
  const std::vector<float> out0 = w.out;
  ASSERT_TRUE(kvcache_append(w.p).ok());
  EXPECT_TRUE(same_bits(w.k_cache, w.want_k_cache));
  EXPECT_TRUE(same_bits(w.v_cache, w.want_v_cache));
  EXPECT_TRUE(same_bits(w.out, out0));
}

TEST(KvCache, RotaryKnownValues) {
  // head_dim 4, one new key (1, 2, 3, 4) at position 1 with angles (a, b): interleaved rotates
  // (1, 2) by a and (3, 4) by b; NeoX rotates (1, 3) by a and (2, 4) by b.
  for (RotaryStyle st : {RotaryStyle::kInterleaved, RotaryStyle::kNeoX}) {
    Case c;
    c.hq = c.hk = 1;
    c.d = 4;
    c.rotary_dim = 4;
    c.style = st;
    c.seqlen_new = 1;
    c.cache_lens = {1};
    World w(c);
    std::copy_n(std::vector<float>{1, 2, 3, 4}.begin(), 4, w.k_new.begin());
    ASSERT_TRUE(kvcache_append(w.p).ok());
    const double a = 1.0, b = 1e-2;  // pos 1: theta_i = 10000^(-2i/4)
    const double ca = static_cast<float>(std::cos(a)), sa = static_cast<float>(std::sin(a));
    const double cb = static_cast<float>(std::cos(b)), sb = static_cast<float>(std::sin(b));
    std::vector<double> want = st == RotaryStyle::kInterleaved
                                   ? std::vector<double>{1 * ca - 2 * sa, 1 * sa + 2 * ca, 3 * cb - 4 * sb, 3 * sb + 4 * cb}
                                   : std::vector<double>{1 * ca - 3 * sa, 2 * cb - 4 * sb, 1 * sa + 3 * ca, 2 * sb + 4 * cb};
    for (int e = 0; e < 4; ++e) EXPECT_EQ(w.k_cache[w.off(0, 1, 0) + e], static_cast<float>(want[e])) << e;
  }
}

// Splits in float64: equal to no split within 1e-12.
TEST(KvCache, SplitsMatchNoSplit) {
  Case c;
  c.paged = true;
  c.page_size = 16;
  c.sq = 4;
  c.seqlen_new = 4;
  c.cache_lens = {1, 113, 300, 17};
  c.softcap = 3.0f;
  c.alibi = true;
  World w(c);
  ASSERT_TRUE(kvcache_append(w.p).ok());
  KvCacheParams p = w.p;
  p.seqlen_new = 0;  // already appended: attend only
  p.k_new = p.v_new = TensorRef{};
  std::vector<int32_t> lens(w.B);
  for (int64_t b = 0; b < w.B; ++b) lens[b] = c.cache_lens[b] + c.seqlen_new;
  p.cache_seqlens = lens.data();
  p.softmax_scale = 0.25f;
  for (int64_t b = 0; b < w.B; ++b)
    for (int64_t h = 0; h < c.hq; ++h) {
      std::vector<double> o1(c.sq * c.d), l1(c.sq);
      p.num_splits = 1;
      p.split_size = 0;
      detail::kv::attend_one(p, b, h, o1.data(), l1.data());
      for (int variant = 0; variant < 4; ++variant) {
        p.num_splits = variant == 0 ? 0 : variant == 1 ? 7 : 0;
        p.split_size = variant == 2 ? 32 : variant == 3 ? 5 : 0;
        std::vector<double> o(c.sq * c.d), l(c.sq);
        detail::kv::attend_one(p, b, h, o.data(), l.data());
        for (int64_t e = 0; e < c.sq * c.d; ++e) ASSERT_NEAR(o[e], o1[e], 1e-12) << "variant " << variant;
        for (int64_t i = 0; i < c.sq; ++i) ASSERT_NEAR(l[i], l1[i], 1e-12) << "variant " << variant;
      }
    }
  // And through the public API (fp32 outputs) for every split setting.
  for (int ns : {0, 1, 7}) {
    Case c2 = c;
    c2.num_splits = ns;
    check_case(c2);
  }
  c.num_splits = 0;
  c.split_size = 32;
  check_case(c);
}

// A fixed split_size makes a sequence's output independent of the batch it is in.
// cpu_flash ignores the splits, and its result is batch-invariant whatever they are.
TEST(KvCache, FixedSplitSizeIsBatchInvariant) {
  for (Impl impl : kCpuImpls) {
  SCOPED_TRACE(testing::Message() << "impl " << to_string(impl));
  Case alone;
  alone.impl = impl;
  alone.cache_lens = {113};
  alone.sq = 2;
  alone.split_size = 16;
  alone.num_splits = 0;
  World a(alone);
  ASSERT_TRUE(attention_with_kvcache(a.p).ok());
  Case batched = alone;
  batched.cache_lens = {40, 113, 7};
  World w(batched);
  // Put sequence 0 of `alone` at index 1 of the batch: same q and keys.
  for (int64_t s = 0; s < 113; ++s)
    for (int64_t h = 0; h < alone.hk; ++h)
      for (int64_t e = 0; e < alone.d; ++e) {
        w.k_cache[w.off(1, s, h) + e] = a.k_cache[a.off(0, s, h) + e];
        w.v_cache[w.off(1, s, h) + e] = a.v_cache[a.off(0, s, h) + e];
      }
  const int64_t qn = alone.sq * alone.hq * alone.d;
  std::copy_n(a.q.begin(), qn, w.q.begin() + qn);
  ASSERT_TRUE(attention_with_kvcache(w.p).ok());
  EXPECT_EQ(std::memcmp(&w.out[qn], a.out.data(), qn * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(&w.lse[alone.hq * alone.sq], a.lse.data(), alone.hq * alone.sq * sizeof(float)), 0);
  }
}

TEST(KvCache, EmptyCacheWithoutCausalGivesZeroRows) {
  Case c;
  c.causal = false;
  c.cache_lens = {0, 3};
  c.sq = 2;
  check_case(c);  // sequence 0 sees no key: out 0, lse -inf
  c.cache_lens = {0, 0};  // no key in the whole batch
  check_case(c);
  c.seqlen_new = 2;  // an empty cache filled by the append only
  c.causal = true;
  check_case(c);
}

// Attention sinks: in the denominator only, for every split setting (the reference merges the sink
// after its splits; cpu_flash starts its online softmax from it); an empty sequence gets out 0 and
// lse = the sink; a -inf sink (head 1) is no sink.
TEST(KvCache, SinksEverySplitSetting) {
  Case c;
  c.sinks = true;
  c.cache_lens = {0, 17, 113};
  c.causal = false;
  c.hq = 8;
  c.hk = 2;
  for (int splits : {1, 3, 7, 0}) {
    c.num_splits = splits;
    SCOPED_TRACE(testing::Message() << "num_splits " << splits);
    check_case(c);
  }
  c.num_splits = 0;
  c.split_size = 16;
  c.paged = true;
  c.page_size = 3;
  c.seqlen_new = 2;
  c.rotary_dim = 8;
  c.causal = true;
  c.cache_lens = {1, 17, 113};
  check_case(c);
}

// StreamingLLM sink tokens (docs/design/sink-tokens.md): the first sink_tokens attended keys
// (from slot cache_leftpad on) stay visible left of the window. Both CPU impls against the training
// reference on the gathered keys: sink_tokens 1, 4 and 70 (past the window, more than one 64-key
// block, longer than some sequences), leftpad (sequence 3 keeps 3 keys, fewer than 4 sinks), the
// append with rotary, contiguous and paged caches (page sizes 1, 3, 16; NHD and HND), GQA 4:1,
// every split setting, softcap / ALiBi / sink logits, causal and a left window alone.
TEST(KvCache, SinkTokens) {
  for (int64_t sink_tokens : {1, 4, 70})
    for (int variant = 0; variant < 5; ++variant) {
      Case c;
      c.sink_tokens = sink_tokens;
      c.window_left = 6;
      c.hq = 8;
      c.hk = 2;
      c.cache_lens = {30, 9, 150, 2};
      c.leftpad = {4, 0, 20, 1};
      c.seqlen_new = 2;
      c.sq = 3;
      c.seed = static_cast<uint64_t>(sink_tokens * 10 + variant);
      switch (variant) {
        case 0: break;  // contiguous, one split
        case 1: c.paged = true, c.page_size = 1, c.num_splits = 3; break;
        case 2:
          c.paged = true, c.page_size = 3, c.layout = KvLayout::kHND, c.num_splits = 0, c.split_size = 5;
          c.rotary_dim = 8;
          break;
        case 3:
          c.paged = true, c.page_size = 16, c.num_splits = 0;
          c.softcap = 4.0f, c.alibi = c.sinks = true;
          break;
        default: c.causal = false, c.batch_idx = true, c.num_splits = 7; break;  // the left window alone
      }
      SCOPED_TRACE(testing::Message() << "sink_tokens " << sink_tokens << " variant " << variant);
      check_case(c);
    }
}

// impl auto runs cpu_flash (as the training path's auto does on the CPU): bitwise the same.
TEST(KvCache, AutoRunsCpuFlash) {
  Case c;
  c.paged = true;
  c.page_size = 3;
  c.seqlen_new = 2;
  c.sq = 2;
  c.rotary_dim = 8;
  c.leftpad = {2, 0};
  c.cache_lens = {5, 30};
  c.impl = Impl::kCpuFlash;
  World f(c);
  ASSERT_TRUE(attention_with_kvcache(f.p).ok());
  c.impl = Impl::kAuto;
  World a(c);
  ASSERT_TRUE(attention_with_kvcache(a.p).ok());
  EXPECT_TRUE(same_bits(a.out, f.out));
  EXPECT_TRUE(same_bits(a.lse, f.lse));
  EXPECT_TRUE(same_bits(a.k_cache, f.k_cache));
}

// num_threads does not change cpu_flash's result, and strided out / null lse work.
TEST(KvCache, CpuFlashThreadsStridesAndNoLse) {
  Case c;
  c.impl = Impl::kCpuFlash;
  c.hq = 8;
  c.sq = 3;
  c.cache_lens = {40, 113, 7, 64};
  World one(c);
  one.p.num_threads = 1;
  ASSERT_TRUE(attention_with_kvcache(one.p).ok());
  World many(c);
  many.p.num_threads = 4;
  ASSERT_TRUE(attention_with_kvcache(many.p).ok());
  EXPECT_TRUE(same_bits(one.out, many.out));
  EXPECT_TRUE(same_bits(one.lse, many.lse));
  // out as (seqlen_q, batch, heads, d) storage, i.e. batch_stride < row_stride; no lse.
  World s(c);
  std::vector<float> out_t(s.out.size(), kNaN);
  s.p.out = MutTensorRef{out_t.data(), c.hq * c.d, s.B * c.hq * c.d, c.d, 1};
  s.p.lse = nullptr;
  ASSERT_TRUE(attention_with_kvcache(s.p).ok());
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t i = 0; i < c.sq; ++i)
      for (int64_t e = 0; e < c.hq * c.d; ++e)
        ASSERT_EQ(out_t[(i * s.B + b) * c.hq * c.d + e], one.out[(b * c.sq + i) * c.hq * c.d + e]);
}

// ---- errors: nothing written
struct ErrCase {
  const char* what;
  void (*mutate)(World&);
  const char* message;
};

TEST(KvCache, ErrorsWriteNothing) {
  const ErrCase cases[] = {
      {"page entry", [](World& w) { w.table[1] = static_cast<int32_t>(w.pages); }, "block_table[0][1]"},
      {"negative page", [](World& w) { w.table[w.max_pages] = -1; }, "out of range"},
      {"page_size 0", [](World& w) { w.p.page_size = 0; }, "page_size (0) must be >= 1"},
      {"too short", [](World& w) { w.seqlens[1] = static_cast<int32_t>(w.cap - 1); }, "cache too short for the append"},
      {"rotary odd", [](World& w) { w.p.rotary_dim = 7; }, "rotary_dim (7) must be even"},
      {"rotary > d", [](World& w) { w.p.rotary_dim = 2 * w.c.d; }, "must be even and in [2, head_dim"},
      {"sq > L causal", [](World& w) { w.p.seqlen_q = 200; }, "seqlen_q (200) > attended length"},
      {"k without v", [](World& w) { w.p.v_new = TensorRef{}; }, "k_new and v_new must both be set"},
      {"leftpad", [](World& w) { w.leftpad[0] = 99; w.p.cache_leftpad = w.leftpad.data(); }, "cache_leftpad[0] (99)"},
      {"null seqlens", [](World& w) { w.p.cache_seqlens = nullptr; }, "cache_seqlens must not be null"},
      {"splits both", [](World& w) { w.p.num_splits = 3; w.p.split_size = 8; }, "not both"},
      {"top-left", [](World& w) { w.p.causal_align = CausalAlign::kTopLeft; }, "kBottomRight"},
      {"dropout", [](World& w) { w.p.dropout_p = 0.1f; }, "dropout_p"},
      {"sink NaN",
       [](World& w) {  // this World has no sinks: make them (indexing the empty vector was out of bounds)
         w.sinks.assign(static_cast<size_t>(w.c.hq), 0.5f);
         w.sinks[2] = kNaN;
         w.p.sink_logits = w.sinks.data();
       },
       "sink_logits[2]"},
      {"too long append", [](World& w) { w.p.seqlen_new = w.cap + 1; }, "seqlen_new ("},
      {"layout", [](World& w) { w.p.page_layout = KvLayout::kHND; }, "page_layout"},
      {"dtype", [](World& w) { w.p.dtype = DType::kFloat8E4M3; w.p.cache_dtype = DType::kFloat8E4M3; }, "fp8"},
      {"mismatched dtypes", [](World& w) { w.p.cache_dtype = DType::kBFloat16; }, "cache_dtype (bf16) must equal dtype (fp32)"},
      {"rotary cos only", [](World& w) { w.p.rotary_sin = nullptr; }, "rotary_cos and rotary_sin must both be set"},
      {"negative split", [](World& w) { w.p.num_splits = -1; }, "num_splits (-1)"},
      {"seqlen_new without k", [](World& w) { w.p.k_new = w.p.v_new = TensorRef{}; }, "seqlen_new (2) must be 0"},
      {"max_pages", [](World& w) { w.p.max_pages = 0; }, "max_pages (0)"},
      {"dim stride", [](World& w) { w.p.k_cache.dim_stride = 2; }, "k_cache dim_stride (2) must be 1"},
      {"impl", [](World& w) { w.p.impl = Impl::kLearnV2; }, "impl learn_v2 does not run the KV-cache path on the cpu"},
      {"cpu_flash head_dim", [](World& w) { w.p.impl = Impl::kCpuFlash; w.p.head_dim = 520; },
       "head_dim (520) is not supported by impl cpu_flash"},
      {"rotary pos", [](World& w) { w.p.rotary_max_pos = 3; }, "rotary_max_pos (3) too small"},
      {"heads", [](World& w) { w.p.heads_q = 3; }, "multiple of heads_kv"},
  };
  for (const ErrCase& e : cases) {
    Case c;
    c.paged = true;
    c.page_size = 3;
    c.seqlen_new = 2;
    c.sq = 2;
    c.rotary_dim = 8;
    c.cache_lens = {5, 9};
    World w(c);
    e.mutate(w);
    const auto k0 = w.k_cache, v0 = w.v_cache, o0 = w.out, l0 = w.lse;
    const Status st = attention_with_kvcache(w.p);
    EXPECT_FALSE(st.ok()) << e.what;
    EXPECT_NE(st.message().find(e.message), std::string::npos) << e.what << ": " << st.message();
    EXPECT_TRUE(same_bits(w.k_cache, k0) && same_bits(w.v_cache, v0)) << e.what;
    EXPECT_TRUE(same_bits(w.out, o0) && same_bits(w.lse, l0)) << e.what;
    const Status st2 = kvcache_append(w.p);
    // kvcache_append ignores q/out, so seqlen_q is no error there.
    if (std::string(e.what) != "sq > L causal") {
      EXPECT_FALSE(st2.ok()) << e.what;
      EXPECT_TRUE(same_bits(w.k_cache, k0) && same_bits(w.v_cache, v0)) << e.what;
    }
  }
  // Contiguous-only rules.
  Case c;
  c.batch_idx = true;
  World w(c);
  w.batch_idx[1] = static_cast<int32_t>(w.rows);
  const auto o0 = w.out;
  Status st = attention_with_kvcache(w.p);
  EXPECT_NE(st.message().find("cache_batch_idx[1]"), std::string::npos) << st.message();
  EXPECT_TRUE(same_bits(w.out, o0));
  int64_t bytes = -1;
  World w2(Case{});
  EXPECT_TRUE(kvcache_workspace_size(w2.p, &bytes).ok());
  EXPECT_EQ(bytes, 0);
  w2.p.device = Device::kCUDA;
  st = attention_with_kvcache(w2.p);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  // Sink tokens: validated everywhere (CUDA runs them: tests/gpu/test_cuda_kvcache.cpp).
  w2.p.sink_tokens = -1;
  w2.p.device = Device::kCPU;
  st = attention_with_kvcache(w2.p);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("sink_tokens (-1) must be >= 0"), std::string::npos) << st.message();
}

// ---- attention_combine
TEST(KvCacheCombine, MatchesFormulaAndHandlesEmptySplits) {
  const int64_t S = 4, B = 2, Q = 3, H = 2, D = 8;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> n01(0.f, 1.f);
  std::vector<float> op(S * B * Q * H * D), lp(S * B * H * Q);
  for (float& x : op) x = n01(rng);
  for (float& x : lp) x = 3.f * n01(rng);
  // (b=0, h=0, i=0): splits 1 and 3 are empty; (b=1, h=1, i=2): all empty.
  lp[(1 * B * H + 0) * Q + 0] = -INFINITY;
  lp[(3 * B * H + 0) * Q + 0] = -INFINITY;
  for (int64_t s = 0; s < S; ++s) lp[((s * B + 1) * H + 1) * Q + 2] = -INFINITY;
  // (b=1, h=0, i=1): split 2's LSE is NaN (a refused sequence's partial): the row is NaN, not dropped.
  lp[((2 * B + 1) * H + 0) * Q + 1] = NAN;
  std::vector<float> out(B * Q * H * D, 7.f), lse(B * H * Q, 7.f);
  CombineParams c;
  c.num_splits = S;
  c.batch = B;
  c.seqlen_q = Q;
  c.heads = H;
  c.head_dim = D;
  c.out_partial = op.data();
  c.out_partial_split_stride = B * Q * H * D;
  c.out_partial_batch_stride = Q * H * D;
  c.out_partial_row_stride = H * D;
  c.out_partial_head_stride = D;
  c.lse_partial = lp.data();
  c.lse_partial_split_stride = B * H * Q;
  c.lse_partial_batch_stride = H * Q;
  c.lse_partial_head_stride = Q;
  c.out = contiguous(out.data(), Q, H, D);
  c.lse = lse.data();
  c.lse_batch_stride = H * Q;
  c.lse_head_stride = Q;
  ASSERT_TRUE(attention_combine(c).ok());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Q; ++i) {
        double m = -kInf;
        bool nan_in = false;
        for (int64_t s = 0; s < S; ++s) {
          m = std::max(m, double(lp[((s * B + b) * H + h) * Q + i]));
          nan_in |= std::isnan(lp[((s * B + b) * H + h) * Q + i]);
        }
        const float got_l = lse[(b * H + h) * Q + i];
        if (nan_in) {
          EXPECT_TRUE(std::isnan(got_l));
          for (int64_t e = 0; e < D; ++e) EXPECT_TRUE(std::isnan(out[((b * Q + i) * H + h) * D + e]));
          continue;
        }
        if (m == -kInf) {
          EXPECT_EQ(got_l, -INFINITY);
          for (int64_t e = 0; e < D; ++e) EXPECT_EQ(out[((b * Q + i) * H + h) * D + e], 0.f);
          continue;
        }
        double sum = 0;
        std::vector<double> acc(D, 0.0);
        for (int64_t s = 0; s < S; ++s) {
          const double w = std::exp(double(lp[((s * B + b) * H + h) * Q + i]) - m);
          sum += w;
          for (int64_t e = 0; e < D; ++e) acc[e] += w * op[(((s * B + b) * Q + i) * H + h) * D + e];
        }
        EXPECT_NEAR(got_l, m + std::log(sum), 1e-5);
        for (int64_t e = 0; e < D; ++e) EXPECT_NEAR(out[((b * Q + i) * H + h) * D + e], acc[e] / sum, 1e-6);
      }
  EXPECT_FALSE(std::isnan(out[0]));
  // Errors write nothing.
  const auto o0 = out;
  c.num_splits = 0;
  Status st = attention_combine(c);
  EXPECT_NE(st.message().find("num_splits (0)"), std::string::npos) << st.message();
  c.num_splits = S;
  c.lse_partial = nullptr;
  st = attention_combine(c);
  EXPECT_NE(st.message().find("lse_partial"), std::string::npos) << st.message();
  EXPECT_TRUE(same_bits(out, o0));
}

}  // namespace

namespace {

std::vector<uint16_t> to_bf16(std::vector<float>& x) {  // rounds x to bf16 in place, returns the bits
  std::vector<uint16_t> b(x.size());
  for (size_t e = 0; e < x.size(); ++e) {
    flashlab::store_from_float(flashlab::DType::kBFloat16, &b[e], x[e]);
    x[e] = flashlab::load_as_float(flashlab::DType::kBFloat16, &b[e]);
  }
  return b;
}

// bf16 storage (element size 2 in every offset) agrees with fp32 on the same bf16 values.
void bf16_matches_fp32(const Case& c) {
  World w(c);
  auto q16 = to_bf16(w.q), k16 = to_bf16(w.k_cache), v16 = to_bf16(w.v_cache);
  auto kn16 = to_bf16(w.k_new), vn16 = to_bf16(w.v_new);
  std::vector<uint16_t> out16(w.out.size());
  KvCacheParams p = w.p;
  ASSERT_TRUE(attention_with_kvcache(w.p).ok());
  p.dtype = p.cache_dtype = DType::kBFloat16;
  p.q.ptr = q16.data();
  p.out.ptr = out16.data();
  p.k_cache.ptr = k16.data();
  p.v_cache.ptr = v16.data();
  p.k_new.ptr = kn16.data();
  p.v_new.ptr = vn16.data();
  std::vector<float> lse16(w.lse.size());
  p.lse = lse16.data();
  const auto k16_0 = k16, v16_0 = v16;
  // cpu_flash first, on a copy of the caches: the append must store the same bits as the reference.
  {
    auto k16c = k16, v16c = v16;
    std::vector<uint16_t> outc(out16.size());
    KvCacheParams pf = p;
    pf.impl = Impl::kCpuFlash;
    pf.k_cache.ptr = k16c.data();
    pf.v_cache.ptr = v16c.data();
    pf.out.ptr = outc.data();
    std::vector<float> lsec(w.lse.size());
    pf.lse = lsec.data();
    const Status sf = attention_with_kvcache(pf);
    ASSERT_TRUE(sf.ok()) << sf.to_string();
    ASSERT_TRUE(kvcache_append(p).ok());  // the reference's append, on k16/v16
    EXPECT_EQ(std::memcmp(k16c.data(), k16.data(), k16.size() * 2), 0);
    EXPECT_EQ(std::memcmp(v16c.data(), v16.data(), v16.size() * 2), 0);
    k16 = k16_0;
    v16 = v16_0;
    for (size_t e = 0; e < w.out.size(); ++e)
      ASSERT_NEAR(load_as_float(DType::kBFloat16, &outc[e]), w.out[e], 0.03f * std::max(1.0f, std::abs(w.out[e]))) << e;
    for (size_t e = 0; e < w.lse.size(); ++e) ASSERT_NEAR(lsec[e], w.lse[e], 0.03f) << e;
  }
  const Status st = attention_with_kvcache(p);
  ASSERT_TRUE(st.ok()) << st.to_string();
  auto near_bf16 = [](float got, float want) {  // within 1 bf16 ulp (and a little for the math)
    return std::abs(got - want) <= std::ldexp(std::max(std::abs(want), 1e-3f), -7);
  };
  for (size_t e = 0; e < w.k_cache.size(); ++e) {
    const float g = load_as_float(DType::kBFloat16, &k16[e]), x = w.k_cache[e];
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(g)) << e;  // unfilled slots untouched
    } else {
      ASSERT_TRUE(near_bf16(g, x)) << e << ": " << g << " vs " << x;
    }
    const float gv = load_as_float(DType::kBFloat16, &v16[e]), xv = w.v_cache[e];
    ASSERT_TRUE(std::isnan(xv) ? std::isnan(gv) : gv == xv) << e;  // v is copied exactly
  }
  // Rotated q and k are rounded to bf16 there (to fp32 here): compare loosely.
  for (size_t e = 0; e < w.out.size(); ++e) {
    const float g = load_as_float(DType::kBFloat16, &out16[e]);
    ASSERT_NEAR(g, w.out[e], 0.03f * std::max(1.0f, std::abs(w.out[e]))) << e;
  }
  for (size_t e = 0; e < w.lse.size(); ++e) ASSERT_NEAR(lse16[e], w.lse[e], 0.03f) << e;
}

// Rotary tables in bf16 / fp16 are used as their exact fp32 values: the same call with the fp32
// tables of those values gives the same bits (out, LSE, the appended caches).
TEST(KvCache, SixteenBitRotaryTables) {
  for (DType td : {DType::kBFloat16, DType::kFloat16})
    for (RotaryStyle st : {RotaryStyle::kInterleaved, RotaryStyle::kNeoX})
      for (Impl impl : {Impl::kReference, Impl::kCpuFlash}) {
        Case c;
        c.paged = true;
        c.page_size = 3;
        c.seqlen_new = 2;
        c.sq = 2;
        c.rotary_dim = 8;
        c.style = st;
        c.cache_lens = {0, 17, 5};
        c.leftpad = {0, 4, 2};
        SCOPED_TRACE(testing::Message() << to_string(td) << " style " << static_cast<int>(st) << " impl "
                                        << static_cast<int>(impl));
        World a(c), b(c);  // the same seed: the same inputs
        std::vector<uint16_t> cos16, sin16;
        for (World* w : {&a, &b})
          for (std::vector<float>* t : {&w->cos_t, &w->sin_t})
            for (float& x : *t) x = round_to(td, x);  // values a 16-bit table holds exactly
        for (size_t i = 0; i < b.cos_t.size(); ++i) {
          uint16_t h;
          store_from_float(td, &h, b.cos_t[i]);
          cos16.push_back(h);
          store_from_float(td, &h, b.sin_t[i]);
          sin16.push_back(h);
        }
        b.p.rotary_cos = cos16.data();
        b.p.rotary_sin = sin16.data();
        b.p.rotary_dtype = td;
        a.p.impl = b.p.impl = impl;
        ASSERT_TRUE(attention_with_kvcache(a.p).ok());
        ASSERT_TRUE(attention_with_kvcache(b.p).ok());
        EXPECT_TRUE(same_bits(a.out, b.out));
        EXPECT_TRUE(same_bits(a.lse, b.lse));
        EXPECT_TRUE(same_bits(a.k_cache, b.k_cache));
        EXPECT_TRUE(same_bits(a.v_cache, b.v_cache));
      }
  // A table type the kernels do not read is refused, with nothing written.
  Case c;
  c.seqlen_new = 1;
  c.rotary_dim = 8;
  c.cache_lens = {3};
  World w(c);
  const std::vector<float> k0 = w.k_cache;
  w.p.rotary_dtype = DType::kFloat8E4M3;
  const Status st = attention_with_kvcache(w.p);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rotary_dtype"), std::string::npos) << st.to_string();
  EXPECT_TRUE(same_bits(w.k_cache, k0));
}

TEST(KvCache, Bf16MatchesFp32) {
  Case c;
  c.paged = true;
  c.page_size = 3;
  c.layout = KvLayout::kHND;
  c.seqlen_new = 2;
  c.sq = 2;
  c.rotary_dim = 8;
  c.style = RotaryStyle::kInterleaved;
  c.cache_lens = {0, 17, 40};
  c.leftpad = {0, 3, 0};
  bf16_matches_fp32(c);
  c.sink_tokens = 4;  // StreamingLLM sink tokens left of a window
  c.window_left = 5;
  c.seed = 2;
  SCOPED_TRACE("sink_tokens 4");
  bf16_matches_fp32(c);
}

}  // namespace
