// nccl_car_query: the library's own answers for tools/nccl-car, as one line of JSON on
// stdout. Built from the same static plugin library as libnccl-car.so, so the tool repeats
// neither the settings' parsing, nor the policy, nor the log format; a separate program, so that the preloaded
// library exports nothing but its nccl* hooks.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "decision_query.h"
#include "log_samples.h"
#include "settings_dump.h"
#include "table_query.h"

extern char** environ;

namespace {

constexpr const char* kUsage = R"(usage:
  nccl_car_query settings
      every NCCL_CAR_* setting (type, range, default, whether ranks must agree, help) and
      what this environment sets, as the library reads it
  nccl_car_query policy
      what the policy works with: the collectives it decides, the most ranks, the kernels,
      the element types and ops, the reasons a call goes to NCCL
  nccl_car_query decide --ranks N [--full-nvlink] [--compute-capability CC]
                        [--collective NAME] [--type TYPE|other] [--op OP|other]
                        [--table PATH --fingerprint HEX] BYTES...
      what the library does with a call of each size on such a communicator (without
      --full-nvlink: the PCIe case), under this
      environment's settings (default: all-reduce, bf16, sum; NAME, TYPE and OP as `policy`
      names them; BYTES the whole message: every rank's part of an all-gather or a
      reduce-scatter), and, for each collective, which types and ops it takes there at
      all; with a choice table that the machine of that fingerprint would follow
  nccl_car_query fingerprint [--device D] [--nccl-version CODE]
      this machine as a choice table sees it: its description, fingerprint and the table's
      default path (needs a GPU)
  nccl_car_query table PATH --fingerprint HEX
      whether the library would follow the choice table at PATH on the machine of that
      fingerprint (why not, if not), and its rows
  nccl_car_query log-samples
      log lines of every kind nccl-car run reads, made by the library's formatter, each with
      the facts it was made from
exit codes: 0 answered, 2 usage error, 3 the GPU cannot be asked (fingerprint)
)";

// decide's --table PATH --fingerprint HEX: taken out of `rest` and loaded into *config.
bool takeTable(std::vector<std::string>& rest, car::Config* config, std::string* error) {
  const auto at = std::find(rest.begin(), rest.end(), "--table");
  if (at == rest.end()) return true;
  const std::size_t i = static_cast<std::size_t>(at - rest.begin());
  if (i + 3 >= rest.size() || rest[i + 2] != "--fingerprint") return *error = "--table PATH --fingerprint HEX", false;
  if (!carquery::loadTableInto(rest[i + 1], rest[i + 3], config, error)) return *error = "--table: " + *error, false;
  rest.erase(at, at + 4);
  return true;
}

int usageError(const std::string& why) {
  std::fprintf(stderr, "nccl_car_query: %s\n%s", why.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usageError("no command given");
  carquery::JsonWriter json;
  if (args[0] == "settings") {
    if (args.size() > 1) return usageError("settings takes no arguments");
    carquery::writeSettings(json, &car::processEnvironment, environ);
  } else if (args[0] == "policy" || args[0] == "log-samples") {
    if (args.size() > 1) return usageError(args[0] + " takes no arguments");
    if (args[0] == "policy") carquery::writePolicy(json, car::parseConfig(&car::processEnvironment, nullptr));
    else carquery::writeLogSamples(json);
  } else if (args[0] == "decide") {
    car::Config config = car::parseConfig(&car::processEnvironment, nullptr);
    std::vector<std::string> rest(args.begin() + 1, args.end());
    std::string error;
    if (!takeTable(rest, &config, &error) || !carquery::writeDecisions(json, rest, config, &error)) {
      return usageError(error);
    }
  } else if (args[0] == "table") {
    std::string error;
    if (!carquery::writeTable(json, {args.begin() + 1, args.end()}, &error)) return usageError(error);
  } else if (args[0] == "fingerprint") {
    std::string error;
    bool askable = true;
    if (!carquery::writeFingerprint(json, {args.begin() + 1, args.end()}, &askable, &error)) {
      if (askable) return usageError(error);
      std::fprintf(stderr, "nccl_car_query: %s\n", error.c_str());
      return 3;
    }
  } else if (args[0] == "--help" || args[0] == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  } else {
    return usageError("unknown command '" + args[0] + "'");
  }
  std::printf("%s\n", json.text().c_str());
  return 0;
}
