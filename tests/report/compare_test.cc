// `ladder compare` over real SQLite databases whose truth is known (synthetic_run.h): planted
// differences of 0, 1, 5 and 20 % and an A/A pair come out with the right verdicts, for a time
// (lower is better) and for a rate (higher is better), in one database or across two files; and
// the report of two runs shows the same verdicts and flags a spread larger than the difference.
#include "ladder/report/compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "absl/strings/str_join.h"
#include "ladder/db/store.h"
#include "ladder/report/history.h"
#include "ladder/report/report.h"
#include "ladder/stats/compare.h"
#include "process.h"
#include "synthetic_run.h"

namespace ladder::testing {
namespace {

using report::CompareOptions;
using report::CompareTwoRuns;
using report::RunComparison;

constexpr const char* kCompareYaml = R"(name: compare-synthetic
runner: kernel
axes:
  depth: [1024, 4096]
  path: [2d, 3d]
pair: [path]
replicates: {sessions: 5, processes: 2, rounds: 3}
metric: time_us
)";

// A multiplicative normal effect, the same for the same key.
double CompareNoise(uint64_t key, double sd) {
  std::mt19937_64 gen(key * 0x9e3779b97f4a7c15ULL + 1);
  std::normal_distribution<double> normal(0.0, sd);
  return std::exp(normal(gen));
}

// A quiet fleet: 0.3 % between sessions, 0.2 % between processes, 0.2 % between rounds. `run`
// salts the noise so that two runs are independent draws.
double Value(const CellAxes& a, int s, int p, int r, uint64_t run, double factor,
             double session_sd = 0.003) {
  const uint64_t d = std::stoull(a.at("depth"));
  const uint64_t arm = a.at("path") == "3d" ? 2 : 1;
  const double base = static_cast<double>(d) / 10.0 * (arm == 2 ? 0.9 : 1.0);
  const uint64_t cell = d * 10 + arm;
  const uint64_t k = run * 1'000'000'000ULL + cell * 10'000;
  return base * factor * CompareNoise(k + static_cast<uint64_t>(s), session_sd) *
         CompareNoise(k + 1000 + static_cast<uint64_t>(s * 10 + p), 0.002) *
         CompareNoise(k + 5000 + static_cast<uint64_t>(s * 100 + p * 10 + r), 0.002);
}

class CompareTest : public ::testing::Test {
 protected:
  std::unique_ptr<db::Store> OpenStore(const std::string& name) {
    auto store = db::Store::Open(dir_.File(name));
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
  std::unique_ptr<db::Database> Reader(const std::string& name) {
    auto db = db::Database::Open(dir_.File(name), db::OpenMode::kReadOnly);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(*db) : nullptr;
  }
  // A run whose every value is `factor` times the baseline's distribution.
  int64_t Run(db::Store& store, uint64_t salt, double factor, const std::string& unit = "us",
              double session_sd = 0.003) {
    SyntheticOptions options;
    options.unit = unit;
    options.value = [=](const CellAxes& a, int s, int p, int r) {
      return Value(a, s, p, r, salt, factor, session_sd);
    };
    return BuildSyntheticRun(store, kCompareYaml, options);
  }
  RunComparison Compare(db::Database& db, int64_t a, int64_t b, CompareOptions options = {}) {
    auto c = CompareTwoRuns({&db, a, "run A"}, {&db, b, "run B"}, options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : RunComparison{};
  }
  static void ExpectAll(const RunComparison& c, const std::string& verdict) {
    ASSERT_EQ(c.rows.size(), 4u);
    for (const auto& row : c.rows) {
      EXPECT_EQ(row.verdict, verdict) << row.key << " ratio " << row.ratio->estimate << " ["
                                      << row.ratio->lower << ", " << row.ratio->upper << "]";
      ASSERT_TRUE(row.ratio.has_value());
      EXPECT_GT(row.ratio->lower, 0);
      EXPECT_GT(row.ratio->df, 4.0);  // Welch from 5 + 5 sessions
      EXPECT_LE(row.ratio->df, 8.0);
      EXPECT_EQ(row.sessions_a, 5);
      EXPECT_EQ(row.sessions_b, 5);
    }
  }

  TempDir dir_;
};

TEST_F(CompareTest, PlantedDifferencesGetTheRightVerdicts) {
  auto store = OpenStore("results.db");
  const int64_t base = Run(*store, 1, 1.00);
  const int64_t aa = Run(*store, 2, 1.00);
  const int64_t one = Run(*store, 3, 1.01);
  const int64_t five = Run(*store, 4, 1.05);
  const int64_t twenty = Run(*store, 5, 1.20);
  const int64_t faster = Run(*store, 6, 0.90);
  auto db = Reader("results.db");
  ExpectAll(Compare(*db, base, aa), "no change");   // A/A
  ExpectAll(Compare(*db, base, one), "no change");  // 1 % is inside the ±2 % band
  ExpectAll(Compare(*db, base, five), "slower");    // a time 5 % higher
  ExpectAll(Compare(*db, base, twenty), "slower");
  ExpectAll(Compare(*db, base, faster), "faster");
  // The same 5 % with a tighter band than the data can resolve is not called no change.
  const RunComparison c = Compare(*db, base, five);
  for (const auto& row : c.rows) {
    EXPECT_NEAR(row.ratio->estimate, 1.05, 0.01) << row.key;
    EXPECT_TRUE(row.ratio->Contains(1.05)) << row.key;
    EXPECT_FALSE(row.spread_exceeds_difference) << row.key;
  }
  EXPECT_EQ(c.verdicts.at("slower"), 4);
  EXPECT_TRUE(c.one_host.empty());  // every session on a host of its own
  const nlohmann::json j = report::ToJson(c);
  EXPECT_TRUE(j["one_host"].is_null());
  EXPECT_EQ(j["rows"][0]["verdict"], "slower");
  EXPECT_EQ(j["direction"], "lower is better");
  EXPECT_EQ(j["rows"][0]["ratio"]["estimand"],
            "B/A: ratio of the runs' geometric means of session means");
}

// Sessions on one host (`ladder local`) do not sample that host's drift between two runs: given an
// allowance, the verdicts judge against the band widened by it, and say how to get a verdict.
TEST_F(CompareTest, OnOneHostTheBandWidensByAGivenDriftAllowance) {
  auto store = OpenStore("results.db");
  const auto local_run = [&](uint64_t salt, double factor) {
    SyntheticOptions options;
    options.one_host = true;
    options.value = [=](const CellAxes& a, int s, int p, int r) {
      return Value(a, s, p, r, salt, factor, 0.003);
    };
    return BuildSyntheticRun(*store, kCompareYaml, options);
  };
  const int64_t base = local_run(1, 1.0);
  const int64_t five = local_run(2, 1.05);
  const int64_t big = local_run(3, 1.35);
  const int64_t same = local_run(4, 1.0);
  auto db = Reader("results.db");
  CompareOptions given;
  given.host_drift = report::kDefaultHostDrift;
  const RunComparison c = Compare(*db, base, five, given);
  EXPECT_EQ(c.drift_source, "given");
  EXPECT_EQ(c.one_host, "bench-1");
  EXPECT_DOUBLE_EQ(c.host_drift, report::kDefaultHostDrift);
  EXPECT_DOUBLE_EQ(c.band, 0.02 + report::kDefaultHostDrift);
  ExpectAll(c, "inconclusive");  // 5 % is within what the host itself moves
  for (const auto& row : c.rows)
    EXPECT_GT(row.ratio->lower, 1.02) << row.key;  // Welch alone: slower
  ASSERT_FALSE(c.notes.empty());
  EXPECT_NE(c.notes.back().find("every session of both runs ran on one host (bench-1)"),
            std::string::npos);
  EXPECT_NE(c.notes.back().find("paired axis of one run"), std::string::npos);
  const nlohmann::json j = report::ToJson(c);
  EXPECT_EQ(j["one_host"], "bench-1");
  EXPECT_DOUBLE_EQ(j["host_drift"].get<double>(), report::kDefaultHostDrift);
  EXPECT_NE(report::RenderComparisonMarkdown(c).find("drift of that host between the runs"),
            std::string::npos);
  ExpectAll(Compare(*db, base, big, given), "slower");         // 35 % is beyond ±22 %
  ExpectAll(Compare(*db, base, same, given), "inconclusive");  // A/A: not "no change" either
  CompareOptions trusting;
  trusting.host_drift = 0;  // the interval as is
  ExpectAll(Compare(*db, base, five, trusting), "slower");
  EXPECT_TRUE(Compare(*db, base, five, trusting).notes.back().find("one host") !=
              std::string::npos);
  // Runs on different hosts are untouched by the allowance.
  auto fleet_store = OpenStore("fleet.db");
  const int64_t fleet_a = Run(*fleet_store, 5, 1.0);
  const int64_t fleet_b = Run(*fleet_store, 6, 1.05);
  auto db2 = Reader("fleet.db");
  const RunComparison fleet = Compare(*db2, fleet_a, fleet_b, given);
  EXPECT_TRUE(fleet.one_host.empty());
  EXPECT_DOUBLE_EQ(fleet.band, 0.02);
  ExpectAll(fleet, "slower");
  CompareOptions bad;
  bad.host_drift = -0.1;
  EXPECT_EQ(
      CompareTwoRuns({db2.get(), fleet_a, "A"}, {db2.get(), fleet_b, "B"}, bad).status().code(),
      absl::StatusCode::kInvalidArgument);
}

// By default nothing is invented: without A/A history on the host every verdict is inconclusive
// and says why; with repeated runs of one build (equal tags) the drift is estimated per cell from
// their spread and carried into the interval, naming the runs.
TEST_F(CompareTest, OnOneHostTheDriftComesFromAaHistoryOrTheVerdictSaysItIsUnknown) {
  auto store = OpenStore("results.db");
  const auto local_run = [&](uint64_t salt, double factor, const std::string& build) {
    SyntheticOptions options;
    options.one_host = true;
    if (!build.empty()) options.tags = {{"build", build}};
    options.value = [=](const CellAxes& a, int s, int p, int r) {
      return Value(a, s, p, r, salt, factor, 0.003);
    };
    return BuildSyntheticRun(*store, kCompareYaml, options);
  };
  const int64_t base = local_run(1, 1.0, "");
  const int64_t slower = local_run(2, 1.10, "");
  {
    auto db = Reader("results.db");
    const RunComparison c = Compare(*db, base, slower);
    EXPECT_EQ(c.drift_source, "unknown");
    ExpectAll(c, "inconclusive");
    for (const auto& row : c.rows) EXPECT_EQ(row.matrix_verdict, "inconclusive") << row.key;
    ASSERT_FALSE(c.notes.empty());
    EXPECT_NE(c.notes.back().find("no A/A history: between-run drift unknown"), std::string::npos)
        << c.notes.back();
    EXPECT_EQ(report::ToJson(c)["drift"]["source"], "unknown");
  }
  // Four runs of build "good", then build "new" 10 % slower.
  std::vector<int64_t> good;
  for (uint64_t salt : {3, 4, 5, 6}) good.push_back(local_run(salt, 1.0, "good"));
  const int64_t fresh = local_run(7, 1.10, "new");
  const int64_t again = local_run(8, 1.0, "good2");
  auto db = Reader("results.db");
  const RunComparison c = Compare(*db, good[0], fresh);
  EXPECT_EQ(c.drift_source, "estimated");
  EXPECT_EQ(c.drift_runs, good);  // "new" and "good2" ran once: no A/A evidence
  EXPECT_EQ(c.drift_groups, 1u);
  for (const auto& row : c.rows) {
    EXPECT_EQ(row.matrix_verdict, "slower") << row.key;
    EXPECT_TRUE(std::isfinite(row.drift_sd)) << row.key;
    EXPECT_EQ(row.drift_df, 3) << row.key;  // 4 A/A runs
  }
  EXPECT_NE(c.notes.back().find("estimated per cell from A/A history"), std::string::npos);
  const nlohmann::json j = report::ToJson(c);
  EXPECT_EQ(j["drift"]["source"], "estimated");
  EXPECT_TRUE(j["host_drift"].is_null());
  // An A/A pair is not slower.
  for (const auto& row : Compare(*db, good[0], again).rows) {
    EXPECT_NE(row.matrix_verdict, "slower") << row.key;
    EXPECT_NE(row.matrix_verdict, "faster") << row.key;
  }
  // A history of the series judges each run against its baseline the same way: the drift
  // estimated once from the series' runs with equal tags, not a constant allowance.
  report::HistoryOptions history_options;
  history_options.baseline_run = good[0];
  auto h = report::ReadHistory(*db, "compare-synthetic", history_options);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->series.size(), 4u);
  for (const auto& series : h->series) {
    for (const auto& point : series.points) {
      if (point.run_id == fresh) EXPECT_EQ(point.matrix_verdict, "slower") << series.key;
      if (point.run_id == again) {
        EXPECT_NE(point.matrix_verdict, "slower") << series.key;
        EXPECT_NE(point.matrix_verdict, "faster") << series.key;
      }
    }
  }
  bool estimated = false;
  for (const auto& n : h->notes) estimated |= n.find("estimated per cell") != std::string::npos;
  EXPECT_TRUE(estimated) << absl::StrJoin(h->notes, " | ");
  // A stated allowance still wins: 10 % inside a band widened by 20 % is no verdict.
  history_options.host_drift = 0.20;
  auto allowed = report::ReadHistory(*db, "compare-synthetic", history_options);
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  for (const auto& point : allowed->series[0].points) {
    if (point.run_id == fresh) EXPECT_EQ(point.matrix_verdict, "inconclusive");
  }
}

// The matrix verdict: 50 cells on a fleet with 1 % between sessions, one cell 20 % slower and one
// 5.5 % slower (alone, slower; one of 50, not). Each cell's band test p-value is adjusted by Holm
// over the 50; a faster/slower survives only when the adjusted p is below 5 %.
TEST_F(CompareTest, TheMatrixVerdictAdjustsEveryCellsTestForTheFamily) {
  constexpr const char* kWide = R"(name: compare-wide
runner: kernel
axes:
  depth: [1024, 1280, 1536, 1792, 2048, 2304, 2560, 2816, 3072, 3328, 3584, 3840, 4096, 4352, 4608, 4864, 5120, 5376, 5632, 5888, 6144, 6400, 6656, 6912, 7168]
  path: [2d, 3d]
pair: [path]
replicates: {sessions: 5, processes: 2, rounds: 3}
metric: time_us
)";
  auto store = OpenStore("results.db");
  const auto run = [&](uint64_t salt, bool planted) {
    SyntheticOptions options;
    options.value = [=](const CellAxes& a, int s, int p, int r) {
      double factor = 1.0;
      if (planted && a.at("path") == "2d" && a.at("depth") == "1024") factor = 1.20;
      if (planted && a.at("path") == "2d" && a.at("depth") == "2048") factor = 1.055;
      return Value(a, s, p, r, salt, factor, 0.01);
    };
    return BuildSyntheticRun(*store, kWide, options);
  };
  const int64_t a = run(11, false);
  const int64_t b = run(12, true);
  auto db = Reader("results.db");
  const RunComparison c = Compare(*db, a, b);
  ASSERT_EQ(c.rows.size(), 50u);
  EXPECT_EQ(c.cells_judged, 50);
  std::vector<double> p;
  for (const auto& row : c.rows) p.push_back(row.p_band);
  const std::vector<double> holm = stats::HolmAdjust(p);
  int demoted = 0;
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    const auto& row = c.rows[i];
    EXPECT_DOUBLE_EQ(row.p_holm, holm[i]) << row.key;
    EXPECT_GE(row.p_holm, row.p_band) << row.key;
    const bool change = row.verdict == "slower" || row.verdict == "faster";
    EXPECT_EQ(change, row.p_band < 0.05) << row.key << " p " << row.p_band;  // one test
    if (change && row.p_holm >= 0.05) {
      EXPECT_EQ(row.matrix_verdict, "inconclusive") << row.key;
      ++demoted;
    } else {
      EXPECT_EQ(row.matrix_verdict, row.verdict) << row.key;
    }
  }
  EXPECT_EQ(c.rows[0].key, "depth=1024,path=2d");
  EXPECT_EQ(c.rows[0].matrix_verdict, "slower");  // 20 %: slower over the matrix too
  const auto marginal = std::find_if(c.rows.begin(), c.rows.end(),
                                     [](const auto& r) { return r.key == "depth=2048,path=2d"; });
  ASSERT_NE(marginal, c.rows.end());
  EXPECT_EQ(marginal->verdict, "slower") << marginal->p_band;  // alone it would fail a gate
  EXPECT_EQ(marginal->matrix_verdict, "inconclusive") << marginal->p_holm;
  EXPECT_GE(demoted, 1);
  const std::string md = report::RenderComparisonMarkdown(c);
  EXPECT_NE(md.find("| matrix verdict |"), std::string::npos);
  EXPECT_NE(md.find("Over the matrix (Holm, any false slower or faster among the 50 cells judged"),
            std::string::npos)
      << md;
  const nlohmann::json j = report::ToJson(c);
  EXPECT_EQ(j["matrix"]["cells_judged"], 50);
  EXPECT_EQ(j["matrix"]["method"], "holm");
  EXPECT_EQ(j["rows"][0]["matrix_verdict"], "slower");
}

