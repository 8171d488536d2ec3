// `flashlab bench`: the reference runs once (the oracle), then every selected implementation is
// checked against it (outputs poisoned first) and timed. Rows are collected in a BenchReport.
#include "cli/bench.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <new>

#include "cli/bench_setup.h"
#include "cli/commands.h"
#include "cli/decode.h"
#include "cli/progress.h"
#include "cli/report.h"
#include "cli/runner.h"

namespace flashlab {
namespace cli {

const char* to_string(RowStatus s) {
  switch (s) {
    case RowStatus::kPass: return "PASS";
    case RowStatus::kFail: return "FAIL";
    case RowStatus::kError: return "ERROR";
    case RowStatus::kSkipped: return "skip";
    case RowStatus::kReference: return "ref";
    case RowStatus::kUnchecked: return "unchecked";
  }
  return "?";
}

bool counts_as_failure(RowStatus s) { return s == RowStatus::kFail || s == RowStatus::kError; }

bool BenchReport::all_passed() const {
  for (const BenchRow& r : rows)
    if (counts_as_failure(r.status)) return false;
  return true;
}

namespace {
// A timing whose slowest run is this many times its fastest is noise, not a measurement.
constexpr double kMaxSpread = 1.5;
}  // namespace

// A note when the timed runs spread widely, with what usually steadies them: one thread for a
// tiny CPU shape (thread start-up and wake-ups dominate a run under a millisecond), otherwise more
// runs (the median of more runs is steadier) or a machine with fewer other processes.
void note_spread(const std::string& who, const std::vector<double>& ms, bool cpu, int threads,
                 std::vector<std::string>* notes) {
  if (ms.size() < 2) return;
  const auto mm = std::minmax_element(ms.begin(), ms.end());
  const double lo = *mm.first, hi = *mm.second;
  if (!(lo > 0) || hi / lo <= kMaxSpread) return;
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%s: the timed runs spread widely (%.3f to %.3f ms over %zu runs, max/min %.2f > %.1f); "
                "the median may be off: ",
                who.c_str(), lo, hi, ms.size(), hi / lo, kMaxSpread);
  std::string fix = buf;
  if (cpu && threads > 1 && lo < 1.0)
    fix += "for a tiny CPU shape try --threads 1 (thread start-up dominates), ";
  fix += "more runs (--iters N), or a machine with fewer other processes running";
  notes->push_back(fix);
}

namespace {

// Without --iters, a row stops timing once it has spent this long (at least one iteration), and a
// check run slower than this is its only timed sample: the float64 reference at 1k x 1k takes
// seconds per call and the default run must stay well under a minute on two cores.
constexpr double kTimeBudgetS = 2.0;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The oracle: reference outputs on the problem's inputs.
struct Oracle {
  bool have = false;
  testing::HostTensor out, dq, dk, dv;
  std::vector<float> lse;
  // The reference's own rows, when it is also one of the selected implementations.
  double fwd_ms = 0, bwd_ms = 0;
  int64_t fwd_peak = -1, bwd_peak = -1;
  std::vector<TensorCheck> fwd_checks, bwd_checks;
};

// Logical LSE elements: (batch, heads_q, seqlen_q), or (heads_q, total_q) for varlen. The buffer
// holds at least one element even when there are none, which nobody writes.
size_t lse_count(const testing::Problem& pb) {
  const testing::ProblemSpec& s = pb.spec;
  const int64_t n = pb.varlen() ? s.heads_q * pb.cu_seqlens_q.back() : s.batch * s.heads_q * s.seqlen_q;
  return static_cast<size_t>(n);
}

bool all_pass(const std::vector<TensorCheck>& checks) {
  for (const TensorCheck& c : checks)
    if (!c.pass) return false;
  return true;
}

std::vector<TensorCheck> forward_checks(const testing::Problem& pb, const Oracle& o,
                                        const Tolerance& tol) {
  if (!o.have) return {check_written("out", pb.out), check_lse_written(pb.lse, lse_count(pb))};
  return {check_tensor("out", pb.out, o.out, tol), check_lse(pb.lse, o.lse, lse_count(pb), tol)};
}
std::vector<TensorCheck> backward_checks(const testing::Problem& pb, const Oracle& o,
                                         const Tolerance& tol) {
  if (!o.have)
    return {check_written("dq", pb.dq), check_written("dk", pb.dk), check_written("dv", pb.dv)};
  return {check_tensor("dq", pb.dq, o.dq, tol), check_tensor("dk", pb.dk, o.dk, tol),
          check_tensor("dv", pb.dv, o.dv, tol)};
}

// Puts the reference's forward outputs back as the backward's inputs.
void restore_forward_outputs(testing::Problem* pb, const Oracle& o) {
  if (!o.have) return;
  std::copy(o.out.bytes.begin(), o.out.bytes.end(), pb->out.bytes.begin());
  std::copy(o.lse.begin(), o.lse.end(), pb->lse.begin());
}

// Runs the reference once on the problem. Returns the first failing Status (then o->have = false).
Status run_oracle(testing::Problem* pb, bool backward, int threads, Progress* progress, Oracle* o) {
  std::unique_ptr<ImplRunner> ref = make_cpu_runner(pb, Impl::kReference, threads);
  progress->phase("reference forward: oracle run");
  FLASHLAB_RETURN_IF_ERROR(ref->forward_once(&o->fwd_ms, &o->fwd_peak));
  o->fwd_checks = {check_written("out", pb->out), check_lse_written(pb->lse, lse_count(*pb))};
  o->out = pb->out;
  o->lse = pb->lse;
  if (backward) {
    progress->phase("reference backward: oracle run");
    FLASHLAB_RETURN_IF_ERROR(ref->backward_once(&o->bwd_ms, &o->bwd_peak));
    o->bwd_checks = {check_written("dq", pb->dq), check_written("dk", pb->dk),
                     check_written("dv", pb->dv)};
    o->dq = pb->dq;
    o->dk = pb->dk;
    o->dv = pb->dv;
  }
  o->have = true;
  return Status::Ok();
}

// An implementation's error: a failure, or a skip for an unsupported configuration that the user
// did not ask for by name (the default run tries everything available).
void set_error(BenchRow* row, const Status& st, bool impl_explicit) {
  row->peak_bytes = -1;
  row->status = (st.code() == StatusCode::kUnsupported && !impl_explicit) ? RowStatus::kSkipped
                                                                         : RowStatus::kError;
  row->message = st.to_string();
}

class BenchRun {
 public:
  BenchRun(const BenchOptions& o, BenchReport* r, testing::Problem* pb, Oracle* oracle)
      : o_(o), r_(r), pb_(pb), oracle_(oracle), progress_(!o.quiet) {}

