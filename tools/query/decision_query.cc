#include "decision_query.h"

#include <optional>

#include "choice_table.h"
#include "policy.h"

namespace carquery {
namespace {

// The reason given for every call under NCCL_CAR_DISABLE=1, which no counter ever shows: a
// disabled library counts nothing.
constexpr const char* kDisabled = "disabled";

struct Question {
  car::CommunicatorFacts comm;
  car::CallFacts call;
  std::string typeName = "bf16";
  std::vector<std::uint64_t> sizes;  // bytes
};

bool number(const std::string& text, std::uint64_t* value) { return car::parseUnsigned(text.c_str(), value); }

// "other" stands for a type the library has no kernel for.
bool elementType(const std::string& name, std::optional<car::ElementType>* type) {
  for (int t = 0; t < car::kElementTypeCount; ++t) {
    const auto candidate = static_cast<car::ElementType>(t);
    if (name == car::elementTypeName(candidate)) return *type = candidate, true;
  }
  if (name == "other") return *type = std::nullopt, true;
  return false;
}

bool collective(const std::string& name, car::Collective* collective) {
  for (int c = 0; c < car::kCollectiveCount; ++c) {
    const auto candidate = static_cast<car::Collective>(c);
    if (name == car::collectiveName(candidate)) return *collective = candidate, true;
  }
  return false;
}

bool reduceOp(const std::string& name, std::optional<car::ReduceOp>* op) {
  for (int o = 0; o < car::kReduceOpCount; ++o) {
    const auto candidate = static_cast<car::ReduceOp>(o);
    if (name == car::reduceOpName(candidate)) return *op = candidate, true;
  }
  if (name == "other") return *op = std::nullopt, true;
  return false;
}

bool parse(const std::vector<std::string>& args, Question* question, std::string* error) {
  question->call.op = car::ReduceOp::Sum;
  question->call.type = car::ElementType::BFloat16;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const bool hasValue = i + 1 < args.size();
    std::uint64_t value = 0;
    if (arg == "--full-nvlink") {
      question->comm.fullNvlink = true;
    } else if (arg == "--ranks" && hasValue && number(args[i + 1], &value) && value <= 1024) {
      question->comm.ranks = static_cast<int>(value);
      ++i;
    } else if (arg == "--compute-capability" && hasValue && number(args[i + 1], &value) && value <= 1000) {
      question->comm.computeCapability = static_cast<int>(value);
      ++i;
    } else if (arg == "--type" && hasValue && elementType(args[i + 1], &question->call.type)) {
      question->typeName = args[++i];
    } else if (arg == "--op" && hasValue && reduceOp(args[i + 1], &question->call.op)) {
      ++i;
    } else if (arg == "--collective" && hasValue && collective(args[i + 1], &question->call.collective)) {
      ++i;
    } else if (number(arg, &value)) {
      question->sizes.push_back(value);
    } else {
      *error = "cannot read '" + arg + "'" + (hasValue || arg.rfind("--", 0) != 0 ? "" : " (a value is missing)");
      return false;
    }
  }
  if (question->comm.ranks == 0) return *error = "--ranks N is required", false;
  if (question->sizes.empty()) return *error = "no size given", false;
  return true;
}

// For each collective, which types (with the question's op) and which ops (with its type) the
// policy takes in its smallest call (one element; one per rank for the all-gather and the
// reduce-scatter) on the question's communicator: none when the library is disabled. A
// collective that takes no op (the all-gather) has "ops": null.
void writeTaken(JsonWriter& json, const Question& question, const car::Config& config) {
  auto takes = [&](car::CallFacts call) {
    call.count = 1;
    return !config.disable && car::planCall(question.comm, call, config).ours;
  };
  json.key("taken").beginObject();
  for (int c = 0; c < car::kCollectiveCount; ++c) {
    car::CallFacts asked = question.call;
    asked.collective = static_cast<car::Collective>(c);
    json.key(car::collectiveName(asked.collective)).beginObject().key("types").beginArray();
    for (int t = 0; t < car::kElementTypeCount; ++t) {
      car::CallFacts call = asked;
      call.type = static_cast<car::ElementType>(t);
      if (takes(call)) json.string(car::elementTypeName(*call.type));
    }
    json.endArray().key("ops");
    if (!car::reduces(asked.collective)) {
      json.null();
    } else {
      json.beginArray();
      for (int o = 0; o < car::kReduceOpCount; ++o) {
        car::CallFacts call = asked;
        call.op = static_cast<car::ReduceOp>(o);
        if (takes(call)) json.string(car::reduceOpName(*call.op));
      }
      json.endArray();
    }
    json.endObject();
  }
  json.endObject();
}

}  // namespace

