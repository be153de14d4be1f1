// Per-rank device buffers for the GPU tests, and the host round trips to fill and read them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "host_data.h"
#include "rank_group.h"

namespace car::testing {

class DeviceBuffers {
 public:
  DeviceBuffers(int ranks, std::size_t bytes);
  ~DeviceBuffers();
  void* at(int rank) const { return pointers_[rank]; }
  std::vector<const void*> constPointers() const { return {pointers_.begin(), pointers_.end()}; }
  std::vector<void*> pointers() const { return pointers_; }
  void upload(int rank, const HostBuffer& data);
  HostBuffer download(int rank, ElementType type, std::size_t count) const;
  // Fills every byte with 0xFF: NaN in every floating type (fp8 included), so an unwritten
  // element fails; in integers it is -1 or the maximum, a value like any other (see poison(byte)).
  void poison() { poison(0xFF); }
  void poison(std::uint8_t byte);
  std::size_t bytes() const { return bytes_; }
  // Copies `bytes` bytes at `offset` of rank `rank`'s buffer to the host.
  std::vector<std::uint8_t> read(int rank, std::size_t offset, std::size_t bytes) const;

 private:
  std::vector<void*> pointers_;
  std::size_t bytes_;
};

}  // namespace car::testing