  void sgemm_peer() {
    if (o_.no_sgemm) return;
    r_->sgemm = sgemm_shape(r_->flops.forward);
    progress_.phase("openblas_sgemm " + std::to_string(r_->sgemm.m) + "^3: timing");
    Status st = run_sgemm(r_->threads, plan(), iter_cb(), &r_->sgemm);
    if (!st.ok()) {
      r_->notes.push_back("sgemm peer not run: " + st.to_string());
      return;
    }
    r_->has_sgemm = true;
    if (sgemm_core_is_generic(r_->sgemm.core))
      r_->notes.push_back("OpenBLAS did not recognize this CPU and runs its generic '" +
                          r_->sgemm.core + "' kernels: the sgemm peer is slower than it should be; "
                          "set OPENBLAS_CORETYPE (e.g. SkylakeX, Haswell or Zen) to pick one");
    note_spread("openblas_sgemm", r_->sgemm.ms, true, r_->threads, &r_->notes);
    r_->sgemm_median_ms = median(r_->sgemm.ms);
    r_->sgemm_tflops = r_->sgemm.flops / (r_->sgemm_median_ms * 1e-3) / 1e12;
  }

  void oracle(bool needed) {
    if (!needed) return;
    Status st = run_oracle(pb_, o_.backward, r_->threads, &progress_, oracle_);
    if (!st.ok()) {  // nothing can be checked: a failure even if the reference was not selected
      BenchRow row;
      row.impl = "reference";
      row.status = RowStatus::kError;
      row.message = "oracle run: " + st.to_string();
      r_->rows.push_back(row);
    }
    r_->reference_checked = oracle_->have;
  }

