// `ladder plan` over real SQLite databases with known spread (synthetic_run.h): the rows, the
// family, where the spread came from and its size; and the achieved detectable change that
// `compare` and `report` give beside a "no change" or an inconclusive verdict.
#include "ladder/report/plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "ladder/db/store.h"
#include "ladder/report/analysis.h"
#include "ladder/report/compare.h"
#include "ladder/stats/power.h"
#include "process.h"
#include "synthetic_run.h"

namespace ladder::testing {
namespace {

constexpr const char* kPlanUnpairedYaml = R"(name: plan-unpaired
runner: kernel
axes:
  depth: [1024, 4096]
  path: [2d, 3d]
replicates: {sessions: 5, processes: 2, rounds: 3}
metric: time_us
)";

constexpr const char* kPlanPairedYaml = R"(name: plan-paired
runner: kernel
axes:
  depth: [1024, 4096, 16384]
  path: [2d, 3d]
pair: [path]
replicates: {sessions: 6, processes: 2, rounds: 3}
metric: time_us
)";

// Log-normal noise with a session sd of `session_sd` (shared by the arms of a session), and 0.5 %
// between processes and rounds; `salt` makes runs independent.
double PlanValue(const CellAxes& a, int s, int p, int r, uint64_t salt, double session_sd) {
  std::mt19937_64 g(salt * 7919 + std::hash<std::string>{}(a.at("depth")) * 31 +
                    static_cast<uint64_t>(s * 1000 + p * 100 + r));
  std::mt19937_64 gs(salt * 104729 + static_cast<uint64_t>(s));
  std::normal_distribution<double> z;
  return 100.0 * std::exp(session_sd * z(gs) + 0.005 * z(g) + 0.005 * z(g));
}

matrices::Matrix ParsePlanMatrix(const char* yaml) {
  auto m = matrices::ParseMatrix(yaml, "plan.yaml");
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

TEST(PlanMatrix, FromAStatedAssumptionEveryCellIsOneFamily) {
  report::PlanOptions options;
  options.session_sd = 0.03;
  options.process_sd = 0.01;
  options.round_sd = 0.005;
  options.target = 0.10;
  auto plan = report::PlanMatrix(ParsePlanMatrix(kPlanUnpairedYaml), nullptr, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->design, stats::PowerDesign::kTwoRuns);
  ASSERT_EQ(plan->rows.size(), 4u);
  EXPECT_EQ(plan->family, 4u);
  EXPECT_TRUE(plan->runs.empty());
  EXPECT_NE(plan->source.find("assumed"), std::string::npos) << plan->source;
  const double sd = std::sqrt(0.03 * 0.03 + 0.01 * 0.01 / 2 + 0.005 * 0.005 / 6);
  stats::PowerOptions holm;
  holm.family = 4;
  const auto expected = stats::MinimumDetectableChange(stats::PowerDesign::kTwoRuns, sd, 5, holm);
  for (const auto& row : plan->rows) {
    ASSERT_TRUE(row.matrix.has_value()) << row.error;
    EXPECT_NEAR(row.per_session_sd, sd, 1e-12);
    EXPECT_NEAR(row.matrix->up, expected->up, 1e-9);
    EXPECT_LT(row.per_cell->up, row.matrix->up);  // Holm over 4 asks more than one cell alone
    ASSERT_TRUE(row.sessions_for_target.has_value());
    EXPECT_LE(stats::MinimumDetectableChange(stats::PowerDesign::kTwoRuns, sd,
                                             row.sessions_for_target->sessions, holm)
                  ->up,
              0.10);
  }
  const std::string text = report::RenderPlanText(*plan);
  EXPECT_NE(text.find("depth=1024,path=2d"), std::string::npos) << text;
  EXPECT_NE(text.find("Holm"), std::string::npos) << text;
  EXPECT_EQ(report::ToJson(*plan)["rows"].size(), 4u);
}

TEST(PlanMatrix, WithoutHistoryOrAssumptionItSaysWhichFlagStatesOne) {
  auto plan = report::PlanMatrix(ParsePlanMatrix(kPlanUnpairedYaml), nullptr, {});
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("--session-sd"), std::string::npos);
}

