// learn/basics/cuda/08_softmax_row.cu — row softmax, three passes vs the online softmax.
//
// y[r][j] = exp(x[r][j] - m) / l with m = max_j x[r][j] and l = sum_j exp(x[r][j] - m). One warp
// per row; lane L handles columns L, L + 32, ... (coalesced); warp-shuffle reductions combine lanes.
//
//   v1 softmax_3pass   pass 1: m = max; pass 2: l = sum exp(x - m); pass 3: write. Reads the row
//                      three times.
//   v2 softmax_online  pass 1 keeps a running (m, l): a new maximum x > m rescales the sum,
//                      l <- l * exp(m - x) + 1, m <- x; else l += exp(x - m). Lanes merge their
//                      (m, l) pairs: m = max(m_a, m_b), l = l_a exp(m_a - m) + l_b exp(m_b - m)
//                      (the cuda_basics/softmax_row and algorithm/online_softmax exercises; the
//                      same rescaling FlashAttention applies to its output accumulator). Pass 2
//                      writes. Reads the row twice.
//
//   build-basics/08_softmax_row     validate on odd shapes against a float64 CPU softmax, then time
//                                   16384 rows x 4096 fp32 (bandwidth = one read + one write)
#include "basics.cuh"

using namespace flashlab;
using namespace flashlab::learn;
using namespace flashlab::learn::basics;

constexpr int kWarpsPerBlock = 4;
constexpr float kNegInf = -INFINITY;

__device__ __forceinline__ float warp_max(float v) {
  for (int m = 16; m > 0; m /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}
// exp(a - b), with exp(-inf - anything) = 0 (a lane that saw no column has m = -inf, l = 0).
__device__ __forceinline__ float exp_diff(float a, float b) {
  return a == kNegInf ? 0.0f : expf(a - b);
}

__global__ void softmax_3pass(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;  // a whole warp leaves together: the shuffles below stay full-warp
  const float* xr = x + int64_t(row) * cols;
  float m = kNegInf;
  for (int j = lane; j < cols; j += 32) m = fmaxf(m, xr[j]);
  m = warp_max(m);
  float l = 0;
  for (int j = lane; j < cols; j += 32) l += expf(xr[j] - m);
  l = warp_sum(l);
  const float inv = 1.0f / l;
  for (int j = lane; j < cols; j += 32) y[int64_t(row) * cols + j] = expf(xr[j] - m) * inv;
}

__global__ void softmax_online(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + int64_t(row) * cols;
  float m = kNegInf, l = 0;
  for (int j = lane; j < cols; j += 32) {
    const float v = xr[j];
    if (v > m) {  // a new running maximum: rescale what was summed so far
      l = l * exp_diff(m, v) + 1.0f;
      m = v;
    } else {
      l += expf(v - m);
    }
  }
  for (int mask = 16; mask > 0; mask /= 2) {  // merge (m, l) pairs across lanes
    const float m_o = __shfl_xor_sync(0xffffffffu, m, mask), l_o = __shfl_xor_sync(0xffffffffu, l, mask);
    const float m_new = fmaxf(m, m_o);
    l = l * exp_diff(m, m_new) + l_o * exp_diff(m_o, m_new);
    m = m_new;
  }
  const float inv = 1.0f / l;
  for (int j = lane; j < cols; j += 32) y[int64_t(row) * cols + j] = expf(xr[j] - m) * inv;
}

using SoftmaxKernel = decltype(&softmax_3pass);
struct Version {
  const char* name;
  SoftmaxKernel kernel;
};
const Version kVersions[] = {{"v1 softmax_3pass", softmax_3pass}, {"v2 softmax_online", softmax_online}};

static void launch(SoftmaxKernel k, const float* x, float* y, int rows, int cols) {
  k<<<(rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kWarpsPerBlock * 32>>>(x, y, rows, cols);
}

int main(int argc, char** argv) {
  const Args args{argc, argv};
  const int rows = static_cast<int>(args.get_int("--rows", 16384)),
            cols = static_cast<int>(args.get_int("--cols", 4096));
  const size_t bytes = size_t(rows) * cols * sizeof(float);
  const Report rep = Report::open("08_softmax_row", bytes);
  Check check;

  for (auto [r, c] : {std::pair<int, int>{1, 1}, {3, 33}, {5, 1000}, {7, 31}, {64, 4096}, {13, 20000}}) {
    DeviceBuffer x, y;
    std::vector<float> hx;
    if (!random_floats(x, hx, size_t(r) * c, fresh_seed()) || !y.allocate(size_t(r) * c * 4)) return 1;
    for (float& v : hx) v *= 4.0f;  // a wider range, so the running max changes often
    x.upload(hx.data(), hx.size() * 4);
    std::vector<double> want(hx.size());
    for (int i = 0; i < r; ++i) {
      const float* xr = hx.data() + size_t(i) * c;
      double m = -INFINITY, l = 0;
      for (int j = 0; j < c; ++j) m = std::max(m, double(xr[j]));
      for (int j = 0; j < c; ++j) l += std::exp(xr[j] - m);
      for (int j = 0; j < c; ++j) want[size_t(i) * c + j] = std::exp(xr[j] - m) / l;
    }
    for (const Version& v : kVersions) {
      y.poison();
      launch(v.kernel, x.as<float>(), y.as<float>(), r, c);
      const std::vector<float> got = download_floats(y, want.size());
      // fp32: x - m rounded (|x - m| < 64: up to 4e-6 absolute, so relative in exp), expf's ulps,
      // and the rounding of a sum of c terms (grows like sqrt(c) for random signs of the errors).
      check.expect_close(std::string(v.name) + " " + std::to_string(r) + "x" + std::to_string(c), got.data(),
                         want.data(), want.size(), 5e-6 + 2e-6 * std::sqrt(double(c)), 1e-12);
    }
  }

  DeviceBuffer x, y;
  if (!x.allocate(bytes) || !y.allocate(bytes) ||
      !fill_random_device(x.get(), DType::kFloat32, int64_t(rows) * cols, 9, 4.0f))
    return 1;
  for (const Version& v : kVersions)
    rep.bandwidth(std::string(v.name) + " " + std::to_string(rows) + "x" + std::to_string(cols),
                  time_launch([&] { launch(v.kernel, x.as<float>(), y.as<float>(), rows, cols); }),
                  2.0 * bytes);
  return check.exit_code("08_softmax_row");
}
