// `flashlab bench --decode`: one random KV cache, filled to cache_len for every sequence, and the
// dense float64 reference as the oracle (attention_forward of impl reference on the same keys
// gathered into plain (batch, cache_len, heads_kv, head_dim) tensors). The oracle is a different
// code path from attention_with_kvcache's own reference, so a page-table, stride or GQA mapping
// bug in either shows as a failed check instead of agreeing with itself.
#include "cli/decode.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <new>
#include <numeric>
#include <random>

#include "cli/bench_setup.h"
#include "cli/decode_runner.h"
#include "cli/progress.h"
#include "testing/problem.h"

namespace flashlab {
namespace cli {

double decode_kv_bytes(const BenchOptions& o) {
  return static_cast<double>(o.batch) * o.cache_len * o.heads_kv * o.head_dim * 2.0 *
         static_cast<double>(dtype_size(o.dtype));
}

bool DecodeReport::all_passed() const {
  for (const DecodeRow& r : rows)
    if (counts_as_failure(r.status)) return false;
  return true;
}

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Shape rules the library cannot see before we allocate (it validates the rest on the first call).
Status check_decode_shape(const BenchOptions& o) {
  auto positive = [](const char* opt, int64_t v) {
    return v >= 1 ? Status::Ok()
                  : Status::Invalid(std::string(opt) + " (" + std::to_string(v) + ") must be >= 1");
  };
  FLASHLAB_RETURN_IF_ERROR(positive("--batch", o.batch));
  FLASHLAB_RETURN_IF_ERROR(positive("--heads", o.heads));
  FLASHLAB_RETURN_IF_ERROR(positive("--heads-kv", o.heads_kv));
  FLASHLAB_RETURN_IF_ERROR(positive("--head-dim", o.head_dim));
  FLASHLAB_RETURN_IF_ERROR(positive("--seqlen (queries per sequence)", o.seqlen_q));
  FLASHLAB_RETURN_IF_ERROR(positive("--cache-len", o.cache_len));
  if (o.cache_len > INT32_MAX)
    return Status::Invalid("--cache-len (" + std::to_string(o.cache_len) +
                           ") must fit cache_seqlens (int32)");
  if (o.splits < 0 || o.splits > 1024)
    return Status::Invalid("--splits (" + std::to_string(o.splits) + ") must be in 0..1024 (0 = auto)");
  if (o.page_size < 0)
    return Status::Invalid("--page-size (" + std::to_string(o.page_size) + ") must be >= 0 (0 = contiguous)");
  if (o.page_size > 0 && o.batch * ceil_div(o.cache_len, o.page_size) > INT32_MAX)
    return Status::Invalid("--batch x ceil(--cache-len / --page-size) pages must fit the int32 page table");
  return Status::Ok();
}

// Everything the run allocates on the host, before any of it: the cache (K and V), q, out, the
// oracle's output, and with the check the oracle's fp32 copies of K, V and q plus its float64
// score rows (seqlen_q x cache_len, S and P, per thread). Same 75 % rule as the training bench.
Status check_decode_memory(const BenchOptions& o, int threads, bool check, double* total) {
  const double es = static_cast<double>(dtype_size(o.dtype));
  const double slots = o.page_size > 0
                           ? static_cast<double>(o.batch) * ceil_div(o.cache_len, o.page_size) * o.page_size
                           : static_cast<double>(o.batch) * o.cache_len;
  const double cache = 2.0 * slots * o.heads_kv * o.head_dim * es;
  const double qo = static_cast<double>(o.batch) * o.seqlen_q * o.heads * o.head_dim;
  double need = cache + qo * (2 * es + 4) + 2.0 * qo / o.head_dim * 4;  // q, out, oracle out, lse x2
  if (check) {
    need += 2.0 * static_cast<double>(o.batch) * o.cache_len * o.heads_kv * o.head_dim * 4 + qo * 4;
    need += 2.0 * threads * o.seqlen_q * static_cast<double>(o.cache_len) * 8;
  }
  *total = need;
  const double have =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (need > 0.75 * have)
    return Status(StatusCode::kOutOfMemory, "the decode run needs " + format_bytes(need) +
                                                " of host memory (the cache alone " + format_bytes(cache) +
                                                ") but this machine has " + format_bytes(have) +
                                                " (the limit is 75 %: " + format_bytes(0.75 * have) +
                                                "); lower --cache-len or --batch");
  return Status::Ok();
}

// The inputs of one decode call, in host memory, and the params pointing into them.
struct DecodeProblem {
  testing::HostTensor q, out, k_cache, v_cache;  // caches: (batch or pages, rows, heads_kv, dim)
  std::vector<float> lse;                        // (batch, heads_q, seqlen_q)
  std::vector<int32_t> cache_seqlens, block_table;
  int64_t num_pages = 0, max_pages = 0;

