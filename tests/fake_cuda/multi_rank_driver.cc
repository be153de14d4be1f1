// Ranks as threads of one process, on the stand-in NCCL (STANDIN_NCCL_EXCHANGE=1) with
// libnccl-car.so built over the fake CUDA runtime preloaded: the set-up's exchanges, the
// engines, the launch path and the release protocol run for real between the ranks, which is
// what ThreadSanitizer (tests/tsan/run-tsan.sh) and the shim tests need to see.
//
//   car_multi_rank_driver <ranks> <calls> <communicators> [mode]
//
// Every rank creates `communicators` communicators (more than one: in one group, set up as
// one batch), then one thread per communicator makes all-reduces on it (`calls` on the
// first, twice as many on the second, ...), the same sequence on every rank (sizes on both
// sides of the 8 MiB limit, every op, several types, in and out of place, some in groups of
// two), all threads of all ranks at once. Each thread then ends its communicator, while the
// others may still launch: by turns ncclCommDestroy, ncclCommAbort, or ncclCommFinalize
// and ncclCommDestroy.
//
// As NCCL requires of a nonblocking communicator (NCCL_COMM_BLOCKING=0), every call that
// answers ncclInProgress (its creation, a collective, a group's end) is followed by
// ncclCommGetAsyncError until NCCL stops answering so, before the communicator is used again
// (the stand-in's STANDIN_NCCL_ASYNC_JOBS=1 refuses a call made before).
//
// Modes:
//  - opposite-order: before that, each rank's thread makes one all-reduce on every
//    communicator, even ranks in the order 0, 1, ..., odd ranks the reverse (NCCL asks for no
//    order between communicators).
//  - peer-never-joins: the last rank creates its communicators through pncclCommInitRank,
//    past the library, so it never takes part in our set-up, and leaves at once, as a rank that
//    dies after NCCL's init would; the others print how long their first all-reduces took
//    ("rank R first all-reduce took T s"), then, past NCCL_CAR_SETUP_TIMEOUT_MS, make their calls.
//  - end-in-setup: as peer-never-joins, but each other rank ends its communicators right after
//    their first all-reduce (nonblocking: while their set-up waits in the background for the
//    rank that never comes), by turns with ncclCommAbort and ncclCommDestroy, and prints "rank
//    R end took T s".
//  - end-at-once: every rank takes part, and ends its communicators right after their first
//    two all-reduces (nonblocking: while their set-up goes on in the background), by turns with
//    ncclCommAbort and ncclCommDestroy, then lives on kEndAtOnceLingerMs for the set-up
//    worker to finish with them.
//  - exit-in-setup: as end-in-setup, but nothing is ended: the process exits while the set-ups
//    still wait in the background.
//  - early-call: rank 0 makes its first all-reduce on each communicator without waiting for
//    NCCL to finish creating it (nonblocking): NCCL refuses such a call (ncclInvalidArgument);
//    the rank then waits as it should have, and makes the call again. A program that breaks the
//    rule once and recovers, as NCCL lets it. Its calls are all ours to take once the ranks
//    agree (fp32 sums up to 1 MiB, no groups), each of another size than the one before.
//  - second-comm: the communicators are created one after another on every rank, each once
//    every rank has used the one before, which stays alive: all are ended at the end.
//  - sequential: each communicator is created once every rank has ended the one before.
// In every mode each rank prints how long its creating calls took ("rank R init took T s").
// With NCCL_COMM_BLOCKING=0 the communicators are nonblocking (set up at their first
// all-reduce, on each one's own thread; their first MULTI_RANK_PACED_CALLS calls, default
// 100, 2 ms apart, the time a program's first steps would take). Prints "multi-rank pid=P"
// first, what each thread asked of its communicator ("rank R comm 0x.. index C
// all-reduces=N above-8MiB=M refused=F slowest=T"), then "standin violations=V" (rules of
// NCCL's the stand-in saw broken: tests/shim/standin_nccl.h) and "multi-rank failures=N"
// (calls that did not end in ncclSuccess, but the refusals early-call expects); exits 0 when
// N is 0.
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

extern "C" int standinViolations();

