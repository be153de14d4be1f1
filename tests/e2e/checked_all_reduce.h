// The end-to-end programs' all-reduce of fresh inputs, checked exactly: fp32 small integers
// (exact sums in any order), output poisoned before the call, on a non-blocking stream.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <vector>

class CheckedAllReduce {
 public:
  // 64 KiB of fp32: a size our kernels take.
  static constexpr std::size_t kCount = 1 << 14;

  // The stream and the device buffers, on the current device; false if CUDA refuses.
  bool prepare() {
    return cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) == cudaSuccess &&
           cudaMalloc(&send_, kCount * sizeof(float)) == cudaSuccess &&
           cudaMalloc(&recv_, kCount * sizeof(float)) == cudaSuccess;
  }

  cudaStream_t stream() const { return stream_; }

  // Call `call` on `comm` (this rank `rank` of `ranks`), synchronised and compared; false
  // with *problem saying what went wrong.
  bool run(ncclComm_t comm, int rank, int ranks, int call, std::string* problem) const {
    std::vector<float> host(kCount);
    for (std::size_t i = 0; i < kCount; ++i) host[i] = inputAt(rank, i, call);
    if (cudaMemcpy(send_, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMemset(recv_, 0xff, kCount * sizeof(float)) != cudaSuccess) {
      *problem = "cannot prepare the buffers";
      return false;
    }
    const ncclResult_t result = ncclAllReduce(send_, recv_, kCount, ncclFloat32, ncclSum, comm, stream_);
    const cudaError_t done = cudaStreamSynchronize(stream_);
    if (result != ncclSuccess || done != cudaSuccess) {
      *problem = "all-reduce " + std::to_string(call) + ": ncclAllReduce " + std::to_string(result) + ", stream " +
                 cudaGetErrorString(done);
      return false;
    }
    if (cudaMemcpy(host.data(), recv_, kCount * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
      *problem = "cannot read the result";
      return false;
    }
    for (std::size_t i = 0; i < kCount; ++i) {
      float expected = 0;
      for (int r = 0; r < ranks; ++r) expected += inputAt(r, i, call);
      if (host[i] != expected) {
        *problem = "all-reduce " + std::to_string(call) + ": element " + std::to_string(i) + " is " +
                   std::to_string(host[i]) + ", not " + std::to_string(expected);
        return false;
      }
    }
    return true;
  }

 private:
  static float inputAt(int rank, std::size_t i, int call) { return static_cast<float>(rank + 1 + (i + call) % 7); }

  cudaStream_t stream_ = nullptr;
  float* send_ = nullptr;
  float* recv_ = nullptr;
};
