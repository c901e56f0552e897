#include "ladder/engines/load.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "ladder/common/mutex.h"
#include "ladder/common/random.h"
#include "ladder/common/time.h"
#include "message.h"
#include "params.h"

namespace ladder::engines {

using internal::Cat;

namespace {

using Clock = std::chrono::steady_clock;

// Sleeps until `until`, in slices, returning false as soon as `cancelled` turns true.
bool SleepUntil(Clock::time_point until, const std::function<bool()>& cancelled) {
  while (Clock::now() < until) {
    if (cancelled && cancelled()) return false;
    std::this_thread::sleep_for(
        std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(50)));
  }
  return !(cancelled && cancelled());
}

const char* const kLoadParams[] = {"concurrency",   "request_rate",    "num_requests",
                                   "duration_s",    "warmup_requests", "output_tokens",
                                   "length_spread", "slo_ttft_ms",     "slo_itl_ms"};

}  // namespace

absl::Status LoadConfig::Validate() const {
  auto bad = [](std::string_view field, std::string_view why) {
    return absl::InvalidArgumentError(Cat("load: ", field, ": ", why));
  };
  if (mode == LoadMode::kClosedLoop && concurrency < 1) return bad("concurrency", "must be >= 1");
  if (mode == LoadMode::kOpenLoop && !(request_rate > 0 && std::isfinite(request_rate))) {
    return bad("request_rate", "must be a positive number of requests per second");
  }
  if (num_requests < 0) return bad("num_requests", "must be >= 0");
  if (num_requests == 0 && duration.count() <= 0) {
    return bad("num_requests", "give num_requests or duration_s");
  }
  if (warmup_requests < 0) return bad("warmup_requests", "must be >= 0");
  if (input_tokens < 1) return bad("depth", "must be >= 1");
  if (output_tokens < 1) return bad("output_tokens", "must be >= 1");
  if (!(length_spread >= 0 && length_spread < 1)) return bad("length_spread", "must be in [0, 1)");
  if (slo_ttft_ms && !(*slo_ttft_ms > 0)) return bad("slo_ttft_ms", "must be > 0");
  if (slo_itl_ms && !(*slo_itl_ms > 0)) return bad("slo_itl_ms", "must be > 0");
  if (max_open_requests < 1) return bad("max_open_requests", "must be >= 1");
  return absl::OkStatus();
}

bool HasLoadParams(const nlohmann::json& params) {
  if (!params.is_object()) return false;
  for (const char* name : kLoadParams) {
    if (params.contains(name) && !params[name].is_null()) return true;
  }
  return false;
}

absl::StatusOr<LoadConfig> LoadConfigFromParams(const nlohmann::json& params, uint64_t seed) {
  const std::string engine = internal::GetString(params, "engine").value_or("engine");
  LoadConfig c;
  c.seed = seed;
  auto concurrency = internal::GetInt(params, "concurrency");
  auto rate = internal::GetNumber(params, "request_rate");
  if (concurrency.has_value() && rate.has_value()) {
    return internal::ParamError(engine, "request_rate",
                                "give concurrency (closed loop) or request_rate (open loop), "
                                "not both");
  }
  if (rate.has_value()) {
    c.mode = LoadMode::kOpenLoop;
    c.request_rate = *rate;
    if (!(*rate > 0)) return internal::ParamError(engine, "request_rate", "must be > 0");
  } else {
    c.mode = LoadMode::kClosedLoop;
    c.concurrency = static_cast<int>(concurrency.value_or(1));
  }
  auto duration_s = internal::GetNumber(params, "duration_s");
  if (duration_s.has_value()) {
    if (!(*duration_s > 0)) return internal::ParamError(engine, "duration_s", "must be > 0");
    c.duration = std::chrono::milliseconds(static_cast<int64_t>(*duration_s * 1000));
  }
  auto num = internal::GetInt(params, "num_requests");
  c.num_requests = static_cast<int>(num.value_or(duration_s.has_value() ? 0 : 32));
  // Closed loop: the first `concurrency` requests start together (a burst of prefills no later
  // request sees), so by default they are the warm-up.
  c.warmup_requests =
      static_cast<int>(internal::GetInt(params, "warmup_requests")
                           .value_or(c.mode == LoadMode::kClosedLoop ? c.concurrency : 1));
  c.input_tokens = static_cast<int>(internal::GetInt(params, "depth").value_or(1));
  c.output_tokens =
      static_cast<int>(internal::GetInt(params, "output_tokens")
                           .value_or(internal::GetInt(params, "long_tokens").value_or(64)));
  c.length_spread = internal::GetNumber(params, "length_spread").value_or(0);
  c.slo_ttft_ms = internal::GetNumber(params, "slo_ttft_ms");
  c.slo_itl_ms = internal::GetNumber(params, "slo_itl_ms");
  if (absl::Status s = c.Validate(); !s.ok()) {
    // "load: FIELD: why" -> a parameter error naming FIELD, so validate can point at it.
    std::string message(s.message());
    std::string field = message.substr(6, message.find(':', 6) - 6);
    return internal::ParamError(engine, field, message.substr(message.find(':', 6) + 2));
  }
  return c;
}

