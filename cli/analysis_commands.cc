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

#include <set>

#include "analysis_common.h"
#include "commands.h"
#include "exit_codes.h"
#include "format.h"
#include "ladder/db/sqlite.h"
#include "ladder/report/analysis.h"
#include "ladder/report/report.h"
#include "ladder/report/verify.h"

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
  double threshold_percent = 2.0;
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
  cmd->add_option("--threshold", flags.threshold_percent,
                  "band for verdicts on ratios, in % (default 2): slower/faster only when the "
                  "whole interval lies beyond ±threshold, no change only when within it")
      ->check(CLI::Range(0.0, 99.0));
}

report::AnalysisOptions ToOptions(const AnalysisFlags& flags) {
  report::AnalysisOptions options;
  options.metric = flags.metric;
  options.bootstrap_draws = flags.draws;
  options.warmup =
      flags.discard_warmup ? report::WarmupPolicy::kDiscardWarmup : report::WarmupPolicy::kKeepAll;
  options.steady_rule.window = static_cast<size_t>(flags.steady_window);
  options.steady_rule.max_cv = flags.steady_cv_percent / 100.0;
  options.threshold = flags.threshold_percent / 100.0;
  if (flags.cost_session >= 0 || flags.cost_process >= 0 || flags.cost_round >= 0) {
    stats::LevelCosts costs;
    costs.session = std::max(0.0, flags.cost_session);
    costs.process = std::max(0.0, flags.cost_process);
    costs.round = flags.cost_round > 0 ? flags.cost_round : 1.0;
    options.costs = costs;
  }
  if (auto status = options.Validate(); !status.ok()) Fail(status, ExitCode::kBadInput);
  return options;
}

}  // namespace

std::unique_ptr<db::Database> OpenDatabase(std::string path) {
  if (path.empty()) {
    if (const char* env = std::getenv("LADDER_DB"); env && *env) {
      path = env;
    } else if (access("ladder.db", R_OK) == 0) {
      path = "ladder.db";
    } else {
      Fail(
          "--db FILE is required: report and verify read the results database directly (the "
          "coordinator's --db file, or a copy of it)",
          ExitCode::kBadInput);
    }
  }
  if (access(path.c_str(), R_OK) != 0) {
    Fail("--db: cannot read " + path + ": " + std::strerror(errno), ExitCode::kBadInput);
  }
  auto database = db::Database::Open(path, db::OpenMode::kReadOnly);
  if (!database.ok()) Fail(database.status());
  return std::move(*database);
}

int64_t RunIdIn(db::Database& database, const std::string& text) {
  if (text == "latest") {
    auto stmt = database.Prepare("SELECT MAX(id) FROM runs");
    if (!stmt.ok()) Fail(stmt.status());
    auto row = stmt->Step();
    if (!row.ok()) Fail(row.status());
    if (!*row || stmt->IsNull(0))
      Fail("latest: " + database.path() + " has no run", ExitCode::kBadInput);
    return stmt->Int(0);
  }
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value <= 0) {
    Fail("RUN: expected a run id (a positive integer) or `latest`, got '" + text + "'",
         ExitCode::kBadInput);
  }
  return value;
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
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
    if (!out) Fail("cannot write " + tmp, ExitCode::kError);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    Fail("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno), ExitCode::kError);
  }
  std::cerr << "wrote " << path << "\n";
}

namespace {

// A section's anchor without its run ids: "ratios-1" -> "ratios", "compare-1-2" -> "compare".
std::string SectionName(const std::string& anchor) {
  std::string name = anchor;
  while (true) {
    const size_t dash = name.rfind('-');
    if (dash == std::string::npos) break;
    const std::string tail = name.substr(dash + 1);
    if (tail.empty() || tail.find_first_not_of("0123456789") != std::string::npos) break;
    name.resize(dash);
  }
  return name;
}

// Words wrapped to `width` columns (UTF-8 aware enough for our text: counts code points).
std::string Wrap(const std::string& text, size_t width) {
  std::string out, line;
  size_t line_width = 0;
  auto code_points = [](const std::string& w) {
    size_t n = 0;
    for (unsigned char c : w) n += (c & 0xc0) != 0x80;
    return n;
  };
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    const size_t w = code_points(word);
    if (line_width > 0 && line_width + 1 + w > width) {
      out += line + "\n";
      line.clear();
      line_width = 0;
    }
    if (line_width > 0) {
      line += ' ';
      ++line_width;
    }
    line += word;
    line_width += w;
  }
  if (!line.empty()) out += line + "\n";
  return out;
}

