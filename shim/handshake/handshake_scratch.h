// Where the set-up's one all-gather puts its bytes in a communicator's device scratch:
//
//   | our record | rank 0's record ... rank n-1's |
//
// The all-gather sends our own record from its `send` offset and receives every rank's, in
// rank order, from its `receive` offset (ncclAllGather's layout).
#pragma once

#include <cstddef>

#include "handshake/handshake_record.h"

namespace car {

// The all-gather's part of the scratch.
struct GatherArea {
  std::size_t send = 0;
  std::size_t receive = 0;
  std::size_t itemBytes = 0;

  constexpr std::size_t receiveBytes(int ranks) const { return itemBytes * static_cast<std::size_t>(ranks); }
  constexpr std::size_t end(int ranks) const { return receive + receiveBytes(ranks); }
};

struct ScratchLayout {
  GatherArea records;  // HandshakeRecord
  std::size_t bytes = 0;

  static constexpr ScratchLayout forRanks(int ranks) {
    ScratchLayout layout;
    layout.records = GatherArea{0, sizeof(HandshakeRecord), sizeof(HandshakeRecord)};
    layout.bytes = layout.records.end(ranks);
    return layout;
  }
};

}  // namespace car
