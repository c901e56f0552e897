// ladder::analysis over databases whose truth is known (synthetic_run.h): ratios, A/A, crossover,
// variance by level, flags, reproducibility, and the report/verify built on them.
#include "ladder/report/analysis.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "absl/strings/str_join.h"
#include "ladder/db/store.h"
#include "ladder/report/report.h"
#include "ladder/report/verify.h"
#include "process.h"
#include "synthetic_run.h"

namespace ladder::testing {
namespace {

using report::AnalysisOptions;
using report::AnalyzeRun;
using report::Comparison;
using report::MeasureLevelCosts;
using report::RunAnalysis;

constexpr const char* kLadderYaml = R"(name: synthetic-ladder
runner: kernel
axes:
  depth: [1024, 4096, 16384]
  spec: ["off", mtp]
pair: [spec]
together: [depth]
replicates: {sessions: 4, processes: 2, rounds: 3}
metric: time_us
aa_control: {axis: spec, of: "off", as: off-copy}
)";

// True ratio mtp / off of time_us per depth: a gain at 1024 that turns into a loss (crosses 1
// between 1024 and 4096).
double TrueRatio(const std::string& depth) {
  if (depth == "1024") return 0.7;
  if (depth == "4096") return 1.1;
  return 1.5;
}

// Session offset 3 %, arm × session 0.5 %, process 1 %, round 0.5 % — multiplicative.
double Noise(uint64_t seed, double sd) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0.0, sd);
  return std::exp(normal(gen));
}

double LadderValue(const CellAxes& axes, int session, int process, int round, uint64_t salt = 0) {
  const std::string depth = axes.at("depth");
  const std::string spec = axes.at("spec");
  const double base = std::stod(depth) / 10.0;
  const double arm = spec == "mtp" ? TrueRatio(depth) : 1.0;
  const uint64_t arm_id = spec == "mtp" ? 1 : spec == "off" ? 2 : 3;
  const uint64_t d = static_cast<uint64_t>(std::stoi(depth));
  return base * arm * Noise(salt * 7919 + 11 + static_cast<uint64_t>(session), 0.03) *
         Noise(salt * 7919 + 1000 + static_cast<uint64_t>(session) * 10 + arm_id, 0.005) *
         Noise(salt * 7919 + 100000 + d * 1000 + arm_id * 100 +
                   static_cast<uint64_t>(session) * 10 + static_cast<uint64_t>(process),
               0.01) *
         Noise(salt * 7919 + 9000000 + d * 10000 + arm_id * 1000 +
                   static_cast<uint64_t>(session) * 100 + static_cast<uint64_t>(process) * 10 +
                   static_cast<uint64_t>(round),
               0.005);
}

class AnalysisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = db::Store::Open(dir_.File("results.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  std::unique_ptr<db::Database> Reader() {
    auto db = db::Database::Open(dir_.File("results.db"), db::OpenMode::kReadOnly);
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(*db) : nullptr;
  }
  int64_t BuildLadder(uint64_t salt = 0) {
    SyntheticOptions options;
    options.value = [salt](const CellAxes& a, int s, int p, int r) {
      return LadderValue(a, s, p, r, salt);
    };
    options.extra = [](const CellAxes& a, int s, int, int) {
      // Session 0 ran depth 16384 at 900 of 1980 MHz: throttled.
      const double clock = (a.at("depth") == "16384" && s == 0) ? 900 : 1950;
      return std::vector<SyntheticMetric>{{"gpu_clock_mhz", "MHz", clock},
                                          {"gpu_clock_default_mhz", "MHz", 1980}};
    };
    options.evidence = [](const CellAxes& a) {
      std::vector<std::pair<std::string, std::string>> out;
      if (a.at("depth") == "4096" && a.at("spec") == "mtp") {
        out.push_back({"backend_mismatch", R"("asked TRITON_ATTN, engine used FLASH_ATTN")"});
      }
      if (a.at("depth") == "1024" && a.at("spec") == "mtp") {
        // As the engine runner records it (engines/src/engine_runner.cc, RecordAcceptance).
        out.push_back({"speculation_not_engaged",
                       R"("round 0: spec_k=1 but the engine drafted no tokens (timings); it ran )"
                       R"(the target model alone")"});
      }
      return out;
    };
    return BuildSyntheticRun(*store_, kLadderYaml, options);
  }
  const Comparison* Find(const RunAnalysis& a, const std::string& key) {
    for (const auto& c : a.comparisons) {
      if (c.treatment_key == key) return &c;
    }
    return nullptr;
  }

  TempDir dir_;
  std::unique_ptr<db::Store> store_;
};

