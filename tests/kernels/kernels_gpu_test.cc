// The correctness case table on the GPU backend compiled into this binary (CUDA or HIP).
// Labelled `gpu` in CTest; skips cleanly when no backend or device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "ladder/kernels/attention.h"
#include "ladder/kernels/bench.h"
#include "ladder/kernels/cases.h"
#include "ladder/kernels/timeline.h"

namespace lk = ladder::kernels;

namespace ladder::kernels {
// gtest prints a parameter through PrintTo found by ADL: the tuning's one-line form instead of
// its bytes.
void PrintTo(const TuningConfig& tuning, std::ostream* os) { *os << tuning.ToString(); }
}  // namespace ladder::kernels

namespace {

lk::Backend GpuBackend() {
  return lk::BackendAvailable(lk::Backend::kHip) ? lk::Backend::kHip : lk::Backend::kCuda;
}

// A shape of these heads, the rest (dtype, page size, window, softcap) the defaults.
lk::AttentionShape Heads(int q_heads, int kv_heads, int head_dim) {
  lk::AttentionShape shape;
  shape.q_heads = q_heads;
  shape.kv_heads = kv_heads;
  shape.head_dim = head_dim;
  return shape;
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
    EXPECT_NE(r->timing_method.find("graph replay: 5 calls"), std::string::npos)
        << r->timing_method;
    EXPECT_NE(lk::FormatJson(*r).find("\"timing\":\"graph\",\"graph_calls\":5"), std::string::npos);
  }
}

// The work-group timeline on the device: every work group of every call stamped, in the order
// its kernel passes the marks, and each call's merge ready only after the call's whole attention
// grid has exited (the merge waits for that grid: griddepcontrol.wait, or plain stream order).
// The kernels with those marks: split keys (dense-256, one row), the generic kernel (tiny) and
// the head-512 team kernel, under both timings.
TEST(GpuTimeline, EveryWorkGroupStampsItsMarksInOrder) {
  const lk::Backend b = GpuBackend();
  if (!lk::BackendAvailable(b)) GTEST_SKIP() << "no GPU backend with a device in this binary";
  struct Point {
    const char* preset;
    int rows;
    lk::Timing timing;
  };
  for (const Point& pt :
       {Point{"gemma4-dense-256", 1, lk::Timing::kGraph}, Point{"tiny", 2, lk::Timing::kStream},
        Point{"gemma4-31b-global", 2, lk::Timing::kGraph}}) {
    auto p = lk::BenchPoint::FromPreset(pt.preset, b);
    ASSERT_TRUE(p.ok());
    p->depth = 2048;
    p->query_rows = pt.rows;
    p->policy = lk::Policy::kForce3D;
    p->warmup = 5;
    p->timing = pt.timing;
    const int calls = 6;
    auto r = lk::RunTimeline(*p, calls);
    if (!r.ok() && r.error().code == lk::ErrorCode::kUnsupported)
      GTEST_SKIP() << r.error().message;  // a build without the marks (the default)
    ASSERT_TRUE(r.ok()) << pt.preset << ": " << r.error().ToString();
    const lk::TimelineSummary& s = r->summary;
    ASSERT_EQ(s.calls.size(), static_cast<size_t>(calls)) << pt.preset;
    EXPECT_EQ(s.typical_calls, calls - 2);
    EXPECT_GT(s.cycles_per_us, 100) << pt.preset;  // every such GPU clocks its SMs above 100 MHz
    EXPECT_LT(s.cycles_per_us, 5000) << pt.preset;
    ASSERT_GT(s.attention_work_groups, 0);
    EXPECT_EQ(s.spans.size(),
              static_cast<size_t>(calls) * (s.attention_work_groups + s.merge_work_groups))
        << pt.preset << ": a work group of some call stamped nothing";
    // The cycle counters order a work group's own marks exactly; 1 ns of slack for the fit.
    constexpr double kSlackUs = 1e-3;
    std::vector<double> attention_exit(calls, 0), merge_ready(calls, 1e300);
    for (const lk::WorkGroupSpan& w : s.spans) {
      const auto& t = w.t_us;
      const double ready = t[1], tile = t[2], loop_end = t[3], exit = t[4];
      ASSERT_FALSE(std::isnan(t[0]) || std::isnan(ready) || std::isnan(exit)) << pt.preset;
      EXPECT_LE(t[0], ready + kSlackUs);
      EXPECT_LE(ready, exit + kSlackUs);
      if (w.kernel == 0) {
        ASSERT_FALSE(std::isnan(loop_end)) << pt.preset << ": attention without a loop end";
        if (!std::isnan(tile)) EXPECT_LE(ready, tile + kSlackUs);
        EXPECT_LE(std::isnan(tile) ? ready : tile, loop_end + kSlackUs);
        EXPECT_LE(loop_end, exit + kSlackUs);
        attention_exit[w.call] = std::max(attention_exit[w.call], exit);
      } else {
        merge_ready[w.call] = std::min(merge_ready[w.call], ready);
      }
    }
    if (s.merge_work_groups > 0) {
      // Across multiprocessors the alignment is a fit: allow the timer's step, at most 1 us.
      const double slack = std::min(1.0, std::max(kSlackUs, s.timer_resolution_ns * 1e-3));
      for (int c = 0; c < calls; ++c)
        EXPECT_GE(merge_ready[c] + slack, attention_exit[c]) << pt.preset << " call " << c;
    }
    const std::string table = lk::FormatTimeline(*r);
    EXPECT_NE(table.find("call to call"), std::string::npos);
    EXPECT_NE(lk::FormatTimelineJson(*r, true).find("\"spans\":[{\"call\":0"), std::string::npos);
  }
}

