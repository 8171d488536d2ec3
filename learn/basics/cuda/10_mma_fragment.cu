// learn/basics/cuda/10_mma_fragment.cu — who holds what: the ldmatrix / mma.sync fragment maps.
//
// mma.sync.m16n8k16 (fp16 in, fp32 accumulate) is a warp-wide instruction: A (16 x 16), B (16 x 8)
// and C (16 x 8) are spread over the 32 lanes' registers in fixed patterns (PTX ISA, "Matrix
// Fragments for mma.m16n8k16"). With g = lane / 4 (the group) and q = lane % 4 (the thread in it):
//
//   A: register i (two halves e = 0, 1) holds A[g + 8 (i % 2)][2q + e + 8 (i / 2)]
//   B: register i holds B[k = 2q + e + 8 i][n = g]
//   C: register i holds C[g + 8 (i / 2)][2q + i % 2]     (the cuda_basics/mma_fragment exercise)
//
// ldmatrix.x4 builds A's fragment from shared memory in one instruction: lane l gives the address
// of row l % 16, column block 8 (l / 16); each 8 x 8 sub-matrix lands in one register, row g
// columns 2q, 2q + 1 of it. ldmatrix.x2 does the same for B stored as Bᵀ (n x k, row-major).
//
//   fragment_map      one warp: A[r][c] = 16 r + c and Bᵀ[n][k] = 256 + 16 n + k (exact in fp16),
//                     ldmatrix + one mma; every lane reports what each register holds. The program
//                     decodes the values into coordinates, checks them against the formulas above,
//                     checks C = A B against the CPU, and prints the owner grids
//   mma_throughput    the measured effect: 4 independent mma chains per warp, 8 warps per block,
//                     4 blocks per SM: the mma.sync fp16 TFLOP/s of this GPU
//
//   build-basics/10_mma_fragment
#include <cuda_fp16.h>

#include "basics.cuh"

using namespace flashlab;
using namespace flashlab::learn;
using namespace flashlab::learn::basics;

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* smem_row) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(s));
}
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ float lo(uint32_t r) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(r & 0xffff)));
}
__device__ __forceinline__ float hi(uint32_t r) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(r >> 16)));
}

// a_vals[lane][8], b_vals[lane][4], c_vals[lane][4]: what each lane's registers hold.
__global__ void fragment_map(const __half* A, const __half* Bt, float* a_vals, float* b_vals, float* c_vals) {
  __shared__ __align__(16) __half sA[16 * 16];  // (M, K) row-major
  __shared__ __align__(16) __half sB[8 * 16];   // (N, K) row-major = B column-major
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) sA[i] = A[i];
  for (int i = lane; i < 128; i += 32) sB[i] = Bt[i];
  __syncwarp();
  uint32_t a[4], b[2];
  ldmatrix_x4(a, &sA[(lane % 16) * 16 + (lane / 16) * 8]);
  ldmatrix_x2(b, &sB[(lane % 8) * 16 + ((lane / 8) % 2) * 8]);  // lanes 16-31: addresses ignored
  float c[4] = {0, 0, 0, 0};
  mma_16816(c, a, b);
  for (int i = 0; i < 4; ++i) {
    a_vals[lane * 8 + 2 * i] = lo(a[i]);
    a_vals[lane * 8 + 2 * i + 1] = hi(a[i]);
    c_vals[lane * 4 + i] = c[i];
  }
  for (int i = 0; i < 2; ++i) {
    b_vals[lane * 4 + 2 * i] = lo(b[i]);
    b_vals[lane * 4 + 2 * i + 1] = hi(b[i]);
  }
}

constexpr int kChains = 4;
__global__ void mma_throughput(int iters, float* sink) {
  uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ (threadIdx.x << 3);  // small fp16 values
  for (int i = 0; i < 2; ++i) b[i] = 0x38003800u ^ (threadIdx.x << 2);
  float c[kChains][4] = {};
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int k = 0; k < kChains; ++k) mma_16816(c[k], a, b);  // independent chains: the pipe stays full
  float s = 0;
  for (int k = 0; k < kChains; ++k) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
  if (s == 1.2345f) *sink = s;  // never true in practice; keeps the work alive
}