TEST_F(AnalysisTest, PairedRatiosRecoverTheKnownRatioWithAllThreeIntervals) {
  const int64_t run = BuildLadder();
  ASSERT_GT(run, 0);
  auto db = Reader();
  auto a = AnalyzeRun(*db, run);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->info.unit, "us");
  EXPECT_EQ(a->info.direction, report::Direction::kLowerIsBetter);
  EXPECT_EQ(a->depth_axis, "depth");
  // Three depths x (mtp, off-copy) against off.
  ASSERT_EQ(a->comparisons.size(), 6u);
  for (const std::string depth : {"1024", "4096", "16384"}) {
    const Comparison* cmp = Find(*a, "depth=" + depth + ",spec=mtp");
    ASSERT_NE(cmp, nullptr) << depth;
    EXPECT_EQ(cmp->baseline_key, "depth=" + depth + ",spec=off");
    EXPECT_EQ(cmp->sessions, 4);
    ASSERT_TRUE(cmp->t.interval) << cmp->t.error;
    ASSERT_TRUE(cmp->bootstrap.interval) << cmp->bootstrap.error;
    ASSERT_TRUE(cmp->fieller.interval) << cmp->fieller.error;
    EXPECT_NEAR(cmp->Ratio(), TrueRatio(depth), 0.03 * TrueRatio(depth)) << depth;
    for (const auto* r : {&cmp->t, &cmp->bootstrap, &cmp->fieller}) {
      EXPECT_TRUE(r->interval->Contains(r->interval->estimate));
      EXPECT_EQ(r->interval->scope, stats::IntervalScope::kBetweenSessions);
    }
    EXPECT_DOUBLE_EQ(cmp->t.interval->df, 3.0);
    ASSERT_TRUE(cmp->arm_session.has_value()) << cmp->arm_session_error;
    // The session main effect (3 %) dwarfs the interaction (0.5 % + within noise).
    EXPECT_GT(cmp->arm_session->session_main, cmp->arm_session->interaction_ms);
  }
}

TEST_F(AnalysisTest, TheAAControlIsJudgedAgainstItsSourceAndContainsOne) {
  const int64_t run = BuildLadder();
  auto db = Reader();
  auto a = AnalyzeRun(*db, run);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->info.aa_control.has_value());
  EXPECT_EQ(a->info.aa_control->as, "off-copy");
  int aa = 0;
  for (const auto& cmp : a->comparisons) {
    if (!cmp.aa) continue;
    ++aa;
    EXPECT_EQ(cmp.treatment_value, "off-copy");
    EXPECT_EQ(cmp.baseline_value, "off");
    ASSERT_TRUE(cmp.t.interval);
    EXPECT_TRUE(cmp.t.interval->Contains(1.0)) << cmp.treatment_key << " " << cmp.Ratio();
  }
  EXPECT_EQ(aa, 3);
  const std::string md = report::RenderMarkdown(report::Report{{*a}, {}, {}, {}, {}});
  EXPECT_NE(md.find("### A/A control"), std::string::npos);
  EXPECT_NE(md.find("contains 1, as it should"), std::string::npos);
}

TEST_F(AnalysisTest, TheLadderBracketsAndFitsTheCrossover) {
  const int64_t run = BuildLadder();
  auto db = Reader();
  auto a = AnalyzeRun(*db, run);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->lines.size(), 2u);
  const report::LadderLine* mtp = nullptr;
  for (const auto& line : a->lines) {
    if (line.treatment_value == "mtp") mtp = &line;
  }
  ASSERT_NE(mtp, nullptr);
  EXPECT_EQ(mtp->depths, (std::vector<double>{1024, 4096, 16384}));
  ASSERT_TRUE(mtp->crossing.has_value());
  EXPECT_DOUBLE_EQ(mtp->crossing->bracket_lower, 1024);
  EXPECT_DOUBLE_EQ(mtp->crossing->bracket_upper, 4096);
  ASSERT_TRUE(mtp->crossover_fit.has_value()) << mtp->crossover_error;
  // Latency difference is linear in depth here: (r(d) − 1)·d/10 crosses 0 in (1024, 4096).
  EXPECT_GT(mtp->crossover_fit->estimate, 0);
}

