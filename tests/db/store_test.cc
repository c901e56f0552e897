#include "ladder/db/store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "ladder/db/query.h"
#include "ladder/db/schema.h"
#include "ladder/db/series.h"
#include "process.h"

namespace ladder::db {
namespace {

using ladder::testing::TempDir;

constexpr const char* kMatrix = R"(
name: store-test
runner: kernel
axes:
  depth: [256, 1024]
  path: [2d, 3d]
fixed: {backend: cpu}
pair: [path]
replicates: {sessions: 2, processes: 1, rounds: 2}
)";

int64_t Count(db::Database& db, const std::string& table) {
  auto stmt = db.Prepare("SELECT COUNT(*) FROM " + table);
  EXPECT_TRUE(stmt.ok());
  auto row = stmt->Step();
  EXPECT_TRUE(row.ok() && *row);
  return stmt->Int(0);
}

struct Fixture {
  TempDir dir;
  std::unique_ptr<Store> store;
  int64_t run_id = 0;
  matrices::Expansion expansion;

  Fixture() {
    auto opened = Store::Open(dir.File("results.db"));
    EXPECT_TRUE(opened.ok()) << opened.status();
    store = std::move(*opened);
    auto matrix = matrices::ParseMatrix(kMatrix, "m.yaml");
    EXPECT_TRUE(matrix.ok()) << matrix.status();
    matrix->metric = "time_us";
    expansion = *matrices::Expand(*matrix);
    auto run = store->CreateRun(kMatrix, *matrix, expansion, 1000);
    EXPECT_TRUE(run.ok()) << run.status();
    run_id = *run;
  }

  SessionRow Session(const std::string& id) {
    SessionRow s;
    s.id = id;
    s.hostname = "host-" + id;
    s.machine_id = "machine-" + id;
    s.features = {"kernel", "cpu"};
    s.gpus.push_back(GpuRow{"nvidia", "NVIDIA H200", "sm_90", "GPU-1", "570.1", 143000});
    s.started_at = s.last_seen_at = 1000;
    EXPECT_TRUE(store->UpsertSession(s).ok());
    return s;
  }
};

TEST(Store, MigratesAnEmptyFileToTheLatestSchema) {
  TempDir dir;
  auto db = db::Database::Open(dir.File("x.db"), db::OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*SchemaVersion(**db), 0);
  ASSERT_TRUE(Migrate(**db).ok());
  EXPECT_EQ(*SchemaVersion(**db), LatestSchemaVersion());
  // Idempotent.
  ASSERT_TRUE(Migrate(**db).ok());
  EXPECT_EQ(*SchemaVersion(**db), LatestSchemaVersion());
  for (const char* table : {"matrices", "runs", "cells", "units", "unit_cells", "sessions",
                            "session_gpus", "attempts", "measurements", "evidence"}) {
    EXPECT_EQ(Count(**db, table), 0) << table;
  }
}

TEST(Store, RefusesADatabaseFromANewerLadder) {
  TempDir dir;
  {
    auto db = db::Database::Open(dir.File("x.db"), db::OpenMode::kReadWrite);
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 999").ok());
  }
  auto store = Store::Open(dir.File("x.db"));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(store.status().message()).find("newer"), std::string::npos);
}

TEST(Store, CreateRunStoresMatrixCellsAndUnits) {
  Fixture f;
  auto snapshot = f.store->LoadSchedulingState();
  ASSERT_TRUE(snapshot.ok());
  ASSERT_EQ(snapshot->open_runs.size(), 1u);
  EXPECT_EQ(snapshot->open_runs[0].runner, "kernel");
  EXPECT_EQ(snapshot->open_runs[0].sessions, 2);
  EXPECT_EQ(snapshot->open_runs[0].rounds, 2);
  // 2 depth groups x 2 replicates, each unit holding both paths.
  ASSERT_EQ(snapshot->units.size(), 4u);
  for (const auto& unit : snapshot->units) {
    EXPECT_EQ(unit.state, UnitState::kQueued);
    EXPECT_EQ(unit.cell_ids.size(), 2u);
  }
  auto cells = f.store->LoadCells(snapshot->units[0].cell_ids);
  ASSERT_TRUE(cells.ok());
  EXPECT_EQ((*cells)[0].key, "depth=256,path=2d");
  EXPECT_EQ(nlohmann::json::parse((*cells)[1].params_json)["backend"], "cpu");
  // The same YAML submitted twice is stored once, with two runs.
  auto matrix = matrices::ParseMatrix(kMatrix, "m.yaml");
  ASSERT_TRUE(f.store->CreateRun(kMatrix, *matrix, f.expansion, 2000).ok());
  auto db = db::Database::Open(f.dir.File("results.db"), db::OpenMode::kReadOnly);
  EXPECT_EQ(Count(**db, "matrices"), 1);
  EXPECT_EQ(Count(**db, "runs"), 2);
  EXPECT_EQ(Count(**db, "cells"), 8);
}

