// ladder-bench-history: how long `ladder history` takes over a long series. Builds a database of
// R runs of one C-cell matrix (through db::Store, as the coordinator writes one: every run's
// units leased, reported and done; 3 sessions × 1 process × 3 rounds per cell), with a planted
// 25 % slowdown of every tenth cell from run R − R/4 on, then times report::ReadHistory (what
// `ladder history` calls) and its rendering, on the file opened read-only as the CLI opens it.
//
//   ladder-bench-history --runs 100 --cells 200 --db /tmp/history.db
//   time ladder history bench-history --db /tmp/history.db > /dev/null
//
// docs/history.md quotes its numbers and says which indexes make them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "ladder/db/sqlite.h"
#include "ladder/db/store.h"
#include "ladder/matrices/matrix.h"
#include "ladder/report/history.h"

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

std::string MatrixYaml(int cells) {
  // depth × batch with `cells` cells in all (a multiple of 10).
  std::string depths;
  for (int i = 0; i < cells / 10; ++i) absl::StrAppend(&depths, i ? ", " : "", 256 * (i + 1));
  return absl::StrCat("name: bench-history\nrunner: kernel\naxes:\n  depth: [", depths,
                      "]\n  batch: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nfixed: {backend: cpu}\n"
                      "together: [depth, batch]\nreplicates: {sessions: 3, processes: 1, rounds: "
                      "3}\nmetric: time_us\n");
}

int Build(const std::string& path, int runs, int cells) {
  auto store = ladder::db::Store::Open(path);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", std::string(store.status().message()).c_str());
    return 1;
  }
  const std::string yaml = MatrixYaml(cells);
  auto matrix = ladder::matrices::ParseMatrix(yaml, "bench.yaml");
  if (!matrix.ok()) {
    std::fprintf(stderr, "%s\n", std::string(matrix.status().message()).c_str());
    return 1;
  }
  auto expansion = ladder::matrices::Expand(*matrix);
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal(0.0, 1.0);
  int64_t now = 1'767'000'000'000;
  int64_t uuid = 0;
  for (int r = 0; r < runs; ++r) {
    now += 86'400'000;  // nightly
    const ladder::db::RunTags tags = {{"build", r < runs - runs / 4 ? "good" : "slow"}};
    auto run = (*store)->CreateRun(yaml, *matrix, *expansion, now, tags);
    if (!run.ok()) return 1;
    auto snapshot = (*store)->LoadSchedulingState();
    if (!snapshot.ok()) return 1;
    const double night = normal(rng) * 0.01;
    for (const auto& unit : snapshot->units) {
      if (unit.run_id != *run) continue;
      ladder::db::SessionRow session;
      session.id = absl::StrCat("00000000-0000-4000-8000-", 100000000000 + r * 10 + unit.replicate);
      session.hostname = absl::StrCat("host-", unit.replicate);
      session.machine_id = session.boot_id = session.cloud_instance_id = session.id;
      session.cpu_model = "bench";
      session.agent_version = "bench";
      session.cpu_cores = 2;
      session.started_at = session.last_seen_at = now;
      if (!(*store)->UpsertSession(session).ok()) return 1;
      auto attempt = (*store)->LeaseUnit(unit.id, session.id, ++now);
      if (!attempt.ok()) return 1;
      const double session_effect = normal(rng) * 0.02;
      std::vector<ladder::db::MeasurementIn> ms;
      for (size_t c = 0; c < unit.cell_ids.size(); ++c) {
        const bool slow = c % 10 == 0 && r >= runs - runs / 4;
        for (int round = 0; round < 3; ++round) {
          ladder::db::MeasurementIn m;
          m.uuid = absl::StrCat("m-", ++uuid);
          m.attempt_id = *attempt;
          m.cell_id = unit.cell_ids[c];
          m.round = round;
          m.metric = "time_us";
          m.unit = "us";
          m.value = (100.0 + static_cast<double>(c)) * (slow ? 1.25 : 1.0) *
                    std::exp(night + session_effect + normal(rng) * 0.01);
          m.measured_at = now;
          ms.push_back(std::move(m));
        }
      }
      auto reported = (*store)->Report(session.id, ms, {}, {*attempt}, {}, ++now);
      if (!reported.ok()) return 1;
      if (!(*store)
               ->EndAttempt(*attempt, ladder::db::AttemptState::kDone, "", unit.id,
                            ladder::db::UnitState::kDone, 0, ++now)
               .ok()) {
        return 1;
      }
    }
    if (!(*store)->SetRunState(*run, ladder::db::RunState::kDone, ++now).ok()) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time `ladder history` over a simulated series of runs"};
  int runs = 100, cells = 200, repeats = 3;
  std::string db = "bench-history.db";
  app.add_option("--runs", runs, "runs in the series (default 100)");
  app.add_option("--cells", cells, "cells of the matrix, a multiple of 10 (default 200)")
      ->check(CLI::Range(10, 10000));
  app.add_option("--db", db, "the database to build (kept; rebuilt when its size differs)");
  app.add_option("--repeats", repeats, "timed reads (default 3; the median is printed)");
  CLI11_PARSE(app, argc, argv);
  cells -= cells % 10;
  std::filesystem::remove(db);
  std::filesystem::remove(db + "-wal");
  std::filesystem::remove(db + "-shm");
  const auto built = std::chrono::steady_clock::now();
  if (Build(db, runs, cells) != 0) return 1;
  std::printf("built %s: %d runs x %d cells, %d measurements, in %.1f s (%.1f MiB)\n", db.c_str(),
              runs, cells, runs * cells * 9, Seconds(built),
              static_cast<double>(std::filesystem::file_size(db)) / (1 << 20));
  std::vector<double> times;
  size_t located = 0, series = 0;
  for (int i = 0; i < repeats; ++i) {
    auto database = ladder::db::Database::Open(db, ladder::db::OpenMode::kReadOnly);
    if (!database.ok()) return 1;
    const auto start = std::chrono::steady_clock::now();
    auto history = ladder::report::ReadHistory(**database, "bench-history");
    if (!history.ok()) {
      std::fprintf(stderr, "%s\n", std::string(history.status().message()).c_str());
      return 1;
    }
    const std::string text = ladder::report::RenderHistoryText(*history);
    times.push_back(Seconds(start));
    series = history->series.size();
    located = 0;
    for (const auto& s : history->series) located += s.change.located;
  }
  std::sort(times.begin(), times.end());
  std::printf(
      "history of %zu cells over %d runs: %.3f s (median of %d; min %.3f, max %.3f); "
      "%zu cells with a located change-point (%d planted)\n",
      series, runs, times[times.size() / 2], repeats, times.front(), times.back(), located,
      cells / 10);
  return 0;
}
