// Ranks as threads of one process, on the stand-in NCCL (STANDIN_NCCL_EXCHANGE=1) with
// libnccl-car.so built over the fake CUDA runtime preloaded: the set-up's exchanges, the
// engines, the launch path and the release protocol run for real between the ranks, which is
// what ThreadSanitizer (tests/tsan/run-tsan.sh) and the shim tests need to see.
//
//   car_multi_rank_driver <ranks> <calls> <communicators> [opposite-order | peer-never-joins | end-in-setup]
//
// Every rank creates `communicators` communicators (more than one: in one group, set up as
// one batch), then one thread per communicator makes all-reduces on it (`calls` on the
// first, twice as many on the second, ...), the same sequence on every rank (sizes on both
// sides of the 8 MiB limit, every op, several types, in and out of place, some in groups of
// two), all threads of all ranks at once. Each thread then ends its communicator, while the
// others may still launch: by turns ncclCommDestroy, ncclCommAbort, or ncclCommFinalize
// and ncclCommDestroy. `opposite-order`: before that, each rank's thread makes one
// all-reduce on every communicator, even ranks in the order 0, 1, ..., odd ranks the reverse
// (NCCL asks for no order between communicators). `peer-never-joins`: the last rank creates
// its communicators through pncclCommInitRank, past the library, so it never takes part in
// our set-up, and leaves at once, as a rank that dies after NCCL's init would; the others
// print how long their creating calls and their first all-reduces took ("rank R init took T
// s", "rank R first all-reduce took T s"), then, past NCCL_CAR_SETUP_TIMEOUT_MS, make their
// calls. `end-in-setup`: as peer-never-joins, but each other rank ends its communicators
// right after their first all-reduce (nonblocking: while their set-up waits in the background
// for the rank that never comes), by turns with ncclCommAbort and ncclCommDestroy, and
// prints "rank R end took T s". With NCCL_COMM_BLOCKING=0 the communicators are nonblocking (set up at their first
// all-reduce, on each one's own thread; their first 100 calls 2 ms apart, the time a program's
// first steps would take). Prints what each thread asked of its communicator,
// then "multi-rank failures=N" (calls that did not return ncclSuccess); exits 0 when N is 0.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t kLimit = std::size_t{8} << 20;  // the library's default all-reduce limit
constexpr std::size_t kLargest = std::size_t{9} << 20;  // past it: forwarded
constexpr std::size_t kSizes[] = {256, 4096, 65536 + 16, 1 << 20, 3 << 20, 8 << 20, kLargest};
constexpr ncclDataType_t kTypes[] = {ncclFloat32, ncclBfloat16, ncclFloat16, ncclInt32};
constexpr ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

std::atomic<int> gFailures{0};

constexpr int kPacedCalls = 100;

enum class Mode { Plain, OppositeOrder, PeerNeverJoins, EndInSetUp, NeverDestroyed };

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

void check(ncclResult_t result, const char* what, int rank) {
  if (result == ncclSuccess) return;
  if (result == ncclInProgress && nonblocking()) return;  // a nonblocking creation, waited for below
  std::fprintf(stderr, "rank %d: %s returned %d\n", rank, what, static_cast<int>(result));
  ++gFailures;
}

void waitUntilReady(int rank, ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) state = ncclSystemError;
  }
  check(state, "ncclCommGetAsyncError", rank);
}

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

Shape shapeOf(std::uint64_t n) {
  const std::uint64_t mix = n * 0x9E3779B97F4A7C15ull;
  Shape shape{};
  shape.bytes = kSizes[(mix >> 8) % (sizeof(kSizes) / sizeof(kSizes[0]))];
  shape.type = kTypes[(mix >> 16) % (sizeof(kTypes) / sizeof(kTypes[0]))];
  shape.op = kOps[(mix >> 24) % (sizeof(kOps) / sizeof(kOps[0]))];
  shape.inPlace = (mix >> 32) % 3 == 0;
  shape.grouped = (mix >> 40) % 5 == 0;
  return shape;
}

// Prints what it asked of the communicator, the `earlier` all-reduces made on it included:
// "rank R comm 0x.. all-reduces=N above-8MiB=M".
void allReduces(int rank, ncclComm_t comm, int calls, int earlier) {
  // "Device" buffers are host memory under the fake CUDA runtime. Never written: the
  // kernels are no-ops, and untouched pages cost ThreadSanitizer no shadow.
  std::unique_ptr<char, decltype(&std::free)> send(static_cast<char*>(std::malloc(2 * kLargest)), &std::free);
  std::unique_ptr<char, decltype(&std::free)> recv(static_cast<char*>(std::malloc(2 * kLargest)), &std::free);
  int made = earlier, above8MiB = 0;
  for (int n = 0; n < calls; ++n) {
    // A nonblocking communicator is set up in the background from its first all-reduce on,
    // while its calls go to NCCL; the stand-in's calls take no time, so the first ones are
    // spread out as a program's first steps are, for the set-up to finish among them.
    if (nonblocking() && n < kPacedCalls) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const Shape shape = shapeOf(static_cast<std::uint64_t>(n));
    const std::size_t count = shape.bytes / elementBytes(shape.type);
    const int inGroup = shape.grouped ? 2 : 1;
    if (shape.grouped) check(ncclGroupStart(), "ncclGroupStart", rank);
    for (int k = 0; k < inGroup; ++k) {
      char* out = recv.get() + static_cast<std::size_t>(k) * kLargest;
      const char* in = shape.inPlace ? out : send.get() + static_cast<std::size_t>(k) * kLargest;
      check(ncclAllReduce(in, out, count, shape.type, shape.op, comm, nullptr), "ncclAllReduce", rank);
    }
    if (shape.grouped) check(ncclGroupEnd(), "ncclGroupEnd", rank);
    made += inGroup;
    if (shape.bytes > kLimit) above8MiB += inGroup;
  }
  std::printf("rank %d comm %p all-reduces=%d above-8MiB=%d\n", rank, static_cast<void*>(comm), made, above8MiB);
}