TEST(Store, RoundTripsSessionsAttemptsMeasurementsAndEvidence) {
  Fixture f;
  f.Session("session-a");
  auto snapshot = f.store->LoadSchedulingState();
  const UnitRow unit = snapshot->units[0];
  auto attempt = f.store->LeaseUnit(unit.id, "session-a", 2000);
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  // Leasing the same unit twice is refused.
  EXPECT_FALSE(f.store->LeaseUnit(unit.id, "session-a", 2000).ok());

  std::vector<MeasurementIn> ms;
  for (int round = 0; round < 2; ++round) {
    for (int64_t cell : unit.cell_ids) {
      ms.push_back(MeasurementIn{"m-" + std::to_string(cell) + "-" + std::to_string(round),
                                 *attempt, cell, 0, round, "time_us", 10.0 + round, "us", 2100});
    }
  }
  std::vector<EvidenceIn> ev = {
      EvidenceIn{"e-1", *attempt, unit.cell_ids[0], 0, "kernel_path", R"({"path":"3d"})", 2100}};
  auto outcome = f.store->Report("session-a", ms, ev, {*attempt}, {}, 2200);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->stored.size(), 5u);
  EXPECT_TRUE(outcome->stale.empty());
  auto fill = f.store->CountResults(*attempt, {"time_us"});
  ASSERT_TRUE(fill.ok());
  EXPECT_EQ(fill->measurements, 4);
  EXPECT_EQ(fill->evidence, 1);
  EXPECT_EQ(fill->required_filled, 4);  // 2 cells x 1 process x 2 rounds
  ASSERT_TRUE(
      f.store->EndAttempt(*attempt, AttemptState::kDone, "", unit.id, UnitState::kDone, 0, 3000)
          .ok());

  auto db = db::Database::Open(f.dir.File("results.db"), db::OpenMode::kReadOnly);
  auto sessions = ListSessions(**db);
  ASSERT_TRUE(sessions.ok());
  ASSERT_EQ(sessions->size(), 1u);
  EXPECT_EQ((*sessions)[0].inventory["gpus"][0]["name"], "NVIDIA H200");
  EXPECT_EQ((*sessions)[0].attempts_done, 1);

  auto summary = GetRunSummary(**db, f.run_id);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->units_done, 1);
  EXPECT_EQ(summary->units_queued, 3);
  EXPECT_EQ(summary->measurements, 4);
  EXPECT_EQ(summary->cells_done, 0);  // each cell also sits in a second replicate unit

  auto query = QueryRun(**db, QueryOptions{f.run_id, {"path"}, "time_us"});
  ASSERT_TRUE(query.ok()) << query.status();
  ASSERT_EQ(query->rows.size(), 2u);
  EXPECT_EQ(query->rows[0].group["path"], "2d");
  EXPECT_EQ(query->rows[0].n, 2);
  EXPECT_DOUBLE_EQ(query->rows[0].mean, 10.5);
  EXPECT_EQ(query->rows[1].n, 2);

  auto exported = ExportRunJson(**db, f.run_id);
  ASSERT_TRUE(exported.ok());
  EXPECT_EQ((*exported)["measurements"].size(), 4u);
  EXPECT_EQ((*exported)["measurements"][0]["hostname"], "host-session-a");
}