TEST_F(CompareTest, ForARateHigherIsFaster) {
  auto store = OpenStore("results.db");
  const int64_t base = Run(*store, 1, 1.00, "tok/s");
  const int64_t more = Run(*store, 2, 1.05, "tok/s");
  const int64_t less = Run(*store, 3, 0.95, "tok/s");
  auto db = Reader("results.db");
  ExpectAll(Compare(*db, base, more), "faster");
  ExpectAll(Compare(*db, base, less), "slower");
  // A flag overrides the unit.
  CompareOptions lower;
  lower.direction = report::Direction::kLowerIsBetter;
  ExpectAll(Compare(*db, base, more, lower), "slower");
}

TEST_F(CompareTest, ANoisyFleetIsInconclusiveAndFlagsSpreadLargerThanTheDifference) {
  auto store = OpenStore("results.db");
  // 5 % between sessions, a planted 1 %: the interval reaches across the band.
  const int64_t base = Run(*store, 1, 1.00, "us", 0.05);
  const int64_t one = Run(*store, 2, 1.01, "us", 0.05);
  auto db = Reader("results.db");
  const RunComparison c = Compare(*db, base, one);
  ASSERT_EQ(c.rows.size(), 4u);
  int flagged = 0;
  for (const auto& row : c.rows) {
    EXPECT_EQ(row.verdict, "inconclusive") << row.key;
    flagged += row.spread_exceeds_difference;
  }
  EXPECT_GE(flagged, 3);
  // The report of the two runs shows the same verdicts and the flag.
  auto report = report::BuildReport(*db, {base, one});
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->comparisons.size(), 1u);
  EXPECT_EQ(report->comparisons[0].rows.size(), 4u);
  const std::string md = report::RenderMarkdown(*report);
  EXPECT_NE(md.find("# Comparison: run 2 vs run 1"), std::string::npos) << md;
  EXPECT_NE(md.find("is larger than the difference between the runs"), std::string::npos) << md;
  EXPECT_NE(md.find("| inconclusive |"), std::string::npos) << md;
}