void end(int rank, int index, ncclComm_t comm) {
  switch ((rank + index) % 3) {
    case 0: check(ncclCommDestroy(comm), "ncclCommDestroy", rank); break;
    case 1: check(ncclCommAbort(comm), "ncclCommAbort", rank); break;
    default:
      check(ncclCommFinalize(comm), "ncclCommFinalize", rank);
      check(ncclCommDestroy(comm), "ncclCommDestroy", rank);
      break;
  }
}

void runRank(int rank, int ranks, int calls, const std::vector<ncclUniqueId>& ids, Mode mode) {
  const int communicators = static_cast<int>(ids.size());
  std::vector<ncclComm_t> comms(ids.size(), nullptr);
  const bool peerLeaves = mode == Mode::PeerNeverJoins || mode == Mode::EndInSetUp;
  if (peerLeaves && rank == ranks - 1) {
    // NCCL's side of each communicator is made, ours never is; then the rank is gone.
    for (int c = 0; c < communicators; ++c) {
      check(pncclCommInitRank(&comms[static_cast<std::size_t>(c)], ranks, ids[static_cast<std::size_t>(c)], rank),
            "pncclCommInitRank", rank);
    }
    std::printf("rank %d leaves\n", rank);
    return;
  }
  const Clock::time_point created = Clock::now();
  if (communicators > 1) check(ncclGroupStart(), "ncclGroupStart", rank);
  for (int c = 0; c < communicators; ++c) {
    check(ncclCommInitRank(&comms[static_cast<std::size_t>(c)], ranks, ids[static_cast<std::size_t>(c)], rank),
          "ncclCommInitRank", rank);
  }
  if (communicators > 1) check(ncclGroupEnd(), "ncclGroupEnd", rank);
  if (nonblocking()) {
    for (ncclComm_t comm : comms) waitUntilReady(rank, comm);
  }
  if (peerLeaves) std::printf("rank %d init took %.3f s\n", rank, secondsSince(created));
  int earlier = 0;
  if (mode != Mode::Plain && mode != Mode::NeverDestroyed) {
    std::vector<char> buffer(4096);
    for (int i = 0; i < communicators; ++i) {
      const int c = rank % 2 == 0 ? i : communicators - 1 - i;
      const Clock::time_point start = Clock::now();
      check(ncclAllReduce(buffer.data(), buffer.data(), 1024, ncclFloat32, ncclSum, comms[static_cast<std::size_t>(c)],
                          nullptr),
            "ncclAllReduce", rank);
      if (peerLeaves) std::printf("rank %d first all-reduce took %.3f s\n", rank, secondsSince(start));
    }
    earlier = 1;
  }
  if (mode == Mode::EndInSetUp) {
    const Clock::time_point ending = Clock::now();
    for (ncclComm_t comm : comms) {
      check(rank % 2 == 0 ? ncclCommAbort(comm) : ncclCommDestroy(comm), "ending the communicator", rank);
    }
    std::printf("rank %d end took %.3f s\n", rank, secondsSince(ending));
    // The process lives on a while, as a program would: its set-up worker says what it let go.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return;
  }
  if (mode == Mode::PeerNeverJoins) {
    // Past the set-ups' bound, so that every later call meets a set-up that gave up.
    std::this_thread::sleep_for(std::chrono::duration<double>(setupTimeoutSeconds() + 0.5));
  }
  std::vector<std::thread> users;
  for (int c = 0; c < communicators; ++c) {
    users.emplace_back([=] {
      allReduces(rank, comms[static_cast<std::size_t>(c)], calls * (c + 1), earlier);
      if (mode != Mode::NeverDestroyed) end(rank, c, comms[static_cast<std::size_t>(c)]);
    });
  }
  for (std::thread& user : users) user.join();
}

}  // namespace

int main(int argc, char** argv) {
  Mode mode = Mode::Plain;
  if (argc == 5 && std::string(argv[4]) == "opposite-order") mode = Mode::OppositeOrder;
  if (argc == 5 && std::string(argv[4]) == "peer-never-joins") mode = Mode::PeerNeverJoins;
  if (argc == 5 && std::string(argv[4]) == "end-in-setup") mode = Mode::EndInSetUp;
  // As JAX: the communicators are left alive when the program exits.
  if (argc == 5 && std::string(argv[4]) == "never-destroyed") mode = Mode::NeverDestroyed;
  if (argc != 4 && (argc != 5 || mode == Mode::Plain)) {
    std::fprintf(stderr, "usage: %s <ranks> <calls> <communicators> "
                         "[opposite-order | peer-never-joins | end-in-setup | never-destroyed]\n",
                 argv[0]);
    return 2;
  }
  const int ranks = std::atoi(argv[1]);
  const int calls = std::atoi(argv[2]);
  const int communicators = std::atoi(argv[3]);
  if (ranks < 1 || calls < 0 || communicators < 1) return 2;
  std::vector<ncclUniqueId> ids(static_cast<std::size_t>(communicators));
  for (ncclUniqueId& id : ids) check(ncclGetUniqueId(&id), "ncclGetUniqueId", -1);
  std::vector<std::thread> rankThreads;
  for (int rank = 0; rank < ranks; ++rank) rankThreads.emplace_back(runRank, rank, ranks, calls, std::cref(ids), mode);
  for (std::thread& thread : rankThreads) thread.join();
  std::printf("multi-rank failures=%d\n", gFailures.load());
  return gFailures.load() == 0 ? 0 : 1;
}