namespace {

constexpr std::size_t kLimit = std::size_t{8} << 20;  // the library's default all-reduce limit
constexpr std::size_t kLargest = std::size_t{9} << 20;  // past it: forwarded
constexpr std::size_t kSizes[] = {256, 4096, 65536 + 16, 1 << 20, 3 << 20, 8 << 20, kLargest};
constexpr ncclDataType_t kTypes[] = {ncclFloat32, ncclBfloat16, ncclFloat16, ncclInt32};
constexpr ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

std::atomic<int> gFailures{0};

enum class Mode {
  Plain,
  OppositeOrder,
  PeerNeverJoins,
  EndInSetUp,
  ExitInSetUp,
  EndAtOnce,
  EarlyCall,
  SecondComm,
  Sequential,
  NeverDestroyed,
};

struct ModeName {
  const char* name;
  Mode mode;
};
constexpr ModeName kModes[] = {{"opposite-order", Mode::OppositeOrder}, {"peer-never-joins", Mode::PeerNeverJoins},
                               {"end-in-setup", Mode::EndInSetUp},       {"exit-in-setup", Mode::ExitInSetUp},
                               {"early-call", Mode::EarlyCall},          {"second-comm", Mode::SecondComm},
                               {"sequential", Mode::Sequential},         {"never-destroyed", Mode::NeverDestroyed},
                               {"end-at-once", Mode::EndAtOnce}};

// end-at-once: longer than the library's slowest test fault (kSlowRetireSeconds, 2 s).
constexpr int kEndAtOnceLingerMs = 3000;

extern "C" ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// NCCL_CAR_SETUP_TIMEOUT_MS as the library reads it (its default otherwise), in seconds.
double setupTimeoutSeconds() {
  const char* text = std::getenv("NCCL_CAR_SETUP_TIMEOUT_MS");
  return (text != nullptr ? std::atof(text) : 60000.0) / 1000.0;
}

// NCCL_COMM_BLOCKING=0: NCCL's own switch, which the stand-in honours.
bool nonblocking() {
  const char* text = std::getenv("NCCL_COMM_BLOCKING");
  return text != nullptr && std::string(text) == "0";
}

int pacedCalls() {
  const char* text = std::getenv("MULTI_RANK_PACED_CALLS");
  return text != nullptr ? std::atoi(text) : 100;
}

void check(ncclResult_t result, const char* what, int rank) {
  if (result == ncclSuccess) return;
  std::fprintf(stderr, "rank %d: %s returned %d\n", rank, what, static_cast<int>(result));
  ++gFailures;
}

// What NCCL asks after ncclInProgress: ncclCommGetAsyncError until it says otherwise.
ncclResult_t waitUntilDone(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) state = ncclSystemError;
    if (state == ncclInProgress) std::this_thread::yield();
  }
  return state;
}

// A call's result on `comm`, waited for when in progress.
void settle(ncclResult_t result, const char* what, int rank, ncclComm_t comm) {
  if (result == ncclInProgress && comm != nullptr) result = waitUntilDone(comm);
  check(result, what, rank);
}

// Every rank thread meets here (the rank that leaves in peer-never-joins never does).
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void arrive() {
    std::unique_lock<std::mutex> lock(mutex_);
    const int generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    changed_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int count_;
  int arrived_ = 0;
  int generation_ = 0;
};

std::size_t elementBytes(ncclDataType_t type) {
  return type == ncclFloat32 || type == ncclInt32 ? 4 : 2;
}

// The n-th call's shape, the same on every rank.
struct Shape {
  std::size_t bytes;
  ncclDataType_t type;
  ncclRedOp_t op;
  bool inPlace;
  bool grouped;
};

// early-call's: each one taken by our kernels once the ranks agreed (fp32 sums of at most
// 1 MiB, never in a group), every one of another size than the one before, so that a call
// taken on one rank and forwarded on another shows in the sequences of both stand-ins.
Shape takenShapeOf(std::uint64_t n) {
  constexpr std::size_t kTakenSizes[] = {256, 4096, 65536 + 16, 1 << 20};
  return Shape{kTakenSizes[n % 4], ncclFloat32, ncclSum, n % 3 == 0, false};
}