bool writeDecisions(JsonWriter& json, const std::vector<std::string>& args, const car::Config& config,
                    std::string* error) {
  Question question;
  if (!parse(args, &question, error)) return false;
  const std::uint64_t elementSize =
      question.call.type ? static_cast<std::uint64_t>(car::elementBytes(*question.call.type)) : 1;
  // A size is the whole message: for the all-gather and the reduce-scatter, every rank's part.
  const std::uint64_t parts =
      question.call.collective == car::Collective::AllReduce ? 1 : static_cast<std::uint64_t>(question.comm.ranks);
  for (std::uint64_t bytes : question.sizes) {
    if (bytes % (elementSize * parts) != 0) {
      *error = std::to_string(bytes) + " bytes is not a whole number of " + question.typeName + " elements" +
               (parts > 1 ? " per rank" : "");
      return false;
    }
  }

  json.beginObject();
  json.key("ranks").number(static_cast<std::uint64_t>(question.comm.ranks));
  json.key("full_nvlink").boolean(question.comm.fullNvlink);
  json.key("links").string(car::linksName(car::linksOf(question.comm)));
  json.key("compute_capability").number(static_cast<std::uint64_t>(question.comm.computeCapability));
  json.key("type").string(question.typeName);
  json.key("collective").string(car::collectiveName(question.call.collective));
  json.key("op").string(question.call.op ? car::reduceOpName(*question.call.op) : "other");
  json.key("decisions").beginArray();
  for (std::uint64_t bytes : question.sizes) {
    car::CallFacts call = question.call;
    call.count = bytes / elementSize / parts;
    const car::CallPlan decision = car::planCall(question.comm, call, config);
    // NCCL_CAR_DISABLE: the hooks hand every call to NCCL before anything of ours sees it.
    const bool ours = decision.ours && !config.disable;
    json.beginObject().key("bytes").number(bytes).key("ours").boolean(ours);
    json.key("algorithm");
    if (ours) json.string(car::algorithmName(decision.algorithm));
    else json.null();
    json.key("reason");
    if (ours) json.null();
    else json.string(config.disable ? kDisabled : car::forwardReasonName(decision.reason));
    json.endObject();
  }
  json.endArray();
  writeTaken(json, question, config);
  json.endObject();
  return true;
}

void writePolicy(JsonWriter& json, const car::Config& config) {
  json.beginObject();
  // The collectives planCall decides, those some kernel serves; every other one goes to NCCL.
  json.key("collectives").beginArray();
  for (int c = 0; c < car::kCollectiveCount; ++c) json.string(car::collectiveName(static_cast<car::Collective>(c)));
  json.endArray();
  json.key("max_bytes").beginObject();
  for (int c = 0; c < car::kCollectiveCount; ++c) {
    const auto collective = static_cast<car::Collective>(c);
    json.key(car::collectiveName(collective)).number(car::collectiveMaxBytes(collective, config));
  }
  json.endObject();
  json.key("pull_buffers").boolean(car::pullBufferBytes(config) > 0);
  json.key("max_ranks").number(car::kMaxRanks);
  json.key("algorithms").beginArray();
  for (int a = 0; a < car::kAlgorithmCount; ++a) json.string(car::algorithmName(static_cast<car::Algorithm>(a)));
  json.endArray();
  // Each kernel with the collective it serves (a kernel serves one), whether it is a push kernel
  // (receive areas) or a pull kernel (buffers only where NCCL_CAR_PUSH_MAX_BYTES < NCCL_CAR_MAX_BYTES),
  // and whether it moves bits unchanged (then the type's family cannot change its speed).
  json.key("kernels").beginArray();
  for (const car::AlgorithmSpec& spec : car::kAlgorithms) {
    json.beginObject().key("name").string(spec.name);
    json.key("collective").string(car::collectiveName(car::collectiveOf(spec.algorithm)));
    json.key("family").string(spec.family == car::KernelFamily::Push ? "push" : "pull");
    json.key("copies_bits").boolean(spec.copiesBits).endObject();
  }
  json.endArray();
  // The families a choice table's rows name (plugin/choice_table.h), with their types.
  json.key("type_families").beginArray();
  for (int f = 0; f < static_cast<int>(car::TypeFamily::kCount); ++f) {
    const auto family = static_cast<car::TypeFamily>(f);
    json.beginObject().key("name").string(car::typeFamilyName(family)).key("types").beginArray();
    for (int t = 0; t < car::kElementTypeCount; ++t) {
      const auto type = static_cast<car::ElementType>(t);
      if (car::typeFamilyOf(type) == family) json.string(car::elementTypeName(type));
    }
    json.endArray().endObject();
  }
  json.endArray();
  json.key("element_types").beginArray();
  for (int t = 0; t < car::kElementTypeCount; ++t) {
    const auto type = static_cast<car::ElementType>(t);
    json.beginObject().key("name").string(car::elementTypeName(type));
    json.key("bytes").number(static_cast<std::uint64_t>(car::elementBytes(type))).endObject();
  }
  json.endArray();
  json.key("ops").beginArray();
  for (int o = 0; o < car::kReduceOpCount; ++o) json.string(car::reduceOpName(static_cast<car::ReduceOp>(o)));
  json.endArray();
  // The cases a communicator can be (a choice table's rows name one): without --full-nvlink,
  // `decide` answers for the PCIe case.
  json.key("links").beginArray();
  for (int l = 0; l < static_cast<int>(car::Links::kCount); ++l) json.string(car::linksName(static_cast<car::Links>(l)));
  json.endArray();
  json.key("forward_reasons").beginArray();
  for (int r = 0; r < static_cast<int>(car::ForwardReason::kCount); ++r) {
    json.string(car::forwardReasonName(static_cast<car::ForwardReason>(r)));
  }
  json.endArray();
  json.endObject();
}

}  // namespace carquery
