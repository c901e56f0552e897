// The correctness case table on the CPU backend: 2D and 3D vs a double reference, 2D vs 3D
// within one ULP, bit-identical repeats.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ladder/kernels/attention.h"
#include "ladder/kernels/cases.h"

namespace lk = ladder::kernels;

namespace {

class CpuCaseTable : public ::testing::TestWithParam<lk::CaseSpec> {};

TEST_P(CpuCaseTable, MatchesReferenceAndPathsAgree) {
  auto r = lk::RunCase(lk::Backend::kCpu, GetParam(), /*repeats=*/10, /*cpu_threads=*/2);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_TRUE(r->p2d.within_tolerance) << r->Line();
  EXPECT_TRUE(r->p3d.within_tolerance) << r->Line();
  EXPECT_TRUE(r->p2d.deterministic) << r->Line();
  EXPECT_TRUE(r->p3d.deterministic) << r->Line();
  if (GetParam().shape.dtype != lk::DType::kF32) EXPECT_LE(r->max_ulp_2d_vs_3d, 1) << r->Line();
  EXPECT_TRUE(r->passed) << r->Line();
}

INSTANTIATE_TEST_SUITE_P(Kernels, CpuCaseTable,
                         ::testing::ValuesIn(lk::Cases().begin(), lk::Cases().end()),
                         [](const ::testing::TestParamInfo<lk::CaseSpec>& info) {
                           return info.param.name;
                         });

TEST(KernelCases, TableHasAtLeastEighteenNamedCasesCoveringTheAxes) {
  const auto cases = lk::Cases();
  EXPECT_GE(cases.size(), 18u);
  bool dims[4] = {}, rows1 = false, rows2 = false, rows4 = false, rows5 = false, window = false,
       softcap = false, bs32 = false, multi = false, deep = false, partial = false;
  for (const auto& c : cases) {
    dims[c.shape.head_dim == 64    ? 0
         : c.shape.head_dim == 128 ? 1
         : c.shape.head_dim == 256 ? 2
                                   : 3] = true;
    for (const auto& s : c.seqs) {
      rows1 |= s.q_len == 1;
      rows2 |= s.q_len == 2;
      rows4 |= s.q_len == 4;
      rows5 |= s.q_len == 5;
      deep |= s.kv_len >= 65536;
      partial |= s.kv_len < c.shape.block_size;
    }
    window |= c.shape.window > 0;
    softcap |= c.shape.softcap > 0;
    bs32 |= c.shape.block_size == 32;
    multi |= c.seqs.size() > 1;
  }
  EXPECT_TRUE(dims[0] && dims[1] && dims[2] && dims[3]);
  EXPECT_TRUE(rows1 && rows2 && rows4 && rows5);
  EXPECT_TRUE(window && softcap && bs32 && multi && deep && partial);
}

TEST(KernelCases, AllMaskedSegmentsMergeAsEmpty) {
  // A window of 2 keys with 40 keys split into 16 segments: most segments see no key for any
  // row. If an empty segment merged as max 0 / sum 0 instead of max -inf, the result would be
  // scaled wrongly; compare with 2D and the reference.
  lk::AttentionShape sh;
  sh.q_heads = 4;
  sh.kv_heads = 1;
  sh.head_dim = 64;
  sh.window = 2;
  sh.dtype = lk::DType::kF32;
  // Large queries make the true maxima far from 0, so a zero-max contribution would show.
  auto prob = lk::MakeProblem(sh, {{2, 400}}, 7, /*q_scale=*/8.0f);
  ASSERT_TRUE(prob.ok());
  lk::RunOptions o2, o3;
  o2.policy = lk::Policy::kForce2D;
  o3.policy = lk::Policy::kForce3D;
  o3.config.force_segments = 16;
  lk::HostTensor a, b;
  ASSERT_TRUE(lk::RunAttention(lk::Backend::kCpu, *prob, o2, &a).ok());
  auto info = lk::RunAttention(lk::Backend::kCpu, *prob, o3, &b);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->segments, 16);
  const auto ref = lk::ReferenceAttention(*prob);
  for (size_t i = 0; i < a.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(b.Get(i)));
    EXPECT_NEAR(b.Get(i), ref[i], 1e-5) << i;
    EXPECT_NEAR(a.Get(i), b.Get(i), 1e-5) << i;
  }
}

TEST(KernelCases, CaseResultsCanFail) {
  // The checks must be able to fail: a case whose reference disagrees (wrong scale) would be
  // caught by the tolerance. Here: distance helpers behave.
  EXPECT_EQ(lk::UlpDistance(lk::DType::kBF16, 0x3f80, 0x3f81), 1);
  EXPECT_EQ(lk::UlpDistance(lk::DType::kBF16, 0x0000, 0x8000), 0);
  EXPECT_EQ(lk::UlpDistance(lk::DType::kBF16, 0x0001, 0x8001), 2);
  lk::HostTensor t(lk::DType::kBF16, 1);
  t.Set(0, 1.0f + 1.0f / 256.0f);  // a tie: rounds to even (1.0)
  EXPECT_EQ(t.Bits(0), 0x3f80u);
  lk::HostTensor h(lk::DType::kF16, 1);
  h.Set(0, 65520.0f);  // rounds to inf
  EXPECT_TRUE(std::isinf(h.Get(0)));
  h.Set(0, 1e-7f);  // subnormal
  EXPECT_NEAR(h.Get(0), 1e-7f, 3e-8f);
}

}  // namespace
