// What a leak test counts about its own process: open file descriptors and memory
// mappings, read from /proc/self. Header-only: used by CPU drivers and GPU programs alike.
#pragma once

#include <dirent.h>

#include <fstream>
#include <string>

namespace car::testing {

inline long countDirectoryEntries(const char* directory) {
  long count = 0;
  if (DIR* dir = opendir(directory)) {
    while (readdir(dir) != nullptr) ++count;
    closedir(dir);
  }
  return count;
}

inline long countFileLines(const char* path) {
  std::ifstream file(path);
  long count = 0;
  for (std::string line; std::getline(file, line);) ++count;
  return count;
}

inline long openFileDescriptors() { return countDirectoryEntries("/proc/self/fd"); }
inline long memoryMappings() { return countFileLines("/proc/self/maps"); }

}  // namespace car::testing
