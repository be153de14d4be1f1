# Which GPUs the device code is built for; included before project(). A cubin runs on its
# own major generation from its minor version up, so machine code for sm_80 (A100; also
# sm_86/87/89: A10, Orin, L4, L40), sm_90 (H100, H200, GH200), sm_100 (B200, GB200; also
# sm_103: B300) and sm_120 (RTX 50, RTX PRO 6000; also sm_121) covers every generation we
# serve without the driver compiling anything. compute_90 PTX is only the fallback for a GPU
# none of those runs (sm_110, later ones), which the driver compiles when our kernels are
# loaded. What each one adds to the library: docs/benchmarks.md, "Library size".
#
# -DNCCL_CAR_CUDA_ARCH=90 (or 100, 120, ..., or native: the GPUs of this machine) builds machine
# code for that one architecture only, no PTX: a smaller library and a much shorter build, for
# one kind of machine. CMAKE_CUDA_ARCHITECTURES (or the CUDAARCHS environment variable), when
# given, wins over both.
set(NCCL_CAR_CUDA_ARCH "" CACHE STRING
  "Build device code for this one GPU architecture only (e.g. 90, 100, 120, or native); empty: every generation")
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
  if(NCCL_CAR_CUDA_ARCH STREQUAL "native")
    set(CMAKE_CUDA_ARCHITECTURES native)
  elseif(NCCL_CAR_CUDA_ARCH MATCHES "^[0-9]+$")
    set(CMAKE_CUDA_ARCHITECTURES ${NCCL_CAR_CUDA_ARCH}-real)
  elseif(NCCL_CAR_CUDA_ARCH STREQUAL "")
    # Blackwell machine code needs CUDA 12.8; an older toolkit leaves those GPUs the PTX.
    set(nvcc "${CMAKE_CUDA_COMPILER}")
    if(NOT nvcc)
      find_program(nvcc nvcc)
    endif()
    execute_process(COMMAND "${nvcc}" --version OUTPUT_VARIABLE nvcc_version ERROR_QUIET)
    string(REGEX MATCH "release ([0-9]+\\.[0-9]+)" nvcc_release "${nvcc_version}")
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real)
    if(CMAKE_MATCH_1 VERSION_GREATER_EQUAL 12.8)
      list(APPEND CMAKE_CUDA_ARCHITECTURES 100-real 120-real)
    endif()
    list(APPEND CMAKE_CUDA_ARCHITECTURES 90-virtual)
  else()
    message(FATAL_ERROR "NCCL_CAR_CUDA_ARCH=${NCCL_CAR_CUDA_ARCH}: give a compute capability such as 90, "
                        "or native, or leave it empty for every generation")
  endif()
endif()
