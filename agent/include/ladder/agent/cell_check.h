// Checks a cell's parameters the way the named runner will, before anything is submitted, so a
// typo in a matrix fails `ladder validate` instead of an attempt on a rented GPU.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace ladder::agent {

// InvalidArgument naming the parameter when `runner` ("kernel" or "engine") would refuse the
// cell; Unimplemented for a runner this binary does not have.
absl::Status CheckCellParams(const std::string& runner, const nlohmann::json& params);

}  // namespace ladder::agent
