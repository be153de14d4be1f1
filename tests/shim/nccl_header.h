// The functions a nccl.h declares, read from its text: what libnccl-car.so must export to
// serve as that NCCL's libnccl.so.2.
#pragma once

#include <set>
#include <string>

namespace shimtest {

// Every function declared at the start of a line whose name begins with "nccl" (so not the
// pnccl* profiling aliases), in C text with comments.
std::set<std::string> ncclFunctionsDeclaredIn(const std::string& text);

// The same for a file; throws std::runtime_error when it cannot be read.
std::set<std::string> ncclFunctionsOfHeader(const std::string& path);

}  // namespace shimtest
