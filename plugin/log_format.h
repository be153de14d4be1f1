// The shape of the library's log lines, in one place: how a line starts (host, pid, thread,
// device, NCCL-CAR and the level), the level names NCCL_CAR_DEBUG takes, and the text of every
// line tools/nccl-car reads (tools/nccl_car_cli/logparse.py). The parser's tests read lines
// made here (`nccl_car_query log-samples`), so a change on either side fails them.
//
// Every format function's comment shows what it writes as `e.g. "..."`: each is a piece of a
// line `nccl_car_query log-samples` prints, checked by tests/cli/test_log_lines_docs.py with
// the example lines of README.md and docs/.
//
// libc only, no allocation, no exceptions: the LD_AUDIT module (shim/exports/nccl_car_audit.cc)
// runs inside the dynamic loader and writes its lines with it too. Every format function works
// like snprintf: it writes at most `size` bytes, the NUL included, and returns the length of
// the whole text, so that a caller can measure first (out null, size 0). log.h's logText
// turns one into a std::string.
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

namespace car {

enum class LogLevel { Warn = 0, Info = 1, Trace = 2 };
constexpr int kLogLevelCount = 3;

// "WARN", "INFO", "TRACE": how lines show the level and how NCCL_CAR_DEBUG names it.
constexpr const char* logLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Info: return "INFO";
    case LogLevel::Trace: return "TRACE";
  }
  return "?";
}

// NCCL_CAR_DEBUG's value, in any case, as the settings table reads it (plugin/settings_table.cc,
// a choice among logLevelName's names). Unset or not a level: WARN, the default.
inline LogLevel logLevelNamed(const char* text) {
  for (int level = 0; text != nullptr && level < kLogLevelCount; ++level) {
    if (strcasecmp(text, logLevelName(static_cast<LogLevel>(level))) == 0) return static_cast<LogLevel>(level);
  }
  return LogLevel::Warn;
}

// Every line of the audit module starts its text with this.
constexpr const char kAuditTag[] = "audit: ";

// One kernel's or one forward reason's count, for formatCallCounts.
struct NamedCount {
  const char* name;
  unsigned long long count;
};