  void implementation(const ImplInfo& info) {
    std::unique_ptr<ImplRunner> runner;
    Status st = make_runner(info, &runner);
    BenchRow fwd = new_row(info, false);
    if (!st.ok()) {
      set_error(&fwd, st, o_.impls_explicit);
      r_->rows.push_back(fwd);
      return;
    }
    const bool is_oracle = info.impl == Impl::kReference && oracle_->have;
    run_pass(info, runner.get(), false, is_oracle, &fwd);
    r_->rows.push_back(fwd);
    if (!o_.backward) return;
    BenchRow bwd = new_row(info, true);
    if (fwd.status == RowStatus::kError || fwd.status == RowStatus::kSkipped) {
      bwd.status = fwd.status;
      bwd.message = "not run: the forward did not run";
    } else {
      run_pass(info, runner.get(), true, is_oracle, &bwd);
    }
    r_->rows.push_back(bwd);
  }

  void finish() { progress_.done(); }

 private:
  TimingPlan plan() const {
    TimingPlan p;
    p.warmup = o_.warmup;
    p.iters = o_.iters;
    p.budget_s = o_.iters_explicit ? 0 : kTimeBudgetS;
    return p;
  }
  IterationCallback iter_cb() {
    return [this](int i, int n) { progress_.iteration(i, n); };
  }

  BenchRow new_row(const ImplInfo& info, bool backward) const {
    BenchRow row;
    row.impl = info.name;
    row.device = info.device;
    row.backward = backward;
    row.flops = backward ? r_->flops.backward : r_->flops.forward;
    return row;
  }

  Status make_runner(const ImplInfo& info, std::unique_ptr<ImplRunner>* out) {
    if (info.device == Device::kCPU) {
      *out = make_cpu_runner(pb_, info.impl, r_->threads);
      return Status::Ok();
    }
#if defined(FLASHLAB_WITH_CUDA)
    progress_.phase(std::string(info.name) + ": copying the problem to the device");
    return make_cuda_runner(pb_, info.impl, out);
#else
    return Status::Unsupported(std::string(info.name) + " needs CUDA; this build has none");
#endif
  }

  // Check run, then timing, of one pass.
  void run_pass(const ImplInfo& info, ImplRunner* runner, bool backward, bool is_oracle,
                BenchRow* row) {
    const std::string what = std::string(info.name) + (backward ? " backward" : " forward");
    double check_ms = 0;
    if (is_oracle) {  // the oracle run was this implementation's check run
      row->status = RowStatus::kReference;
      row->checks = backward ? oracle_->bwd_checks : oracle_->fwd_checks;
      row->peak_bytes = backward ? oracle_->bwd_peak : oracle_->fwd_peak;
      check_ms = backward ? oracle_->bwd_ms : oracle_->fwd_ms;
      if (!all_pass(row->checks)) row->status = RowStatus::kFail;
    } else {
      progress_.phase(what + ": check run");
      if (backward) restore_forward_outputs(pb_, *oracle_);
      Status st = backward ? runner->backward_once(&check_ms, &row->peak_bytes)
                           : runner->forward_once(&check_ms, &row->peak_bytes);
      if (!st.ok()) return set_error(row, st, o_.impls_explicit);
      row->checks = backward ? backward_checks(*pb_, *oracle_, r_->tol)
                             : forward_checks(*pb_, *oracle_, r_->tol);
      row->status = !all_pass(row->checks) ? RowStatus::kFail
                    : oracle_->have        ? RowStatus::kPass
                                           : RowStatus::kUnchecked;
    }

    if (!o_.iters_explicit && check_ms > kTimeBudgetS * 1e3) {
      row->ms = {check_ms};  // too slow to repeat: the check run is the one timed sample
    } else {
      progress_.phase(what + ": timing");
      Status st = backward ? runner->time_backward(plan(), iter_cb(), &row->ms)
                           : runner->time_forward(plan(), iter_cb(), &row->ms);
      if (!st.ok()) return set_error(row, st, o_.impls_explicit);
    }
    note_spread(what, row->ms, info.device == Device::kCPU, r_->threads, &r_->notes);
    row->median_ms = median(row->ms);
    if (row->median_ms > 0) row->tflops = row->flops / (row->median_ms * 1e-3) / 1e12;
  }

