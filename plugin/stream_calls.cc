#include "stream_calls.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include "../kernels/driver_calls.h"

namespace car {
namespace {

// Looked up once; a driver without one of them keeps the runtime form of that call.
struct StreamEntries {
  PFN_cuStreamIsCapturing_v10000 isCapturing;
  PFN_cuStreamGetId_v12000 streamId;
  PFN_cuEventRecord_v2000 eventRecord;
};

const StreamEntries& driver() {
  static const StreamEntries entries{driverEntry<PFN_cuStreamIsCapturing_v10000>("cuStreamIsCapturing", 10000),
                                     driverEntry<PFN_cuStreamGetId_v12000>("cuStreamGetId", 12000),
                                     driverEntry<PFN_cuEventRecord_v2000>("cuEventRecord", 2000)};
  return entries;
}

CUstream driverStream(cudaStream_t stream) { return reinterpret_cast<CUstream>(stream); }

}  // namespace

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
