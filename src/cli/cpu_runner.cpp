// The CPU runner: calls the API on the host Problem's buffers, times with the wall clock and reads
// the peak extra memory from the CPU backends' counted scratch (src/cpu/scratch.h).
#include <chrono>

#include "cli/runner.h"
#include "cpu/scratch.h"

namespace flashlab {
namespace cli {
namespace {

double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

class CpuRunner : public ImplRunner {
 public:
  CpuRunner(testing::Problem* pb, Impl impl, int threads) : pb_(pb) {
    fwd_ = pb->fwd_params(impl);
    bwd_ = pb->bwd_params(impl);
    fwd_.num_threads = bwd_.num_threads = threads;
  }

  Status forward_once(double* ms, int64_t* peak_bytes) override {
    pb_->poison_forward_outputs();
    return measured([&] { return attention_forward(fwd_); }, ms, peak_bytes);
  }
  Status backward_once(double* ms, int64_t* peak_bytes) override {
    pb_->poison_backward_outputs();
    return measured([&] { return attention_backward(bwd_); }, ms, peak_bytes);
  }
  Status time_forward(const TimingPlan& plan, const IterationCallback& cb,
                      std::vector<double>* ms) override {
    return timed([&] { return attention_forward(fwd_); }, plan, cb, ms);
  }
  Status time_backward(const TimingPlan& plan, const IterationCallback& cb,
                       std::vector<double>* ms) override {
    return timed([&] { return attention_backward(bwd_); }, plan, cb, ms);
  }

 private:
  template <typename Call>
  Status measured(Call call, double* ms, int64_t* peak_bytes) {
    detail::scratch_reset_peak();
    const int64_t base = detail::scratch_peak_bytes();  // = live scratch now
    const double t0 = now_ms();
    Status st = call();
    *ms = now_ms() - t0;
    *peak_bytes = detail::scratch_peak_bytes() - base;
    return st;
  }

  template <typename Call>
  Status timed(Call call, const TimingPlan& plan, const IterationCallback& cb,
               std::vector<double>* ms) {
    ms->clear();
    for (int i = 0; i < plan.warmup; ++i) FLASHLAB_RETURN_IF_ERROR(call());
    double spent = 0;
    for (int i = 0; i < plan.iters; ++i) {
      const double t0 = now_ms();
      FLASHLAB_RETURN_IF_ERROR(call());
      ms->push_back(now_ms() - t0);
      spent += ms->back();
      if (cb) cb(i + 1, plan.iters);
      if (plan.budget_s > 0 && spent > plan.budget_s * 1e3) break;
    }
    return Status::Ok();
  }

  testing::Problem* pb_;
  FwdParams fwd_;
  BwdParams bwd_;
};

}  // namespace

std::unique_ptr<ImplRunner> make_cpu_runner(testing::Problem* problem, Impl impl, int threads) {
  return std::unique_ptr<ImplRunner>(new CpuRunner(problem, impl, threads));
}

}  // namespace cli
}  // namespace flashlab
