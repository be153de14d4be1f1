// nccl_car_query: the library's own answers for tools/nccl-car, as one line of JSON on
// stdout. Built from the same static plugin library as libnccl-car.so, so the tool repeats
// neither the settings' parsing, nor the policy, nor the log format; a separate program, so that the preloaded
// library exports nothing but its nccl* hooks.
#include <cstdio>
#include <string>
#include <vector>

#include "decision_query.h"
#include "log_samples.h"
#include "settings_dump.h"

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
                        [--collective NAME] [--type TYPE|other] [--op OP|other] BYTES...
      what the library does with a call of each size on such a communicator, under this
      environment's settings (default: all-reduce, bf16, sum; NAME, TYPE and OP as `policy`
      names them; BYTES the whole message: every rank's part of an all-gather or a
      reduce-scatter), and which types and ops it takes there at all
  nccl_car_query log-samples
      log lines of every kind nccl-car run reads, made by the library's formatter, each with
      the facts it was made from
exit codes: 0 answered, 2 usage error
)";

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
    if (args[0] == "policy") carquery::writePolicy(json);
    else carquery::writeLogSamples(json);
  } else if (args[0] == "decide") {
    const car::Config config = car::parseConfig(&car::processEnvironment, nullptr);
    std::string error;
    if (!carquery::writeDecisions(json, {args.begin() + 1, args.end()}, config, &error)) return usageError(error);
  } else if (args[0] == "--help" || args[0] == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  } else {
    return usageError("unknown command '" + args[0] + "'");
  }
  std::printf("%s\n", json.text().c_str());
  return 0;
}
