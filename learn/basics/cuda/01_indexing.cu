// learn/basics/cuda/01_indexing.cu — thread/grid indexing and grid-stride loops.
//
// y = a*x + y (saxpy) on n floats, three ways of mapping threads to elements:
//
//   one_per_thread     i = blockIdx.x * blockDim.x + threadIdx.x, `if (i < n)`: ceil(n / 256)
//                      blocks, each thread one element (the cuda_basics/index_1d exercise)
//   grid_stride        a fixed grid of B blocks per SM; thread i handles i, i + T, i + 2T, ...
//                      (T = gridDim.x * blockDim.x; the cuda_basics/grid_stride exercise): any n
//                      with one launch shape, and block start-up paid once per thread, not per element
//   add_2d             a 2-D grid over a rows x cols matrix: column from x, row from y, both bounds
//                      checked (the cuda_basics/index_2d exercise)
//
//   build-basics/01_indexing     validate (n = 1, 33, 1000003, 64M; odd matrix shapes), then time
//                                one_per_thread and grid_stride at 1, 2, 4, 8, 32 blocks per SM
#include "basics.cuh"

using namespace flashlab;
using namespace flashlab::learn;
using namespace flashlab::learn::basics;

__global__ void one_per_thread(float a, const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;  // int64: n may exceed 2^31 / 4
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void grid_stride(float a, const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = a * x[i] + y[i];
}

__global__ void add_2d(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                       int rows, int cols) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;  // x: the contiguous dimension
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < rows && col < cols)
    c[int64_t(row) * cols + col] = a[int64_t(row) * cols + col] + b[int64_t(row) * cols + col];
}

constexpr float kA = 1.5f;
constexpr int kThreads = 256;

int main(int argc, char** argv) {
  const Args args{argc, argv};
  const int64_t n = args.get_int("--n", int64_t(1) << 26);
  const size_t bytes = n * sizeof(float);
  const Report rep = Report::open("01_indexing", bytes);
  Check check;
  const int sms = num_sms();

  DeviceBuffer x, y, y0;
  std::vector<float> hx, hy;
  if (!random_floats(x, hx, n, fresh_seed()) || !random_floats(y0, hy, n, fresh_seed()) || !y.allocate(bytes))
    return 1;
  // a*x + y in float64: the kernels' fp32 result (one fma, or a rounded product and a sum) is
  // within a couple of fp32 roundings of it.
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = double(kA) * hx[i] + hy[i];

  auto saxpy = [&](bool stride, int blocks_per_sm, int64_t len) {
    const int blocks = stride ? sms * blocks_per_sm : static_cast<int>((len + kThreads - 1) / kThreads);
    if (stride)
      grid_stride<<<blocks, kThreads>>>(kA, x.as<float>(), y.as<float>(), len);
    else
      one_per_thread<<<std::max(blocks, 1), kThreads>>>(kA, x.as<float>(), y.as<float>(), len);
  };
  for (bool stride : {false, true})
    for (int64_t len : {int64_t(1), int64_t(33), int64_t(1000003), n}) {
      y.poison();
      LEARN_CHECK(
          cudaMemcpy(y.get(), y0.get(), len * 4, cudaMemcpyDeviceToDevice));  // elements >= len stay NaN
      saxpy(stride, 2, len);
      const std::vector<float> got = download_floats(y, len + (len < n ? 1 : 0));
      std::string name = std::string(stride ? "grid_stride" : "one_per_thread") + " n=" + std::to_string(len);
      if (check.expect_close(name, got.data(), want.data(), len, 3e-7, 2e-6) && len < n)
        check.expect(name + " (no write past n)", std::isnan(got[len]), "y[n] untouched");
    }
  for (auto [rows, cols] : {std::pair<int, int>{1, 1}, {17, 33}, {1000, 77}}) {
    const size_t m = size_t(rows) * cols;
    DeviceBuffer c;
    if (!c.allocate(m * 4)) return 1;
    c.poison();
    const dim3 block(32, 8), grid((cols + 31) / 32, (rows + 7) / 8);
    add_2d<<<grid, block>>>(x.as<float>(), y0.as<float>(), c.as<float>(), rows, cols);
    std::vector<float> w(m);
    for (size_t i = 0; i < m; ++i) w[i] = hx[i] + hy[i];
    const std::vector<float> got = download_floats(c, m);
    check.expect_equal("add_2d " + std::to_string(rows) + "x" + std::to_string(cols), got.data(), w.data(),
                       m);
  }

  // Timing: y is read and written, x read: 3 * bytes per call (y keeps growing: values do not matter).
  rep.bandwidth("one_per_thread (n/256 blocks)", time_launch([&] { saxpy(false, 0, n); }), 3.0 * bytes);
  for (int b : {1, 2, 4, 8, 32})
    rep.bandwidth("grid_stride (" + std::to_string(b) + " blocks/SM)",
                  time_launch([&] { saxpy(true, b, n); }), 3.0 * bytes);
  return check.exit_code("01_indexing");
}
