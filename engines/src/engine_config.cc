#include "ladder/engines/engine_config.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

namespace ladder::engines {

nlohmann::json ReportedConfig(std::string_view engine, const nlohmann::json& report) {
  nlohmann::json out = nlohmann::json::object();
  if (!report.is_object()) return out;
  if (engine == "llama.cpp") {
    // tools/server/server-context.cpp at 82bb48500 (b10309), get_props:
    //   {"default_generation_settings", {{"params", ...}, {"n_ctx", meta->slot_n_ctx}}},
    //   {"total_slots", params.n_parallel}, ..., {"build_info", meta->build_info}
    // The speculative settings under params are the task defaults, not the server's flags,
    // so they are not read.
    if (auto dgs = report.find("default_generation_settings");
        dgs != report.end() && dgs->is_object()) {
      if (auto n_ctx = dgs->find("n_ctx"); n_ctx != dgs->end() && n_ctx->is_number()) {
        out["n_ctx"] = *n_ctx;
      }
    }
    if (auto slots = report.find("total_slots"); slots != report.end() && slots->is_number()) {
      out["total_slots"] = *slots;
    }
    if (auto build = report.find("build_info"); build != report.end() && build->is_string()) {
      out["build_info"] = *build;
    }
  }
  return out;
}

namespace {

bool Equal(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>();
    const double y = b.get<double>();
    return std::fabs(x - y) <= 1e-6 * std::max(1.0, std::fabs(x));
  }
  return a == b;
}

bool Matches(const nlohmann::json& expected, const nlohmann::json& reported) {
  if (expected.is_object() && expected.contains("min") && expected.contains("max")) {
    if (!reported.is_number()) return false;
    const double v = reported.get<double>();
    return v >= expected["min"].get<double>() && v <= expected["max"].get<double>();
  }
  return Equal(expected, reported);
}

}  // namespace

ConfigCheck CheckConfig(const nlohmann::json& expected, const nlohmann::json& reported) {
  ConfigCheck check;
  if (!expected.is_object()) return check;
  for (const auto& [name, want] : expected.items()) {
    auto got = reported.is_object() ? reported.find(name) : reported.end();
    if (!reported.is_object() || got == reported.end()) {
      check.not_verifiable.push_back(name);
      continue;
    }
    if (!Matches(want, *got)) {
      check.mismatches.push_back({{"name", name}, {"expected", want}, {"reported", *got}});
    }
  }
  return check;
}

}  // namespace ladder::engines
