#include "ladder/runner/schema.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace ladder::runner {
namespace {

// The shortest text that reads back as exactly `value` ("1e+16", "10000000000000002", "-3"):
// a refusal must show the value refused, not a %g rounding of it that looks in range.
std::string ExactNumber(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

}  // namespace

std::string MetricRange::Describe() const {
  const std::string max_text = ExactNumber(max);
  switch (kind) {
    case Kind::kPositive:
      return absl::StrCat("> 0, at most ", max_text);
    case Kind::kNonNegative:
      return absl::StrCat(">= 0, at most ", max_text, integer ? ", a whole number" : "");
    case Kind::kAtLeastOne:
      return absl::StrCat(">= 1, at most ", max_text, integer ? ", a whole number" : "");
    case Kind::kShare:
      return "in [0, 1]";
  }
  return "";
}

std::string MetricRange::Check(std::string_view metric, double value, std::string_view unit) const {
  bool ok = std::isfinite(value) && value <= max;
  switch (kind) {
    case Kind::kPositive:
      ok = ok && value > 0;
      break;
    case Kind::kNonNegative:
      ok = ok && value >= 0;
      break;
    case Kind::kAtLeastOne:
      ok = ok && value >= 1;
      break;
    case Kind::kShare:
      ok = ok && value >= 0 && value <= 1;
      break;
  }
  if (ok && integer && value != std::floor(value)) ok = false;
  if (ok) return "";
  return absl::StrCat(std::string(metric), " = ", ExactNumber(value),
                      " is out of range: ", Describe(), " (", std::string(unit), ")");
}

const MetricSpec* RunnerSchema::FindMetric(std::string_view metric) const {
  for (const auto& m : metrics) {
    if (m.name == metric) return &m;
  }
  return nullptr;
}

int RunnerSchema::required_metric_count() const {
  return static_cast<int>(std::count_if(metrics.begin(), metrics.end(),
                                        [](const MetricSpec& m) { return m.required; }));
}

RunnerSchemas::RunnerSchemas(std::vector<RunnerSchema> schemas) {
  for (auto& s : schemas) {
    std::string name = s.name;
    schemas_.emplace(std::move(name), std::move(s));
  }
}

const RunnerSchema* RunnerSchemas::Find(std::string_view runner) const {
  auto it = schemas_.find(runner);
  return it == schemas_.end() ? nullptr : &it->second;
}

std::vector<std::string> RunnerSchemas::names() const {
  std::vector<std::string> out;
  for (const auto& [name, schema] : schemas_) out.push_back(name);
  return out;
}

void RunnerSchemas::SetParamCheck(const std::string& runner, ParamCheck check) {
  auto it = schemas_.find(runner);
  if (it != schemas_.end()) it->second.check_params = std::move(check);
}

const RunnerSchemas& BuiltinMetricSchemas() {
  static const RunnerSchemas schemas({
      RunnerSchema{"kernel",
                   {
                       {"time_us", "us", true, {MetricRange::Kind::kPositive}},
                       {"time_us_min", "us", true, {MetricRange::Kind::kPositive}},
                       {"bytes_per_s", "B/s", true, {MetricRange::Kind::kPositive, 1e16}},
                       {"segments", "1", true, {MetricRange::Kind::kAtLeastOne, 1e9, true}},
                       // Only where the copy ceiling was measured (GPU backends).
                       {"fraction_of_copy", "1", false, {MetricRange::Kind::kPositive, 100}},
                       // Only where NVML reads the SM clock.
                       {"gpu_clock_mhz", "MHz", false, {MetricRange::Kind::kPositive, 1e5}},
                       {"gpu_clock_default_mhz", "MHz", false, {MetricRange::Kind::kPositive, 1e5}},
                   },
                   {}},
      RunnerSchema{
          "engine",
          {
              // Every engine cell: batch-1 cells the long request's TTFT, load
              // cells the median TTFT of their measured requests.
              {"ttft_ms", "ms", true, {MetricRange::Kind::kPositive}},
              // Batch-1 differencing cells (the default) record both; load cells
              // (concurrency or request_rate) do not send these two requests.
              {"t_short_ms", "ms", false, {MetricRange::Kind::kPositive}},
              {"t_long_ms", "ms", false, {MetricRange::Kind::kPositive}},
              // Only when the long request decoded more tokens in more time than the
              // short one (else a `measurement_note` says why).
              {"decode_tok_s", "tok/s", false, {MetricRange::Kind::kPositive}},
              // The long request's streamed rate: (tokens - 1) / (last - first
              // event carrying text); and the engine's own (llama.cpp timings).
              {"decode_tok_s_stream", "tok/s", false, {MetricRange::Kind::kPositive}},
              {"engine_decode_tok_s", "tok/s", false, {MetricRange::Kind::kPositive}},
              {"itl_ms_p50", "ms", false, {MetricRange::Kind::kNonNegative}},
              {"itl_ms_p90", "ms", false, {MetricRange::Kind::kNonNegative}},
              {"itl_ms_mean", "ms", false, {MetricRange::Kind::kNonNegative}},
              // Only where the engine exports speculative-decoding counters.
              {"spec_drafts", "1", false, {MetricRange::Kind::kNonNegative, 1e12, true}},
              {"spec_draft_tokens", "1", false, {MetricRange::Kind::kNonNegative, 1e12, true}},
              {"spec_accepted_tokens", "1", false, {MetricRange::Kind::kNonNegative, 1e12, true}},
              {"acceptance_rate", "1", false, {MetricRange::Kind::kShare}},
              {"mean_acceptance_length", "tok", false, {MetricRange::Kind::kAtLeastOne, 1e6}},
              // Load cells (docs/engines.md, "Load"): over the round's measured
              // requests, warm-up excluded.
              {"load_output_tok_s", "tok/s", false, {MetricRange::Kind::kPositive}},
              {"load_req_s", "req/s", false, {MetricRange::Kind::kPositive}},
              {"load_drain_share", "1", false, {MetricRange::Kind::kShare}},
              {"load_goodput_req_s", "req/s", false, {MetricRange::Kind::kNonNegative}},
              {"load_ttft_ms_p50", "ms", false, {MetricRange::Kind::kPositive}},
              {"load_ttft_ms_p90", "ms", false, {MetricRange::Kind::kPositive}},
              {"load_ttft_ms_p99", "ms", false, {MetricRange::Kind::kPositive}},
              {"load_itl_ms_p50", "ms", false, {MetricRange::Kind::kNonNegative}},
              {"load_itl_ms_p90", "ms", false, {MetricRange::Kind::kNonNegative}},
              {"load_itl_ms_p99", "ms", false, {MetricRange::Kind::kNonNegative}},
              {"load_e2e_ms_p50", "ms", false, {MetricRange::Kind::kPositive}},
              {"load_e2e_ms_p90", "ms", false, {MetricRange::Kind::kPositive}},
              {"load_e2e_ms_p99", "ms", false, {MetricRange::Kind::kPositive}},
              {"load_requests", "1", false, {MetricRange::Kind::kNonNegative, 1e12, true}},
              {"load_failed_requests", "1", false, {MetricRange::Kind::kNonNegative, 1e12, true}},
          },
          {}},
  });
  return schemas;
}

RunnerSchema CommandSchema(const std::vector<matrices::MetricDeclaration>& metrics) {
  RunnerSchema schema;
  schema.name = "command";
  for (const auto& d : metrics) {
    MetricRange range;
    range.max = 1e18;
    switch (d.range) {
      case matrices::MetricDeclaration::Range::kPositive:
        range.kind = MetricRange::Kind::kPositive;
        break;
      case matrices::MetricDeclaration::Range::kNonNegative:
        range.kind = MetricRange::Kind::kNonNegative;
        break;
      case matrices::MetricDeclaration::Range::kShare:
        range.kind = MetricRange::Kind::kShare;
        break;
      case matrices::MetricDeclaration::Range::kAtLeastOne:
        range.kind = MetricRange::Kind::kAtLeastOne;
        break;
    }
    schema.metrics.push_back(MetricSpec{d.name, d.unit, d.required, range});
  }
  return schema;
}

std::string DefaultMetric(const matrices::Matrix& matrix) {
  if (matrix.runner == "command") return matrix.metrics.empty() ? "" : matrix.metrics[0].name;
  if (matrix.runner != "engine") return "time_us";
  for (const char* load_param : {"concurrency", "request_rate"}) {
    if (matrix.fixed.count(load_param) > 0) return "load_output_tok_s";
    for (const auto& axis : matrix.axes) {
      if (axis.name == load_param) return "load_output_tok_s";
    }
  }
  return "decode_tok_s";
}

bool IsValidMetricName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  if (name[0] < 'a' || name[0] > 'z') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace ladder::runner
