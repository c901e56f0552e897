// What each runner may report, declared once: the metrics a cell produces per (process, round),
// which of them every complete attempt must fill, and the check a cell's parameters must pass.
//
// The coordinator stores a record only if its metric is one its runner declares, and accepts an
// attempt as done only when every required slot of the design is filled; `ladder validate`,
// `ladder submit` (the coordinator) and the agent refuse exactly the same cells because they all
// call ValidateCells with the same schemas.
//
// Thread safety: schemas are immutable values once built; RunnerSchemas is safe to share.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "ladder/matrices/matrix.h"

namespace ladder::runner {

// The values a metric can take. A value outside is no measurement (a negative time, 1e308 µs,
// zero segments) and the store refuses it with the reason Check gives.
struct MetricRange {
  enum class Kind {
    kPositive,     // a time, a rate, a size: > 0
    kNonNegative,  // a count that may be 0, a gap that may round to 0: >= 0
    kAtLeastOne,   // a count that is at least 1 (segments; tokens per verify step): >= 1
    kShare,        // a share of a whole: in [0, 1]
  };
  Kind kind = Kind::kPositive;
  double max = 1e12;     // above any value the metric can have (µs: 11.6 days; tok/s, B/s: absurd)
  bool integer = false;  // counts

  // "" when `value` is in range; else why not, e.g. "time_us = -3 is out of range: > 0 and at
  // most 1e+12 us".
  std::string Check(std::string_view metric, double value, std::string_view unit) const;
  std::string Describe() const;  // "> 0, at most 1e+12", "[0, 1]", ...
};

// One metric a runner reports, once per (cell, process, round).
struct MetricSpec {
  std::string name;      // [a-z][a-z0-9_]{0,63}
  std::string unit;      // "us", "tok/s", "1", ...
  bool required = true;  // false: reported only when the measurement exists (e.g. GPU clocks)
  MetricRange range;
};

// InvalidArgument naming the parameter when a runner would refuse a cell's parameters.
using ParamCheck = std::function<absl::Status(const nlohmann::json& params)>;

struct RunnerSchema {
  std::string name;  // "kernel", "engine"
  std::vector<MetricSpec> metrics;
  ParamCheck check_params;  // empty: any parameters (the runner checks at run time)

  const MetricSpec* FindMetric(std::string_view metric) const;
  int required_metric_count() const;
};

class RunnerSchemas {
 public:
  RunnerSchemas() = default;
  explicit RunnerSchemas(std::vector<RunnerSchema> schemas);

  // nullptr when no runner has that name.
  const RunnerSchema* Find(std::string_view runner) const;
  std::vector<std::string> names() const;
  // Replaces the parameter check of `runner` (the agent's checks are linked in above runner/).
  void SetParamCheck(const std::string& runner, ParamCheck check);

 private:
  std::map<std::string, RunnerSchema, std::less<>> schemas_;
};

// The metric schemas of the built-in runners (kernel, engine), without parameter checks.
const RunnerSchemas& BuiltinMetricSchemas();

// The schema of a `runner: command` run, named "command": the metrics its matrix declares, each
// with its declared unit and range (every range at most 1e18) and no parameter check (the
// program's parameters are the matrix author's; the argv is rendered, never run by a shell).
RunnerSchema CommandSchema(const std::vector<matrices::MetricDeclaration>& metrics);

// The primary metric of a matrix that names none: what every one of its cells records.
// kernel: time_us; engine: load_output_tok_s where cells are load cells (a `concurrency` or
// `request_rate` axis or fixed value: they send no batch-1 requests), else decode_tok_s;
// command: the first metric the matrix declares.
std::string DefaultMetric(const matrices::Matrix& matrix);

// [a-z][a-z0-9_]{0,63}: safe in CSV, SQL identifiers of reports, file names and HTML.
bool IsValidMetricName(std::string_view name);

}  // namespace ladder::runner