  const BenchOptions& o_;
  BenchReport* r_;
  testing::Problem* pb_;
  Oracle* oracle_;
  Progress progress_;
};

// The implementations to run: those named with --impl (each must be available here), or every
// available one that is not experimental (an unverified kernel runs only when named).
Status select_impls(const BenchOptions& o, std::vector<ImplInfo>* out) {
  const std::vector<ImplInfo> all = list_implementations();
  out->clear();
  if (!o.impls_explicit) {
    for (const ImplInfo& info : all)
      if (info.available && !info.experimental && info.impl != Impl::kAuto) out->push_back(info);
    return Status::Ok();
  }
  for (Impl impl : o.impls) {
    auto it = std::find_if(all.begin(), all.end(), [&](const ImplInfo& i) { return i.impl == impl; });
    if (it == all.end() || !it->available)
      return Status::Unsupported(std::string("--impl ") + to_string(impl) +
                                 ": not available on this machine (see flashlab info)");
    if (std::none_of(out->begin(), out->end(), [&](const ImplInfo& i) { return i.impl == impl; }))
      out->push_back(*it);
  }
  return Status::Ok();
}

// Validation with the user's numbers, before any buffer exists. Invalid shapes are errors; an
// implementation that cannot run the configuration is an error when named, else skipped.
Status prevalidate(const BenchOptions& o, const ShapeOnlyParams& shape, BenchReport* r,
                   std::vector<ImplInfo>* impls, bool* reference_can_check) {
  auto validate = [&](Impl impl) {
    Status st = validate_forward(shape.forward(impl));
    if (st.ok() && o.backward) st = validate_backward(shape.backward(impl));
    return st;
  };
  // The reference carries the generic rules that every implementation shares.
  Status st = validate(Impl::kReference);
  if (st.code() == StatusCode::kInvalidArgument) return st;
  *reference_can_check = st.ok();
  if (!st.ok()) r->notes.push_back("no reference check: the reference cannot run this: " + st.to_string());

  std::vector<ImplInfo> runnable;
  Status first_skip;
  for (const ImplInfo& info : *impls) {
    // CUDA implementations are validated by their first call, with real device pointers.
    st = info.device == Device::kCPU ? validate(info.impl) : Status::Ok();
    if (st.code() == StatusCode::kInvalidArgument || (!st.ok() && o.impls_explicit)) return st;
    if (!st.ok()) {
      r->notes.push_back(std::string("skipped ") + info.name + ": " + st.to_string());
      if (first_skip.ok()) first_skip = st;
      continue;
    }
    runnable.push_back(info);
  }
  if (runnable.empty()) return first_skip.ok() ? Status::Unsupported("no implementation to run") : first_skip;
  *impls = runnable;
  return Status::Ok();
}

}  // namespace

Status run_bench(const BenchOptions& o, BenchReport* r) {
  r->options = o;
  r->spec = make_spec(o);
  r->threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  r->tol = default_tolerance(o.dtype);
  if (o.tol_rel_l2 >= 0) {
    r->tol.rel_l2 = o.tol_rel_l2;
    r->tol.max_abs = o.tol_max_abs;
  }

  std::vector<ImplInfo> impls;
  FLASHLAB_RETURN_IF_ERROR(select_impls(o, &impls));
  ShapeOnlyParams shape;
  FLASHLAB_RETURN_IF_ERROR(shape.init(r->spec));
  bool reference_can_check = false;
  FLASHLAB_RETURN_IF_ERROR(prevalidate(o, shape, r, &impls, &reference_can_check));
  FLASHLAB_RETURN_IF_ERROR(check_sizes(r->spec));
  const FwdParams shape_fwd = shape.forward(Impl::kReference);
  r->flops = attention_flops(shape_fwd, shape_fwd.cu_seqlens_q, shape_fwd.cu_seqlens_k);

  bool check = reference_can_check && !o.no_check;
  if (o.no_check) {
    r->notes.push_back("no reference check (--no-check): outputs are only checked for NaN / unwritten elements");
    if (!o.impls_explicit)
      impls.erase(std::remove_if(impls.begin(), impls.end(),
                                 [](const ImplInfo& i) { return i.impl == Impl::kReference; }),
                  impls.end());
  }
  const double matrix = reference_matrix_bytes(r->spec);
  if (check && matrix > kReferenceMatrixLimit && !o.force_check) {
    check = false;
    r->notes.push_back("no reference check: the float64 reference holds a " + format_bytes(matrix) +
                       " score matrix per thread (limit " + format_bytes(kReferenceMatrixLimit) +
                       "); outputs are only checked for NaN / unwritten elements. --check forces it");
    if (!o.impls_explicit) {  // nor is it timed, unless named with --impl
      impls.erase(std::remove_if(impls.begin(), impls.end(),
                                 [](const ImplInfo& i) { return i.impl == Impl::kReference; }),
                  impls.end());
    }
  }

  // Everything the run allocates, the reference's quadratic scratch included, before any of it.
  auto runs = [&](Impl impl) {
    return std::any_of(impls.begin(), impls.end(), [&](const ImplInfo& i) { return i.impl == impl; });
  };
  MemoryPlan mem;
  mem.threads = r->threads;
  mem.backward = o.backward;
  mem.reference = check || runs(Impl::kReference);
  mem.cpu_flash = runs(Impl::kCpuFlash);
  mem.sgemm_flops = o.no_sgemm ? 0 : r->flops.forward;
  FLASHLAB_RETURN_IF_ERROR(check_host_memory(r->spec, mem));

  std::unique_ptr<testing::Problem> pb;
  try {
    pb.reset(new testing::Problem(r->spec));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory, "cannot allocate the problem's host buffers");
  }
  r->spec = pb->spec;

