// `runner: command`'s templates and the one JSON encoding of its configuration.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "fmt/format.h"
#include "ladder/matrices/matrix.h"
#include "ladder/status_macros.h"

namespace ladder::matrices {
namespace {

bool IsPlaceholderName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Walks a template: calls `literal` with each literal piece and `placeholder` with each name.
template <typename Literal, typename Placeholder>
absl::Status Walk(std::string_view text, Literal literal, Placeholder placeholder) {
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '{' && i + 1 < text.size() && text[i + 1] == '{') {
      literal(std::string_view("{"));
      i += 2;
    } else if (c == '}' && i + 1 < text.size() && text[i + 1] == '}') {
      literal(std::string_view("}"));
      i += 2;
    } else if (c == '{') {
      const size_t close = text.find('}', i + 1);
      if (close == std::string_view::npos) {
        return absl::InvalidArgumentError(fmt::format(
            "unclosed \"{{\" at byte {} of \"{}\" (write {{{{ for a literal brace)", i, text));
      }
      const std::string_view name = text.substr(i + 1, close - i - 1);
      if (!IsPlaceholderName(name)) {
        return absl::InvalidArgumentError(
            fmt::format("\"{{{}}}\" is not a placeholder: a name is [A-Za-z_][A-Za-z0-9_]* "
                        "(write {{{{ and }}}} for literal braces)",
                        name));
      }
      RETURN_IF_ERROR(placeholder(name));
      i = close + 1;
    } else if (c == '}') {
      return absl::InvalidArgumentError(fmt::format(
          "stray \"}}\" at byte {} of \"{}\" (write }}}} for a literal brace)", i, text));
    } else {
      const size_t next = text.find_first_of("{}", i);
      const size_t end = next == std::string_view::npos ? text.size() : next;
      literal(text.substr(i, end - i));
      i = end;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> TemplatePlaceholders(std::string_view text) {
  std::vector<std::string> names;
  RETURN_IF_ERROR(Walk(
      text, [](std::string_view) {},
      [&](std::string_view name) {
        names.emplace_back(name);
        return absl::OkStatus();
      }));
  return names;
}

absl::StatusOr<std::string> RenderTemplate(
    std::string_view text,
    const std::function<std::optional<std::string>(std::string_view name)>& lookup) {
  std::string out;
  RETURN_IF_ERROR(Walk(
      text, [&](std::string_view piece) { out.append(piece); },
      [&](std::string_view name) -> absl::Status {
        std::optional<std::string> value = lookup(name);
        if (!value) {
          return absl::NotFoundError(fmt::format("{{{}}} names no parameter of this cell", name));
        }
        out += *value;
        return absl::OkStatus();
      }));
  return out;
}

bool IsBenchName(std::string_view name) {
  if (name.empty() || name.size() > 57) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
  });
}

absl::StatusOr<std::vector<std::string>> BenchNames(const Matrix& matrix) {
  if (!matrix.command) return std::vector<std::string>{};
  const std::string& text = matrix.command->bench;
  ASSIGN_OR_RETURN(const std::vector<std::string> placeholders, TemplatePlaceholders(text));
  // The values each placeholder takes: an axis's levels or the one fixed value.
  std::vector<std::pair<std::string, std::vector<std::string>>> choices;
  for (const std::string& name : placeholders) {
    if (std::any_of(choices.begin(), choices.end(),
                    [&](const auto& c) { return c.first == name; })) {
      continue;
    }
    std::vector<std::string> values;
    auto axis = std::find_if(matrix.axes.begin(), matrix.axes.end(),
                             [&](const Axis& a) { return a.name == name; });
    if (axis != matrix.axes.end()) {
      for (const Value& v : axis->values) values.push_back(ValueToString(v));
    } else if (auto fixed = matrix.fixed.find(name); fixed != matrix.fixed.end()) {
      values.push_back(ValueToString(fixed->second));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("{", name,
                       "} in a bench name must be an axis or a fixed parameter (the program is "
                       "chosen once per cell)"));
    }
    choices.emplace_back(name, std::move(values));
  }
  std::set<std::string> names;
  std::vector<std::size_t> at(choices.size(), 0);
  while (true) {
    ASSIGN_OR_RETURN(std::string name,
                     RenderTemplate(text, [&](std::string_view n) -> std::optional<std::string> {
                       for (std::size_t i = 0; i < choices.size(); ++i) {
                         if (choices[i].first == n) return choices[i].second[at[i]];
                       }
                       return std::nullopt;
                     }));
    if (!IsBenchName(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bench \"", text, "\" renders \"", name,
                       "\", which is not a bench name ([a-z0-9_.-]{1,57}: the NAME of an agent's "
                       "--bench NAME=PATH)"));
    }
    names.insert(std::move(name));
    if (names.size() > 48) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bench \"", text, "\" names more than 48 programs (an agent registers at most 48)"));
    }
    std::size_t i = 0;
    for (; i < at.size(); ++i) {
      if (++at[i] < choices[i].second.size()) break;
      at[i] = 0;
    }
    if (i == at.size()) break;
  }
  return std::vector<std::string>(names.begin(), names.end());
}