  explicit DecodeProblem(const BenchOptions& o) {
    std::mt19937_64 rng(o.seed);
    // N(0, 1), rounded to the dtype, on every core (a 64k cache of B 32 is 4 G elements), seeded
    // from --seed and the tensor (HostTensor::fill_normal_parallel: values independent of the
    // thread count).
    int tensor_id = 0;
    auto fill = [&](testing::HostTensor* t) {
      t->fill_normal_parallel(o.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(++tensor_id) * 0x100000001B3ull);
    };
    q.allocate(o.dtype, o.batch, o.seqlen_q, o.heads, o.head_dim, 0);
    out.allocate(o.dtype, o.batch, o.seqlen_q, o.heads, o.head_dim, 0);
    lse.assign(static_cast<size_t>(o.batch * o.heads * o.seqlen_q), 0.0f);
    fill(&q);
    if (o.page_size > 0) {
      max_pages = ceil_div(o.cache_len, o.page_size);
      num_pages = o.batch * max_pages;
      block_table.resize(static_cast<size_t>(num_pages));
      std::iota(block_table.begin(), block_table.end(), 0);
      if (!o.pages_in_order) std::shuffle(block_table.begin(), block_table.end(), rng);  // neighbours far apart
      k_cache.allocate(o.dtype, num_pages, o.page_size, o.heads_kv, o.head_dim, 0);
      v_cache.allocate(o.dtype, num_pages, o.page_size, o.heads_kv, o.head_dim, 0);
    } else {
      k_cache.allocate(o.dtype, o.batch, o.cache_len, o.heads_kv, o.head_dim, 0);
      v_cache.allocate(o.dtype, o.batch, o.cache_len, o.heads_kv, o.head_dim, 0);
    }
    fill(&k_cache);
    fill(&v_cache);
    cache_seqlens.assign(static_cast<size_t>(o.batch), static_cast<int32_t>(o.cache_len));
  }

  // (page or row, slot within it) of key j of sequence b.
  std::pair<int64_t, int64_t> slot(const BenchOptions& o, int64_t b, int64_t j) const {
    if (o.page_size == 0) return {b, j};
    return {block_table[b * max_pages + j / o.page_size], j % o.page_size};
  }

  KvCacheParams params(const BenchOptions& o, Impl impl, int threads) {
    KvCacheParams p;
    p.dtype = o.dtype;
    p.cache_dtype = o.dtype;
    p.device = Device::kCPU;
    p.impl = impl;
    p.num_threads = threads;
    p.batch = o.batch;
    p.seqlen_q = o.seqlen_q;
    p.heads_q = o.heads;
    p.heads_kv = o.heads_kv;
    p.head_dim = o.head_dim;
    p.q = q.ref();
    p.out = out.mut();
    p.lse = lse.data();
    p.lse_batch_stride = o.heads * o.seqlen_q;
    p.lse_head_stride = o.seqlen_q;
    if (o.page_size > 0) {
      p.k_cache = paged_cache(k_cache.data(), KvLayout::kNHD, o.page_size, o.heads_kv, o.head_dim);
      p.v_cache = paged_cache(v_cache.data(), KvLayout::kNHD, o.page_size, o.heads_kv, o.head_dim);
      p.block_table = block_table.data();
      p.max_pages = max_pages;
      p.num_pages = num_pages;
      p.page_size = o.page_size;
      p.page_layout = KvLayout::kNHD;
    } else {
      p.k_cache = k_cache.mut();
      p.v_cache = v_cache.mut();
      p.max_seqlen_cache = o.cache_len;
    }
    p.cache_seqlens = cache_seqlens.data();
    p.num_splits = static_cast<int>(o.splits);
    return p;
  }

  void poison() {
    out.fill_nan();
    std::fill(lse.begin(), lse.end(), std::nanf(""));
  }

