// The device-resident entry point's contract where no GPU is needed: it refuses the CPU, and its
// workspace bound covers what the 3D path asks for.
#include <gtest/gtest.h>

#include "ladder/kernels/device_attention.h"

namespace lk = ladder::kernels;

namespace {

lk::DeviceAttentionArgs SomeArgs() {
  lk::DeviceAttentionArgs a;
  a.shape.q_heads = 8;
  a.shape.kv_heads = 2;
  a.shape.head_dim = 128;
  a.num_seqs = 1;
  a.num_tokens = 2;
  a.max_query_len = 2;
  a.max_kv_len = 100;
  a.max_blocks_per_seq = 7;
  return a;  // pointers stay null: nothing here may touch them
}

TEST(DeviceAttention, RefusesTheCpuBackend) {
  lk::RunOptions options;
  auto plan = lk::PlanDeviceAttention(lk::Backend::kCpu, SomeArgs(), options);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code, lk::ErrorCode::kUnavailable);
  const int ws = 0;
  auto launched = lk::LaunchDeviceAttention(lk::Backend::kCpu, SomeArgs(),
                                            lk::DeviceAttentionPlan{}, nullptr, nullptr, ws);
  EXPECT_EQ(launched.error().code, lk::ErrorCode::kUnavailable);
}

TEST(DeviceAttention, RejectsInconsistentArgumentsOrAnAbsentBackend) {
  // Whatever this binary holds, a GPU backend call with null pointers never reaches a device:
  // InvalidArgument where the backend is compiled in, Unavailable where it is not.
  lk::RunOptions options;
  for (lk::Backend b : {lk::Backend::kCuda, lk::Backend::kHip}) {
    auto plan = lk::PlanDeviceAttention(b, SomeArgs(), options);
    ASSERT_FALSE(plan.ok());
    EXPECT_TRUE(plan.error().code == lk::ErrorCode::kInvalidArgument ||
                plan.error().code == lk::ErrorCode::kUnavailable)
        << plan.error().ToString();
  }
}

TEST(DeviceAttention, WorkspaceBoundGrowsWithRowsHeadsAndSegments) {
  lk::AttentionShape shape;
  shape.q_heads = 32;
  shape.kv_heads = 4;
  shape.head_dim = 512;
  lk::PolicyConfig config;
  // One slot per (row, q head, segment): a head_dim fp32 accumulator plus max and sum; and an
  // 8-byte merge flag per (row, KV head, segment) work group, at most.
  EXPECT_EQ(lk::MaxDeviceWorkspaceBytes(shape, 2, config),
            size_t{2} * 32 * 128 * (512 * 4 + 8) + size_t{8} * 2 * 4 * 128);
  config.force_segments = 3;
  EXPECT_EQ(lk::MaxDeviceWorkspaceBytes(shape, 2, config),
            size_t{2} * 32 * 3 * (512 * 4 + 8) + size_t{8} * 2 * 4 * 3);
  EXPECT_EQ(lk::MaxDeviceWorkspaceBytes(shape, 0, config), 0u);
}

}  // namespace
