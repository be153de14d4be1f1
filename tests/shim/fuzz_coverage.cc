#include "fuzz_coverage.h"

#include <nccl.h>

#include <cstdint>

namespace shimtest {
namespace {

std::string alignment(const std::string& hex) {
  const unsigned long long address = std::stoull(hex, nullptr, 16);
  if (address == 0) return "null";
  if (address % 2 == 1) return "odd";
  if (address % 4 == 2) return "2";
  if (address % 8 == 4) return "4";
  if (address % 16 == 8) return "8";
  return "aligned";
}

}  // namespace

void FuzzCoverage::note(const Call& call, bool stale, bool inGroup) {
  seen_.insert("datatype=" + call.get("datatype"));
  seen_.insert("op=" + call.get("op"));
  for (const char* key : {"sendbuff", "recvbuff"}) seen_.insert(std::string(key) + ":" + alignment(call.get(key)));
  const std::string count = call.get("count");
  if (count == "0" || count == std::to_string(SIZE_MAX)) seen_.insert("count=" + count);
  if (count.size() >= 19) seen_.insert("count:huge");
  if (count != "0" && (std::stoull(count) & 1) == 1) seen_.insert("count:odd");
  const std::string comm = call.get("comm");
  seen_.insert(comm == "0x0" ? "comm:null" : stale ? "comm:stale" : "comm:live");
  seen_.insert(call.get("stream") == "0x0" ? "stream:null" : "stream:set");
  if (call.get("sendbuff") == call.get("recvbuff")) seen_.insert("in-place");
  if (inGroup) seen_.insert("in-group");
}

std::vector<std::string> FuzzCoverage::missing() const {
  std::vector<std::string> wanted = {"count=0", "count=" + std::to_string(SIZE_MAX), "count:huge", "count:odd",
                                     "comm:null", "comm:stale", "comm:live", "stream:null", "stream:set",
                                     "in-place", "in-group"};
  for (const char* key : {"sendbuff", "recvbuff"}) {
    for (const char* kind : {"null", "odd", "2", "4", "8", "aligned"}) wanted.push_back(std::string(key) + ":" + kind);
  }
  for (int type = 0; type < ncclNumTypes; ++type) wanted.push_back("datatype=" + std::to_string(type));
  for (int op = 0; op < ncclNumOps; ++op) wanted.push_back("op=" + std::to_string(op));
  for (int value : {-1, static_cast<int>(ncclNumTypes), 1000}) wanted.push_back("datatype=" + std::to_string(value));
  for (int value : {-1, static_cast<int>(ncclNumOps), 1000}) wanted.push_back("op=" + std::to_string(value));
  std::vector<std::string> absent;
  for (const std::string& kind : wanted) {
    if (seen_.count(kind) == 0) absent.push_back(kind);
  }
  return absent;
}

}  // namespace shimtest
