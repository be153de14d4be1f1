// Scenario "fuzz <seed> <count> [threads]": random ncclAllReduce calls, valid and invalid.
//
// Each thread (1 by default) makes its own communicators: two ncclCommInitRank of 1 rank,
// one ncclCommInitAll of 2 and one of 3 devices; it destroys some of them at once and some
// part-way through, so that their handles are stale. Then `count` all-reduces with random
// arguments: null, unaligned (odd, 2-, 4-, 8-byte) and aligned pointers, most of them fake
// addresses that crash if anyone reads or writes them; zero, small, odd, large and huge
// counts up to SIZE_MAX; every ncclDataType_t and ncclRedOp_t value and out-of-range ones
// (negative, ncclNumTypes, 1000, user-defined op numbers); live, stale and null
// communicators; null, fake and special streams; some of the calls inside (nested)
// ncclGroupStart/End. At the end it destroys the communicators still alive.
//
// Every call is a step (driver_steps.h) whose expected line also names the calling thread
// (tid=), so the test can cut the stand-in's log per thread even when threads interleave.
// Same seed, same calls (the random stream is std::mt19937_64, fully specified).
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "driver_common.h"

namespace driver {
namespace {

class Fuzzer {
 public:
  Fuzzer(std::uint64_t seed, std::string prefix)
      : random_(seed), prefix_(std::move(prefix)), tid_(static_cast<long long>(syscall(SYS_gettid))) {}

  int run(int count);

 private:
  struct Comm {
    std::string name;
    ncclComm_t handle = nullptr;
    bool live = false;
  };

  std::uint64_t next() { return random_(); }
  // 0 .. n-1 (n > 0); plain modulo keeps the sequence the same on every standard library.
  std::uint64_t below(std::uint64_t n) { return next() % n; }
  bool chance(int percent) { return below(100) < static_cast<std::uint64_t>(percent); }
  template <typename T, std::size_t N>
  T pick(const T (&values)[N]) {
    return values[below(N)];
  }

  std::string label(const std::string& what) const { return prefix_ + what; }
  // Every expected line ends with the caller's thread, as the stand-in's lines do.
  standin::CallLine tagged(standin::CallLine line) const { return line.num("tid", tid_); }

  void create();
  void destroy(Comm& comm);
  void destroyRandomLive();
  const void* pointer();
  std::size_t count();
  ncclDataType_t datatype();
  ncclRedOp_t op();
  ncclComm_t comm();
  cudaStream_t stream();
  void allReduce(int index);

