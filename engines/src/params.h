// Typed access to a cell's parameters, after ValidateParams. Internal to ladder_engines.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace ladder::engines::internal {

// Reads a validated parameter, or nullopt when absent (or JSON null).
std::optional<std::string> GetString(const nlohmann::json& params, std::string_view name);
std::optional<int64_t> GetInt(const nlohmann::json& params, std::string_view name);
std::optional<double> GetNumber(const nlohmann::json& params, std::string_view name);
std::optional<bool> GetBool(const nlohmann::json& params, std::string_view name);

// A list parameter given as a JSON array of strings or as a whitespace-separated string (no
// quoting: a value that contains spaces must be given as an array).
absl::StatusOr<std::vector<std::string>> GetList(const nlohmann::json& params,
                                                 std::string_view engine, std::string_view name);
// An environment parameter given as an object of strings or as "K=V K2=V2".
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> GetEnv(
    const nlohmann::json& params, std::string_view engine, std::string_view name);

// The speculation requested by a cell: `spec` ("off", "METHOD" or "METHOD:K") or the explicit
// spec_method / spec_k / spec_model parameters (not both forms).
struct SpecRequest {
  std::string method;  // "" when off
  int k = 0;           // 0 when off
  std::string model;   // draft / assistant model, may be ""
  // Speculation off with a draft model given (in `fixed`, for the "on" arms): not passed to the
  // engine, recorded in the rendering so the evidence says it was ignored.
  std::string ignored_model;
};
absl::StatusOr<SpecRequest> GetSpec(const nlohmann::json& params, std::string_view engine);

absl::Status ParamError(std::string_view engine, std::string_view name, std::string_view what);

}  // namespace ladder::engines::internal
