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
    if (r.point.policy == lk::Policy::kLegacy && r.point.query_rows == 2) EXPECT_EQ(r.path, lk::Path::k2D);
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

TEST(KernelBench, InvalidPointsAreRejected) {
  auto p = lk::BenchPoint::FromPreset("tiny", lk::Backend::kCpu);
  p->query_rows = 0;
  EXPECT_FALSE(lk::RunBenchPoint(*p).ok());
  p->query_rows = 1;
  p->q_heads = 7;
  EXPECT_FALSE(lk::RunBenchPoint(*p).ok());
}

}  // namespace