  // The buffers and their sizes, for a device runner to mirror (decode_runner.h).
  DecodeHostView host_view(const BenchOptions& o, Impl impl, int threads) {
    DecodeHostView v;
    v.params = params(o, impl, threads);
    v.q_bytes = q.bytes.size();
    v.out_bytes = out.bytes.size();
    v.k_bytes = k_cache.bytes.size();
    v.v_bytes = v_cache.bytes.size();
    v.lse_count = lse.size();
    v.seqlens_count = cache_seqlens.size();
    v.table_count = block_table.size();
    return v;
  }
};

// The oracle: attention_forward (impl reference, float64 inside) on the cached keys gathered into
// dense fp32 tensors (exact: the cache holds dtype-rounded values).
Status run_oracle(const BenchOptions& o, const DecodeProblem& pb, int threads, testing::HostTensor* out,
                  std::vector<float>* lse) {
  testing::HostTensor q, k, v;
  q.allocate(DType::kFloat32, o.batch, o.seqlen_q, o.heads, o.head_dim, 0);
  k.allocate(DType::kFloat32, o.batch, o.cache_len, o.heads_kv, o.head_dim, 0);
  v.allocate(DType::kFloat32, o.batch, o.cache_len, o.heads_kv, o.head_dim, 0);
  out->allocate(DType::kFloat32, o.batch, o.seqlen_q, o.heads, o.head_dim, 0);
  lse->assign(pb.lse.size(), 0.0f);
  for (int64_t b = 0; b < o.batch; ++b) {
    for (int64_t i = 0; i < o.seqlen_q; ++i)
      for (int64_t h = 0; h < o.heads; ++h)
        for (int64_t d = 0; d < o.head_dim; ++d) q.set(b, i, h, d, pb.q.get(b, i, h, d));
    for (int64_t j = 0; j < o.cache_len; ++j) {
      const auto s = pb.slot(o, b, j);
      for (int64_t h = 0; h < o.heads_kv; ++h)
        for (int64_t d = 0; d < o.head_dim; ++d) {
          k.set(b, j, h, d, pb.k_cache.get(s.first, s.second, h, d));
          v.set(b, j, h, d, pb.v_cache.get(s.first, s.second, h, d));
        }
    }
  }
  FwdParams f;
  f.dtype = DType::kFloat32;
  f.impl = Impl::kReference;
  f.num_threads = threads;
  f.batch = o.batch;
  f.seqlen_q = o.seqlen_q;
  f.seqlen_k = o.cache_len;
  f.heads_q = o.heads;
  f.heads_kv = o.heads_kv;
  f.head_dim = o.head_dim;
  f.q = q.ref();
  f.k = k.ref();
  f.v = v.ref();
  f.out = out->mut();
  f.lse = lse->data();
  f.lse_batch_stride = o.heads * o.seqlen_q;
  f.lse_head_stride = o.seqlen_q;
  return attention_forward(f);
}

// The implementations to run: those named with --impl, or every available CPU one and, on a GPU,
// cuda_sm80 (the CUDA KV-cache kernels: cuda_sm90 names the same kernels, so the default run does
// not time them twice). A CUDA build without a GPU lists no CUDA implementation as available.
Status select_decode_impls(const BenchOptions& o, DecodeReport* r, std::vector<ImplInfo>* out) {
  const std::vector<ImplInfo> all = list_implementations();
  out->clear();
  for (const ImplInfo& info : all) {
    if (!info.available || info.impl == Impl::kAuto) continue;
    const bool named = std::find(o.impls.begin(), o.impls.end(), info.impl) != o.impls.end();
    if (o.impls_explicit ? !named : info.experimental) continue;
    if (info.device != Device::kCPU) {
#if defined(FLASHLAB_WITH_CUDA)
      if (info.device == Device::kCUDA && (o.impls_explicit || info.impl == Impl::kCudaSm80)) {
        out->push_back(info);
        continue;
      }
      if (!o.impls_explicit)
        r->notes.push_back(std::string("not run: ") + info.name +
                           " (the default decode run times the CUDA KV-cache kernels once, as cuda_sm80)");
      continue;
#else
      (void)r;  // notes are only for the CUDA rows
      if (o.impls_explicit)
        return Status::Unsupported(std::string("--impl ") + info.name + ": this build has no CUDA decode path");
      continue;
#endif
    }
    out->push_back(info);
  }
  for (Impl impl : o.impls)
    if (std::none_of(out->begin(), out->end(), [&](const ImplInfo& i) { return i.impl == impl; }))
      return Status::Unsupported(std::string("--impl ") + to_string(impl) +
                                 ": not available on this machine (see flashlab info)");
  return Status::Ok();
}

// Size of the LSE buffer's logical part.
size_t lse_count(const BenchOptions& o) {
  return static_cast<size_t>(o.batch * o.heads * o.seqlen_q);
}

}  // namespace

Status run_decode(const BenchOptions& o, DecodeReport* r) {
  r->options = o;
  r->threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  r->kv_bytes = decode_kv_bytes(o);
  r->tol = default_tolerance(o.dtype);
  if (o.tol_rel_l2 >= 0) {
    r->tol.rel_l2 = o.tol_rel_l2;
    r->tol.max_abs = o.tol_max_abs;
  }
  FLASHLAB_RETURN_IF_ERROR(check_decode_shape(o));
  std::vector<ImplInfo> impls;
  FLASHLAB_RETURN_IF_ERROR(select_decode_impls(o, r, &impls));
  const bool check = !o.no_check;
  double need = 0;
  FLASHLAB_RETURN_IF_ERROR(check_decode_memory(o, r->threads, check, &need));

  Progress progress(!o.quiet);
  progress.phase("random inputs (q and the cache)");
  std::unique_ptr<DecodeProblem> pb;
  try {
    pb.reset(new DecodeProblem(o));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory,
                  "cannot allocate the decode problem's host buffers (" + format_bytes(need) + ")");
  }
  r->num_pages = pb->num_pages;
  // The generic shape rules (heads_q a multiple of heads_kv, head_dim, ...) before any work:
  // invalid arguments stop the run, as in the training bench.
  int64_t ws = 0;
  FLASHLAB_RETURN_IF_ERROR(kvcache_workspace_size(pb->params(o, Impl::kReference, r->threads), &ws));