TEST_F(AnalysisTest, VarianceByLevelSharesSumToOneAndCellIntervalsUseSessions) {
  const int64_t run = BuildLadder();
  auto db = Reader();
  auto a = AnalyzeRun(*db, run);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->variance.size(), a->cells.size());
  for (const auto& v : a->variance) {
    ASSERT_TRUE(v.components.has_value()) << v.key << ": " << v.error;
    double sum = 0;
    for (double s : v.components->share) sum += std::isnan(s) ? 0 : s;
    EXPECT_NEAR(sum, 1.0, 1e-9) << v.key;
    EXPECT_EQ(v.components->replicates[stats::kSession], 4u);
  }
  for (const auto& c : a->cells) {
    EXPECT_EQ(c.n, 24) << c.key;
    EXPECT_EQ(c.sessions, 4) << c.key;
    ASSERT_TRUE(c.interval.has_value()) << c.interval_error;
    EXPECT_DOUBLE_EQ(c.interval->df, 3.0);
    EXPECT_TRUE(c.interval->Contains(c.summary->mean));
  }
  EXPECT_EQ(a->levels.cells, static_cast<int64_t>(a->cells.size()));
  // The session level dominates by construction.
  EXPECT_GT(a->levels.median_share[stats::kSession], 0.5);
  ASSERT_TRUE(a->levels.sessions_for_2pct.has_value());
  EXPECT_GE(a->levels.sessions_for_2pct->sessions, a->levels.sessions_for_5pct->sessions);
}

TEST_F(AnalysisTest, LevelCostsAreMeasuredFromTimeStampsAndPlanTheRepeats) {
  SyntheticOptions options;
  options.value = [](const CellAxes& a, int s, int p, int r) { return LadderValue(a, s, p, r, 0); };
  options.timing = SyntheticOptions::Timing{45000, 3000, 800};
  const int64_t run = BuildSyntheticRun(*store_, kLadderYaml, options);
  auto db = Reader();
  auto costs = MeasureLevelCosts(*db, run);
  ASSERT_TRUE(costs.ok()) << costs.status();
  EXPECT_NEAR(costs->round, 0.8, 1e-9);
  EXPECT_NEAR(costs->process, 3.0, 1e-9);
  EXPECT_NEAR(costs->session, 45.0, 0.05);  // registrations a few ms apart in the fixture

  auto measured = AnalyzeRun(*db, run);
  ASSERT_TRUE(measured.ok()) << measured.status();
  ASSERT_TRUE(measured->levels.costs.has_value());
  EXPECT_EQ(measured->levels.costs_source, "measured");
  EXPECT_TRUE(measured->levels.optimal.has_value());

  AnalysisOptions given;
  given.costs = stats::LevelCosts{1.0, 0.0, 600.0};
  auto with_given = AnalyzeRun(*db, run, given);
  ASSERT_TRUE(with_given.ok()) << with_given.status();
  EXPECT_EQ(with_given->levels.costs_source, "given");
  EXPECT_DOUBLE_EQ(with_given->levels.costs->session, 600.0);
}

// The kernel runner's "process" is a fresh draw of inputs in the agent (1.5 µs here): no plan
// trades it against rounds (it would ask for the cap of processes); the reason names the cost.
TEST_F(AnalysisTest, NoRepeatPlanForTheKernelRunnerWhichStartsNoProcess) {
  SyntheticOptions options;
  options.value = [](const CellAxes& a, int s, int p, int r) { return LadderValue(a, s, p, r, 0); };
  options.timing = SyntheticOptions::Timing{45000, 3000, 800};
  options.evidence = [](const CellAxes&) {
    return std::vector<std::pair<std::string, std::string>>{
        {"kernel_process", R"({"start_us": 1.5, "measure_us": [240, 250, 260]})"}};
  };
  const int64_t run = BuildSyntheticRun(*store_, kLadderYaml, options);
  auto db = Reader();
  auto costs = MeasureLevelCosts(*db, run);
  ASSERT_FALSE(costs.ok());
  EXPECT_NE(costs.status().message().find("the kernel runner starts no process"), std::string::npos)
      << costs.status();
  EXPECT_NE(costs.status().message().find("1.5 µs"), std::string::npos) << costs.status();
  auto a = AnalyzeRun(*db, run);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->levels.optimal.has_value());
  EXPECT_NE(a->levels.costs_note.find("starts no process"), std::string::npos)
      << a->levels.costs_note;
}

