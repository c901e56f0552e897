// `ladder history` over real SQLite databases whose truth is known (synthetic_run.h): a series
// with a planted step names the run where it began and the tag that changed there; a series
// that cannot tell says so; changed matrices share only the cells with the same parameters;
// baselines resolve by name and refuse what is not theirs.
#include "ladder/report/history.h"

#include <gtest/gtest.h>

#include <regex>

#include <cmath>
#include <random>
#include <string>

#include "ladder/db/series.h"
#include "ladder/db/store.h"
#include "ladder/report/report.h"
#include "process.h"
#include "synthetic_run.h"

namespace ladder::testing {
namespace {

constexpr const char* kSeriesYaml = R"(name: nightly
runner: kernel
axes:
  depth: [1024, 4096]
fixed: {backend: cpu}
replicates: {sessions: 4, processes: 1, rounds: 3}
metric: time_us
)";

double SeriesNoise(uint64_t key, double sd) {
  std::mt19937_64 gen(key * 0x9e3779b97f4a7c15ULL + 7);
  std::normal_distribution<double> normal(0.0, sd);
  return std::exp(normal(gen));
}

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = db::Store::Open(dir_.File("h.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  std::unique_ptr<db::Database> Reader() {
    auto db = db::Database::Open(dir_.File("h.db"), db::OpenMode::kReadOnly);
    EXPECT_TRUE(db.ok()) << db.status();
    return std::move(*db);
  }
  // Run `index` of the series: depth=4096 is `factor` slower; 1 % between sessions and 0.5 %
  // between runs (the drift the intervals do not see).
  int64_t Run(int index, double factor, const std::string& build, const char* yaml = kSeriesYaml) {
    SyntheticOptions options;
    options.tags = {{"build", build}};
    options.created_at_ms = 1'767'000'000'000 + index * 86'400'000LL;
    const double drift = SeriesNoise(900'000 + index, 0.005);
    options.value = [=](const CellAxes& a, int s, int, int r) {
      const uint64_t depth = std::stoull(a.at("depth"));
      const uint64_t k = static_cast<uint64_t>(index) * 1'000'000 + depth * 10;
      return static_cast<double>(depth) * (depth == 4096 ? factor : 1.0) * drift *
             SeriesNoise(k + s, 0.01) * SeriesNoise(k + 100 + s * 10 + r, 0.005);
    };
    return BuildSyntheticRun(*store_, yaml, options);
  }
  TempDir dir_;
  std::unique_ptr<db::Store> store_;
};

const report::HistorySeries* Find(const report::MatrixHistory& h, const std::string& key) {
  for (const auto& s : h.series) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

TEST_F(HistoryTest, APlantedSlowdownIsFlaggedWhereItBeganWithTheTagThatChanged) {
  std::vector<int64_t> runs;
  for (int i = 1; i <= 6; ++i) runs.push_back(Run(i, i >= 4 ? 1.25 : 1.0, i >= 4 ? "def" : "abc"));
  auto db = Reader();
  auto h = report::ReadHistory(*db, "nightly");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->runs.size(), 6u);
  EXPECT_EQ(h->baseline_run, runs[0]);  // no baseline set: the first run stands in
  EXPECT_NE(h->baseline_source.find("first run"), std::string::npos);
  EXPECT_EQ(h->latest_run, runs[5]);
  const auto* slow = Find(*h, "depth=4096");
  ASSERT_NE(slow, nullptr);
  ASSERT_EQ(slow->points.size(), 6u);
  EXPECT_EQ(slow->points[0].matrix_verdict, "baseline");
  EXPECT_EQ(slow->points[5].matrix_verdict, "slower");
  EXPECT_NE(slow->points[1].matrix_verdict, "slower");
  ASSERT_TRUE(slow->change.searched);
  EXPECT_TRUE(slow->change.located) << slow->change.text;
  EXPECT_EQ(slow->change.first_run, runs[3]) << slow->change.text;
  EXPECT_FALSE(slow->points[2].moved);
  EXPECT_TRUE(slow->points[3].moved);
  EXPECT_TRUE(slow->points[5].moved);
  EXPECT_NEAR(std::exp(slow->change.step), 1.25, 0.03);
  ASSERT_FALSE(slow->change.changes.empty());
  EXPECT_EQ(slow->change.changes[0], "tag build: abc → def");
  const auto* same = Find(*h, "depth=1024");
  ASSERT_NE(same, nullptr);
  EXPECT_FALSE(same->change.searched);  // not slower: nothing to locate
  for (const auto& p : same->points) EXPECT_FALSE(p.moved);
  // The text fits 100 columns and names the run; JSON and CSV carry the same.
  const std::string text = report::RenderHistoryText(*h);
  EXPECT_NE(text.find("began at run " + std::to_string(runs[3])), std::string::npos) << text;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    size_t width = 0;
    for (unsigned char c : line) width += (c & 0xC0) != 0x80;
    EXPECT_LE(width, 100u) << line;
  }
  const auto json = report::ToJson(*h);
  EXPECT_EQ(json["series"][1]["change_point"]["first_run"], runs[3]);
  EXPECT_EQ(json["runs"][0]["tags"]["build"], "abc");
  const std::string csv = report::RenderHistoryCsv(*h);
  EXPECT_NE(csv.find("depth=4096," + std::to_string(runs[3])), std::string::npos);
}

// The chart (report --history and the coordinator's matrix page): one point per run with its
// interval, the baseline marked, the runs from where it began marked and shaded, tags in each
// point's hover text, and a tag's markup inert.
TEST_F(HistoryTest, TheChartMarksTheBaselineAndWhereItBeganAndEscapesTags) {
  std::vector<int64_t> runs;
  for (int i = 1; i <= 6; ++i) {
    runs.push_back(Run(i, i >= 4 ? 1.25 : 1.0, i >= 4 ? "<script>alert(1)</script>" : "abc"));
  }
  auto db = Reader();
  auto h = report::ReadHistory(*db, "nightly");
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->series.size(), 2u);
  const auto count = [](const std::string& text, const std::string& pattern) {
    const std::regex re(pattern);
    return std::distance(std::sregex_iterator(text.begin(), text.end(), re),
                         std::sregex_iterator());
  };
  for (size_t k = 0; k < h->series.size(); ++k) {
    const auto& s = h->series[k];
    const std::string svg = report::RenderHistoryChart(*h, k);
    SCOPED_TRACE(s.key);
    EXPECT_EQ(count(svg, "<svg class=\"history\""), 1);
    EXPECT_EQ(count(svg, "<circle class=\"history-point"), 6);
    EXPECT_EQ(count(svg, "<path class=\"history-interval"), 6);  // every run has 4 sessions
    EXPECT_EQ(count(svg, "<circle class=\"history-point baseline\"[^>]* data-run=\"" +
                             std::to_string(runs[0]) + "\""),
              1);
    EXPECT_EQ(
        count(svg, "<line class=\"history-baseline\" data-run=\"" + std::to_string(runs[0]) + "\""),
        1);
    EXPECT_EQ(svg.find("<script>"), std::string::npos);
    EXPECT_NE(svg.find("tags: build=&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
    if (s.key == "depth=4096") {
      ASSERT_TRUE(s.change.located) << s.change.text;
      const std::string began = std::to_string(runs[3]);
      EXPECT_EQ(
          count(svg, "<circle class=\"history-point moved began\"[^>]* data-run=\"" + began + "\""),
          1);
      EXPECT_EQ(count(svg, "<circle class=\"history-point moved"), 3);
      EXPECT_EQ(count(svg, "<rect class=\"history-moved\" data-run=\"" + began + "\""), 1);
      EXPECT_NE(svg.find("changed here: tag build: abc → &lt;script&gt;"), std::string::npos);
    } else {
      EXPECT_EQ(svg.find(" moved"), std::string::npos);
      EXPECT_EQ(svg.find("history-moved"), std::string::npos);
    }
  }
  EXPECT_EQ(report::RenderHistoryChart(*h, 2), "");  // no such series

  // The report's sections: a summary of the runs, then per cell its chart and table, in HTML
  // (the charts drawn), Markdown and the fragment the web page serves.
  report::Report rep;
  rep.histories.push_back(*h);
  const auto sections = report::BuildSections(rep);
  ASSERT_EQ(sections.size(), 3u);
  EXPECT_EQ(sections[0].table.rows.size(), 6u);
  EXPECT_EQ(sections[1].chart, report::ChartKind::kHistory);
  EXPECT_EQ(sections[2].table.rows.size(), 6u);
  const std::string html = report::RenderHtml(rep);
  EXPECT_EQ(count(html, "<svg class=\"history\""), 2);
  EXPECT_EQ(count(html, "<script>"), 1);                                  // the page's own
  EXPECT_NE(html.find("svg.history .history-point"), std::string::npos);  // its style
  const std::string md = report::RenderMarkdown(rep);
  EXPECT_NE(md.find("◀ began here"), std::string::npos) << md;
  EXPECT_NE(md.find("ladder report RUN --history"), std::string::npos);
  const std::string fragment = report::RenderHistoryFragment(*h);
  EXPECT_EQ(count(fragment, "<svg class=\"history\""), 2);
  EXPECT_EQ(fragment.find("<script>"), std::string::npos);
}

TEST_F(HistoryTest, ANamedBaselineIsJudgedAgainstAndUnknownOnesAreRefused) {
  const int64_t a = Run(1, 1.0, "abc");
  const int64_t b = Run(2, 1.0, "abc");
  {
    auto w = db::Database::Open(dir_.File("h.db"), db::OpenMode::kReadWrite);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(db::SetBaseline(**w, b, "default", 1).ok());
  }
  auto db = Reader();
  auto h = report::ReadHistory(*db, "nightly");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->baseline_run, b);
  EXPECT_EQ(h->baseline_name, "default");
  EXPECT_EQ(report::ResolveSeriesRun(*db, "nightly", "baseline").value(), b);
  EXPECT_EQ(report::ResolveSeriesRun(*db, "nightly", "latest").value(), b);
  EXPECT_EQ(report::ResolveSeriesRun(*db, "nightly", std::to_string(a)).value(), a);
  auto unknown_matrix = report::ReadHistory(*db, "no-such-matrix");
  EXPECT_EQ(unknown_matrix.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(unknown_matrix.status().message()).find("nightly"), std::string::npos);
  report::HistoryOptions named;
  named.baseline = "before-upgrade";
  auto unknown_name = report::ReadHistory(*db, "nightly", named);
  EXPECT_EQ(unknown_name.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(unknown_name.status().message()).find("its baselines: default"),
            std::string::npos)
      << unknown_name.status();
  EXPECT_EQ(report::ResolveBaseline(*db, "nightly", "before-upgrade").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(HistoryTest, ARunOfAnotherMatrixIsNotABaseline) {
  Run(1, 1.0, "abc");
  const std::string other = std::string(kSeriesYaml).replace(6, 7, "weekly");
  const int64_t foreign = Run(2, 1.0, "abc", other.c_str());
  auto db = Reader();
  report::HistoryOptions options;
  options.baseline_run = foreign;
  auto h = report::ReadHistory(*db, "nightly", options);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(h.status().message()).find("matrix 'weekly'"), std::string::npos)
      << h.status();
}

TEST_F(HistoryTest, TooFewRunsSayWhyItCannotLocate) {
  Run(1, 1.0, "abc");
  const int64_t slow = Run(2, 1.5, "def");
  auto db = Reader();
  auto h = report::ReadHistory(*db, "nightly");
  ASSERT_TRUE(h.ok()) << h.status();
  const auto* s = Find(*h, "depth=4096");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->points.back().run_id, slow);
  EXPECT_EQ(s->points.back().matrix_verdict, "slower");
  ASSERT_TRUE(s->change.searched);
  EXPECT_FALSE(s->change.located);
  EXPECT_NE(s->change.text.find("cannot locate"), std::string::npos) << s->change.text;
  EXPECT_NE(s->change.text.find("at least 3 runs"), std::string::npos) << s->change.text;
}

TEST_F(HistoryTest, AChangedMatrixSharesOnlyTheCellsWithTheSameParameters) {
  Run(1, 1.0, "abc");
  // The next version adds a depth and changes nothing else: depth=1024 and 4096 continue.
  const std::string wider =
      std::string(kSeriesYaml)
          .replace(std::string(kSeriesYaml).find("[1024, 4096]"), 12, "[1024, 4096, 16384]");
  Run(2, 1.0, "abc", wider.c_str());
  // Then a fixed parameter changes: its cells are other cells.
  const std::string other_backend =
      std::string(wider).replace(wider.find("backend: cpu"), 12, "backend: cuda");
  Run(3, 1.0, "abc", other_backend.c_str());
  auto db = Reader();
  auto h = report::ReadHistory(*db, "nightly");
  ASSERT_TRUE(h.ok()) << h.status();
  int continued = 0, cuda = 0;
  for (const auto& s : h->series) {
    if (s.fixed_params.find("cuda") != std::string::npos) {
      ++cuda;
      EXPECT_EQ(s.points.size(), 1u) << s.key;
      EXPECT_EQ(s.points[0].matrix_verdict, "-");  // shares nothing with the baseline
    } else if (s.key != "depth=16384") {
      ++continued;
      EXPECT_EQ(s.points.size(), 2u) << s.key;
    }
  }
  EXPECT_EQ(continued, 2);
  EXPECT_EQ(cuda, 3);
  report::HistoryOptions only;
  only.cells = {"depth=4096"};
  auto narrowed = report::ReadHistory(*db, "nightly", only);
  ASSERT_TRUE(narrowed.ok());
  EXPECT_EQ(narrowed->series.size(), 2u);  // cpu and cuda
  only.cells = {"depth=7"};
  EXPECT_EQ(report::ReadHistory(*db, "nightly", only).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ladder::testing
