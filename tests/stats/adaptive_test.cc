#include "ladder/stats/adaptive.h"
#include "ladder/stats/distributions.h"
#include "ladder/stats/ratio.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace ladder::stats {
namespace {

Interval RatioCi(double estimate, double relative_half_width) {
  Interval ci;
  ci.estimate = estimate;
  ci.lower = estimate * (1.0 - relative_half_width);
  ci.upper = estimate * (1.0 + relative_half_width);
  return ci;
}

TEST(NeedsMoreSessions, ComparesRelativeHalfWidth) {
  EXPECT_TRUE(NeedsMoreSessions(RatioCi(1.2, 0.03), 0.02));
  EXPECT_FALSE(NeedsMoreSessions(RatioCi(1.2, 0.015), 0.02));
  Interval asymmetric = RatioCi(1.0, 0.01);
  asymmetric.lower = 0.97;  // 3 % below
  EXPECT_TRUE(NeedsMoreSessions(asymmetric, 0.02));
  Interval unbounded;
  unbounded.estimate = 1.0;
  unbounded.bounds = Boundedness::kUnbounded;
  unbounded.lower = -std::numeric_limits<double>::infinity();
  unbounded.upper = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(NeedsMoreSessions(unbounded, 0.5));
}

TEST(ClassifyProbe, ExcludesOneOrWithinTolerance) {
  EXPECT_EQ(ClassifyProbe(RatioCi(1.1, 0.05)), ProbeVerdict::kExcludesOne);
  EXPECT_EQ(ClassifyProbe(RatioCi(0.9, 0.05)), ProbeVerdict::kExcludesOne);
  EXPECT_EQ(ClassifyProbe(RatioCi(1.002, 0.005)), ProbeVerdict::kWithinTolerance);
  EXPECT_EQ(ClassifyProbe(RatioCi(1.01, 0.03)), ProbeVerdict::kUndecided);
}

// Runs the locate loop the coordinator would run against a known ratio curve and returns the
// final plan and the number of probes it took.
struct LocateRun {
  LocatePlan plan;
  int probes = 0;
};

LocateRun RunLocate(const std::function<double(double)>& ratio_at, std::vector<double> ladder,
                    const LocateOptions& options, int max_probes) {
  std::vector<LadderPoint> points;
  for (double d : ladder) points.push_back({d, RatioCi(ratio_at(d), 0.01)});
  LocateRun run;
  while (true) {
    absl::StatusOr<LocatePlan> plan = PlanCrossoverProbe(points, options);
    EXPECT_TRUE(plan.ok()) << plan.status();
    run.plan = *plan;
    if (plan->status != LocateStatus::kProbe || run.probes >= max_probes) return run;
    points.push_back({plan->next_probe, RatioCi(ratio_at(plan->next_probe), 0.01)});
    ++run.probes;
  }
}

TEST(PlanCrossoverProbe, LocatesKnownCrossoverWithinResolution) {
  // Speculation gains 25 % per octave below 3000 tokens and loses it above: crossing at 3000.
  const double truth = 3000.0;
  const auto ratio_at = [&](double d) {
    return std::exp2(0.25 * (std::log2(truth) - std::log2(d)));
  };
  const std::vector<double> ladder = {512, 1024, 2048, 4096, 8192, 16384, 32768};
  const LocateRun run =
      RunLocate(ratio_at, ladder, {.resolution_octaves = 0.25, .min_step = 256}, 20);
  std::printf("[locate] bracket [%.0f, %.0f] (%.3f octaves) after %d probes, status %d\n",
              run.plan.bracket_lower, run.plan.bracket_upper, run.plan.width_octaves, run.probes,
              static_cast<int>(run.plan.status));
  EXPECT_EQ(run.plan.status, LocateStatus::kResolved);
  EXPECT_LE(run.plan.bracket_lower, truth);
  EXPECT_GE(run.plan.bracket_upper, truth);
  EXPECT_LT(run.plan.width_octaves, 0.25);
  // One octave halves to 0.5, 0.25, 0.125: three probes, one spare for rounding to min_step.
  EXPECT_LE(run.probes, 4);
  EXPECT_EQ(run.plan.sign_changes, 1);
}

TEST(PlanCrossoverProbe, LocatesNonLogLinearCurveAndHitsStepLimit) {
  // A ratio falling linearly in depth, crossing at 1300 tokens; min_step 256 cannot split
  // [1280, 1536] further, which is 0.26 octave: the search says so rather than looping.
  const auto ratio_at = [](double d) { return 1.0 + 0.0002 * (1300.0 - d); };
  const std::vector<double> ladder = {256, 512, 1024, 2048, 4096};
  const LocateRun run =
      RunLocate(ratio_at, ladder, {.resolution_octaves = 0.25, .min_step = 256}, 20);
  EXPECT_LE(run.probes, 5);
  EXPECT_LE(run.plan.bracket_lower, 1300.0);
  EXPECT_GE(run.plan.bracket_upper, 1300.0);
  EXPECT_TRUE(run.plan.status == LocateStatus::kResolved ||
              run.plan.status == LocateStatus::kStepLimited);
  const LocateRun fine =
      RunLocate(ratio_at, ladder, {.resolution_octaves = 0.25, .min_step = 64}, 20);
  EXPECT_EQ(fine.plan.status, LocateStatus::kResolved);
  EXPECT_LT(fine.plan.width_octaves, 0.25);
  EXPECT_LE(fine.plan.bracket_lower, 1300.0);
  EXPECT_GE(fine.plan.bracket_upper, 1300.0);
}

TEST(PlanCrossoverProbe, EdgeCases) {
  const std::vector<LadderPoint> all_above = {{1024, RatioCi(1.2, 0.01)},
                                              {2048, RatioCi(1.1, 0.01)}};
  EXPECT_EQ(PlanCrossoverProbe(all_above)->status, LocateStatus::kNoCrossing);
  const std::vector<LadderPoint> on_one = {
      {1024, RatioCi(1.2, 0.01)}, {2048, RatioCi(1.0, 0.01)}, {4096, RatioCi(0.9, 0.01)}};
  absl::StatusOr<LocatePlan> exact = PlanCrossoverProbe(on_one);
  EXPECT_EQ(exact->status, LocateStatus::kResolved);
  EXPECT_EQ(exact->bracket_lower, 2048);
  EXPECT_EQ(exact->bracket_upper, 2048);
  const std::vector<LadderPoint> narrow = {{256, RatioCi(1.2, 0.01)}, {512, RatioCi(0.9, 0.01)}};
  EXPECT_EQ(PlanCrossoverProbe(narrow)->status, LocateStatus::kStepLimited);
  const std::vector<LadderPoint> probe = {{4096, RatioCi(0.9, 0.01)}, {2048, RatioCi(1.2, 0.01)}};
  absl::StatusOr<LocatePlan> p = PlanCrossoverProbe(probe);
  EXPECT_EQ(p->status, LocateStatus::kProbe);
  EXPECT_EQ(p->next_probe, 2816);  // 2^11.5 = 2896.3 → nearest multiple of 256 inside
  const std::vector<LadderPoint> twice = {
      {1024, RatioCi(1.2, 0.01)}, {2048, RatioCi(0.9, 0.01)}, {4096, RatioCi(1.1, 0.01)}};
  EXPECT_EQ(PlanCrossoverProbe(twice)->sign_changes, 2);
  const std::vector<LadderPoint> repeated = {{1024, RatioCi(1.2, 0.01)},
                                             {1024, RatioCi(0.9, 0.01)}};
  EXPECT_EQ(PlanCrossoverProbe(repeated).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanCrossoverProbe(probe, {.min_step = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FitLine, ExactLine) {
  const std::vector<double> x = {1, 2, 3, 4};
  const std::vector<double> y = {3, 5, 7, 9};
  absl::StatusOr<LinearFit> fit = FitLine(x, y);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->slope, 2.0, 1e-12);
  EXPECT_NEAR(fit->intercept, 1.0, 1e-12);
  EXPECT_NEAR(fit->residual_sd, 0.0, 1e-12);
  const std::vector<double> flat_x = {2, 2, 2};
  EXPECT_EQ(FitLine(flat_x, flat_x).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CrossoverFromLinearFit, FiellerRootCoversTruth) {
  // Per-token latency difference B − A (µs/token) grows with depth and crosses 0 at 3000.
  const double truth = 3000.0;
  const std::vector<double> depth = {512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384};
  std::mt19937_64 rng(30);
  std::normal_distribution<double> noise(0.0, 1.0);
  constexpr int kExperiments = 500;
  int covered = 0;
  double sum_roots = 0.0;
  for (int e = 0; e < kExperiments; ++e) {
    std::vector<double> diff;
    for (double d : depth) diff.push_back(0.002 * (d - truth) + noise(rng));
    absl::StatusOr<Interval> root = CrossoverFromLinearFit(depth, diff);
    ASSERT_TRUE(root.ok()) << root.status();
    ASSERT_EQ(root->bounds, Boundedness::kBounded);
    EXPECT_EQ(root->df, 7.0);
    covered += root->Contains(truth);
    sum_roots += root->estimate;
  }
  const double coverage = static_cast<double>(covered) / kExperiments;
  const double mean_root = sum_roots / kExperiments;
  std::printf("[coverage] Fieller root of linear fit: %.3f (mean root %.0f, truth %.0f)\n",
              coverage, mean_root, truth);
  EXPECT_NEAR(mean_root, truth, 0.03 * truth);
  EXPECT_NEAR(coverage, 0.95, 0.03);
}

TEST(CrossoverFromLinearFit, FlatDifferenceIsUnbounded) {
  const std::vector<double> depth = {1024, 2048, 4096, 8192};
  const std::vector<double> diff = {1.0, -1.0, 1.2, -0.9};
  absl::StatusOr<Interval> root = CrossoverFromLinearFit(depth, diff);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->bounds, Boundedness::kUnbounded);
  EXPECT_FALSE(root->note.empty());
}

// Arm A at 100 and arm B at 100 * ratio[s] in session s, two rounds each (one process).
PairedSample SessionsWithRatios(const std::vector<double>& ratios) {
  PairedSample sample;
  for (size_t s = 0; s < ratios.size(); ++s) {
    for (int round = 0; round < 2; ++round) {
      const double jitter = round == 0 ? 0.999 : 1.001;
      sample.a.push_back(Observation{static_cast<int64_t>(s), 0, round, 100.0 * jitter});
      sample.b.push_back(
          Observation{static_cast<int64_t>(s), 0, round, 100.0 * ratios[s] * jitter});
    }
  }
  return sample;
}

TEST(WidestRatioHalfWidth, TakesTheWidestComparison) {
  const PairedSample tight = SessionsWithRatios({1.10, 1.11, 1.09, 1.10});
  const PairedSample loose = SessionsWithRatios({1.0, 1.3, 0.8, 1.1});
  const std::vector<PairedSample> tight_only = {tight};
  const std::vector<PairedSample> both = {tight, loose};
  const double tight_width = WidestRatioHalfWidth(tight_only);
  const double both_width = WidestRatioHalfWidth(both);
  EXPECT_TRUE(std::isfinite(tight_width));
  EXPECT_GT(tight_width, 0.0);
  EXPECT_LT(tight_width, 0.05);
  EXPECT_GT(both_width, tight_width);
  EXPECT_DOUBLE_EQ(both_width, PairedRatioInterval(loose)->RelativeHalfWidth());
  EXPECT_EQ(WidestRatioHalfWidth(std::vector<PairedSample>{}), 0.0);
}

TEST(WidestRatioHalfWidth, OneSessionIsNeverNarrowEnough) {
  const std::vector<PairedSample> one = {SessionsWithRatios({1.10})};
  EXPECT_TRUE(std::isinf(WidestRatioHalfWidth(one)));
  const std::vector<PairedSample> empty_arm = {PairedSample{}};
  EXPECT_TRUE(std::isinf(WidestRatioHalfWidth(empty_arm)));
}

// The decision interval: the first n − kCommittedSessions sessions' log ratios, their mean and
// spread, with the t quantile and √n of all n sessions.
TEST(ProjectedRatioInterval, IsTheFirstSessionsProjectedToAll) {
  const std::vector<double> ratios = {1.10, 1.14, 1.02, 1.25, 0.90, 1.30};
  const PairedSample sample = SessionsWithRatios(ratios);
  auto projected = ProjectedRatioInterval(sample);
  ASSERT_TRUE(projected.ok()) << projected.status();
  const int n = static_cast<int>(ratios.size());
  const int decided = n - kCommittedSessions;
  ASSERT_EQ(decided, 2);
  const double l0 = std::log(ratios[0]), l1 = std::log(ratios[1]);
  const double mean = (l0 + l1) / 2;
  const double sd = std::fabs(l0 - l1) / std::sqrt(2.0);
  const double t = TwoSidedT(0.95, n - 1);
  EXPECT_NEAR(projected->estimate, std::exp(mean), 1e-9);
  EXPECT_NEAR(projected->lower, std::exp(mean - t * sd / std::sqrt(n)), 1e-9);
  EXPECT_NEAR(projected->upper, std::exp(mean + t * sd / std::sqrt(n)), 1e-9);
  EXPECT_EQ(projected->df, n - 1);
  EXPECT_EQ(projected->n_units, static_cast<size_t>(decided));
  // It is not the reported interval, which reads every session.
  EXPECT_GT(PairedRatioInterval(sample)->RelativeHalfWidth(), projected->RelativeHalfWidth());
}

TEST(ProjectedRatioInterval, IgnoresTheLastSessionsAndReadsSessionIdsInOrder) {
  const PairedSample quiet = SessionsWithRatios({1.10, 1.11, 1.10, 1.10, 1.11, 1.10});
  const PairedSample loud = SessionsWithRatios({1.10, 1.11, 0.70, 1.60, 0.90, 1.40});
  auto a = ProjectedRatioInterval(quiet);
  auto b = ProjectedRatioInterval(loud);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_DOUBLE_EQ(a->lower, b->lower);
  EXPECT_DOUBLE_EQ(a->upper, b->upper);
  // The observations' order does not matter, the session ids do.
  PairedSample reversed = loud;
  std::reverse(reversed.a.begin(), reversed.a.end());
  std::reverse(reversed.b.begin(), reversed.b.end());
  auto c = ProjectedRatioInterval(reversed);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->lower, b->lower);
  EXPECT_DOUBLE_EQ(c->upper, b->upper);
}

TEST(ProjectedRatioInterval, NeedsTwoSessionsBeforeTheCommittedOnes) {
  for (int n = 1; n < kMinDecisionSessions + kCommittedSessions; ++n) {
    const PairedSample sample = SessionsWithRatios(std::vector<double>(n, 1.1));
    EXPECT_EQ(ProjectedRatioInterval(sample).status().code(), absl::StatusCode::kFailedPrecondition)
        << n;
  }
  // With no committed sessions it is the interval of the first sessions at their own count.
  const PairedSample three = SessionsWithRatios({1.10, 1.12, 1.07});
  EXPECT_DOUBLE_EQ(ProjectedRatioInterval(three, 0)->upper, PairedRatioInterval(three)->upper);
}

TEST(WidestProjectedHalfWidth, TakesTheWidestAndCountsTooFewSessionsAsUnbounded) {
  const PairedSample tight = SessionsWithRatios({1.10, 1.11, 1.09, 1.10, 1.10, 1.10});
  const PairedSample loose = SessionsWithRatios({1.0, 1.3, 1.0, 1.0, 1.0, 1.0});
  EXPECT_DOUBLE_EQ(WidestProjectedHalfWidth(std::vector<PairedSample>{tight, loose}),
                   ProjectedRatioInterval(loose)->RelativeHalfWidth());
  EXPECT_TRUE(std::isinf(WidestProjectedHalfWidth(
      std::vector<PairedSample>{tight, SessionsWithRatios({1.1, 1.1, 1.1, 1.1, 1.1})})));
  EXPECT_EQ(WidestProjectedHalfWidth(std::vector<PairedSample>{}), 0.0);
}

TEST(OnlyPairedSessions, DropsSessionsMeasuredInOneArm) {
  PairedSample sample = SessionsWithRatios({1.1, 1.2, 1.3});
  sample.a.push_back(Observation{7, 0, 0, 50.0});          // session 7 measured A only
  sample.b.erase(sample.b.begin(), sample.b.begin() + 2);  // session 0 lost its B
  const PairedSample paired = OnlyPairedSessions(sample);
  ASSERT_EQ(paired.a.size(), 4u);
  ASSERT_EQ(paired.b.size(), 4u);
  for (const auto* arm : {&paired.a, &paired.b}) {
    for (const Observation& o : *arm) {
      EXPECT_TRUE(o.session == 1 || o.session == 2) << o.session;
    }
  }
}

}  // namespace
}  // namespace ladder::stats
