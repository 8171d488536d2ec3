#include "cpu/scratch.h"

#include <atomic>

namespace flashlab {
namespace detail {
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
}  // namespace

void scratch_add(int64_t bytes) {
  const int64_t now = g_live.fetch_add(bytes) + bytes;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}
void scratch_sub(int64_t bytes) { g_live.fetch_sub(bytes); }
int64_t scratch_peak_bytes() { return g_peak.load(); }
void scratch_reset_peak() { g_peak.store(g_live.load()); }

}  // namespace detail
}  // namespace flashlab
