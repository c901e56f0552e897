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
  std::string arms;  // AXIS=BASE,NEW: two arms of one run's paired axis
  double threshold_percent = 2.0;
  std::optional<double> host_drift_percent;  // none: estimated from A/A history
  bool higher_is_better = false, lower_is_better = false;
  bool json = false, per_cell = false;
};

report::CompareOptions OptionsFrom(const CompareFlags& flags) {
  report::CompareOptions options;
  options.metric = flags.metric;
  options.by = SplitList(flags.by);
  options.threshold = flags.threshold_percent / 100.0;
  if (flags.host_drift_percent) options.host_drift = *flags.host_drift_percent / 100.0;
  if (flags.higher_is_better) options.direction = report::Direction::kHigherIsBetter;
  if (flags.lower_is_better) options.direction = report::Direction::kLowerIsBetter;
  return options;
}

// `ladder compare RUN --arms AXIS=BASE,NEW`.
void JudgeArms(const CompareFlags& flags, const std::set<std::string>& fail_on) {
  if (!flags.against.empty() || !flags.run_b.empty() || flags.run_a.empty()) {
    Fail(
        "--arms judges two arms of ONE run: give one run (ladder compare latest --arms "
        "build=base,new)",
        ExitCode::kBadInput);
  }
  if (flags.host_drift_percent || !flags.by.empty() || !flags.db_a.empty() || !flags.db_b.empty()) {
    Fail(
        "--arms: --host-drift, --by, --db-a and --db-b are for two runs; paired arms share "
        "their sessions",
        ExitCode::kBadInput);
  }
  report::PairedArms arms;
  const std::size_t eq = flags.arms.find('=');
  const std::size_t comma = flags.arms.find(',', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || comma == std::string::npos || eq == 0) {
    Fail("--arms: expected AXIS=BASE,NEW (e.g. build=base,new), got '" + flags.arms + "'",
         ExitCode::kBadInput);
  }
  arms.axis = flags.arms.substr(0, eq);
  arms.baseline = flags.arms.substr(eq + 1, comma - eq - 1);
  arms.treatment = flags.arms.substr(comma + 1);
  if (arms.baseline.empty() || arms.treatment.empty() ||
      arms.treatment.find(',') != std::string::npos) {
    Fail("--arms: expected AXIS=BASE,NEW with two values, got '" + flags.arms + "'",
         ExitCode::kBadInput);
  }
  auto database = OpenDatabase(flags.db);
  const int64_t run = RunIdIn(*database, flags.run_a);
  const ExitCode code =
      JudgeComparison(report::ComparePairedArms({database.get(), run, "run " + std::to_string(run)},
                                                arms, OptionsFrom(flags)),
                      fail_on, flags.per_cell ? VerdictLevel::kPerCell : VerdictLevel::kMatrix,
                      flags.json ? Output::kJson : Output::kMarkdown, std::cout);
  if (code != ExitCode::kOk) ExitWith(code);
}

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
      "it is estimated from A/A history on that host (or --host-drift states it). The design "
      "that removes it is both variants as a paired axis of one run, interleaved in every "
      "session: judge it with --arms (one run, the same table, Holm and --fail-on).\n"
      "  ladder compare 3 4 --db results.db\n"
      "  ladder compare latest --arms build=base,new --fail-on slower   # one host, one run\n"
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
  cmd->add_option("--arms", flags->arms,
                  "AXIS=BASE,NEW: judge arm NEW against arm BASE of a paired axis of ONE run "
                  "(the positional run), per context of the other axes, from the sessions that "
                  "measured both — the one-host design (docs/statistics.md)");
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
                  "faster, inconclusive, no-change, withheld (no verdict: the cell's evidence "
                  "says it is not what it claims, e.g. speculation that never drafted)");
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
    const std::set<std::string> fail_on = ParseFailOn(flags->fail_on);
    if (!flags->arms.empty()) {
      JudgeArms(*flags, fail_on);
      return;
    }
    if (flags->run_a.empty() || flags->run_b.empty()) {
      Fail("compare needs two runs (A B), --against NAME and one run, or one run and --arms",
           ExitCode::kBadInput);
    }
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
    const report::CompareOptions options = OptionsFrom(*flags);
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
    if (v != "slower" && v != "faster" && v != "inconclusive" && v != "no change" &&
        v != "withheld") {
      Fail("--fail-on: expected slower, faster, inconclusive, no-change or withheld, got '" + v +
               "'",
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
  return JudgeComparison(report::CompareTwoRuns(a, b, options), fail_on, level, output, out);
}

ExitCode JudgeComparison(const absl::StatusOr<report::RunComparison>& comparison,
                         const std::set<std::string>& fail_on, VerdictLevel level, Output output,
                         std::ostream& out) {
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
  int64_t withheld_unnamed = 0;
  for (const auto& row : comparison->rows) {
    const std::string& verdict = per_cell ? row.verdict : row.matrix_verdict;
    const bool withheld = verdict.rfind("withheld", 0) == 0;
    if (fail_on.count(withheld ? std::string("withheld") : verdict)) {
      failing.push_back(row.key + ": " + verdict);
    } else if (withheld && !fail_on.empty()) {
      ++withheld_unnamed;
    }
  }
  if (withheld_unnamed > 0) {
    // A gate must not pass silently over cells it could not judge.
    std::cerr << "compare: warning: " << withheld_unnamed
              << " cell(s) got no verdict (a claim flag: the cell did not measure what it "
                 "claims); add `withheld` to --fail-on to fail on them\n";
  }
  if (failing.empty()) return ExitCode::kOk;
  std::cerr << "compare: " << failing.size() << " cell(s) with a "
            << (per_cell ? "per-cell" : "matrix") << " verdict named by --fail-on";
  for (const auto& f : failing) std::cerr << "\n  " << f;
  std::cerr << "\n";
  return ExitCode::kVerdict;
}

}  // namespace ladder::cli