// Every row of the dispatch table that a head-512 case reaches, forced through the tuning: each
// kernel that runs must pass the case table as the defaults do. A kernel the table has no row for
// at a case's score columns (or that this device cannot run) is refused with kUnsupported and
// skipped; the defaults must run every case.
class GpuHead512Table : public ::testing::TestWithParam<lk::TuningConfig> {};

TEST_P(GpuHead512Table, EveryReachableKernelPassesTheHead512Cases) {
  const lk::Backend b = GpuBackend();
  if (!lk::BackendAvailable(b)) GTEST_SKIP() << "no GPU backend with a device in this binary";
  const lk::TuningConfig& tuning = GetParam();
  const bool defaults = tuning.ToString() == "defaults";
  int ran = 0;
  for (const lk::CaseSpec& c : lk::Cases()) {
    if (c.shape.head_dim != 512 || c.cpu_only) continue;
    auto r = lk::RunCase(b, c, /*repeats=*/3, /*cpu_threads=*/2, tuning);
    if (!r.ok() && r.error().code == lk::ErrorCode::kUnsupported && !defaults) continue;
    ASSERT_TRUE(r.ok()) << c.name << " under " << tuning.ToString() << ": " << r.error().ToString();
    EXPECT_TRUE(r->passed) << tuning.ToString() << ": " << r->Line();
    ++ran;
  }
  // The generic kernel runs everywhere; team kernels only on Hopper.
  if (defaults || tuning.head512 == lk::Head512Kernel::kGeneric) EXPECT_GT(ran, 0);
  if (ran == 0) GTEST_SKIP() << tuning.ToString() << " runs on no head-512 case on this device";
}

lk::TuningConfig Tuned(lk::Head512Kernel kernel, lk::Switch merge_in_kernel = lk::Switch::kAuto) {
  lk::TuningConfig t;
  t.head512 = kernel;
  t.merge_in_kernel = merge_in_kernel;
  return t;
}