std::string_view BetterName(MetricDeclaration::Better better) {
  return better == MetricDeclaration::Better::kHigher ? "higher" : "lower";
}

std::string_view RangeName(MetricDeclaration::Range range) {
  switch (range) {
    case MetricDeclaration::Range::kPositive:
      return "positive";
    case MetricDeclaration::Range::kNonNegative:
      return "non_negative";
    case MetricDeclaration::Range::kShare:
      return "share";
    case MetricDeclaration::Range::kAtLeastOne:
      return "at_least_one";
  }
  return "positive";
}

nlohmann::json RunnerConfigToJson(const Matrix& matrix) {
  if (!matrix.command) return nlohmann::json::object();
  const CommandSpec& c = *matrix.command;
  nlohmann::json metrics = nlohmann::json::array();
  for (const MetricDeclaration& d : matrix.metrics) {
    metrics.push_back({{"name", d.name},
                       {"unit", d.unit},
                       {"better", BetterName(d.better)},
                       {"range", RangeName(d.range)},
                       {"required", d.required}});
  }
  return {{"command",
           {{"bench", c.bench},
            {"args", c.args},
            {"format", c.format},
            {"start", c.start == CommandSpec::Start::kPerRound ? "per_round" : "per_process"},
            {"timeout_s", c.timeout_s},
            {"extra_env", c.extra_env},
            {"probe_patterns", c.probe_patterns}}},
          {"metrics", metrics}};
}

absl::StatusOr<RunnerConfig> RunnerConfigFromJson(const nlohmann::json& json) {
  if (!json.is_object() || json.empty()) {
    return absl::NotFoundError("the run has no command configuration");
  }
  RunnerConfig config;
  try {
    const nlohmann::json& c = json.at("command");
    config.command.bench = c.at("bench").get<std::string>();
    config.command.args = c.at("args").get<std::vector<std::string>>();
    config.command.format = c.at("format").get<std::string>();
    const std::string start = c.at("start").get<std::string>();
    if (start != "per_process" && start != "per_round") {
      return absl::InvalidArgumentError(absl::StrCat("runner config: unknown start ", start));
    }
    config.command.start =
        start == "per_round" ? CommandSpec::Start::kPerRound : CommandSpec::Start::kPerProcess;
    config.command.timeout_s = c.at("timeout_s").get<double>();
    if (!(config.command.timeout_s > 0) || !std::isfinite(config.command.timeout_s)) {
      return absl::InvalidArgumentError("runner config: timeout_s must be positive");
    }
    config.command.extra_env = c.at("extra_env").get<std::map<std::string, std::string>>();
    config.command.probe_patterns = c.at("probe_patterns").get<std::vector<std::string>>();
    for (const nlohmann::json& m : json.at("metrics")) {
      MetricDeclaration d;
      d.name = m.at("name").get<std::string>();
      d.unit = m.at("unit").get<std::string>();
      const std::string better = m.at("better").get<std::string>();
      if (better != "lower" && better != "higher") {
        return absl::InvalidArgumentError(absl::StrCat("runner config: unknown better ", better));
      }
      d.better = better == "higher" ? MetricDeclaration::Better::kHigher
                                    : MetricDeclaration::Better::kLower;
      const std::string range = m.at("range").get<std::string>();
      bool known = false;
      for (auto r : {MetricDeclaration::Range::kPositive, MetricDeclaration::Range::kNonNegative,
                     MetricDeclaration::Range::kShare, MetricDeclaration::Range::kAtLeastOne}) {
        if (RangeName(r) == range) {
          d.range = r;
          known = true;
        }
      }
      if (!known)
        return absl::InvalidArgumentError(absl::StrCat("runner config: unknown range ", range));
      d.required = m.at("required").get<bool>();
      config.metrics.push_back(std::move(d));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("runner config: ", e.what()));
  }
  if (config.metrics.empty()) {
    return absl::InvalidArgumentError("runner config: no metrics declared");
  }
  return config;
}

}  // namespace ladder::matrices
