// learn/basics/cuda/02_transfers.cu — the memory model seen from the host: where bytes live and
// what moving them costs.
//
// Host memory from malloc is *pageable*: the driver first copies it into a pinned staging buffer,
// then DMAs it over PCIe/NVLink-C2C. cudaMallocHost memory is *pinned* (page-locked): the copy
// engine reads it directly, so the copy is faster and can be asynchronous (cudaMemcpyAsync on a
// stream returns at once and overlaps with kernels). Device memory (cudaMalloc) is what kernels
// read; device-to-device copies run at HBM speed, one to two orders of magnitude above the link.
//
//   H2D pageable / pinned    cudaMemcpy host -> device of 256 MiB
//   D2H pageable / pinned    cudaMemcpy device -> host
//   D2D                      cudaMemcpy device -> device ((read + write) / time)
//   overlap                  a pinned H2D copy on one stream and a kernel as long as the copy on
//                            another: the two together take about max(copy, kernel), not the sum
//
//   build-basics/02_transfers     validate the round trips (bytes identical), then time
#include "basics.cuh"

using namespace flashlab;
using namespace flashlab::learn;
using namespace flashlab::learn::basics;

// A kernel that keeps the SMs busy for a while without touching the copy's buffers.
__global__ void busy(float* __restrict__ y, int64_t n, int passes) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = y[i];
    for (int p = 0; p < passes; ++p) v = v * 0.999f + 0.001f;
    y[i] = v;
  }
}

int main(int argc, char** argv) {
  const Args args{argc, argv};
  const size_t bytes = static_cast<size_t>(args.get_int("--mib", 256)) << 20;
  const Report rep = Report::open("02_transfers", bytes);
  Check check;

  std::vector<char> pageable(bytes), back(bytes);
  for (size_t i = 0; i < bytes; ++i) pageable[i] = static_cast<char>((i * 2654435761u) >> 13);
  char* pinned = nullptr;
  if (!LEARN_CHECK(cudaMallocHost(&pinned, bytes))) return 1;
  std::memcpy(pinned, pageable.data(), bytes);
  DeviceBuffer d, d2, work;
  if (!d.allocate(bytes) || !d2.allocate(bytes) || !work.allocate(bytes)) return 1;

  // Round trips: H2D then D2H must give the same bytes back, for both kinds of host memory.
  d.poison();
  LEARN_CHECK(cudaMemcpy(d.get(), pageable.data(), bytes, cudaMemcpyHostToDevice));
  LEARN_CHECK(cudaMemcpy(back.data(), d.get(), bytes, cudaMemcpyDeviceToHost));
  check.expect("pageable round trip", std::memcmp(back.data(), pageable.data(), bytes) == 0,
               "bytes identical");
  d.poison();
  LEARN_CHECK(cudaMemcpy(d.get(), pinned, bytes, cudaMemcpyHostToDevice));
  LEARN_CHECK(cudaMemcpy(d2.get(), d.get(), bytes, cudaMemcpyDeviceToDevice));
  std::memset(pinned, 0, bytes);
  LEARN_CHECK(cudaMemcpy(pinned, d2.get(), bytes, cudaMemcpyDeviceToHost));
  check.expect("pinned round trip through a D2D copy", std::memcmp(pinned, pageable.data(), bytes) == 0,
               "bytes identical");

  // Host copies have nothing on the device to flush: flush_l2 = false. Synchronous cudaMemcpy from
  // pageable memory returns when the copy is done, so the events still bracket it.
  const bool kNoFlush = false;
  rep.bandwidth(
      "H2D pageable",
      time_launch([&] { cudaMemcpy(d.get(), pageable.data(), bytes, cudaMemcpyHostToDevice); }, kNoFlush),
      bytes);
  rep.bandwidth(
      "H2D pinned",
      time_launch([&] { cudaMemcpyAsync(d.get(), pinned, bytes, cudaMemcpyHostToDevice); }, kNoFlush), bytes);
  rep.bandwidth(
      "D2H pageable",
      time_launch([&] { cudaMemcpy(back.data(), d.get(), bytes, cudaMemcpyDeviceToHost); }, kNoFlush), bytes);
  rep.bandwidth(
      "D2H pinned",
      time_launch([&] { cudaMemcpyAsync(pinned, d.get(), bytes, cudaMemcpyDeviceToHost); }, kNoFlush), bytes);
  rep.bandwidth("D2D",
                time_launch([&] { cudaMemcpyAsync(d2.get(), d.get(), bytes, cudaMemcpyDeviceToDevice); }),
                2.0 * bytes);

  // Overlap: copy on stream s1, kernel on s2; the default stream waits for both (events on it).
  cudaStream_t s1, s2;
  cudaEvent_t e1, e2, start;
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&e1, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&e2, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&start, cudaEventDisableTiming);
  const int64_t n = bytes / 4;
  int passes = 50;
  auto copy = [&](cudaStream_t s) { cudaMemcpyAsync(d.get(), pinned, bytes, cudaMemcpyHostToDevice, s); };
  auto kernel = [&](cudaStream_t s) { busy<<<num_sms() * 8, 256, 0, s>>>(work.as<float>(), n, passes); };
  const Timing tc = time_launch([&] { copy(nullptr); }, kNoFlush);
  Timing tk = time_launch([&] { kernel(nullptr); }, kNoFlush);
  if (tc.ok && tk.ok) {  // make the kernel about as long as the copy: the overlap is then clearest
    passes = static_cast<int>(std::min(100000.0, std::max(1.0, passes * tc.median_ms / tk.median_ms)));
    tk = time_launch([&] { kernel(nullptr); }, kNoFlush);
  }
  const Timing tb = time_launch(
      [&] {
        cudaEventRecord(start, nullptr);  // s1, s2 start after the timing event of the default stream
        cudaStreamWaitEvent(s1, start);
        cudaStreamWaitEvent(s2, start);
        copy(s1);
        kernel(s2);
        cudaEventRecord(e1, s1);
        cudaEventRecord(e2, s2);
        cudaStreamWaitEvent(nullptr, e1);
        cudaStreamWaitEvent(nullptr, e2);
      },
      kNoFlush);
  rep.time("overlap: pinned H2D alone", tc);
  rep.time("overlap: kernel alone", tk);
  char note[96];
  std::snprintf(note, sizeof(note), "sum of the two %.3f ms", tc.median_ms + tk.median_ms);
  rep.time("overlap: both on two streams", tb, note);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  cudaFreeHost(pinned);
  return check.exit_code("02_transfers");
}
