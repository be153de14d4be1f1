// Entry point of the GPU tests: without a CUDA device they report themselves skipped
// (exit code 77, which ctest shows as "Skipped"), never passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  // Several ranks on one GPU each spin on their own stream; with the default 8 hardware
  // queues two ranks' streams can share one and serialise behind each other, a deadlock.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device (%s); the GPU tests did not run\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