Shape shapeOf(std::uint64_t n, Mode mode) {
  if (mode == Mode::EarlyCall) return takenShapeOf(n);
  const std::uint64_t mix = n * 0x9E3779B97F4A7C15ull;
  Shape shape{};
  shape.bytes = kSizes[(mix >> 8) % (sizeof(kSizes) / sizeof(kSizes[0]))];
  shape.type = kTypes[(mix >> 16) % (sizeof(kTypes) / sizeof(kTypes[0]))];
  shape.op = kOps[(mix >> 24) % (sizeof(kOps) / sizeof(kOps[0]))];
  shape.inPlace = (mix >> 32) % 3 == 0;
  shape.grouped = (mix >> 40) % 5 == 0;
  return shape;
}

// What one thread asked of one communicator.
struct Asked {
  int made = 0;       // all-reduces NCCL or we took (a refused one made again counts once)
  int above8MiB = 0;
  int refused = 0;    // all-reduces NCCL refused (early-call)
  double slowest = 0; // seconds, the longest one all-reduce (or group of two) took to return
};

// The first all-reduce of early-call's rank 0: made before NCCL finished creating the
// communicator, so refused; then, after waiting as NCCL asks, made again.
void earlyAllReduce(int rank, ncclComm_t comm, std::vector<char>& buffer, Asked* asked) {
  const ncclResult_t first =
      ncclAllReduce(buffer.data(), buffer.data(), 1024, ncclFloat32, ncclSum, comm, nullptr);
  if (first == ncclInvalidArgument) {
    ++asked->refused;
    settle(ncclInProgress, "waiting for the creation", rank, comm);
    settle(ncclAllReduce(buffer.data(), buffer.data(), 1024, ncclFloat32, ncclSum, comm, nullptr), "ncclAllReduce",
           rank, comm);
  } else {
    settle(first, "ncclAllReduce", rank, comm);
  }
  std::printf("rank %d early all-reduce %s\n", rank, first == ncclInvalidArgument ? "refused" : "taken");
}