TEST(Store, RepeatedReportsAreHarmless) {
  Fixture f;
  f.Session("session-a");
  auto unit = f.store->LoadSchedulingState()->units[0];
  auto attempt = *f.store->LeaseUnit(unit.id, "session-a", 2000);
  std::vector<MeasurementIn> ms = {
      MeasurementIn{"same-uuid", attempt, unit.cell_ids[0], 0, 0, "time_us", 1.0, "us", 1}};
  ASSERT_TRUE(f.store->Report("session-a", ms, {}, {attempt}, {}, 1).ok());
  auto again = f.store->Report("session-a", ms, {}, {attempt}, {}, 1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->stored, std::vector<std::string>{"same-uuid"});  // acknowledged again
  EXPECT_TRUE(again->refused.empty());
  EXPECT_EQ(f.store->CountResults(attempt, {})->measurements, 1);
}

std::vector<std::string> Reasons(const ReportOutcome& outcome) {
  std::vector<std::string> out;
  for (const auto& r : outcome.refused) out.push_back(r.uuid + ": " + r.reason);
  return out;
}

TEST(Store, RecordsOutsideTheDesignAreRefusedEachWithItsReason) {
  Fixture f;
  f.Session("session-a");
  auto units = f.store->LoadSchedulingState()->units;
  auto attempt = *f.store->LeaseUnit(units[0].id, "session-a", 2000);
  // A cell of another depth's unit: not this attempt's.
  int64_t foreign_cell = 0;
  for (const auto& other : units) {
    for (int64_t c : other.cell_ids) {
      if (std::find(units[0].cell_ids.begin(), units[0].cell_ids.end(), c) ==
          units[0].cell_ids.end()) {
        foreign_cell = c;
      }
    }
  }
  ASSERT_NE(foreign_cell, 0);
  const int64_t cell = units[0].cell_ids[0];
  auto m = [&](std::string uuid, int64_t c, int process, int round, double value,
               std::string metric = "time_us", std::string unit = "us") {
    return MeasurementIn{std::move(uuid), attempt,         c, process, round, std::move(metric),
                         value,           std::move(unit), 1};
  };
  MetricCheck check = [](const AttemptDesign&, const std::string& metric, const std::string& unit,
                         double) -> std::string {
    if (metric != "time_us") return "unknown metric";
    return unit == "us" ? "" : "wrong unit";
  };
  std::vector<MeasurementIn> ms = {
      m("good", cell, 0, 0, 1.0),
      m("other-unit", foreign_cell, 0, 0, 1.0),
      m("process-minus", cell, -1, 0, 1.0),
      m("process-over", cell, 1, 0, 1.0),
      m("round-over", cell, 0, 2, 1.0),
      m("round-max", cell, 0, 2147483647, 1.0),
      m("inf", cell, 0, 1, std::numeric_limits<double>::infinity()),
      m("nan", cell, 0, 1, std::numeric_limits<double>::quiet_NaN()),
      m("metric", cell, 0, 1, 1.0, "time_ms"),
      m("unit", cell, 0, 1, 1.0, "time_us", "ms"),
      m("second-value", cell, 0, 0, 2.0),  // the slot "good" filled
      m("unknown-attempt", cell, 0, 0, 1.0),
  };
  ms.back().attempt_id = attempt + 1000;
  auto outcome = f.store->Report("session-a", ms, {}, {attempt}, check, 2);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->stored, std::vector<std::string>{"good"});
  const auto reasons = Reasons(*outcome);
  ASSERT_EQ(reasons.size(), ms.size() - 1) << ::testing::PrintToString(reasons);
  auto has = [&](const std::string& prefix, const std::string& words) {
    for (const auto& r : reasons) {
      if (r.rfind(prefix + ": ", 0) == 0 && r.find(words) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("other-unit", "is not a cell of attempt"));
  EXPECT_TRUE(has("process-minus", "process -1 is outside the design"));
  EXPECT_TRUE(has("process-over", "process 1 is outside the design"));
  EXPECT_TRUE(has("round-over", "round 2 is outside the design"));
  EXPECT_TRUE(has("round-max", "outside the design"));
  EXPECT_TRUE(has("inf", "not finite"));
  EXPECT_TRUE(has("nan", "not finite"));
  EXPECT_TRUE(has("metric", "unknown metric"));
  EXPECT_TRUE(has("unit", "wrong unit"));
  EXPECT_TRUE(has("second-value", "slot already filled"));
  EXPECT_TRUE(has("unknown-attempt", "unknown attempt"));
  // A used uuid cannot name another slot either.
  auto reused = f.store->Report("session-a", {m("good", cell, 0, 1, 5.0)}, {}, {attempt}, check, 3);
  ASSERT_TRUE(reused.ok());
  EXPECT_TRUE(reused->stored.empty());
  ASSERT_EQ(reused->refused.size(), 1u);
  EXPECT_NE(reused->refused[0].reason.find("uuid already used"), std::string::npos);
  // Evidence: a cell of the unit, JSON, under the cap.
  std::vector<EvidenceIn> ev = {
      EvidenceIn{"e-good", attempt, cell, 0, "kernel_path", R"({"path":"2d"})", 1},
      EvidenceIn{"e-cell", attempt, foreign_cell, 0, "kernel_path", "{}", 1},
      EvidenceIn{"e-json", attempt, cell, 0, "kernel_path", "{not json", 1},
      EvidenceIn{"e-big", attempt, cell, 0, "kernel_path",
                 "\"" + std::string(kMaxEvidenceJsonBytes, 'x') + "\"", 1},
      EvidenceIn{"e-process", attempt, cell, 3, "kernel_path", "{}", 1},
  };
  auto evidence = f.store->Report("session-a", {}, ev, {attempt}, check, 4);
  ASSERT_TRUE(evidence.ok());
  EXPECT_EQ(evidence->stored, std::vector<std::string>{"e-good"});
  EXPECT_EQ(evidence->refused.size(), 4u);
  auto fill = f.store->CountResults(attempt, {"time_us"});
  EXPECT_EQ(fill->measurements, 1);
  EXPECT_EQ(fill->required_filled, 1);
}

// The engine runner's per-request rows (`load_requests` evidence) read as one row per request
// from the load_requests view, for done attempts only.
TEST(Store, LoadRequestsViewUnrollsTheRowsOfDoneAttempts) {
  Fixture f;
  f.Session("session-a");
  const UnitRow unit = f.store->LoadSchedulingState()->units[0];
  auto attempt = f.store->LeaseUnit(unit.id, "session-a", 2000);
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  const std::string rows =
      R"({"round":1,"part":0,"parts":1,"rows":[[0,true,0.5,10.25,120.0,512,32,3.5,9.0,""],)"
      R"([1,false,2.0,11.0,130.5,512,31,3.75,8.5,""],[2,false,3.0,0,7.0,512,0,0,0,"HTTP 500"]]})";
  std::vector<EvidenceIn> ev = {
      EvidenceIn{"rows-1", *attempt, unit.cell_ids[0], 0, "load_requests", rows, 2100}};
  ASSERT_TRUE(f.store->Report("session-a", {}, ev, {*attempt}, {}, 2200).ok());
  auto db = db::Database::Open(f.dir.File("results.db"), db::OpenMode::kReadOnly);
  EXPECT_EQ(Count(**db, "load_requests"), 0);  // the attempt is not done yet
  ASSERT_TRUE(
      f.store->EndAttempt(*attempt, AttemptState::kDone, "", unit.id, UnitState::kDone, 0, 3000)
          .ok());
  EXPECT_EQ(Count(**db, "load_requests"), 3);
  auto stmt = (*db)->Prepare(
      "SELECT cell_id, round, request, warmup, ttft_ms, e2e_ms, tokens_out, error "
      "FROM load_requests ORDER BY request");
  ASSERT_TRUE(stmt.ok());
  ASSERT_TRUE(*stmt->Step());
  EXPECT_EQ(stmt->Int(0), unit.cell_ids[0]);
  EXPECT_EQ(stmt->Int(1), 1);
  EXPECT_EQ(stmt->Int(2), 0);
  EXPECT_EQ(stmt->Int(3), 1);  // warm-up
  EXPECT_DOUBLE_EQ(stmt->Double(4), 10.25);
  EXPECT_TRUE(stmt->IsNull(7));  // no error
  ASSERT_TRUE(*stmt->Step());
  EXPECT_EQ(stmt->Int(3), 0);
  EXPECT_DOUBLE_EQ(stmt->Double(5), 130.5);
  EXPECT_EQ(stmt->Int(6), 31);
  ASSERT_TRUE(*stmt->Step());
  EXPECT_EQ(stmt->Text(7), "HTTP 500");
}

// The stopping rules decide from "the first sessions": ValidObservations returns each cell's
// measurements in the order they were stored, whatever the sessions' names.
TEST(Store, ValidObservationsComeInTheOrderTheyWereStored) {
  Fixture f;
  f.Session("session-z");
  f.Session("session-a");
  auto units = f.store->LoadSchedulingState()->units;
  const UnitRow first = units[0];
  auto twin = std::find_if(units.begin() + 1, units.end(),
                           [&](const UnitRow& u) { return u.cell_ids == first.cell_ids; });
  ASSERT_NE(twin, units.end()) << "the matrix replicates each cell group in two units";
  int64_t at = 2000;
  for (const auto& [unit, session] :
       {std::pair{first, std::string("session-z")}, std::pair{*twin, std::string("session-a")}}) {
    auto attempt = f.store->LeaseUnit(unit.id, session, at);
    ASSERT_TRUE(attempt.ok()) << attempt.status();
    std::vector<MeasurementIn> ms;
    for (int round = 0; round < 2; ++round) {
      for (int64_t cell : unit.cell_ids) {
        ms.push_back(MeasurementIn{session + std::to_string(cell) + "-" + std::to_string(round),
                                   *attempt, cell, 0, round, "time_us", 10.0 + round, "us", at});
      }
    }
    ASSERT_TRUE(f.store->Report(session, ms, {}, {*attempt}, {}, at + 1).ok());
    ASSERT_TRUE(
        f.store->EndAttempt(*attempt, AttemptState::kDone, "", unit.id, UnitState::kDone, 0, at + 2)
            .ok());
    at += 1000;
  }
  auto observations = f.store->ValidObservations(first.cell_ids, "time_us");
  ASSERT_TRUE(observations.ok()) << observations.status();
  ASSERT_EQ(observations->size(), 4u * first.cell_ids.size());
  for (size_t c = 0; c < first.cell_ids.size(); ++c) {
    for (size_t i = 0; i < 4; ++i) {
      const Observation& o = (*observations)[c * 4 + i];
      EXPECT_EQ(o.cell_id, first.cell_ids[c]);
      EXPECT_EQ(o.session_id, i < 2 ? "session-z" : "session-a") << c << " " << i;
    }
  }
}

TEST(Store, ResultsForAnotherSessionsAttemptAreRefused) {
  Fixture f;
  f.Session("session-a");
  f.Session("session-b");
  auto unit = f.store->LoadSchedulingState()->units[0];
  auto attempt = *f.store->LeaseUnit(unit.id, "session-a", 2000);
  std::vector<MeasurementIn> ms = {
      MeasurementIn{"intruder", attempt, unit.cell_ids[0], 0, 0, "time_us", 1.0, "us", 1}};
  auto outcome = f.store->Report("session-b", ms, {}, {}, {}, 1);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(f.store->CountResults(attempt, {})->measurements, 0);
}

TEST(Store, LateResultsAreKeptAsStaleAndNeverCount) {
  Fixture f;
  f.Session("session-a");
  auto unit = f.store->LoadSchedulingState()->units[0];
  auto attempt = *f.store->LeaseUnit(unit.id, "session-a", 2000);
  ASSERT_TRUE(f.store
                  ->EndAttempt(attempt, AttemptState::kExpired, "lease expired", unit.id,
                               UnitState::kQueued, 1, 3)
                  .ok());
  std::vector<MeasurementIn> ms = {
      MeasurementIn{"late", attempt, unit.cell_ids[0], 0, 0, "time_us", 1.0, "us", 1}};
  auto outcome = f.store->Report("session-a", ms, {}, /*live_attempts=*/{}, {}, 4);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->stale, std::vector<std::string>{"late"});
  auto db = db::Database::Open(f.dir.File("results.db"), db::OpenMode::kReadOnly);
  EXPECT_EQ(Count(**db, "measurements"), 1);
  EXPECT_EQ(Count(**db, "valid_measurements"), 0);
}

