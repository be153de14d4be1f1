// Reading what a run left: the stand-in's call log cut into the driver's steps, the
// driver's stdout, and the shim's NCCL-CAR lines on stderr.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace shimtest {

// "ncclName key=value ..." (or, on the driver's stdout, "label key=value ...").
struct Call {
  std::string name;
  std::vector<std::pair<std::string, std::string>> args;
  std::string raw;
  bool has(const std::string& key) const;
  std::string get(const std::string& key) const;  // "" when absent
};

Call parseCall(const std::string& line);

// The log between one driver marker ("@ label <expected call>") and the next.
struct Segment {
  std::string label;  // "" for calls before the first marker
  Call expected;
  std::vector<Call> calls;
};

std::vector<Segment> parseLog(const std::string& log);
const Segment* findSegment(const std::vector<Segment>& segments, const std::string& label);

// The driver's stdout by label; the fields of several lines with one label are merged.
using Outputs = std::map<std::string, Call>;
Outputs parseOutputs(const std::string& out);

std::vector<std::string> splitLines(const std::string& text);
std::vector<std::string> split(const std::string& text, char separator);
// Lines of `text` that contain every needle.
std::vector<std::string> linesWith(const std::string& text, const std::vector<std::string>& needles);

}  // namespace shimtest
