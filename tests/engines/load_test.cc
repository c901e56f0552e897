// Load generation without an engine: the closed loop's concurrency, the open loop's arrival
// process, the summary's percentiles and goodput against hand-computed values, a stalled
// request, and cancellation.
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ladder/engines/load.h"

namespace ladder::engines {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

GenerationResult Result(double ms, int tokens) {
  GenerationResult g;
  g.total_ms = ms;
  g.ttft_ms = ms / 4;
  g.completion_tokens = tokens;
  g.gaps_ms = {ms / 8, ms / 8};
  return g;
}

TEST(Load, ClosedLoopHoldsConcurrencyInFlight) {
  LoadConfig c;
  c.concurrency = 4;
  c.num_requests = 36;
  c.warmup_requests = 4;
  std::atomic<int> in_flight{0}, max_in_flight{0};
  std::atomic<int> samples_at_n{0}, samples{0};
  std::mutex mu;
  std::multiset<int> sent;
  auto send = [&](int index, int, int out) -> absl::StatusOr<GenerationResult> {
    int now = ++in_flight;
    int seen = max_in_flight.load();
    while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      sent.insert(index);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    // Sampled mid-request: with a closed loop every other worker is mid-request too.
    ++samples;
    if (in_flight.load() == 4) ++samples_at_n;
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    --in_flight;
    return Result(30, out);
  };
  auto records = RunLoad(c, send, nullptr);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(records->size(), 40u);
  EXPECT_EQ(max_in_flight.load(), 4);
  // Each index exactly once, warm-up first.
  EXPECT_EQ(sent.size(), 40u);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(sent.count(i), 1u) << i;
  EXPECT_TRUE((*records)[3].warmup);
  EXPECT_FALSE((*records)[4].warmup);
  // Only the last requests (fewer than 4 left to send) run below 4 in flight; a little slack for
  // a worker caught between two requests on a loaded machine.
  EXPECT_GE(samples_at_n.load(), 30) << samples.load();
}

TEST(Load, OpenLoopArrivalsAreExponentialWithTheRate) {
  const double rate = 50;
  PoissonArrivals arrivals(rate, 7);
  const int n = 200000;
  double sum = 0, sum_sq = 0;
  int above_mean = 0;
  for (int i = 0; i < n; ++i) {
    double gap = arrivals.NextGapSeconds();
    ASSERT_GE(gap, 0);
    sum += gap;
    sum_sq += gap * gap;
    above_mean += gap > 1.0 / rate ? 1 : 0;
  }
  double mean = sum / n;
  double sd = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_NEAR(mean, 1.0 / rate, 0.01 / rate);                  // mean 1/rate
  EXPECT_NEAR(sd / mean, 1.0, 0.01);                           // exponential: cv = 1
  EXPECT_NEAR(above_mean / double(n), std::exp(-1.0), 0.005);  // P(gap > mean) = 1/e
  // Seeded: the same seed draws the same gaps, another seed others.
  PoissonArrivals a(rate, 11), b(rate, 11), other(rate, 12);
  double ga = a.NextGapSeconds();
  EXPECT_EQ(ga, b.NextGapSeconds());
  EXPECT_NE(ga, other.NextGapSeconds());
}

// An open loop sends at the arrival times whether or not earlier requests ended. Checked by
// events, not by a clock: every request waits until all 40 have been sent, which only an open
// loop can reach (a loop that waited for a reply would never send the second); and they are
// sent in arrival order.
TEST(Load, OpenLoopSendsAtTheArrivalTimes) {
  LoadConfig c;
  c.mode = LoadMode::kOpenLoop;
  c.request_rate = 200;
  c.num_requests = 40;
  c.warmup_requests = 0;
  c.seed = 3;
  std::mutex mu;
  std::condition_variable all_sent;
  int sent = 0;
  auto records = RunLoad(
      c,
      [&](int, int, int out) -> absl::StatusOr<GenerationResult> {
        std::unique_lock<std::mutex> lock(mu);
        ++sent;
        all_sent.notify_all();
        // A generous bound so that a broken loop fails the test instead of hanging it.
        if (!all_sent.wait_for(lock, std::chrono::seconds(120), [&] { return sent == 40; })) {
          return absl::DeadlineExceededError("not every request was sent while this one ran");
        }
        return Result(30, out);
      },
      nullptr);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 40u);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ((*records)[i].error, "") << i;
    EXPECT_EQ((*records)[i].index, i);
    const bool in_arrival_order = i == 0 || (*records)[i - 1].start_ms <= (*records)[i].start_ms;
    EXPECT_TRUE(in_arrival_order) << i;
  }
}