TEST_F(CompareTest, TwoDatabaseFilesAndBadInput) {
  auto first = OpenStore("base.db");
  auto second = OpenStore("tonight.db");
  const int64_t a = Run(*first, 1, 1.00);
  const int64_t b = Run(*second, 2, 1.20);
  auto db_a = Reader("base.db");
  auto db_b = Reader("tonight.db");
  auto c = CompareTwoRuns({db_a.get(), a, "base.db run 1"}, {db_b.get(), b, "tonight.db run 1"});
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectAll(*c, "slower");
  // Matching on a subset of axes pools the cells that agree on it.
  CompareOptions by_depth;
  by_depth.by = {"depth"};
  auto pooled = CompareTwoRuns({db_a.get(), a, "A"}, {db_b.get(), b, "B"}, by_depth);
  ASSERT_TRUE(pooled.ok()) << pooled.status();
  ASSERT_EQ(pooled->rows.size(), 2u);
  EXPECT_EQ(pooled->rows[0].key, "depth=1024");
  EXPECT_EQ(pooled->rows[0].n_a, 60);  // 2 cells x 5 sessions x 2 processes x 3 rounds
  // Unknown run, metric, axis; a unit that does not say which way is better.
  EXPECT_EQ(CompareTwoRuns({db_a.get(), 9, "A"}, {db_b.get(), b, "B"}).status().code(),
            absl::StatusCode::kNotFound);
  CompareOptions metric;
  metric.metric = "nope";
  EXPECT_EQ(CompareTwoRuns({db_a.get(), a, "A"}, {db_b.get(), b, "B"}, metric).status().code(),
            absl::StatusCode::kInvalidArgument);
  CompareOptions axis;
  axis.by = {"dpth"};
  EXPECT_EQ(CompareTwoRuns({db_a.get(), a, "A"}, {db_b.get(), b, "B"}, axis).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto third = OpenStore("counts.db");
  const int64_t x = Run(*third, 1, 1.0, "1");
  const int64_t y = Run(*third, 2, 1.0, "1");
  auto db_c = Reader("counts.db");
  auto unknown = CompareTwoRuns({db_c.get(), x, "A"}, {db_c.get(), y, "B"});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("--higher-is-better"), std::string::npos);
}

