#include "cuda_check.h"

#include <dlfcn.h>

#include <cstring>

namespace car {

cudaError_t noteCudaFailure(cudaError_t err, LogLevel level, const char* call, const char* file, int line,
                            int device) {
  cudaGetLastError();  // ours, not the application's: leave nothing behind
  if (logEnabled(level)) {
    const char* slash = std::strrchr(file, '/');
    writeLogLine(level, file, line, device,
                 fmt::format("{} failed: {} ({}:{})", call, cudaGetErrorString(err),
                             slash != nullptr ? slash + 1 : file, line));
  }
  return err;
}

std::string cudaUnusableReason(cudaError_t err) {
  // The runtime loads the driver's library at its first call: not loaded by now, there is none.
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (driver != nullptr) dlclose(driver);
  else dlerror();
  if (driver == nullptr) return "no NVIDIA driver on this machine (libcuda.so.1 not found)";
  if (err == cudaErrorNoDevice) return "no CUDA device visible (cudaErrorNoDevice; CUDA_VISIBLE_DEVICES?)";
  if (err == cudaErrorInsufficientDriver) {
    return "the NVIDIA driver is older than the CUDA this library was built with (cudaErrorInsufficientDriver)";
  }
  return cudaGetErrorName(err);
}

}  // namespace car