// Prints what it asked of the communicator, the `earlier` all-reduces made on it included:
// "rank R comm 0x.. index C all-reduces=N above-8MiB=M refused=F slowest=T".
void allReduces(int rank, int index, ncclComm_t comm, int calls, Asked asked, Mode mode) {
  // "Device" buffers are host memory under the fake CUDA runtime. Never written: the
  // kernels are no-ops, and untouched pages cost ThreadSanitizer no shadow.
  std::unique_ptr<char, decltype(&std::free)> send(static_cast<char*>(std::malloc(2 * kLargest)), &std::free);
  std::unique_ptr<char, decltype(&std::free)> recv(static_cast<char*>(std::malloc(2 * kLargest)), &std::free);
  for (int n = 0; n < calls; ++n) {
    // A nonblocking communicator is set up in the background from its first all-reduce on,
    // while its calls go to NCCL; the stand-in's calls take no time, so the first ones are
    // spread out as a program's first steps are, for the set-up to finish among them.
    if (nonblocking() && n < pacedCalls()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const Shape shape = shapeOf(static_cast<std::uint64_t>(n), mode);
    const std::size_t count = shape.bytes / elementBytes(shape.type);
    const int inGroup = shape.grouped ? 2 : 1;
    const Clock::time_point start = Clock::now();
    if (shape.grouped) check(ncclGroupStart(), "ncclGroupStart", rank);
    for (int k = 0; k < inGroup; ++k) {
      char* out = recv.get() + static_cast<std::size_t>(k) * kLargest;
      const char* in = shape.inPlace ? out : send.get() + static_cast<std::size_t>(k) * kLargest;
      const ncclResult_t result = ncclAllReduce(in, out, count, shape.type, shape.op, comm, nullptr);
      if (shape.grouped) check(result, "ncclAllReduce", rank);
      else settle(result, "ncclAllReduce", rank, comm);
    }
    if (shape.grouped) settle(ncclGroupEnd(), "ncclGroupEnd", rank, comm);
    asked.slowest = std::max(asked.slowest, secondsSince(start));
    asked.made += inGroup;
    if (shape.bytes > kLimit) asked.above8MiB += inGroup;
  }
  std::printf("rank %d comm %p index %d all-reduces=%d above-8MiB=%d refused=%d slowest=%.3f\n", rank,
              static_cast<void*>(comm), index, asked.made, asked.above8MiB, asked.refused, asked.slowest);
}

void end(int rank, int index, ncclComm_t comm) {
  switch ((rank + index) % 3) {
    case 0: settle(ncclCommDestroy(comm), "ncclCommDestroy", rank, nullptr); break;
    case 1: settle(ncclCommAbort(comm), "ncclCommAbort", rank, nullptr); break;
    default:
      settle(ncclCommFinalize(comm), "ncclCommFinalize", rank, comm);
      settle(ncclCommDestroy(comm), "ncclCommDestroy", rank, nullptr);
      break;
  }
}

// Creates `ids` (more than one: in one group), waits for them as NCCL asks, and says how long
// that took.
std::vector<ncclComm_t> create(int rank, int ranks, const std::vector<ncclUniqueId>& ids) {
  std::vector<ncclComm_t> comms(ids.size(), nullptr);
  const Clock::time_point created = Clock::now();
  if (ids.size() > 1) check(ncclGroupStart(), "ncclGroupStart", rank);
  std::vector<ncclResult_t> results;
  for (std::size_t c = 0; c < ids.size(); ++c) results.push_back(ncclCommInitRank(&comms[c], ranks, ids[c], rank));
  ncclResult_t ended = ncclSuccess;
  if (ids.size() > 1) ended = ncclGroupEnd();
  for (std::size_t c = 0; c < ids.size(); ++c) {
    if (results[c] != ncclInProgress) check(results[c], "ncclCommInitRank", rank);
  }
  if (ended != ncclInProgress) check(ended, "ncclGroupEnd", rank);
  std::printf("rank %d init took %.3f s\n", rank, secondsSince(created));
  return comms;
}

void waitForCreation(int rank, const std::vector<ncclComm_t>& comms) {
  for (ncclComm_t comm : comms) settle(ncclInProgress, "waiting for the creation", rank, comm);
}

// One communicator at a time (second-comm, sequential), on every rank alike.
void oneAfterAnother(int rank, int ranks, int calls, const std::vector<ncclUniqueId>& ids, Mode mode,
                     Barrier& barrier) {
  std::vector<ncclComm_t> alive;
  for (std::size_t c = 0; c < ids.size(); ++c) {
    barrier.arrive();  // every rank used (second-comm) or ended (sequential) the one before
    const ncclComm_t comm = create(rank, ranks, {ids[c]})[0];
    if (nonblocking()) waitForCreation(rank, {comm});
    allReduces(rank, static_cast<int>(c), comm, calls, Asked{}, mode);
    if (mode == Mode::Sequential) end(rank, static_cast<int>(c), comm);
    else alive.push_back(comm);
  }
  for (std::size_t c = 0; c < alive.size(); ++c) end(rank, static_cast<int>(c), alive[c]);
}

void runRank(int rank, int ranks, int calls, const std::vector<ncclUniqueId>& ids, Mode mode, Barrier& barrier) {
  const int communicators = static_cast<int>(ids.size());
  const bool peerLeaves = mode == Mode::PeerNeverJoins || mode == Mode::EndInSetUp || mode == Mode::ExitInSetUp;
  if (peerLeaves && rank == ranks - 1) {
    // NCCL's side of each communicator is made, ours never is; then the rank is gone.
    std::vector<ncclComm_t> comms(ids.size(), nullptr);
    for (int c = 0; c < communicators; ++c) {
      const ncclResult_t made =
          pncclCommInitRank(&comms[static_cast<std::size_t>(c)], ranks, ids[static_cast<std::size_t>(c)], rank);
      if (made != ncclInProgress) check(made, "pncclCommInitRank", rank);
    }
    std::printf("rank %d leaves\n", rank);
    return;
  }
  if (mode == Mode::SecondComm || mode == Mode::Sequential) {
    oneAfterAnother(rank, ranks, calls, ids, mode, barrier);
    return;
  }
  std::vector<ncclComm_t> comms = create(rank, ranks, ids);
  const bool early = mode == Mode::EarlyCall && rank == 0;
  if (nonblocking() && !early) waitForCreation(rank, comms);
  std::vector<Asked> asked(ids.size());
  if (mode != Mode::Plain && mode != Mode::NeverDestroyed) {
    std::vector<char> buffer(4096);
    for (int i = 0; i < communicators; ++i) {
      const int c = rank % 2 == 0 ? i : communicators - 1 - i;
      const ncclComm_t comm = comms[static_cast<std::size_t>(c)];
      const Clock::time_point start = Clock::now();
      if (early) {
        earlyAllReduce(rank, comm, buffer, &asked[static_cast<std::size_t>(c)]);
      } else {
        // end-at-once: a second call too, whose acceptance tells the set-up that NCCL launched
        // its exchange, so that it goes on past it before the end.
        for (int k = 0; k < (mode == Mode::EndAtOnce ? 2 : 1); ++k) {
          settle(ncclAllReduce(buffer.data(), buffer.data(), 1024, ncclFloat32, ncclSum, comm, nullptr),
                 "ncclAllReduce", rank, comm);
        }
      }
      if (peerLeaves) std::printf("rank %d first all-reduce took %.3f s\n", rank, secondsSince(start));
      asked[static_cast<std::size_t>(c)].made = 1;
    }
  }
  if (mode == Mode::EndInSetUp || mode == Mode::EndAtOnce) {
    const Clock::time_point ending = Clock::now();
    for (ncclComm_t comm : comms) {
      settle(rank % 2 == 0 ? ncclCommAbort(comm) : ncclCommDestroy(comm), "ending the communicator", rank, nullptr);
    }
    std::printf("rank %d end took %.3f s\n", rank, secondsSince(ending));
    // The process lives on a while, as a program would: its set-up worker says what it let go.
    std::this_thread::sleep_for(std::chrono::milliseconds(mode == Mode::EndAtOnce ? kEndAtOnceLingerMs : 300));
    return;
  }
  if (mode == Mode::ExitInSetUp) return;  // the set-ups still wait for the rank that left
  if (mode == Mode::PeerNeverJoins) {
    // Past the set-ups' bound, so that every later call meets a set-up that gave up.
    std::this_thread::sleep_for(std::chrono::duration<double>(setupTimeoutSeconds() + 0.5));
  }
  std::vector<std::thread> users;
  for (int c = 0; c < communicators; ++c) {
    users.emplace_back([=] {
      allReduces(rank, c, comms[static_cast<std::size_t>(c)], calls * (c + 1), asked[static_cast<std::size_t>(c)],
                 mode);
      // As JAX: the communicators are left alive when the program exits.
      if (mode != Mode::NeverDestroyed) end(rank, c, comms[static_cast<std::size_t>(c)]);
    });
  }
  for (std::thread& user : users) user.join();
}

}  // namespace