  Oracle oracle;
  BenchRun run(o, r, pb.get(), &oracle);
  try {
    run.sgemm_peer();  // first: OpenBLAS's threads go idle before the OpenMP backends start
    run.oracle(check);
    for (const ImplInfo& info : impls) run.implementation(info);
  } catch (const std::bad_alloc&) {
    run.finish();
    return Status(StatusCode::kOutOfMemory, "out of host memory while running the benchmark");
  }
  run.finish();
  return Status::Ok();
}

int bench_main(int argc, char** argv, int first) {
  BenchOptions o;
  Status st = parse_bench_args(argc, argv, first, &o);
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
    return 2;
  }
  if (o.help) {
    std::fputs(bench_usage(), stdout);
    return 0;
  }
  if (o.decode) {
    DecodeReport report;
    st = run_decode(o, &report);
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
      return 2;
    }
    if (o.json) {
      print_decode_json(report, std::cout);
    } else {
      print_decode_table(report, std::cout);
    }
    return report.all_passed() ? 0 : 1;
  }
  BenchReport report;
  st = run_bench(o, &report);
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
    return 2;
  }
  if (o.json) {
    print_json(report, std::cout);
  } else {
    print_table(report, std::cout);
  }
  return report.all_passed() ? 0 : 1;
}

}  // namespace cli
}  // namespace flashlab
