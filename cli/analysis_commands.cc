// `ladder report` and `ladder verify`: analysis over a results database (read-only, offline on a
// copied file or beside a running coordinator: WAL readers do not block the writer).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.h"
#include "ladder/analysis/analysis.h"
#include "ladder/analysis/report.h"
#include "ladder/analysis/verify.h"
#include "ladder/db/sqlite.h"

namespace ladder::cli {
namespace {

// Options shared by report and verify: which database and how to analyse.
struct AnalysisFlags {
  std::string db;
  std::string metric;
  int draws = 2000;
  bool discard_warmup = false;
  int steady_window = 5;
  double steady_cv_percent = 2.0;
  double cost_session = -1, cost_process = -1, cost_round = -1;
};

void AddAnalysisFlags(CLI::App* cmd, AnalysisFlags& flags, bool with_metric) {
  cmd->add_option("--db", flags.db,
                  "results database (default: $LADDER_DB, else ./ladder.db when it exists); "
                  "read-only, may be the live file of a running coordinator");
  if (with_metric) {
    cmd->add_option("--metric", flags.metric, "metric to analyse (default: the matrix's metric)");
  }
  cmd->add_option("--draws", flags.draws,
                  "bootstrap draws per comparison (2000 interactive; 10000 for a final figure; "
                  "0 skips the bootstrap)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_flag("--discard-warmup", flags.discard_warmup,
                "drop warm-up rounds: per process, rounds before the first window of "
                "--steady-window rounds whose CV is <= --steady-cv %");
  cmd->add_option("--steady-window", flags.steady_window, "rounds in the steady-state window")
      ->check(CLI::Range(2, 1000));
  cmd->add_option("--steady-cv", flags.steady_cv_percent, "max CV (%) of a steady window")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cost-session", flags.cost_session,
                  "seconds to set up a session (with --cost-process and --cost-round: plan the "
                  "optimal repeats per level)");
  cmd->add_option("--cost-process", flags.cost_process, "seconds to start a process");
  cmd->add_option("--cost-round", flags.cost_round, "seconds of one round");
}

analysis::AnalysisOptions ToOptions(const AnalysisFlags& flags) {
  analysis::AnalysisOptions options;
  options.metric = flags.metric;
  options.bootstrap_draws = flags.draws;
  options.warmup = flags.discard_warmup ? analysis::WarmupPolicy::kDiscardWarmup
                                        : analysis::WarmupPolicy::kKeepAll;
  options.steady_rule.window = static_cast<size_t>(flags.steady_window);
  options.steady_rule.max_cv = flags.steady_cv_percent / 100.0;
  if (flags.cost_session >= 0 || flags.cost_process >= 0 || flags.cost_round >= 0) {
    stats::LevelCosts costs;
    costs.session = std::max(0.0, flags.cost_session);
    costs.process = std::max(0.0, flags.cost_process);
    costs.round = flags.cost_round > 0 ? flags.cost_round : 1.0;
    options.costs = costs;
  }
  if (auto status = options.Validate(); !status.ok()) Fail(status, 2);
  return options;
}

std::unique_ptr<db::Database> OpenDatabase(std::string path) {
  if (path.empty()) {
    if (const char* env = std::getenv("LADDER_DB"); env && *env) {
      path = env;
    } else if (access("ladder.db", R_OK) == 0) {
      path = "ladder.db";
    } else {
      Fail("--db FILE is required: report and verify read the results database directly (the "
           "coordinator's --db file, or a copy of it)",
           2);
    }
  }
  if (access(path.c_str(), R_OK) != 0) {
    Fail("--db: cannot read " + path + ": " + std::strerror(errno), 2);
  }
  auto database = db::Database::Open(path, db::OpenMode::kReadOnly);
  if (!database.ok()) Fail(database.status());
  return std::move(*database);
}

int64_t RunId(const std::string& text) {
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value <= 0) {
    Fail("RUN: expected a run id (a positive integer), got '" + text + "'", 2);
  }
  return value;
}

// Writes through a temporary and a rename, so a failed write leaves no half-written file.
void WriteOutput(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out) Fail("cannot write " + tmp, 1);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    Fail("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno), 1);
  }
  std::cerr << "wrote " << path << "\n";
}