TEST(Store, ReportBatchRollsBackOnlyTheReportThatFails) {
  Fixture f;
  f.Session("session-a");
  f.Session("session-b");
  auto units = f.store->LoadSchedulingState()->units;
  auto a = *f.store->LeaseUnit(units[0].id, "session-a", 2000);
  auto b = *f.store->LeaseUnit(units[1].id, "session-b", 2000);
  std::vector<ReportIn> batch(3);
  batch[0] = {"session-a",
              {MeasurementIn{"a1", a, units[0].cell_ids[0], 0, 0, "time_us", 1.0, "us", 1},
               MeasurementIn{"a2", a, units[0].cell_ids[0], 0, 1, "time_us", 2.0, "us", 1}},
              {},
              {a}};
  // Names another session's attempt after a good row: the whole report is refused.
  batch[1] = {"session-b",
              {MeasurementIn{"b1", b, units[1].cell_ids[0], 0, 0, "time_us", 1.0, "us", 1},
               MeasurementIn{"intruder", a, units[0].cell_ids[0], 0, 0, "time_us", 9, "us", 1}},
              {},
              {b}};
  // A cell that does not exist is refused alone; the rest of the report stands.
  batch[2] = {"session-b",
              {MeasurementIn{"b3", b, units[1].cell_ids[0], 0, 1, "time_us", 3.0, "us", 1},
               MeasurementIn{"b2", b, 999999, 0, 1, "time_us", 2.0, "us", 1}},
              {},
              {b}};
  auto results = f.store->ReportBatch(batch, {}, 3000);
  ASSERT_EQ(results.size(), 3u);
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  EXPECT_EQ(results[0]->stored, (std::vector<std::string>{"a1", "a2"}));
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].status().code(), absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(results[2].ok()) << results[2].status();
  EXPECT_EQ(results[2]->stored, std::vector<std::string>{"b3"});
  ASSERT_EQ(results[2]->refused.size(), 1u);
  EXPECT_EQ(results[2]->refused[0].uuid, "b2");
  auto db = db::Database::Open(f.dir.File("results.db"), db::OpenMode::kReadOnly);
  auto uuids = (*db)->Prepare(
      "SELECT group_concat(uuid, ',') FROM "
      "(SELECT uuid FROM measurements ORDER BY uuid)");
  ASSERT_TRUE(uuids.ok() && *uuids->Step());
  EXPECT_EQ(uuids->Text(0), "a1,a2,b3");  // b1 went with its report's rollback
}

