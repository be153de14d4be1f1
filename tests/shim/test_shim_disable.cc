// NCCL_CAR_DISABLE=1: the preloaded library is a pure pass-through. It prints nothing, and
// NCCL sees exactly the calls it sees without the preload.
#include <catch2/catch.hpp>

#include <map>
#include <regex>

#include "call_checks.h"

using namespace shimtest;

namespace {

// Addresses differ from run to run: number them by first appearance instead. Thread ids go.
std::string normalized(const std::string& text) {
  static const std::regex address("0x[0-9a-f]+");
  static const std::regex tid(" tid=[0-9]+");
  const std::string withoutTids = std::regex_replace(text, tid, "");
  std::map<std::string, std::string> names;
  std::string result;
  auto last = withoutTids.cbegin();
  for (std::sregex_iterator it(withoutTids.begin(), withoutTids.end(), address), end; it != end; ++it) {
    result.append(last, withoutTids.cbegin() + it->position());
    const std::string value = it->str();
    if (value == "0x0") {
      result += value;
    } else {
      auto [entry, added] = names.emplace(value, "P" + std::to_string(names.size()));
      result += entry->second;
    }
    last = withoutTids.cbegin() + it->position() + it->length();
  }
  result.append(last, withoutTids.cend());
  return result;
}

}  // namespace

TEST_CASE("disable: NCCL_CAR_DISABLE=1 makes the shim a silent pass-through", "[shim][disable]") {
  const std::vector<std::string> args = GENERATE(as<std::vector<std::string>>{},
      std::vector<std::string>{"lifecycle"}, std::vector<std::string>{"groups"},
      std::vector<std::string>{"allreduce-matrix", "rank1"}, std::vector<std::string>{"allreduce-matrix", "initall"},
      std::vector<std::string>{"nonhooked"});
  const std::string value = GENERATE(as<std::string>{}, "1", "yes");
  INFO("shim_driver " << args[0] << (args.size() > 1 ? " " + args[1] : "") << ", NCCL_CAR_DISABLE=" << value);

  const ChildResult plain = runDriver(args, {}, /*preload=*/false);
  const ChildResult disabled = runDriver(args, {"NCCL_CAR_DISABLE=" + value});
  const std::vector<Segment> segments = checkSteps(disabled);
  checkSetupPlacement(segments, {});  // not a single call of its own
  CHECK(disabled.err.empty());
  CHECK(normalized(disabled.log) == normalized(plain.log));
  CHECK(normalized(disabled.out) == normalized(plain.out));

  // The comparison can tell a difference: with the shim at work, NCCL sees its setup calls.
  const ChildResult active = runDriver(args);
  REQUIRE(active.exitCode == 0);
  CHECK(normalized(active.log) != normalized(plain.log));
}
