// learn/basics/cuda/basics.cuh — what the CUDA-basics programs add to learn/harness.cuh.
//
// The programs in this folder (docs/learn/basics-cuda.md) use the learning path's harness for the
// plumbing (LEARN_CHECK, DeviceBuffer, fill_random_device, time_ms with its L2 flush and median,
// device_name, Args) and this header for the four things a bandwidth lesson needs on top:
//
//   time_launch(fn)      time_ms() for a lambda that only enqueues kernels (no Status to return)
//   memcpy_gbps(bytes)   the 100 % line: device-to-device cudaMemcpy of `bytes`, timed in the
//                        same process, (read + write bytes) / time
//   Report               prints one machine-readable line per measurement:
//                          result | <program> | <case> | <value> | <unit> | <% of memcpy or ->
//                        learn/basics/summarize.py turns these lines into the summary table
//   Check                validation tally: expect_close / expect_equal against a CPU result, a
//                        program exits 1 when any version failed (it still times the others)
//
// Build (no CMake needed; learn/basics/run_gpu.sh does this for every program):
//   nvcc -std=c++17 -O3 -arch=sm_90a -lineinfo -DFLASHLAB_WITH_CUDA -I include -I src -I learn \
//        -o build-basics/04_coalescing learn/basics/cuda/04_coalescing.cu src/api/status.cpp
#pragma once

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "harness.cuh"

namespace flashlab {
namespace learn {
namespace basics {

// Warm-up 2, then up to 50 reps or ~300 ms, median; the L2 is flushed before each rep (outside
// the events) unless flush_l2 is false (transfers, where there is nothing on the device to flush).
template <typename F>
Timing time_launch(F&& enqueue, bool flush_l2 = true) {
  return time_ms(
      [&]() -> Status {
        enqueue();
        return cuda_status(cudaGetLastError(), "kernel launch", __FILE__, __LINE__);
      },
      nullptr, /*warmup=*/2, /*min_reps=*/5, /*max_reps=*/50, /*budget_ms=*/300.0, flush_l2);
}

inline double gbps(double bytes, double ms) {
  return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0;
}

// Device-to-device cudaMemcpy of `bytes`: the bandwidth every copy-like kernel is compared with.
// Counted as (bytes read + bytes written) / time, the same accounting as the kernels' lines.
inline double memcpy_gbps(size_t bytes) {
  DeviceBuffer a, b;
  if (!a.allocate(bytes) || !b.allocate(bytes) ||
      !fill_random_device(a.get(), DType::kFloat32, static_cast<int64_t>(bytes / 4), 1))
    return 0;
  const Timing t = time_launch([&] { cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice); });
  return t.ok ? gbps(2.0 * bytes, t.median_ms) : 0.0;
}

inline int num_sms() {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  return sms;
}

// One "result | ..." line per measurement, plus a readable line before it.
struct Report {
  std::string program;
  double memcpy_gbps = 0;  // 0: no % column

