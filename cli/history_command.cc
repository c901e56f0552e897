// `ladder history MATRIX`: a matrix's runs as a series per cell, against its baseline, with where
// a regression began; `ladder baseline set RUN` / `ladder baseline list`: the named baselines
// `compare --against` and `history` judge against. Offline, on the database file.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis_common.h"
#include "commands.h"
#include "exit_codes.h"
#include "format.h"
#include "ladder/common/time.h"
#include "ladder/db/schema.h"
#include "ladder/db/series.h"
#include "ladder/report/history.h"

namespace ladder::cli {
namespace {

struct HistoryFlags {
  std::string matrix, db, metric, by, cells, baseline = db::kDefaultBaseline;
  int64_t baseline_run = 0;
  double threshold_percent = 2.0;
  std::optional<double> host_drift_percent;  // none: estimated from the series' A/A runs
  bool json = false, csv = false;
};

ExitCode CodeOf(const absl::Status& status) {
  const auto code = status.code();
  return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound ||
                 code == absl::StatusCode::kFailedPrecondition
             ? ExitCode::kBadInput
             : ExitCode::kError;
}

// The database file `baseline set` writes: --db, else $LADDER_DB, else ./ladder.db.
std::unique_ptr<db::Database> OpenForWriting(std::string path) {
  if (path.empty()) {
    const char* env = std::getenv("LADDER_DB");
    path = env && *env ? env : "ladder.db";
  }
  if (access(path.c_str(), R_OK | W_OK) != 0) {
    Fail("--db: cannot write " + path + ": " + std::strerror(errno), ExitCode::kBadInput);
  }
  auto database = db::Database::Open(path, db::OpenMode::kReadWrite);
  if (!database.ok()) Fail(database.status());
  if (auto migrated = db::Migrate(**database); !migrated.ok()) Fail(migrated);
  return std::move(*database);
}

}  // namespace

void AddHistoryCommands(CLI::App& app) {
  {
    auto flags = std::make_shared<HistoryFlags>();
    auto* cmd = app.add_subcommand(
        "history",
        "The runs of one matrix (every run of a matrix with this name) as a series, per cell: "
        "one row per run with its date, tags, value with its 95 % interval and sessions, and "
        "the change from the baseline with its verdict, as `ladder compare` judges it (the "
        "matrix verdict, Holm over the cells two runs share). A changed matrix shares only "
        "the cells that ran with the same parameters.\n"
        "When the latest run is slower than the baseline, it says where it began: a "
        "change-point over the runs' values and intervals, the run-to-run drift estimated from "
        "the series itself, naming the first run that moved and what changed there (tags, "
        "ladder build, driver, GPU, engine version, host), or why it cannot.\n"
        "  ladder history demo-cpu --db results.db\n"
        "  ladder history nightly --cells depth=4096 --json\n"
        "Exit 0; 2 for an unknown matrix, baseline or metric. See docs/history.md.");
    cmd->add_option("matrix", flags->matrix, "the matrix's name (its `name:`)")->required();
    cmd->add_option("--db", flags->db, "results database (default: $LADDER_DB, else ./ladder.db)");
    cmd->add_option("--metric", flags->metric, "metric (default: the latest run's)");
    cmd->add_option("--by", flags->by,
                    "match cells on these axes only, comma-separated (cells agreeing on them are "
                    "pooled, as in compare)");
    cmd->add_option("--cells", flags->cells,
                    "only cells holding all of these axis=value items, comma-separated "
                    "(e.g. depth=4096,path=3d)");
    auto* name = cmd->add_option("--baseline", flags->baseline,
                                 "the baseline's name (default: `default`; without one set, the "
                                 "first run stands in)");
    cmd->add_option("--baseline-run", flags->baseline_run,
                    "a run of the series as the baseline instead of a named one")
        ->excludes(name);
    cmd->add_option("--threshold", flags->threshold_percent,
                    "the band in % (default 2), as compare")
        ->check(CLI::Range(0.0, 99.0));
    cmd->add_option("--host-drift", flags->host_drift_percent,
                    "the one-host drift allowance in %, as compare. Default: estimated from "
                    "the series' runs on that host with equal tags (the same build run again); "
                    "without two such runs a one-host comparison is inconclusive and says so")
        ->check(CLI::Range(0.0, 99.0));
    auto* json = cmd->add_flag("--json", flags->json, "JSON: runs, and per cell its points");
    auto* csv = cmd->add_flag("--csv", flags->csv, "CSV: one row per run and cell");
    json->excludes(csv);
    cmd->callback([flags] {
      auto database = OpenDatabase(flags->db);
      report::HistoryOptions options;
      options.metric = flags->metric;
      options.by = SplitList(flags->by);
      options.cells = SplitList(flags->cells);
      options.baseline = flags->baseline;
      if (flags->baseline_run > 0) options.baseline_run = flags->baseline_run;
      options.threshold = flags->threshold_percent / 100.0;
      if (flags->host_drift_percent) options.host_drift = *flags->host_drift_percent / 100.0;
      auto history = report::ReadHistory(*database, flags->matrix, options);
      if (!history.ok()) Fail(history.status(), CodeOf(history.status()));
      if (flags->json) {
        std::cout << report::ToJson(*history).dump(2) << "\n";
      } else if (flags->csv) {
        std::cout << report::RenderHistoryCsv(*history);
      } else {
        std::cout << report::RenderHistoryText(*history);
      }
    });
  }
  auto* baseline = app.add_subcommand(
      "baseline",
      "Name a run as its matrix's baseline (`set`), or list the baselines (`list`). "
      "`ladder compare --against baseline latest` and `ladder history` judge against it.");
  baseline->require_subcommand(1);
  {
    struct Flags {
      std::string run, name = db::kDefaultBaseline, db;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = baseline->add_subcommand(
        "set",
        "Make RUN the baseline NAME (default `default`) of its matrix; a matrix may have "
        "several (e.g. `default`, `before-driver-575`). Writes the database file directly.\n"
        "  ladder baseline set 12 --db results.db\n"
        "  ladder baseline set latest --name after-upgrade");
    cmd->add_option("run", flags->run, "run id, or `latest`")->required();
    cmd->add_option("--name", flags->name, "the baseline's name (letters, digits, _ . -)")
        ->capture_default_str();
    cmd->add_option("--db", flags->db, "results database (default: $LADDER_DB, else ./ladder.db)");
    cmd->callback([flags] {
      if (auto s = db::ValidateBaselineName(flags->name); !s.ok()) Fail(s, ExitCode::kBadInput);
      auto database = OpenForWriting(flags->db);
      const int64_t run = RunIdIn(*database, flags->run);
      auto set = db::SetBaseline(*database, run, flags->name, UnixNowMs());
      if (!set.ok()) Fail(set.status(), CodeOf(set.status()));
      std::cout << "baseline '" << set->name << "' of matrix " << set->matrix_name << ": run "
                << set->run_id << "\n";
    });
  }
  {
    struct Flags {
      std::string matrix, db;
      bool json = false;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd =
        baseline->add_subcommand("list", "List the baselines (of one matrix with --matrix).");
    cmd->add_option("--matrix", flags->matrix, "only this matrix's baselines");
    cmd->add_option("--db", flags->db, "results database (default: $LADDER_DB, else ./ladder.db)");
    cmd->add_flag("--json", flags->json, "print JSON");
    cmd->callback([flags] {
      auto database = OpenDatabase(flags->db);
      auto all = db::ListBaselines(*database, flags->matrix);
      if (!all.ok()) Fail(all.status());
      if (flags->json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& b : *all) {
          out.push_back({{"matrix", b.matrix_name},
                         {"name", b.name},
                         {"run_id", b.run_id},
                         {"set_at_ms", b.set_at_ms}});
        }
        std::cout << out.dump(2) << "\n";
        return;
      }
      std::vector<std::vector<std::string>> rows;
      for (const auto& b : *all) {
        rows.push_back(
            {b.matrix_name, b.name, std::to_string(b.run_id), FormatTimeMs(b.set_at_ms)});
      }
      std::cout << RenderTable({"matrix", "name", "run", "set"}, rows);
    });
  }
}

}  // namespace ladder::cli
