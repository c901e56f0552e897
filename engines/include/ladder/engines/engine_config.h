// The configuration a running engine reports about itself, against what its cell asked.
//
// A recipe renders flags; the engine may still run something else (`--fit` shrinking the
// context, an environment variable overriding a flag, a default that changed). After an engine
// is healthy the runner reads its own report (llama.cpp: GET /props) and compares the values
// the recipe expects (RenderedEngine::expected_config) with it: a value that differs fails the
// arm with both; a value the engine does not report is "not verifiable", never a match.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ladder::engines {

// The values of an engine's configuration report under the names recipes expect.
//   llama.cpp /props  n_ctx (default_generation_settings.n_ctx: one slot's context),
//                     total_slots, build_info (evidence only)
// Keys the report lacks are absent. Any other engine: an empty object.
nlohmann::json ReportedConfig(std::string_view engine, const nlohmann::json& report);

struct ConfigCheck {
  nlohmann::json mismatches = nlohmann::json::array();  // [{name, expected, reported}]
  std::vector<std::string> not_verifiable;              // expected names the engine did not report
  bool ok() const { return mismatches.empty(); }
};

// Compares `expected` ({name: value}; a value is a number or string compared for equality, or
// {"min": a, "max": b}, an inclusive range) with `reported` (ReportedConfig).
ConfigCheck CheckConfig(const nlohmann::json& expected, const nlohmann::json& reported);

}  // namespace ladder::engines