PoissonArrivals::PoissonArrivals(double rate_per_s, uint64_t seed)
    : rate_(rate_per_s), state_(seed ^ 0x706f6973736f6eULL) {}

double PoissonArrivals::NextGapSeconds() {
  // Inverse transform: -ln(1 - U) / rate, U in [0, 1), so the argument of log is in (0, 1].
  return -std::log1p(-SplitMix64Unit(state_)) / rate_;
}

std::pair<int, int> RequestLengths(const LoadConfig& config, int index) {
  if (config.length_spread <= 0) return {config.input_tokens, config.output_tokens};
  uint64_t state = config.seed ^ (0x6c656e67ULL * (static_cast<uint64_t>(index) + 1));
  auto draw = [&](int length) {
    double lo = length * (1 - config.length_spread);
    double hi = length * (1 + config.length_spread);
    return std::max(1, static_cast<int>(std::lround(lo + (hi - lo) * SplitMix64Unit(state))));
  };
  int in = draw(config.input_tokens);
  int out = draw(config.output_tokens);
  return {in, out};
}

absl::StatusOr<std::vector<RequestRecord>> RunLoad(const LoadConfig& config, const SendFn& send,
                                                   const std::function<bool()>& cancelled) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  const Clock::time_point start = Clock::now();
  const bool timed = config.duration.count() > 0;
  const int total =
      config.num_requests > 0 ? config.total_requests() : std::numeric_limits<int>::max();
  std::optional<Clock::time_point> measure_deadline;  // set once the warm-up has been sent

  Mutex mu;
  std::condition_variable cv;
  // Locals cannot carry ABSL_GUARDED_BY: these two are guarded by mu.
  std::vector<RequestRecord> records;
  int in_flight = 0;
  auto is_cancelled = [&] { return cancelled && cancelled(); };
  auto run_one = [&](int index, Clock::time_point sent) {
    auto [in, out] = RequestLengths(config, index);
    RequestRecord rec;
    rec.index = index;
    rec.warmup = index < config.warmup_requests;
    rec.start_ms = MsBetween(start, sent);
    rec.tokens_in = in;
    absl::StatusOr<GenerationResult> result = send(index, in, out);
    if (result.ok()) {
      rec.ttft_ms = result->ttft_ms;
      rec.e2e_ms = result->total_ms;
      rec.tokens_out = result->completion_tokens;
      rec.gaps_ms = std::move(result->gaps_ms);
    } else {
      rec.e2e_ms = MsBetween(sent, Clock::now());
      rec.error = std::string(result.status().message());
    }
    MutexLock lock(&mu);
    records.push_back(std::move(rec));
    --in_flight;
    cv.notify_all();
  };
  // Whether request `index` may still start: within the count, and within the duration once
  // the warm-up is done.
  auto may_start = [&](int index) {
    if (index >= total || is_cancelled()) return false;
    if (timed && index >= config.warmup_requests) {
      MutexLock lock(&mu);
      if (!measure_deadline.has_value()) measure_deadline = Clock::now() + config.duration;
      if (Clock::now() >= *measure_deadline) return false;
    }
    return true;
  };

  std::vector<std::thread> threads;
  if (config.mode == LoadMode::kClosedLoop) {
    std::atomic<int> next{0};
    for (int w = 0; w < config.concurrency; ++w) {
      threads.emplace_back([&] {
        while (true) {
          int index = next.fetch_add(1);
          if (!may_start(index)) return;
          {
            MutexLock lock(&mu);
            ++in_flight;
          }
          run_one(index, Clock::now());
        }
      });
    }
  } else {
    PoissonArrivals arrivals(config.request_rate, config.seed);
    Clock::time_point at = start;
    for (int index = 0;; ++index) {
      if (index > 0) {
        at += std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(arrivals.NextGapSeconds()));
      }
      if (!SleepUntil(at, cancelled) || !may_start(index)) break;
      {
        MutexLock lock(&mu);
        // A full house delays the send (recorded as sent later), never drops it.
        while (in_flight >= config.max_open_requests && !is_cancelled()) {
          mu.WaitUntil(cv, Clock::now() + std::chrono::milliseconds(50),
                       [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
                         return in_flight < config.max_open_requests;  // called with mu held
                       });
        }
        ++in_flight;
      }
      threads.emplace_back(run_one, index, Clock::now());
    }
  }
  for (auto& t : threads) t.join();
  if (is_cancelled()) return absl::CancelledError("load: cancelled");
  std::sort(records.begin(), records.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.index < b.index; });
  return records;
}

