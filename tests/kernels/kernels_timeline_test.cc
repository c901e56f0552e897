// The work-group timeline's alignment and phases, on stamps made here from a known schedule: the
// summary must give back the schedule's phases although every multiprocessor's cycle counter
// starts elsewhere and the global timer ticks once a microsecond.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ladder/kernels/timeline.h"

namespace lk = ladder::kernels;

namespace {

constexpr double kCyclesPerUs = 1755.0;  // a clock no test constant rounds to

// A made-up GPU of `sms` multiprocessors whose counters start at unrelated origins, and whose
// global timer is true time (plus an offset) cut to `timer_step_ns`.
struct FakeGpu {
  int sms = 8;
  double timer_step_ns = 1000;
  std::vector<uint64_t> origin;  // cycle count at true time 0, per multiprocessor
  explicit FakeGpu(int n, double step) : sms(n), timer_step_ns(step) {
    std::mt19937_64 rng(7);
    for (int i = 0; i < n; ++i) origin.push_back(1'000'000'000ull + rng() % 900'000'000'000ull);
  }
  // Stamps mark `m` of `s` at true time `t_us`.
  void Stamp(lk::WorkGroupStamps* s, lk::Mark m, double t_us) const {
    const double ns = 5'000'000'000.0 + t_us * 1000.0;  // the timer's own epoch
    s->timer_ns[static_cast<int>(m)] =
        static_cast<uint64_t>(std::floor(ns / timer_step_ns) * timer_step_ns);
    s->cycles[static_cast<int>(m)] = origin[s->sm] + static_cast<uint64_t>(t_us * kCyclesPerUs);
  }
};

// A schedule of `calls` calls, one every `period` µs: `groups` attention work groups that get
// ready over `dispatch` µs, take `tile` µs to their first tile, `keys` µs of key loop and `write`
// µs to exit; the merge (`merge_groups` of them) ready `merge_wait` µs after the last attention
// exit, each taking `merge` µs.
struct Schedule {
  int calls = 12, groups = 32, merge_groups = 8;
  double period = 9.8, dispatch = 0.6, tile = 1.3, keys = 2.4, write = 0.7, merge_wait = 0.9,
         merge = 1.6;
};

std::vector<lk::WorkGroupStamps> Make(const FakeGpu& gpu, const Schedule& sc) {
  std::vector<lk::WorkGroupStamps> out;
  int next_sm = 0;
  for (int c = 0; c < sc.calls; ++c) {
    const double t0 = 3.0 + c * sc.period;
    double last_exit = 0;
    for (int g = 0; g < sc.groups; ++g) {
      lk::WorkGroupStamps s;
      s.call = c, s.kernel = 0, s.work_group = g, s.sm = next_sm++ % gpu.sms;
      const double ready = t0 + sc.dispatch * g / (sc.groups - 1);
      gpu.Stamp(&s, lk::Mark::kEntry, ready - 0.4);
      gpu.Stamp(&s, lk::Mark::kReady, ready);
      gpu.Stamp(&s, lk::Mark::kFirstTile, ready + sc.tile);
      gpu.Stamp(&s, lk::Mark::kLoopEnd, ready + sc.tile + sc.keys);
      gpu.Stamp(&s, lk::Mark::kExit, ready + sc.tile + sc.keys + sc.write);
      last_exit = std::max(last_exit, ready + sc.tile + sc.keys + sc.write);
      out.push_back(s);
    }
    for (int g = 0; g < sc.merge_groups; ++g) {
      lk::WorkGroupStamps s;
      s.call = c, s.kernel = 1, s.work_group = g, s.sm = next_sm++ % gpu.sms;
      const double ready = last_exit + sc.merge_wait;
      gpu.Stamp(&s, lk::Mark::kEntry, ready - 2.0);
      gpu.Stamp(&s, lk::Mark::kReady, ready);
      gpu.Stamp(&s, lk::Mark::kExit, ready + sc.merge);
      out.push_back(s);
    }
  }
  return out;
}

void ExpectPhases(const lk::CallPhases& got, const Schedule& sc, double tol) {
  EXPECT_NEAR(got.dispatch_us, sc.dispatch, tol);
  EXPECT_NEAR(got.first_tile_us, sc.tile, tol);
  EXPECT_NEAR(got.keys_us, sc.keys, tol);
  EXPECT_NEAR(got.write_out_us, sc.write, tol);
  EXPECT_NEAR(got.attention_us, sc.dispatch + sc.tile + sc.keys + sc.write, tol);
  EXPECT_NEAR(got.merge_wait_us, sc.merge_wait, tol);
  EXPECT_NEAR(got.merge_us, sc.merge, tol);
  const double call = sc.dispatch + sc.tile + sc.keys + sc.write + sc.merge_wait + sc.merge;
  EXPECT_NEAR(got.to_next_us, sc.period - call, tol);
  EXPECT_NEAR(got.period_us, sc.period, tol);
}

TEST(Timeline, AFineTimerGivesTheScheduleBack) {
  const FakeGpu gpu(8, 1.0);
  const Schedule sc;
  auto s = lk::Summarize(Make(gpu, sc));
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_NEAR(s->cycles_per_us, kCyclesPerUs, kCyclesPerUs * 1e-4);
  EXPECT_LT(s->timer_resolution_ns, 100.0);  // the closest two stamps: at least one step
  EXPECT_TRUE(s->aligned_by_timer);
  EXPECT_EQ(s->attention_work_groups, sc.groups);
  EXPECT_EQ(s->merge_work_groups, sc.merge_groups);
  ASSERT_EQ(s->calls.size(), static_cast<size_t>(sc.calls));
  EXPECT_EQ(s->typical_calls, sc.calls - 2);  // the first and the last have no neighbour
  ExpectPhases(s->typical, sc, 0.01);
  for (int c = 1; c + 1 < sc.calls; ++c) ExpectPhases(s->calls[c], sc, 0.01);
  EXPECT_TRUE(std::isnan(s->calls.back().period_us));  // no next call
}

// A 1 µs timer step, about a fifth of the phases: aligned by the cycle counters, every phase
// comes back within 0.1 µs. Reading the timer alone would be off by up to the whole step.
TEST(Timeline, ACoarseTimerIsAlignedByTheCycleCounters) {
  const FakeGpu gpu(8, 1000.0);
  const Schedule sc;
  auto s = lk::Summarize(Make(gpu, sc));
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(s->timer_resolution_ns, 1000.0);
  EXPECT_FALSE(s->aligned_by_timer);
  EXPECT_NEAR(s->cycles_per_us, kCyclesPerUs, kCyclesPerUs * 0.01);
  ExpectPhases(s->typical, sc, 0.1);
  // A work group's own marks are exact whatever the timer: one multiprocessor's counter.
  const lk::WorkGroupSpan& w = s->spans.front();
  EXPECT_NEAR(w.t_us[2] - w.t_us[1], sc.tile, sc.tile * 0.01);
}

// No merge kernel (2D, or a merge inside the attention kernel), and a kernel without the
// first-tile mark (the head-512 team kernel): those phases are absent, not zero, and the key
// loop is counted from ready.
TEST(Timeline, MissingMarksAreAbsentNotZero) {
  const FakeGpu gpu(4, 1.0);
  Schedule sc;
  sc.merge_groups = 0;
  std::vector<lk::WorkGroupStamps> stamps = Make(gpu, sc);
  for (lk::WorkGroupStamps& s : stamps) s.timer_ns[2] = s.cycles[2] = 0;
  auto s = lk::Summarize(stamps);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_EQ(s->merge_work_groups, 0);
  EXPECT_TRUE(std::isnan(s->typical.first_tile_us));
  EXPECT_TRUE(std::isnan(s->typical.merge_us));
  EXPECT_TRUE(std::isnan(s->typical.merge_wait_us));
  EXPECT_NEAR(s->typical.keys_us, sc.tile + sc.keys, 0.01);
  EXPECT_NEAR(s->typical.to_next_us, sc.period - (sc.dispatch + sc.tile + sc.keys + sc.write),
              0.01);
  lk::TimelineResult r;
  r.summary = *s;
  r.calls = sc.calls;
  const std::string json = lk::FormatTimelineJson(r, false);
  EXPECT_NE(json.find("\"merge_us\":null"), std::string::npos) << json;
  EXPECT_EQ(json.find("nan"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"spans\""), std::string::npos);
}

// A fine timer is read as is, whatever the counters do: an SM clock that slows down halfway
// (as under load) leaves every phase where the timer put it.
TEST(Timeline, AFineTimerIsTheAxisWhenTheClockChanges) {
  FakeGpu gpu(8, 32.0);
  const Schedule sc;
  std::vector<lk::WorkGroupStamps> stamps = Make(gpu, sc);
  // The counters slow to 90 % from the recording's middle on: cycles past it shrink.
  const double middle_us = 3.0 + sc.calls * sc.period / 2;
  for (lk::WorkGroupStamps& s : stamps)
    for (int m = 0; m < lk::kMarkCount; ++m) {
      if (s.cycles[m] == 0) continue;
      const double t = (s.cycles[m] - gpu.origin[s.sm]) / kCyclesPerUs;
      if (t > middle_us)
        s.cycles[m] = gpu.origin[s.sm] +
                      static_cast<uint64_t>((middle_us + 0.9 * (t - middle_us)) * kCyclesPerUs);
    }
  auto s = lk::Summarize(stamps);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  EXPECT_TRUE(s->aligned_by_timer);
  ExpectPhases(s->typical, sc, 0.07);  // two 32 ns steps
}

TEST(Timeline, NothingToAlignIsRefused) {
  auto none = lk::Summarize({});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, lk::ErrorCode::kInvalidArgument);
  // One stamp per multiprocessor: no rate can be fitted.
  lk::WorkGroupStamps a, b;
  a.sm = 0, b.sm = 1;
  a.timer_ns[0] = 100, a.cycles[0] = 5;
  b.timer_ns[0] = 200, b.cycles[0] = 9;
  auto one = lk::Summarize({a, b});
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.error().message.find("clock rate"), std::string::npos) << one.error().message;
}

}  // namespace
