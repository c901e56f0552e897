#include "ladder/runner/schema.h"

#include <algorithm>

namespace ladder::runner {

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
                       {"time_us", "us", true},
                       {"time_us_min", "us", true},
                       {"bytes_per_s", "B/s", true},
                       {"segments", "1", true},
                       // Only where the copy ceiling was measured (GPU backends).
                       {"fraction_of_copy", "1", false},
                       // Only where NVML reads the SM clock.
                       {"gpu_clock_mhz", "MHz", false},
                       {"gpu_clock_default_mhz", "MHz", false},
                   },
                   {}},
      RunnerSchema{"engine",
                   {
                       // Every engine cell: batch-1 cells the long request's TTFT, load
                       // cells the median TTFT of their measured requests.
                       {"ttft_ms", "ms", true},
                       // Batch-1 differencing cells (the default) record both; load cells
                       // (concurrency or request_rate) do not send these two requests.
                       {"t_short_ms", "ms", false},
                       {"t_long_ms", "ms", false},
                       // Only when the long request decoded more tokens in more time than the
                       // short one (else a `measurement_note` says why).
                       {"decode_tok_s", "tok/s", false},
                       // The long request's streamed rate: (tokens - 1) / (last - first
                       // event carrying text); and the engine's own (llama.cpp timings).
                       {"decode_tok_s_stream", "tok/s", false},
                       {"engine_decode_tok_s", "tok/s", false},
                       {"itl_ms_p50", "ms", false},
                       {"itl_ms_p90", "ms", false},
                       {"itl_ms_mean", "ms", false},
                       // Only where the engine exports speculative-decoding counters.
                       {"spec_drafts", "1", false},
                       {"spec_draft_tokens", "1", false},
                       {"spec_accepted_tokens", "1", false},
                       {"acceptance_rate", "1", false},
                       {"mean_acceptance_length", "tok", false},
                       // Load cells (docs/engines.md, "Load"): over the round's measured
                       // requests, warm-up excluded.
                       {"load_output_tok_s", "tok/s", false},
                       {"load_req_s", "req/s", false},
                       {"load_drain_share", "1", false},
                       {"load_goodput_req_s", "req/s", false},
                       {"load_ttft_ms_p50", "ms", false},
                       {"load_ttft_ms_p90", "ms", false},
                       {"load_ttft_ms_p99", "ms", false},
                       {"load_itl_ms_p50", "ms", false},
                       {"load_itl_ms_p90", "ms", false},
                       {"load_itl_ms_p99", "ms", false},
                       {"load_e2e_ms_p50", "ms", false},
                       {"load_e2e_ms_p90", "ms", false},
                       {"load_e2e_ms_p99", "ms", false},
                       {"load_requests", "1", false},
                       {"load_failed_requests", "1", false},
                   },
                   {}},
  });
  return schemas;
}

bool IsValidMetricName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  if (name[0] < 'a' || name[0] > 'z') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace ladder::runner