int main(int argc, char** argv) {
  const Args args{argc, argv};
  const Report rep = Report::open("10_mma_fragment", 0);
  Check check;

  std::vector<__half> hA(256), hBt(128);
  for (int i = 0; i < 256; ++i) hA[i] = __float2half(float(i));         // A[r][c] = 16 r + c
  for (int i = 0; i < 128; ++i) hBt[i] = __float2half(float(256 + i));  // Bt[n][k] = 256 + 16 n + k
  DeviceBuffer dA, dB, av, bv, cv, sink;
  if (!dA.upload(hA.data(), 512) || !dB.upload(hBt.data(), 256) || !av.allocate(32 * 8 * 4) ||
      !bv.allocate(32 * 4 * 4) || !cv.allocate(32 * 4 * 4) || !sink.allocate(4))
    return 1;
  fragment_map<<<1, 32>>>(dA.as<__half>(), dB.as<__half>(), av.as<float>(), bv.as<float>(), cv.as<float>());
  const std::vector<float> a = download_floats(av, 256), b = download_floats(bv, 128),
                           c = download_floats(cv, 128);

  int a_owner[16][16], c_owner[16][8], bad_a = 0, bad_b = 0, bad_c = 0;
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, q = lane % 4;
    for (int i = 0; i < 4; ++i)
      for (int e = 0; e < 2; ++e) {
        const int r = g + 8 * (i % 2), col = 2 * q + e + 8 * (i / 2);
        bad_a += a[lane * 8 + 2 * i + e] != float(16 * r + col);
        a_owner[r][col] = lane;
      }
    for (int i = 0; i < 2; ++i)
      for (int e = 0; e < 2; ++e) bad_b += b[lane * 4 + 2 * i + e] != float(256 + 16 * g + 2 * q + e + 8 * i);
    for (int i = 0; i < 4; ++i) {
      const int r = g + 8 * (i / 2), n = 2 * q + i % 2;
      double want = 0;  // C = A B with B[k][n] = Bt[n][k]: integers below 2^24, exact in fp32
      for (int k = 0; k < 16; ++k) want += double(16 * r + k) * double(256 + 16 * n + k);
      bad_c += c[lane * 4 + i] != float(want);
      c_owner[r][n] = lane;
    }
  }
  check.expect("A fragment (ldmatrix.x4)", bad_a == 0,
               std::to_string(bad_a) + " of 256 halves off the formula");
  check.expect("B fragment (ldmatrix.x2)", bad_b == 0,
               std::to_string(bad_b) + " of 128 halves off the formula");
  check.expect("C fragment = A B (mma.sync)", bad_c == 0, std::to_string(bad_c) + " of 128 floats off");

  std::printf("\nA (16 x 16): the lane that holds each element (register = 2 (col / 8) + (row / 8))\n");
  for (int r = 0; r < 16; ++r) {
    for (int col = 0; col < 16; ++col) std::printf("%3d", a_owner[r][col]);
    std::printf("\n");
  }
  std::printf("\nC (16 x 8): the lane that holds each element (register = 2 (row / 8) + col %% 2)\n");
  for (int r = 0; r < 16; ++r) {
    for (int n = 0; n < 8; ++n) std::printf("%3d", c_owner[r][n]);
    std::printf("\n");
  }
  std::printf("\nlane 5 (g = 1, q = 1) holds A");
  for (int i = 0; i < 8; ++i) std::printf(" (%d,%d)", int(a[5 * 8 + i]) / 16, int(a[5 * 8 + i]) % 16);
  std::printf("\n\n");

  const int iters = static_cast<int>(args.get_int("--iters", 4096)), blocks = num_sms() * 4,
            warps = blocks * 8;
  const Timing t = time_launch([&] { mma_throughput<<<blocks, 256>>>(iters, sink.as<float>()); }, false);
  if (t.ok)
    rep.value("mma.sync m16n8k16 fp16->fp32 throughput",
              2.0 * 16 * 8 * 16 * kChains * double(iters) * warps / (t.median_ms * 1e-3) / 1e12, "TFLOP/s",
              "4 chains/warp, 32 warps/SM");
  return check.exit_code("10_mma_fragment");
}
