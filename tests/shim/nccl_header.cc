#include "nccl_header.h"

#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace shimtest {

std::set<std::string> ncclFunctionsDeclaredIn(const std::string& text) {
  const std::string code = std::regex_replace(text, std::regex("/\\*[\\s\\S]*?\\*/|//[^\\n]*"), " ");
  // A return type (words, stars), then the name and "(": "ncclResult_t  ncclSend(",
  // "const char* ncclGetErrorString(". Preprocessor lines start with '#' and never match.
  const std::regex declaration("(^|\\n)[ \\t]*[A-Za-z_][A-Za-z0-9_ \\t]*[ \\t*]+(nccl[A-Za-z0-9_]*)[ \\t]*\\(");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), declaration); it != std::sregex_iterator(); ++it) {
    names.insert((*it)[2]);
  }
  return names;
}

std::set<std::string> ncclFunctionsOfHeader(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ncclFunctionsDeclaredIn(text.str());
}

}  // namespace shimtest
