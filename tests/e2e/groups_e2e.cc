// NCCL's group semantics with the library loaded, through the real NCCL: every rank makes
// the same all-reduces (and a reduce-scatter and an all-gather) inside ncclGroupStart/End in
// several ways, and checks what NCCL alone
// gives (the runner runs this program once without the library too, as the reference).
// NCCL runs a group's calls at its outermost end: work put on the stream before the end runs
// first; ncclGroupSimulateEnd runs nothing; a group whose end fails runs nothing.
// Prints "rank R: groups: CASE: PASS|FAIL ..." per case, then
// "rank R: groups: N cases, M failed, T all-reduces expected taken" and exits 0 or 1.
//
//   groups_e2e RANK NRANKS ID_FILE [DEVICE]
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "unique_id_file.h"

namespace {

// 16 KiB of fp32: a size our kernels take.
constexpr std::size_t kCount = 4096;

struct Rank {
  int rank = 0;
  int ranks = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
  float* send2 = nullptr;
  float* recv2 = nullptr;
  float* fresh = nullptr;  // device copy of another input, for the ordering case
};

// Small integers: sums of them are exact in fp32 in any order.
float valueOf(int rank, std::size_t i, int seed) { return static_cast<float>((i * 7 + rank * 13 + seed) % 97); }

void fill(const Rank& self, float* buffer, int seed) {
  std::vector<float> host(kCount);
  for (std::size_t i = 0; i < kCount; ++i) host[i] = valueOf(self.rank, i, seed);
  cudaMemcpy(buffer, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice);
}

// All ones: a NaN, which no sum of the inputs is.
void poison(const Rank& self, float* buffer) {
  cudaMemsetAsync(buffer, 0xFF, kCount * sizeof(float), self.stream);
  cudaStreamSynchronize(self.stream);
}

std::vector<float> read(float* buffer) {
  std::vector<float> host(kCount);
  cudaMemcpy(host.data(), buffer, kCount * sizeof(float), cudaMemcpyDeviceToHost);
  return host;
}

// Elements of `buffer` that are not the sum over ranks of the inputs of `seed`.
std::size_t wrongSums(const Rank& self, float* buffer, int seed) {
  const std::vector<float> host = read(buffer);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kCount; ++i) {
    float sum = 0;
    for (int r = 0; r < self.ranks; ++r) sum += valueOf(r, i, seed);
    if (host[i] != sum) ++wrong;
  }
  return wrong;
}

// Elements of `buffer` that are no longer the poison.
std::size_t written(float* buffer) {
  const std::vector<float> host = read(buffer);
  std::size_t changed = 0;
  for (float value : host) changed += std::isnan(value) ? 0 : 1;
  return changed;
}

ncclResult_t allReduce(const Rank& self, const float* send, float* recv, ncclComm_t comm) {
  return ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, self.stream);
}

struct Outcome {
  bool pass;
  std::string detail;
};

Outcome sums(const Rank& self, float* buffer, int seed, const std::string& what) {
  cudaError_t error = cudaStreamSynchronize(self.stream);
  if (error != cudaSuccess) return {false, what + ": " + cudaGetErrorString(error)};
  const std::size_t wrong = wrongSums(self, buffer, seed);
  return {wrong == 0, what + ": " + std::to_string(wrong) + " wrong of " + std::to_string(kCount)};
}

Outcome plain(Rank& self, int seed) {
  fill(self, self.send, seed);
  poison(self, self.recv);
  if (allReduce(self, self.send, self.recv, self.comm) != ncclSuccess) return {false, "ncclAllReduce failed"};
  return sums(self, self.recv, seed, "sum");
}

// Nothing of a simulated group runs.
Outcome simulated(Rank& self) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
  fill(self, self.send, 2);
  poison(self, self.recv);
  ncclGroupStart();
  const ncclResult_t call = allReduce(self, self.send, self.recv, self.comm);
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  const ncclResult_t end = ncclGroupSimulateEnd(&info);
  cudaStreamSynchronize(self.stream);
  const std::size_t changed = written(self.recv);
  return {call == ncclSuccess && end == ncclSuccess && changed == 0,
          "call " + std::to_string(call) + ", simulated end " + std::to_string(end) + ", " + std::to_string(changed) +
              " output elements written (none expected)"};
#else
  (void)self;
  return {true, "no ncclGroupSimulateEnd before NCCL 2.22"};
