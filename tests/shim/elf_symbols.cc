#include "elf_symbols.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace shimtest {
namespace {

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

template <typename T>
T at(const std::string& file, std::size_t offset) {
  if (offset + sizeof(T) > file.size()) throw std::runtime_error("ELF structure out of the file");
  T value;
  std::memcpy(&value, file.data() + offset, sizeof(T));
  return value;
}

std::string stringAt(const std::string& file, const Elf64_Shdr& table, std::size_t index) {
  const std::size_t offset = table.sh_offset + index;
  if (index >= table.sh_size || offset >= file.size()) throw std::runtime_error("ELF string out of its table");
  return std::string(file.c_str() + offset);
}

}  // namespace

DynamicInfo readDynamicInfo(const std::string& path) {
  const std::string file = readAll(path);
  const auto header = at<Elf64_Ehdr>(file, 0);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64) {
    throw std::runtime_error(path + " is not a 64-bit ELF file");
  }
  std::vector<Elf64_Shdr> sections;
  for (int i = 0; i < header.e_shnum; ++i) {
    sections.push_back(at<Elf64_Shdr>(file, header.e_shoff + static_cast<std::size_t>(i) * header.e_shentsize));
  }
  DynamicInfo info;
  for (const Elf64_Shdr& section : sections) {
    if (section.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strings = sections[section.sh_link];
    if (section.sh_type == SHT_DYNSYM) {
      for (std::size_t offset = 0; offset + sizeof(Elf64_Sym) <= section.sh_size; offset += sizeof(Elf64_Sym)) {
        const auto symbol = at<Elf64_Sym>(file, section.sh_offset + offset);
        const int binding = ELF64_ST_BIND(symbol.st_info);
        if (binding != STB_GLOBAL && binding != STB_WEAK) continue;
        const std::string name = stringAt(file, strings, symbol.st_name);
        if (name.empty()) continue;
        (symbol.st_shndx == SHN_UNDEF ? info.imported : info.exported).insert(name);
        if (symbol.st_shndx != SHN_UNDEF && binding == STB_WEAK) info.weak.insert(name);
      }
    }
    if (section.sh_type == SHT_DYNAMIC) {
      for (std::size_t offset = 0; offset + sizeof(Elf64_Dyn) <= section.sh_size; offset += sizeof(Elf64_Dyn)) {
        const auto entry = at<Elf64_Dyn>(file, section.sh_offset + offset);
        if (entry.d_tag == DT_NEEDED) info.needed.push_back(stringAt(file, strings, entry.d_un.d_val));
        if (entry.d_tag == DT_SONAME) info.soname = stringAt(file, strings, entry.d_un.d_val);
        if (entry.d_tag == DT_NULL) break;
      }
    }
  }
  return info;
}

}  // namespace shimtest
