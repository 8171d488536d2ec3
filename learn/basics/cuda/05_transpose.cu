// learn/basics/cuda/05_transpose.cu — matrix transpose: naive, shared-memory tile unpadded,
// padded, swizzled.
//
// out (cols x rows) = aᵀ for a row-major a (rows x cols). A block of 32 x 32 threads moves one
// 32 x 32 tile; thread (tx, ty) reads a[r][c] with c = 32*bx + tx, so every global read is a
// coalesced row segment. The versions differ in how the tile gets turned around:
//
//   v0 transpose_naive      out[c][r] = a[r][c] straight from global memory: the writes of a
//                           warp go down a column of out, 32 sectors per warp instead of 4
//   v1 transpose_unpadded   stage the tile in __shared__ float tile[32][32], write it back by
//                           reading a column: word (tx, ty) sits in bank (32*tx + ty) % 32 = ty for
//                           every lane, a 32-way bank conflict on every shared load
//   v2 transpose_padded     tile[32][33]: word (tx, ty) is in bank (33*tx + ty) % 32 = (tx + ty) % 32,
//                           32 different banks: 1-way (the cuda_basics/transpose_padded exercise)
//   v3 transpose_swizzled   tile[32][32], element (r, c) stored at column c ^ r: still 1-way,
//                           no padding (the cuda_basics/transpose_swizzle exercise; CuTe's Swizzle)
//
//   build-basics/05_transpose               validate every version, then time them (8192 x 8192)
//   build-basics/05_transpose --ncu         one 32 x 32 launch each of v1, v2, v3: the simulator's
//                                           shape (learn/basics/ncu_vs_sim.py reads the counters)
#include "basics.cuh"

using namespace flashlab;
using namespace flashlab::learn;
using namespace flashlab::learn::basics;

constexpr int kTile = 32;

__global__ void transpose_naive(const float* __restrict__ a, float* __restrict__ out, int rows, int cols) {
  const int r = blockIdx.y * kTile + threadIdx.y, c = blockIdx.x * kTile + threadIdx.x;
  if (r < rows && c < cols) out[int64_t(c) * rows + r] = a[int64_t(r) * cols + c];
}

// Where element (r, c) of the 32 x 32 tile lives in shared memory, for each of the three layouts.
enum class TileLayout { kUnpadded, kPadded, kSwizzled };
template <TileLayout L>
struct Tile {
  static constexpr int kStride = L == TileLayout::kPadded ? kTile + 1 : kTile;  // floats per row
  __device__ static int at(int r, int c) { return r * kStride + (L == TileLayout::kSwizzled ? c ^ r : c); }
};

// The body the three shared-memory kernels share; only Tile<L>::at differs (that is the lesson).
template <TileLayout L>
__device__ __forceinline__ void transpose_tile(const float* __restrict__ a, float* __restrict__ out, int rows,
                                               int cols) {
  __shared__ float tile[kTile * Tile<L>::kStride];
  const int tx = threadIdx.x, ty = threadIdx.y;
  int r = blockIdx.y * kTile + ty, c = blockIdx.x * kTile + tx;
  if (r < rows && c < cols) tile[Tile<L>::at(ty, tx)] = a[int64_t(r) * cols + c];  // a row of a: coalesced
  __syncthreads();
  r = blockIdx.x * kTile + ty;  // a row of out = a column of the tile
  c = blockIdx.y * kTile + tx;
  if (r < cols && c < rows) out[int64_t(r) * rows + c] = tile[Tile<L>::at(tx, ty)];
}
// Separate names, so that ncu's kernel filter and the logs can tell them apart.
__global__ void transpose_unpadded(const float* a, float* out, int rows, int cols) {
  transpose_tile<TileLayout::kUnpadded>(a, out, rows, cols);
}
__global__ void transpose_padded(const float* a, float* out, int rows, int cols) {
  transpose_tile<TileLayout::kPadded>(a, out, rows, cols);
}
__global__ void transpose_swizzled(const float* a, float* out, int rows, int cols) {
  transpose_tile<TileLayout::kSwizzled>(a, out, rows, cols);
}

using TransposeKernel = void (*)(const float*, float*, int, int);
struct Version {
  const char* name;
  TransposeKernel kernel;
};
const Version kVersions[] = {{"v0 transpose_naive", transpose_naive},
                             {"v1 transpose_unpadded (tile[32][32])", transpose_unpadded},
                             {"v2 transpose_padded (tile[32][33])", transpose_padded},
                             {"v3 transpose_swizzled (c ^ r)", transpose_swizzled}};

static void launch(TransposeKernel k, const float* a, float* out, int rows, int cols) {
  const dim3 grid((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile), block(kTile, kTile);
  k<<<grid, block>>>(a, out, rows, cols);
}

static bool validate(Check& check, const Version& v, int rows, int cols) {
  DeviceBuffer a, out;
  std::vector<float> ha;
  if (!random_floats(a, ha, size_t(rows) * cols, fresh_seed()) || !out.allocate(size_t(rows) * cols * 4))
    return false;
  out.poison();
  launch(v.kernel, a.as<float>(), out.as<float>(), rows, cols);
  std::vector<float> want(ha.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) want[size_t(c) * rows + r] = ha[size_t(r) * cols + c];
  const std::vector<float> got = download_floats(out, want.size());
  return check.expect_equal(std::string(v.name) + " " + std::to_string(rows) + "x" + std::to_string(cols),
                            got.data(), want.data(), want.size());
}

int main(int argc, char** argv) {
  const Args args{argc, argv};
  Check check;
  if (args.has("--ncu")) {  // the simulator's launch: one block of 32 x 32 threads, a 32 x 32 matrix
    for (int i = 1; i < 4; ++i) validate(check, kVersions[i], 32, 32);
    return check.exit_code("05_transpose --ncu");
  }
  const int n = static_cast<int>(args.get_int("--n", 8192));
  const size_t bytes = size_t(n) * n * sizeof(float);
  const Report rep = Report::open("05_transpose", bytes);
  for (const Version& v : kVersions)
    for (auto [rows, cols] : {std::pair<int, int>{1, 1}, {33, 40}, {1000, 77}, {n, n}})
      validate(check, v, rows, cols);

  DeviceBuffer a, out;
  if (!a.allocate(bytes) || !out.allocate(bytes) ||
      !fill_random_device(a.get(), DType::kFloat32, int64_t(n) * n, 5))
    return 1;
  for (const Version& v : kVersions)
    rep.bandwidth(v.name, time_launch([&] { launch(v.kernel, a.as<float>(), out.as<float>(), n, n); }),
                  2.0 * bytes);
  return check.exit_code("05_transpose");
}