TEST(Load, SummaryMatchesHandComputedPercentiles) {
  LoadConfig c;
  c.slo_ttft_ms = 35;
  c.slo_itl_ms = 6;
  std::vector<RequestRecord> records;
  auto add = [&](int index, bool warmup, double start, double ttft, double e2e, int out,
                 std::vector<double> gaps, std::string error = "") {
    RequestRecord r;
    r.index = index;
    r.warmup = warmup;
    r.start_ms = start;
    r.ttft_ms = ttft;
    r.e2e_ms = e2e;
    r.tokens_out = out;
    r.gaps_ms = std::move(gaps);
    r.error = std::move(error);
    records.push_back(r);
  };
  add(0, true, 0, 900, 5000, 10, {900});  // warm-up: excluded everywhere
  add(1, false, 100, 10, 100, 10, {2, 4});
  add(2, false, 150, 20, 200, 20, {6, 8});
  add(3, false, 200, 30, 300, 30, {10});
  add(4, false, 250, 40, 400, 40, {1});
  add(5, false, 300, 50, 1800, 50, {3, 5});     // ends last: 2100 ms
  add(6, false, 310, 0, 7, 0, {}, "HTTP 500");  // failed: counted, not measured
  LoadSummary s = Summarize(c, records);
  EXPECT_EQ(s.measured, 5);
  EXPECT_EQ(s.failed, 1);
  EXPECT_DOUBLE_EQ(s.window_s, 2.0);            // 100 -> 2100 ms
  EXPECT_DOUBLE_EQ(s.output_tok_s, 150 / 2.0);  // 10+20+30+40+50 tokens
  EXPECT_DOUBLE_EQ(s.req_s, 2.5);
  // Closed loop at concurrency 1: the warm-up request (0-5000 ms) alone keeps one in flight
  // all through the window, which never runs below its level.
  EXPECT_DOUBLE_EQ(s.drain_share, 0);
  // At 3: in flight over the window [100, 2100] (warm-up and the failed request count) is 2 on
  // [100, 150), 3-6 until request 4 ends at 650, then 2 (warm-up and request 5): 50 + 1450 ms.
  c.concurrency = 3;
  EXPECT_DOUBLE_EQ(Summarize(c, records).drain_share, 0.75);
  // Open loop: the time after the last measured send (request 5's at 300 ms), 1800 of 2000.
  c.mode = LoadMode::kOpenLoop;
  c.request_rate = 2;
  EXPECT_DOUBLE_EQ(Summarize(c, records).drain_share, 0.9);
  c.mode = LoadMode::kClosedLoop;
  c.concurrency = 1;
  // TTFT 10,20,30,40,50: p50 = 30; p90 at rank 3.6 = 40 + 0.6*10; p99 at rank 3.96.
  EXPECT_DOUBLE_EQ(s.ttft_ms_p50, 30);
  EXPECT_DOUBLE_EQ(s.ttft_ms_p90, 46);
  EXPECT_DOUBLE_EQ(s.ttft_ms_p99, 49.6);
  // e2e 100,200,300,400,1800: p90 = 400 + 0.6*1400.
  EXPECT_DOUBLE_EQ(s.e2e_ms_p50, 300);
  EXPECT_DOUBLE_EQ(s.e2e_ms_p90, 1240);
  // Gaps pooled: 1,2,3,4,5,6,8,10 -> p50 at rank 3.5 = 4.5; p90 at rank 6.3 = 8 + 0.3*2.
  EXPECT_DOUBLE_EQ(s.itl_ms_p50, 4.5);
  EXPECT_DOUBLE_EQ(s.itl_ms_p90, 8.6);
  // TTFT <= 35 and mean gap <= 6: request 1 (10 ms, mean gap 3) only; 2's mean gap is 7, 3's
  // is 10, 4 and 5 start too late. One request in 2 s.
  ASSERT_TRUE(s.goodput_req_s.has_value());
  EXPECT_DOUBLE_EQ(*s.goodput_req_s, 0.5);
  c.slo_ttft_ms.reset();
  c.slo_itl_ms.reset();
  EXPECT_FALSE(Summarize(c, records).goodput_req_s.has_value());
}

TEST(Load, AStalledRequestDoesNotStallTheOthers) {
  LoadConfig c;
  c.concurrency = 4;
  c.num_requests = 40;
  c.warmup_requests = 0;
  auto records = RunLoad(
      c,
      [](int index, int, int out) -> absl::StatusOr<GenerationResult> {
        int ms = index == 2 ? 1500 : 10;
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        return Result(ms, out);
      },
      nullptr);
  ASSERT_TRUE(records.ok());
  const RequestRecord& stalled = (*records)[2];
  const double stalled_end = stalled.start_ms + stalled.e2e_ms;
  for (const auto& r : *records) {
    if (r.index == 2) continue;
    // Every other request was sent and answered while the stalled one hung.
    EXPECT_LT(r.start_ms + r.e2e_ms, stalled_end) << r.index;
  }
}

