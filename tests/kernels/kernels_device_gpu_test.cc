// The device-resident entry point on a real GPU: on the caller's stream and workspace it gives
// the same path, segments and output bits as RunAttention (which copies in and out), and it
// follows the policy for speculative verification rows. Labelled `gpu`; skips without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <vector>

#include "ladder/kernels/attention.h"
#include "ladder/kernels/device_attention.h"

namespace lk = ladder::kernels;

namespace {

// Move-only device copy of a host buffer.
struct DeviceCopy {
  void* p = nullptr;
  size_t n = 0;
  DeviceCopy(const void* src, size_t bytes) : n(bytes) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes, 16)), cudaSuccess);
    if (src != nullptr && bytes > 0) EXPECT_EQ(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() { cudaFree(p); }
};

struct Case {
  const char* name;
  int q_heads, kv_heads, head_dim, window;
  std::vector<lk::SeqSpec> seqs;
  lk::Policy policy;
  lk::Path expected;
};

// Names the case in test listings (CTest shows the parameter) instead of dumping its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class DeviceEntry : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceEntry, MatchesRunAttentionBitForBitOnAStream) {
  if (!lk::BackendAvailable(lk::Backend::kCuda)) GTEST_SKIP() << "no CUDA device";
  const Case& c = GetParam();
  lk::AttentionShape shape;
  shape.q_heads = c.q_heads;
  shape.kv_heads = c.kv_heads;
  shape.head_dim = c.head_dim;
  shape.window = c.window;
  auto problem = lk::MakeProblem(shape, c.seqs, 7);
  ASSERT_TRUE(problem.ok()) << problem.error().ToString();
  lk::RunOptions options;
  options.policy = c.policy;
  options.config.decode_query_len = 2;
  lk::HostTensor expected;
  auto info = lk::RunAttention(lk::Backend::kCuda, *problem, options, &expected);
  ASSERT_TRUE(info.ok()) << info.error().ToString();

  const lk::HostProblem& p = *problem;
  DeviceCopy qs(p.query_start.data(), p.query_start.size() * sizeof(int));
  DeviceCopy sl(p.seq_lens.data(), p.seq_lens.size() * sizeof(int));
  DeviceCopy bt(p.block_table.data(), p.block_table.size() * sizeof(int));
  DeviceCopy q(p.q.data(), p.q.bytes()), k(p.k_cache.data(), p.k_cache.bytes()),
      v(p.v_cache.data(), p.v_cache.bytes()), out(nullptr, expected.bytes());
  lk::DeviceAttentionArgs args;
  args.shape = p.shape;
  args.num_seqs = p.num_seqs();
  args.num_tokens = p.num_tokens();
  args.max_query_len = p.max_query_len();
  args.max_kv_len = p.max_kv_len();
  args.max_blocks_per_seq = p.max_blocks_per_seq;
  args.query_start = static_cast<const int*>(qs.p);
  args.seq_lens = static_cast<const int*>(sl.p);
  args.block_table = static_cast<const int*>(bt.p);
  args.q = q.p;
  args.k_cache = k.p;
  args.v_cache = v.p;
  args.out = out.p;
  auto plan = lk::PlanDeviceAttention(lk::Backend::kCuda, args, options);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_EQ(plan->info.path, c.expected) << plan->info.reason;
  EXPECT_EQ(plan->info.path, info->path);
  EXPECT_EQ(plan->info.segments, info->segments);
  EXPECT_EQ(plan->info.reason, info->reason);
  EXPECT_LE(plan->workspace_bytes,
            lk::MaxDeviceWorkspaceBytes(p.shape, p.num_tokens(), options.config));

  // Too small a workspace is refused before anything is enqueued.
  if (plan->workspace_bytes > 0) {
    auto refused = lk::LaunchDeviceAttention(lk::Backend::kCuda, args, *plan, nullptr, nullptr, 0);
    EXPECT_EQ(refused.error().code, lk::ErrorCode::kInvalidArgument);
  }
  DeviceCopy ws(nullptr, plan->workspace_bytes);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto launched = lk::LaunchDeviceAttention(lk::Backend::kCuda, args, *plan, stream, ws.p, ws.n);
  ASSERT_TRUE(launched.ok()) << launched.error().ToString();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
  std::vector<unsigned char> got(expected.bytes());
  ASSERT_EQ(cudaMemcpy(got.data(), out.p, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size()), 0) << "device entry differs from RunAttention";
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, DeviceEntry,
    ::testing::Values(
        Case{"global_d512_decode_legacy", 32, 4, 512, 0, {{1, 5000}}, lk::Policy::kLegacy, lk::Path::k3D},
        Case{"global_d512_verify2_legacy", 32, 4, 512, 0, {{2, 5000}}, lk::Policy::kLegacy, lk::Path::k2D},
        Case{"global_d512_verify2_specaware", 32, 4, 512, 0, {{2, 5000}}, lk::Policy::kSpecAware, lk::Path::k3D},
        Case{"sliding_d256_verify2_specaware", 32, 16, 256, 1024, {{2, 3000}}, lk::Policy::kSpecAware,
             lk::Path::k3D},
        Case{"mixed_d128_prefill_specaware", 8, 2, 128, 0, {{1, 300}, {5, 900}}, lk::Policy::kSpecAware,
             lk::Path::k2D}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
