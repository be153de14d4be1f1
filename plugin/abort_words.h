// The words our kernels poll to learn they must stop (a Launcher's abort word): pinned host
// memory mapped into every context, kept for the next launcher when one goes, never
// cudaFreeHost'd, since cudaFreeHost waits for the whole device (the program's kernels, and
// ours on other communicators).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace car {

// A word reading 0: a kept one, or a new one (cudaHostAlloc). The CUDA error when none.
cudaError_t takeAbortWord(std::uint32_t** word);
// Back for the next engine; no kernel may read it any more.
void keepAbortWord(std::uint32_t* word);
// Words kept now, for the tests.
int keptAbortWords();

}  // namespace car
