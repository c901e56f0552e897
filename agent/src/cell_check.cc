#include "ladder/agent/cell_check.h"

#include "absl/strings/str_cat.h"
#include "kernel_runner.h"
#include "ladder/runner/validate.h"

#ifdef LADDER_HAVE_ENGINES
#include "ladder/engines/engine_runner.h"
#endif

namespace ladder::agent {
namespace {

#ifdef LADDER_HAVE_ENGINES
// Renders the cell through its recipe, as the agent will (engines::CheckEngineCell).
absl::Status CheckEngineParams(const nlohmann::json& params) {
  return engines::CheckEngineCell(params);
}
#endif

}  // namespace

const runner::RunnerSchemas& RunnerSchemasWithChecks() {
  static const runner::RunnerSchemas schemas = [] {
    runner::RunnerSchemas s = runner::BuiltinMetricSchemas();
    s.SetParamCheck("kernel", CheckKernelParams);
#ifdef LADDER_HAVE_ENGINES
    s.SetParamCheck("engine", CheckEngineParams);
#else
    s.SetParamCheck("engine", [](const nlohmann::json&) {
      return absl::UnimplementedError("this ladder was built without the engine runner");
    });
#endif
    return s;
  }();
  return schemas;
}

absl::Status CheckCellParams(const std::string& runner, const nlohmann::json& params) {
  // A command cell's parameters are its matrix author's: they only fill the argv template.
  if (runner == "command") return absl::OkStatus();
  const runner::RunnerSchema* schema = RunnerSchemasWithChecks().Find(runner);
  if (schema == nullptr) {
    return absl::UnimplementedError(absl::StrCat("no runner named '", runner, "'"));
  }
  return schema->check_params ? schema->check_params(params) : absl::OkStatus();
}

}  // namespace ladder::agent