int main(int argc, char** argv) {
  Mode mode = Mode::Plain;
  bool known = argc == 4;
  if (argc == 5) {
    for (const ModeName& name : kModes) {
      if (std::string(argv[4]) == name.name) {
        mode = name.mode;
        known = true;
      }
    }
  }
  if (!known) {
    std::string names;
    for (const ModeName& name : kModes) names += std::string(names.empty() ? "" : " | ") + name.name;
    std::fprintf(stderr, "usage: %s <ranks> <calls> <communicators> [%s]\n", argv[0], names.c_str());
    return 2;
  }
  const int ranks = std::atoi(argv[1]);
  const int calls = std::atoi(argv[2]);
  const int communicators = std::atoi(argv[3]);
  if (ranks < 1 || calls < 0 || communicators < 1) return 2;
  std::printf("multi-rank pid=%d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  std::vector<ncclUniqueId> ids(static_cast<std::size_t>(communicators));
  for (ncclUniqueId& id : ids) check(ncclGetUniqueId(&id), "ncclGetUniqueId", -1);
  Barrier barrier(ranks);
  std::vector<std::thread> rankThreads;
  for (int rank = 0; rank < ranks; ++rank) {
    rankThreads.emplace_back(runRank, rank, ranks, calls, std::cref(ids), mode, std::ref(barrier));
  }
  for (std::thread& thread : rankThreads) thread.join();
  std::printf("standin violations=%d\n", standinViolations());
  std::printf("multi-rank failures=%d\n", gFailures.load());
  return gFailures.load() == 0 ? 0 : 1;
}