// A cell whose own evidence says it is not what it claims (speculation that never drafted, another
// backend) gets no verdict between two runs either: the ratio stays, the verdict and the matrix
// verdict are withheld with the flag, and it cannot fire a change in Holm's family.
TEST_F(CompareTest, AClaimFlagInEitherRunWithholdsTheVerdict) {
  auto store = OpenStore("flags.db");
  const int64_t base = Run(*store, 1, 1.00);
  SyntheticOptions options;
  options.value = [](const CellAxes& a, int s, int p, int r) { return Value(a, s, p, r, 2, 1.20); };
  options.evidence = [](const CellAxes& axes) {
    std::vector<std::pair<std::string, std::string>> out;
    if (axes.at("path") == "3d" && axes.at("depth") == "1024") {
      out.push_back({"backend_mismatch", R"("asked FLASH_ATTN, the engine logged TRITON_ATTN")"});
    }
    return out;
  };
  const int64_t slower = BuildSyntheticRun(*store, kCompareYaml, options);
  auto db = Reader("flags.db");
  const RunComparison c = Compare(*db, base, slower);
  ASSERT_EQ(c.rows.size(), 4u);
  for (const auto& row : c.rows) {
    ASSERT_TRUE(row.ratio.has_value()) << row.key;
    EXPECT_NEAR(row.ratio->estimate, 1.2, 0.02) << row.key;
    if (row.key == "depth=1024,path=3d") {
      EXPECT_EQ(row.claim_flags, std::vector<std::string>{"backend_mismatch"});
      EXPECT_EQ(row.verdict, "withheld (backend_mismatch)");
      EXPECT_EQ(row.matrix_verdict, "withheld (backend_mismatch)");
      EXPECT_EQ(row.p_band, 1.0);
    } else {
      EXPECT_TRUE(row.claim_flags.empty()) << row.key;
      EXPECT_EQ(row.matrix_verdict, "slower") << row.key;
    }
  }
  // The same the other way round: the flag travels from run A too.
  const RunComparison back = Compare(*db, slower, base);
  EXPECT_EQ(back.rows[1].key, "depth=1024,path=3d");
  EXPECT_EQ(back.rows[1].verdict, "withheld (backend_mismatch)");
  const std::string shown = report::RenderComparisonMarkdown(c);
  EXPECT_NE(shown.find("⚠ backend_mismatch"), std::string::npos) << shown;
  EXPECT_NE(shown.find("1 withheld (claim flags)"), std::string::npos) << shown;
  EXPECT_EQ(report::ToJson(c)["rows"][1]["claim_flags"][0], "backend_mismatch");
}