  std::mt19937_64 random_;
  std::string prefix_;
  long long tid_;
  std::vector<Comm> comms_;
  int groupDepth_ = 0;
  int groupCalls_ = 0;  // calls before the innermost open group closes
  int steps_ = 0;
};

void Fuzzer::create() {
  ncclUniqueId id{};
  const std::string uid = label("uid");
  step(uid, tagged(standin::calls::getUniqueId(&id)), [&] { return ncclGetUniqueId(&id); });
  report(uid, "value", standin::idHex(id));
  for (const char* name : {"a", "b"}) {
    ncclComm_t handle = nullptr;
    const std::string init = label(std::string("init.") + name);
    step(init, tagged(standin::calls::initRank(&handle, 1, id, 0)), [&] { return ncclCommInitRank(&handle, 1, id, 0); });
    report(init, "made", standin::hex(handle));
    if (handle != nullptr) comms_.push_back({name, handle, true});
  }
  for (int ndev : {2, 3}) {
    ncclComm_t handles[3] = {nullptr, nullptr, nullptr};
    const std::string init = label("initall." + std::to_string(ndev));
    step(init, tagged(standin::calls::initAll(handles, ndev, nullptr)),
         [&] { return ncclCommInitAll(handles, ndev, nullptr); });
    std::string made;
    for (int i = 0; i < ndev; ++i) {
      made += (i == 0 ? "" : ",") + standin::hex(handles[i]);
      if (handles[i] != nullptr) comms_.push_back({"all" + std::to_string(ndev) + "." + std::to_string(i), handles[i], true});
    }
    report(init, "made", made);
  }
}

void Fuzzer::destroy(Comm& comm) {
  step(label("destroy." + comm.name), tagged(standin::calls::onComm("ncclCommDestroy", comm.handle)),
       [&] { return ncclCommDestroy(comm.handle); });
  comm.live = false;  // stale from now on, whatever the result
}

void Fuzzer::destroyRandomLive() {
  std::vector<Comm*> live;
  for (Comm& comm : comms_) {
    if (comm.live) live.push_back(&comm);
  }
  if (live.size() > 1) destroy(*live[below(live.size())]);  // keep one alive to the end
}

const void* Fuzzer::pointer() {
  // Fake addresses below 64 KiB (never mapped: mmap_min_addr) or non-canonical ones: any
  // read or write through them is a crash. A few real host buffers too.
  constexpr std::uintptr_t kLowBase = 0x1000;
  constexpr std::uintptr_t kNonCanonical = 0xdead000000000000ULL;
  std::uintptr_t base = 0;
  switch (below(10)) {
    case 0: return nullptr;
    case 1: case 2: base = reinterpret_cast<std::uintptr_t>(chance(50) ? gSend : gRecv); break;
    case 3: case 4: base = kNonCanonical + below(1 << 20) * 256; break;
    default: base = kLowBase + below(0xe0) * 256; break;  // up to 0xf000
  }
  static const std::uintptr_t kOffsets[] = {0, 0, 0, 1, 3, 2, 6, 4, 12, 8, 24, 16, 48, 32, 64, 128};
  return reinterpret_cast<const void*>(base + pick(kOffsets));
}

std::size_t Fuzzer::count() {
  constexpr std::size_t kMaxBytes = std::size_t{8} << 20;  // the default NCCL_CAR_MAX_BYTES
  switch (below(9)) {
    case 0: return 0;
    case 1: return 1 + below(64);                              // small
    case 2: return 2 * below(1 << 16) + 1;                     // odd
    case 3: return 16 * (1 + below(1 << 12));                  // small, a multiple of 16 elements
    case 4: return kMaxBytes / 4 + below(9) - 4;               // around the limit for 4-byte types
    case 5: return (std::size_t{1} << 20) + below(std::size_t{1} << 28);  // large
    case 6: return SIZE_MAX - below(4);                        // huge, up to SIZE_MAX
    case 7: return SIZE_MAX / (1 + below(16));                 // bytes overflow for every type
    default: return std::size_t{1} << below(64);               // powers of two, 1 .. 2^63
  }
}

ncclDataType_t Fuzzer::datatype() {
  static const int kOutOfRange[] = {-1, -2, INT_MIN, ncclNumTypes, ncclNumTypes + 1, 1000, INT_MAX};
  const int value = chance(80) ? static_cast<int>(below(ncclNumTypes)) : pick(kOutOfRange);
  return static_cast<ncclDataType_t>(value);
}

ncclRedOp_t Fuzzer::op() {
  // ncclNumOps and above are the numbers of user-defined ops (ncclRedOpCreatePreMulSum).
  static const int kOthers[] = {-1, -7, INT_MIN, ncclNumOps, ncclNumOps + 1, 100, 1000, 65535, ncclMaxRedOp, INT_MAX};
  if (chance(35)) return ncclSum;  // the op we would take, so that the other fields matter
  const int value = chance(65) ? static_cast<int>(below(ncclNumOps)) : pick(kOthers);
  return static_cast<ncclRedOp_t>(value);
}

ncclComm_t Fuzzer::comm() {
  const std::uint64_t roll = below(20);
  if (roll == 0) return nullptr;
  std::vector<const Comm*> wanted;
  const bool stale = roll <= 4;
  for (const Comm& comm : comms_) {
    if (comm.live != stale) wanted.push_back(&comm);
  }
  if (wanted.empty()) return nullptr;
  return wanted[below(wanted.size())]->handle;
}

cudaStream_t Fuzzer::stream() {
  switch (below(6)) {
    case 0: return nullptr;
    case 1: return cudaStreamLegacy;
    case 2: return cudaStreamPerThread;
    default: return fakeStream();
  }
}

void Fuzzer::allReduce(int index) {
  const void* send = pointer();
  void* recv = chance(15) ? const_cast<void*>(send) : const_cast<void*>(pointer());  // in place at times
  const std::size_t n = count();
  const ncclDataType_t type = datatype();
  const ncclRedOp_t reduction = op();
  ncclComm_t target = comm();
  cudaStream_t on = stream();
  step(label("ar." + std::to_string(index)), tagged(standin::calls::allReduce(send, recv, n, type, reduction, target, on)),
       [&] { return ncclAllReduce(send, recv, n, type, reduction, target, on); });
  ++steps_;
}

int Fuzzer::run(int count) {
  create();
  // Stale from the start: a 1-rank communicator and one rank of each ncclCommInitAll.
  for (Comm& comm : comms_) {
    if (comm.name == "b" || comm.name == "all2.1" || comm.name == "all3.0") destroy(comm);
  }
  int groups = 0;
  // Two more become stale part-way through (outside any group), after some use.
  const int every = count / 3 + 1;
  int nextDestroy = every;
  for (int i = 0; i < count; ++i) {
    if (i >= nextDestroy && groupDepth_ == 0) {
      destroyRandomLive();
      nextDestroy += every;
    }
    // Open a group (or a nested one) now and then; it closes after a few calls.
    if (groupDepth_ < 3 && chance(groupDepth_ == 0 ? 5 : 20)) {
      const std::string name = label("gs." + std::to_string(groups++));
      step(name, tagged(standin::calls::groupStart()), [] { return ncclGroupStart(); });
      ++groupDepth_;
      groupCalls_ = 1 + static_cast<int>(below(6));
    }
    allReduce(i);
    if (groupDepth_ > 0 && --groupCalls_ <= 0) {
      const std::string name = label("ge." + std::to_string(groups++));
      step(name, tagged(standin::calls::groupEnd()), [] { return ncclGroupEnd(); });
      --groupDepth_;
      groupCalls_ = 1 + static_cast<int>(below(3));
    }
  }
  while (groupDepth_ > 0) {
    const std::string name = label("ge." + std::to_string(groups++));
    step(name, tagged(standin::calls::groupEnd()), [] { return ncclGroupEnd(); });
    --groupDepth_;
  }
  for (Comm& comm : comms_) {
    if (comm.live) destroy(comm);
  }
  report(label("fuzz"), "allreduces", std::to_string(steps_));
  return steps_ == count ? 0 : 1;
}

// SplitMix64: independent seeds for the threads of one run.
std::uint64_t mix(std::uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

}  // namespace

int runFuzz(std::uint64_t seed, int count, int threads) {
  if (count < 0 || threads < 1) return 2;
  if (threads == 1) return Fuzzer(mix(seed), "").run(count);
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&failures, seed, count, t] {
      failures += Fuzzer(mix(seed ^ mix(static_cast<std::uint64_t>(t) + 1)), "t" + std::to_string(t) + ".").run(count);
    });
  }
  for (std::thread& thread : pool) thread.join();
  return failures.load() == 0 ? 0 : 1;
}

}  // namespace driver
