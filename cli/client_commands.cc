// validate, submit, status, watch, cancel, sessions, query, export.
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include <google/protobuf/util/json_util.h>

#include <set>
#include "analysis_common.h"
#include "client.h"
#include "commands.h"
#include "exit_codes.h"
#include "format.h"
#include "ladder/agent/cell_check.h"
#include "ladder/coordinator/wire.h"
#include "ladder/db/query.h"
#include "ladder/matrices/matrix.h"
#include "ladder/runner/validate.h"

namespace ladder::cli {
namespace {

std::string ReadMatrixFile(const std::string& path) {
  if (path == "-") {
    std::stringstream buffer;
    buffer << std::cin.rdbuf();
    return buffer.str();
  }
  std::ifstream in(path);
  if (!in) Fail("cannot read " + path + ": " + std::strerror(errno), ExitCode::kBadInput);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void PrintSummary(const v1::RunSummary& s) {
  std::cout << "run " << s.run_id() << "  " << s.matrix_name() << "  " << s.state() << "\n";
  std::cout << "  cells     " << s.cells_done() << " done, " << s.cells_failed() << " failed, "
            << s.cells_total() << " total\n";
  std::cout << "  units     " << s.units_done() << " done, " << s.units_leased() << " leased, "
            << s.units_queued() << " queued, " << s.units_failed() << " failed, " << s.units_total()
            << " total\n";
  std::cout << "  results   " << s.measurements() << " measurements\n";
  std::cout << "  submitted " << FormatTimeMs(s.created_at_ms());
  if (s.finished_at_ms() > 0) std::cout << "   finished " << FormatTimeMs(s.finished_at_ms());
  std::cout << "\n";
  if (s.state() == "done") {
    if (s.cells_failed() == 0) {
      std::cout << "  DONE: every cell completed.\n";
    } else {
      std::cout << "  DONE with " << s.cells_failed() << " failed cell"
                << (s.cells_failed() == 1 ? "" : "s") << ":\n";
      for (const auto& reason : s.failure_reasons()) std::cout << "    - " << reason << "\n";
    }
  } else if (s.state() == "cancelled") {
    std::cout << "  CANCELLED.\n";
  } else if (s.eta_seconds() >= 0) {
    std::cout << "  eta       " << FormatDuration(s.eta_seconds()) << "\n";
  }
  if (!s.waiting_reason().empty()) std::cout << "  WAITING:  " << s.waiting_reason() << "\n";
}

int64_t ParseRunId(const std::string& text) {
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value <= 0) {
    Fail("RUN: expected a run id (a positive integer), got '" + text + "'", ExitCode::kBadInput);
  }
  return value;
}

void AddCoordinatorFlag(CLI::App* cmd, ClientFlags& flags) { AddClientFlags(cmd, flags); }

}  // namespace

void AddClientCommands(CLI::App& app) {
  {
    struct Flags {
      std::string path;
      int64_t max_cells = 0;
      bool json = false;
      bool runner_check = true;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand(
        "validate",
        "Check a matrix file without running it (no coordinator needed): print its cell and "
        "unit counts, or every error with file:line:column.");
    cmd->add_option("matrix", flags->path, "matrix YAML file, or - for stdin")->required();
    cmd->add_option("--max-cells", flags->max_cells, "raise the cell cap (default 100000)");
    cmd->add_flag("--json", flags->json, "print the expansion summary as JSON");
    cmd->add_flag("--runner-check,!--no-runner-check", flags->runner_check,
                  "also check every cell's parameters as its runner will (default on)");
    cmd->callback([flags] {
      const std::string yaml = ReadMatrixFile(flags->path);
      matrices::ParseOptions options;
      if (flags->max_cells > 0) options.max_cells = flags->max_cells;
      auto matrix =
          matrices::ParseMatrix(yaml, flags->path == "-" ? "<stdin>" : flags->path, options);
      if (!matrix.ok()) Fail(matrix.status(), ExitCode::kBadInput);
      auto expansion = matrices::Expand(*matrix, options);
      if (!expansion.ok()) Fail(expansion.status(), ExitCode::kBadInput);
      // The same check the coordinator's Submit makes (runner/validate.h).
      if (auto checked =
              runner::ValidateMatrix(*matrix, *expansion,
                                     flags->runner_check ? agent::RunnerSchemasWithChecks()
                                                         : runner::BuiltinMetricSchemas());
          !checked.ok()) {
        Fail(checked, ExitCode::kBadInput);
      }
      const size_t per_cell = static_cast<size_t>(matrix->replicates.processes) *
                              static_cast<size_t>(matrix->replicates.rounds);
      if (flags->json) {
        nlohmann::json out = {{"name", matrix->name},
                              {"runner", matrix->runner},
                              {"cells", expansion->cells.size()},
                              {"units", expansion->units.size()},
                              {"sessions_per_cell", matrix->replicates.sessions},
                              {"measurement_rounds_per_unit_cell", per_cell}};
        std::cout << out.dump(2) << "\n";
        return;
      }
      std::cout << flags->path << ": ok — matrix " << matrix->name << ", runner " << matrix->runner
                << "\n  " << expansion->cells.size() << " cells, " << expansion->units.size()
                << " units (" << matrix->replicates.sessions << " sessions x "
                << matrix->replicates.processes << " processes x " << matrix->replicates.rounds
                << " rounds per cell)\n";
      const size_t show = std::min<size_t>(expansion->cells.size(), 8);
      for (size_t i = 0; i < show; ++i) std::cout << "  " << expansion->cells[i].key << "\n";
      if (show < expansion->cells.size()) {
        std::cout << "  ... and " << expansion->cells.size() - show << " more\n";
      }
    });
  }
  {
    struct Flags : ClientFlags {
      std::string path;
      bool wait = false;
      int64_t max_cells = 0;
      TagFlags tags;
      std::string fail_on, against = "baseline", db;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand(
        "submit",
        "Submit a matrix to the coordinator. Prints the run id alone on the last line "
        "(RUN=$(ladder submit m.yaml | tail -1)). A rejected matrix stores nothing.");
    cmd->add_option("matrix", flags->path, "matrix YAML file, or - for stdin")->required();
    cmd->add_flag("--wait", flags->wait,
                  "follow the run until it is done (exit 4 if cells failed)");
    cmd->add_option("--max-cells", flags->max_cells, "raise the cell cap");
    AddTagFlags(cmd, flags->tags);
    cmd->add_option(
        "--fail-on", flags->fail_on,
        "with --wait: judge the finished run against its matrix's baseline as `ladder compare "
        "--against baseline RUN` does and exit 5 when a cell's matrix verdict is one of these "
        "(slower, faster, inconclusive, no-change); the comparison goes to stderr");
    cmd->add_option("--against", flags->against,
                    "with --fail-on: the baseline's name (default: the one named `default`)");
    cmd->add_option("--db", flags->db,
                    "with --fail-on: the coordinator's database file, read for the comparison "
                    "(default: $LADDER_DB, else ./ladder.db)");
    AddCoordinatorFlag(cmd, *flags);
    cmd->callback([flags] {
      if (!flags->fail_on.empty() && !flags->wait) {
        Fail("--fail-on judges the finished run: it needs --wait", ExitCode::kBadInput);
      }
      const std::set<std::string> failing_verdicts = ParseFailOn(flags->fail_on);
      const db::RunTags tags = flags->tags.Parse();
      const std::string yaml = ReadMatrixFile(flags->path);
      AdminClient client(flags->Options());
      auto submitted =
          client.Submit(yaml, flags->path == "-" ? "<stdin>" : flags->path, flags->max_cells, tags);
      if (!submitted.ok()) Fail(submitted.status(), ExitCode::kBadInput);
      std::cerr << "submitted: " << submitted->cell_count() << " cells in "
                << submitted->unit_count() << " units\n";
      if (!submitted->warning().empty()) std::cerr << "warning: " << submitted->warning() << "\n";
      if (flags->wait) {
        std::atomic<bool> interrupted{false};
        SignalWatcher signals([&](int) { interrupted = true; });
        auto summary = WatchUntilDone(client, submitted->run_id(), false, &interrupted);
        if (!summary.ok()) Fail(summary.status());
        std::cerr << "run " << summary->run_id() << " " << summary->state() << ": "
                  << summary->cells_done() << "/" << summary->cells_total() << " cells done, "
                  << summary->cells_failed() << " failed\n";
        ExitCode judged = ExitCode::kOk;
        if (!failing_verdicts.empty()) {
          auto database = OpenDatabase(flags->db);
          const int64_t b = submitted->run_id();
          const std::string against = flags->against == "baseline" || flags->against.empty()
                                          ? std::string("baseline")
                                          : "baseline:" + flags->against;
          const int64_t a = RunOrBaselineIn(*database, against, *database, b);
          report::CompareOptions options;
          judged = JudgeRuns({database.get(), a, "run " + std::to_string(a)},
                             {database.get(), b, "run " + std::to_string(b)}, options,
                             failing_verdicts, VerdictLevel::kMatrix, Output::kMarkdown, std::cerr);
        }
        std::cout << submitted->run_id() << "\n";
        if (summary->cells_failed() > 0) ExitWith(ExitCode::kCellsFailed);
        if (judged != ExitCode::kOk) ExitWith(judged);
        return;
      }
      std::cout << submitted->run_id() << "\n";
    });
  }
  {
    struct Flags : ClientFlags {
      std::string run, db;
      bool json = false;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand(
        "status",
        "Show one run (done? how many cells failed, and why) or list recent runs. With --db FILE "
        "it reads the database directly (offline: progress as stored, no ETA or waiting reason, "
        "which only a running coordinator knows).");
    cmd->add_option("run", flags->run, "run id (omit to list recent runs)");
    cmd->add_option("--db", flags->db, "read this results database instead of the coordinator");
    cmd->add_flag("--json", flags->json, "print JSON");
    AddCoordinatorFlag(cmd, *flags);
    cmd->callback([flags] {
      std::unique_ptr<AdminClient> client;
      std::unique_ptr<db::Database> database;
      if (flags->db.empty()) {
        client = std::make_unique<AdminClient>(flags->Options());
      } else {
        database = OpenDatabase(flags->db);
      }
      if (!flags->run.empty()) {
        v1::RunSummary summary;
        if (database) {
          auto stored = db::GetRunSummary(*database, ParseRunId(flags->run));
          if (!stored.ok()) Fail(stored.status());
          coordinator::FillRunSummary(*stored, &summary);
          summary.set_eta_seconds(-1);  // no coordinator: nothing to say how many units run now
        } else {
          auto served = client->GetRun(ParseRunId(flags->run));
          if (!served.ok()) Fail(served.status());
          summary = *std::move(served);
        }
        if (flags->json) {
          std::string json;
          google::protobuf::util::MessageToJsonString(summary, &json);
          std::cout << json << "\n";
        } else {
          PrintSummary(summary);
        }
        return;
      }
      v1::ListRunsResponse runs;
      if (database) {
        auto stored = db::ListRuns(*database, 20);
        if (!stored.ok()) Fail(stored.status());
        for (const auto& r : *stored) {
          auto* out = runs.add_runs();
          coordinator::FillRunSummary(r, out);
          out->set_eta_seconds(-1);
        }
      } else {
        auto served = client->ListRuns(20);
        if (!served.ok()) Fail(served.status());
        runs = *std::move(served);
      }
      if (flags->json) {
        std::string json;
        google::protobuf::util::MessageToJsonString(runs, &json);
        std::cout << json << "\n";
        return;
      }
      std::vector<std::vector<std::string>> rows;
      for (const auto& r : runs.runs()) {
        rows.push_back({std::to_string(r.run_id()), r.matrix_name(), r.state(),
                        std::to_string(r.cells_done()) + "/" + std::to_string(r.cells_total()),
                        std::to_string(r.cells_failed()), std::to_string(r.measurements()),
                        FormatTimeMs(r.created_at_ms())});
      }
      std::cout << RenderTable(
          {"run", "matrix", "state", "cells done", "failed", "measurements", "submitted"}, rows);
    });
  }
  {
    struct Flags : ClientFlags {
      std::string run;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand(
        "watch",
        "Follow a run live: a progress bar of units done/leased/queued/failed with an "
        "ETA, until it is done. Survives a coordinator restart.");
    cmd->add_option("run", flags->run, "run id")->required();
    AddCoordinatorFlag(cmd, *flags);
    cmd->callback([flags] {
      AdminClient client(flags->Options());
      std::atomic<bool> interrupted{false};
      SignalWatcher signals([&](int) { interrupted = true; });
      auto summary = WatchUntilDone(client, ParseRunId(flags->run), false, &interrupted);
      if (!summary.ok()) Fail(summary.status());
      PrintSummary(*summary);
      if (summary->cells_failed() > 0) ExitWith(ExitCode::kCellsFailed);
    });
  }
  {
    struct Flags : ClientFlags {
      std::string run;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand(
        "cancel",
        "Cancel a run: nothing more is leased, and agents stop its units at their next "
        "heartbeat. Results already stored are kept.");
    cmd->add_option("run", flags->run, "run id")->required();
    AddCoordinatorFlag(cmd, *flags);
    cmd->callback([flags] {
      AdminClient client(flags->Options());
      auto summary = client.Cancel(ParseRunId(flags->run));
      if (!summary.ok()) Fail(summary.status());
      PrintSummary(*summary);
    });
  }
  {
    struct Flags : ClientFlags {
      std::string db;
      bool json = false;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand(
        "sessions",
        "List agent sessions (one per agent process per host boot) with their hosts and GPUs. "
        "With --db FILE it reads the database directly (offline).");
    cmd->add_option("--db", flags->db, "read this results database instead of the coordinator");
    cmd->add_flag("--json", flags->json, "print JSON with full inventories");
    AddCoordinatorFlag(cmd, *flags);
    cmd->callback([flags] {
      absl::StatusOr<v1::ListSessionsResponse> sessions;
      if (flags->db.empty()) {
        sessions = AdminClient(flags->Options()).ListSessions();
      } else {
        auto database = OpenDatabase(flags->db);
        auto stored = db::ListSessions(*database);
        if (!stored.ok()) Fail(stored.status());
        sessions.emplace();
        for (const auto& one : *stored) {
          coordinator::FillSessionInfo(one, sessions->add_sessions());
        }
      }
      if (!sessions.ok()) Fail(sessions.status());
      if (flags->json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& s : sessions->sessions()) {
          out.push_back({{"session_id", s.session_id()},
                         {"hostname", s.hostname()},
                         {"state", s.state()},
                         {"started_at_ms", s.started_at_ms()},
                         {"last_seen_ms", s.last_seen_ms()},
                         {"attempts_done", s.attempts_done()},
                         {"attempts_live", s.attempts_live()},
                         {"inventory", nlohmann::json::parse(s.inventory_json(), nullptr, false)}});
        }
        std::cout << out.dump(2) << "\n";
        return;
      }
      std::vector<std::vector<std::string>> rows;
      for (const auto& s : sessions->sessions()) {
        auto inventory = nlohmann::json::parse(s.inventory_json(), nullptr, false);
        std::string gpus;
        if (inventory.is_object()) {
          for (const auto& g : inventory.value("gpus", nlohmann::json::array())) {
            gpus += (gpus.empty() ? "" : ", ") + g.value("name", std::string("?"));
          }
          // An agent pinned with --gpus: which of its host's devices these are.
          const auto software = inventory.value("software", nlohmann::json::object());
          if (software.contains("pinned_gpus") && software["pinned_gpus"].is_string()) {
            gpus += " (host GPU " + software["pinned_gpus"].get<std::string>() + ")";
          }
        }
        rows.push_back({s.session_id().substr(0, 8), s.hostname(), s.state(),
                        gpus.empty() ? "cpu only" : gpus, FormatTimeMs(s.started_at_ms()),
                        FormatTimeMs(s.last_seen_ms()), std::to_string(s.attempts_done()),
                        std::to_string(s.attempts_live())});
      }
      std::cout << RenderTable(
          {"session", "host", "state", "gpus", "started", "last seen", "done", "live"}, rows);
    });
  }
  {
    struct Flags : ClientFlags {
      std::string run, by, metric, db;
      bool json = false, csv = false;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand(
        "query",
        "Per-group statistics of one metric of a run: n, sessions, median, mean, sd, CV, min, "
        "max, and flags where evidence contradicts the request. Only measurements of completed "
        "attempts count. With --db FILE it reads the database directly (offline).");
    cmd->add_option("run", flags->run, "run id")->required();
    cmd->add_option("--by", flags->by, "axes to group by, comma-separated (default: all axes)");
    cmd->add_option("--metric", flags->metric, "metric (default: the matrix's metric)");
    cmd->add_option("--db", flags->db, "read this results database instead of the coordinator");
    auto* json = cmd->add_flag("--json", flags->json, "print JSON");
    cmd->add_flag("--csv", flags->csv, "print CSV")->excludes(json);
    AddCoordinatorFlag(cmd, *flags);
    cmd->callback([flags] {
      const int64_t run_id = ParseRunId(flags->run);
      std::vector<std::string> by = SplitCsv(flags->by);
      nlohmann::json result;
      if (!flags->db.empty()) {
        auto database = OpenDatabase(flags->db);
        auto queried = db::QueryRun(*database, db::QueryOptions{run_id, by, flags->metric});
        if (!queried.ok()) Fail(queried.status());
        if (flags->csv) {
          std::cout << RenderQueryCsv(db::ToJson(*queried));
          return;
        }
        result = db::ToJson(*queried);
      } else {
        AdminClient client(flags->Options());
        auto queried = client.Query(run_id, by, flags->metric);
        if (!queried.ok()) Fail(queried.status());
        result = *queried;
        if (flags->csv) {
          std::cout << RenderQueryCsv(result);
          return;
        }
      }
      if (flags->json) {
        std::cout << result.dump(2) << "\n";
      } else {
        std::cout << RenderQueryTable(result);
      }
    });
  }
  {
    struct Flags {
      std::string run, db, out;
      bool json = false, csv = false;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = app.add_subcommand(
        "export",
        "Every measurement of a run, one row each, with its cell, session, host, process, "
        "round and whether it counts (valid), for pandas or a spreadsheet.");
    cmd->add_option("run", flags->run, "run id")->required();
    cmd->add_option("--db", flags->db, "results database")->required();
    auto* json = cmd->add_flag("--json", flags->json, "JSON output");
    auto* csv = cmd->add_flag("--csv", flags->csv, "CSV output (the default)");
    json->excludes(csv);
    cmd->add_option("-o,--output", flags->out, "write to this file instead of stdout");
    cmd->callback([flags] {
      const int64_t run_id = ParseRunId(flags->run);
      if (access(flags->db.c_str(), R_OK) != 0) {
        Fail("--db: cannot read " + flags->db + ": " + std::strerror(errno), ExitCode::kBadInput);
      }
      auto database = db::Database::Open(flags->db, db::OpenMode::kReadOnly);
      if (!database.ok()) Fail(database.status());
      std::string text;
      if (flags->json) {
        auto exported = db::ExportRunJson(**database, run_id);
        if (!exported.ok()) Fail(exported.status());
        text = exported->dump(2) + "\n";
      } else {
        // Values with round-trip precision (RenderExportCsv), not iostream's 6 digits.
        auto exported = db::ExportRunJson(**database, run_id);
        if (!exported.ok()) Fail(exported.status());
        text = RenderExportCsv(*exported);
      }
      if (flags->out.empty()) {
        std::cout << text;
        return;
      }
      // Write to a temporary and rename, so a failed export leaves no half-written file.
      const std::string tmp = flags->out + ".tmp";
      {
        std::ofstream out(tmp, std::ios::binary);
        out << text;
        if (!out) Fail("cannot write " + tmp, ExitCode::kError);
      }
      if (std::rename(tmp.c_str(), flags->out.c_str()) != 0) {
        Fail("cannot rename " + tmp + " to " + flags->out, ExitCode::kError);
      }
      std::cerr << "wrote " << flags->out << "\n";
    });
  }
}

}  // namespace ladder::cli
