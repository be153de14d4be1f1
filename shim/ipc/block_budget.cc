#include "ipc/block_budget.h"

#include <map>
#include <mutex>

namespace car {
namespace {

struct Ledger {
  std::mutex mutex;
  std::map<int, std::size_t> held;  // device -> bytes
};

// Never destroyed: blocks are given back from other threads up to the process's end.
Ledger& ledger() {
  static Ledger* instance = new Ledger;
  return *instance;
}

}  // namespace

BlockReservation::~BlockReservation() {
  Ledger& books = ledger();
  std::lock_guard<std::mutex> lock(books.mutex);
  books.held[device_] -= bytes_;
}

std::unique_ptr<BlockReservation> reserveBlock(int device, std::size_t bytes, std::size_t limit) {
  Ledger& books = ledger();
  std::lock_guard<std::mutex> lock(books.mutex);
  std::size_t& held = books.held[device];
  if (limit != 0 && (bytes > limit || held > limit - bytes)) return nullptr;
  held += bytes;
  return std::make_unique<BlockReservation>(device, bytes);
}

std::size_t blockBytesHeld(int device) {
  Ledger& books = ledger();
  std::lock_guard<std::mutex> lock(books.mutex);
  const auto found = books.held.find(device);
  return found == books.held.end() ? 0 : found->second;
}

}  // namespace car
