#include "exports/fault_injection.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "log.h"

namespace car {
namespace {

struct FaultName {
  const char* name;
  Fault fault;
};

constexpr FaultName kNames[] = {
    {"no-nvml", Fault::NoNvml},
    {"no-buffers", Fault::NoBuffers},
    {"ipc-open", Fault::IpcOpen},
    {"launch-error", Fault::LaunchError},
    {"advance-throw", Fault::AdvanceThrow},
    {"board-throw", Fault::BoardThrow},
    {"give-up-before-agreement", Fault::GiveUpBeforeAgreement},
    {"slow-retire", Fault::SlowRetire},
    {"slow-launcher", Fault::SlowLauncher},
    {"record-throw", Fault::RecordThrow},
    {"grow-block", Fault::GrowBlock},
    {"pcie", Fault::PcieOnly},
    {"pcie-sys", Fault::PcieAcrossSockets},
};

constexpr int kFaults = static_cast<int>(Fault::kCount);

struct Faults {
  bool named[kFaults] = {};
  int rank[kFaults];  // -1: every rank, every time
  std::atomic<bool> fired[kFaults] = {};
  Faults() {
    for (int& r : rank) r = -1;
  }
};

Faults& faults() {
  static Faults* parsed = [] {
    auto* all = new Faults();  // never freed: read until the process ends
    const char* text = std::getenv("NCCL_CAR_TEST_FAULT");
    if (text == nullptr) return all;
    std::stringstream list(text);
    std::string entry;
    while (std::getline(list, entry, ',')) {
      if (entry.empty()) continue;
      const std::size_t at = entry.find('@');
      const std::string name = entry.substr(0, at);
      bool known = false;
      for (const FaultName& one : kNames) {
        if (name != one.name) continue;
        known = true;
        const int index = static_cast<int>(one.fault);
        all->named[index] = true;
        if (at != std::string::npos) all->rank[index] = std::atoi(entry.c_str() + at + 1);
      }
      if (!known) CAR_WARN(-1, "unknown NCCL_CAR_TEST_FAULT '{}' ignored", entry);
    }
    return all;
  }();
  return *parsed;
}

}  // namespace

bool faultActive(Fault fault) { return faults().named[static_cast<int>(fault)]; }

bool faultFires(Fault fault, int rank) {
  const int index = static_cast<int>(fault);
  Faults& all = faults();
  if (!all.named[index]) return false;
  if (all.rank[index] < 0) return true;
  return rank == all.rank[index] && !all.fired[index].exchange(true);
}

std::size_t faultBlockGrowth(int rank) {
  if (!faultActive(Fault::GrowBlock)) return 0;
  static std::mutex mutex;
  static auto* setUps = new std::map<int, std::size_t>();  // by rank: its set-ups so far
  std::lock_guard<std::mutex> lock(mutex);
  return kGrowBlockBytes * (*setUps)[rank]++;
}

}  // namespace car
