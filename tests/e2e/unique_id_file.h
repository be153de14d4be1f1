// The end-to-end programs start one process per rank without MPI: rank 0 publishes the
// NCCL unique id through a file, the others wait for it (up to a minute).
#pragma once

#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

inline bool shareUniqueIdThroughFile(int rank, const std::string& path, ncclUniqueId* id) {
  if (rank == 0) {
    if (ncclGetUniqueId(id) != ncclSuccess) return false;
    const std::string temporary = path + ".tmp";
    std::ofstream(temporary, std::ios::binary).write(reinterpret_cast<const char*>(id), sizeof(*id));
    return std::rename(temporary.c_str(), path.c_str()) == 0;  // readers never see half a file
  }
  for (int tries = 0; tries < 6000; ++tries) {
    std::ifstream file(path, std::ios::binary);
    if (file.read(reinterpret_cast<char*>(id), sizeof(*id))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}
