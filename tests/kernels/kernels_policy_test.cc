// Path policy and segment count.
#include <gtest/gtest.h>

#include "ladder/kernels/attention.h"

namespace lk = ladder::kernels;

namespace {

constexpr int kH200Sms = 132;

lk::PathDecision Decide(lk::Policy p, int rows, int seqs = 1, int depth = 32768, int kv_heads = 4) {
  return lk::ChoosePath(p, lk::PolicyConfig{}, seqs, rows, depth, kv_heads, seqs * kv_heads,
                        kH200Sms);
}

TEST(KernelPolicy, LegacyPicks3DOnlyAtOneRow) {
  EXPECT_EQ(Decide(lk::Policy::kLegacy, 1).path, lk::Path::k3D);
  const auto d = Decide(lk::Policy::kLegacy, 2);
  EXPECT_EQ(d.path, lk::Path::k2D);  // the study's collapse: speculation's second row
  EXPECT_EQ(d.segments, 1);
  EXPECT_NE(d.reason.find("max_seqlen_q"), std::string::npos);
}

TEST(KernelPolicy, SpecAwarePicks3DForVerificationAnd2DForPrefill) {
  EXPECT_EQ(Decide(lk::Policy::kSpecAware, 1).path, lk::Path::k3D);
  EXPECT_EQ(Decide(lk::Policy::kSpecAware, 2).path, lk::Path::k3D);
  EXPECT_EQ(Decide(lk::Policy::kSpecAware, 4).path, lk::Path::k3D);
  EXPECT_EQ(Decide(lk::Policy::kSpecAware, 5).path, lk::Path::k3D);  // MTP, 4 drafts
  EXPECT_EQ(Decide(lk::Policy::kSpecAware, 8).path, lk::Path::k3D);  // EAGLE, 7 drafts
  const int dql = lk::PolicyConfig{}.decode_query_len;
  EXPECT_EQ(Decide(lk::Policy::kSpecAware, dql + 1).path, lk::Path::k2D);
  EXPECT_EQ(Decide(lk::Policy::kSpecAware, 4096).path, lk::Path::k2D);
  EXPECT_EQ(Decide(lk::Policy::kAuto, 2).path, lk::Path::k3D);
  EXPECT_EQ(Decide(lk::Policy::kAuto, dql + 1).path, lk::Path::k2D);
}

TEST(KernelPolicy, SequenceThresholdAppliesToBoth) {
  // 128 / kv_heads = 32 sequences with 4 KV heads.
  EXPECT_EQ(Decide(lk::Policy::kLegacy, 1, 32).path, lk::Path::k3D);
  EXPECT_EQ(Decide(lk::Policy::kLegacy, 1, 33).path, lk::Path::k2D);
  EXPECT_EQ(Decide(lk::Policy::kSpecAware, 2, 33).path, lk::Path::k2D);
}

TEST(KernelPolicy, ForcedPaths) {
  EXPECT_EQ(Decide(lk::Policy::kForce2D, 1).path, lk::Path::k2D);
  EXPECT_EQ(Decide(lk::Policy::kForce3D, 4096).path, lk::Path::k3D);
}

TEST(KernelPolicy, SegmentCountScalesWithSmCount) {
  lk::PolicyConfig c;
  // One sequence, 4 KV heads: 4 work units. A fixed 16 would leave half of 132 SMs idle.
  const int h200 = lk::ChooseSegments(c, 4, 32768, 132);
  const int small = lk::ChooseSegments(c, 4, 32768, 56);
  const int big = lk::ChooseSegments(c, 4, 32768, 264);
  EXPECT_EQ(h200, 64);  // 2 CTAs per SM / 4 units = 66, of which 64 get 16-key tiles
  EXPECT_LT(small, h200);
  EXPECT_GT(big, h200);
  EXPECT_GE(4 * h200, 132);  // every SM gets work
  // More work units, fewer segments.
  EXPECT_LT(lk::ChooseSegments(c, 16, 32768, 132), h200);
}

TEST(KernelPolicy, SegmentCountScalesWithKvLength) {
  lk::PolicyConfig c;
  EXPECT_EQ(lk::ChooseSegments(c, 4, c.min_tokens_per_segment - 1, 132), 1);  // too short to split
  EXPECT_EQ(lk::ChooseSegments(c, 4, 100, 132), 100 / c.min_tokens_per_segment);
  EXPECT_EQ(lk::ChooseSegments(c, 4, 1024, 132), 1024 / c.min_tokens_per_segment);
  // From 8K up the occupancy target decides, not the keys per segment.
  EXPECT_EQ(lk::ChooseSegments(c, 4, 8192, 132), 64);
  // No empty segment: 66 asked, 512 tiles of 16 keys give 8 each to 64 of them.
  EXPECT_EQ(lk::ChooseSegments(c, 2, 8192, 66), 64);
  EXPECT_EQ(lk::ChooseSegments(c, 2, 32768, 33), 33);  // 2048 tiles: 63 each, 33 segments
  EXPECT_LE(lk::ChooseSegments(c, 1, 1 << 20, 1000), c.max_segments);
  c.force_segments = 16;
  EXPECT_EQ(lk::ChooseSegments(c, 4, 100, 132), 16);
}

TEST(KernelPolicy, ParseNames) {
  EXPECT_EQ(lk::ParsePolicy("spec-aware").value(), lk::Policy::kSpecAware);
  EXPECT_EQ(lk::ParsePolicy("legacy").value(), lk::Policy::kLegacy);
  EXPECT_FALSE(lk::ParsePolicy("fast").ok());
  EXPECT_EQ(lk::ParseBackend("cuda").value(), lk::Backend::kCuda);
  EXPECT_FALSE(lk::ParseBackend("tpu").ok());
  EXPECT_EQ(lk::ParseDType("bf16").value(), lk::DType::kBF16);
}

}  // namespace
