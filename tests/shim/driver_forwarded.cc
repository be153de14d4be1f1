// Scenario "forwarded" of shim_handle_driver: the NCCL functions named on the command line,
// looked up on the driver's handle ("<name> missing" for each it lacks) and called with
// arguments of their own (each pointer a different address, each number different). One
// step per function: the stand-in must see the call once with exactly these arguments, and
// the driver must get back exactly what the stand-in returned. Any function of
// shim/exports/nccl_api.def can be named; the test names those the stand-in records
// generically (generic_call.h).
#include <dlfcn.h>

#include <cstdio>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "driver_steps.h"
#include "generic_call.h"

namespace driver {
namespace {

constexpr int kScratchSlots = 256;
alignas(64) char gScratch[kScratchSlots][64];  // what the pointers point at: valid, never read

// Argument number `serial` of type T.
template <typename T>
T distinct(int serial, ncclComm_t comm) {
  if constexpr (std::is_same_v<T, ncclComm_t>) {
    return comm;  // a live communicator, in case the shim looks it up
  } else if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<T>(gScratch[serial % kScratchSlots]);
  } else if constexpr (std::is_same_v<T, ncclUniqueId>) {
    ncclUniqueId id{};
    id.internal[0] = static_cast<char>(serial);
    return id;
  } else if constexpr (std::is_enum_v<T>) {
    return static_cast<T>(serial);
  } else {
    return static_cast<T>(1000 + serial);
  }
}

template <typename Result, typename... Args>
void callGeneric(const char* name, Result (*function)(Args...), ncclComm_t comm, int* serial) {
  const int first = *serial;
  *serial += static_cast<int>(sizeof...(Args));
  int next = first;
  const std::tuple<Args...> args{distinct<Args>(next++, comm)...};  // braces: left to right
  const standin::CallLine expected =
      std::apply([&](auto... values) { return standin::genericCall(name, values...); }, args);
  if constexpr (std::is_same_v<Result, ncclResult_t>) {
    step(name, expected, [&] { return std::apply(function, args); });
  } else if constexpr (std::is_void_v<Result>) {
    writeMarker(name, expected);
    std::apply(function, args);
    std::printf("%s\n", name);  // nothing to report but that it returned
  } else {
    textStep(name, expected, [&] { return std::apply(function, args); });
  }
}

}  // namespace

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // ncclResetDebugInit, from nccl_api.def

int runForwarded(void* source, ncclComm_t comm, const std::vector<std::string>& names) {
  int serial = 1;
  bool missing = false;  // "<name> missing" for each, exit status 3 at the end
  for (const std::string& wanted : names) {
    bool known = false;
#define CAR_NCCL_FUNCTION(ret, name, params, args)                                 \
    if (wanted == #name) {                                                         \
      known = true;                                                                \
      auto* function = reinterpret_cast<decltype(&::name)>(dlsym(source, #name));  \
      if (function == nullptr) {                                                   \
        std::printf("%s missing\n", #name);                                        \
        missing = true;                                                            \
      } else {                                                                     \
        callGeneric(#name, function, comm, &serial);                               \
      }                                                                            \
    }
#include "exports/nccl_api.def"
#undef CAR_NCCL_FUNCTION
    if (!known) {
      std::printf("%s is not an NCCL function\n", wanted.c_str());
      return 2;
    }
  }
  return missing ? 3 : 0;
}

}  // namespace driver
