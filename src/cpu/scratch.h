// src/cpu/scratch.h — scratch memory of the CPU backends, counted so benchmarks can report the
// peak extra memory of a call (beyond its inputs and outputs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace flashlab {
namespace detail {

// Process-wide counters of live scratch bytes (thread-safe).
void scratch_add(int64_t bytes);
void scratch_sub(int64_t bytes);
int64_t scratch_peak_bytes();
void scratch_reset_peak();  // sets the peak to the bytes live now

// A counted, 64-byte aligned, uninitialized array. Throws std::bad_alloc on failure (the backends
// turn that into StatusCode::kOutOfMemory).
template <typename T>
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(size_t n) { resize(n); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { release(); }

  void resize(size_t n) {
    release();
    if (n == 0) return;
    const size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    p_ = static_cast<T*>(::operator new(bytes, std::align_val_t(64)));
    n_ = n;
    bytes_ = static_cast<int64_t>(bytes);
    scratch_add(bytes_);
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }

 private:
  void release() {
    if (p_) {
      ::operator delete(p_, std::align_val_t(64));
      scratch_sub(bytes_);
    }
    p_ = nullptr;
    n_ = 0;
    bytes_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace detail
}  // namespace flashlab
