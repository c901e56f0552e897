// The device-resident entry point on a real GPU: on the caller's stream and workspace it gives
// the same path, segments and output bits as RunAttention (which copies in and out), and it
// follows the policy for speculative verification rows. Labelled `gpu`; skips without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <ostream>
#include <string>
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
    if (src != nullptr && bytes > 0)
      EXPECT_EQ(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() { cudaFree(p); }
};

// A host problem's arrays on the device, and the entry point's arguments over them.
struct DeviceProblemCopy {
  DeviceCopy qs, sl, bt, q, k, v, out;
  explicit DeviceProblemCopy(const lk::HostProblem& p)
      : qs(p.query_start.data(), p.query_start.size() * sizeof(int)),
        sl(p.seq_lens.data(), p.seq_lens.size() * sizeof(int)),
        bt(p.block_table.data(), p.block_table.size() * sizeof(int)),
        q(p.q.data(), p.q.bytes()),
        k(p.k_cache.data(), p.k_cache.bytes()),
        v(p.v_cache.data(), p.v_cache.bytes()),
        out(nullptr, p.q.bytes()) {}
  lk::DeviceAttentionArgs Args(const lk::HostProblem& p) const {
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
    return args;
  }
};

// Launches `plan` on the default stream, waits, and returns the output's bytes; then fills the
// output with 0xff, so that a later run that skips a write shows.
std::vector<unsigned char> RunPlan(const DeviceProblemCopy& d, const lk::DeviceAttentionArgs& args,
                                   const lk::DeviceAttentionPlan& plan, const DeviceCopy& ws) {
  EXPECT_TRUE(lk::LaunchDeviceAttention(lk::Backend::kCuda, args, plan, nullptr, ws.p, ws.n).ok());
  std::vector<unsigned char> got(d.out.n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(got.data(), d.out.p, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemset(d.out.p, 0xff, got.size()), cudaSuccess);
  return got;
}

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
  ASSERT_EQ(expected.bytes(), p.q.bytes());
  DeviceProblemCopy d(p);
  const lk::DeviceAttentionArgs args = d.Args(p);
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
  DeviceCopy ws(nullptr, plan->workspace_bytes + 128);
  // A workspace off a 128-byte boundary is refused (the merge drops whole L2 lines of it).
  if (plan->workspace_bytes > 0) {
    auto refused = lk::LaunchDeviceAttention(lk::Backend::kCuda, args, *plan, nullptr,
                                             static_cast<char*>(ws.p) + 16, ws.n - 16);
    EXPECT_EQ(refused.error().code, lk::ErrorCode::kInvalidArgument);
  }
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto launched = lk::LaunchDeviceAttention(lk::Backend::kCuda, args, *plan, stream, ws.p, ws.n);
  ASSERT_TRUE(launched.ok()) << launched.error().ToString();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
  std::vector<unsigned char> got(expected.bytes());
  ASSERT_EQ(cudaMemcpy(got.data(), d.out.p, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size()), 0)
      << "device entry differs from RunAttention";
}