TEST(Store, ReportBatchOnAFullDiskStoresNothingAndSaysSoToEveryone) {
  Fixture f;
  f.Session("session-a");
  auto unit = f.store->LoadSchedulingState()->units[0];
  auto attempt = *f.store->LeaseUnit(unit.id, "session-a", 2000);
  ASSERT_TRUE(f.store->LimitGrowthForTesting(0).ok());
  std::vector<ReportIn> batch;
  for (int r = 0; r < 4; ++r) {
    ReportIn report{"session-a", {}, {}, {attempt}};
    for (int i = 0; i < 200; ++i) {
      report.measurements.push_back(MeasurementIn{
          "m-" + std::to_string(r) + "-" + std::to_string(i) + std::string(40, 'x'), attempt,
          unit.cell_ids[0], 0, 0, "metric_" + std::to_string(r * 200 + i), 1.0 * i, "us", 1});
    }
    batch.push_back(std::move(report));
  }
  auto results = f.store->ReportBatch(batch, {}, 3000);
  ASSERT_EQ(results.size(), 4u);
  for (const auto& result : results) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted) << result.status();
  }
  auto db = db::Database::Open(f.dir.File("results.db"), db::OpenMode::kReadOnly);
  EXPECT_EQ(Count(**db, "measurements"), 0);
}