#endif
}

// The calls of a (nested) group run at its outermost end, after what the caller put on the
// stream before it: here a copy that replaces the first call's input.
Outcome ordered(Rank& self) {
  fill(self, self.send, 3);
  fill(self, self.fresh, 4);
  fill(self, self.send2, 5);
  poison(self, self.recv);
  poison(self, self.recv2);
  ncclGroupStart();
  ncclGroupStart();
  const ncclResult_t first = allReduce(self, self.send, self.recv, self.comm);
  ncclGroupEnd();
  cudaMemcpyAsync(self.send, self.fresh, kCount * sizeof(float), cudaMemcpyDeviceToDevice, self.stream);
  const ncclResult_t second = allReduce(self, self.send2, self.recv2, self.comm);
  const ncclResult_t end = ncclGroupEnd();
  if (first != ncclSuccess || second != ncclSuccess || end != ncclSuccess) return {false, "a call or the end failed"};
  const Outcome one = sums(self, self.recv, 4, "first (input replaced before the end)");
  const Outcome two = sums(self, self.recv2, 5, "second");
  return {one.pass && two.pass, one.detail + "; " + two.detail};
}

// A group captured in a CUDA graph, then replayed on new inputs.
Outcome captured(Rank& self) {
  poison(self, self.recv);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamBeginCapture(self.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    return {false, "cannot capture"};
  }
  ncclGroupStart();
  const ncclResult_t call = allReduce(self, self.send, self.recv, self.comm);
  const ncclResult_t end = ncclGroupEnd();
  const cudaError_t ended = cudaStreamEndCapture(self.stream, &graph);
  if (call != ncclSuccess || end != ncclSuccess || ended != cudaSuccess) return {false, "capture failed"};
  const std::size_t changed = written(self.recv);  // a capture runs nothing
  bool pass = changed == 0 && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  std::string detail = std::to_string(changed) + " elements written by the capture";
  for (int seed = 6; pass && seed < 9; ++seed) {
    fill(self, self.send, seed);
    poison(self, self.recv);
    cudaGraphLaunch(exec, self.stream);
    const Outcome replay = sums(self, self.recv, seed, "replay");
    pass = replay.pass;
    detail += "; " + replay.detail;
  }
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return {pass, detail};
}

// One group over two communicators.
Outcome twoCommunicators(Rank& self, ncclComm_t other) {
  fill(self, self.send, 9);
  fill(self, self.send2, 10);
  poison(self, self.recv);
  poison(self, self.recv2);
  ncclGroupStart();
  const ncclResult_t first = allReduce(self, self.send, self.recv, self.comm);
  const ncclResult_t second = allReduce(self, self.send2, self.recv2, other);
  const ncclResult_t end = ncclGroupEnd();
  if (first != ncclSuccess || second != ncclSuccess || end != ncclSuccess) return {false, "a call or the end failed"};
  const Outcome one = sums(self, self.recv, 9, "world");
  const Outcome two = sums(self, self.recv2, 10, "split");
  return {one.pass && two.pass, one.detail + "; " + two.detail};
}

// A group with a call NCCL refuses fails at its end, and runs nothing.
Outcome failed(Rank& self) {
  fill(self, self.send, 11);
  poison(self, self.recv);
  ncclGroupStart();
  const ncclResult_t good = allReduce(self, self.send, self.recv, self.comm);
  const ncclResult_t bad = ncclAllReduce(self.send2, self.recv2, kCount, static_cast<ncclDataType_t>(99), ncclSum,
                                         self.comm, self.stream);
  const ncclResult_t end = ncclGroupEnd();
  cudaStreamSynchronize(self.stream);
  const std::size_t changed = written(self.recv);
  return {good == ncclSuccess && bad != ncclSuccess && end != ncclSuccess && changed == 0,
          "good call " + std::to_string(good) + ", bad call " + std::to_string(bad) + ", end " + std::to_string(end) +
              ", " + std::to_string(changed) + " output elements written (none expected)"};
}

// Elements among the first `count` of `buffer` that differ from expected(i).
std::size_t wrongIn(float* buffer, std::size_t count, const std::function<float(std::size_t)>& expected) {
  const std::vector<float> host = read(buffer);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += host[i] == expected(i) ? 0 : 1;
  return wrong;
}

