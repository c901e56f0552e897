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

// The split counts the kernel's own tiles: a segment count the tiles cannot fill launches only
// the segments that get keys.
TEST(KernelPolicy, SegmentsGetWholeTilesOfTheKernel) {
  lk::PolicyConfig c;
  c.ctas_per_sm = 2;
  c.tile_keys = 64;  // head 128: 1K is 16 tiles; 33 asked (8 KV heads, 132 SMs) -> 16 of 1 tile
  EXPECT_EQ(lk::ChooseSegments(c, 8, 1024, 132), 16);
  c.tile_keys = 16;  // the same call in 16-key tiles: 64 of them, 32 asked (by length), 32 of 2
  EXPECT_EQ(lk::ChooseSegments(c, 8, 1024, 132), 32);
  c.tile_keys = 32;  // head 256, 16 KV heads: 33 tiles (a window of 1024 at 2 query rows) over
                     // 16 asked give 3 each to 11; 32 tiles give 2 each to all 16
  EXPECT_EQ(lk::ChooseSegments(c, 16, 1025, 132), 11);
  EXPECT_EQ(lk::ChooseSegments(c, 16, 1024, 132), 16);
  c.tile_keys = 0;  // (no tile: as 1 key)
  EXPECT_EQ(lk::ChooseSegments(c, 16, 1024, 132), 16);
}

// A sliding window bounds what one query block sees, whatever the depth.
TEST(KernelPolicy, KeysSeenByAQueryBlock) {
  lk::AttentionShape dense;
  dense.q_heads = 32;
  dense.kv_heads = 16;
  dense.head_dim = 256;
  EXPECT_EQ(lk::KeysSeen(dense, 8192, 1), 8192);
  EXPECT_EQ(lk::KeysSeen(dense, 8192, 5), 8192);
  lk::AttentionShape sliding = dense;
  sliding.window = 1024;
  EXPECT_EQ(lk::KeysSeen(sliding, 8192, 1), 1024);
  EXPECT_EQ(lk::KeysSeen(sliding, 8192, 5), 1028);  // the last row sees 4 keys past the first's
  EXPECT_EQ(lk::KeysSeen(sliding, 700, 5), 700);    // shorter than the window: all of it
  // So the split of a sliding layer's call is the same at 8K as at 64K.
  lk::PolicyConfig c;
  c.tile_keys = 32;
  EXPECT_EQ(lk::ChooseSegments(c, 16, lk::KeysSeen(sliding, 8192, 2), 132),
            lk::ChooseSegments(c, 16, lk::KeysSeen(sliding, 65536, 2), 132));
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
