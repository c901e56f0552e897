#include "params.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ladder/engines/load.h"
#include "ladder/engines/recipe.h"
#include "ladder/runner/environment.h"
#include "ladder/runner/validate.h"
#include "message.h"

namespace ladder::engines {
namespace internal {

absl::Status ParamError(std::string_view engine, std::string_view name, std::string_view what) {
  return runner::ParamError(name, Cat(engine, ": parameter '", name, "': ", what));
}

namespace {
const nlohmann::json* Find(const nlohmann::json& params, std::string_view name) {
  if (!params.is_object()) return nullptr;
  auto it = params.find(std::string(name));
  if (it == params.end() || it->is_null()) return nullptr;
  return &*it;
}
}  // namespace

std::optional<std::string> GetString(const nlohmann::json& params, std::string_view name) {
  const nlohmann::json* v = Find(params, name);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number_integer()) return std::to_string(v->get<int64_t>());
  return v->dump();
}

std::optional<int64_t> GetInt(const nlohmann::json& params, std::string_view name) {
  const nlohmann::json* v = Find(params, name);
  if (v == nullptr || !v->is_number_integer()) return std::nullopt;
  return v->get<int64_t>();
}

std::optional<double> GetNumber(const nlohmann::json& params, std::string_view name) {
  const nlohmann::json* v = Find(params, name);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

std::optional<bool> GetBool(const nlohmann::json& params, std::string_view name) {
  const nlohmann::json* v = Find(params, name);
  if (v == nullptr || !v->is_boolean()) return std::nullopt;
  return v->get<bool>();
}

absl::StatusOr<std::vector<std::string>> GetList(const nlohmann::json& params,
                                                 std::string_view engine, std::string_view name) {
  std::vector<std::string> out;
  const nlohmann::json* v = Find(params, name);
  if (v == nullptr) return out;
  if (v->is_string()) {
    for (absl::string_view piece :
         absl::StrSplit(v->get<std::string>(), absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
      out.emplace_back(std::string(piece));
    }
    return out;
  }
  if (v->is_array()) {
    for (const auto& item : *v) {
      if (!item.is_string()) return ParamError(engine, name, "expected a list of strings");
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  return ParamError(engine, name, "expected a string or a list of strings");
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> GetEnv(
    const nlohmann::json& params, std::string_view engine, std::string_view name) {
  std::vector<std::pair<std::string, std::string>> out;
  const nlohmann::json* v = Find(params, name);
  if (v == nullptr) return out;
  auto check_name = [&](const std::string& key) -> absl::Status {
    if (key.empty() || std::isdigit(static_cast<unsigned char>(key[0])) ||
        !std::all_of(key.begin(), key.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        })) {
      return ParamError(engine, name, Cat("invalid variable name '", key, "'"));
    }
    if (runner::IsAgentOwnedEnvironment(key)) {
      return ParamError(engine, name,
                        Cat(key,
                            " is set by the agent for every process it starts (its GPUs: "
                            "ladder agent --gpus; NCCL_NVLS_ENABLE=0); a cell cannot change it"));
    }
    return absl::OkStatus();
  };
  if (v->is_object()) {
    for (const auto& [key, value] : v->items()) {
      if (auto s = check_name(key); !s.ok()) return s;
      if (!value.is_string() && !value.is_number()) {
        return ParamError(engine, name, Cat("value of '", key, "' must be a string"));
      }
      out.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
    }
    return out;
  }
  if (v->is_string()) {
    for (absl::string_view piece :
         absl::StrSplit(v->get<std::string>(), absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
      size_t eq = piece.find('=');
      if (eq == absl::string_view::npos) {
        return ParamError(engine, name, Cat("expected K=V, got '", piece, "'"));
      }
      std::string key(piece.substr(0, eq));
      if (auto s = check_name(key); !s.ok()) return s;
      out.emplace_back(key, std::string(piece.substr(eq + 1)));
    }
    return out;
  }
  return ParamError(engine, name, "expected an object of strings or \"K=V K2=V2\"");
}

absl::StatusOr<SpecRequest> GetSpec(const nlohmann::json& params, std::string_view engine) {
  SpecRequest spec;
  std::optional<std::string> shorthand = GetString(params, "spec");
  std::optional<std::string> method = GetString(params, "spec_method");
  std::optional<int64_t> k = GetInt(params, "spec_k");
  spec.model = GetString(params, "spec_model").value_or("");
  // Speculation off ignores the draft model and method: a paired study gives the draft model
  // once (in `fixed`) for a `spec` axis whose "off" arm runs the target alone
  // (docs/matrix-format.md, "Pairing speculation against a draft model").
  auto off = [&spec] {
    spec.ignored_model = std::move(spec.model);
    spec.model.clear();
    spec.k = 0;
    spec.method.clear();
    return spec;
  };
  if (shorthand.has_value()) {
    if (method.has_value() || k.has_value()) {
      return ParamError(engine, "spec", "give either 'spec' or 'spec_method'/'spec_k', not both");
    }
    if (*shorthand == "off" || *shorthand == "none" || shorthand->empty()) return off();
    std::vector<std::string> parts = absl::StrSplit(*shorthand, ':');
    if (parts.size() > 2 || parts[0].empty()) {
      return ParamError(
          engine, "spec",
          Cat("expected \"off\", \"METHOD\" or \"METHOD:K\", got \"", *shorthand, "\""));
    }
    spec.method = parts[0];
    spec.k = 1;
    if (parts.size() == 2) {
      int parsed = 0;
      if (!absl::SimpleAtoi(parts[1], &parsed) || parsed < 1) {
        return ParamError(engine, "spec",
                          Cat("K in \"", *shorthand, "\" must be a positive integer"));
      }
      spec.k = parsed;
    }
    return spec;
  }
  if (k.has_value() && *k < 0) return ParamError(engine, "spec_k", "must be >= 0");
  if (!k.has_value()) {
    // A method or a draft model with no k at all is a forgotten spec_k, not an "off" arm
    // (that is spec_k: 0, or spec: "off").
    if (method.has_value() && *method != "off" && *method != "none") {
      return ParamError(engine, "spec_k",
                        Cat("missing while spec_method is \"", *method,
                            "\" (give spec_k: 0 for an arm with speculation off)"));
    }
    if (!spec.model.empty()) {
      return ParamError(engine, "spec_k",
                        "missing while spec_model is given (give spec_k: 0 for an arm with "
                        "speculation off)");
    }
    return off();
  }
  spec.k = static_cast<int>(*k);
  if (spec.k == 0) return off();
  spec.method = method.value_or("");
  if (spec.method == "off" || spec.method == "none") {
    return ParamError(engine, "spec_method", Cat("\"", spec.method, "\" with spec_k ", spec.k));
  }
  return spec;
}

}  // namespace internal

using internal::Cat;

namespace {

bool TypeMatches(ParamType type, const nlohmann::json& v) {
  switch (type) {
    case ParamType::kString:
      return v.is_string();
    case ParamType::kInteger:
      return v.is_number_integer();
    case ParamType::kNonNegativeInteger:
      return v.is_number_integer() && v.get<int64_t>() >= 0;
    case ParamType::kPositiveInteger:
      return v.is_number_integer() && v.get<int64_t>() > 0;
    case ParamType::kNumber:
      return v.is_number();
    case ParamType::kBool:
      return v.is_boolean();
    case ParamType::kStringOrNumber:
      return v.is_string() || v.is_number();
    case ParamType::kStringOrList:
      return v.is_string() || v.is_array();
    case ParamType::kStringOrObject:
      return v.is_string() || v.is_object();
    case ParamType::kAny:
      return true;
  }
  return false;
}

std::string_view TypeName(ParamType type) {
  switch (type) {
    case ParamType::kString:
      return "a string";
    case ParamType::kInteger:
      return "an integer";
    case ParamType::kNonNegativeInteger:
      return "a non-negative integer";
    case ParamType::kPositiveInteger:
      return "a positive integer";
    case ParamType::kNumber:
      return "a number";
    case ParamType::kBool:
      return "true or false";
    case ParamType::kStringOrNumber:
      return "a string or a number";
    case ParamType::kStringOrList:
      return "a string or a list of strings";
    case ParamType::kStringOrObject:
      return "a string or an object";
    case ParamType::kAny:
      return "any value";
  }
  return "?";
}

}  // namespace

const std::vector<ParamSpec>& CommonParameters() {
  static const std::vector<ParamSpec> kCommon = {
      {"engine", ParamType::kString, true, "recipe: vllm, sglang, llama.cpp, external, synthetic"},
      {"depth", ParamType::kPositiveInteger, true, "context depth: prompt length in tokens"},
      {"short_tokens", ParamType::kPositiveInteger, false, "short generation (default 8)"},
      {"long_tokens", ParamType::kPositiveInteger, false, "long generation (default 64)"},
      {"start_timeout_s", ParamType::kNumber, false, "seconds to become healthy"},
      {"request_timeout_s", ParamType::kNumber, false, "seconds per request (default 600)"},
      {"request_retries", ParamType::kNonNegativeInteger, false,
       "a request the engine answers with its own error is sent again with a fresh prompt, up "
       "to this many times (default 3)"},
      {"probe_patterns", ParamType::kStringOrList, false,
       "log substrings counted per engine process (default PROBE_3D_SPEC_ACTIVE)"},
      {"token_id_min", ParamType::kNonNegativeInteger, false, "prompt token ids from (1000)"},
      {"token_id_max", ParamType::kPositiveInteger, false, "prompt token ids below (30000)"},
      {"arm_residency", ParamType::kString, false,
       "together | one_at_a_time: whether a unit's arms' engines run at the same time"},
      {"label", ParamType::kAny, false, "a free annotation, ignored"},
      {"warmup", ParamType::kString, false,
       "per_depth (default) | once | none: untimed generations after each engine start"},
      // Load (any of these turns the cell from batch-1 differencing into a load cell).
      {"concurrency", ParamType::kPositiveInteger, false, "closed loop: requests kept in flight"},
      {"request_rate", ParamType::kNumber, false, "open loop: Poisson arrivals per second"},
      {"num_requests", ParamType::kNonNegativeInteger, false,
       "measured requests per cell and round (default 32; 0 with duration_s)"},
      {"duration_s", ParamType::kNumber, false, "send measured requests for this long"},
      {"warmup_requests", ParamType::kNonNegativeInteger, false,
       "excluded first requests (default: concurrency; open loop 1)"},
      {"output_tokens", ParamType::kPositiveInteger, false,
       "tokens per load request (default long_tokens, 64)"},
      {"length_spread", ParamType::kNumber, false,
       "0: fixed lengths; s: uniform within +-s of depth and output_tokens, seeded"},
      {"slo_ttft_ms", ParamType::kNumber, false, "goodput: TTFT at most this"},
      {"slo_itl_ms", ParamType::kNumber, false, "goodput: mean inter-token gap at most this"},
  };
  return kCommon;
}

absl::Status ValidateParams(const Recipe& recipe, const nlohmann::json& params) {
  std::string_view engine = recipe.name();
  if (!params.is_object()) {
    return absl::InvalidArgumentError(Cat(engine, ": cell parameters must be an object"));
  }
  auto find_spec = [&](const std::string& key) -> const ParamSpec* {
    for (const auto& spec : CommonParameters()) {
      if (spec.name == key) return &spec;
    }
    for (const auto& spec : recipe.parameters()) {
      if (spec.name == key) return &spec;
    }
    return nullptr;
  };
  for (const auto& [key, value] : params.items()) {
    if (key.rfind("x_", 0) == 0) continue;  // annotations
    const ParamSpec* spec = find_spec(key);
    if (spec == nullptr) {
      std::vector<std::string> names;
      for (const auto& s : recipe.parameters()) names.push_back(s.name);
      return absl::InvalidArgumentError(Cat(engine, ": unknown parameter '", key, "' (", engine,
                                            " accepts: ", absl::StrJoin(names, ", "),
                                            "; and the common ones: see docs/engines.md)"));
    }
    if (value.is_null()) continue;
    if (!TypeMatches(spec->type, value)) {
      return internal::ParamError(engine, key,
                                  Cat("expected ", TypeName(spec->type), ", got ", value.dump()));
    }
  }
  auto check_required = [&](const std::vector<ParamSpec>& specs) -> absl::Status {
    for (const auto& spec : specs) {
      if (spec.required && (!params.contains(spec.name) || params[spec.name].is_null())) {
        return internal::ParamError(engine, spec.name, "is required");
      }
    }
    return absl::OkStatus();
  };
  if (auto s = check_required(CommonParameters()); !s.ok()) return s;
  if (auto s = check_required(recipe.parameters()); !s.ok()) return s;
  if (HasLoadParams(params)) return LoadConfigFromParams(params, 0).status();
  return absl::OkStatus();
}

int CompareVersions(std::string_view a, std::string_view b) {
  auto parts = [](std::string_view v) {
    std::vector<long> out;
    if (!v.empty() && (v[0] == 'v' || v[0] == 'V')) v.remove_prefix(1);
    size_t i = 0;
    while (i < v.size()) {
      if (!std::isdigit(static_cast<unsigned char>(v[i]))) break;
      long n = 0;
      while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
        n = n * 10 + (v[i] - '0');
        ++i;
      }
      out.push_back(n);
      if (i < v.size() && v[i] == '.') {
        ++i;
      } else {
        break;
      }
    }
    return out;
  };
  std::vector<long> pa = parts(a), pb = parts(b);
  size_t n = std::max(pa.size(), pb.size());
  pa.resize(n, 0);
  pb.resize(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (pa[i] != pb[i]) return pa[i] < pb[i] ? -1 : 1;
  }
  return 0;
}

}  // namespace ladder::engines
