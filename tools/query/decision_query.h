// `nccl_car_query decide`: what plugin/policy.cc's planCall does with all-reduces of the
// given sizes on a communicator of the given facts, under this environment's settings.
#pragma once

#include <string>
#include <vector>

#include "config.h"
#include "json_writer.h"

namespace carquery {

// Parses the arguments after "decide" and writes the decisions. Returns false, with *error
// saying what is wrong with the arguments, when there is nothing to answer.
bool writeDecisions(JsonWriter& json, const std::vector<std::string>& args, const car::Config& config,
                    std::string* error);

}  // namespace carquery
