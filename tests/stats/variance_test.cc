#include "ladder/stats/variance.h"

#include <cmath>
#include <cstdio>
#include <random>

#include <gtest/gtest.h>

#include "ladder/stats/distributions.h"
#include "simulate.h"

namespace ladder::stats {
namespace {

TEST(VarianceComponents, RecoversKnownLevels) {
  std::mt19937_64 rng(20);
  const testing::LevelSds sd{.session = 0.03, .process = 0.01, .round = 0.005};
  const auto obs =
      testing::SimulateCell(rng, 100.0, sd, {.sessions = 200, .processes = 4, .rounds = 10});
  absl::StatusOr<VarianceComponents> vc = EstimateVarianceComponents(obs);
  ASSERT_TRUE(vc.ok()) << vc.status();
  EXPECT_EQ(vc->replicates[kRound], 10u);
  EXPECT_EQ(vc->replicates[kProcess], 4u);
  EXPECT_EQ(vc->replicates[kSession], 200u);
  // Degrees of freedom behind each component: rounds 200·4·9, processes 200·3, sessions 199.
  EXPECT_EQ(vc->df[kRound], 7200.0);
  EXPECT_EQ(vc->df[kProcess], 600.0);
  EXPECT_EQ(vc->df[kSession], 199.0);
  std::printf(
      "[variance] sd by level: round %.4f process %.4f session %.4f (truth 0.005 0.01 0.03)\n",
      std::sqrt(vc->t2[kRound]), std::sqrt(vc->t2[kProcess]), std::sqrt(vc->t2[kSession]));
  EXPECT_NEAR(std::sqrt(vc->t2[kRound]), 0.005, 0.05 * 0.005);
  EXPECT_NEAR(std::sqrt(vc->t2[kProcess]), 0.01, 0.10 * 0.01);
  EXPECT_NEAR(std::sqrt(vc->t2[kSession]), 0.03, 0.15 * 0.03);
  EXPECT_NEAR(vc->share[kRound] + vc->share[kProcess] + vc->share[kSession], 1.0, 1e-12);
  EXPECT_GT(vc->share[kSession], 0.8);  // 9 / (9 + 1 + 0.25)
  EXPECT_NEAR(vc->mean_log, std::log(100.0), 0.01);
  EXPECT_TRUE(vc->note.empty());
}

TEST(VarianceComponents, TIsSMinusLowerLevelOverItsRepeats) {
  // Hand-sized balanced data: 2 sessions × 2 processes × 2 rounds, on log values.
  const double y[2][2][2] = {{{0.0, 0.2}, {0.4, 0.6}}, {{1.0, 1.2}, {1.4, 1.8}}};
  std::vector<Observation> obs;
  for (int s = 0; s < 2; ++s)
    for (int p = 0; p < 2; ++p)
      for (int r = 0; r < 2; ++r) obs.push_back({s, p, r, std::exp(y[s][p][r])});
  absl::StatusOr<VarianceComponents> vc = EstimateVarianceComponents(obs);
  ASSERT_TRUE(vc.ok()) << vc.status();
  // Process means 0.1, 0.5, 1.1, 1.6; session means 0.3, 1.35.
  const double s1 = (6 * 0.01 + 2 * 0.04) / 4.0;            // Σ sq dev / (n·r2·(r1−1))
  const double s2 = (0.04 + 0.04 + 0.0625 + 0.0625) / 2.0;  // / (n·(r2−1))
  const double s3 = std::pow(1.35 - 0.3, 2) / 2.0;
  EXPECT_NEAR(vc->s2[kRound], s1, 1e-12);
  EXPECT_NEAR(vc->s2[kProcess], s2, 1e-12);
  EXPECT_NEAR(vc->s2[kSession], s3, 1e-12);
  EXPECT_NEAR(vc->t2[kRound], s1, 1e-12);
  EXPECT_NEAR(vc->t2[kProcess], s2 - s1 / 2, 1e-12);
  EXPECT_NEAR(vc->t2[kSession], s3 - s2 / 2, 1e-12);
}

TEST(VarianceComponents, ClampsAtZero) {
  // No process effect at all, large round noise: S_2² < S_1²/r_1 happens often; T_2² is clamped.
  std::mt19937_64 rng(21);
  int clamped = 0;
  for (int i = 0; i < 20; ++i) {
    const auto obs =
        testing::SimulateCell(rng, 1.0, {.session = 0.02, .process = 0.0, .round = 0.05},
                              {.sessions = 4, .processes = 3, .rounds = 4});
    absl::StatusOr<VarianceComponents> vc = EstimateVarianceComponents(obs);
    ASSERT_TRUE(vc.ok());
    EXPECT_GE(vc->t2[kProcess], 0.0);
    clamped += vc->t2[kProcess] == 0.0;
  }
  EXPECT_GT(clamped, 0);
}

TEST(VarianceComponents, UnbalancedIsAnError) {
  std::vector<Observation> obs = {{1, 1, 0, 1.0}, {1, 1, 1, 1.1}, {1, 2, 0, 1.0},
                                  {1, 2, 1, 1.2}, {2, 1, 0, 1.0}, {2, 1, 1, 1.3}};
  absl::StatusOr<VarianceComponents> vc = EstimateVarianceComponents(obs);
  EXPECT_EQ(vc.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(vc.status().message().find("unbalanced"), std::string::npos);
  obs.push_back({2, 2, 0, 1.0});  // process (2, 2) has one round, the others two
  EXPECT_EQ(EstimateVarianceComponents(obs).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(VarianceComponents, OneProcessPerSessionIsConfoundedNotWrong) {
  std::mt19937_64 rng(22);
  const auto obs =
      testing::SimulateCell(rng, 100.0, {.session = 0.03, .process = 0.02, .round = 0.005},
                            {.sessions = 300, .processes = 1, .rounds = 10});
  absl::StatusOr<VarianceComponents> vc = EstimateVarianceComponents(obs);
  ASSERT_TRUE(vc.ok()) << vc.status();
  EXPECT_TRUE(std::isnan(vc->t2[kProcess]));
  EXPECT_FALSE(vc->note.empty());
  // The session component holds session + process: 0.03² + 0.02².
  EXPECT_NEAR(std::sqrt(vc->t2[kSession]), std::sqrt(0.0013), 0.12 * std::sqrt(0.0013));
  EXPECT_EQ(OptimalRepeats(*vc, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  // Sessions needed still works: the process level is inside the session term.
  EXPECT_TRUE(SessionsNeededFor(*vc, {10, 1}).ok());
}

TEST(OptimalRepeats, KaliberaJonesFormula) {
  VarianceComponents vc;
  vc.t2 = {0.005 * 0.005, 0.01 * 0.01, 0.03 * 0.03};
  // r_1 = ceil(sqrt(30·0.25e-4 / (1·1e-4))) = ceil(2.74) = 3
  // r_2 = ceil(sqrt(600·1e-4 / (30·9e-4))) = ceil(1.49) = 2
  absl::StatusOr<RepeatPlan> plan = OptimalRepeats(vc, {.round = 1, .process = 30, .session = 600});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->rounds_per_process, 3);
  EXPECT_EQ(plan->processes_per_session, 2);
  EXPECT_EQ(plan->rounds_bound, RepeatBound::kOptimum);
  EXPECT_EQ(plan->processes_bound, RepeatBound::kOptimum);
  // Free process starts: one round per process is best, and processes per session hit the cap
  // (the optimum is "as many as possible"): the plan says so rather than presenting the cap.
  absl::StatusOr<RepeatPlan> free = OptimalRepeats(vc, {.round = 1, .process = 0, .session = 600});
  EXPECT_EQ(free->rounds_per_process, 1);
  EXPECT_EQ(free->processes_per_session, 1000);
  EXPECT_EQ(free->processes_bound, RepeatBound::kAtCap);
  // No session-level variance: repeat processes up to the cap.
  vc.t2[kSession] = 0.0;
  absl::StatusOr<RepeatPlan> capped =
      OptimalRepeats(vc, {.round = 1, .process = 30, .session = 600}, 50);
  EXPECT_EQ(capped->processes_per_session, 50);
  EXPECT_EQ(capped->processes_bound, RepeatBound::kAtCap);
  // No round-level variance: one round is enough, and says why.
  vc.t2[kRound] = 0.0;
  EXPECT_EQ(OptimalRepeats(vc, {.round = 1, .process = 30, .session = 600})->rounds_bound,
            RepeatBound::kNoVariance);
  EXPECT_EQ(OptimalRepeats(vc, {.round = 0}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SessionsNeeded, SmallestCountMeetingTarget) {
  const double sd = 0.03;
  absl::StatusOr<SessionsNeeded> need =
      SessionsNeededForSd(sd, {.target_relative_half_width = 0.02});
  ASSERT_TRUE(need.ok()) << need.status();
  ASSERT_EQ(need->verdict, SessionsVerdict::kReachable);
  const int n = need->sessions;
  const auto half = [&](int k) { return TwoSidedT(0.95, k - 1.0) * sd / std::sqrt(k); };
  EXPECT_LE(half(n), std::log1p(0.02));
  EXPECT_GT(half(n - 1), std::log1p(0.02));
  EXPECT_EQ(n, 12);
  // Tighter target, more sessions; impossible target, the budget says so.
  EXPECT_GT(SessionsNeededForSd(sd, {.target_relative_half_width = 0.01})->sessions, n);
  absl::StatusOr<SessionsNeeded> over =
      SessionsNeededForSd(sd, {.target_relative_half_width = 0.001, .max_sessions = 20});
  EXPECT_EQ(over->verdict, SessionsVerdict::kExceedsMax);
  EXPECT_EQ(SessionsNeededForSd(0.0)->sessions, 2);
  VarianceComponents vc;
  vc.t2 = {0.005 * 0.005, 0.01 * 0.01, 0.03 * 0.03};
  // Per-session var = 9e-4 + 1e-4/2 + 2.5e-5/(3·2): slightly above 0.03².
  EXPECT_GE(SessionsNeededFor(vc, {3, 2})->sessions, n);
}

TEST(DecomposeArmBySession, SeparatesSessionMainEffectFromInteraction) {
  std::mt19937_64 rng(23);
  const testing::LevelSds sd{.session = 0.03, .process = 0.01, .round = 0.005};
  const double interaction = 0.01;
  const PairedSample sample = testing::SimulatePaired(
      rng, 50.0, 0.7, sd, interaction, {.sessions = 300, .processes = 3, .rounds = 10});
  absl::StatusOr<ArmSessionVariance> v = DecomposeArmBySession(sample);
  ASSERT_TRUE(v.ok()) << v.status();
  std::printf(
      "[arm x session] session sd %.4f (truth 0.03), interaction sd %.4f (truth 0.01), "
      "within %.5f\n",
      std::sqrt(v->session_main), std::sqrt(v->interaction_net), v->within_session_noise);
  EXPECT_NEAR(std::sqrt(v->session_main), 0.03, 0.12 * 0.03);
  EXPECT_NEAR(std::sqrt(v->interaction_net), interaction, 0.2 * interaction);
  // Within noise of one arm-session log mean: (0.01² + 0.005²/10) / 3.
  EXPECT_NEAR(v->within_session_noise, (1e-4 + 2.5e-6) / 3, 0.15 * (1e-4 + 2.5e-6) / 3);
  EXPECT_NEAR(std::exp(v->log_ratio_mean), 0.7, 0.005);
}

}  // namespace
}  // namespace ladder::stats
