#include "ladder/runner/validate.h"

#include <set>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ladder/runner/environment.h"

namespace ladder::runner {
namespace {

constexpr char kParamPayload[] = "type.ladder.dev/param";

std::string At(const matrices::Matrix& matrix, const std::string& path) {
  auto it = matrix.locations.find(path);
  if (it == matrix.locations.end()) return matrix.source_name;
  return absl::StrCat(matrix.source_name, ":", it->second.line, ":", it->second.column);
}

// Where the cell's value of `param` is written: its axis value, or its `fixed` entry.
std::string ParamPath(const matrices::Matrix& matrix, const matrices::Cell& cell,
                      const std::string& param) {
  for (const auto& axis : matrix.axes) {
    if (axis.name != param) continue;
    const auto& value = cell.axes.contains(param) ? cell.axes[param] : nlohmann::json();
    for (size_t i = 0; i < axis.values.size(); ++i) {
      if (axis.values[i] == value) return absl::StrCat("axes.", param, "[", i, "]");
    }
    return absl::StrCat("axes.", param);
  }
  if (matrix.fixed.count(param)) return absl::StrCat("fixed.", param);
  return "runner";
}

}  // namespace

absl::Status ParamError(std::string_view param, std::string_view message) {
  absl::Status status = absl::InvalidArgumentError(std::string(message));
  status.SetPayload(kParamPayload, absl::Cord(std::string(param)));
  return status;
}

std::string ParamOf(const absl::Status& status) {
  auto payload = status.GetPayload(kParamPayload);
  return payload.has_value() ? std::string(*payload) : std::string();
}

absl::Status ValidateMatrix(const matrices::Matrix& matrix, const matrices::Expansion& expansion,
                            const RunnerSchemas& schemas) {
  if (matrix.runner == "command") {
    // The parser checked the command's shape and that every placeholder names a parameter or a
    // built-in of every cell; what is left is what the agent owns.
    if (matrix.command) {
      for (const auto& [name, value] : matrix.command->extra_env) {
        if (IsAgentOwnedEnvironment(name)) {
          const std::string path = absl::StrCat("command.extra_env.", name);
          return absl::InvalidArgumentError(absl::StrCat(
              At(matrix, path), ": ", path, ": ", name,
              " is the agent's (it pins the program to the agent's GPUs); a matrix cannot set it"));
        }
      }
    }
    const RunnerSchema schema = CommandSchema(matrix.metrics);
    if (!matrix.metric.empty() && schema.FindMetric(matrix.metric) == nullptr) {
      std::vector<std::string> names;
      for (const auto& m : schema.metrics) names.push_back(m.name);
      return absl::InvalidArgumentError(absl::StrCat(
          At(matrix, "metric"), ": metric: the matrix declares no metric \"", matrix.metric,
          "\" under `metrics`; it declares: ", absl::StrJoin(names, ", ")));
    }
    return absl::OkStatus();
  }
  const RunnerSchema* schema = schemas.Find(matrix.runner);
  if (schema == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(At(matrix, "runner"), ": runner: no runner named \"", matrix.runner,
                     "\"; known: ", absl::StrJoin(schemas.names(), ", ")));
  }
  if (!matrix.metric.empty() && schema->FindMetric(matrix.metric) == nullptr) {
    std::vector<std::string> names;
    for (const auto& m : schema->metrics) names.push_back(m.name);
    return absl::InvalidArgumentError(absl::StrCat(
        At(matrix, "metric"), ": metric: the ", matrix.runner, " runner reports no metric \"",
        matrix.metric, "\"; it reports: ", absl::StrJoin(names, ", ")));
  }
  if (!schema->check_params) return absl::OkStatus();
  // One message per distinct problem, naming the first cell that has it.
  std::set<std::string> seen;
  std::vector<std::string> problems;
  for (const auto& cell : expansion.cells) {
    absl::Status checked = schema->check_params(cell.params);
    if (checked.ok()) continue;
    const std::string message(checked.message());
    if (!seen.insert(message).second) continue;
    const std::string param = ParamOf(checked);
    const std::string path = param.empty() ? "runner" : ParamPath(matrix, cell, param);
    problems.push_back(
        absl::StrCat(At(matrix, path), ": ", path, ": cell ", cell.key, ": ", message));
    if (problems.size() >= 20) break;
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "\n"));
}

}  // namespace ladder::runner