TEST(Store, CancelEndsLiveAttemptsAndQueuedUnits) {
  Fixture f;
  f.Session("session-a");
  auto unit = f.store->LoadSchedulingState()->units[0];
  auto attempt = *f.store->LeaseUnit(unit.id, "session-a", 2000);
  ASSERT_TRUE(f.store->CancelRun(f.run_id, 5000).ok());
  auto db = db::Database::Open(f.dir.File("results.db"), db::OpenMode::kReadOnly);
  auto summary = GetRunSummary(**db, f.run_id);
  EXPECT_EQ(summary->state, RunState::kCancelled);
  EXPECT_EQ(summary->units_cancelled, 4);
  // A cancelled attempt cannot be finished.
  EXPECT_FALSE(
      f.store->EndAttempt(attempt, AttemptState::kDone, "", unit.id, UnitState::kDone, 0, 6000)
          .ok());
  EXPECT_TRUE(f.store->LoadSchedulingState()->open_runs.empty());
}

TEST(Query, UnknownAxisOrMetricNamesWhatExists) {
  Fixture f;
  auto db = db::Database::Open(f.dir.File("results.db"), db::OpenMode::kReadOnly);
  auto bad_axis = QueryRun(**db, QueryOptions{f.run_id, {"dpth"}, ""});
  ASSERT_FALSE(bad_axis.ok());
  EXPECT_NE(std::string(bad_axis.status().message()).find("its axes are: depth, path"),
            std::string::npos)
      << bad_axis.status();
  auto missing = QueryRun(**db, QueryOptions{f.run_id + 7, {}, ""});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(States, EachStateRoundTripsThroughItsStoredText) {
  for (RunState s :
       {RunState::kQueued, RunState::kRunning, RunState::kDone, RunState::kCancelled}) {
    EXPECT_EQ(*ParseRunState(ToString(s)), s) << ToString(s);
  }
  for (UnitState s : {UnitState::kQueued, UnitState::kLeased, UnitState::kDone, UnitState::kFailed,
                      UnitState::kCancelled}) {
    EXPECT_EQ(*ParseUnitState(ToString(s)), s) << ToString(s);
  }
  for (AttemptState s : {AttemptState::kLeased, AttemptState::kDone, AttemptState::kFailed,
                         AttemptState::kExpired, AttemptState::kCancelled}) {
    EXPECT_EQ(*ParseAttemptState(ToString(s)), s) << ToString(s);
  }
  for (SessionState s : {SessionState::kActive, SessionState::kLost, SessionState::kGone}) {
    EXPECT_EQ(*ParseSessionState(ToString(s)), s) << ToString(s);
  }
  // The text is the schema's: what older databases hold and the wire carries.
  EXPECT_EQ(ToString(RunState::kRunning), "running");
  EXPECT_EQ(ToString(AttemptState::kExpired), "expired");
}

TEST(States, TextOfAnotherKindIsRefused) {
  EXPECT_EQ(ParseUnitState("running").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRunState("leased").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSessionState("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ParseAttemptState("Done").status().message().find("\"Done\""), std::string::npos);
}

TEST(Store, AnAttemptCannotEndAsLeased) {
  Fixture f;
  f.Session("session-a");
  auto unit = f.store->LoadSchedulingState()->units[0];
  auto attempt = *f.store->LeaseUnit(unit.id, "session-a", 2000);
  EXPECT_EQ(
      f.store->EndAttempt(attempt, AttemptState::kLeased, "", unit.id, UnitState::kQueued, 0, 3)
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      f.store->EndAttempt(attempt, AttemptState::kFailed, "x", unit.id, UnitState::kQueued, 1, 4)
          .ok());
}

TEST(Series, ARunKeepsItsTagsAndAMatrixItsNamedBaselines) {
  TempDir dir;
  auto store = Store::Open(dir.File("results.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  auto matrix = matrices::ParseMatrix(kMatrix, "m.yaml");
  ASSERT_TRUE(matrix.ok());
  auto expansion = *matrices::Expand(*matrix);
  auto first = (*store)->CreateRun(kMatrix, *matrix, expansion, 1000,
                                   {{"build", "abc123"}, {"note", "first night"}});
  ASSERT_TRUE(first.ok()) << first.status();
  auto refused = (*store)->CreateRun(kMatrix, *matrix, expansion, 1000, {{"bad key", "x"}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  auto second = (*store)->CreateRun(kMatrix, *matrix, expansion, 2000);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, *first + 1);  // the refused run stored nothing
  store->reset();
  auto db = db::Database::Open(dir.File("results.db"), db::OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*GetRunTags(**db, *first), (RunTags{{"build", "abc123"}, {"note", "first night"}}));
  EXPECT_TRUE(GetRunTags(**db, *second)->empty());
  EXPECT_EQ(SetBaseline(**db, 99, "default", 5).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(SetBaseline(**db, *first, "no spaces", 5).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(SetBaseline(**db, *first, kDefaultBaseline, 5).ok());
  ASSERT_TRUE(SetBaseline(**db, *second, "after-upgrade", 6).ok());
  ASSERT_TRUE(SetBaseline(**db, *second, kDefaultBaseline, 7).ok());  // moves the name
  auto all = ListBaselines(**db, "store-test");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "after-upgrade");
  EXPECT_EQ((*all)[1].name, "default");
  EXPECT_EQ((*all)[1].run_id, *second);
  EXPECT_EQ((*all)[1].set_at_ms, 7);
  EXPECT_FALSE(FindBaseline(**db, "another-matrix", kDefaultBaseline)->has_value());
  EXPECT_EQ((*FindBaseline(**db, "store-test", "after-upgrade"))->run_id, *second);
}

TEST(Series, TagFlagsAreCheckedBeforeAnythingIsStored) {
  RunTags tags;
  EXPECT_TRUE(AddTagFlag("build=abc", &tags).ok());
  EXPECT_TRUE(AddTagFlag("empty=", &tags).ok());
  EXPECT_EQ(tags.at("empty"), "");
  EXPECT_EQ(AddTagFlag("build=def", &tags).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddTagFlag("no-equals", &tags).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddTagFlag("=value", &tags).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateRunTags({{"k", std::string(257, 'x')}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateRunTags({{"k", "a\nb"}}).code(), absl::StatusCode::kInvalidArgument);
  RunTags many;
  for (int i = 0; i < 33; ++i) many.emplace("k" + std::to_string(i), "v");
  EXPECT_EQ(ValidateRunTags(many).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Series, AVersion10DatabaseIsReadableAndMigratesInPlace) {
  TempDir dir;
  int64_t run_id = 0;
  {
    Fixture f;
    run_id = f.run_id;
    f.Session("session-a");
    f.store.reset();
    // What a v10 coordinator left: no series tables or indexes.
    auto db = db::Database::Open(f.dir.File("results.db"), db::OpenMode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)
                    ->Exec("DROP TABLE run_tags; DROP TABLE baselines; DROP INDEX "
                           "matrices_by_name; DROP INDEX runs_by_matrix; DROP INDEX "
                           "measurements_by_run; PRAGMA user_version = 10")
                    .ok());
    db->reset();
    ASSERT_EQ(std::rename(f.dir.File("results.db").c_str(), dir.File("old.db").c_str()), 0);
  }
  {
    // Read-only, as `ladder history --db` opens a copied file: no tags, no baselines.
    auto db = db::Database::Open(dir.File("old.db"), db::OpenMode::kReadOnly);
    ASSERT_TRUE(db.ok());
    EXPECT_EQ(*SchemaVersion(**db), 10);
    EXPECT_FALSE(*HasSeriesTables(**db));
    EXPECT_TRUE(GetRunTags(**db, run_id)->empty());
    EXPECT_TRUE(ListBaselines(**db)->empty());
    EXPECT_EQ(SetBaseline(**db, run_id, "default", 1).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  auto store = Store::Open(dir.File("old.db"));  // migrates to the latest schema
  ASSERT_TRUE(store.ok()) << store.status();
  store->reset();
  auto db = db::Database::Open(dir.File("old.db"), db::OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok());
  EXPECT_EQ(*SchemaVersion(**db), LatestSchemaVersion());
  EXPECT_EQ(Count(**db, "runs"), 1);
  EXPECT_EQ(Count(**db, "cells"), 4);
  EXPECT_EQ(Count(**db, "sessions"), 1);
  EXPECT_EQ(Count(**db, "run_tags"), 0);
  ASSERT_TRUE(SetBaseline(**db, run_id, "default", 1).ok());
  auto stmt = (*db)->Prepare(
      "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name IN ('matrices_by_name', "
      "'runs_by_matrix', 'measurements_by_run')");
  ASSERT_TRUE(stmt.ok());
  ASSERT_TRUE(*stmt->Step());
  EXPECT_EQ(stmt->Int(0), 3);
}

}  // namespace
}  // namespace ladder::db
