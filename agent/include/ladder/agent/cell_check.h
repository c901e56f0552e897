// The built-in runners' schemas with the parameter checks this binary's runners apply, so a
// typo in a matrix fails `ladder validate` and `ladder submit` instead of an attempt on a rented
// GPU. The CLI validates with these and hands them to the coordinator it starts.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "ladder/runner/schema.h"

namespace ladder::agent {

// runner::BuiltinMetricSchemas() with each runner's parameter check attached (the engine
// runner's only when this binary has engines).
const runner::RunnerSchemas& RunnerSchemasWithChecks();

// InvalidArgument naming the parameter when `runner` ("kernel" or "engine") would refuse the
// cell; OK for any "command" cell; Unimplemented for a runner this binary does not have.
absl::Status CheckCellParams(const std::string& runner, const nlohmann::json& params);

}  // namespace ladder::agent
