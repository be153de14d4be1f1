// CUDA work that no thread of the program may wait for, such as a cudaFree, which waits for
// the whole device: run in order by the set-up worker (shim/lifecycle/setup_worker.cc, which
// defines this), never once the process has begun to end (then it is left undone: the
// process's end gives everything back).
#pragma once

#include <functional>

namespace car {

void runInBackground(std::function<void()> chore);

}  // namespace car