namespace {

// The time within [from, to] (ms) during which fewer than `level` of the records were in flight.
double TimeBelowLevel(const std::vector<RequestRecord>& records, int level, double from,
                      double to) {
  std::vector<std::pair<double, int>> events;  // (time, +1 start / -1 end)
  events.reserve(2 * records.size());
  for (const auto& r : records) {
    events.emplace_back(r.start_ms, +1);
    events.emplace_back(r.start_ms + r.e2e_ms, -1);
  }
  // At equal times starts go first: a closed loop's next send follows its last end at once.
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  });
  double below = 0, at = from;
  int in_flight = 0;
  for (const auto& [t, step] : events) {
    const double clipped = std::min(std::max(t, from), to);
    if (in_flight < level) below += clipped - at;
    at = clipped;
    in_flight += step;
  }
  if (in_flight < level) below += to - at;
  return below;
}

}  // namespace

LoadSummary Summarize(const LoadConfig& config, const std::vector<RequestRecord>& records) {
  LoadSummary s;
  std::vector<double> ttft, itl, e2e;
  double first = 0, last = 0, last_send = 0;
  double output_tokens = 0;
  int good = 0;
  for (const auto& r : records) {
    if (r.warmup) continue;
    if (!r.error.empty()) {
      ++s.failed;
      continue;
    }
    if (s.measured == 0 || r.start_ms < first) first = r.start_ms;
    last = std::max(last, r.start_ms + r.e2e_ms);
    last_send = std::max(last_send, r.start_ms);
    ++s.measured;
    output_tokens += r.tokens_out;
    ttft.push_back(r.ttft_ms);
    e2e.push_back(r.e2e_ms);
    itl.insert(itl.end(), r.gaps_ms.begin(), r.gaps_ms.end());
    bool within = true;
    if (config.slo_ttft_ms && r.ttft_ms > *config.slo_ttft_ms) within = false;
    if (config.slo_itl_ms && !r.gaps_ms.empty()) {
      double mean = 0;
      for (double g : r.gaps_ms) mean += g;
      mean /= static_cast<double>(r.gaps_ms.size());
      if (mean > *config.slo_itl_ms) within = false;
    }
    good += within ? 1 : 0;
  }
  if (s.measured == 0) return s;
  s.window_s = (last - first) / 1000.0;
  if (s.window_s > 0) {
    s.output_tok_s = output_tokens / s.window_s;
    s.req_s = s.measured / s.window_s;
    s.drain_share = config.mode == LoadMode::kClosedLoop
                        ? TimeBelowLevel(records, config.concurrency, first, last) / (last - first)
                        : (last - last_send) / (last - first);
    if (config.slo_ttft_ms || config.slo_itl_ms) s.goodput_req_s = good / s.window_s;
  }
  s.ttft_ms_p50 = Percentile(ttft, 50);
  s.ttft_ms_p90 = Percentile(ttft, 90);
  s.ttft_ms_p99 = Percentile(ttft, 99);
  s.itl_ms_p50 = Percentile(itl, 50);
  s.itl_ms_p90 = Percentile(itl, 90);
  s.itl_ms_p99 = Percentile(itl, 99);
  s.e2e_ms_p50 = Percentile(e2e, 50);
  s.e2e_ms_p90 = Percentile(e2e, 90);
  s.e2e_ms_p99 = Percentile(e2e, 99);
  return s;
}

std::vector<nlohmann::json> RecordChunks(const std::vector<RequestRecord>& records,
                                         size_t max_bytes) {
  auto round3 = [](double v) { return std::round(v * 1000.0) / 1000.0; };
  std::vector<nlohmann::json> chunks;
  nlohmann::json rows = nlohmann::json::array();
  size_t bytes = 2;
  for (const auto& r : records) {
    double mean = 0, max = 0;
    for (double g : r.gaps_ms) {
      mean += g;
      max = std::max(max, g);
    }
    if (!r.gaps_ms.empty()) mean /= static_cast<double>(r.gaps_ms.size());
    nlohmann::json row = {
        r.index,     r.warmup,     round3(r.start_ms), round3(r.ttft_ms), round3(r.e2e_ms),
        r.tokens_in, r.tokens_out, round3(mean),       round3(max),       r.error.substr(0, 200)};
    size_t row_bytes = row.dump().size() + 1;
    if (!rows.empty() && bytes + row_bytes > max_bytes) {
      chunks.push_back(std::move(rows));
      rows = nlohmann::json::array();
      bytes = 2;
    }
    rows.push_back(std::move(row));
    bytes += row_bytes;
  }
  if (!rows.empty()) chunks.push_back(std::move(rows));
  return chunks;
}

}  // namespace ladder::engines
