// Builds a results database whose measurements are known: a real matrix is stored through the
// Store (cells, units), sessions lease its units, and a caller-supplied function gives each
// measurement's value. Used where a real end-to-end run would be too slow or could not produce
// the case (a known ratio, a throttled clock, a failed cell).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ladder/db/store.h"
#include "ladder/matrices/matrix.h"

namespace ladder::testing {

// The cell's axis values as rendered in its key.
using CellAxes = std::map<std::string, std::string>;

struct SyntheticMetric {
  std::string metric, unit;
  double value = 0;
};

struct SyntheticOptions {
  // Value of the matrix's metric for (cell, session replicate, process, round).
  std::function<double(const CellAxes&, int, int, int)> value;
  std::string unit = "us";
  // Extra metrics per (cell, session, process, round), e.g. GPU clocks.
  std::function<std::vector<SyntheticMetric>(const CellAxes&, int, int, int)> extra;
  // Evidence per cell (kind, JSON value), recorded once per unit.
  std::function<std::vector<std::pair<std::string, std::string>>(const CellAxes&)> evidence;
  // Units whose group key equals this fail instead of completing (replicate 0 only).
  std::string fail_group;
  // When set, measurement times follow a known schedule from the session's registration: the
  // set-up, then per process a start and its rounds (all milliseconds).
  struct Timing {
    int64_t setup_ms = 0, process_ms = 0, round_ms = 0;
  };
  std::optional<Timing> timing;
  // Every session on one host (one machine id), as `ladder local` runs them.
  bool one_host = false;
  // Stored with the run (`ladder submit --tag`).
  db::RunTags tags;
  // The run's creation time (unix ms); 0: a fixed time in 2023.
  int64_t created_at_ms = 0;
};

inline CellAxes ParseKey(const std::string& key) {
  CellAxes out;
  for (auto& part : matrices::ParseCellKey(key)) out[part.axis] = std::move(part.value);
  return out;
}

// Returns the run id (0 after a gtest failure).
inline int64_t BuildSyntheticRun(db::Store& store, const std::string& yaml,
                                 const SyntheticOptions& options) {
  auto matrix = matrices::ParseMatrix(yaml, "synthetic.yaml");
  EXPECT_TRUE(matrix.ok()) << matrix.status();
  if (!matrix.ok()) return 0;
  auto expansion = matrices::Expand(*matrix);
  EXPECT_TRUE(expansion.ok()) << expansion.status();
  if (!expansion.ok()) return 0;
  int64_t now = options.created_at_ms > 0 ? options.created_at_ms : 1'700'000'000'000;
  auto run = store.CreateRun(yaml, *matrix, *expansion, now, options.tags);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return 0;
  auto snapshot = store.LoadSchedulingState();
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  if (!snapshot.ok()) return 0;
  static int uuid = 0;
  for (const auto& unit : snapshot->units) {
    if (unit.run_id != *run) continue;
    db::SessionRow session;
    session.id = absl::StrCat("00000000-0000-4000-8000-00000000000", unit.replicate);
    session.hostname = absl::StrCat("host-", unit.replicate);
    session.machine_id = session.boot_id = session.cloud_instance_id = session.id;
    if (options.one_host) {
      session.hostname = "bench-1";
      session.machine_id = session.boot_id = "machine-1";
    }
    session.cpu_model = "Synthetic CPU";
    session.agent_version = "test";
    session.cpu_cores = 2;
    session.gpus.push_back({"nvidia", "NVIDIA H100 80GB HBM3", "sm_90",
                            absl::StrCat("GPU-", unit.replicate), "550.54", 81559});
    session.started_at = session.last_seen_at = now;
    EXPECT_TRUE(store.UpsertSession(session).ok());
    auto attempt = store.LeaseUnit(unit.id, session.id, ++now);
    EXPECT_TRUE(attempt.ok()) << attempt.status();
    if (!attempt.ok()) return 0;
    if (!options.fail_group.empty() && unit.group_key == options.fail_group &&
        unit.replicate == 0) {
      EXPECT_TRUE(store
                      .EndAttempt(*attempt, db::AttemptState::kFailed,
                                  "synthetic failure: out of memory", unit.id,
                                  db::UnitState::kFailed, 1, ++now)
                      .ok());
      continue;
    }
    auto cells = store.LoadCells(unit.cell_ids);
    EXPECT_TRUE(cells.ok());
    std::vector<db::MeasurementIn> measurements;
    std::vector<db::EvidenceIn> evidence;
    for (const auto& cell : *cells) {
      const CellAxes axes = ParseKey(cell.key);
      if (options.evidence) {
        for (const auto& [kind, value] : options.evidence(axes)) {
          evidence.push_back({absl::StrCat("e-", ++uuid), *attempt, cell.id, 0, kind, value, now});
        }
      }
      for (int p = 0; p < matrix->replicates.processes; ++p) {
        for (int r = 0; r < matrix->replicates.rounds; ++r) {
          db::MeasurementIn m;
          m.uuid = absl::StrCat("m-", ++uuid);
          m.attempt_id = *attempt;
          m.cell_id = cell.id;
          m.process = p;
          m.round = r;
          m.metric = matrix->metric;
          m.value = options.value(axes, unit.replicate, p, r);
          m.unit = options.unit;
          m.measured_at = now;
          if (options.timing) {
            const auto& t = *options.timing;
            m.measured_at = session.started_at + t.setup_ms +
                            p * (t.process_ms + matrix->replicates.rounds * t.round_ms) +
                            t.process_ms + (r + 1) * t.round_ms;
          }
          measurements.push_back(m);
          if (options.extra) {
            for (const auto& x : options.extra(axes, unit.replicate, p, r)) {
              db::MeasurementIn e = m;
              e.uuid = absl::StrCat("m-", ++uuid);
              e.metric = x.metric;
              e.unit = x.unit;
              e.value = x.value;
              measurements.push_back(e);
            }
          }
        }
      }
    }
    auto outcome = store.Report(session.id, measurements, evidence, {*attempt}, {}, ++now);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_TRUE(store
                    .EndAttempt(*attempt, db::AttemptState::kDone, "", unit.id,
                                db::UnitState::kDone, 0, ++now)
                    .ok());
  }
  EXPECT_TRUE(store.SetRunState(*run, db::RunState::kDone, ++now).ok());
  return *run;
}

}  // namespace ladder::testing
