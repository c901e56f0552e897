// `ladder report` and `ladder verify` on a database produced by a real end-to-end run:
// `ladder local` runs a small paired CPU matrix (2D vs 3D path at three depths, 2 sessions x 2
// processes x 3 rounds) with a coordinator and two agents over loopback gRPC.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "fleet.h"
#include "process.h"

namespace ladder::testing {
namespace {

class ReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    db_ = dir_->File("results.db");
    auto result = RunCommand({LadderBinary(), "local", LADDER_REPORT_MATRIX, "--db", db_},
                             std::chrono::seconds(240));
    ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
    auto json = RunCommand({LadderBinary(), "report", "1", "--db", db_, "--format", "json"});
    ASSERT_EQ(json.exit_code, 0) << json.err;
    report_ = new nlohmann::json(nlohmann::json::parse(json.out));
  }
  static void TearDownTestSuite() {
    delete report_;
    delete dir_;
  }
  void SetUp() override { ASSERT_NE(report_, nullptr) << "the end-to-end run failed"; }
  static const nlohmann::json& Run() { return (*report_)["runs"][0]; }

  static TempDir* dir_;
  static std::string db_;
  static nlohmann::json* report_;
};
TempDir* ReportTest::dir_ = nullptr;
std::string ReportTest::db_;
nlohmann::json* ReportTest::report_ = nullptr;

std::string fmt_shortest(double x) { return fmt::format("{}", x); }

bool Within(const nlohmann::json& interval, double x) {
  const double lo = interval["lower"].is_null() ? -INFINITY : interval["lower"].get<double>();
  const double hi = interval["upper"].is_null() ? INFINITY : interval["upper"].get<double>();
  return lo <= x && x <= hi;
}

TEST_F(ReportTest, EveryPairHasARatioWhoseIntervalsContainTheEstimate) {
  const auto& run = Run();
  EXPECT_EQ(run["run"]["pair_axes"], nlohmann::json::array({"path"}));
  ASSERT_EQ(run["comparisons"].size(), 3u);  // one per depth: 3d against 2d
  for (const std::string depth : {"256", "1024", "4096"}) {
    const std::string cell = "depth=" + depth + ",path=3d";
    const nlohmann::json* found = nullptr;
    for (const auto& c : run["comparisons"]) {
      if (c["cell"] == cell) found = &c;
    }
    ASSERT_NE(found, nullptr) << cell;
    const auto& cmp = *found;
    EXPECT_EQ(cmp["baseline_cell"], "depth=" + depth + ",path=2d");
    EXPECT_EQ(cmp["sessions"], 2);
    EXPECT_EQ(cmp["n_a"], 12);
    EXPECT_EQ(cmp["n_b"], 12);
    const double ratio = cmp["ratio"].get<double>();
    EXPECT_GT(ratio, 0);
    EXPECT_NEAR(ratio, cmp["t"]["estimate"].get<double>(), 1e-12);
    EXPECT_EQ(cmp["t"]["df"], 1.0);  // two sessions
    EXPECT_EQ(cmp["t"]["scope"], "between_sessions");
    for (const char* method : {"t", "fieller"}) {
      ASSERT_TRUE(cmp[method].contains("estimate")) << method << ": " << cmp[method].dump();
      EXPECT_TRUE(Within(cmp[method], cmp[method]["estimate"].get<double>())) << method;
      EXPECT_FALSE(cmp[method]["estimand"].get<std::string>().empty()) << method;
    }
    // Two sessions are too few for the bootstrap (it would cover ~92 %): it says so.
    EXPECT_EQ(cmp["bootstrap"]["error"], "an interval needs at least 3 sessions; 2 measured");
    EXPECT_FALSE(cmp["verdict"].get<std::string>().empty());
    EXPECT_TRUE(cmp["arm_session"].contains("session_main_sd")) << cmp["arm_session"].dump();
  }
}

