// The rules every run through the shim must keep, as Catch2 checks:
//  - each step's call reaches NCCL exactly once with the caller's exact arguments, and the
//    caller gets back exactly what NCCL returned and produced;
//  - the only other calls NCCL sees are the shim's own setup traffic (queries and the
//    handshake's grouped all-gathers), and only where set-up happens (docs/design.md,
//    "When set-up happens").
#pragma once

#include <set>
#include <string>
#include <vector>

#include "call_log.h"
#include "child_process.h"

namespace shimtest {

// A call the shim itself makes while setting a communicator up.
bool isSetupTraffic(const Call& call);

struct StepView {
  const Call* caller = nullptr;       // the first call named like the expected one
  std::vector<const Call*> before;    // setup traffic before it
  std::vector<const Call*> after;     // and after it
  std::size_t trafficCount() const { return before.size() + after.size(); }
};
StepView viewOf(const Segment& segment);

// Communicators the shim queried (ncclCommCount) in this step: the ones it set up.
std::set<std::string> queriedComms(const Segment& segment);

// The run ended well and every step keeps the first rule. Returns the parsed log.
std::vector<Segment> checkSteps(const ChildResult& result);

// Setup traffic appears in exactly the steps named, for the communicators they make or use:
// after the caller's call (init, group end), or before it (a first all-reduce).
void checkSetupPlacement(const std::vector<Segment>& segments, const std::set<std::string>& setupLabels);

// The shim's log lines at one level ("WARN", "INFO"), in NCCL's format.
std::vector<std::string> carLines(const std::string& err, const std::string& level);

// What the shim said at INFO about one communicator ("comm 0x.. rank r/n <what> <text>"):
// the text after `what` of each such line.
std::vector<std::string> infoAbout(const std::string& err, const std::string& comm, const std::string& what);

// The one such line's text; requires exactly one (a set-up's verdict, a release's counts).
std::string onlyInfo(const std::string& err, const std::string& comm, const std::string& what);

// The communicator(s) a step produced, as the driver printed them.
std::vector<std::string> madeComms(const Outputs& outputs, const std::string& label);

}  // namespace shimtest
