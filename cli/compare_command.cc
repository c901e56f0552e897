// `ladder compare A B`: per cell present in both runs, the ratio B/A with an interval whose df
// come from sessions, and a verdict (slower, faster, no change, inconclusive) against a threshold;
// Markdown, --json, and an exit status for CI (--fail-on). Offline, on one or two database files.
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analysis_common.h"
#include "commands.h"
#include "exit_codes.h"
#include "ladder/db/series.h"
#include "ladder/report/compare.h"
#include "ladder/report/history.h"

namespace ladder::cli {
namespace {

// The exit status of `--fail-on` when a cell has one of the named verdicts (README: exit codes).

struct CompareFlags {
  std::string run_a, run_b, against;
  std::string db, db_a, db_b;
  std::string metric, by, fail_on;
  double threshold_percent = 2.0;
  std::optional<double> host_drift_percent;  // none: estimated from A/A history
  bool higher_is_better = false, lower_is_better = false;
  bool json = false, per_cell = false;
};

}  // namespace

void AddCompareCommand(CLI::App& app) {
  auto flags = std::make_shared<CompareFlags>();
  auto* cmd = app.add_subcommand(
      "compare",
      "Compare run B against run A (the baseline), cell by cell: for each cell measured in "
      "both (matched by its axis values, or by --by a subset of axes), the ratio B/A of the "
      "runs' geometric means of session means, a 95 % interval from Welch's t on the log "
      "session means (df from sessions, shown), and a verdict against --threshold: slower or "
      "faster only when the whole interval lies beyond ±threshold, no change only when it lies "
      "within, inconclusive otherwise. Times are better lower, rates (/s) higher.\n"
      "The matrix verdict judges all cells as one family (Holm): the chance of any false "
      "slower or faster among them stays under 5 %. A per-cell gate has no such bound: over 200 "
      "A/A cells at 5 sessions it failed 0.7 % of pairs when sessions agree to 0.5 % and 54 % "
      "when they differ by 3 % (simulated, docs/statistics.md). --fail-on acts on the matrix "
      "verdict.\n"
      "When both runs ran on one host, the interval cannot see the host's drift between them: "
      "the band widens by --host-drift; a paired axis in one run is the design that can tell.\n"
      "  ladder compare 3 4 --db results.db\n"
      "  ladder compare 1 1 --db-a base.db --db-b tonight.db --fail-on slower   # CI gate\n"
      "  ladder compare --against baseline latest --fail-on slower   # vs `ladder baseline set`\n"
      "Exit 0; 5 when a cell's matrix verdict (with --per-cell: its own verdict) is one named "
      "by --fail-on; 2 for bad input. See docs/statistics.md.");
  cmd->add_option("A", flags->run_a,
                  "baseline run id, `latest`, or `baseline` / `baseline:NAME`: the run set with "
                  "`ladder baseline set` for B's matrix (with --against: omit it)");
  cmd->add_option("B", flags->run_b, "run id to judge against A (or `latest`)");
  cmd->add_option("--against", flags->against,
                  "judge B (the one positional run) against its matrix's baseline NAME "
                  "(`baseline` for the default one): ladder compare --against baseline latest");
  cmd->add_option("--db", flags->db,
                  "database holding both runs (default: $LADDER_DB, else ./ladder.db)");
  auto* db_a = cmd->add_option("--db-a", flags->db_a, "database of run A (default: --db)");
  auto* db_b = cmd->add_option("--db-b", flags->db_b, "database of run B (default: --db)");
  (void)db_a;
  (void)db_b;
  cmd->add_option("--metric", flags->metric, "metric (default: run A's matrix metric)");
  cmd->add_option("--by", flags->by,
                  "match cells on these axes only, comma-separated (cells agreeing on them are "
                  "pooled); needed when the runs' axes differ");
  cmd->add_option("--threshold", flags->threshold_percent,
                  "the band in % (default 2): a change smaller than this is no change")
      ->check(CLI::Range(0.0, 99.0));
  auto* higher = cmd->add_flag("--higher-is-better", flags->higher_is_better,
                               "the metric is better higher (default: from its unit)");
  auto* lower = cmd->add_flag("--lower-is-better", flags->lower_is_better,
                              "the metric is better lower (default: from its unit)");
  higher->excludes(lower);
  cmd->add_option("--fail-on", flags->fail_on,
                  "exit 5 when any cell's verdict is one of these, comma-separated: slower, "
                  "faster, inconclusive, no-change");
  cmd->add_flag("--per-cell", flags->per_cell,
                "--fail-on acts on each cell's own verdict, not the matrix verdict (each cell's "
                "false-alarm rate is 5 %, the matrix's grows with its cells)");
  cmd->add_option("--host-drift", flags->host_drift_percent,
                  "when every session of both runs ran on one host: a drift allowance in % added "
                  "to the band (0 trusts the interval as is). Default: the drift is estimated per "
                  "cell from A/A history on that host (earlier runs of the matrix with equal "
                  "tags, i.e. the same build, run again) and carried into the interval; without "
                  "such history every verdict is inconclusive and says so")
      ->check(CLI::Range(0.0, 99.0));
  cmd->add_flag("--json", flags->json,
                "JSON output (rows with ratio, interval, df, verdict, matrix_verdict, p-values)");
  cmd->callback([flags] {
    if (!flags->against.empty()) {
      if (!flags->run_b.empty()) {
        Fail("--against NAME takes one run (B); got two: " + flags->run_a + " " + flags->run_b,
             ExitCode::kBadInput);
      }
      flags->run_b = flags->run_a;
      flags->run_a = flags->against == "baseline" ? "baseline" : "baseline:" + flags->against;
    }
    if (flags->run_a.empty() || flags->run_b.empty()) {
      Fail("compare needs two runs (A B), or --against NAME and one run", ExitCode::kBadInput);
    }
    const std::set<std::string> fail_on = ParseFailOn(flags->fail_on);
    const std::string path_a = flags->db_a.empty() ? flags->db : flags->db_a;
    const std::string path_b = flags->db_b.empty() ? flags->db : flags->db_b;
    auto database_a = OpenDatabase(path_a);
    std::unique_ptr<db::Database> separate_b;
    db::Database* database_b = database_a.get();
    if (path_b != path_a) {
      separate_b = OpenDatabase(path_b);
      database_b = separate_b.get();
    }
    const int64_t b = RunIdIn(*database_b, flags->run_b);
    const int64_t a = RunOrBaselineIn(*database_a, flags->run_a, *database_b, b);
    const bool two_files = path_b != path_a;
    report::RunRef ref_a{
        database_a.get(), a,
        two_files ? database_a->path() + " run " + std::to_string(a) : "run " + std::to_string(a)};
    report::RunRef ref_b{
        database_b, b,
        two_files ? database_b->path() + " run " + std::to_string(b) : "run " + std::to_string(b)};
    report::CompareOptions options;
    options.metric = flags->metric;
    options.by = SplitList(flags->by);
    options.threshold = flags->threshold_percent / 100.0;
    if (flags->host_drift_percent) options.host_drift = *flags->host_drift_percent / 100.0;
    if (flags->higher_is_better) options.direction = report::Direction::kHigherIsBetter;
    if (flags->lower_is_better) options.direction = report::Direction::kLowerIsBetter;
    const ExitCode code =
        JudgeRuns(ref_a, ref_b, options, fail_on,
                  flags->per_cell ? VerdictLevel::kPerCell : VerdictLevel::kMatrix,
                  flags->json ? Output::kJson : Output::kMarkdown, std::cout);
    if (code != ExitCode::kOk) ExitWith(code);
  });
}

std::set<std::string> ParseFailOn(const std::string& text) {
  std::set<std::string> fail_on;
  for (std::string v : SplitList(text)) {
    if (v == "no-change") v = "no change";
    if (v != "slower" && v != "faster" && v != "inconclusive" && v != "no change") {
      Fail("--fail-on: expected slower, faster, inconclusive or no-change, got '" + v + "'",
           ExitCode::kBadInput);
    }
    fail_on.insert(v);
  }
  return fail_on;
}

int64_t RunOrBaselineIn(db::Database& database, const std::string& text, db::Database& of_db,
                        int64_t of_run) {
  if (text != "baseline" && text.rfind("baseline:", 0) != 0) return RunIdIn(database, text);
  const std::string name = text == "baseline" ? db::kDefaultBaseline : text.substr(9);
  auto matrix = db::MatrixNameOfRun(of_db, of_run);
  if (!matrix.ok()) Fail(matrix.status(), ExitCode::kBadInput);
  auto run = report::ResolveBaseline(database, *matrix, name);
  if (!run.ok()) Fail(run.status(), ExitCode::kBadInput);
  return *run;
}

ExitCode JudgeRuns(const report::RunRef& a, const report::RunRef& b,
                   const report::CompareOptions& options, const std::set<std::string>& fail_on,
                   VerdictLevel level, Output output, std::ostream& out) {
  auto comparison = report::CompareTwoRuns(a, b, options);
  if (!comparison.ok()) {
    const auto code = comparison.status().code();
    Fail(comparison.status(), code == absl::StatusCode::kInvalidArgument ||
                                      code == absl::StatusCode::kNotFound ||
                                      code == absl::StatusCode::kFailedPrecondition
                                  ? ExitCode::kBadInput
                                  : ExitCode::kError);
  }
  if (output == Output::kJson) {
    out << report::ToJson(*comparison).dump(2) << "\n";
  } else {
    out << report::RenderComparisonMarkdown(*comparison);
  }
  const bool per_cell = level == VerdictLevel::kPerCell;
  std::vector<std::string> failing;
  for (const auto& row : comparison->rows) {
    const std::string& verdict = per_cell ? row.verdict : row.matrix_verdict;
    if (fail_on.count(verdict)) failing.push_back(row.key + ": " + verdict);
  }
  if (failing.empty()) return ExitCode::kOk;
  std::cerr << "compare: " << failing.size() << " cell(s) with a "
            << (per_cell ? "per-cell" : "matrix") << " verdict named by --fail-on";
  for (const auto& f : failing) std::cerr << "\n  " << f;
  std::cerr << "\n";
  return ExitCode::kVerdict;
}

}  // namespace ladder::cli
