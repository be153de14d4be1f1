// car_nccl_bench's failure exit: a benchmark rank that meets a failed call says which and stops
// with status 1 (a test program, not library code); 2 is kept for a wrong result.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace bench {

inline int gBenchRank = 0;

[[noreturn]] inline void benchFailed(const char* what, int line) {
  std::fprintf(stderr, "car_nccl_bench rank %d: %s failed (line %d)\n", gBenchRank, what, line);
  std::exit(1);
}

}  // namespace bench

#define BENCH_CHECK(ok, what) \
  do {                        \
    if (!(ok)) ::bench::benchFailed(what, __LINE__); \
  } while (0)
#define CUDA_OK(call) BENCH_CHECK((call) == cudaSuccess, #call)
#define NCCL_OK(call) BENCH_CHECK((call) == ncclSuccess, #call)
#define CUBLAS_OK(call) BENCH_CHECK((call) == CUBLAS_STATUS_SUCCESS, #call)
