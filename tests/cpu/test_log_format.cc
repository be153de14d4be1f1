// plugin/log_format.h: the shape of every line, which the CLI's parser reads (its own tests
// read lines made here, through nccl_car_query log-samples).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cstring>
#include <string>

#include "log.h"
#include "settings_table.h"

using namespace car;

TEST_CASE("log format: a line starts as NCCL's do, and a WARN says where it comes from", "[log]") {
  CHECK(logText(formatLineStart, "node-a", 12L, 34L, 1, LogLevel::Info, "plugin/x.cc", 7) ==
        "node-a:12:34 [1] NCCL-CAR INFO ");
  CHECK(logText(formatLineStart, "node-a", 12L, 34L, -1, LogLevel::Warn, "/src/shim/handshake/handshake.cc", 99) ==
        "node-a:12:34 [-1] handshake.cc:99 NCCL-CAR WARN ");
  CHECK(logText(formatLineStart, "h", 1L, 1L, 0, LogLevel::Trace, "x.cc", 1) == "h:1:1 [0] NCCL-CAR TRACE ");
}

TEST_CASE("log format: a communicator is named as {fmt} prints its address", "[log]") {
  int object = 0;
  const void* comm = &object;
  CHECK(logText(formatCommName, comm, 1, 4) == fmt::format("comm {} rank 1/4", comm));
  CHECK(logText(formatCommName, static_cast<const void*>(nullptr), 0, 0) ==
        fmt::format("comm {} rank ?/?", static_cast<const void*>(nullptr)));
}

TEST_CASE("log format: like snprintf, a function measures, and cuts to the room it is given", "[log]") {
  const std::string whole = logText(formatSetupNotEligible, "comm 0x1 rank 0/2", "ranks span 2 hosts");
  CHECK(whole == "comm 0x1 rank 0/2 setup: not eligible: ranks span 2 hosts");
  CHECK(formatSetupNotEligible(nullptr, 0, "comm 0x1 rank 0/2", "ranks span 2 hosts") == whole.size());
  char room[12];
  std::memset(room, 'x', sizeof(room));
  CHECK(formatSetupNotEligible(room, sizeof(room), "comm 0x1 rank 0/2", "ranks span 2 hosts") == whole.size());
  CHECK(std::string(room) == whole.substr(0, sizeof(room) - 1));
  // Several pieces: the cut holds across them.
  const NamedCount taken[] = {{"1shot", 1}, {"2shot", 22}};
  const NamedCount forwarded[] = {{"op", 0}, {"too-large", 3}};
  const std::string counts = logText(formatCallCounts, taken, 2, 4096ull, forwarded, 2);
  CHECK(counts == "taken 1shot=1 2shot=22 (4096 bytes) forwarded 3 (too-large=3)");
  for (std::size_t size = 1; size <= counts.size() + 1; ++size) {
    std::string cut(size, 'x');
    CHECK(formatCallCounts(cut.data(), size, taken, 2, 4096, forwarded, 2) == counts.size());
    CHECK(std::string(cut.c_str()) == counts.substr(0, size - 1));
  }
}

TEST_CASE("log format: the setup: line names the links, and a PCIe communicator's tuning after it", "[log][pcie]") {
  const std::string nvlink = logText(formatLinks, true, "PIX", 0, 1);
  CHECK(nvlink == "full nvlink");
  CHECK(logText(formatSetupEligible, "comm 0x1 rank 0/2", false, nvlink.c_str(), 90, 8388608ull, 50337280ull, 0ull,
                "") == "comm 0x1 rank 0/2 setup: eligible (ipc peers, full nvlink, sm_90, up to 8388608 bytes; holds "
                       "50337280 bytes; from call 0)");
  const std::string pcie = logText(formatLinks, false, "PXB", 1, 6);
  CHECK(pcie == "pcie (every pair peer-to-peer, PXB at most; NVLink on 1 of 6 pairs)");
  CHECK(logText(formatLinks, false, "PHB", 0, 28) == "pcie (every pair peer-to-peer, PHB at most)");
  const std::string forced = logText(formatPcieTuning, 4, false, "1shot");
  CHECK(forced == "pcie forced: NCCL_CAR_ALGO=1shot takes the all-reduces it can run; every other call goes to NCCL "
                  "(untuned) until `nccl-car tune` has measured 4 ranks over PCIe on this machine");
  CHECK(logText(formatPcieTuning, 4, true, nullptr).rfind("pcie tuned: ", 0) == 0);
  CHECK(logText(formatSetupEligible, "comm 0x1 rank 3/4", true, pcie.c_str(), 0, 16ull, 4096ull, 2ull,
                forced.c_str()) ==
        "comm 0x1 rank 3/4 setup: eligible (same-process peers, " + pcie +
            ", sm_mixed, up to 16 bytes; holds 4096 bytes; from call 2); " + forced);
  // Nothing measured, nothing forced: not eligible, the links in its reason, and no figure of memory held.
  const std::string untuned = logText(formatPcieUntuned, false, pcie.c_str(), 90, 4);
  CHECK(logText(formatSetupNotEligible, "comm 0x1 rank 3/4", untuned.c_str()) ==
        "comm 0x1 rank 3/4 setup: not eligible: pcie untuned (ipc peers, " + pcie +
            ", sm_90): every call goes to NCCL (untuned) until `nccl-car tune` has measured 4 ranks over PCIe on "
            "this machine");
}

TEST_CASE("log format: the audit module reads NCCL_CAR_DEBUG as the settings table does", "[log]") {
  const SettingSpec* debug = findSetting("NCCL_CAR_DEBUG");
  REQUIRE(debug != nullptr);
  for (const char* text : {"WARN", "info", "Trace", "TRACE", "warn", "verbose", "", "INFO ", "2"}) {
    CAPTURE(text);
    Config config;
    applySetting(*debug, text, &config);
    CHECK(logLevelNamed(text) == config.logLevel);
  }
  CHECK(logLevelNamed(nullptr) == Config{}.logLevel);
}