void AddReport(CLI::App& app) {
  struct Flags : AnalysisFlags {
    std::vector<std::string> runs;
    std::string out, format;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "report",
      "A report of one or more runs: per-cell statistics with 95 % intervals (df from "
      "sessions), paired ratios between the arms of the matrix's `pair` axes (t across sessions, "
      "hierarchical bootstrap, Fieller), the ladder chart against depth with the crossover, "
      "variance by level (round, process, session), arm x session, sessions and hosts, "
      "reproducibility between runs, and flags where evidence contradicts the request.\n"
      "  ladder report 1 --db results.db -o report.html    one self-contained HTML page\n"
      "  ladder report 1 2 --db results.db --format md     the same tables in Markdown\n"
      "See docs/report.md.");
  cmd->add_option("runs", flags->runs, "run ids (several: adds reproducibility tables)")
      ->required();
  cmd->add_option("-o,--output", flags->out, "write to this file (default: stdout)");
  cmd->add_option("--format", flags->format,
                  "html, md or json (default: from the -o extension, else html)")
      ->check(CLI::IsMember({"html", "md", "json"}));
  AddAnalysisFlags(cmd, *flags, true);
  cmd->callback([flags] {
    std::vector<int64_t> ids;
    for (const auto& r : flags->runs) ids.push_back(RunId(r));
    std::string format = flags->format;
    if (format.empty()) {
      const auto& o = flags->out;
      if (o.size() > 3 && o.substr(o.size() - 3) == ".md") {
        format = "md";
      } else if (o.size() > 5 && o.substr(o.size() - 5) == ".json") {
        format = "json";
      } else {
        format = "html";
      }
    }
    const auto options = ToOptions(*flags);
    auto database = OpenDatabase(flags->db);
    auto report = analysis::BuildReport(*database, ids, options);
    if (!report.ok()) {
      Fail(report.status(), report.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1);
    }
    std::string text;
    if (format == "md") {
      text = analysis::RenderMarkdown(*report);
    } else if (format == "json") {
      nlohmann::json j = {{"runs", nlohmann::json::array()},
                          {"reproducibility", nlohmann::json::array()},
                          {"notes", report->notes}};
      for (const auto& run : report->runs) j["runs"].push_back(analysis::ToJson(run));
      for (const auto& r : report->reproducibility) {
        j["reproducibility"].push_back(analysis::ToJson(r));
      }
      text = j.dump(2) + "\n";
    } else {
      text = analysis::RenderHtml(*report);
    }
    WriteOutput(flags->out, text);
  });
}

void AddVerify(CLI::App& app) {
  struct Flags : AnalysisFlags {
    std::string doc;
    bool quiet = false;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "verify",
      "Recompute every figure marked in a Markdown document and fail when one drifted beyond "
      "its tolerance. Mark a figure with the query that produced it, right before it:\n"
      "  <!-- ladder: run=1 cell=\"depth=32768\" stat=change arm=mtp-k1 tol=0.5% -->−70.8 %\n"
      "Exit 0 when every figure holds, 1 listing each drifted or uncheckable figure "
      "(file:line, stated, recomputed, tolerance), 2 for bad input. See docs/report.md.");
  cmd->add_option("doc", flags->doc, "Markdown document")->required();
  cmd->add_flag("-q,--quiet", flags->quiet, "print only the figures that fail");
  AddAnalysisFlags(cmd, *flags, false);
  cmd->callback([flags] {
    std::ifstream in(flags->doc, std::ios::binary);
    if (!in) Fail("cannot read " + flags->doc + ": " + std::strerror(errno), 2);
    std::stringstream buffer;
    buffer << in.rdbuf();
    const auto options = ToOptions(*flags);
    auto database = OpenDatabase(flags->db);
    auto checks = analysis::VerifyDocument(*database, buffer.str(), flags->doc, options);
    if (!checks.ok()) Fail(checks.status(), 2);
    int failed = 0;
    for (const auto& check : *checks) {
      if (!check.ok) {
        ++failed;
        std::cerr << analysis::DescribeCheck(check) << "\n";
      } else if (!flags->quiet) {
        std::cout << analysis::DescribeCheck(check) << "\n";
      }
    }
    if (checks->empty()) {
      std::cerr << flags->doc << ": no `<!-- ladder: ... -->` marks found\n";
      return;
    }
    std::cout << checks->size() - static_cast<size_t>(failed) << " of " << checks->size()
              << " figures hold\n";
    if (failed > 0) {
      std::cerr << "error: " << failed << " figure(s) drifted or could not be checked\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace

void AddAnalysisCommands(CLI::App& app) {
  AddReport(app);
  AddVerify(app);
}

}  // namespace ladder::cli
