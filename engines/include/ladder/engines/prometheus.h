// A parser for the Prometheus text exposition format (version 0.0.4), enough to read an
// engine's counters: comments (# HELP / # TYPE) are skipped; each sample line is
//   name{label="value",...} value [timestamp]
// with escaped label values (\\, \", \n) and the special values NaN, +Inf, -Inf.
//
// Thread safety: pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ladder::engines {

struct PrometheusSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// InvalidArgument with the 1-based line number on a malformed sample line.
absl::StatusOr<std::vector<PrometheusSample>> ParsePrometheusText(std::string_view text);

// The sum over all label sets of the counter `name`, matching `name` and `name_total` (the
// client libraries add the suffix; vLLM's counters appear as e.g.
// vllm:spec_decode_num_drafts_total{engine="0",model_name="..."}). nullopt when absent.
std::optional<double> SumCounter(const std::vector<PrometheusSample>& samples,
                                 std::string_view name);

}  // namespace ladder::engines
