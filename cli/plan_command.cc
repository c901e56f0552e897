// `ladder plan m.yaml`: the power a matrix has, said before it runs (report/plan.h). Offline.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "analysis_common.h"
#include "commands.h"
#include "exit_codes.h"
#include "ladder/matrices/matrix.h"
#include "ladder/report/plan.h"

namespace ladder::cli {
namespace {

struct PlanFlags {
  std::string path, db;
  double threshold_percent = 2.0, power_percent = 80.0;
  std::optional<double> target, session_sd, process_sd, round_sd, interaction_sd;
  int runs = 5;
  bool json = false;
};

std::optional<double> Fraction(const std::optional<double>& percent) {
  if (!percent) return std::nullopt;
  return *percent / 100.0;
}

}  // namespace

void AddPlanCommand(CLI::App& app) {
  auto flags = std::make_shared<PlanFlags>();
  auto* cmd = app.add_subcommand(
      "plan",
      "What a matrix can detect, before it runs: per cell (per paired comparison for a matrix "
      "with `pair:`), the smallest change its replicates detect with 80 % power under the "
      "verdict — the whole interval beyond the ±2 % band, and over the matrix Holm over its "
      "cells or comparisons (one changed, the others not) — and, with --target, the sessions "
      "that detect a given change.\n"
      "The spread comes from earlier runs of a matrix with the same name in --db (each cell's "
      "variance by level, at the planned processes and rounds; the runs are named), or from a "
      "stated assumption (--session-sd ..., which overrides the database).\n"
      "  ladder plan matrices/examples/demo-cpu.yaml --db results.db --target 5\n"
      "  ladder plan nightly.yaml --session-sd 3 --process-sd 1 --round-sd 0.5\n"
      "Exit 0; 2 for a bad matrix, or with neither history nor an assumption. See "
      "docs/statistics.md, 'Power before running'.");
  cmd->add_option("matrix", flags->path, "the matrix file")->required();
  cmd->add_option("--db", flags->db,
                  "results database with earlier runs (default: $LADDER_DB, else ./ladder.db "
                  "when it exists)");
  cmd->add_option("--target", flags->target, "a change in % to give the sessions needed for");
  cmd->add_option("--threshold", flags->threshold_percent, "the verdict's band in % (default 2)")
      ->check(CLI::Range(0.0, 99.0));
  cmd->add_option("--power", flags->power_percent, "the wanted power in % (default 80)")
      ->check(CLI::Range(51.0, 99.9));
  cmd->add_option("--session-sd", flags->session_sd,
                  "assumed spread between sessions, % (relative sd)");
  cmd->add_option("--process-sd", flags->process_sd, "assumed spread between processes, %");
  cmd->add_option("--round-sd", flags->round_sd, "assumed spread between rounds, %");
  cmd->add_option("--interaction-sd", flags->interaction_sd,
                  "assumed arm x session spread of a paired matrix, %");
  cmd->add_option("--runs", flags->runs, "the latest earlier runs to pool (default 5)")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", flags->json, "JSON");
  cmd->callback([flags] {
    auto matrix = matrices::ParseMatrixFile(flags->path);
    if (!matrix.ok()) Fail(matrix.status(), ExitCode::kBadInput);
    std::unique_ptr<db::Database> database;
    const char* env = std::getenv("LADDER_DB");
    if (!flags->db.empty() || (env && *env) || std::filesystem::exists("ladder.db")) {
      database = OpenDatabase(flags->db);
    }
    report::PlanOptions options;
    options.threshold = flags->threshold_percent / 100.0;
    options.power = flags->power_percent / 100.0;
    options.target = Fraction(flags->target);
    options.session_sd = Fraction(flags->session_sd);
    options.process_sd = Fraction(flags->process_sd);
    options.round_sd = Fraction(flags->round_sd);
    options.interaction_sd = Fraction(flags->interaction_sd);
    options.max_runs = flags->runs;
    auto plan = report::PlanMatrix(*matrix, database.get(), options);
    if (!plan.ok()) Fail(plan.status(), ExitCode::kBadInput);
    if (flags->json) {
      std::cout << report::ToJson(*plan).dump(2) << "\n";
    } else {
      std::cout << report::RenderPlanText(*plan);
    }
  });
}

}  // namespace ladder::cli
