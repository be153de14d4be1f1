// Every NCCL function (shim/exports/nccl_api.def) for the stand-in, under both of NCCL's names
// (nccl* and pnccl*): recorded with its arguments by
// position (generic_call.h), answered with ncclSuccess or STANDIN_NCCL_RESULT_<function>,
// arguments untouched. Weak: the hand-written functions of standin_nccl.cc and
// standin_calls.cc replace these, so this covers exactly the rest, and a function nccl.h
// gains is in the stand-in as soon as it is in the table.
#include <nccl.h>

#include "generic_call.h"
#include "standin_nccl.h"

namespace {

template <typename Result>
struct GenericRecorder {
  const char* name;
  template <typename... Args>
  Result operator()(Args... args) const {
    standin::CallLine line = standin::genericCall(name, args...);
    if constexpr (std::is_same_v<Result, ncclResult_t>) {
      return standin::finish(line, name, ncclSuccess);
    } else if constexpr (std::is_void_v<Result>) {
      standin::record(line);
    } else {
      standin::record(line);
      return name;
    }
  }
};

}  // namespace

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // ncclResetDebugInit

#define CAR_NCCL_FUNCTION(ret, name, params, args) \
  extern "C" __attribute__((weak)) ret name params { return GenericRecorder<ret>{#name} args; }
#include "exports/nccl_api.def"
#undef CAR_NCCL_FUNCTION

// NCCL's profiling names: the same functions (the stand-in links with -Bsymbolic-functions,
// so these reach its own nccl*, never a preloaded library's, as NCCL's aliases do).
#define CAR_NCCL_FUNCTION(ret, name, params, args) \
  extern "C" ret p##name params { return name args; }
#include "exports/nccl_api.def"
#undef CAR_NCCL_FUNCTION