TEST_F(ReportTest, CellIntervalsUseSessionsAndVarianceSharesSumToOne) {
  const auto& run = Run();
  ASSERT_EQ(run["cells"].size(), 6u);
  for (const auto& cell : run["cells"]) {
    EXPECT_EQ(cell["n"], 12) << cell["cell"];
    EXPECT_EQ(cell["sessions"], 2);
    // Two sessions: no interval, and a note saying how many one needs.
    EXPECT_EQ(cell["interval"]["error"], "an interval needs at least 3 sessions; 2 measured");
  }
  ASSERT_EQ(run["variance"].size(), 6u);
  for (const auto& v : run["variance"]) {
    ASSERT_TRUE(v.contains("share")) << v.dump();
    double sum = 0;
    for (const char* level : {"round", "process", "session"}) {
      if (!v["share"][level].is_null()) sum += v["share"][level].get<double>();
    }
    EXPECT_NEAR(sum, 1.0, 1e-9) << v.dump();
  }
  EXPECT_EQ(run["sessions"].size(), 2u);
  EXPECT_FALSE(run["clock_recorded"].get<bool>());
}

TEST_F(ReportTest, HtmlHasOnePointPerComparedCellAndNeedsNoNetwork) {
  const std::string out = dir_->File("report.html");
  auto result = RunCommand({LadderBinary(), "report", "1", "--db", db_, "-o", out});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string html = ReadFile(out);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const auto& cmp : Run()["comparisons"]) {
    const std::string needle = "data-cell=\"" + cmp["cell"].get<std::string>() + "\"";
    size_t count = 0;
    for (size_t pos = html.find(needle); pos != std::string::npos;
         pos = html.find(needle, pos + 1)) {
      ++count;
    }
    EXPECT_EQ(count, 1u) << needle;
  }
  const std::regex point("<circle class=\"point[^\"]*\"[^>]*data-cell=");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(html.begin(), html.end(), point), std::sregex_iterator()),
      3);
  EXPECT_NE(html.find("class=\"unity\""), std::string::npos);  // the zero-gain line
  EXPECT_NE(html.find("<script>"), std::string::npos);
  for (const char* external : {"src=\"http", "href=\"http", "<link ", "<script src"}) {
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  }
  for (const char* section :
       {"Paired ratios", "Variance by level", "Sessions and hosts", "Arm × session", "Flags"}) {
    EXPECT_NE(html.find(section), std::string::npos) << section;
  }
}

