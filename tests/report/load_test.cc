// The report's load view: a run of engine cells under closed-loop concurrency whose load metrics
// are known (synthetic_run.h, values shaped like the synthetic engine's), read back as the load
// table, the throughput–latency curves, the paired ratio against concurrency, and — for a run
// whose `locate` searched along concurrency — the located crossover. A real `ladder local` run of
// the load example is rendered in a browser by browser_test.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ladder/db/store.h"
#include "ladder/report/analysis.h"
#include "ladder/report/report.h"
#include "process.h"
#include "synthetic_run.h"

namespace ladder::testing {
namespace {

constexpr const char* kLoadYaml = R"(name: load
runner: engine
axes:
  concurrency: [1, 4, 16]
  spec: ["off", "mtp:1"]
fixed: {engine: synthetic, preset: tiny, depth: 512, output_tokens: 32, slo_ttft_ms: 100}
pair: [spec]
together: [concurrency]
replicates: {sessions: 3, processes: 1, rounds: 2}
metric: load_output_tok_s
)";

// What each arm delivers at each concurrency, before session noise: plain decoding saturates
// (40, 140, 360 tok/s); speculation gains 35 % alone, 15 % at 4, and loses 20 % at 16.
double BaseTokPerS(const CellAxes& axes) {
  const int c = std::stoi(axes.at("concurrency"));
  const double off = c == 1 ? 40.0 : c == 4 ? 140.0 : 360.0;
  const double gain = c == 1 ? 1.35 : c == 4 ? 1.15 : 0.8;
  return axes.at("spec") == "off" ? off : off * gain;
}

// Session effects that average to exactly 1 over the three sessions, different per arm, so that
// the per-session ratios differ and the interval has width.
double SessionFactor(const CellAxes& axes, int session) {
  static const double kOff[] = {0.99, 1.0, 1.01}, kSpec[] = {1.0, 0.98, 1.02};
  return axes.at("spec") == "off" ? kOff[session] : kSpec[session];
}

double TokPerS(const CellAxes& axes, int session, int, int) {
  return BaseTokPerS(axes) * SessionFactor(axes, session);
}

// The latencies follow from the throughput: 32 tokens per request at tok/s ÷ concurrency each.
double E2eP99Ms(const CellAxes& axes) {
  const double c = std::stod(axes.at("concurrency"));
  return 1.25 * 32.0 * 1000.0 * c / BaseTokPerS(axes);
}

std::vector<SyntheticMetric> LoadMetrics(const CellAxes& axes, int session, int process,
                                         int round) {
  const double c = std::stod(axes.at("concurrency"));
  const double tok = TokPerS(axes, session, process, round);
  const double itl = 1000.0 * c / BaseTokPerS(axes);
  const double ttft = 20.0 + 5.0 * c;
  return {{"load_req_s", "req/s", tok / 32.0},
          {"load_goodput_req_s", "req/s", (c <= 4 ? 1.0 : 0.5) * tok / 32.0},
          {"load_ttft_ms_p50", "ms", ttft},
          {"load_ttft_ms_p90", "ms", 1.6 * ttft},
          {"load_ttft_ms_p99", "ms", 2.0 * ttft},
          {"load_itl_ms_p50", "ms", itl},
          {"load_itl_ms_p99", "ms", 1.5 * itl},
          {"load_e2e_ms_p50", "ms", 32.0 * itl},
          {"load_e2e_ms_p99", "ms", E2eP99Ms(axes)},
          {"load_requests", "1", 24},
          {"load_failed_requests", "1", 0},
          // At 16 in flight the requests are long against the window: half of it drains.
          {"load_drain_share", "1", c >= 16 ? 0.5 : 0.05},
          {"ttft_ms", "ms", ttft}};
}

size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class LoadRun : public ::testing::Test {
 protected:
  void Build(const std::string& yaml) {
    auto store = db::Store::Open(dir_.File("results.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    SyntheticOptions options;
    options.value = TokPerS;
    options.unit = "tok/s";
    options.extra = LoadMetrics;
    run_ = BuildSyntheticRun(**store, yaml, options);
    ASSERT_GT(run_, 0);
    store_ = std::move(*store);
    auto db = db::Database::Open(dir_.File("results.db"), db::OpenMode::kReadOnly);
    ASSERT_TRUE(db.ok());
    db_ = std::move(*db);
  }
  void SetUp() override { Build(kLoadYaml); }

  TempDir dir_;
  int64_t run_ = 0;
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<db::Database> db_;
};

TEST_F(LoadRun, AnalysisGroupsCellsIntoCurvesPerArm) {
  auto a = report::AnalyzeRun(*db_, run_);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->load.has_value());
  const report::LoadAnalysis& load = *a->load;
  EXPECT_EQ(load.axis, "concurrency");
  ASSERT_EQ(load.cells.size(), 6u);
  ASSERT_EQ(load.curves.size(), 2u);
  EXPECT_EQ(load.curves[0].arm, "spec=off");
  EXPECT_EQ(load.curves[1].arm, "spec=mtp:1");
  for (const auto& curve : load.curves) {
    ASSERT_EQ(curve.cells.size(), 3u);
    std::vector<double> loads;
    for (size_t i : curve.cells) loads.push_back(load.cells[i].load);
    EXPECT_EQ(loads, (std::vector<double>{1, 4, 16})) << curve.arm;
    for (size_t i : curve.cells) {
      const report::LoadCell& c = load.cells[i];
      const CellAxes axes = ParseKey(c.key);
      EXPECT_EQ(c.sessions, 3);
      EXPECT_EQ(c.rounds, 6);
      // Session factors average to 1: the mean of session means is the base value.
      EXPECT_NEAR(c.output_tok_s, BaseTokPerS(axes), 1e-9) << c.key;
      EXPECT_NEAR(c.req_s, BaseTokPerS(axes) / 32.0, 1e-9) << c.key;
      EXPECT_NEAR(c.e2e_ms_p99, E2eP99Ms(axes), 1e-9) << c.key;
      EXPECT_NEAR(c.ttft_ms_p99, 2.0 * (20.0 + 5.0 * c.load), 1e-9) << c.key;
      EXPECT_NEAR(c.goodput_req_s, (c.load <= 4 ? 1.0 : 0.5) * c.req_s, 1e-9) << c.key;
      EXPECT_EQ(c.requests, 24);
      EXPECT_EQ(c.failed_requests, 0);
    }
  }
}

TEST_F(LoadRun, RatioAgainstConcurrencyCrossesOneBetweenFourAndSixteen) {
  auto a = report::AnalyzeRun(*db_, run_);
  ASSERT_TRUE(a.ok()) << a.status();
  const report::LoadAnalysis& load = *a->load;
  ASSERT_EQ(load.ratio_lines.size(), 1u);
  const report::LoadRatioLine& line = load.ratio_lines[0];
  EXPECT_EQ(line.label, "spec mtp:1 vs off");
  EXPECT_EQ(line.loads, (std::vector<double>{1, 4, 16}));
  const double expected[] = {1.35, 1.15, 0.8};
  for (size_t k = 0; k < 3; ++k) {
    const report::Comparison& cmp = a->comparisons[line.points[k]];
    ASSERT_TRUE(cmp.t.interval.has_value()) << cmp.t.error;
    // The geometric mean of the per-session ratios (1.0101, 0.98, 1.0099) × the gain.
    EXPECT_NEAR(cmp.Ratio(), expected[k], 0.01 * expected[k]);
    EXPECT_EQ(cmp.t.interval->df, 2);
    EXPECT_LT(cmp.t.interval->lower, cmp.Ratio());
    EXPECT_GT(cmp.t.interval->upper, cmp.Ratio());
  }
  ASSERT_TRUE(line.crossing.has_value());
  EXPECT_EQ(line.crossing->bracket_lower, 4);
  EXPECT_EQ(line.crossing->bracket_upper, 16);
  // With no depth axis the ladder runs along concurrency too: the same line.
  EXPECT_EQ(a->depth_axis, "concurrency");
  ASSERT_TRUE(line.ladder_line.has_value());
  EXPECT_EQ(a->lines[*line.ladder_line].label, line.label);
}

TEST_F(LoadRun, JsonCarriesTheChartsSeries) {
  auto a = report::AnalyzeRun(*db_, run_);
  ASSERT_TRUE(a.ok()) << a.status();
  const auto json = report::ToJson(*a);
  ASSERT_TRUE(json.contains("load")) << json.dump(2);
  const auto& load = json["load"];
  EXPECT_EQ(load["axis"], "concurrency");
  EXPECT_EQ(load["latency_metric"], "load_e2e_ms_p99");
  ASSERT_EQ(load["cells"].size(), 6u);
  ASSERT_EQ(load["curves"].size(), 2u);
  const auto& off = load["curves"][0];
  EXPECT_EQ(off["arm"], "spec=off");
  ASSERT_EQ(off["points"].size(), 3u);
  EXPECT_EQ(off["points"][1]["cell"], "concurrency=4,spec=off");
  EXPECT_EQ(off["points"][1]["load"], 4);
  EXPECT_NEAR(off["points"][1]["output_tok_s"].get<double>(), 140, 1e-9);
  EXPECT_NEAR(off["points"][1]["latency_ms"].get<double>(), 1.25 * 32000 * 4 / 140, 1e-9);
  const auto& ratio = load["ratio_lines"][0];
  EXPECT_EQ(ratio["label"], "spec mtp:1 vs off");
  ASSERT_EQ(ratio["points"].size(), 3u);
  EXPECT_EQ(ratio["points"][2]["cell"], "concurrency=16,spec=mtp:1");
  EXPECT_EQ(ratio["points"][2]["t"]["df"], 2);
  EXPECT_NEAR(ratio["points"][2]["ratio"].get<double>(), 0.8, 0.01);
  EXPECT_EQ(ratio["crossing"]["bracket"], (nlohmann::json{4.0, 16.0}));
  // The load view belongs to the run, whichever metric the ratios are of.
  report::AnalysisOptions ttft;
  ttft.metric = "ttft_ms";
  auto by_ttft = report::AnalyzeRun(*db_, run_, ttft);
  ASSERT_TRUE(by_ttft.ok()) << by_ttft.status();
  EXPECT_TRUE(report::ToJson(*by_ttft).contains("load"));
}

TEST_F(LoadRun, MarkdownHasTheLoadTableAndRatios) {
  auto report = report::BuildReport(*db_, {run_});
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string md = report::RenderMarkdown(*report);
  EXPECT_NE(md.find("## Load: throughput and latency"), std::string::npos) << md;
  EXPECT_NE(md.find("| arm | concurrency | sessions | rounds | output tok/s | req/s | TTFT p50 ms "
                    "| TTFT p99 ms | ITL p50 ms | ITL p99 ms | e2e p50 ms | e2e p99 ms | goodput "
                    "req/s | drain % |"),
            std::string::npos)
      << md;
  // 140 tok/s, 4.375 req/s; TTFT 40 / 80 ms; ITL 28.57 / 42.86 ms; e2e 914.3 / 1143 ms;
  // goodput 4.375 req/s (4 significant digits).
  EXPECT_NE(md.find("| spec=off | 4 | 3 | 6 | 140.0 | 4.375 | 40.00 | 80.00 | 28.57 | 42.86 | "
                    "914.3 | 1143 | 4.375 | 5.000 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| spec=mtp:1 | 16 | 3 | 6 | 288.0 | 9.000 | 100.0 | 200.0 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("## Load: paired ratio against concurrency"), std::string::npos) << md;
  EXPECT_NE(md.find("spec mtp:1 vs off: the ratio crosses 1 between concurrency 4 and 16"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| spec mtp:1 vs off | 16 | 3 |"), std::string::npos) << md;
  EXPECT_NE(md.find("(df 2) |"), std::string::npos) << md;
}

TEST_F(LoadRun, CellsThatDrainForMuchOfTheirWindowAreFlaggedEverywhere) {
  auto a = report::AnalyzeRun(*db_, run_);
  ASSERT_TRUE(a.ok()) << a.status();
  for (const report::LoadCell& c : a->load->cells) {
    const bool long_requests = ParseKey(c.key).at("concurrency") == "16";
    EXPECT_DOUBLE_EQ(c.drain_share, long_requests ? 0.5 : 0.05) << c.key;
    EXPECT_EQ(c.DrainsTooLong(), long_requests) << c.key;
  }
  const auto json = report::ToJson(*a);
  int flagged = 0;
  for (const auto& c : json["load"]["cells"]) flagged += c["drains_too_long"].get<bool>() ? 1 : 0;
  EXPECT_EQ(flagged, 2);
  auto report = report::BuildReport(*db_, {run_});
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string md = report::RenderMarkdown(*report);
  EXPECT_NE(md.find("⚠ 2 cells spent more than 20 % of the measuring window below their load "
                    "(concurrency=16,spec=off; concurrency=16,spec=mtp:1)"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 50.00 ⚠ |"), std::string::npos) << md;
  // The chart draws those two points hollow, and their tooltips say why.
  const std::string html = report::RenderHtml(*report);
  EXPECT_EQ(Occurrences(html, "r=\"5\" fill=\"none\""), 2u);
  EXPECT_EQ(Occurrences(html, "throughput reads low"), 2u);
}

TEST_F(LoadRun, HtmlDrawsBothChartsWithTheirSeries) {
  auto report = report::BuildReport(*db_, {run_});
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string html = report::RenderHtml(*report);
  EXPECT_EQ(Occurrences(html, "<svg class=\"load-curve\""), 1u);
  EXPECT_EQ(Occurrences(html, "<svg class=\"load-ratio\""), 1u);
  // One throughput–latency point per cell, one ratio point per comparison, and the ladder's
  // points (class "point") still one per comparison.
  EXPECT_EQ(Occurrences(html, "<circle class=\"load-point\" "), 6u);
  EXPECT_EQ(Occurrences(html, "<circle class=\"load-point ratio\" "), 3u);
  EXPECT_EQ(Occurrences(html, "<circle class=\"point\" "), 3u);
  EXPECT_NE(html.find("data-cell=\"concurrency=4,spec=off\" data-arm=\"spec=off\" "
                      "data-curve=\"0\" data-load=\"4\" data-tok-s=\"140.0\" "
                      "data-latency-ms=\"1143\""),
            std::string::npos);
  EXPECT_NE(html.find("data-cell=\"concurrency=16,spec=mtp:1\" data-line=\"0\" data-load=\"16\""),
            std::string::npos);
  EXPECT_EQ(Occurrences(html, "data-df=\"2\""), 3u);
  EXPECT_EQ(Occurrences(html, ">df 2</text>"), 3u);
  EXPECT_NE(html.find("p99 end-to-end latency, ms (log scale)"), std::string::npos);
  EXPECT_NE(html.find("ratio B/A of load_output_tok_s (log scale)"), std::string::npos);
  // The sign change between 4 and 16 is shaded on the ratio chart (and on the ladder).
  const size_t ratio_chart = html.find("<svg class=\"load-ratio\"");
  const size_t bracket = html.find("<rect class=\"bracket\" data-line=\"0\"", ratio_chart);
  ASSERT_NE(bracket, std::string::npos);
  EXPECT_LT(bracket, html.find("</svg>", ratio_chart));
  // The tooltip script covers the load points too.
  EXPECT_NE(html.find("querySelectorAll('circle.point, circle.load-point')"), std::string::npos);
}

// One session of one round (the H200 load example's design): the ratios have no interval, so the
// report must not say the ratio never crosses 1 — here it does, between 4 and 16.
TEST_F(LoadRun, OneSessionOfOneRoundDoesNotClaimNoSignChange) {
  std::string yaml = kLoadYaml;
  const std::string three = "replicates: {sessions: 3, processes: 1, rounds: 2}";
  yaml.replace(yaml.find(three), three.size(),
               "replicates: {sessions: 1, processes: 1, rounds: 1}");
  TempDir dir;
  auto store = db::Store::Open(dir.File("results.db"));
  ASSERT_TRUE(store.ok());
  SyntheticOptions options;
  options.value = TokPerS;
  options.unit = "tok/s";
  options.extra = LoadMetrics;
  const int64_t run = BuildSyntheticRun(**store, yaml, options);
  auto db = db::Database::Open(dir.File("results.db"), db::OpenMode::kReadOnly);
  ASSERT_TRUE(db.ok());
  auto report = report::BuildReport(**db, {run});
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->runs[0].load.has_value());
  const auto& lines = report->runs[0].load->ratio_lines;
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].too_few_ratios);
  EXPECT_FALSE(lines[0].crossing.has_value());
  EXPECT_FALSE(report::ToJson(report->runs[0])["load"]["ratio_lines"][0]["crossing_judged"]);
  const std::string md = report::RenderMarkdown(*report);
  EXPECT_EQ(md.find("no sign change"), std::string::npos);
  EXPECT_NE(md.find("whether the ratio crosses 1 cannot be judged: 0 of 3 concurrency levels"),
            std::string::npos);
}

TEST_F(LoadRun, AKernelRunHasNoLoadView) {
  TempDir dir;
  auto store = db::Store::Open(dir.File("results.db"));
  ASSERT_TRUE(store.ok());
  SyntheticOptions options;
  options.value = [](const CellAxes&, int s, int, int r) { return 100.0 + s + 0.1 * r; };
  const int64_t run = BuildSyntheticRun(**store, R"(name: kernel
runner: kernel
axes:
  depth: [256, 1024]
  path: [2d, 3d]
pair: [path]
replicates: {sessions: 3, processes: 1, rounds: 2}
metric: time_us
)",
                                        options);
  auto db = db::Database::Open(dir.File("results.db"), db::OpenMode::kReadOnly);
  ASSERT_TRUE(db.ok());
  auto report = report::BuildReport(**db, {run});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->runs[0].load.has_value());
  EXPECT_FALSE(report::ToJson(report->runs[0]).contains("load"));
  EXPECT_EQ(report::RenderMarkdown(*report).find("Load:"), std::string::npos);
  const std::string html = report::RenderHtml(*report);
  EXPECT_EQ(html.find("<svg class=\"load-"), std::string::npos);
  EXPECT_EQ(html.find("<circle class=\"load-point"), std::string::npos);
}

// A run whose `locate` searched along concurrency: the rungs as the coordinator would have left
// them (planned 1/4/16/64, probes 8, 11, 9 and 10, declared here so the synthetic run measures
// them), its decisions recorded through the Store.
constexpr const char* kLocatedYaml = R"(name: load-located
runner: engine
axes:
  concurrency: [1, 4, 8, 9, 10, 11, 16, 64]
  spec: ["off", "mtp:1"]
fixed: {engine: synthetic, preset: tiny, depth: 512, output_tokens: 32}
pair: [spec]
together: [concurrency]
replicates: {sessions: 3, processes: 1, rounds: 2}
metric: load_output_tok_s
locate: {axis: concurrency, resolution: 0.25 octave}
)";

// Speculation's gain (10.5 / concurrency)^0.3 crosses 1 at 10.5 requests in flight.
double LocatedTokPerS(const CellAxes& axes, int session, int, int round) {
  const double c = std::stod(axes.at("concurrency"));
  const double off = 40.0 * c / (1.0 + 0.05 * c) * (1.0 + 0.01 * session);
  const double jitter = 1.0 + 0.002 * ((round * 7 + session) % 3 - 1);
  return axes.at("spec") == "off" ? off : off * std::pow(10.5 / c, 0.3) * jitter;
}

db::LocateDecisionRow LoadDecision(const std::string& decision, double c, double lower,
                                   double upper, const std::string& outcome = "") {
  db::LocateDecisionRow d;
  d.decision = decision;
  d.outcome = outcome;
  d.target = 0.25;
  d.depth = c;
  d.bracket_lower = lower;
  d.bracket_upper = upper;
  d.reason = decision + " at concurrency " + std::to_string(c);
  return d;
}

TEST(LoadLocated, TheLocatedCrossoverIsMarkedOnTheRatioChart) {
  TempDir dir;
  auto store = db::Store::Open(dir.File("results.db"));
  ASSERT_TRUE(store.ok());
  SyntheticOptions options;
  options.value = LocatedTokPerS;
  options.unit = "tok/s";
  options.extra = [](const CellAxes& axes, int session, int process, int round) {
    const double c = std::stod(axes.at("concurrency"));
    const double tok = LocatedTokPerS(axes, session, process, round);
    return std::vector<SyntheticMetric>{{"load_req_s", "req/s", tok / 32},
                                        {"load_e2e_ms_p99", "ms", 1250 * 32 * c / tok}};
  };
  const int64_t run = BuildSyntheticRun(**store, kLocatedYaml, options);
  ASSERT_GT(run, 0);
  for (const auto& d : {LoadDecision("probe", 8, 4, 16), LoadDecision("probe", 11, 8, 16),
                        LoadDecision("probe", 9, 8, 11), LoadDecision("probe", 10, 9, 11),
                        LoadDecision("stop", NAN, 10, 11, "resolved")}) {
    ASSERT_TRUE((*store)->RecordLocateDecision(run, d).ok());
  }
  auto db = db::Database::Open(dir.File("results.db"), db::OpenMode::kReadOnly);
  ASSERT_TRUE(db.ok());
  auto report = report::BuildReport(**db, {run});
  ASSERT_TRUE(report.ok()) << report.status();
  const report::RunAnalysis& a = report->runs[0];
  ASSERT_TRUE(a.load.has_value());
  EXPECT_EQ(a.depth_axis, "concurrency");
  ASSERT_EQ(a.load->ratio_lines.size(), 1u);
  const report::LoadRatioLine& line = a.load->ratio_lines[0];
  ASSERT_TRUE(line.ladder_line.has_value());
  const auto& located = a.lines[*line.ladder_line].located;
  ASSERT_TRUE(located.has_value());
  EXPECT_EQ(located->outcome, "resolved");
  EXPECT_EQ(located->probes, (std::vector<double>{8, 11, 9, 10}));
  ASSERT_TRUE(line.crossing.has_value());
  EXPECT_EQ(line.crossing->bracket_lower, 10);
  EXPECT_EQ(line.crossing->bracket_upper, 11);
  ASSERT_TRUE(line.crossover_fit.has_value()) << line.crossover_error;

  const std::string md = report::RenderMarkdown(*report);
  EXPECT_NE(md.find("located by the coordinator: resolved, bracket [10, 11], probes 8, 11, 9, 10"),
            std::string::npos)
      << md;
  const auto json = report::ToJson(a);
  EXPECT_EQ(json["load"]["ratio_lines"][0]["located"]["outcome"], "resolved");
  EXPECT_EQ(json["load"]["ratio_lines"][0]["located"]["bracket"], (nlohmann::json{10.0, 11.0}));
  const std::string html = report::RenderHtml(*report);
  const size_t chart = html.find("<svg class=\"load-ratio\"");
  ASSERT_NE(chart, std::string::npos);
  const size_t end = html.find("</svg>", chart);
  const size_t bracket = html.find("<rect class=\"bracket located\" data-line=\"0\"", chart);
  ASSERT_NE(bracket, std::string::npos);
  EXPECT_LT(bracket, end);
  EXPECT_NE(html.find("located by the coordinator (resolved) between 10 and 11", bracket),
            std::string::npos);
  if (line.crossover_fit->bounds == stats::Boundedness::kBounded) {
    const size_t mark = html.find("<line class=\"crossover\" data-line=\"0\"", chart);
    ASSERT_NE(mark, std::string::npos);
    EXPECT_LT(mark, end);
    EXPECT_NE(html.find("<rect class=\"crossover-interval\" data-line=\"0\"", chart),
              std::string::npos);
  }
}

}  // namespace
}  // namespace ladder::testing
