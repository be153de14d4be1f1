// Device-side checking for long runs: compare an output with its expected bytes and poison
// it again, all on the stream, so that 100,000 calls are each checked without a host sync.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace car::testing {

// Adds the number of differing 4-byte words to *errors, then fills `output` with 0xFF.
cudaError_t compareAndPoison(void* output, const void* expected, std::size_t bytes,
                             unsigned long long* errors, cudaStream_t stream);

// Adds the number of bytes in which a and b differ (any alignment of either) to *differing.
cudaError_t countDifferingBytes(const void* a, const void* b, std::size_t bytes, unsigned long long* differing,
                                cudaStream_t stream);

// Enqueues a one-thread kernel that spins until *gate (host-mapped memory) is non-zero:
// holds back everything behind it on `stream` until the host opens the gate.
cudaError_t launchGate(const volatile int* gate, cudaStream_t stream);

// Tries a launch with an impossible block size and leaves its error (not sticky: CUDA 13
// says cudaErrorInvalidValue) unread in CUDA's last-error slot, as a careless application
// would. Returns that error.
cudaError_t leaveStaleLaunchError();

}  // namespace car::testing
