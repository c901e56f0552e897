// Load generation for engine cells: many requests at once, closed or open loop, and the
// per-request records and per-cell summary a serving benchmark reports.
//
//   closed loop (`concurrency: N`): N workers, each sends its next request when its last one
//     ends, so N requests are in flight from the first send until the last requests drain.
//   open loop (`request_rate: R`, req/s): requests are sent at Poisson arrival times (gaps drawn
//     from an exponential distribution of mean 1/R, seeded), whether or not earlier ones ended.
//
// A run is `num_requests` measured requests, or as many as start within `duration`, after
// `warmup_requests` that are sent the same way but excluded from the summary. Input and output
// lengths are fixed, or drawn per request uniformly within ±length_spread of the given length
// from the run's seed, so a rerun sends the same lengths.
//
// Errors: RunLoad returns Cancelled when `cancelled` turned true (checked at least every 50 ms
// while waiting, and before every send); a failing request is recorded (RequestRecord::error) and
// does not stop the others. Thread safety: RunLoad calls `send` from several threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/engines/client.h"

namespace ladder::engines {

enum class LoadMode { kClosedLoop, kOpenLoop };

struct LoadConfig {
  LoadMode mode = LoadMode::kClosedLoop;
  int concurrency = 1;                    // closed loop: requests in flight
  double request_rate = 0;                // open loop: mean arrivals per second
  int num_requests = 32;                  // measured requests; 0 with a duration: as many as fit
  std::chrono::milliseconds duration{0};  // > 0: stop sending new measured requests after it
  int warmup_requests = 0;                // sent first, excluded from the summary
  int input_tokens = 1;                   // prompt length (the cell's depth)
  int output_tokens = 64;
  double length_spread = 0;  // 0: fixed lengths; s: uniform in [L(1-s), L(1+s)]
  uint64_t seed = 0;
  std::optional<double> slo_ttft_ms;  // goodput: TTFT at most this
  std::optional<double> slo_itl_ms;   // goodput: mean inter-token gap at most this
  int max_open_requests = 1024;       // open loop: sends wait while this many are in flight

  // InvalidArgument naming the field.
  absl::Status Validate() const;
  int total_requests() const { return warmup_requests + num_requests; }
};

// The parameters a cell may give for load (`concurrency`, `request_rate`, `num_requests`,
// `duration_s`, `warmup_requests`, `output_tokens`, `length_spread`, `slo_ttft_ms`,
// `slo_itl_ms`), as ParamSpecs for validation, and whether a cell asks for load at all.
bool HasLoadParams(const nlohmann::json& params);
// The cell's load configuration (input length from `depth`); InvalidArgument naming the
// parameter for an inconsistent one (both concurrency and request_rate, a rate <= 0, ...).
absl::StatusOr<LoadConfig> LoadConfigFromParams(const nlohmann::json& params, uint64_t seed);

// Exponential gaps of mean 1 / rate, from splitmix64 seeded with `seed`.
class PoissonArrivals {
 public:
  PoissonArrivals(double rate_per_s, uint64_t seed);
  double NextGapSeconds();

 private:
  double rate_;
  uint64_t state_;
};

// The (input, output) lengths of request `index`.
std::pair<int, int> RequestLengths(const LoadConfig& config, int index);

struct RequestRecord {
  int index = 0;
  bool warmup = false;
  double start_ms = 0;  // since the load began (steady clock)
  double ttft_ms = 0;
  double e2e_ms = 0;
  int tokens_in = 0;
  int tokens_out = 0;
  std::vector<double> gaps_ms;
  std::string error;  // empty: the request succeeded
};

// Sends request `index` with a prompt of `input_tokens` for `output_tokens`.
using SendFn =
    std::function<absl::StatusOr<GenerationResult>(int index, int input_tokens, int output_tokens)>;

absl::StatusOr<std::vector<RequestRecord>> RunLoad(const LoadConfig& config, const SendFn& send,
                                                   const std::function<bool()>& cancelled);

// Over the measured (not warm-up) requests that succeeded.
struct LoadSummary {
  int measured = 0;     // measured requests that succeeded
  int failed = 0;       // measured requests that failed
  double window_s = 0;  // first measured send -> last measured end
  // The share of the window run below the set load, when throughput reads low. Closed loop: the
  // time fewer than `concurrency` requests (warm-up and failed ones included) were in flight, as
  // at the start while the warm-up hands over and in the drain after the last send. Open loop:
  // the time after the last measured send. Near 0 when the window is long against a request.
  double drain_share = 0;
  double output_tok_s = 0;  // their output tokens / window
  double req_s = 0;         // measured / window
  double ttft_ms_p50 = 0, ttft_ms_p90 = 0, ttft_ms_p99 = 0;
  double itl_ms_p50 = 0, itl_ms_p90 = 0, itl_ms_p99 = 0;  // all their gaps, pooled
  double e2e_ms_p50 = 0, e2e_ms_p90 = 0, e2e_ms_p99 = 0;
  std::optional<double> goodput_req_s;  // requests within every given SLO / window
};
LoadSummary Summarize(const LoadConfig& config, const std::vector<RequestRecord>& records);

// The records as compact JSON rows ([index, warmup, start_ms, ttft_ms, e2e_ms, tokens_in,
// tokens_out, itl_mean_ms, itl_max_ms, error]) split into chunks of at most `max_bytes`
// serialized, for evidence records.
std::vector<nlohmann::json> RecordChunks(const std::vector<RequestRecord>& records,
                                         size_t max_bytes);

}  // namespace ladder::engines
