// What a shared object shows the dynamic linker, read from its ELF file (64-bit only):
// the symbols it defines and exports, and the libraries it needs.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace shimtest {

struct DynamicInfo {
  std::set<std::string> exported;   // defined global or weak .dynsym symbols
  std::set<std::string> weak;       // the exported ones that are weak
  std::set<std::string> imported;   // undefined ones: what it calls in other libraries
  std::vector<std::string> needed;  // DT_NEEDED
  std::string soname;               // DT_SONAME, "" if none
};

// Throws std::runtime_error if the file is not a readable 64-bit ELF object.
DynamicInfo readDynamicInfo(const std::string& path);

}  // namespace shimtest
