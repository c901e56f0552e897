#include "ladder/agent/cell_check.h"

#include "absl/strings/str_cat.h"
#include "kernel_runner.h"
#include "ladder/runner/validate.h"

#ifdef LADDER_HAVE_ENGINES
#include "ladder/engines/recipe.h"
#endif

namespace ladder::agent {
namespace {

#ifdef LADDER_HAVE_ENGINES
absl::Status CheckEngineParams(const nlohmann::json& params) {
  if (!params.contains("engine") || !params["engine"].is_string()) {
    return runner::ParamError("engine", "engine runner: parameter `engine` (a string) is required");
  }
  auto recipe = engines::FindBuiltinRecipe(params["engine"].get<std::string>());
  if (!recipe.ok()) return runner::ParamError("engine", std::string(recipe.status().message()));
  return engines::ValidateParams(**recipe, params);
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
  const runner::RunnerSchema* schema = RunnerSchemasWithChecks().Find(runner);
  if (schema == nullptr) {
    return absl::UnimplementedError(absl::StrCat("no runner named '", runner, "'"));
  }
  return schema->check_params ? schema->check_params(params) : absl::OkStatus();
}

}  // namespace ladder::agent
