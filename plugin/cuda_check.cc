#include "cuda_check.h"

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

}  // namespace car
