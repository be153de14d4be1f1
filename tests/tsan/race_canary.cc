// A deliberate data race, built and run by run-tsan.sh before the real scenarios: it must
// make ThreadSanitizer report and exit with TSAN_OPTIONS' exitcode. If it does not, TSan is
// not working on this machine, and "no race reported" below would mean nothing.
#include <cstdio>
#include <thread>

namespace {
int gShared = 0;  // written by two threads without synchronisation, on purpose
}

int main() {
  std::thread first([] {
    for (int i = 0; i < 1000; ++i) ++gShared;
  });
  std::thread second([] {
    for (int i = 0; i < 1000; ++i) ++gShared;
  });
  first.join();
  second.join();
  std::printf("%d\n", gShared);
  return 0;
}
