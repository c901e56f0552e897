// Helpers shared by the offline analysis subcommands (report, verify, compare): opening a results
// database read-only, naming a run, writing an output file. Private to cli/.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "exit_codes.h"
#include "ladder/db/sqlite.h"
#include "ladder/report/compare.h"

namespace ladder::cli {

// Opens `path` read-only; empty: $LADDER_DB, else ./ladder.db when it exists. Fails (exit 2)
// with a message naming the file when it cannot be read.
std::unique_ptr<db::Database> OpenDatabase(std::string path);

// A run id, or `latest` for the highest run id in `database`. Fails (exit 2) otherwise.
int64_t RunIdIn(db::Database& database, const std::string& text);

// Writes `text` to `path` through a temporary and a rename ("" or "-": stdout).
void WriteOutput(const std::string& path, const std::string& text);

// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> SplitList(const std::string& text);

// `ladder compare A B` (compare_command.cc).
void AddCompareCommand(CLI::App& app);

// `--fail-on` as compare takes it: slower, faster, inconclusive, no-change, withheld (a verdict
// withheld for a claim flag) (exit 2 otherwise).
std::set<std::string> ParseFailOn(const std::string& text);

// A run id, `latest`, or `baseline` / `baseline:NAME`: the baseline in `database` of the matrix
// that run `of_run` of `of_db` belongs to. Fails (exit 2) with the reason otherwise.
int64_t RunOrBaselineIn(db::Database& database, const std::string& text, db::Database& of_db,
                        int64_t of_run);

enum class VerdictLevel { kMatrix, kPerCell };
enum class Output { kMarkdown, kJson };

// CompareTwoRuns, printed to `out`; kVerdict (after listing the cells on stderr) when a cell's
// verdict at `level` is in `fail_on`, else kOk. Fails (exit 2) when the runs cannot be compared.
ExitCode JudgeRuns(const report::RunRef& a, const report::RunRef& b,
                   const report::CompareOptions& options, const std::set<std::string>& fail_on,
                   VerdictLevel level, Output output, std::ostream& out);

// A comparison already made (CompareTwoRuns or ComparePairedArms), printed and judged as
// JudgeRuns does.
ExitCode JudgeComparison(const absl::StatusOr<report::RunComparison>& comparison,
                         const std::set<std::string>& fail_on, VerdictLevel level, Output output,
                         std::ostream& out);

// `ladder history` and `ladder baseline` (history_command.cc).
void AddHistoryCommands(CLI::App& app);

// `ladder plan m.yaml` (plan_command.cc).
void AddPlanCommand(CLI::App& app);

}  // namespace ladder::cli
