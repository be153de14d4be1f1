// The eager path's driver calls (kernels/driver_calls.h, plugin/stream_calls.h) against their
// runtime forms. On a machine without a CUDA driver or device (CI), every call must fall back
// to the runtime and return its error, never a success that did nothing; with a device, the
// driver's answers must be the runtime's.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include "../../kernels/driver_calls.h"
#include "have_device.h"
#include "stream_calls.h"

using namespace car;
using car::testing::haveDevice;

TEST_CASE("driver calls answer as the runtime does, and fall back to it without a driver", "[driver-calls]") {
  LaunchArgs args;
  args.blocks = args.threads = 1;
  if (!haveDevice()) {
    bool capturing = true;
    CHECK(streamIsCapturing(nullptr, &capturing) != cudaSuccess);
    CHECK_FALSE(capturing);
    unsigned long long id = 0;
    CHECK(streamIdOf(nullptr, &id) != cudaSuccess);
    CHECK(recordEvent(nullptr, nullptr) != cudaSuccess);
    CHECK(driverFunctionOf(reinterpret_cast<const void*>(&haveDevice)) == nullptr);
    CHECK_FALSE(launchThroughDriver(nullptr, launchShapeOf(args), args, nullptr));
    KernelTable table;
    CHECK(loadKernels(2, &table) != cudaSuccess);
    CHECK(table.functions[0][0] == nullptr);
    cudaGetLastError();
    return;
  }
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  cudaEvent_t event = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess);
  unsigned long long ours = 0, runtime = 1;
  CHECK(streamIdOf(stream, &ours) == cudaSuccess);
  CHECK(cudaStreamGetId(stream, &runtime) == cudaSuccess);
  CHECK(ours == runtime);
  bool capturing = true;
  CHECK(streamIsCapturing(stream, &capturing) == cudaSuccess);
  CHECK_FALSE(capturing);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  CHECK(streamIsCapturing(stream, &capturing) == cudaSuccess);
  CHECK(capturing);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(recordEvent(event, stream) == cudaSuccess);
  CHECK(cudaEventSynchronize(event) == cudaSuccess);
  // A function the driver refuses launches nothing and leaves CUDA's error state alone.
  CHECK_FALSE(launchThroughDriver(nullptr, launchShapeOf(args), args, stream));
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaEventDestroy(event) == cudaSuccess);
  CHECK(cudaStreamDestroy(stream) == cudaSuccess);
}
