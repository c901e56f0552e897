// The correctness case table on the GPU backend compiled into this binary (CUDA or HIP).
// Labelled `gpu` in CTest; skips cleanly when no backend or device is present.
#include <gtest/gtest.h>

#include "ladder/kernels/attention.h"
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

INSTANTIATE_TEST_SUITE_P(Kernels, GpuCaseTable, ::testing::ValuesIn(lk::Cases().begin(), lk::Cases().end()),
                         [](const ::testing::TestParamInfo<lk::CaseSpec>& info) { return info.param.name; });

}  // namespace