// The report's sections for a terminal: a title, wrapped paragraphs, aligned tables. Columns
// that are empty in every row are left out.
std::string RenderText(const std::vector<report::Section>& sections,
                       const std::set<std::string>& only) {
  std::string out;
  const size_t width = static_cast<size_t>(std::max(60, std::min(TerminalWidth(), 120)));
  for (const auto& s : sections) {
    if (!only.empty() && !only.count(SectionName(s.anchor))) continue;
    if (!out.empty()) out += "\n";
    out += s.title + "\n" + std::string(std::min<size_t>(s.title.size(), width), '=') + "\n";
    for (const auto& p : s.paragraphs) out += Wrap(ForTerminal(p), width);
    if (s.chart != report::ChartKind::kNone) out += "(chart: in the HTML report)\n";
    if (s.table.header.empty()) continue;
    std::vector<size_t> keep;
    for (size_t c = 0; c < s.table.header.size(); ++c) {
      bool used = false;
      for (const auto& row : s.table.rows) used |= c < row.size() && !row[c].empty();
      if (used) keep.push_back(c);
    }
    std::vector<std::string> header;
    for (size_t c : keep) header.push_back(s.table.header[c]);
    std::vector<std::vector<std::string>> rows;
    for (const auto& row : s.table.rows) {
      std::vector<std::string> r;
      for (size_t c : keep) r.push_back(c < row.size() ? ForTerminal(row[c]) : "");
      rows.push_back(std::move(r));
    }
    out += "\n" + RenderTable(header, rows);
  }
  return out;
}