namespace logformat {

// Adds printf-style text at out + *used, writing only what fits (the text stays NUL-ended);
// *used grows by the whole text's length, as snprintf counts.
__attribute__((format(printf, 4, 5))) inline void append(char* out, size_t size, size_t* used, const char* format,
                                                          ...) {
  char* at = out != nullptr && *used < size ? out + *used : nullptr;
  va_list args;
  va_start(args, format);
  const int length = vsnprintf(at, at != nullptr ? size - *used : 0, format, args);
  va_end(args);
  if (length > 0) *used += static_cast<size_t>(length);
}

inline const char* baseName(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

}  // namespace logformat

// How every line starts, as NCCL starts its own: host, pid, thread id, [device] (-1: none),
// e.g. "node-a:100:101 [0] NCCL-CAR INFO ". WARN lines also say where they come from,
// e.g. "node-b:300:301 [0] handshake.cc:99 NCCL-CAR WARN ".
inline size_t formatLineStart(char* out, size_t size, const char* host, long pid, long tid, int device,
                              LogLevel level, const char* file, int line) {
  size_t used = 0;
  logformat::append(out, size, &used, "%s:%ld:%ld [%d] ", host, pid, tid, device);
  if (level == LogLevel::Warn) logformat::append(out, size, &used, "%s:%d ", logformat::baseName(file), line);
  logformat::append(out, size, &used, "NCCL-CAR %s ", logLevelName(level));
  return used;
}

// How every line about a communicator names it, e.g. "comm 0x55d0c0a0 rank 0/2"; rank ?/?
// before the size is known (ranks 0).
inline size_t formatCommName(char* out, size_t size, const void* comm, int rank, int ranks) {
  size_t used = 0;
  const unsigned long address = static_cast<unsigned long>(reinterpret_cast<uintptr_t>(comm));
  if (ranks == 0) logformat::append(out, size, &used, "comm 0x%lx rank ?/?", address);
  else logformat::append(out, size, &used, "comm 0x%lx rank %d/%d", address, rank, ranks);
  return used;
}

// A communicator our kernels take, once its ranks agreed, e.g. "comm 0x55d0c0a0 rank 0/2 setup:
// eligible (ipc peers, full nvlink, sm_90, up to 8388608 bytes; holds 50337280 bytes; from call
// 0)": the links (formatLinks: "full nvlink", or "pcie (...)" with what the set-up found), the
// largest all-reduce taken, the GPU memory the communicator holds for it (its buffer block),
// and the first of its calls our kernels may take (the calls before it went to NCCL).
// computeCapability 0: the ranks' GPUs differ ("sm_mixed"). A `note` that is not empty
// follows after "; " (a PCIe communicator's: formatPcieTuning).
inline size_t formatSetupEligible(char* out, size_t size, const char* comm, bool sameProcess, const char* links,
                                  int computeCapability, unsigned long long maxBytes, unsigned long long heldBytes,
                                  unsigned long long firstCall, const char* note) {
  size_t used = 0;
  logformat::append(out, size, &used, "%s setup: eligible (%s peers, %s, sm_", comm,
                    sameProcess ? "same-process" : "ipc", links);
  if (computeCapability == 0) logformat::append(out, size, &used, "mixed");
  else logformat::append(out, size, &used, "%d", computeCapability);
  logformat::append(out, size, &used, ", up to %llu bytes; holds %llu bytes; from call %llu)", maxBytes, heldBytes,
                    firstCall);
  if (note != nullptr && note[0] != '\0') logformat::append(out, size, &used, "; %s", note);
  return used;
}

// The links of an eligible communicator in its setup: line, e.g. "full nvlink", or e.g.
// "pcie (every pair peer-to-peer, PXB at most)", with "; NVLink on 2 of 6 pairs" before the
// parenthesis closes where some of the `pairs` pairs of ranks have it. longestPath: NCCL's
// name of the longest PCIe path between two of its ranks ("PIX", "PXB", "PHB", "SYS").
inline size_t formatLinks(char* out, size_t size, bool fullNvlink, const char* longestPath, int nvlinkPairs,
                          int pairs) {
  size_t used = 0;
  if (fullNvlink) {
    logformat::append(out, size, &used, "full nvlink");
    return used;
  }
  logformat::append(out, size, &used, "pcie (every pair peer-to-peer, %s at most", longestPath);
  if (nvlinkPairs > 0) logformat::append(out, size, &used, "; NVLink on %d of %d pairs", nvlinkPairs, pairs);
  logformat::append(out, size, &used, ")");
  return used;
}

// What the setup: line of an eligible PCIe communicator of `ranks` ranks adds after its
// parenthesis: where the choice table has rows measured for that case (`measured`), e.g.
// "pcie tuned: the choice table's rows for 2 ranks over PCIe decide; sizes they do not cover
// go to NCCL (untuned)", else the kernel NCCL_CAR_ALGO forces (`forced`), which is what made
// it eligible (how `nccl-car tune` measures an unmeasured machine), e.g. "pcie forced:
// NCCL_CAR_ALGO=1shot takes the all-reduces it can run; every other call goes to NCCL
// (untuned) until `nccl-car tune` has measured 2 ranks over PCIe on this machine".
inline size_t formatPcieTuning(char* out, size_t size, int ranks, bool measured, const char* forced) {
  size_t used = 0;
  if (measured) {
    logformat::append(out, size, &used,
                      "pcie tuned: the choice table's rows for %d ranks over PCIe decide; sizes they do not cover "
                      "go to NCCL (untuned)", ranks);
  } else {
    logformat::append(out, size, &used,
                      "pcie forced: NCCL_CAR_ALGO=%s takes the all-reduces it can run; every other call goes to "
                      "NCCL (untuned) until `nccl-car tune` has measured %d ranks over PCIe on this machine",
                      forced != nullptr ? forced : "auto", ranks);
  }
  return used;
}

// Why a PCIe communicator of `ranks` ranks that nothing measured is not eligible (its
// setup: line's reason, formatSetupNotEligible): what the set-up found, as an eligible line
// says it (the peers, formatLinks' links, the GPUs), and the command that makes it eligible,
// e.g. "pcie untuned (same-process peers, pcie (every pair peer-to-peer, PXB at most), sm_89):
// every call goes to NCCL (untuned) until `nccl-car tune` has measured 4 ranks over PCIe on
// this machine".
inline size_t formatPcieUntuned(char* out, size_t size, bool sameProcess, const char* links, int computeCapability,
                                int ranks) {
  size_t used = 0;
  logformat::append(out, size, &used, "pcie untuned (%s peers, %s, sm_", sameProcess ? "same-process" : "ipc", links);
  if (computeCapability == 0) logformat::append(out, size, &used, "mixed");
  else logformat::append(out, size, &used, "%d", computeCapability);
  logformat::append(out, size, &used,
                    "): every call goes to NCCL (untuned) until `nccl-car tune` has measured %d ranks over PCIe on "
                    "this machine", ranks);
  return used;
}

// e.g. "comm 0x1234 rank 1/4 setup: not eligible: ranks span 2 hosts"
inline size_t formatSetupNotEligible(char* out, size_t size, const char* comm, const char* reason) {
  size_t used = 0;
  logformat::append(out, size, &used, "%s setup: not eligible: %s", comm, reason);
  return used;
}

// Every kernel in the order given; of the forward reasons, those that occurred, e.g. "taken
// 1shot=0 2shot=3 allgather=0 reducescatter=0 1stage=0 2stage=0 (3145728 bytes) forwarded 0".
inline size_t formatCallCounts(char* out, size_t size, const NamedCount* taken, int kernels,
                               unsigned long long takenBytes, const NamedCount* forwarded, int reasons) {
  size_t used = 0;
  logformat::append(out, size, &used, "taken");
  for (int k = 0; k < kernels; ++k) logformat::append(out, size, &used, " %s=%llu", taken[k].name, taken[k].count);
  unsigned long long forwardedTotal = 0;
  for (int r = 0; r < reasons; ++r) forwardedTotal += forwarded[r].count;
  logformat::append(out, size, &used, " (%llu bytes) forwarded %llu", takenBytes, forwardedTotal);
  const char* separator = " (";
  for (int r = 0; r < reasons; ++r) {
    if (forwarded[r].count == 0) continue;
    logformat::append(out, size, &used, "%s%s=%llu", separator, forwarded[r].name, forwarded[r].count);
    separator = " ";
  }
  if (forwardedTotal != 0) logformat::append(out, size, &used, ")");
  return used;
}

// A communicator's counts, once, when it is destroyed, e.g. "comm 0x1234 rank 1/4 released:
// taken 1shot=0 2shot=0 allgather=0 reducescatter=0 1stage=0 2stage=0 (0 bytes) forwarded 20
// (ineligible-comm=20)".
inline size_t formatReleased(char* out, size_t size, const char* comm, const char* counts) {
  size_t used = 0;
  logformat::append(out, size, &used, "%s released: %s", comm, counts);
  return used;
}

// The counts of a communicator never destroyed (JAX never destroys its own), read from host
// counters when the process exits, e.g. "comm 0x7f00cc00 rank 1/2 alive at exit: taken
// 1shot=7": formatCallCounts after the communicator's name.
inline size_t formatAliveAtExit(char* out, size_t size, const char* comm, const char* counts) {
  size_t used = 0;
  logformat::append(out, size, &used, "%s alive at exit: %s", comm, counts);
  return used;
}

// One call our kernels took (TRACE), e.g. "rank 0 all-reduce 131072 x bf16 sum (262144 bytes)
// -> 1shot", "rank 0 all-gather 4096 x bf16 (8192 bytes) -> allgather": NCCL's count, the
// bytes of one rank's part for all-gather and reduce-scatter; op null: a collective without one.
inline size_t formatTakenCall(char* out, size_t size, int rank, const char* collective, unsigned long long count,
                              const char* type, const char* op, unsigned long long bytes, const char* kernel) {
  size_t used = 0;
  logformat::append(out, size, &used, "rank %d %s %llu x %s", rank, collective, count, type);
  if (op != nullptr) logformat::append(out, size, &used, " %s", op);
  logformat::append(out, size, &used, " (%llu bytes) -> %s", bytes, kernel);
  return used;
}

// The first NCCL call of a process reached the library, e.g. "real NCCL found as the next
// library (RTLD_NEXT) (libnccl-car.so built against nccl.h 2.32.3)".
inline size_t formatRealNcclFound(char* out, size_t size, const char* origin, const char* headerVersion) {
  size_t used = 0;
  logformat::append(out, size, &used, "real NCCL found as %s (libnccl-car.so built against nccl.h %s)", origin,
                    headerVersion);
  return used;
}

// After kAuditTag, a load of NCCL the audit module turned to the library, e.g.
// "/usr/lib/x86_64-linux-gnu/libnccl.so.2 is served by /opt/nccl-car/libnccl-car.so; the real
// NCCL is /usr/lib/x86_64-linux-gnu/libnccl.so.2". real null: not known yet.
inline size_t formatAuditServed(char* out, size_t size, const char* file, const char* ours, const char* real) {
  size_t used = 0;
  logformat::append(out, size, &used, "%s is served by %s; the real NCCL is %s", file, ours,
                    real != nullptr ? real : "not known yet");
  return used;
}

// NCCL_CAR_DETERMINISTIC's WARN, once per communicator and reason, for a reduction that goes
// to NCCL, e.g. "comm 0x7f3a1c002e00 rank 0/8: NCCL_CAR_DETERMINISTIC: reductions forwarded to
// NCCL as too-large (first: all-reduce 4194305 x bf16 sum) get NCCL's result".
inline size_t formatInvarianceEnds(char* out, size_t size, const char* comm, const char* reason,
                                   const char* collective, unsigned long long count, const char* type,
                                   const char* op) {
  size_t used = 0;
  logformat::append(out, size, &used,
                    "%s: NCCL_CAR_DETERMINISTIC: reductions forwarded to NCCL as %s (first: %s %llu x %s %s) get "
                    "NCCL's result, whose bits may change with the message size and NCCL's algorithm: NCCL "
                    "promises no invariance; said once per communicator and reason",
                    comm, reason, collective, count, type, op);
  return used;
}

}  // namespace car