// What an engine reported of itself reaches the comparison: a default the cell did not set that
// differs between the arms (a build A/B whose builds also differ in p_min) is named; what both
// arms reported alike (n_ctx, the version) is not.
TEST_F(AnalysisTest, ComparisonsNameWhatTheEnginesReportedDifferently) {
  SyntheticOptions options;
  options.value = [](const CellAxes& a, int s, int p, int r) { return LadderValue(a, s, p, r, 0); };
  options.evidence = [](const CellAxes& axes) {
    const std::string p_min = axes.at("spec") == "mtp" ? "0.9" : "0.75";
    return std::vector<std::pair<std::string, std::string>>{
        {"probe_counts", "{}"},
        {"engine_version", R"("b10587")"},
        {"engine_config",
         R"({"path": "/props", "reported": {"n_ctx": 8192, "p_min": )" + p_min + "}}"}};
  };
  const int64_t run = BuildSyntheticRun(*store_, kLadderYaml, options);
  auto db = Reader();
  auto a = AnalyzeRun(*db, run);
  ASSERT_TRUE(a.ok()) << a.status();
  const Comparison* mtp = Find(*a, "depth=1024,spec=mtp");
  ASSERT_NE(mtp, nullptr);
  EXPECT_EQ(mtp->said_differs,
            std::vector<std::string>{"engine_config.reported.p_min: 0.75 -> 0.9"});
  const Comparison* aa = Find(*a, "depth=1024,spec=off-copy");
  ASSERT_NE(aa, nullptr);
  EXPECT_TRUE(aa->said_differs.empty()) << absl::StrJoin(aa->said_differs, " | ");
  const report::CellStats* off = a->FindCell("depth=1024,spec=off");
  ASSERT_NE(off, nullptr);
  ASSERT_TRUE(off->said.has_value());
  EXPECT_EQ(off->said->program.at("engine_version"), "b10587");
  EXPECT_EQ(off->said->program.at("engine_config.reported.n_ctx"), "8192");
}

// A speculation arm that never drafted is not a speculation arm: the comparison keeps its ratio
// and the flag, and no verdict is drawn; the other depths keep theirs.
TEST_F(AnalysisTest, NoVerdictForAPairWhoseArmIsNotWhatItClaims) {
  SyntheticOptions options;
  options.value = [](const CellAxes& a, int s, int p, int r) { return LadderValue(a, s, p, r, 0); };
  options.evidence = [](const CellAxes& axes) {
    std::vector<std::pair<std::string, std::string>> out;
    if (axes.at("spec") == "mtp" && axes.at("depth") == "1024") {
      out.push_back(
          {"speculation_not_engaged", R"("round 0: spec_k=1 but the engine drafted no tokens")"});
    }
    return out;
  };
  const int64_t run = BuildSyntheticRun(*store_, kLadderYaml, options);
  auto db = Reader();
  auto a = AnalyzeRun(*db, run);
  ASSERT_TRUE(a.ok()) << a.status();
  const Comparison* flagged = Find(*a, "depth=1024,spec=mtp");
  ASSERT_NE(flagged, nullptr);
  EXPECT_EQ(flagged->verdict, "withheld (speculation_not_engaged)");
  ASSERT_TRUE(flagged->t.interval.has_value());  // the ratio stays on screen
  const Comparison* clean = Find(*a, "depth=16384,spec=mtp");
  ASSERT_NE(clean, nullptr);
  EXPECT_EQ(clean->verdict.find("withheld"), std::string::npos) << clean->verdict;
  EXPECT_FALSE(clean->verdict.empty());
}

TEST_F(AnalysisTest, LevelCostsNeedTwoRoundsOfOneProcess) {
  auto db = Reader();
  const int64_t run = BuildLadder();  // every measurement stamped at one instant
  EXPECT_FALSE(MeasureLevelCosts(*db, run).ok());
}

