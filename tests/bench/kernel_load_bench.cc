// What loading our kernels costs a process, without NCCL: car::loadKernels as an engine's
// creation calls it (every kernel into the context, once per process and GPU; then the
// driver functions of one world size, as every engine resolves them), timed, and the GPU
// memory the first load took. Run it in a fresh process each time
// (tests/bench/run_startup_bench.py does).
//
//   car_kernel_load_bench [DEVICE]
//
// One line: kernel_load device=D sm=CC loading=LAZY|EAGER load_ms=.. used_mib=.. table_ms=..
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "all_reduce.h"

namespace {

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

bool usedBytes(std::size_t* used) {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return false;
  *used = total - free;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int device = argc > 1 ? std::atoi(argv[1]) : 0;
  cudaDeviceProp properties{};
  if (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess ||
      cudaGetDeviceProperties(&properties, device) != cudaSuccess) {
    std::fprintf(stderr, "car_kernel_load_bench: no CUDA device %d\n", device);
    return 77;
  }
  std::size_t before = 0, after = 0;
  if (!usedBytes(&before)) return 1;
  Clock::time_point start = Clock::now();
  const cudaError_t loaded = car::loadKernels();
  const double loadMs = millisecondsSince(start);
  if (loaded != cudaSuccess || !usedBytes(&after)) {
    std::fprintf(stderr, "car_kernel_load_bench: loadKernels: %s\n", cudaGetErrorString(loaded));
    return 1;
  }
  car::KernelTable table;
  start = Clock::now();
  const cudaError_t resolved = car::loadKernels(8, &table);
  const double tableMs = millisecondsSince(start);
  if (resolved != cudaSuccess) {
    std::fprintf(stderr, "car_kernel_load_bench: loadKernels(8): %s\n", cudaGetErrorString(resolved));
    return 1;
  }
  const char* loading = std::getenv("CUDA_MODULE_LOADING");
  std::printf("kernel_load device=%d sm=%d%d loading=%s load_ms=%.2f used_mib=%.1f table_ms=%.2f\n", device,
              properties.major, properties.minor, loading != nullptr ? loading : "LAZY", loadMs,
              static_cast<double>(after - before) / (1 << 20), tableMs);
  return 0;
}
