// Benchmark API on the CPU backend: presets, a real point, formatting.
#include <gtest/gtest.h>

#include "ladder/kernels/bench.h"

namespace lk = ladder::kernels;

namespace {

TEST(KernelBench, PresetsKnownAndUnknown) {
  for (const char* name : {"gemma4-31b-global", "gemma4-31b-sliding", "gemma4-31b-global-tp2",
                           "gemma4-31b-sliding-tp2", "llama-70b", "tiny", "gemma4-dense-256"})
    EXPECT_TRUE(lk::FindPreset(name).ok()) << name;
  auto g = lk::FindPreset("gemma4-31b-global-tp2");
  EXPECT_EQ(g->q_heads, 16);
  EXPECT_EQ(g->kv_heads, 2);
  EXPECT_EQ(g->head_dim, 512);
  EXPECT_EQ(lk::FindPreset("gemma4-31b-sliding")->window, 1024);
  auto bad = lk::FindPreset("gpt5");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, lk::ErrorCode::kNotFound);
  EXPECT_NE(bad.error().message.find("gemma4-31b-global"), std::string::npos);
}

TEST(KernelBench, CpuPointRunsAndReports) {
  auto p = lk::BenchPoint::FromPreset("tiny", lk::Backend::kCpu);
  ASSERT_TRUE(p.ok());
  p->depth = 1024;
  p->query_rows = 2;
  p->policy = lk::Policy::kSpecAware;
  p->repeats = 3;
  auto r = lk::RunBenchPoint(*p);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->path, lk::Path::k3D);
  EXPECT_EQ(r->times_us.size(), 3u);
  EXPECT_GT(r->time_us_median, 0);
  EXPECT_LE(r->time_us_min, r->time_us_median);
  // K + V: 1024 keys x 2 heads x 64 x 2 bytes x 2; Q + O: 2 rows x 8 heads x 64 x 2 bytes x 2.
  EXPECT_DOUBLE_EQ(r->bytes_moved, 1024.0 * 2 * 64 * 2 * 2 + 2.0 * 8 * 64 * 2 * 2);
  EXPECT_GT(r->bytes_per_s, 0);
  const std::string json = lk::FormatJson(*r);
  EXPECT_NE(json.find("\"path\":\"3D\""), std::string::npos);
  EXPECT_NE(json.find("\"preset\":\"tiny\""), std::string::npos);
  EXPECT_NE(lk::FormatTableRow(*r).find("tiny"), std::string::npos);
  // A CPU point has no GPU clock: unknown (0), so the agent records none and the report says
  // throttling is unknown rather than ruled out.
  EXPECT_EQ(r->sm_clock_mhz, 0);
  EXPECT_EQ(r->sm_clock_max_mhz, 0);
  EXPECT_NE(json.find("\"sm_clock_mhz\":0,\"sm_clock_max_mhz\":0"), std::string::npos);
  const std::vector<lk::BenchResult> one = {*r};
  const std::string footer = lk::FormatTableFooter(one);
  EXPECT_NE(footer.find("copy ceiling:"), std::string::npos) << footer;
  EXPECT_EQ(footer.find("SM clock"), std::string::npos) << footer;  // unknown: not printed
  lk::BenchResult clocked = *r;
  clocked.sm_clock_mhz = 1755, clocked.sm_clock_max_mhz = 1980;
  const std::vector<lk::BenchResult> two = {clocked, *r};
  EXPECT_NE(lk::FormatTableFooter(two).find("lowest 1755 MHz, maximum 1980"), std::string::npos);
}

TEST(KernelBench, SweepCrossProductAndLegacyCollapse) {
  lk::SweepOptions o;
  o.presets = {"tiny"};
  o.depths = {256, 2048};
  o.query_rows = {1, 2};
  o.policies = {lk::Policy::kLegacy, lk::Policy::kSpecAware};
  o.repeats = 2;
  o.warmup = 1;
  int calls = 0;
  auto res = lk::RunSweep(o, [&](const lk::BenchResult&) { ++calls; });
  ASSERT_TRUE(res.ok()) << res.error().ToString();
  EXPECT_EQ(res->size(), 8u);
  EXPECT_EQ(calls, 8);
  for (const auto& r : *res) {
    if (r.point.policy == lk::Policy::kLegacy && r.point.query_rows == 2)
      EXPECT_EQ(r.path, lk::Path::k2D);
    if (r.point.policy == lk::Policy::kSpecAware) EXPECT_EQ(r.path, lk::Path::k3D);
  }
}

TEST(KernelBench, GpuBackendUnavailableIsAnErrorNotACrash) {
  if (lk::BackendAvailable(lk::Backend::kHip)) GTEST_SKIP() << "a HIP device is present";
  auto p = lk::BenchPoint::FromPreset("tiny", lk::Backend::kHip);
  ASSERT_TRUE(p.ok());
  auto r = lk::RunBenchPoint(*p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, lk::ErrorCode::kUnavailable);
}

TEST(KernelBench, TimingMethodIsStated) {
  auto p = lk::BenchPoint::FromPreset("tiny", lk::Backend::kCpu);
  ASSERT_TRUE(p.ok());
  p->depth = 256;
  p->warmup = 1;
  p->repeats = 3;
  auto r = lk::RunBenchPoint(*p);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->timing_method, "steady clock around each call; 1 warm-up calls; median of 3 calls");
  const std::string json = lk::FormatJson(*r);
  EXPECT_NE(json.find("\"timing\":\"stream\",\"graph_calls\":0,\"timing_method\":\"steady clock"),
            std::string::npos)
      << json;
  const std::vector<lk::BenchResult> one = {*r};
  EXPECT_EQ(lk::FormatTableFooter(one).rfind("timing: steady clock", 0), 0u)
      << lk::FormatTableFooter(one);
}

TEST(KernelBench, GraphTimingNeedsAGpuAndNoFlush) {
  auto p = lk::BenchPoint::FromPreset("tiny", lk::Backend::kCpu);
  ASSERT_TRUE(p.ok());
  p->timing = lk::Timing::kGraph;
  auto cpu = lk::RunBenchPoint(*p);
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(cpu.error().code, lk::ErrorCode::kUnsupported);
  p->backend = lk::Backend::kCuda;
  p->flush_l2 = true;
  EXPECT_FALSE(p->Validate().ok());
  p->flush_l2 = false;
  p->graph_calls = 0;
  EXPECT_FALSE(p->Validate().ok());
  p->graph_calls = 20;
  EXPECT_TRUE(p->Validate().ok());
  EXPECT_EQ(lk::ToString(lk::Timing::kGraph), "graph");
}

TEST(KernelBench, InvalidPointsAreRejected) {
  auto p = lk::BenchPoint::FromPreset("tiny", lk::Backend::kCpu);
  p->query_rows = 0;
  EXPECT_FALSE(lk::RunBenchPoint(*p).ok());
  p->query_rows = 1;
  p->q_heads = 7;
  EXPECT_FALSE(lk::RunBenchPoint(*p).ok());
}

}  // namespace