  // Measures the copy line (when memcpy_bytes > 0) and prints the program's header.
  static Report open(const std::string& program, size_t memcpy_bytes) {
    Report r{program, memcpy_bytes ? basics::memcpy_gbps(memcpy_bytes) : 0.0};
    r.header();
    return r;
  }
  void header() const {
    std::printf("%s on %s\n", program.c_str(), device_name().c_str());
    if (memcpy_gbps > 0) std::printf("device-to-device cudaMemcpy: %.0f GB/s (read + write)\n", memcpy_gbps);
  }
  // A bandwidth line: `bytes` moved (read + written) in t.median_ms.
  void bandwidth(const std::string& name, const Timing& t, double bytes) const {
    if (!t.ok) return failed(name, t);
    const double bw = gbps(bytes, t.median_ms);
    const double pct = memcpy_gbps > 0 ? 100.0 * bw / memcpy_gbps : 0.0;
    std::printf("  %-44s %9.4f ms %8.0f GB/s %6.1f %% of memcpy\n", name.c_str(), t.median_ms, bw, pct);
    std::printf("result | %s | %s | %.0f | GB/s | %.1f %%\n", program.c_str(), name.c_str(), bw, pct);
  }
  // A time line (no bandwidth meaning), with an optional note such as a speed-up.
  void time(const std::string& name, const Timing& t, const std::string& note = "") const {
    if (!t.ok) return failed(name, t);
    std::printf("  %-44s %9.4f ms %s\n", name.c_str(), t.median_ms, note.c_str());
    std::printf("result | %s | %s | %.4f | ms | %s\n", program.c_str(), name.c_str(), t.median_ms,
                note.empty() ? "-" : note.c_str());
  }
  // A count or any other plain value.
  void value(const std::string& name, double v, const std::string& unit, const std::string& note = "") const {
    std::printf("  %-44s %12.6g %s %s\n", name.c_str(), v, unit.c_str(), note.c_str());
    std::printf("result | %s | %s | %.6g | %s | %s\n", program.c_str(), name.c_str(), v, unit.c_str(),
                note.empty() ? "-" : note.c_str());
  }
  void failed(const std::string& name, const Timing& t) const {
    std::printf("  %-44s timing FAILED: %s\n", name.c_str(), t.error.c_str());
    std::printf("result | %s | %s | FAILED | - | -\n", program.c_str(), name.c_str());
  }
};

// Validation tally. Every comparison prints one line; main() returns failures() ? 1 : 0.
class Check {
 public:
  // |got - want| <= atol + rtol * |want| everywhere, NaN never passes.
  template <typename G, typename W>
  bool expect_close(const std::string& name, const G* got, const W* want, size_t n, double rtol,
                    double atol) {
    size_t bad = 0, first = n;
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
      const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
      const double err = std::fabs(g - w);
      if (!(err <= atol + rtol * std::fabs(w))) {
        if (first == n) first = i;
        ++bad;
      }
      if (err > worst || std::isnan(err)) worst = std::isnan(err) ? INFINITY : std::max(worst, err);
    }
    if (bad == 0) return pass(name, "max |err| " + std::to_string(worst));
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%zu of %zu wrong, first at %zu: got %.7g, want %.7g", bad, n, first,
                  static_cast<double>(got[first]), static_cast<double>(want[first]));
    return fail(name, buf);
  }
  template <typename T>
  bool expect_equal(const std::string& name, const T* got, const T* want, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (!(got[i] == want[i])) {
        char buf[160];
        std::snprintf(buf, sizeof(buf), "first difference at %zu: got %.7g, want %.7g", i,
                      static_cast<double>(got[i]), static_cast<double>(want[i]));
        return fail(name, buf);
      }
    return pass(name, "exact");
  }
  bool expect(const std::string& name, bool ok, const std::string& why) {
    return ok ? pass(name, why) : fail(name, why);
  }

  bool pass(const std::string& name, const std::string& detail) {
    std::printf("  validate %-40s ok (%s)\n", name.c_str(), detail.c_str());
    return true;
  }
  bool fail(const std::string& name, const std::string& detail) {
    ++failures_;
    std::printf("  validate %-40s FAILED: %s\n", name.c_str(), detail.c_str());
    return false;
  }
  int failures() const { return failures_; }
  int exit_code(const char* program) const {
    std::printf("%s: %s\n", program, failures_ ? "VALIDATION FAILED" : "all versions validated");
    return failures_ ? 1 : 0;
  }

 private:
  int failures_ = 0;
};

// n random N(0, 1) floats on the device and their host copy (the CPU references' input).
inline bool random_floats(DeviceBuffer& d, std::vector<float>& h, size_t n, uint64_t seed) {
  h.resize(n);
  return d.allocate(n * sizeof(float)) &&
         fill_random_device(d.get(), DType::kFloat32, static_cast<int64_t>(n), seed) &&
         LEARN_CHECK(cudaDeviceSynchronize()) && d.download(h.data(), n * sizeof(float));
}

inline std::vector<float> download_floats(const DeviceBuffer& d, size_t n) {
  std::vector<float> h(n);
  if (!LEARN_CHECK(cudaDeviceSynchronize()) || !d.download(h.data(), n * sizeof(float)))
    std::fill(h.begin(), h.end(), NAN);
  return h;
}

}  // namespace basics
}  // namespace learn
}  // namespace flashlab