INSTANTIATE_TEST_SUITE_P(Kernels, GpuHead512Table,
                         ::testing::Values(lk::TuningConfig{}, Tuned(lk::Head512Kernel::kGeneric),
                                           Tuned(lk::Head512Kernel::kTeamByDims),
                                           Tuned(lk::Head512Kernel::kTeamByColumn),
                                           Tuned(lk::Head512Kernel::kTeamSplit),
                                           Tuned(lk::Head512Kernel::kTeamSplitWgmma),
                                           Tuned(lk::Head512Kernel::kTeamColumns),
                                           Tuned(lk::Head512Kernel::kAuto, lk::Switch::kOff)),
                         [](const ::testing::TestParamInfo<lk::TuningConfig>& info) {
                           std::string name = info.param.ToString();
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// A forced kernel at score columns it has no instantiation for fails at plan time, naming the
// combination, instead of running another kernel.
TEST(GpuDispatch, AnUnsupportedCombinationIsRefusedByName) {
  const lk::Backend b = GpuBackend();
  if (!lk::BackendAvailable(b)) GTEST_SKIP() << "no GPU backend with a device in this binary";
  const lk::AttentionShape shape = Heads(16, 2, 512);
  auto problem = lk::MakeProblem(shape, {{2, 300}}, 7);  // 2 rows x GQA 8: 16 score columns
  ASSERT_TRUE(problem.ok());
  lk::RunOptions options;
  options.tuning.head512 = lk::Head512Kernel::kTeamByDims;  // instantiated for <= 8 columns only
  lk::HostTensor out;
  auto r = lk::RunAttention(b, *problem, options, &out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, lk::ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("team-by-dims"), std::string::npos) << r.error().message;
}

// Both work groups of the generic kernel at head 128 and 256 (the defaults take one of them per
// head dim) pass every case of those head dims, 2D and 3D agreeing.
class GpuWorkGroups : public ::testing::TestWithParam<lk::Switch> {};

TEST_P(GpuWorkGroups, BothWidthsPassTheCasesOfTheirHeadDims) {
  const lk::Backend b = GpuBackend();
  if (!lk::BackendAvailable(b)) GTEST_SKIP() << "no GPU backend with a device in this binary";
  lk::TuningConfig tuning;
  tuning.wide_work_groups = GetParam();
  tuning.split_keys = lk::Switch::kOff;  // (auto takes the split-keys kernel at 1-2 rows)
  int ran = 0;
  for (const lk::CaseSpec& c : lk::Cases()) {
    if (c.cpu_only || (c.shape.head_dim != 128 && c.shape.head_dim != 256)) continue;
    auto r = lk::RunCase(b, c, /*repeats=*/3, /*cpu_threads=*/2, tuning);
    ASSERT_TRUE(r.ok()) << c.name << " under " << tuning.ToString() << ": " << r.error().ToString();
    EXPECT_TRUE(r->passed) << tuning.ToString() << ": " << r->Line();
    ++ran;
  }
  EXPECT_GE(ran, 10);
}

INSTANTIATE_TEST_SUITE_P(Kernels, GpuWorkGroups,
                         ::testing::Values(lk::Switch::kOff, lk::Switch::kOn),
                         [](const ::testing::TestParamInfo<lk::Switch>& info) {
                           return std::string(lk::ToString(info.param));
                         });

// Head 64 has no wide kernel: asking for one fails at plan time, naming the tuning.
TEST(GpuDispatch, AWideWorkGroupWhereThereIsNoneIsRefusedByName) {
  const lk::Backend b = GpuBackend();
  if (!lk::BackendAvailable(b)) GTEST_SKIP() << "no GPU backend with a device in this binary";
  const lk::AttentionShape shape = Heads(8, 2, 64);
  auto problem = lk::MakeProblem(shape, {{1, 300}}, 7);
  ASSERT_TRUE(problem.ok());
  lk::RunOptions options;
  options.tuning.wide_work_groups = lk::Switch::kOn;
  lk::HostTensor out;
  auto r = lk::RunAttention(b, *problem, options, &out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, lk::ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("wide_work_groups"), std::string::npos) << r.error().message;
}

// The split-keys kernel (split_keys=on) passes every case it takes: the table's head-128 and
// head-256 cases of at most 8 score columns, and cases of its own for what the table lacks at
// those head dims -- a window, a softcap, pages of 32, several sequences of 1 and 2 rows in one
// call, empty segments, f16 -- 2D and 3D agreeing within 1 ULP, bit-identical repeats.
TEST(GpuSplitKeys, PassesEveryCaseItTakes) {
  const lk::Backend b = GpuBackend();
  if (b != lk::Backend::kCuda || !lk::BackendAvailable(b)) GTEST_SKIP() << "no CUDA device";
  lk::TuningConfig tuning;
  tuning.split_keys = lk::Switch::kOn;
  auto shape = [](int q_heads, int kv_heads, int block_size, int window, float softcap,
                  lk::DType dtype, int head_dim = 128) {
    lk::AttentionShape s;
    s.q_heads = q_heads;
    s.kv_heads = kv_heads;
    s.head_dim = head_dim;
    s.block_size = block_size;
    s.window = window;
    s.softcap = softcap;
    s.dtype = dtype;
    return s;
  };
  std::vector<lk::CaseSpec> cases;
  for (const lk::CaseSpec& c : lk::Cases()) {
    int rows = 0;
    for (const lk::SeqSpec& q : c.seqs) rows = std::max(rows, q.q_len);
    if (!c.cpu_only && (c.shape.head_dim == 128 || c.shape.head_dim == 256) &&
        c.shape.q_heads / c.shape.kv_heads * rows <= 8)
      cases.push_back(c);
  }
  const size_t from_table = cases.size();
  const lk::DType bf16 = lk::DType::kBF16;
  cases.push_back({"split_window300_gqa8", shape(16, 2, 16, 300, 0, bf16), {{1, 5000}}, 3});
  cases.push_back(
      {"split_window70_softcap30_gqa4_spec2", shape(16, 4, 16, 70, 30.0f, bf16), {{2, 2100}}, 4});
  cases.push_back({"split_bs32_gqa4_mixed_rows",
                   shape(16, 4, 32, 0, 0, bf16),
                   {{1, 1000}, {2, 40}, {1, 5}, {2, 4097}},
                   5});
  cases.push_back(
      {"split_gqa2_rows4_f16", shape(16, 8, 16, 0, 0, lk::DType::kF16), {{4, 3001}}, 6});
  cases.push_back({"split_empty_segments", shape(8, 1, 16, 0, 0, bf16), {{1, 100}}, 7, 16});
  cases.push_back(
      {"split_d256_window1024_rows4", shape(32, 16, 16, 1024, 0, bf16, 256), {{4, 9000}}, 8});
  cases.push_back({"split_d256_softcap30_mixed",
                   shape(8, 2, 32, 0, 30.0f, bf16, 256),
                   {{1, 3000}, {2, 700}, {1, 33}},
                   9});
  cases.push_back(
      {"split_d256_gqa4_rows2_f16", shape(16, 4, 16, 0, 0, lk::DType::kF16, 256), {{2, 2500}}, 10});
  int ran = 0;
  for (const lk::CaseSpec& c : cases) {
    auto r = lk::RunCase(b, c, /*repeats=*/3, /*cpu_threads=*/2, tuning);
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.error().ToString();
    EXPECT_TRUE(r->passed) << r->Line();
    ++ran;
  }
  EXPECT_GE(from_table, 3u);
  EXPECT_EQ(ran, static_cast<int>(cases.size()));
}

// split_keys=auto: the split-keys kernel at one decode row of GQA 8 at head 128 (8 score
// columns) and up to two rows of GQA 2 at head 256 (4), the generic kernel at two rows of GQA 8
// (16) and four of GQA 2 (8), and wherever wide_work_groups=on asks for it.
TEST(GpuSplitKeys, TheDefaultTakesItAtOneRowOfGqa8AndTwoOfGqa2) {
  const lk::Backend b = GpuBackend();
  if (b != lk::Backend::kCuda || !lk::BackendAvailable(b)) GTEST_SKIP() << "no CUDA device";
  auto device = lk::QueryDevice(b);
  ASSERT_TRUE(device.ok()) << device.error().ToString();
  if (device->cc_major < 8) GTEST_SKIP() << "no mma.sync below compute capability 8.0";
  struct Shape {
    int q_heads, kv_heads, head_dim, max_split_rows;
  };
  for (const Shape& sh : {Shape{64, 8, 128, 1}, Shape{32, 16, 256, 2}}) {
    const lk::AttentionShape shape = Heads(sh.q_heads, sh.kv_heads, sh.head_dim);
    for (int rows : {1, 2, 4}) {
      for (lk::Switch wide : {lk::Switch::kAuto, lk::Switch::kOn}) {
        auto problem = lk::MakeProblem(shape, {{rows, 3000}}, 13);
        ASSERT_TRUE(problem.ok());
        lk::RunOptions options;
        options.tuning.wide_work_groups = wide;
        lk::HostTensor out;
        auto r = lk::RunAttention(b, *problem, options, &out);
        ASSERT_TRUE(r.ok()) << r.error().ToString();
        const bool split = r->grid.find("split keys") != std::string::npos;
        EXPECT_EQ(split, rows <= sh.max_split_rows && wide == lk::Switch::kAuto)
            << sh.head_dim << ", " << rows << " rows: " << r->grid;
      }
    }
  }
}

// Five query rows of GQA 8 at head 512 (40 score columns) run as one query block of the
// column-teams kernel where the team kernels fit (Hopper), so K and V are read once; forcing the
// 32-column kernel gives the two query blocks of before, and the same output within the case
// table's tolerance. Six rows (48 columns) stay two blocks.
TEST(GpuColumnTeams, FiveRowsOfGqa8AreOneQueryBlock) {
  const lk::Backend b = GpuBackend();
  if (!lk::BackendAvailable(b)) GTEST_SKIP() << "no GPU backend with a device in this binary";
  const lk::AttentionShape shape = Heads(32, 4, 512);
  auto problem = lk::MakeProblem(shape, {{5, 3000}}, 17);
  ASSERT_TRUE(problem.ok());
  lk::RunOptions options;
  options.policy = lk::Policy::kForce3D;
  lk::HostTensor one_block, two_blocks;
  auto r = lk::RunAttention(b, *problem, options, &one_block);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  if (r->grid.find("team512") == std::string::npos)
    GTEST_SKIP() << "no team kernels on this device: " << r->grid;
  EXPECT_NE(r->grid.find("column teams"), std::string::npos) << r->grid;
  EXPECT_EQ(r->grid.rfind("3D grid 1x4x", 0), 0u) << r->grid;
  options.tuning.head512 = lk::Head512Kernel::kTeamSplit;
  auto split = lk::RunAttention(b, *problem, options, &two_blocks);
  ASSERT_TRUE(split.ok()) << split.error().ToString();
  EXPECT_EQ(split->grid.rfind("3D grid 2x4x", 0), 0u) << split->grid;
  ASSERT_EQ(one_block.numel(), two_blocks.numel());
  double worst = 0;
  for (size_t i = 0; i < one_block.numel(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(one_block.Get(i)) - two_blocks.Get(i)));
  EXPECT_LT(worst, 3e-2) << "the two kernels' outputs differ by " << worst;

  auto six = lk::MakeProblem(shape, {{6, 3000}}, 17);
  ASSERT_TRUE(six.ok());
  options.tuning = {};
  lk::HostTensor out;
  auto r6 = lk::RunAttention(b, *six, options, &out);
  ASSERT_TRUE(r6.ok()) << r6.error().ToString();
  EXPECT_EQ(r6->grid.rfind("3D grid 2x4x", 0), 0u) << r6->grid;
  EXPECT_EQ(r6->grid.find("column teams"), std::string::npos) << r6->grid;
}

// Under auto, five rows take column teams only where the call has the work for its half-sized
// grid (ColumnTeamsHaveWork): at TP=2's two KV heads, one sequence below 4K keys runs as two
// query blocks; two sequences, or 4K keys and more, run as one; forced, column teams runs anyway.
TEST(GpuColumnTeams, SmallCallsAtTwoKvHeadsRunAsTwoBlocks) {
  const lk::Backend b = GpuBackend();
  if (!lk::BackendAvailable(b)) GTEST_SKIP() << "no GPU backend with a device in this binary";
  const lk::AttentionShape shape = Heads(16, 2, 512);
  struct Call {
    std::vector<lk::SeqSpec> seqs;
    lk::Head512Kernel head512;
    bool columns;
  };
  for (const Call& c : {Call{{{5, 3000}}, lk::Head512Kernel::kAuto, false},
                        Call{{{5, 3000}, {5, 2000}}, lk::Head512Kernel::kAuto, true},
                        Call{{{5, 5000}}, lk::Head512Kernel::kAuto, true},
                        Call{{{5, 3000}}, lk::Head512Kernel::kTeamColumns, true}}) {
    auto problem = lk::MakeProblem(shape, c.seqs, 23);
    ASSERT_TRUE(problem.ok());
    lk::RunOptions options;
    options.policy = lk::Policy::kAuto;
    options.tuning.head512 = c.head512;
    lk::HostTensor out;
    auto r = lk::RunAttention(b, *problem, options, &out);
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    if (r->grid.find("team512") == std::string::npos)
      GTEST_SKIP() << "no team kernels on this device: " << r->grid;
    EXPECT_EQ(r->grid.find("column teams") != std::string::npos, c.columns)
        << c.seqs.size() << " sequences, " << c.seqs[0].kv_len << " keys: " << r->grid;
  }
}

// What the split-keys kernel does not take is refused by name: more than 8 score columns (two
// rows of GQA 8; its 16-column form was deleted), a head dim other than 128 and 256, and
// split_keys=on beside wide_work_groups=on.
TEST(GpuSplitKeys, WhatItDoesNotTakeIsRefusedByName) {
  const lk::Backend b = GpuBackend();
  if (!lk::BackendAvailable(b)) GTEST_SKIP() << "no GPU backend with a device in this binary";
  struct Refused {
    int q_heads, kv_heads, head_dim, rows;
    lk::Switch wide;
    lk::ErrorCode code;
    const char* says;
  };
  for (const Refused& x :
       {Refused{16, 2, 128, 2, lk::Switch::kAuto, lk::ErrorCode::kUnsupported, "split_keys=on"},
        Refused{8, 4, 256, 8, lk::Switch::kAuto, lk::ErrorCode::kUnsupported, "split_keys=on"},
        Refused{8, 2, 64, 1, lk::Switch::kAuto, lk::ErrorCode::kUnsupported, "split_keys=on"},
        Refused{16, 2, 128, 1, lk::Switch::kOn, lk::ErrorCode::kInvalidArgument,
                "wide_work_groups=on"}}) {
    const lk::AttentionShape shape = Heads(x.q_heads, x.kv_heads, x.head_dim);
    auto problem = lk::MakeProblem(shape, {{x.rows, 700}}, 9);
    ASSERT_TRUE(problem.ok());
    lk::RunOptions options;
    options.tuning.split_keys = lk::Switch::kOn;
    options.tuning.wide_work_groups = x.wide;
    lk::HostTensor out;
    auto r = lk::RunAttention(b, *problem, options, &out);
    ASSERT_FALSE(r.ok()) << x.head_dim << " x " << x.rows;
    EXPECT_EQ(r.error().code, x.code) << r.error().ToString();
    EXPECT_NE(r.error().message.find(x.says), std::string::npos) << r.error().message;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, GpuCaseTable,
                         ::testing::ValuesIn(lk::Cases().begin(), lk::Cases().end()),
                         [](const ::testing::TestParamInfo<lk::CaseSpec>& info) {
                           return info.param.name;
                         });

}  // namespace

// Where the merge releases the next call's attention kernel: at its start where twice that grid
// fits on the SMs, at its end where the merge holds more than one work group per SM beside a grid
// of at most half the SMs (it would land packed), after its wait elsewhere; never early with
// release_next=off. The grid names the first two.
TEST(GpuRelease, TheMergeReleasesTheNextWhereItsWorkGroupsLandSpread) {
  const lk::Backend b = GpuBackend();
  if (!lk::BackendAvailable(b)) GTEST_SKIP() << "no GPU backend with a device in this binary";
  auto info = lk::QueryDevice(b);
  ASSERT_TRUE(info.ok()) << info.error().ToString();
  enum class At { kStart, kWait, kEnd };
  struct Call {
    int q_heads, kv_heads, rows, segments;
    lk::Switch release;
    At at;
    bool applies;  // on this device's SM count
  };
  const int sms = info->sm_count;
  // Head 128, 1000 keys. 2 KV heads x 8 segments: 16 work groups, a merge of 16. 8 KV heads x 8
  // segments at 4 rows: 64 work groups beside a merge of 256 (4 tokens x 64 q heads). 8 KV heads
  // x 32 segments at 2 rows (16 of 64-key tiles: 16 segments): 128 beside a merge of 128.
  for (const Call& c :
       {Call{16, 2, 1, 8, lk::Switch::kAuto, At::kStart, sms >= 32},
        Call{16, 2, 1, 8, lk::Switch::kOff, At::kWait, true},
        Call{64, 8, 4, 8, lk::Switch::kAuto, At::kEnd, sms >= 128 && sms < 256},
        Call{64, 8, 2, 32, lk::Switch::kAuto, At::kWait, sms >= 128 && sms < 256}}) {
    if (!c.applies) continue;
    const lk::AttentionShape shape = Heads(c.q_heads, c.kv_heads, 128);
    auto problem = lk::MakeProblem(shape, {{c.rows, 1000}}, 31);
    ASSERT_TRUE(problem.ok());
    lk::RunOptions options;
    options.policy = lk::Policy::kForce3D;
    options.config.force_segments = c.segments;
    options.tuning.release_next = c.release;
    options.tuning.merge_in_kernel = lk::Switch::kOff;
    lk::HostTensor out;
    auto r = lk::RunAttention(b, *problem, options, &out);
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    ASSERT_NE(r->grid.find("+ merge "), std::string::npos) << r->grid;
    EXPECT_EQ(r->grid.find("releases the next at start") != std::string::npos, c.at == At::kStart)
        << r->grid;
    EXPECT_EQ(r->grid.find("releases the next at its end") != std::string::npos, c.at == At::kEnd)
        << r->grid;
  }
}
