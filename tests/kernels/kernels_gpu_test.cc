// The correctness case table on the GPU backend compiled into this binary (CUDA or HIP).
// Labelled `gpu` in CTest; skips cleanly when no backend or device is present.
#include <gtest/gtest.h>

#include "ladder/kernels/attention.h"
#include "ladder/kernels/bench.h"
#include "ladder/kernels/cases.h"

namespace lk = ladder::kernels;

namespace {

lk::Backend GpuBackend() {
  return lk::BackendAvailable(lk::Backend::kHip) ? lk::Backend::kHip : lk::Backend::kCuda;
}

class GpuCaseTable : public ::testing::TestWithParam<lk::CaseSpec> {};

TEST_P(GpuCaseTable, MatchesReferenceAndPathsAgree) {
  const lk::Backend b = GpuBackend();
  if (!lk::BackendAvailable(b)) GTEST_SKIP() << "no GPU backend with a device in this binary";
  auto r = lk::RunCase(b, GetParam(), /*repeats=*/10);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  if (r->skipped) GTEST_SKIP() << r->skip_reason;
  EXPECT_TRUE(r->passed) << r->Line();
}

// The SM clock after the timed calls (NVML, loaded at run time), the agent's throttling evidence.
TEST(GpuBench, ReportsTheSmClockThroughNvml) {
  if (!lk::BackendAvailable(lk::Backend::kCuda)) GTEST_SKIP() << "no CUDA device in this binary";
  auto p = lk::BenchPoint::FromPreset("tiny", lk::Backend::kCuda);
  ASSERT_TRUE(p.ok());
  p->depth = 4096;
  p->repeats = 5;
  auto r = lk::RunBenchPoint(*p);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  if (r->sm_clock_max_mhz == 0) GTEST_SKIP() << "no NVML (libnvidia-ml.so.1) on this machine";
  EXPECT_GT(r->sm_clock_max_mhz, 500);  // every NVIDIA GPU with CUDA 12 runs its SMs faster
  EXPECT_GT(r->sm_clock_mhz, 0);
  EXPECT_LE(r->sm_clock_mhz, r->sm_clock_max_mhz);
}

// Graph timing: one sample per replay, per call, and the method said in the result and the JSON;
// a head-512 3D point too, whose captured calls fall back from the in-kernel merge.
TEST(GpuBench, GraphReplaysAreTimedPerCall) {
  const lk::Backend b = GpuBackend();
  if (!lk::BackendAvailable(b)) GTEST_SKIP() << "no GPU backend with a device in this binary";
  for (const char* preset : {"tiny", "gemma4-31b-global"}) {
    auto p = lk::BenchPoint::FromPreset(preset, b);
    ASSERT_TRUE(p.ok());
    p->depth = 2048;
    p->query_rows = 2;
    p->policy = lk::Policy::kForce3D;
    p->repeats = 4;
    p->timing = lk::Timing::kGraph;
    p->graph_calls = 5;
    auto r = lk::RunBenchPoint(*p);
    ASSERT_TRUE(r.ok()) << preset << ": " << r.error().ToString();
    EXPECT_EQ(r->times_us.size(), 4u);
    EXPECT_GT(r->time_us_median, 0);
    EXPECT_NE(r->timing_method.find("graph replay: 5 calls"), std::string::npos) << r->timing_method;
    EXPECT_NE(lk::FormatJson(*r).find("\"timing\":\"graph\",\"graph_calls\":5"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, GpuCaseTable, ::testing::ValuesIn(lk::Cases().begin(), lk::Cases().end()),
                         [](const ::testing::TestParamInfo<lk::CaseSpec>& info) { return info.param.name; });

}  // namespace
