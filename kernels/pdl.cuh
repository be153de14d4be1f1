// Programmatic dependent launch from the kernel's side. A kernel launched with programmatic
// stream serialization may start while the kernel before it on the stream is still running;
// it must wait for that kernel (and see its memory) before touching any memory at all: the
// caller's input may be that kernel's output, our rotation state was written by our previous
// call, and the output buffer may still be read by it. Before sm_90, and for a kernel
// launched without the attribute, both instructions do nothing.
#pragma once

namespace car {

__device__ __forceinline__ void waitForPreviousGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel on the stream be scheduled now; it still waits for our end before it
// touches memory (waitForPreviousGrid), so this is safe anywhere in our kernel.
__device__ __forceinline__ void allowNextGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace car
