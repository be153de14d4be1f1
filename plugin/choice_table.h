// A choice table measured on the user's own machine (`nccl-car tune`): for each collective,
// world size, case (NVLink or PCIe), type family and range of sizes, which kernel of ours, or
// NCCL, is fastest there. The library follows it where one applies (plugin/policy.cc), else its
// built-in rule; a PCIe communicator has none and forwards (untuned). A table belongs to one
// machine: its fingerprint (machine_fingerprint.h) must be this machine's, and its digest
// travels in the shared settings, so ranks that loaded different tables forward.
//
// The file, line by line (tools/nccl_car_cli/tune.py writes it; this parser is the one reader):
//   nccl-car choice table 2
//   fingerprint 0123456789abcdef
//   machine <the machine's description, for people>
//   <collective> <ranks> <links> <family> <from bytes> <to bytes> <winner>   one row per line
// `#` starts a comment line; blank lines are skipped. A row: collective `all-reduce`,
// `all-gather` or `reduce-scatter`; ranks 2..8; links `nvlink` or `pcie`, the case the
// communicator measured was (its `setup:` line says which); family `half` (fp16, bf16), `float`
// (fp32), `fp8`, `split` (integers, fp64: they travel split) or `any`; sizes of the whole
// message (every rank's part for the all-gather and the reduce-scatter), inclusive; winner a
// kernel's name that serves that collective, or `nccl`; a `pcie` row never names a pull
// kernel. Rows of one (collective, ranks, links, family) must not overlap. Format 1 had no
// links column: its tables are refused (tune again). Host code only, no CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../kernels/all_reduce.h"

namespace car {

// Which case a communicator is: NVLink between every pair of ranks, or PCIe (every pair
// peer-to-peer, not all over NVLink). Its rows apply to that case only.
enum class Links { NvLink, Pcie, kCount };

const char* linksName(Links links);  // "nvlink", "pcie"

// What a message's type means for its speed: the wire format and the reduction's cost.
enum class TypeFamily { Half, Float, Fp8, Split, kCount };

TypeFamily typeFamilyOf(ElementType type);
const char* typeFamilyName(TypeFamily family);  // "half", "float", "fp8", "split"

struct ChoiceRow {
  Collective collective = Collective::AllReduce;
  int ranks = 0;
  Links links = Links::NvLink;
  std::optional<TypeFamily> family;  // nullopt: `any`
  std::uint64_t fromBytes = 0;
  std::uint64_t toBytes = 0;
  std::optional<Algorithm> kernel;  // nullopt: NCCL is fastest here
};

class ChoiceTable {
 public:
  // Parses `text`. A table whose fingerprint is not `fingerprint` is refused (it was measured
  // on another machine, or before a driver, CUDA, NCCL or library change); nullopt takes any
  // machine's (whether the file is a table at all, before a device is known). Returns nullopt
  // with *why set to one sentence when the table cannot be used.
  static std::optional<ChoiceTable> parse(const std::string& text, std::optional<std::uint64_t> fingerprint,
                                          std::string* why);

  // The row that covers a message of `messageBytes` bytes (the whole message) on a
  // communicator of `ranks` ranks and this case, or null.
  const ChoiceRow* find(Collective collective, int ranks, Links links, ElementType type,
                        std::uint64_t messageBytes) const;

  // Whether any row was measured for communicators of `ranks` ranks and this case.
  bool measured(int ranks, Links links) const;

  const std::vector<ChoiceRow>& rows() const { return rows_; }
  // Of the whole file: ranks compare it (SharedSettings), so they follow the same table.
  std::uint64_t digest() const { return digest_; }

 private:
  std::vector<ChoiceRow> rows_;
  std::uint64_t digest_ = 0;
};

// NCCL_CAR_TABLE's value that names no file: the built-in rule, whatever the cache folder holds
// (`nccl-car tune` measures the built-in kernels under it).
inline constexpr const char* kBuiltInTable = "builtin";

// Where `nccl-car tune` puts the table of the machine with `fingerprint` and the library looks
// for it when NCCL_CAR_TABLE is unset: $XDG_CACHE_HOME/nccl-car/<fingerprint>.table, else
// $HOME/.cache/nccl-car/...; empty when neither is set. `lookup` reads the environment.
std::string defaultTablePath(std::uint64_t fingerprint, const char* (*lookup)(const char*));

// 64-bit FNV-1a of `text`: the fingerprint of a machine's description, the digest of a table.
std::uint64_t fnv1a64(const std::string& text);

// "0123456789abcdef": how fingerprints and digests are written.
std::string hex64(std::uint64_t value);

}  // namespace car
