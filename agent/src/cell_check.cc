#include "ladder/agent/cell_check.h"

#include "absl/strings/str_cat.h"
#include "kernel_runner.h"

#ifdef LADDER_HAVE_ENGINES
#include "ladder/engines/recipe.h"
#endif

namespace ladder::agent {

absl::Status CheckCellParams(const std::string& runner, const nlohmann::json& params) {
  if (runner == "kernel") return CheckKernelParams(params);
  if (runner == "engine") {
#ifdef LADDER_HAVE_ENGINES
    if (!params.contains("engine") || !params["engine"].is_string()) {
      return absl::InvalidArgumentError("engine runner: parameter `engine` (a string) is required");
    }
    auto recipe = engines::FindBuiltinRecipe(params["engine"].get<std::string>());
    if (!recipe.ok()) return recipe.status();
    return engines::ValidateParams(**recipe, params);
#else
    return absl::UnimplementedError("this ladder was built without the engine runner");
#endif
  }
  return absl::UnimplementedError(absl::StrCat("no runner named '", runner, "'"));
}

}  // namespace ladder::agent