TEST(Load, FailuresAreRecordedNotFatal) {
  LoadConfig c;
  c.concurrency = 2;
  c.num_requests = 6;
  c.warmup_requests = 0;
  auto records = RunLoad(
      c,
      [](int index, int, int out) -> absl::StatusOr<GenerationResult> {
        if (index == 3) return absl::InternalError("HTTP 500");
        return Result(5, out);
      },
      nullptr);
  ASSERT_TRUE(records.ok());
  EXPECT_THAT((*records)[3].error, HasSubstr("HTTP 500"));
  EXPECT_EQ(Summarize(c, *records).failed, 1);
  EXPECT_EQ(Summarize(c, *records).measured, 5);
}

TEST(Load, CancelStopsTheLoadWithinASecond) {
  for (LoadMode mode : {LoadMode::kClosedLoop, LoadMode::kOpenLoop}) {
    LoadConfig c;
    c.mode = mode;
    c.concurrency = 4;
    c.request_rate = 0.5;  // open loop: the next arrival is seconds away on average
    c.num_requests = 100000;
    std::atomic<bool> cancelled{false};
    Clock::time_point cancelled_at;
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      cancelled_at = Clock::now();
      cancelled = true;
    });
    auto records = RunLoad(
        c,
        [](int, int, int out) -> absl::StatusOr<GenerationResult> {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          return Result(100, out);
        },
        [&] { return cancelled.load(); });
    Clock::time_point returned = Clock::now();
    canceller.join();
    EXPECT_EQ(records.status().code(), absl::StatusCode::kCancelled);
    EXPECT_LT(returned - cancelled_at, std::chrono::seconds(1));
  }
}

TEST(Load, LengthsAreFixedOrSeededWithinTheSpread) {
  LoadConfig c;
  c.input_tokens = 1000;
  c.output_tokens = 100;
  EXPECT_EQ(RequestLengths(c, 5), std::make_pair(1000, 100));
  c.length_spread = 0.5;
  c.seed = 9;
  std::set<int> inputs;
  for (int i = 0; i < 200; ++i) {
    auto [in, out] = RequestLengths(c, i);
    EXPECT_GE(in, 500);
    EXPECT_LE(in, 1500);
    EXPECT_GE(out, 50);
    EXPECT_LE(out, 150);
    EXPECT_EQ(RequestLengths(c, i), std::make_pair(in, out));  // the same every time
    inputs.insert(in);
  }
  EXPECT_GT(inputs.size(), 100u);
}

TEST(Load, ParametersAreCheckedTogether) {
  auto config = [](nlohmann::json p) {
    p["engine"] = "synthetic";
    if (!p.contains("depth")) p["depth"] = 128;
    return LoadConfigFromParams(p, 1);
  };
  EXPECT_THAT(config({{"concurrency", 4}, {"request_rate", 2.0}}).status().message(),
              HasSubstr("not both"));
  EXPECT_THAT(config({{"request_rate", 0.0}}).status().message(), HasSubstr("request_rate"));
  EXPECT_THAT(config({{"concurrency", 2}, {"length_spread", 1.5}}).status().message(),
              HasSubstr("length_spread"));
  auto closed = config({{"concurrency", 8}});
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(closed->mode, LoadMode::kClosedLoop);
  EXPECT_EQ(closed->warmup_requests, 8);
  EXPECT_EQ(closed->num_requests, 32);
  EXPECT_EQ(closed->input_tokens, 128);
  auto timed = config({{"request_rate", 4.0}, {"duration_s", 2.5}});
  ASSERT_TRUE(timed.ok());
  EXPECT_EQ(timed->mode, LoadMode::kOpenLoop);
  EXPECT_EQ(timed->num_requests, 0);
  EXPECT_EQ(timed->duration, std::chrono::milliseconds(2500));
  EXPECT_FALSE(HasLoadParams({{"depth", 1}, {"engine", "vllm"}}));
}

TEST(Load, RecordChunksStayWithinTheEvidenceLimit) {
  std::vector<RequestRecord> records(3000);
  for (int i = 0; i < 3000; ++i) {
    records[i].index = i;
    records[i].gaps_ms = {1.23456, 2.5};
  }
  auto chunks = RecordChunks(records, 60 * 1024);
  ASSERT_GT(chunks.size(), 1u);
  size_t rows = 0;
  for (const auto& chunk : chunks) {
    EXPECT_LE(chunk.dump().size(), 60u * 1024);
    rows += chunk.size();
  }
  EXPECT_EQ(rows, 3000u);
  EXPECT_EQ(chunks[0][0][7], 1.867);  // mean gap, rounded to µs
}

}  // namespace
}  // namespace ladder::engines
