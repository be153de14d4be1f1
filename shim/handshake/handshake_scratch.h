// Where the handshake's two all-gathers put their bytes in a communicator's device scratch:
//
//   | our record | rank 0's record ... rank n-1's | our report | rank 0's report ... |
//
// Each all-gather sends our own item from its `send` offset and receives every rank's, in
// rank order, from its `receive` offset (ncclAllGather's layout).
#pragma once

#include <cstddef>

#include "handshake/handshake_record.h"

namespace car {

// One all-gather's part of the scratch.
struct GatherArea {
  std::size_t send = 0;
  std::size_t receive = 0;
  std::size_t itemBytes = 0;

  constexpr std::size_t receiveBytes(int ranks) const { return itemBytes * static_cast<std::size_t>(ranks); }
  constexpr std::size_t end(int ranks) const { return receive + receiveBytes(ranks); }
};

struct ScratchLayout {
  GatherArea records;  // exchange 1: HandshakeRecord
  GatherArea reports;  // exchange 2: LinkReport
  std::size_t bytes = 0;

  static constexpr ScratchLayout forRanks(int ranks) {
    ScratchLayout layout;
    layout.records = GatherArea{0, sizeof(HandshakeRecord), sizeof(HandshakeRecord)};
    const std::size_t reportsStart = layout.records.end(ranks);
    layout.reports = GatherArea{reportsStart, reportsStart + sizeof(LinkReport), sizeof(LinkReport)};
    layout.bytes = layout.reports.end(ranks);
    return layout;
  }
};

}  // namespace car
