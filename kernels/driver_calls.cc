#include "driver_calls.h"

#include <cuda.h>
#include <cudaTypedefs.h>

namespace car {
namespace {

// The driver's `name` in the form of CUDA `version` (the one its PFN_ type is of), or null.
template <typename Function>
Function driverEntry(const char* name, unsigned version) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &entry, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Function>(entry);
}

// Looked up once; a driver without one of them keeps the runtime form of that call.
struct Driver {
  PFN_cuLaunchKernelEx_v11060 launch;
  PFN_cuStreamIsCapturing_v10000 isCapturing;
  PFN_cuStreamGetId_v12000 streamId;
  PFN_cuEventRecord_v2000 eventRecord;
};

const Driver& driver() {
  static const Driver entries{driverEntry<PFN_cuLaunchKernelEx_v11060>("cuLaunchKernelEx", 11060),
                              driverEntry<PFN_cuStreamIsCapturing_v10000>("cuStreamIsCapturing", 10000),
                              driverEntry<PFN_cuStreamGetId_v12000>("cuStreamGetId", 12000),
                              driverEntry<PFN_cuEventRecord_v2000>("cuEventRecord", 2000)};
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