void AddReport(CLI::App& app) {
  struct Flags : AnalysisFlags {
    std::vector<std::string> runs;
    std::string out, format, sections;
    bool history = false;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "report",
      "A report of one or more runs: per-cell statistics with 95 % intervals (df from "
      "sessions), paired ratios between the arms of the matrix's `pair` axes (t across sessions, "
      "hierarchical bootstrap, Fieller), the ladder chart against depth with the crossover, "
      "for engine cells under load the throughput-latency curves and the ratio against "
      "concurrency, "
      "variance by level (round, process, session), arm x session, sessions and hosts, "
      "reproducibility between runs, and flags where evidence contradicts the request.\n"
      "  ladder report 1 --db results.db -o report.html    one self-contained HTML page\n"
      "  ladder report 1 2 --db results.db --format md     the same tables in Markdown\n"
      "  ladder report latest --history -o report.html     and its matrix's series (charts)\n"
      "See docs/report.md and docs/history.md.");
  cmd->add_option("runs", flags->runs,
                  "run ids, or `latest` for the newest run in the database (several: adds "
                  "reproducibility and `ladder compare` tables)")
      ->required();
  cmd->add_option("-o,--output", flags->out, "write to this file (default: stdout)");
  cmd->add_option("--format", flags->format,
                  "html, md, json, or text (aligned tables for a terminal) (default: from the -o "
                  "extension, else html)")
      ->check(CLI::IsMember({"html", "md", "json", "text"}));
  cmd->add_option("--sections", flags->sections,
                  "md and text: only these sections, comma-separated (ratios, ratios-other, aa, "
                  "said, ladder, locate, load, load-ratio, cells, variance, arm-session, sessions, "
                  "flags, repro, compare, history, notes)");
  cmd->add_flag("--history", flags->history,
                "add the history of each run's matrix (every run of a matrix of that name) as "
                "`ladder history` reads it, against its baseline: per cell a chart of the runs' "
                "values with their intervals, the baseline and where a slowdown began marked "
                "(HTML), and its table (all formats)");
  AddAnalysisFlags(cmd, *flags, true);
  cmd->callback([flags] {
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
    std::vector<int64_t> ids;
    for (const auto& r : flags->runs) ids.push_back(RunIdIn(*database, r));
    auto report = report::BuildReport(*database, ids, options);
    if (!report.ok()) {
      Fail(report.status(), report.status().code() == absl::StatusCode::kInvalidArgument
                                ? ExitCode::kBadInput
                                : ExitCode::kError);
    }
    if (flags->history) {
      report::HistoryOptions history;
      history.threshold = options.threshold;
      history.confidence = options.confidence;
      if (auto s = report::AddHistories(*database, *report, history); !s.ok()) {
        Fail(s, s.code() == absl::StatusCode::kInvalidArgument ||
                        s.code() == absl::StatusCode::kNotFound
                    ? ExitCode::kBadInput
                    : ExitCode::kError);
      }
    }
    std::string text;
    std::set<std::string> only;
    for (const auto& name : SplitList(flags->sections)) only.insert(name);
    if (format == "text") {
      text = RenderText(report::BuildSections(*report), only);
    } else if (format == "md" && !only.empty()) {
      report::Report empty;
      std::string md;
      for (const auto& s : report::BuildSections(*report)) {
        if (!only.count(SectionName(s.anchor))) continue;
        md += std::string(static_cast<size_t>(s.level), '#') + " " + s.title + "\n\n";
        for (const auto& p : s.paragraphs) md += p + "\n\n";
        if (s.table.header.empty()) continue;
        auto row = [](const std::vector<std::string>& cells) {
          std::string r = "|";
          for (const auto& c : cells) r += " " + (c.empty() ? std::string(" ") : c) + " |";
          return r + "\n";
        };
        md += row(s.table.header);
        md += row(std::vector<std::string>(s.table.header.size(), "---"));
        for (const auto& r : s.table.rows) md += row(r);
        md += "\n";
      }
      text = md;
    } else if (format == "md") {
      text = report::RenderMarkdown(*report);
    } else if (format == "json") {
      nlohmann::json j = {{"runs", nlohmann::json::array()},
                          {"reproducibility", nlohmann::json::array()},
                          {"notes", report->notes}};
      for (const auto& run : report->runs) j["runs"].push_back(report::ToJson(run));
      for (const auto& r : report->reproducibility) {
        j["reproducibility"].push_back(report::ToJson(r));
      }
      j["comparisons"] = nlohmann::json::array();
      for (const auto& c : report->comparisons) j["comparisons"].push_back(report::ToJson(c));
      if (flags->history) {
        j["histories"] = nlohmann::json::array();
        for (const auto& h : report->histories) j["histories"].push_back(report::ToJson(h));
      }
      text = j.dump(2) + "\n";
    } else {
      text = report::RenderHtml(*report);
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
    if (!in) Fail("cannot read " + flags->doc + ": " + std::strerror(errno), ExitCode::kBadInput);
    std::stringstream buffer;
    buffer << in.rdbuf();
    const auto options = ToOptions(*flags);
    auto database = OpenDatabase(flags->db);
    auto checks = report::VerifyDocument(*database, buffer.str(), flags->doc, options);
    if (!checks.ok()) Fail(checks.status(), ExitCode::kBadInput);
    int failed = 0;
    for (const auto& check : *checks) {
      if (!check.ok) {
        ++failed;
        std::cerr << report::DescribeCheck(check) << "\n";
      } else if (!flags->quiet) {
        std::cout << report::DescribeCheck(check) << "\n";
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
      ExitWith(ExitCode::kError);
    }
  });
}

}  // namespace

void AddAnalysisCommands(CLI::App& app) {
  AddReport(app);
  AddVerify(app);
  AddCompareCommand(app);
  AddHistoryCommands(app);
  AddPlanCommand(app);
}

}  // namespace ladder::cli
