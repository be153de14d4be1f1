// `nccl_car_query decide`: what plugin/policy.cc's planCall does with calls (all-reduces, or
// `--collective NAME`) of the given sizes on a communicator of the given facts, under this
// environment's settings;
// `nccl_car_query policy`: the names and limits the policy works with.
#pragma once

#include <string>
#include <vector>

#include "config.h"
#include "json_writer.h"

namespace carquery {

// Parses the arguments after "decide" and writes the decisions (of the question's collective),
// and, for every collective, which types and ops the policy takes on that communicator at all:
// "taken": {collective: {"types" (with the question's op), "ops" (with its type; null for a
// collective without an op)}}. Returns false, with *error saying what is wrong with the
// arguments, when there is nothing to answer.
bool writeDecisions(JsonWriter& json, const std::vector<std::string>& args, const car::Config& config,
                    std::string* error);

// Writes {"collectives", "max_bytes": {collective: the largest message taken under `config`},
// "pull_buffers" (whether `config` gives the pull kernels buffers), "max_ranks", "algorithms",
// "kernels": [{"name", "collective", "family", "copies_bits"}], "type_families": [{"name",
// "types"}], "element_types": [{"name", "bytes"}], "ops", "forward_reasons"}, from the
// library's own tables and names.
void writePolicy(JsonWriter& json, const car::Config& config);

}  // namespace carquery
