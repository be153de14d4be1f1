// All-gather (push): every rank writes its part into slot `rank` of every peer's receive area,
// and into its own place in its output; then copies each peer's part, as it arrives, into
// that peer's place. 1shot's pushes without the reduction, so the same rotation, clearing and
// arrival test serve it. The data is only moved, so its bits must arrive unchanged: every type
// travels split (kCopyWirePacks), twice the bytes, where a type with a spare bit pattern would
// lose the sign of a -0.0 to the sentinel (kernels/lamport.cuh). One kernel serves every type.
//
// In place (NCCL's form: the input is our own part of the output) the own part is already
// where it belongs; the other parts of the output are never read.
#include "all_reduce.h"
#include "dispatch.cuh"
#include "geometry.h"
#include "lamport.cuh"
#include "pdl.cuh"
#include "push_rotation.cuh"

namespace car {

template <int kRanks>
__device__ __forceinline__ void allGatherPush(const LaunchArgs& args) {
  constexpr int kWire = kCopyWirePacks;
  waitForPreviousGrid();
  allowNextGrid();
  const long long packs = args.packs;  // of one rank's part
  const long long partBytes = args.bytes;
  const long long slotWirePacks = packs * kWire;
  const int rank = args.rank;
  char* const output = static_cast<char*>(args.output);
  char* const ownPart = output + rank * partBytes;
  const bool inPlace = ownPart == args.input;
  const bool inputAligned = aligned16(args.input);
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  // As in 1shot: the first pack's load overlaps the rotation's.
  auto ownPack = [&](long long i) { return loadMessagePack(args.input, i, partBytes, inputAligned); };
  const Pack firstPack = first < packs ? ownPack(first) : Pack{};
  const PushRound round =
      beginPushRound(args.pushState, DirtySlots{static_cast<std::uint64_t>(slotWirePacks), kRanks, 0});

  // 1. Our part into slot `rank` of every peer's area, and into our place in the output.
  Pack* ourSlotAt[kRanks];
#pragma unroll
  for (int r = 0; r < kRanks; ++r) ourSlotAt[r] = areaAt(args.peers.areas[r], args.areaBytes, round.area) + rank * slotWirePacks;
  const bool ownPartAligned = aligned16(ownPart);
#pragma unroll 1
  for (long long i = first; i < packs; i += stride) {
    const Pack pack = i == first ? firstPack : ownPack(i);
    const WirePack<kWire> wire = encodeWire<kWire>(pack);
#pragma unroll
    for (int r = 0; r < kRanks; ++r) {
      if (r != rank) pushWire(ourSlotAt[r], i, wire);
    }
    if (!inPlace) storeMessagePack(ownPart, i, partBytes, ownPartAligned, pack);
  }

  // 2. While the pushes travel: the previous call's area back to the sentinel.
  clearStaleSlots(areaAt(args.peers.areas[rank], args.areaBytes, round.stale), round.staleSlots, rank, kRanks);

  // 3. Each peer's pack i, once here, into that peer's place.
  const Pack* slots = areaAt(args.peers.areas[rank], args.areaBytes, round.area);
  for (long long i = first; i < packs; i += stride) {
    Pack got[kRanks];
    if (!awaitPacks<kRanks, kWire>(slots, slotWirePacks, i, peersOf<kRanks>(rank), got, args.abortFlag)) return;
#pragma unroll
    for (int r = 0; r < kRanks; ++r) {
      if (r == rank) continue;
      char* part = output + r * partBytes;
      storeMessagePack(part, i, partBytes, aligned16(part), got[r]);
    }
  }
}

template <int kRanks>
__global__ void __launch_bounds__(kThreadsPerBlock, 1) allGatherPushKernel(LaunchArgs args) {
  allGatherPush<kRanks>(args);
}

template <int kRanks>
CollectiveKernel allGatherPushKernelOf() {
  return &allGatherPushKernel<kRanks>;
}

template CollectiveKernel allGatherPushKernelOf<2>();
template CollectiveKernel allGatherPushKernelOf<3>();
template CollectiveKernel allGatherPushKernelOf<4>();
template CollectiveKernel allGatherPushKernelOf<5>();
template CollectiveKernel allGatherPushKernelOf<6>();
template CollectiveKernel allGatherPushKernelOf<7>();
template CollectiveKernel allGatherPushKernelOf<8>();

}  // namespace car
