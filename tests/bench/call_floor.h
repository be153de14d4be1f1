// The CUDA floor of one eager call of ours: the two CUDA calls no call we take can do
// without, made as the library makes them (kernels/driver_calls.h, plugin/stream_calls.h):
// the kernel's launch with programmatic dependent launch through the driver (an empty kernel
// whose one argument has car::LaunchArgs's size, 1 block of 128 threads), then the ordering
// event's record through the driver. car_launch_cost_bench times it back to back and one by
// one; car_nccl_bench --floor times it in place of each call, as it times a call.
#pragma once

#include <cuda_runtime_api.h>

namespace bench {

class CallFloor {
 public:
  // On the current device. ok() says whether this driver gives the entry points and the
  // event could be made: without them nothing here is the floor.
  CallFloor();
  ~CallFloor();
  CallFloor(const CallFloor&) = delete;
  CallFloor& operator=(const CallFloor&) = delete;

  bool ok() const { return function_ != nullptr && record_ != nullptr && event_ != nullptr; }
  // The launch and the record on `stream`; false where the driver refused either.
  bool enqueue(cudaStream_t stream) const;

 private:
  void* function_ = nullptr;  // the empty kernel, as the driver's CUfunction
  void* record_ = nullptr;    // the driver's cuEventRecord
  cudaEvent_t event_ = nullptr;
};

}  // namespace bench
