#include "exports/fault_injection.h"

#include <cstdlib>
#include <sstream>
#include <string>

#include "log.h"

namespace car {

bool faultActive(Fault fault) {
  static const unsigned mask = [] {
    unsigned bits = 0;
    const char* text = std::getenv("NCCL_CAR_TEST_FAULT");
    if (text == nullptr) return bits;
    std::stringstream list(text);
    std::string name;
    while (std::getline(list, name, ',')) {
      if (name == "no-nvml") bits |= 1u << static_cast<int>(Fault::NoNvml);
      else if (name == "no-buffers") bits |= 1u << static_cast<int>(Fault::NoBuffers);
      else if (name == "ipc-open") bits |= 1u << static_cast<int>(Fault::IpcOpen);
      else if (name == "launch-error") bits |= 1u << static_cast<int>(Fault::LaunchError);
      else if (name == "pcie") bits |= 1u << static_cast<int>(Fault::PcieOnly);
      else if (name == "pcie-sys") bits |= 1u << static_cast<int>(Fault::PcieAcrossSockets);
      else if (!name.empty()) CAR_WARN(-1, "unknown NCCL_CAR_TEST_FAULT '{}' ignored", name);
    }
    return bits;
  }();
  return (mask >> static_cast<int>(fault) & 1u) != 0;
}

}  // namespace car
