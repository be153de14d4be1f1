// Switches to a device for a scope and back: the caller's current device is never changed
// by us (nccl-tests -g N drives several GPUs from one thread without switching).
#pragma once

#include <cuda_runtime_api.h>

namespace car {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    error_ = cudaGetDevice(&previous_);
    if (error_ == cudaSuccess && previous_ != device) {
      error_ = cudaSetDevice(device);
      switched_ = (error_ == cudaSuccess);
    }
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  cudaError_t error() const { return error_; }

 private:
  int previous_ = 0;
  bool switched_ = false;
  cudaError_t error_ = cudaSuccess;
};

}  // namespace car
