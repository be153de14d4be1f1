#include "driver_calls.h"

#include <cuda.h>

namespace car {
namespace {

// The driver's `name` in its CUDA 12.0 form, or null.
template <typename Function>
Function driverEntry(const char* name) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &entry, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Function>(entry);
}

struct Driver {
  CUresult (*launch)(const CUlaunchConfig*, CUfunction, void**, void**);
  CUresult (*isCapturing)(CUstream, CUstreamCaptureStatus*);
  CUresult (*streamId)(CUstream, unsigned long long*);
  CUresult (*eventRecord)(CUevent, CUstream);
};

const Driver& driver() {
  static const Driver entries{driverEntry<decltype(Driver::launch)>("cuLaunchKernelEx"),
                              driverEntry<decltype(Driver::isCapturing)>("cuStreamIsCapturing"),
                              driverEntry<decltype(Driver::streamId)>("cuStreamGetId"),
                              driverEntry<decltype(Driver::eventRecord)>("cuEventRecord")};
  return entries;
}

CUstream driverStream(cudaStream_t stream) { return reinterpret_cast<CUstream>(stream); }

}  // namespace

void* driverFunctionOf(const void* kernel) {
  if (kernel == nullptr || driver().launch == nullptr) return nullptr;
  cudaFunction_t function = nullptr;
  if (cudaGetFuncBySymbol(&function, kernel) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<void*>(function);
}

bool launchThroughDriver(void* function, const LaunchArgs& args, cudaStream_t stream) {
  if (function == nullptr || driver().launch == nullptr) return false;
  CUlaunchConfig config{};
  config.gridDimX = static_cast<unsigned>(args.blocks);
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = static_cast<unsigned>(args.threads);
  config.blockDimY = config.blockDimZ = 1;
  config.hStream = driverStream(stream);
  CUlaunchAttribute attribute{};
  if (args.pdl) {
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  void* params[] = {const_cast<LaunchArgs*>(&args)};
  return driver().launch(&config, static_cast<CUfunction>(function), params, nullptr) == CUDA_SUCCESS;
}

cudaError_t streamIsCapturing(cudaStream_t stream, bool* capturing) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (driver().isCapturing != nullptr && driver().isCapturing(driverStream(stream), &status) == CUDA_SUCCESS) {
    *capturing = status != CU_STREAM_CAPTURE_STATUS_NONE;
    return cudaSuccess;
  }
  cudaStreamCaptureStatus runtimeStatus = cudaStreamCaptureStatusNone;
  const cudaError_t err = cudaStreamIsCapturing(stream, &runtimeStatus);
  *capturing = runtimeStatus != cudaStreamCaptureStatusNone;
  return err;
}

cudaError_t streamIdOf(cudaStream_t stream, unsigned long long* id) {
  if (driver().streamId != nullptr && driver().streamId(driverStream(stream), id) == CUDA_SUCCESS) return cudaSuccess;
  return cudaStreamGetId(stream, id);
}

cudaError_t recordEvent(cudaEvent_t event, cudaStream_t stream) {
  if (driver().eventRecord != nullptr &&
      driver().eventRecord(reinterpret_cast<CUevent>(event), driverStream(stream)) == CUDA_SUCCESS) {
    return cudaSuccess;
  }
  return cudaEventRecord(event, stream);
}

}  // namespace car
