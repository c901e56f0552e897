// Load cells through the EngineRunner against the synthetic engine: a concurrency sweep on one
// engine, the load metrics and per-request evidence, a request the engine stalls, and cancel.
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runner_harness.h"

namespace ladder::engines {
namespace {

using harness::Cell;
using harness::FakeSink;
using harness::Options;
using harness::Unit;
using Clock = std::chrono::steady_clock;

nlohmann::json LoadCell(int concurrency) {
  return {{"depth", 128},
          {"concurrency", concurrency},
          {"num_requests", 8},
          {"output_tokens", 12},
          {"slo_ttft_ms", 60000}};
}

TEST(EngineLoad, ConcurrencyIsAnAxisOnOneEngine) {
  FakeSink sink;
  EngineRunner runner(Options());
  absl::Status s = runner.Run(Unit({Cell(1, LoadCell(1)), Cell(2, LoadCell(4))}), sink);
  ASSERT_TRUE(s.ok()) << s;
  for (int64_t cell : {1, 2}) {
    EXPECT_EQ(sink.Values(cell, "load_requests"), std::vector<double>{8}) << cell;
    EXPECT_EQ(sink.Values(cell, "load_failed_requests"), std::vector<double>{0}) << cell;
    ASSERT_EQ(sink.Values(cell, "load_output_tok_s").size(), 1u);
    EXPECT_GT(sink.Values(cell, "load_output_tok_s")[0], 0);
    // Everything finished within the generous SLO: goodput is the request rate.
    EXPECT_DOUBLE_EQ(sink.Values(cell, "load_goodput_req_s")[0],
                     sink.Values(cell, "load_req_s")[0]);
    ASSERT_EQ(sink.Values(cell, "ttft_ms").size(), 1u);
    EXPECT_EQ(sink.Values(cell, "ttft_ms")[0], sink.Values(cell, "load_ttft_ms_p50")[0]);
    EXPECT_LE(sink.Values(cell, "load_ttft_ms_p50")[0], sink.Values(cell, "load_ttft_ms_p99")[0]);
    EXPECT_TRUE(sink.Values(cell, "t_short_ms").empty());  // no batch-1 pair in a load cell
    const runner::Evidence* rows = sink.Find(cell, "load_requests");
    ASSERT_NE(rows, nullptr);
    // Warm-up (the concurrency) plus the measured requests, one row each.
    EXPECT_EQ(rows->value["rows"].size(), cell == 1 ? 9u : 12u);
    EXPECT_EQ(rows->value["rows"][0][6], 12);  // tokens out
  }
  // Both concurrency levels were served by one engine process.
  const runner::Evidence* p1 = sink.Find(1, "engine_process");
  const runner::Evidence* p2 = sink.Find(2, "engine_process");
  ASSERT_NE(p1, nullptr);
  ASSERT_NE(p2, nullptr);
  EXPECT_EQ(p1->value["pid"], p2->value["pid"]);
}

TEST(EngineLoad, AStalledRequestDoesNotStallTheOthers) {
  FakeSink sink;
  EngineRunner runner(Options());
  nlohmann::json cell = {{"depth", 64},           {"concurrency", 4},   {"num_requests", 12},
                         {"warmup_requests", 0},  {"output_tokens", 8}, {"fault_stall_request", 5},
                         {"fault_stall_ms", 2500}};
  absl::Status s = runner.Run(Unit({Cell(1, cell)}), sink);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(sink.Values(1, "load_e2e_ms_p50").size(), 1u);
  EXPECT_LT(sink.Values(1, "load_e2e_ms_p50")[0], 1000);
  EXPECT_GT(sink.Values(1, "load_e2e_ms_p99")[0], 2000);
  EXPECT_EQ(sink.Values(1, "load_failed_requests")[0], 0);
  // The stalled request is the one slow row; the others ended before it did.
  const auto& rows = sink.Find(1, "load_requests")->value["rows"];
  double stalled_end = 0;
  int slow = 0;
  for (const auto& row : rows) {
    if (row[4].get<double>() > 2000) {
      ++slow;
      stalled_end = row[2].get<double>() + row[4].get<double>();
    }
  }
  ASSERT_EQ(slow, 1);
  for (const auto& row : rows) {
    if (row[4].get<double>() <= 2000) {
      EXPECT_LT(row[2].get<double>() + row[4].get<double>(), stalled_end);
    }
  }
}

TEST(EngineLoad, CancelStopsTheLoadWithinASecond) {
  FakeSink sink;
  EngineRunner runner(Options());
  nlohmann::json cell = {
      {"depth", 64}, {"concurrency", 8}, {"num_requests", 100000}, {"output_tokens", 32}};
  Clock::time_point cancelled_at;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));  // the engine is up and loaded
    cancelled_at = Clock::now();
    sink.cancelled = true;
  });
  absl::Status s = runner.Run(Unit({Cell(1, cell)}), sink);
  Clock::time_point returned = Clock::now();
  canceller.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_LT(returned - cancelled_at, std::chrono::seconds(1));
}

TEST(EngineLoad, BothLoopsAtOnceIsAParameterError) {
  FakeSink sink;
  EngineRunner runner(Options());
  absl::Status s =
      runner.Run(Unit({Cell(1, {{"depth", 64}, {"concurrency", 2}, {"request_rate", 3.0}})}), sink);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("not both"));
  EXPECT_TRUE(sink.measurements.empty());
}

}  // namespace
}  // namespace ladder::engines