// Two arms of one run's paired axis: per context of the other axes, report's paired ratio judged
// against the band, Holm over the contexts, and the claim flags withheld as between runs.
TEST_F(CompareTest, PairedArmsOfOneRunAreJudgedLikeTwoRuns) {
  auto store = OpenStore("arms.db");
  SyntheticOptions options;
  // The 3d arm is 10 % faster than 2d at depth 1024 and the same at 4096 (a time: lower better).
  options.value = [](const CellAxes& a, int s, int p, int r) {
    const double arm = a.at("path") == "3d" ? (a.at("depth") == "1024" ? 0.9 : 1.0) : 1.0;
    CellAxes same = a;
    same["path"] = "2d";
    return Value(same, s, p, r, a.at("path") == "3d" ? 8 : 7, arm);  // each arm its own noise
  };
  const int64_t run = BuildSyntheticRun(*store, kCompareYaml, options);
  auto db = Reader("arms.db");
  auto c = report::ComparePairedArms({db.get(), run, "run 1"}, {"path", "2d", "3d"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->design, "paired arms");
  EXPECT_EQ(c->label_a, "path=2d");
  EXPECT_EQ(c->label_b, "path=3d");
  ASSERT_EQ(c->rows.size(), 2u);
  EXPECT_EQ(c->rows[0].key, "depth=1024");
  EXPECT_NEAR(c->rows[0].ratio->estimate, 0.9, 0.01);
  EXPECT_EQ(c->rows[0].ratio->df, 4);  // 5 sessions measured both arms
  EXPECT_EQ(c->rows[0].matrix_verdict, "faster");
  EXPECT_EQ(c->rows[1].key, "depth=4096");
  EXPECT_EQ(c->rows[1].matrix_verdict, "no change");
  EXPECT_EQ(c->cells_judged, 2);
  EXPECT_EQ(report::ToJson(*c)["design"], "paired arms");
  // The reverse arms give the reciprocal ratio.
  auto reverse = report::ComparePairedArms({db.get(), run, "run 1"}, {"path", "3d", "2d"});
  ASSERT_TRUE(reverse.ok()) << reverse.status();
  EXPECT_NEAR(reverse->rows[0].ratio->estimate * c->rows[0].ratio->estimate, 1.0, 1e-9);
  EXPECT_EQ(reverse->rows[0].matrix_verdict, "slower");
  // Bad input names what exists.
  auto not_paired = report::ComparePairedArms({db.get(), run, "run 1"}, {"depth", "1024", "4096"});
  ASSERT_FALSE(not_paired.ok());
  EXPECT_NE(not_paired.status().message().find("its paired axes: path"), std::string::npos)
      << not_paired.status();
  auto no_value = report::ComparePairedArms({db.get(), run, "run 1"}, {"path", "2d", "4d"});
  ASSERT_FALSE(no_value.ok());
  EXPECT_NE(no_value.status().message().find("its values: 2d, 3d"), std::string::npos)
      << no_value.status();
}

}  // namespace
}  // namespace ladder::testing