TEST_F(AnalysisTest, FlagsThrottledClocksAndEvidenceNextToTheAffectedCells) {
  const int64_t run = BuildLadder();
  auto db = Reader();
  auto a = AnalyzeRun(*db, run);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->clock_recorded);
  // The run's lowest clock against its reference, in the notes: session 0's 900 of 1980 MHz.
  bool noted = false;
  for (const auto& n : a->notes) {
    noted |= n.find("lowest 900 MHz, 45 % of its reference (1980 MHz)") != std::string::npos &&
             n.find("(cells flagged throttled)") != std::string::npos;
  }
  EXPECT_TRUE(noted) << absl::StrJoin(a->notes, " | ");
  auto has = [](const std::vector<report::Flag>& flags, const std::string& kind) {
    for (const auto& f : flags) {
      if (f.kind == kind) return true;
    }
    return false;
  };
  for (const auto& c : a->cells) {
    EXPECT_EQ(has(c.flags, "throttled"), c.key.find("depth=16384") == 0) << c.key;
    EXPECT_EQ(has(c.flags, "backend_mismatch"), c.key == "depth=4096,spec=mtp") << c.key;
    EXPECT_EQ(has(c.flags, "speculation_not_engaged"), c.key == "depth=1024,spec=mtp") << c.key;
  }
  // The paired comparison of an arm that never drafted carries the flag too.
  const Comparison* undrafted = Find(*a, "depth=1024,spec=mtp");
  ASSERT_NE(undrafted, nullptr);
  EXPECT_TRUE(has(undrafted->flags, "speculation_not_engaged"));
  const Comparison* cmp = Find(*a, "depth=4096,spec=mtp");
  ASSERT_NE(cmp, nullptr);
  EXPECT_TRUE(has(cmp->flags, "backend_mismatch"));
  const std::string html = report::RenderHtml(report::Report{{*a}, {}, {}, {}, {}});
  // LADDER_SAMPLE_REPORT=FILE keeps this report (a crossover, an A/A line, flags) for a look.
  if (const char* sample = std::getenv("LADDER_SAMPLE_REPORT"); sample && *sample) {
    WriteFile(sample, html);
  }
  EXPECT_NE(html.find("class=\"point flagged\" tabindex=\"0\" data-cell=\"depth=4096,spec=mtp\""),
            std::string::npos);
}

TEST_F(AnalysisTest, MissingClocksAreUnknownNotNominal) {
  SyntheticOptions options;
  options.value = [](const CellAxes& a, int s, int p, int r) { return LadderValue(a, s, p, r); };
  const int64_t run = BuildSyntheticRun(*store_, kLadderYaml, options);
  auto db = Reader();
  auto a = AnalyzeRun(*db, run);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->clock_recorded);
  bool noted = false;
  for (const auto& n : a->notes) noted |= n.find("throttling is unknown") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST_F(AnalysisTest, OneSessionSaysTheIntervalCoversOnlyWithinSessionNoise) {
  const std::string yaml = R"(name: one-session
runner: kernel
axes:
  depth: [1024, 4096]
  path: [2d, 3d]
pair: [path]
replicates: {sessions: 1, processes: 2, rounds: 4}
metric: time_us
)";
  SyntheticOptions options;
  options.value = [](const CellAxes& a, int s, int p, int r) {
    CellAxes b = {{"depth", a.at("depth")}, {"spec", a.at("path") == "3d" ? "mtp" : "off"}};
    return LadderValue(b, s, p, r);
  };
  const int64_t run = BuildSyntheticRun(*store_, yaml, options);
  auto db = Reader();
  auto a = AnalyzeRun(*db, run);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->comparisons.size(), 2u);
  for (const auto& cmp : a->comparisons) {
    ASSERT_TRUE(cmp.t.interval) << cmp.t.error;
    EXPECT_EQ(cmp.t.interval->scope, stats::IntervalScope::kWithinSessionOnly);
    EXPECT_FALSE(cmp.arm_session.has_value());
  }
  const std::string md = report::RenderMarkdown(report::Report{{*a}, {}, {}, {}, {}});
  EXPECT_NE(md.find("interval covers only within-session noise"), std::string::npos);
}

TEST_F(AnalysisTest, FailedCellsAreFlagged) {
  const std::string yaml = R"(name: with-failure
runner: kernel
axes:
  backend: [x, y]
  path: [2d, 3d]
pair: [path]
replicates: {sessions: 2, processes: 1, rounds: 3}
metric: time_us
)";
  SyntheticOptions options;
  options.value = [](const CellAxes&, int s, int p, int r) {
    return 100.0 * Noise(static_cast<uint64_t>(s * 100 + p * 10 + r), 0.01);
  };
  options.fail_group = "backend=y";
  const int64_t run = BuildSyntheticRun(*store_, yaml, options);
  auto db = Reader();
  auto a = AnalyzeRun(*db, run);
  ASSERT_TRUE(a.ok()) << a.status();
  for (const auto& c : a->cells) {
    const bool failed = !c.flags.empty() && c.flags.front().kind == "failed";
    EXPECT_EQ(failed, c.key.find("backend=y") == 0) << c.key;
    if (failed) {
      EXPECT_NE(c.flags.front().detail.find("out of memory"), std::string::npos);
    }
  }
  const std::string md = report::RenderMarkdown(report::Report{{*a}, {}, {}, {}, {}});
  EXPECT_NE(md.find("⚠ failed: synthetic failure: out of memory"), std::string::npos) << md;
}

