#include "call_log.h"

#include <sstream>

namespace shimtest {

bool Call::has(const std::string& key) const {
  for (const auto& arg : args) {
    if (arg.first == key) return true;
  }
  return false;
}

std::string Call::get(const std::string& key) const {
  for (const auto& arg : args) {
    if (arg.first == key) return arg.second;
  }
  return "";
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

std::vector<std::string> splitLines(const std::string& text) { return split(text, '\n'); }

Call parseCall(const std::string& line) {
  Call call;
  call.raw = line;
  const std::vector<std::string> tokens = split(line, ' ');
  if (tokens.empty()) return call;
  call.name = tokens[0];
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    const std::size_t equals = tokens[i].find('=');
    if (equals == std::string::npos) call.args.emplace_back(tokens[i], "");
    else call.args.emplace_back(tokens[i].substr(0, equals), tokens[i].substr(equals + 1));
  }
  return call;
}

std::vector<Segment> parseLog(const std::string& log) {
  std::vector<Segment> segments;
  for (const std::string& line : splitLines(log)) {
    if (line.rfind("@ ", 0) == 0) {
      const std::size_t labelEnd = line.find(' ', 2);
      Segment segment;
      segment.label = line.substr(2, labelEnd - 2);
      segment.expected = parseCall(labelEnd == std::string::npos ? "" : line.substr(labelEnd + 1));
      segments.push_back(std::move(segment));
      continue;
    }
    if (segments.empty()) segments.emplace_back();
    segments.back().calls.push_back(parseCall(line));
  }
  return segments;
}

const Segment* findSegment(const std::vector<Segment>& segments, const std::string& label) {
  for (const Segment& segment : segments) {
    if (segment.label == label) return &segment;
  }
  return nullptr;
}

Outputs parseOutputs(const std::string& out) {
  Outputs outputs;
  for (const std::string& line : splitLines(out)) {
    Call call = parseCall(line);
    Call& merged = outputs[call.name];
    merged.name = call.name;
    merged.raw += line + "\n";
    merged.args.insert(merged.args.end(), call.args.begin(), call.args.end());
  }
  return outputs;
}

std::vector<std::string> linesWith(const std::string& text, const std::vector<std::string>& needles) {
  std::vector<std::string> found;
  for (const std::string& line : splitLines(text)) {
    bool all = true;
    for (const std::string& needle : needles) all = all && line.find(needle) != std::string::npos;
    if (all) found.push_back(line);
  }
  return found;
}

}  // namespace shimtest
