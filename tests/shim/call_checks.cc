#include "call_checks.h"

#include <catch2/catch.hpp>
#include <nccl.h>

#include <regex>

namespace shimtest {

bool isSetupTraffic(const Call& call) {
  static const std::set<std::string> kQueries = {"ncclCommUserRank", "ncclCommCount", "ncclCommCuDevice",
                                                 "ncclCommGetAsyncError", "ncclGetErrorString",
                                                 "ncclGroupStart", "ncclGroupEnd"};
  if (kQueries.count(call.name) != 0) return true;
  // The handshake all-gathers bytes (ncclUint8) of its records.
  return call.name == "ncclAllGather" && call.get("datatype") == std::to_string(static_cast<int>(ncclUint8));
}

StepView viewOf(const Segment& segment) {
  StepView view;
  for (const Call& call : segment.calls) {
    if (view.caller == nullptr && call.name == segment.expected.name) view.caller = &call;
    else (view.caller == nullptr ? view.before : view.after).push_back(&call);
  }
  return view;
}

std::set<std::string> queriedComms(const Segment& segment) {
  std::set<std::string> comms;
  const StepView view = viewOf(segment);
  for (const auto* list : {&view.before, &view.after}) {
    for (const Call* call : *list) {
      if (call->name == "ncclCommCount") comms.insert(call->get("comm"));
    }
  }
  return comms;
}

namespace {

void checkStep(const Segment& segment, const Outputs& outputs) {
  INFO("step '" << segment.label << "', expected: " << segment.expected.raw);
  const StepView view = viewOf(segment);
  REQUIRE(view.caller != nullptr);  // the call reached NCCL
  INFO("NCCL saw: " << view.caller->raw);
  for (const auto& [key, value] : segment.expected.args) {
    INFO("argument " << key);
    CHECK(view.caller->get(key) == value);
  }
  for (const auto* list : {&view.before, &view.after}) {
    for (const Call* call : *list) {
      INFO("other call: " << call->raw);
      CHECK(isSetupTraffic(*call));  // a second copy of the caller's call would fail here
    }
  }
  const auto output = outputs.find(segment.label);
  REQUIRE(output != outputs.end());
  INFO("the driver saw: " << output->second.raw);
  for (const auto& [key, value] : output->second.args) {
    INFO("field " << key);
    CHECK(view.caller->get(key) == value);  // result, made, value: what NCCL gave back
  }
}

}  // namespace

std::vector<Segment> checkSteps(const ChildResult& result) {
  INFO("stdout:\n" << result.out << "stderr:\n" << result.err);
  REQUIRE_FALSE(result.timedOut);
  REQUIRE(result.exitCode == 0);
  REQUIRE(linesWith(result.out, {"done"}).size() == 1);
  std::vector<Segment> segments = parseLog(result.log);
  REQUIRE_FALSE(segments.empty());
  CHECK(segments.front().label != "");  // nothing reached NCCL before the first step
  CHECK(linesWith(result.log, {" dead=1"}).empty());  // nothing used a destroyed communicator
  const Outputs outputs = parseOutputs(result.out);
  for (const auto& [label, output] : outputs) {
    INFO("the driver made step '" << label << "'");
    if (output.has("result")) CHECK(findSegment(segments, label) != nullptr);  // and marked it in the log
  }
  for (const Segment& segment : segments) checkStep(segment, outputs);
  return segments;
}

void checkSetupPlacement(const std::vector<Segment>& segments, const std::set<std::string>& setupLabels) {
  for (const std::string& label : setupLabels) {
    INFO("setup expected in step '" << label << "'");
    CHECK(findSegment(segments, label) != nullptr);
  }
  for (const Segment& segment : segments) {
    INFO("step '" << segment.label << "'\n" << [&] {
      std::string text;
      for (const Call& call : segment.calls) text += "  " + call.raw + "\n";
      return text;
    }());
    const StepView view = viewOf(segment);
    if (view.caller == nullptr) continue;  // reported by checkSteps
    if (setupLabels.count(segment.label) == 0) {
      CHECK(view.trafficCount() == 0);
      continue;
    }
    const std::set<std::string> queried = queriedComms(segment);
    CHECK_FALSE(queried.empty());
    if (view.caller->name == "ncclAllReduce") {
      CHECK(view.after.empty());
      CHECK(queried.count(view.caller->get("comm")) == 1);
    } else {
      CHECK(view.before.empty());
    }
    for (const std::string& made : split(view.caller->get("made"), ',')) {
      if (made != "0x0") CHECK(queried.count(made) == 1);
    }
  }
}

std::vector<std::string> carLines(const std::string& err, const std::string& level) {
  // host:pid:tid [dev] (file:line )NCCL-CAR LEVEL text; WARN lines carry file and line.
  const std::regex format("^[^ :]+:[0-9]+:[0-9]+ \\[-?[0-9]+\\] ([^ ]+:[0-9]+ )?NCCL-CAR " + level + " .*");
  std::vector<std::string> found;
  for (const std::string& line : splitLines(err)) {
    if (std::regex_match(line, format)) found.push_back(line);
  }
  return found;
}

std::vector<std::string> infoAbout(const std::string& err, const std::string& comm, const std::string& what) {
  std::vector<std::string> found;
  const std::string prefix = "NCCL-CAR INFO comm " + comm + " rank ";
  for (const std::string& line : carLines(err, "INFO")) {
    const std::size_t start = line.find(prefix);
    const std::size_t at = line.find(" " + what + " ");
    if (start != std::string::npos && at != std::string::npos) found.push_back(line.substr(at + what.size() + 2));
  }
  return found;
}

std::string onlyInfo(const std::string& err, const std::string& comm, const std::string& what) {
  const std::vector<std::string> found = infoAbout(err, comm, what);
  INFO("comm " << comm << " said '" << what << "' " << found.size() << " time(s)");
  REQUIRE(found.size() == 1);
  return found[0];
}

std::vector<std::string> madeComms(const Outputs& outputs, const std::string& label) {
  const auto output = outputs.find(label);
  return output == outputs.end() ? std::vector<std::string>{} : split(output->second.get("made"), ',');
}

}  // namespace shimtest
