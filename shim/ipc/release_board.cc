#include "ipc/release_board.h"

#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

#include "exports/fault_injection.h"

namespace car {
namespace {

// Attachments this process holds, per board: which importers are ranks of our own process
// (whose release will come here later) cannot be read from the kernel's count.
std::mutex gAttachedMutex;
std::map<int, int>& attachedHere() {
  static auto* counts = new std::map<int, int>();  // outlives static destruction
  return *counts;
}

void countHere(int id, int change) {
  std::lock_guard<std::mutex> lock(gAttachedMutex);
  int& count = attachedHere()[id];
  count += change;
  if (count == 0) attachedHere().erase(id);
}

BoardPage* pageOf(void* page) { return static_cast<BoardPage*>(page); }

// Never 0, which a page no owner wrote holds.
std::uint64_t freshToken() {
  static std::mutex mutex;
  static std::mt19937_64 generator(static_cast<std::uint64_t>(std::random_device{}()) ^
                                   (static_cast<std::uint64_t>(getpid()) << 32));
  std::lock_guard<std::mutex> lock(mutex);
  std::uint64_t token = 0;
  while (token == 0) token = generator();
  return token;
}

// Keeps an attached page out of fork()ed children (a data-loader worker must not count as an
// importer until it exits) and counts the attachment as ours.
void noteAttached(int id, void* page) {
  madvise(page, kBoardPageBytes, MADV_DONTFORK);  // best effort: a failure only keeps blocks longer
  countHere(id, +1);
}

// Attaches page `id`; null with the problem described when it cannot.
void* attachPage(int id, std::string* problem) {
  void* page = shmat(id, nullptr, 0);
  if (page == reinterpret_cast<void*>(-1)) {
    *problem = fmt::format("cannot attach release board {}: {}", id, std::strerror(errno));
    return nullptr;
  }
  try {
    noteAttached(id, page);
  } catch (...) {
    shmdt(page);
    throw;
  }
  return page;
}

}  // namespace

SysvReleaseBoard::SysvReleaseBoard(int id, void* page) : id_(id), page_(page) {}

std::unique_ptr<SysvReleaseBoard> SysvReleaseBoard::create(std::string* problem) {
  const int id = shmget(IPC_PRIVATE, kBoardPageBytes, IPC_CREAT | 0600);
  if (id < 0) {
    *problem = fmt::format("cannot create a release board: {}", std::strerror(errno));
    return nullptr;
  }
  void* page = shmat(id, nullptr, 0);
  // Marked for removal before anything else can fail or throw: the page then disappears with
  // its last attachment, crash or not. Linux still lets peers attach it by id until then.
  shmctl(id, IPC_RMID, nullptr);
  if (page == reinterpret_cast<void*>(-1)) {
    *problem = fmt::format("cannot attach the release board it made: {}", std::strerror(errno));
    return nullptr;
  }
  try {
    if (faultActive(Fault::BoardThrow)) throw std::runtime_error("NCCL_CAR_TEST_FAULT board-throw, after shmat");
    noteAttached(id, page);
  } catch (...) {
    shmdt(page);
    throw;
  }
  // A new segment is zeroed: every flag and slot starts unset.
  pageOf(page)->token = freshToken();
  return std::unique_ptr<SysvReleaseBoard>(new SysvReleaseBoard(id, page));
}

std::unique_ptr<SysvReleaseBoard> SysvReleaseBoard::attach(int id, std::uint64_t token, std::string* problem) {
  void* page = attachPage(id, problem);
  if (page == nullptr) return nullptr;
  std::unique_ptr<SysvReleaseBoard> board(new SysvReleaseBoard(id, page));
  if (pageOf(page)->token != token) {
    *problem = fmt::format("release board {} is another page than the one its owner sent (its owner is gone)", id);
    return nullptr;
  }
  // Pairs with retire(): either the owner counts our attachment, or we see its flag.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (pageOf(page)->retired.load(std::memory_order_seq_cst) != 0) {
    *problem = fmt::format("release board {}: its owner already released its buffers", id);
    return nullptr;
  }
  return board;
}

SysvReleaseBoard::~SysvReleaseBoard() {
  shmdt(page_);
  countHere(id_, -1);
}

void SysvReleaseBoard::retire() {
  pageOf(page_)->retired.store(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

int SysvReleaseBoard::importers() const {
  shmid_ds status{};
  if (shmctl(id_, IPC_STAT, &status) != 0) return -1;
  return static_cast<int>(status.shm_nattch) - 1;
}

int SysvReleaseBoard::importersHere() const {
  std::lock_guard<std::mutex> lock(gAttachedMutex);
  const auto it = attachedHere().find(id_);
  return it == attachedHere().end() ? 0 : it->second - 1;
}

}  // namespace car
