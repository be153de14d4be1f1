// The set-up's CUDA calls (a stream's creation, cudaMalloc, our own stream's synchronisation)
// are "potentially unsafe" while any thread of the process captures a graph in global mode
// (PyTorch's default): made in this thread's default mode they would break that capture. In
// relaxed mode they are not checked against other threads' captures; none of them touches a
// capturing stream.
#pragma once

#include <cuda_runtime_api.h>

namespace car {

// Relaxed capture mode for this thread while it lives; the thread's own mode comes back after.
class RelaxedCaptureScope {
 public:
  RelaxedCaptureScope() : changed_(cudaThreadExchangeStreamCaptureMode(&mode_) == cudaSuccess) {
    if (!changed_) cudaGetLastError();
  }
  ~RelaxedCaptureScope() {
    if (changed_ && cudaThreadExchangeStreamCaptureMode(&mode_) != cudaSuccess) cudaGetLastError();
  }
  RelaxedCaptureScope(const RelaxedCaptureScope&) = delete;
  RelaxedCaptureScope& operator=(const RelaxedCaptureScope&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
  bool changed_;
};

}  // namespace car
