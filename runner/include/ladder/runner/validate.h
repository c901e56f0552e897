// One validation of a matrix against the runners, used by every door: `ladder validate`,
// the coordinator's Submit and Validate, and `ladder local`.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "ladder/matrices/matrix.h"
#include "ladder/runner/schema.h"

namespace ladder::runner {

// An InvalidArgument error about parameter `param`, so that ValidateMatrix can point at the
// line and column where the matrix sets it.
absl::Status ParamError(std::string_view param, std::string_view message);
// The parameter a ParamError names, or "".
std::string ParamOf(const absl::Status& status);

// Checks the matrix's runner, metric and every expanded cell's parameters against `schemas`.
// InvalidArgument with one line per distinct problem, each "file:line:col: path: cell KEY:
// message" pointing at the parameter's value in `fixed` or `axes`.
absl::Status ValidateMatrix(const matrices::Matrix& matrix, const matrices::Expansion& expansion,
                            const RunnerSchemas& schemas);

}  // namespace ladder::runner