  testing::HostTensor want;
  std::vector<float> want_lse;
  if (check) {
    progress.phase("dense float64 reference: oracle run");
    Status st = run_oracle(o, *pb, r->threads, &want, &want_lse);
    if (!st.ok()) return Status(st.code(), "oracle run (attention_forward, impl reference): " + st.message());
    r->reference_checked = true;
  } else {
    r->notes.push_back(
        "no reference check (--no-check): outputs are only checked for NaN / unwritten elements");
  }

  for (const ImplInfo& info : impls) {
    DecodeRow row;
    row.impl = info.name;
    row.device = info.device;
    const KvCacheParams p = pb->params(o, info.impl, r->threads);
    progress.phase(std::string(info.name) + " decode: check run");
    pb->poison();
    // A device implementation runs on device copies (decode_runner.h); its outputs come back into
    // the host buffers, so the checks below are the same for every row.
    std::unique_ptr<DecodeRunner> device;
    Status st = Status::Ok();
    if (info.device != Device::kCPU) {
#if defined(FLASHLAB_WITH_CUDA)
      st = make_cuda_decode_runner(pb->host_view(o, info.impl, r->threads), info.impl, &device);
      if (st.ok()) st = device->run_once();
#else
      st = Status::Unsupported("this build has no CUDA decode path");
#endif
    } else {
      st = attention_with_kvcache(p);
    }
    if (!st.ok()) {
      // Named with --impl: its failure is the user's answer. Otherwise an implementation without
      // the KV-cache path is skipped with a note.
      row.status = st.code() == StatusCode::kUnsupported && !o.impls_explicit ? RowStatus::kSkipped
                                                                              : RowStatus::kError;
      row.message = st.to_string();
      r->rows.push_back(row);
      continue;
    }
    if (check) {
      row.checks = {check_tensor("out", pb->out, want, r->tol),
                    check_lse(pb->lse, want_lse, lse_count(o), r->tol)};
    } else {
      row.checks = {check_written("out", pb->out), check_lse_written(pb->lse, lse_count(o))};
    }
    bool pass = true;
    for (const TensorCheck& c : row.checks) pass = pass && c.pass;
    row.status = !pass ? RowStatus::kFail : check ? RowStatus::kPass : RowStatus::kUnchecked;

    progress.phase(std::string(info.name) + " decode: timing");
    if (device) {
      TimingPlan plan;
      plan.warmup = o.warmup;
      plan.iters = o.iters;
      st = device->time(plan, [&](int i, int n) { progress.iteration(i, n); }, &row.ms);
    }
    for (int i = 0; !device && i < o.warmup + o.iters && st.ok(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      st = attention_with_kvcache(p);
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= o.warmup) row.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      progress.iteration(i + 1, o.warmup + o.iters);
    }
    if (!st.ok()) {
      row.status = RowStatus::kError;
      row.message = "timing: " + st.to_string();
    }
    note_spread(std::string(info.name) + " decode", row.ms, info.device == Device::kCPU, r->threads, &r->notes);
    row.median_ms = median(row.ms);
    if (row.median_ms > 0) row.tb_per_s = r->kv_bytes / (row.median_ms * 1e-3) / 1e12;
    r->rows.push_back(row);
  }
  progress.done();
  return Status::Ok();
}

}  // namespace cli
}  // namespace flashlab