TEST_F(AnalysisTest, ReproducibilityOfTwoRunsOfTheSameMatrix) {
  const int64_t run1 = BuildLadder(0);
  const int64_t run2 = BuildLadder(1);
  auto db = Reader();
  auto report = report::BuildReport(*db, {run1, run2});
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->reproducibility.size(), 1u);
  const auto& repro = report->reproducibility.front();
  EXPECT_TRUE(repro.same_matrix);
  EXPECT_EQ(repro.rows.size(), 9u);
  for (const auto& row : repro.rows) {
    EXPECT_NEAR(row.percent, 100 * std::fabs(row.a - row.b) / ((row.a + row.b) / 2), 1e-9);
  }
  ASSERT_TRUE(repro.summary.has_value());
  EXPECT_GT(repro.summary->max, 0.0);
  const std::string md = report::RenderMarkdown(*report);
  EXPECT_NE(md.find(absl::StrCat("# Reproducibility: run ", run1, " vs run ", run2)),
            std::string::npos);
}

TEST_F(AnalysisTest, UnknownRunAndMetricAreClearErrors) {
  const int64_t run = BuildLadder();
  auto db = Reader();
  auto missing = AnalyzeRun(*db, run + 10);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  report::AnalysisOptions options;
  options.metric = "decode_tok_s";
  auto bad = AnalyzeRun(*db, run, options);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("time_us"), std::string::npos) << bad.status();
}

TEST_F(AnalysisTest, VerifyRecomputesMarkedFiguresAndListsDrift) {
  const int64_t run = BuildLadder();
  auto db = Reader();
  auto a = AnalyzeRun(*db, run);
  ASSERT_TRUE(a.ok());
  const Comparison* cmp = Find(*a, "depth=1024,spec=mtp");
  ASSERT_NE(cmp, nullptr);
  char change[32];
  std::snprintf(change, sizeof change, "%.1f", std::fabs(100 * (cmp->Ratio() - 1)));
  const std::string r = std::to_string(run);
  const std::string good = "# Notes\n\nAt 1K speculation is <!-- ladder: run=" + r +
                           " cell=\"depth=1024\" stat=change arm=mtp -->\xE2\x88\x92" + change +
                           " % faster.\n" + "Ratio <!-- ladder: run=" + r +
                           " cell=\"depth=1024\" arm=mtp stat=ratio tol=1% -->" +
                           std::to_string(cmp->Ratio()) + ".\n";
  auto ok = report::VerifyDocument(*db, good, "good.md");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->size(), 2u);
  for (const auto& c : *ok) EXPECT_TRUE(c.ok) << report::DescribeCheck(c);

  const std::string doctored = good + "\nAnd <!-- ladder: run=" + r +
                               " cell=\"depth=16384\" stat=change arm=mtp -->+20.0 % slower.\n" +
                               "<!-- ladder: run=" + r + " cell=\"depth=1024\" stat=ratio -->0.7\n";
  auto bad = report::VerifyDocument(*db, doctored, "doc.md");
  ASSERT_TRUE(bad.ok()) << bad.status();
  ASSERT_EQ(bad->size(), 4u);
  EXPECT_TRUE((*bad)[0].ok);
  EXPECT_FALSE((*bad)[2].ok);
  EXPECT_EQ((*bad)[2].line, 6);
  EXPECT_NEAR((*bad)[2].recomputed, 100 * (Find(*a, "depth=16384,spec=mtp")->Ratio() - 1), 1e-9);
  EXPECT_NE(report::DescribeCheck((*bad)[2]).find("doc.md:6: DRIFTED"), std::string::npos)
      << report::DescribeCheck((*bad)[2]);
  // No arm: mtp and off-copy both match, and verify says so rather than guess.
  EXPECT_FALSE((*bad)[3].ok);
  EXPECT_NE((*bad)[3].error.find("matches 2 comparisons"), std::string::npos) << (*bad)[3].error;
}

TEST(Direction, FromTheUnit) {
  EXPECT_EQ(report::DirectionOfUnit("us"), report::Direction::kLowerIsBetter);
  EXPECT_EQ(report::DirectionOfUnit("tok/s"), report::Direction::kHigherIsBetter);
  EXPECT_EQ(report::DirectionOfUnit("1"), report::Direction::kUnknown);
}

}  // namespace
}  // namespace ladder::testing
