#include "choice_table.h"

#include <cinttypes>
#include <cstdio>
#include <sstream>

namespace car {
namespace {

constexpr const char* kHeader = "nccl-car choice table 2";
constexpr const char* kFormerHeader = "nccl-car choice table 1";  // without the links column

std::optional<Collective> collectiveNamed(const std::string& name) {
  for (int c = 0; c < kCollectiveCount; ++c) {
    if (name == collectiveName(static_cast<Collective>(c))) return static_cast<Collective>(c);
  }
  return std::nullopt;
}

bool familyNamed(const std::string& name, std::optional<TypeFamily>* family) {
  if (name == "any") return family->reset(), true;
  for (int f = 0; f < static_cast<int>(TypeFamily::kCount); ++f) {
    if (name == typeFamilyName(static_cast<TypeFamily>(f))) return *family = static_cast<TypeFamily>(f), true;
  }
  return false;
}

bool linksNamed(const std::string& name, Links* links) {
  for (int l = 0; l < static_cast<int>(Links::kCount); ++l) {
    if (name == linksName(static_cast<Links>(l))) return *links = static_cast<Links>(l), true;
  }
  return false;
}

bool winnerNamed(const std::string& name, Collective collective, std::optional<Algorithm>* kernel) {
  if (name == "nccl") return kernel->reset(), true;
  for (const AlgorithmSpec& row : kAlgorithms) {
    if (name == row.name && serves(row.algorithm, collective)) return *kernel = row.algorithm, true;
  }
  return false;
}

bool overlaps(const ChoiceRow& a, const ChoiceRow& b) {
  const bool sameFamily = !a.family || !b.family || *a.family == *b.family;
  return a.collective == b.collective && a.ranks == b.ranks && a.links == b.links && sameFamily &&
         a.fromBytes <= b.toBytes && b.fromBytes <= a.toBytes;
}

}  // namespace

const char* linksName(Links links) {
  switch (links) {
    case Links::NvLink: return "nvlink";
    case Links::Pcie: return "pcie";
    case Links::kCount: break;
  }
  return "?";
}

TypeFamily typeFamilyOf(ElementType type) {
  if (wirePacksPerPack(type) > 1) return TypeFamily::Split;
  if (isFp8(type)) return TypeFamily::Fp8;
  return elementBytes(type) == 2 ? TypeFamily::Half : TypeFamily::Float;
}

const char* typeFamilyName(TypeFamily family) {
  switch (family) {
    case TypeFamily::Half: return "half";
    case TypeFamily::Float: return "float";
    case TypeFamily::Fp8: return "fp8";
    case TypeFamily::Split: return "split";
    case TypeFamily::kCount: break;
  }
  return "?";
}

std::string defaultTablePath(std::uint64_t fingerprint, const char* (*lookup)(const char*)) {
  const char* cache = lookup("XDG_CACHE_HOME");
  std::string folder;
  if (cache != nullptr && cache[0] == '/') {
    folder = cache;
  } else if (const char* home = lookup("HOME"); home != nullptr && home[0] == '/') {
    folder = std::string(home) + "/.cache";
  } else {
    return "";
  }
  return folder + "/nccl-car/" + hex64(fingerprint) + ".table";
}

std::uint64_t fnv1a64(const std::string& text) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string hex64(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016" PRIx64, value);
  return text;
}

std::optional<ChoiceTable> ChoiceTable::parse(const std::string& text, std::optional<std::uint64_t> fingerprint,
                                              std::string* why) {
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  auto refuse = [&](const std::string& reason) -> std::optional<ChoiceTable> {
    *why = number > 0 ? "line " + std::to_string(number) + ": " + reason : reason;
    return std::nullopt;
  };
  const bool read = static_cast<bool>(std::getline(lines, line));
  if (read && line == kFormerHeader) {
    number = 1;
    return refuse("written by an older nccl-car (its rows do not say NVLink or PCIe): run nccl-car tune again");
  }
  if (!read || line != kHeader) {
    number = 1;
    return refuse(std::string("not a choice table (the first line must be \"") + kHeader + "\")");
  }
  number = 1;
  ChoiceTable table;
  table.digest_ = fnv1a64(text);
  bool fingerprinted = false;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (first == "machine") continue;  // for people; the fingerprint is what is checked
    if (first == "fingerprint") {
      std::string value, rest;
      words >> value >> rest;
      if (value.size() != 16 || !rest.empty() || value.find_first_not_of("0123456789abcdef") != std::string::npos) {
        return refuse("a fingerprint is 16 hexadecimal digits");
      }
      if (fingerprint && value != hex64(*fingerprint)) {
        return refuse("measured on another machine or setup (fingerprint " + value + ", this one's " +
                      hex64(*fingerprint) + "): run nccl-car tune again");
      }
      fingerprinted = true;
      continue;
    }
    ChoiceRow row;
    const std::optional<Collective> collective = collectiveNamed(first);
    if (!collective) return refuse("'" + first + "' is no collective (all-reduce, all-gather, reduce-scatter)");
    row.collective = *collective;
    std::string links, family, winner, rest;
    long long ranks = 0;
    unsigned long long from = 0, to = 0;
    if (!(words >> ranks >> links >> family >> from >> to >> winner) || (words >> rest)) {
      return refuse("a row is: collective ranks links family from-bytes to-bytes winner");
    }
    if (!takesWorldSize(static_cast<int>(ranks))) return refuse("ranks must be 2 to 8");
    row.ranks = static_cast<int>(ranks);
    if (!linksNamed(links, &row.links)) return refuse("'" + links + "' is neither nvlink nor pcie");
    if (!familyNamed(family, &row.family)) return refuse("'" + family + "' is no type family (half, float, fp8, split, any)");
    if (from > to) return refuse("from-bytes is above to-bytes");
    row.fromBytes = from;
    row.toBytes = to;
    if (!winnerNamed(winner, row.collective, &row.kernel)) {
      return refuse("'" + winner + "' is neither nccl nor a kernel of the " + collectiveName(row.collective));
    }
    if (row.links == Links::Pcie && row.kernel && !isPush(*row.kernel)) {
      return refuse("'" + winner + "' is a pull kernel, which never runs over PCIe");
    }
    for (const ChoiceRow& earlier : table.rows_) {
      if (overlaps(earlier, row)) return refuse("overlaps an earlier row");
    }
    table.rows_.push_back(row);
  }
  number = 0;
  if (!fingerprinted) return refuse("no fingerprint line: a table must say which machine it was measured on");
  return table;
}

const ChoiceRow* ChoiceTable::find(Collective collective, int ranks, Links links, ElementType type,
                                   std::uint64_t messageBytes) const {
  const TypeFamily family = typeFamilyOf(type);
  for (const ChoiceRow& row : rows_) {
    if (row.collective == collective && row.ranks == ranks && row.links == links &&
        (!row.family || *row.family == family) && row.fromBytes <= messageBytes && messageBytes <= row.toBytes) {
      return &row;
    }
  }
  return nullptr;
}

bool ChoiceTable::measured(int ranks, Links links) const {
  for (const ChoiceRow& row : rows_) {
    if (row.ranks == ranks && row.links == links) return true;
  }
  return false;
}

}  // namespace car
