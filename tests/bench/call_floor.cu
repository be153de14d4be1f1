#include "call_floor.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include "driver_calls.h"

namespace bench {
namespace {

__global__ void emptyCallKernel(car::LaunchArgs args) {
  if (args.ranks < 0) args.blocks = 0;  // never true: keeps the argument alive
}

car::LaunchArgs floorArgs() {
  car::LaunchArgs args{};
  args.ranks = 2;
  args.blocks = 1;
  args.threads = 128;
  args.pdl = true;
  return args;
}

}  // namespace

CallFloor::CallFloor()
    : function_(car::driverFunctionOf(reinterpret_cast<const void*>(&emptyCallKernel))),
      record_(reinterpret_cast<void*>(car::driverEntry<PFN_cuEventRecord_v2000>("cuEventRecord", 2000))) {
  if (cudaEventCreateWithFlags(&event_, cudaEventDisableTiming) != cudaSuccess) {
    event_ = nullptr;
    cudaGetLastError();
  }
}

CallFloor::~CallFloor() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

bool CallFloor::enqueue(cudaStream_t stream) const {
  static const car::LaunchArgs args = floorArgs();
  if (!ok() || !car::launchThroughDriver(function_, car::launchShapeOf(args), args, stream)) return false;
  const auto record = reinterpret_cast<PFN_cuEventRecord_v2000>(record_);
  return record(reinterpret_cast<CUevent>(event_), reinterpret_cast<CUstream>(stream)) == CUDA_SUCCESS;
}

}  // namespace bench
