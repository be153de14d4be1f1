// What it costs a program that loads NCCL itself to get it through libnccl-car.so: dlopen of
// LIBRARY, the first call (which, through us, also finds the real NCCL), and the median
// nanoseconds per call of a call that does almost nothing (ncclGetVersion), direct or
// through one of our forwarders. Needs no GPU. tests/bench/run-route-bench.sh runs it under
// each route.
//
//   route_bench LIBRARY [CALLS]
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double microsecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: route_bench LIBRARY [CALLS]\n");
    return 2;
  }
  const long calls = argc > 2 ? std::atol(argv[2]) : 1000000;
  const Clock::time_point start = Clock::now();
  void* nccl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  const double openUs = microsecondsSince(start);
  auto* getVersion = nccl != nullptr ? reinterpret_cast<decltype(&ncclGetVersion)>(dlsym(nccl, "ncclGetVersion"))
                                     : nullptr;
  if (getVersion == nullptr) {
    std::fprintf(stderr, "route_bench: no ncclGetVersion in %s: %s\n", argv[1], dlerror());
    return 1;
  }
  int version = 0;
  const Clock::time_point first = Clock::now();
  const ncclResult_t result = getVersion(&version);
  const double firstUs = microsecondsSince(first);

  constexpr int kSamples = 9;
  std::vector<double> nanoseconds;
  for (int sample = 0; sample < kSamples; ++sample) {
    const Clock::time_point begin = Clock::now();
    for (long i = 0; i < calls; ++i) getVersion(&version);
    nanoseconds.push_back(std::chrono::duration<double, std::nano>(Clock::now() - begin).count() / calls);
  }
  std::sort(nanoseconds.begin(), nanoseconds.end());
  std::printf("dlopen_us=%.0f first_call_us=%.0f ns_per_call=%.2f result=%d version=%d\n", openUs, firstUs,
              nanoseconds[kSamples / 2], static_cast<int>(result), version);
  return 0;
}
