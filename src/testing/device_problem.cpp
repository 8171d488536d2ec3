// src/testing/device_problem.cpp — DeviceBuffer and DeviceProblem (device_problem.h).
#include "testing/device_problem.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace flashlab {
namespace testing {

Status cuda_status(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::Ok();
  const StatusCode code =
      e == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kDeviceError;
  return Status(code, what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// ---- DeviceBuffer --------------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(o.ptr_), bytes_(o.bytes_), name_(std::move(o.name_)) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    name_ = std::move(o.name_);
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (ptr_) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

Status DeviceBuffer::allocate(size_t bytes, const std::string& name) {
  reset();
  name_ = name;
  if (bytes == 0) return Status::Ok();
  const cudaError_t e = cudaMalloc(&ptr_, bytes);
  if (e != cudaSuccess) {
    ptr_ = nullptr;
    return cuda_status(e, "cudaMalloc(" + name + ", " + std::to_string(bytes) + " bytes)");
  }
  bytes_ = bytes;
  return Status::Ok();
}

Status DeviceBuffer::upload(const void* host) {
  if (bytes_ == 0) return Status::Ok();
  return cuda_status(cudaMemcpy(ptr_, host, bytes_, cudaMemcpyHostToDevice),
                     "copy " + name_ + " to the device");
}

Status DeviceBuffer::download(void* host) const {
  if (bytes_ == 0) return Status::Ok();
  return cuda_status(cudaMemcpy(host, ptr_, bytes_, cudaMemcpyDeviceToHost),
                     "copy " + name_ + " from the device");
}

Status DeviceBuffer::poison() {
  if (bytes_ == 0) return Status::Ok();
  return cuda_status(cudaMemset(ptr_, 0xff, bytes_), "poison " + name_);
}

// ---- DeviceProblem -------------------------------------------------------------------------------

namespace {

Status mirror(DeviceBuffer* d, const void* host, size_t bytes, const char* name) {
  FLASHLAB_RETURN_IF_ERROR(d->allocate(bytes, name));
  return d->upload(host);
}

template <typename T>
Status mirror(DeviceBuffer* d, const std::vector<T>& v, const char* name) {
  return mirror(d, v.data(), v.size() * sizeof(T), name);
}

Status mirror(DeviceBuffer* d, const HostTensor& t, const char* name) {
  return mirror(d, t.data(), t.bytes.size(), name);
}

}  // namespace

Status DeviceProblem::init(Problem* pb) {
  pb_ = pb;
  FLASHLAB_RETURN_IF_ERROR(mirror(&q, pb->q, "q"));
  FLASHLAB_RETURN_IF_ERROR(mirror(&k, pb->k, "k"));
  FLASHLAB_RETURN_IF_ERROR(mirror(&v, pb->v, "v"));
  FLASHLAB_RETURN_IF_ERROR(mirror(&dout, pb->dout, "dout"));
  FLASHLAB_RETURN_IF_ERROR(mirror(&out, pb->out, "out"));
  FLASHLAB_RETURN_IF_ERROR(mirror(&lse, pb->lse, "lse"));
  FLASHLAB_RETURN_IF_ERROR(mirror(&cu_seqlens_q, pb->cu_seqlens_q, "cu_seqlens_q"));
  FLASHLAB_RETURN_IF_ERROR(mirror(&cu_seqlens_k, pb->cu_seqlens_k, "cu_seqlens_k"));
  FLASHLAB_RETURN_IF_ERROR(mirror(&alibi_slopes, pb->alibi_slopes, "alibi_slopes"));
  FLASHLAB_RETURN_IF_ERROR(mirror(&sink_logits, pb->sink_logits, "sink_logits"));
  FLASHLAB_RETURN_IF_ERROR(dsink.allocate(pb->dsink.size() * sizeof(float), "dsink"));
  FLASHLAB_RETURN_IF_ERROR(dq.allocate(pb->dq.bytes.size(), "dq"));
  FLASHLAB_RETURN_IF_ERROR(dk.allocate(pb->dk.bytes.size(), "dk"));
  return dv.allocate(pb->dv.bytes.size(), "dv");
}

void DeviceProblem::point_at_device(AttentionConfig* c, void* stream) const {
  c->device = Device::kCUDA;
  c->stream = stream;
  if (c->alibi_slopes) c->alibi_slopes = alibi_slopes.as<const float>();
  if (c->sink_logits) c->sink_logits = sink_logits.as<const float>();
  if (pb_->varlen()) {
    c->cu_seqlens_q = cu_seqlens_q.as<const int32_t>();
    c->cu_seqlens_k = cu_seqlens_k.as<const int32_t>();
  }
}

FwdParams DeviceProblem::fwd_params(Impl impl, void* stream) const {
  FwdParams p = pb_->fwd_params(impl);
  point_at_device(&p, stream);
  p.q.ptr = q.get();
  p.k.ptr = k.get();
  p.v.ptr = v.get();
  p.out.ptr = out.get();
  p.lse = lse.as<float>();
  return p;
}

BwdParams DeviceProblem::bwd_params(Impl impl, void* stream) const {
  BwdParams p = pb_->bwd_params(impl);
  point_at_device(&p, stream);
  p.q.ptr = q.get();
  p.k.ptr = k.get();
  p.v.ptr = v.get();
  p.out.ptr = out.get();
  p.dout.ptr = dout.get();
  p.lse = lse.as<const float>();
  p.dq.ptr = dq.get();
  p.dk.ptr = dk.get();
  p.dv.ptr = dv.get();
  if (p.dsink) p.dsink = dsink.as<float>();
  return p;
}

Status DeviceProblem::upload_forward_outputs() {
  FLASHLAB_RETURN_IF_ERROR(out.upload(pb_->out.data()));
  return lse.upload(pb_->lse.data());
}

Status DeviceProblem::poison_forward_outputs() {
  FLASHLAB_RETURN_IF_ERROR(out.poison());
  return lse.poison();
}

Status DeviceProblem::poison_backward_outputs() {
  FLASHLAB_RETURN_IF_ERROR(dq.poison());
  FLASHLAB_RETURN_IF_ERROR(dk.poison());
  FLASHLAB_RETURN_IF_ERROR(dsink.poison());
  return dv.poison();
}

Status DeviceProblem::download_forward_outputs() {
  FLASHLAB_RETURN_IF_ERROR(out.download(pb_->out.data()));
  return lse.download(pb_->lse.data());
}

Status DeviceProblem::download_backward_outputs() {
  FLASHLAB_RETURN_IF_ERROR(dq.download(pb_->dq.data()));
  FLASHLAB_RETURN_IF_ERROR(dk.download(pb_->dk.data()));
  FLASHLAB_RETURN_IF_ERROR(dsink.download(pb_->dsink.data()));
  return dv.download(pb_->dv.data());
}

}  // namespace testing
}  // namespace flashlab