TEST_F(ReportTest, MarkdownPrintsTheSameTables) {
  auto result = RunCommand({LadderBinary(), "report", "1", "--db", db_, "--format", "md"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string& md = result.out;
  for (const char* heading :
       {"# Run 1: report-e2e", "## Paired ratios", "## Ladder", "## Cells", "## Variance by level",
        "## Arm × session", "## Sessions and hosts", "## Flags"}) {
    EXPECT_NE(md.find(heading), std::string::npos) << heading << "\n" << md;
  }
  for (const std::string depth : {"256", "1024", "4096"}) {
    EXPECT_NE(md.find("| depth=" + depth + " | path 3d vs 2d | 2 |"), std::string::npos) << md;
    EXPECT_NE(md.find("| depth=" + depth + ",path=2d | 12 | 2 |"), std::string::npos) << md;
  }
  EXPECT_NE(md.find("lower is better"), std::string::npos);
  EXPECT_NE(md.find("an interval needs at least 3 sessions; 2 measured"), std::string::npos);
  EXPECT_NE(md.find("Fieller: ratio of means"), std::string::npos);
}

TEST_F(ReportTest, VerifyPassesOnACorrectDocumentAndListsEveryDriftedFigure) {
  const auto& run = Run();
  const auto& cmp = run["comparisons"][2];  // depth=4096
  const double ratio = cmp["ratio"].get<double>();
  char ratio_text[32], change_text[32];
  std::snprintf(ratio_text, sizeof ratio_text, "%.4f", ratio);
  std::snprintf(change_text, sizeof change_text, "%+.1f", 100 * (ratio - 1));
  const int64_t n = run["cells"][0]["n"].get<int64_t>();
  const std::string good =
      "# Findings\n"
      "\n"
      "At 4K the 3D path changes the time by <!-- ladder: run=1 cell=\"depth=4096\" arm=3d "
      "stat=change -->" +
      std::string(change_text) +
      " %\n"
      "(ratio <!-- ladder: run=1 cell=\"depth=4096\" arm=3d stat=ratio tol=0.1% -->" +
      ratio_text +
      "),\n"
      "with <!-- ladder: run=1 cell=\"depth=256,path=2d\" stat=n --> " +
      std::to_string(n) + " measurements per cell.\n";
  WriteFile(dir_->File("good.md"), good);
  auto ok = RunCommand({LadderBinary(), "verify", dir_->File("good.md"), "--db", db_});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("3 of 3 figures hold"), std::string::npos) << ok.out;

  // Doctored: the ratio is off by 5 % (line 4) and the count by one (line 5).
  std::snprintf(ratio_text, sizeof ratio_text, "%.4f", ratio * 1.05);
  const std::string doctored =
      "# Findings\n"
      "\n"
      "At 4K the 3D path changes the time by <!-- ladder: run=1 cell=\"depth=4096\" arm=3d "
      "stat=change -->" +
      std::string(change_text) +
      " %\n"
      "(ratio <!-- ladder: run=1 cell=\"depth=4096\" arm=3d stat=ratio tol=0.1% -->" +
      ratio_text +
      "),\n"
      "with <!-- ladder: run=1 cell=\"depth=256,path=2d\" stat=n --> " +
      std::to_string(n + 1) + " measurements per cell.\n";
  WriteFile(dir_->File("doctored.md"), doctored);
  auto bad = RunCommand({LadderBinary(), "verify", dir_->File("doctored.md"), "--db", db_});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("doctored.md:4: DRIFTED: stated " + std::string(ratio_text)),
            std::string::npos)
      << bad.err;
  EXPECT_NE(bad.err.find("doctored.md:5: DRIFTED: stated " + std::to_string(n + 1)),
            std::string::npos)
      << bad.err;
  EXPECT_EQ(bad.err.find("doctored.md:3:"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("2 figure(s) drifted"), std::string::npos) << bad.err;
}

TEST_F(ReportTest, TwoRunsOfTheSameMatrixGetAReproducibilityTable) {
  // A second run of the same matrix into the same database becomes run 2.
  auto again = RunCommand({LadderBinary(), "local", LADDER_REPORT_MATRIX, "--db", db_},
                          std::chrono::seconds(240));
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  auto json = RunCommand({LadderBinary(), "report", "1", "2", "--db", db_, "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto report = nlohmann::json::parse(json.out);
  ASSERT_EQ(report["reproducibility"].size(), 1u);
  const auto& repro = report["reproducibility"][0];
  EXPECT_TRUE(repro["same_matrix"].get<bool>());
  EXPECT_EQ(repro["rows"].size(), 6u);
  for (const auto& row : repro["rows"]) {
    const double a = row["a"].get<double>(), b = row["b"].get<double>();
    EXPECT_NEAR(row["percent"].get<double>(), 100 * std::fabs(a - b) / ((a + b) / 2), 1e-9);
  }
  auto md = RunCommand({LadderBinary(), "report", "1", "2", "--db", db_, "--format", "md"});
  EXPECT_NE(md.out.find("# Reproducibility: run 1 vs run 2"), std::string::npos) << md.out;
  // The same comparison `ladder compare` makes, with its verdicts.
  ASSERT_EQ(report["comparisons"].size(), 1u);
  EXPECT_EQ(report["comparisons"][0]["rows"].size(), 6u);
  EXPECT_NE(md.out.find("# Comparison: run 2 vs run 1"), std::string::npos) << md.out;
  auto compare = RunCommand({LadderBinary(), "compare", "1", "2", "--db", db_, "--json"});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  auto c = nlohmann::json::parse(compare.out);
  EXPECT_EQ(c["rows"].size(), 6u);
  EXPECT_EQ(c["rows"], report["comparisons"][0]["rows"]);
  // --fail-on: exit 5 when a named verdict occurs. Two sessions of a CPU run never give "no
  // change" at ±0 %, so that one fails for sure.
  auto gate = RunCommand({LadderBinary(), "compare", "1", "2", "--db", db_, "--threshold", "0",
                          "--fail-on", "slower,faster,inconclusive"});
  EXPECT_EQ(gate.exit_code, 5) << gate.out << gate.err;
  auto bad = RunCommand({LadderBinary(), "compare", "1", "2", "--db", db_, "--fail-on", "worse"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  // The same gate on each cell's own verdict; a drift allowance out of range is bad input.
  auto per_cell = RunCommand({LadderBinary(), "compare", "1", "2", "--db", db_, "--threshold", "0",
                              "--fail-on", "inconclusive", "--per-cell"});
  EXPECT_EQ(per_cell.exit_code, 5) << per_cell.out << per_cell.err;
  EXPECT_NE(per_cell.err.find("per-cell verdict named by --fail-on"), std::string::npos)
      << per_cell.err;
  auto drift =
      RunCommand({LadderBinary(), "compare", "1", "2", "--db", db_, "--host-drift", "150"});
  EXPECT_EQ(drift.exit_code, 2) << drift.err;
}

// Query's CSV keeps every digit and has the interval columns; export's keeps every digit.
TEST_F(ReportTest, CsvExportsLoseNothing) {
  auto csv = RunCommand({LadderBinary(), "query", "1", "--db", db_, "--csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(csv.out.substr(0, csv.out.find('\n')),
            "depth,path,n,sessions,median,mean,sd,cv,min,max,ci95_lower,ci95_upper,ci95_df,"
            "ci95_within_session_only,flags");
  auto json = RunCommand({LadderBinary(), "query", "1", "--db", db_, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto rows = nlohmann::json::parse(json.out)["rows"];
  // The first row's mean, read back from the CSV, is the JSON's double exactly.
  std::string line = csv.out.substr(csv.out.find('\n') + 1);
  line = line.substr(0, line.find('\n'));
  std::vector<std::string> fields;
  for (size_t start = 0;;) {
    const size_t comma = line.find(',', start);
    fields.push_back(line.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  ASSERT_GE(fields.size(), 6u);
  EXPECT_EQ(std::stod(fields[5]), rows[0]["mean"].get<double>()) << line;
  auto exported = RunCommand({LadderBinary(), "export", "1", "--db", db_, "--csv"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  auto exported_json = RunCommand({LadderBinary(), "export", "1", "--db", db_, "--json"});
  const auto first = nlohmann::json::parse(exported_json.out)["measurements"][0];
  std::string row = exported.out.substr(exported.out.find('\n') + 1);
  row = row.substr(0, row.find('\n'));
  EXPECT_NE(row.find("," + fmt_shortest(first["value"].get<double>()) + ","), std::string::npos)
      << row;
}

// The README's first screen: scripts/demo.sh's analysis part on the demo matrix (3 sessions):
// the paired ratio table with intervals, df and verdicts, the variance split by level, where
// the HTML report is, and no negative bound anywhere.
TEST(Demo, EndsWithRatiosVerdictsVarianceAndTheReport) {
  TempDir dir;
  const std::string db = dir.File("demo.db");
  auto result = RunCommand({"/usr/bin/env", "LADDER_DEMO_SKIP_BUILD=1", "LADDER=" + LadderBinary(),
                            "LADDER_DEMO_DB=" + db, "COLUMNS=200", "bash", LADDER_DEMO_SCRIPT},
                           std::chrono::seconds(240));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const std::string& out = result.out;
  for (const char* needle :
       {"Paired ratios", "95 % t interval (df)", "verdict (±2 %)", "depth=4096,query_rows=2",
        "path 3d vs 2d", "Variance by level", "round", "process", "session", "HTML report"}) {
    EXPECT_NE(out.find(needle), std::string::npos) << needle << "\n" << out;
  }
  EXPECT_NE(out.find("(df 2)"), std::string::npos) << out;  // 3 sessions
  // No bound below zero: no interval opens with a minus sign.
  EXPECT_EQ(out.find("[-"), std::string::npos) << out;
  EXPECT_EQ(out.find("[−"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(dir.File("demo-report.html")));
  size_t rows = 0;
  for (const std::string depth : {"256", "1024", "4096"}) {
    for (const std::string q : {"1", "2"}) {
      rows += out.find("depth=" + depth + ",query_rows=" + q + "  ") != std::string::npos;
    }
  }
  EXPECT_EQ(rows, 6u) << out;
}

TEST_F(ReportTest, BadInputIsExplained) {
  auto unknown = RunCommand({LadderBinary(), "report", "99", "--db", db_, "--format", "md"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("run 99 not found"), std::string::npos) << unknown.err;
  auto metric = RunCommand(
      {LadderBinary(), "report", "1", "--db", db_, "--format", "md", "--metric", "nope"});
  EXPECT_EQ(metric.exit_code, 2);
  EXPECT_NE(metric.err.find("time_us"), std::string::npos) << metric.err;
  auto missing = RunCommand({LadderBinary(), "verify", "/nonexistent.md", "--db", db_});
  EXPECT_EQ(missing.exit_code, 2);
}

}  // namespace
}  // namespace ladder::testing
