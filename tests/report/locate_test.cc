// The report's and verify's view of a `locate` run: the decisions the coordinator recorded, the
// crossover fitted over every rung (planned and probed), and what the probes cost. The database
// is synthetic (synthetic_run.h) with the coordinator's decisions recorded through the Store; the
// search itself is tested in tests/coordinator and end to end in tests/integration.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "ladder/db/store.h"
#include "ladder/report/analysis.h"
#include "ladder/report/report.h"
#include "ladder/report/verify.h"
#include "process.h"
#include "synthetic_run.h"

namespace ladder::testing {
namespace {

// Rungs as the coordinator would have left them: the planned 1K/2K/4K/8K plus probes at 2816 and
// 3328 (declared here so that the synthetic run measures them).
constexpr const char* kLocateYaml = R"(name: located
runner: kernel
axes:
  depth: [1024, 2048, 2816, 3328, 4096, 8192]
  path: [2d, 3d]
pair: [path]
together: [depth]
replicates: {sessions: 3, processes: 1, rounds: 3}
metric: time_us
locate: {axis: depth, resolution: 0.25 octave, min_step: 256}
)";

// Per-token times: 2d grows with depth, 3d is flat; they cross at 3000 tokens.
double TimeUs(const CellAxes& axes, int session, int, int round) {
  const double depth = std::stod(axes.at("depth"));
  const double base = axes.at("path") == "2d" ? 50.0 + 0.01 * depth : 80.0;
  return base * (1.0 + 0.02 * session) * (1.0 + 0.001 * ((round * 7 + session) % 3 - 1));
}

db::LocateDecisionRow LocateDecision(const std::string& decision, double depth, double lower,
                                     double upper, const std::string& outcome = "") {
  db::LocateDecisionRow d;
  d.line_key = "";  // one line: no axis besides depth and the pair axis
  d.decision = decision;
  d.outcome = outcome;
  d.target = 0.25;
  d.depth = depth;
  d.bracket_lower = lower;
  d.bracket_upper = upper;
  d.reason = decision + " at " + std::to_string(depth);
  return d;
}

class LocatedRun : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = db::Store::Open(dir_.File("results.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    SyntheticOptions options;
    options.value = TimeUs;
    run_ = BuildSyntheticRun(**store, kLocateYaml, options);
    ASSERT_GT(run_, 0);
    for (const auto& d :
         {LocateDecision("probe", 2816, 2048, 4096), LocateDecision("probe", 3328, 2816, 4096),
          LocateDecision("stop", NAN, 2816, 3328, "resolved")}) {
      ASSERT_TRUE((*store)->RecordLocateDecision(run_, d).ok());
    }
    auto db = db::Database::Open(dir_.File("results.db"), db::OpenMode::kReadOnly);
    ASSERT_TRUE(db.ok());
    db_ = std::move(*db);
  }
  TempDir dir_;
  int64_t run_ = 0;
  std::unique_ptr<db::Database> db_;
};

TEST_F(LocatedRun, AnalysisCarriesTheSearchAndItsCost) {
  auto a = report::AnalyzeRun(*db_, run_);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->info.locate.has_value());
  EXPECT_EQ(a->depth_axis, "depth");
  ASSERT_EQ(a->lines.size(), 1u);
  const auto& line = a->lines[0];
  ASSERT_TRUE(line.located.has_value());
  EXPECT_EQ(line.located->outcome, "resolved");
  EXPECT_EQ(line.located->probes, (std::vector<double>{2816, 3328}));
  EXPECT_EQ(line.located->decisions, 3);
  EXPECT_EQ(line.located->cells, 4);             // both arms at two probes
  EXPECT_EQ(line.located->measurements, 4 * 9);  // 3 sessions x 3 rounds each
  EXPECT_EQ(line.located->units, 3);             // here the probes share the ladder's 3 units
  EXPECT_EQ(line.located->bracket_lower, 2816);
  EXPECT_EQ(line.located->bracket_upper, 3328);
  // The bracket the report computes itself uses the matrix's resolution: resolved too.
  ASSERT_TRUE(line.crossing.has_value());
  EXPECT_EQ(line.crossing->status, stats::LocateStatus::kResolved);
  ASSERT_TRUE(line.crossover_fit.has_value());
  EXPECT_NEAR(line.crossover_fit->estimate, 3000, 30);
  EXPECT_TRUE(line.crossover_fit->Contains(3000));
}

TEST_F(LocatedRun, ReportShowsTheLocatedCrossover) {
  auto report = report::BuildReport(*db_, {run_});
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string md = report::RenderMarkdown(*report);
  EXPECT_NE(md.find("Located crossover"), std::string::npos) << md;
  EXPECT_NE(md.find("| resolved |"), std::string::npos) << md;
  EXPECT_NE(md.find("[2816, 3328]"), std::string::npos) << md;
  EXPECT_NE(md.find("2816, 3328 |"), std::string::npos) << md;
  EXPECT_NE(md.find("4 cells, 3 units (0 added sessions), 36 measurements"), std::string::npos)
      << md;
  const auto json = report::ToJson(report->runs[0]);
  EXPECT_EQ(json["ladder"][0]["located"]["outcome"], "resolved");
  // The page: the section, and exactly the two probed depths drawn as probes.
  const std::string html = report::RenderHtml(*report);
  EXPECT_NE(html.find("Located crossover"), std::string::npos);
  size_t probes = 0;
  for (size_t at = html.find("class=\"point probe\""); at != std::string::npos;
       at = html.find("class=\"point probe\"", at + 1)) {
    ++probes;
  }
  EXPECT_EQ(probes, 2u);
  EXPECT_NE(html.find("class=\"point probe\" tabindex=\"0\" data-cell=\"depth=2816,path=3d\""),
            std::string::npos);
}

TEST_F(LocatedRun, VerifyPinsTheCrossover) {
  auto a = report::AnalyzeRun(*db_, run_);
  ASSERT_TRUE(a.ok());
  const double crossover = a->lines[0].crossover_fit->estimate;
  char stated[32];
  std::snprintf(stated, sizeof stated, "%.1f", crossover);
  const std::string doc =
      std::string("at <!-- ladder: run=1 stat=crossover -->") + stated +
      " tokens, between <!-- ladder: run=1 stat=bracket_lower -->2816 and "
      "<!-- ladder: run=1 stat=bracket_upper -->3328, after <!-- ladder: run=1 stat=probes -->2 "
      "probes that cost <!-- ladder: run=1 stat=probe_cells -->4 cells.\n"
      "Wrong: <!-- ladder: run=1 stat=crossover tol=1% -->3500\n"
      "No such line: <!-- ladder: run=1 cell=\"backend=cpu\" stat=crossover -->3000\n";
  auto checks = report::VerifyDocument(*db_, doc, "doc.md");
  ASSERT_TRUE(checks.ok()) << checks.status();
  ASSERT_EQ(checks->size(), 7u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_TRUE((*checks)[i].ok) << report::DescribeCheck((*checks)[i]);
  }
  EXPECT_FALSE((*checks)[5].ok);
  EXPECT_TRUE((*checks)[5].error.empty()) << "a drift, not an error";
  EXPECT_NE((*checks)[6].error.find("matches 0 ladder lines"), std::string::npos)
      << (*checks)[6].error;
}

}  // namespace
}  // namespace ladder::testing