TEST(PlanMatrix, FromEarlierRunsOfTheSameMatrixItNamesThemAndRecoversTheSpread) {
  TempDir dir;
  auto store = db::Store::Open(dir.File("r.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<int64_t> runs;
  for (uint64_t salt : {1, 2, 3}) {
    SyntheticOptions options;
    options.value = [=](const CellAxes& a, int s, int p, int r) {
      return PlanValue(a, s, p, r, salt, 0.03);
    };
    runs.push_back(BuildSyntheticRun(**store, kPlanUnpairedYaml, options));
  }
  auto db = db::Database::Open(dir.File("r.db"), db::OpenMode::kReadOnly);
  ASSERT_TRUE(db.ok());
  auto plan = report::PlanMatrix(ParsePlanMatrix(kPlanUnpairedYaml), db->get(), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->runs, runs);
  EXPECT_NE(plan->source.find("runs"), std::string::npos) << plan->source;
  for (const auto& row : plan->rows) {
    ASSERT_TRUE(row.matrix.has_value()) << row.key << " " << row.error;
    // 3 runs x 4 df of a 3 % session spread (plus ~0.3 % within): within a factor of 2.
    EXPECT_GT(row.per_session_sd, 0.015) << row.key;
    EXPECT_LT(row.per_session_sd, 0.06) << row.key;
  }

  // A paired matrix: one row per comparison, its spread from the arm x session decomposition
  // (the session effect, shared by the arms, cancels: far below 3 %).
  std::vector<int64_t> paired;
  for (uint64_t salt : {4, 5}) {
    SyntheticOptions options;
    options.value = [=](const CellAxes& a, int s, int p, int r) {
      return PlanValue(a, s, p, r, salt, 0.03) * (a.at("path") == "3d" ? 1.05 : 1.0);
    };
    paired.push_back(BuildSyntheticRun(**store, kPlanPairedYaml, options));
  }
  auto db2 = db::Database::Open(dir.File("r.db"), db::OpenMode::kReadOnly);
  auto pp = report::PlanMatrix(ParsePlanMatrix(kPlanPairedYaml), db2->get(), {});
  ASSERT_TRUE(pp.ok()) << pp.status();
  EXPECT_EQ(pp->design, stats::PowerDesign::kPaired);
  EXPECT_EQ(pp->family, 3u);
  EXPECT_EQ(pp->runs, paired);
  ASSERT_EQ(pp->rows.size(), 3u);
  EXPECT_NE(pp->rows[0].key.find("path=3d vs 2d"), std::string::npos) << pp->rows[0].key;
  for (const auto& row : pp->rows) {
    ASSERT_TRUE(row.matrix.has_value()) << row.key << " " << row.error;
    EXPECT_LT(row.per_session_sd, 0.015) << row.key;
  }
}

TEST(AchievedDetectableChange, CompareGivesItBesideNoChangeAndNotBesideSlower) {
  TempDir dir;
  auto store = db::Store::Open(dir.File("r.db"));
  ASSERT_TRUE(store.ok());
  const auto run = [&](uint64_t salt, double factor) {
    SyntheticOptions options;
    options.value = [=](const CellAxes& a, int s, int p, int r) {
      return PlanValue(a, s, p, r, salt, 0.003) * factor;
    };
    return BuildSyntheticRun(**store, kPlanUnpairedYaml, options);
  };
  const int64_t a = run(1, 1.0), same = run(2, 1.0), slow = run(3, 1.3);
  auto db = db::Database::Open(dir.File("r.db"), db::OpenMode::kReadOnly);
  auto aa = report::CompareTwoRuns({db->get(), a, "A"}, {db->get(), same, "B"});
  ASSERT_TRUE(aa.ok()) << aa.status();
  for (const auto& row : aa->rows) {
    ASSERT_NE(row.matrix_verdict, "slower") << row.key;
    ASSERT_TRUE(row.detectable.has_value()) << row.key << " " << row.matrix_verdict;
    EXPECT_GT(row.detectable->up, 0.02);
    EXPECT_LT(row.detectable->up, 0.10);  // a quiet fleet: a few % are detectable
  }
  EXPECT_NE(report::RenderComparisonMarkdown(*aa).find("detects (80 % power)"), std::string::npos);
  EXPECT_FALSE(report::ToJson(*aa)["rows"][0]["detectable"].is_null());
  auto sl = report::CompareTwoRuns({db->get(), a, "A"}, {db->get(), slow, "B"});
  ASSERT_TRUE(sl.ok());
  for (const auto& row : sl->rows) {
    EXPECT_EQ(row.matrix_verdict, "slower") << row.key;
    EXPECT_FALSE(row.detectable.has_value()) << row.key;
  }
}

}  // namespace
}  // namespace ladder::testing