// A reduce-scatter and an all-gather in one group (independent: NCCL orders none of a group's
// calls against another), both ours, both right at the end.
Outcome scatterAndGather(Rank& self) {
  const std::size_t part = kCount / self.ranks;
  fill(self, self.send, 13);
  fill(self, self.send2, 14);
  poison(self, self.recv);
  poison(self, self.recv2);
  ncclGroupStart();
  const ncclResult_t scatter =
      ncclReduceScatter(self.send, self.recv, part, ncclFloat32, ncclSum, self.comm, self.stream);
  const ncclResult_t gather = ncclAllGather(self.send2, self.recv2, part, ncclFloat32, self.comm, self.stream);
  const ncclResult_t end = ncclGroupEnd();
  const cudaError_t done = cudaStreamSynchronize(self.stream);
  if (scatter != ncclSuccess || gather != ncclSuccess || end != ncclSuccess || done != cudaSuccess) {
    return {false, "a call, the end or the stream failed"};
  }
  const std::size_t scatterWrong = wrongIn(self.recv, part, [&](std::size_t j) {
    float sum = 0;
    for (int r = 0; r < self.ranks; ++r) sum += valueOf(r, self.rank * part + j, 13);
    return sum;
  });
  const std::size_t gatherWrong =
      wrongIn(self.recv2, kCount, [&](std::size_t i) { return valueOf(static_cast<int>(i / part), i % part, 14); });
  return {scatterWrong == 0 && gatherWrong == 0, "reduce-scatter: " + std::to_string(scatterWrong) + " wrong of " +
                                                     std::to_string(part) + "; all-gather: " +
                                                     std::to_string(gatherWrong) + " wrong of " + std::to_string(kCount)};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: groups_e2e RANK NRANKS ID_FILE [DEVICE]\n");
    return 2;
  }
  Rank self;
  self.rank = std::atoi(argv[1]);
  self.ranks = std::atoi(argv[2]);
  if (cudaSetDevice(argc > 4 ? std::atoi(argv[4]) : 0) != cudaSuccess) return 2;
  ncclUniqueId id{};
  if (!shareUniqueIdThroughFile(self.rank, argv[3], &id)) return 2;
  if (ncclCommInitRank(&self.comm, self.ranks, id, self.rank) != ncclSuccess) return 2;
  ncclComm_t other = nullptr;
  if (ncclCommSplit(self.comm, 0, self.rank, &other, nullptr) != ncclSuccess || other == nullptr) return 2;
  cudaStreamCreateWithFlags(&self.stream, cudaStreamNonBlocking);
  for (float** buffer : {&self.send, &self.recv, &self.send2, &self.recv2, &self.fresh}) {
    if (cudaMalloc(buffer, kCount * sizeof(float)) != cudaSuccess) return 2;
  }

  // What each case expects our kernels to take, on the two communicators together.
  struct Case {
    const char* name;
    std::function<Outcome()> run;
    int taken;
  };
  const std::vector<Case> cases = {
      {"outside a group", [&] { return plain(self, 1); }, 1},
      {"ncclGroupSimulateEnd", [&] { return simulated(self); }, 0},
      {"nested, input replaced before the end", [&] { return ordered(self); }, 2},
      {"captured in a graph", [&] { return captured(self); }, 1},
      {"two communicators", [&] { return twoCommunicators(self, other); }, 2},
      {"failed end", [&] { return failed(self); }, 0},
      {"a reduce-scatter and an all-gather", [&] { return scatterAndGather(self); }, 2},
      {"after them, outside a group", [&] { return plain(self, 12); }, 1},
  };
  int failures = 0, taken = 0;
  for (const Case& c : cases) {
    const Outcome outcome = c.run();
    failures += outcome.pass ? 0 : 1;
    taken += c.taken;
    std::printf("rank %d: groups: %s: %s %s\n", self.rank, c.name, outcome.pass ? "PASS" : "FAIL",
                outcome.detail.c_str());
    std::fflush(stdout);
  }
  for (float* buffer : {self.send, self.recv, self.send2, self.recv2, self.fresh}) cudaFree(buffer);
  cudaStreamDestroy(self.stream);
  ncclCommDestroy(other);
  ncclCommDestroy(self.comm);
  std::printf("rank %d: groups: %zu cases, %d failed, %d all-reduces expected taken\n", self.rank, cases.size(),
              failures, taken);
  return failures == 0 ? 0 : 1;
}