// Head 512 at 16K, 1, 2 and 4 query rows: on a plain stream the team kernel's work groups
// merge their partials themselves at 1 and 2 rows (a cooperative launch, up to two units
// each); inside a captured graph the merge kernel does it. Both must give the same bits, every time
// and every replay.
TEST(DeviceEntryMerge, InKernelMergeAndGraphReplaysAgreeBitForBit) {
  if (!lk::BackendAvailable(lk::Backend::kCuda)) GTEST_SKIP() << "no CUDA device";
  for (int rows : {1, 2, 4}) {
    SCOPED_TRACE("query rows " + std::to_string(rows));
    lk::AttentionShape shape;
    shape.q_heads = 32;
    shape.kv_heads = 4;
    shape.head_dim = 512;
    auto problem = lk::MakeProblem(shape, {{rows, 16384}}, 11);
    ASSERT_TRUE(problem.ok()) << problem.error().ToString();
    const lk::HostProblem& p = *problem;
    DeviceProblemCopy d(p);
    const lk::DeviceAttentionArgs args = d.Args(p);
    const size_t out_bytes = p.q.bytes();
    lk::RunOptions options;
    options.policy = lk::Policy::kSpecAware;
    options.config.decode_query_len = 4;
    auto plan = lk::PlanDeviceAttention(lk::Backend::kCuda, args, options);
    ASSERT_TRUE(plan.ok()) << plan.error().ToString();
    ASSERT_EQ(plan->info.path, lk::Path::k3D);
    // (The 32-column kernel of 4 rows keeps the merge kernel: one unit per work group.)
    if (rows <= 2)
      EXPECT_NE(plan->info.grid.find("merge in kernel"), std::string::npos) << plan->info.grid;
    DeviceCopy ws(nullptr, plan->workspace_bytes);
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    auto fetch = [&] {
      std::vector<unsigned char> got(out_bytes);
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(got.data(), d.out.p, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(cudaMemset(d.out.p, 0xff, out_bytes), cudaSuccess);  // NaNs: a skipped write shows
      return got;
    };
    ASSERT_TRUE(
        lk::LaunchDeviceAttention(lk::Backend::kCuda, args, *plan, stream, ws.p, ws.n).ok());
    const std::vector<unsigned char> first = fetch();
    auto differing_bytes = [&](const std::vector<unsigned char>& got) {
      size_t n = 0;
      for (size_t i = 0; i < got.size(); ++i) n += got[i] != first[i];
      return n;
    };
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(
          lk::LaunchDeviceAttention(lk::Backend::kCuda, args, *plan, stream, ws.p, ws.n).ok());
      EXPECT_EQ(differing_bytes(fetch()), 0u) << "direct launch " << i;
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    const auto captured =
        lk::LaunchDeviceAttention(lk::Backend::kCuda, args, *plan, stream, ws.p, ws.n);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_TRUE(captured.ok()) << captured.error().ToString();
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      EXPECT_EQ(differing_bytes(fetch()), 0u) << "graph replay " << i;
    }
    // Direct launches after the replays: their merge flags are not confused by the replays'.
    ASSERT_TRUE(
        lk::LaunchDeviceAttention(lk::Backend::kCuda, args, *plan, stream, ws.p, ws.n).ok());
    EXPECT_EQ(differing_bytes(fetch()), 0u) << "direct launch after the replays";
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

// The generic kernel's segments merging in their thread block cluster (merge_in_cluster=on, on
// compute capability 9.0) give the merge kernel's bits: head 64, 128 and 256, with and without
// a window, 1, 2, 4 and 5 query rows, 2 to 16 segments (the cluster sizes it takes; 24 falls
// back to the merge kernel, as do clusters that would not all run at once), on a plain stream
// and in graph replays.
TEST(DeviceEntryMerge, ClusterMergeGivesTheMergeKernelsBits) {
  if (!lk::BackendAvailable(lk::Backend::kCuda)) GTEST_SKIP() << "no CUDA device";
  auto device = lk::QueryDevice(lk::Backend::kCuda);
  ASSERT_TRUE(device.ok()) << device.error().ToString();
  const bool clusters = device->cc_major == 9 && device->cc_minor == 0;
  struct Shape {
    int q_heads, kv_heads, head_dim, window, kv_len;
  };
  int merged_in_cluster = 0;
  for (const Shape& sh : {Shape{32, 16, 256, 0, 3000}, Shape{32, 16, 256, 1024, 9000},
                          Shape{64, 8, 128, 0, 5000}, Shape{8, 2, 64, 0, 700}}) {
    for (int rows : {1, 2, 4, 5}) {
      for (int segments : {2, 5, 8, 16, 24}) {
        SCOPED_TRACE("head " + std::to_string(sh.head_dim) + " window " +
                     std::to_string(sh.window) + ", " + std::to_string(rows) + " rows, " +
                     std::to_string(segments) + " segments");
        lk::AttentionShape shape;
        shape.q_heads = sh.q_heads;
        shape.kv_heads = sh.kv_heads;
        shape.head_dim = sh.head_dim;
        shape.window = sh.window;
        auto problem = lk::MakeProblem(shape, {{rows, sh.kv_len}}, 5 + rows);
        ASSERT_TRUE(problem.ok()) << problem.error().ToString();
        const lk::HostProblem& p = *problem;
        DeviceProblemCopy d(p);
        const lk::DeviceAttentionArgs args = d.Args(p);
        lk::RunOptions cluster, kernel;
        cluster.policy = kernel.policy = lk::Policy::kForce3D;
        cluster.config.force_segments = kernel.config.force_segments = segments;
        cluster.tuning.merge_in_cluster = lk::Switch::kOn;
        kernel.tuning.merge_in_cluster = lk::Switch::kOff;  // (auto is on with a window)
        // One work-group width for both (auto widens head 256 only where it does not merge in
        // clusters, and the two widths need not give the same bits), and the generic kernel
        // (split_keys=auto would take the split-keys kernel, which has no cluster merge, at
        // one or two rows).
        cluster.tuning.wide_work_groups = kernel.tuning.wide_work_groups =
            sh.head_dim == 128 ? lk::Switch::kOn : lk::Switch::kOff;
        cluster.tuning.split_keys = kernel.tuning.split_keys = lk::Switch::kOff;
        auto cluster_plan = lk::PlanDeviceAttention(lk::Backend::kCuda, args, cluster);
        auto kernel_plan = lk::PlanDeviceAttention(lk::Backend::kCuda, args, kernel);
        ASSERT_TRUE(cluster_plan.ok()) << cluster_plan.error().ToString();
        ASSERT_TRUE(kernel_plan.ok()) << kernel_plan.error().ToString();
        const bool in_cluster =
            cluster_plan->info.grid.find("merge in cluster") != std::string::npos;
        // Up to 8 segments every shape's clusters run at once; at 16 the grid says how many
        // would have to (16 KV heads: 16 clusters of 16, more than an H200's GPCs hold).
        if (clusters && segments <= 8) EXPECT_TRUE(in_cluster) << cluster_plan->info.grid;
        if (!clusters || segments > 16) EXPECT_FALSE(in_cluster) << cluster_plan->info.grid;
        if (clusters && segments <= 16 && !in_cluster)
          EXPECT_NE(cluster_plan->info.grid.find(" at once)"), std::string::npos)
              << cluster_plan->info.grid;
        EXPECT_EQ(kernel_plan->info.grid.find("merge in cluster"), std::string::npos);
        merged_in_cluster += in_cluster;

        DeviceCopy ws(nullptr,
                      std::max(cluster_plan->workspace_bytes, kernel_plan->workspace_bytes));
        cudaStream_t stream = nullptr;
        ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
        auto run = [&](const lk::DeviceAttentionPlan& plan) {
          EXPECT_TRUE(
              lk::LaunchDeviceAttention(lk::Backend::kCuda, args, plan, stream, ws.p, ws.n).ok());
          std::vector<unsigned char> got(p.q.bytes());
          EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
          EXPECT_EQ(cudaMemcpy(got.data(), d.out.p, got.size(), cudaMemcpyDeviceToHost),
                    cudaSuccess);
          EXPECT_EQ(cudaMemset(d.out.p, 0xff, got.size()), cudaSuccess);  // a skipped write shows
          return got;
        };
        const std::vector<unsigned char> expected = run(*kernel_plan);
        EXPECT_TRUE(run(*cluster_plan) == expected)
            << "cluster merge differs from the merge kernel";
        // In a graph: three calls captured, the last one's output compared after each replay.
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        bool captured = true;
        for (int i = 0; i < 3; ++i)
          captured = captured && lk::LaunchDeviceAttention(lk::Backend::kCuda, args, *cluster_plan,
                                                           stream, ws.p, ws.n)
                                     .ok();
        ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
        ASSERT_TRUE(captured);
        ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
        for (int i = 0; i < 2; ++i) {
          ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
          std::vector<unsigned char> got(p.q.bytes());
          ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
          ASSERT_EQ(cudaMemcpy(got.data(), d.out.p, got.size(), cudaMemcpyDeviceToHost),
                    cudaSuccess);
          EXPECT_TRUE(got == expected) << "graph replay " << i;
          ASSERT_EQ(cudaMemset(d.out.p, 0xff, got.size()), cudaSuccess);
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        cudaStreamDestroy(stream);
      }
    }
  }
  if (!clusters) GTEST_SKIP() << "no cluster merge below compute capability 9.0 (compared anyway)";
  EXPECT_GE(merged_in_cluster, 4 * 4 * 3);
}

// A sliding layer's call by default (policy auto, tuning auto): the split counts the window's
// 32-key tiles (one row: 32 tiles, 16 segments; more: 33 tiles, 11 segments of 3). At one and
// two rows (2 and 4 score columns) the split-keys kernel runs, with the merge kernel; at five
// the generic kernel's segments merge in their clusters on compute capability 9.0, with the bits
// of merge_in_cluster=off at the same kernel. The same split at 8K and 20K: a window's call does
// not grow with the depth. (The counts are an H200's, 132 SMs; elsewhere the bits and the
// depth-independence are checked.)
TEST(DeviceEntryMerge, SlidingLayersMergeInTheirClustersByDefault) {
  if (!lk::BackendAvailable(lk::Backend::kCuda)) GTEST_SKIP() << "no CUDA device";
  auto device = lk::QueryDevice(lk::Backend::kCuda);
  ASSERT_TRUE(device.ok()) << device.error().ToString();
  const bool clusters = device->cc_major == 9 && device->cc_minor == 0;
  const bool h200 = clusters && device->sm_count == 132;
  lk::AttentionShape shape;
  shape.q_heads = 32;
  shape.kv_heads = 16;
  shape.head_dim = 256;
  shape.window = 1024;
  std::map<int, int> segments_at_rows;
  for (int kv_len : {8192, 20000}) {
    for (int rows : {1, 2, 5}) {
      SCOPED_TRACE(std::to_string(kv_len) + " keys, " + std::to_string(rows) + " rows");
      auto problem = lk::MakeProblem(shape, {{rows, kv_len}}, 11 + rows);
      ASSERT_TRUE(problem.ok()) << problem.error().ToString();
      const lk::HostProblem& p = *problem;
      DeviceProblemCopy d(p);
      const lk::DeviceAttentionArgs args = d.Args(p);
      lk::RunOptions by_default, merge_kernel;
      auto plan = lk::PlanDeviceAttention(lk::Backend::kCuda, args, by_default);
      ASSERT_TRUE(plan.ok()) << plan.error().ToString();
      const bool wide = plan->info.grid.find("(256 thr") != std::string::npos;
      const bool split = plan->info.grid.find("split keys") != std::string::npos;
      merge_kernel.tuning.merge_in_cluster = lk::Switch::kOff;
      merge_kernel.tuning.wide_work_groups = wide ? lk::Switch::kOn : lk::Switch::kOff;
      merge_kernel.tuning.split_keys = split ? lk::Switch::kOn : lk::Switch::kOff;
      auto reference = lk::PlanDeviceAttention(lk::Backend::kCuda, args, merge_kernel);
      ASSERT_TRUE(reference.ok()) << reference.error().ToString();
      EXPECT_EQ(plan->info.path, lk::Path::k3D);
      EXPECT_EQ(reference->info.segments, plan->info.segments);
      auto [first, inserted] = segments_at_rows.emplace(rows, plan->info.segments);
      if (!inserted) EXPECT_EQ(plan->info.segments, first->second) << "split changed with depth";
      const bool in_cluster = plan->info.grid.find("merge in cluster") != std::string::npos;
      if (!clusters) EXPECT_FALSE(in_cluster) << plan->info.grid;
      if (h200) {
        EXPECT_EQ(plan->info.segments, rows == 1 ? 16 : 11) << plan->info.grid;
        EXPECT_EQ(in_cluster, rows == 5) << plan->info.grid;
        EXPECT_EQ(split, rows <= 2) << plan->info.grid;
      }
      EXPECT_EQ(reference->info.grid.find("merge in cluster"), std::string::npos);

      DeviceCopy ws(nullptr, std::max(plan->workspace_bytes, reference->workspace_bytes));
      auto run = [&](const lk::DeviceAttentionPlan& pl) { return RunPlan(d, args, pl, ws); };
      EXPECT_TRUE(run(*plan) == run(*reference)) << plan->info.grid;
    }
  }
}

// wide_work_groups=auto at head 256: the split is the narrow kernel's (the policy's), and the
// plan then takes the wide kernel where a query block sees at most 16K keys and both widths fit
// as many work groups per SM -- with the bits of wide_work_groups=on at the same split; from
// 16K keys on, the narrow kernel with the bits of off. (Which kernel runs is checked on an
// H200, where both widths fit equally; elsewhere the split and the bits.)
TEST(DeviceEntryWidth, Head256WidensAfterTheSplitUpTo16KKeys) {
  if (!lk::BackendAvailable(lk::Backend::kCuda)) GTEST_SKIP() << "no CUDA device";
  auto device = lk::QueryDevice(lk::Backend::kCuda);
  ASSERT_TRUE(device.ok()) << device.error().ToString();
  const bool h200 = device->cc_major == 9 && device->sm_count == 132;
  lk::AttentionShape shape;
  shape.q_heads = 32;
  shape.kv_heads = 16;
  shape.head_dim = 256;
  for (int kv_len : {3000, 16384, 16385}) {
    for (int rows : {1, 4}) {
      SCOPED_TRACE(std::to_string(kv_len) + " keys, " + std::to_string(rows) + " rows");
      auto problem = lk::MakeProblem(shape, {{rows, kv_len}}, 23 + rows);
      ASSERT_TRUE(problem.ok()) << problem.error().ToString();
      const lk::HostProblem& p = *problem;
      DeviceProblemCopy d(p);
      const lk::DeviceAttentionArgs args = d.Args(p);
      lk::RunOptions by_default, narrow, wide;
      // (The generic kernel's width is the question: split_keys=auto would take the split-keys
      // kernel at one row.)
      by_default.tuning.split_keys = narrow.tuning.split_keys = lk::Switch::kOff;
      narrow.tuning.wide_work_groups = lk::Switch::kOff;
      wide.tuning.wide_work_groups = lk::Switch::kOn;
      auto plan = lk::PlanDeviceAttention(lk::Backend::kCuda, args, by_default);
      auto narrow_plan = lk::PlanDeviceAttention(lk::Backend::kCuda, args, narrow);
      ASSERT_TRUE(plan.ok()) << plan.error().ToString();
      ASSERT_TRUE(narrow_plan.ok()) << narrow_plan.error().ToString();
      EXPECT_EQ(plan->info.path, lk::Path::k3D);
      EXPECT_EQ(plan->info.segments, narrow_plan->info.segments) << "the split is the narrow one's";
      const bool widened = plan->info.grid.find("(256 thr") != std::string::npos;
      if (kv_len > 16384) EXPECT_FALSE(widened) << plan->info.grid;
      if (h200) EXPECT_EQ(widened, kv_len <= 16384) << plan->info.grid;
      // The same split forced on the other width: the bits of the kernel the plan took.
      wide.config.force_segments = narrow.config.force_segments = plan->info.segments;
      wide.policy = narrow.policy = lk::Policy::kForce3D;
      auto same = lk::PlanDeviceAttention(lk::Backend::kCuda, args, widened ? wide : narrow);
      ASSERT_TRUE(same.ok()) << same.error().ToString();
      EXPECT_EQ(same->info.grid, plan->info.grid);
      DeviceCopy ws(nullptr, std::max(plan->workspace_bytes, same->workspace_bytes));
      auto run = [&](const lk::DeviceAttentionPlan& pl) { return RunPlan(d, args, pl, ws); };
      EXPECT_TRUE(run(*plan) == run(*same)) << plan->info.grid;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, DeviceEntry,
                         ::testing::Values(Case{"global_d512_decode_legacy",
                                                32,
                                                4,
                                                512,
                                                0,
                                                {{1, 5000}},
                                                lk::Policy::kLegacy,
                                                lk::Path::k3D},
                                           Case{"global_d512_verify2_legacy",
                                                32,
                                                4,
                                                512,
                                                0,
                                                {{2, 5000}},
                                                lk::Policy::kLegacy,
                                                lk::Path::k2D},
                                           Case{"global_d512_verify2_specaware",
                                                32,
                                                4,
                                                512,
                                                0,
                                                {{2, 5000}},
                                                lk::Policy::kSpecAware,
                                                lk::Path::k3D},
                                           Case{"sliding_d256_verify2_specaware",
                                                32,
                                                16,
                                                256,
                                                1024,
                                                {{2, 3000}},
                                                lk::Policy::kSpecAware,
                                                lk::Path::k3D},
                                           Case{"mixed_d128_prefill_specaware",
                                                8,
                                                2,
                                                128,
                                                0,
                                                {{1, 300}, {5, 900}},
                                                lk::Policy::kSpecAware,
                                                lk::Path::k2D}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
