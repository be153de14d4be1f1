# Initial cache for the ThreadSanitizer build of the shim tests (tests/tsan/run-tsan.sh):
#   cmake -S . -B build-tsan -G Ninja -C tests/tsan/tsan.cmake
# Everything we compile is instrumented: C++ with -fsanitize=thread, the host side of the
# CUDA sources through nvcc's -Xcompiler. The CUDA runtime (linked statically) and the
# device code are not: TSan sees our code, which is what we test.
set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "")
set(CMAKE_CXX_FLAGS "-fsanitize=thread -g" CACHE STRING "")
set(CMAKE_CUDA_FLAGS "-Xcompiler=-fsanitize=thread -g" CACHE STRING "")
set(CMAKE_EXE_LINKER_FLAGS "-fsanitize=thread" CACHE STRING "")
set(CMAKE_SHARED_LINKER_FLAGS "-fsanitize=thread" CACHE STRING "")
# One GPU architecture: the kernels must compile for libnccl-car.so to link, but on the
# machines that run this they never launch, and each more architecture costs build time.
set(CMAKE_CUDA_ARCHITECTURES 90-real CACHE STRING "")
