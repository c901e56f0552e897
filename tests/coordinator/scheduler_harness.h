// A scheduler over a real store in a temporary folder, with an injected clock: the fixture of
// the scheduler's unit tests (no gRPC; calls go straight to the Scheduler).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ladder/coordinator/scheduler.h"
#include "ladder/db/query.h"
#include "process.h"

namespace ladder::coordinator::testing {

using ladder::testing::TempDir;

// The scheduler tests' runners: "kernel" and "engine" each report one required metric per
// (cell, process, round) and accept any parameters, so a test fills a unit's design with one
// value per cell (the real schemas are tested in tests/runner and end to end).
inline const runner::RunnerSchemas& TestSchemas() {
  static const runner::RunnerSchemas schemas({
      runner::RunnerSchema{
          "kernel", {{"time_us", "us", true, {}}, {"note_us", "us", false, {}}}, {}},
      runner::RunnerSchema{"engine", {{"decode_tok_s", "tok/s", true, {}}}, {}},
  });
  return schemas;
}

// A successful finish of `attempt_id` that announces `measurements` stored results.
inline FinishIn Succeeded(const std::string& session_id, int64_t attempt_id, int64_t measurements) {
  FinishIn finish;
  finish.session_id = session_id;
  finish.attempt_id = attempt_id;
  finish.outcome = AttemptOutcome::kSucceeded;
  finish.measurement_count = measurements;
  return finish;
}

class FakeClock final : public Clock {
 public:
  int64_t NowMs() const override { return now; }
  int64_t now = 1'000'000;
};

struct Harness {
  TempDir dir;
  FakeClock clock;
  std::unique_ptr<db::Store> store;
  std::unique_ptr<Scheduler> scheduler;
  SchedulerOptions options;

  Harness() {
    options.lease_ms = 5000;
    options.runners = &TestSchemas();
    store = std::move(*db::Store::Open(dir.File("results.db")));
    Restart();
  }
  void Restart() {
    scheduler.reset();
    auto created = Scheduler::Create(store.get(), &clock, options);
    EXPECT_TRUE(created.ok()) << created.status();
    scheduler = std::move(*created);
  }
  void AddSession(const std::string& id, const std::string& host,
                  std::vector<db::GpuRow> gpus = {}) {
    db::SessionRow row;
    row.id = id;
    row.hostname = host;
    row.machine_id = host;
    row.features = {"kernel", "cpu"};
    row.gpus = std::move(gpus);
    ASSERT_TRUE(scheduler->RegisterSession(row).ok());
  }
  int64_t Submit(const char* yaml) {
    auto result = scheduler->Submit(yaml, "m.yaml", 0);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->run_id : 0;
  }
  std::optional<Lease> LeaseNow(const std::string& session) {
    auto lease = scheduler->LeaseFor(session, 0);
    EXPECT_TRUE(lease.ok()) << lease.status();
    return lease.ok() ? *lease : std::nullopt;
  }
  // Reports one measurement per cell and finishes the attempt successfully.
  void Complete(const std::string& session, const Lease& lease) {
    std::vector<db::MeasurementIn> ms;
    for (const auto& cell : lease.cells) {
      ms.push_back(
          db::MeasurementIn{"m-" + std::to_string(lease.attempt_id) + "-" + std::to_string(cell.id),
                            lease.attempt_id, cell.id, 0, 0, "time_us", 1.0, "us", 0});
    }
    ASSERT_TRUE(scheduler->Report(session, ms, {}).ok());
    auto finish =
        scheduler->Finish(Succeeded(session, lease.attempt_id, static_cast<int64_t>(ms.size())));
    ASSERT_TRUE(finish.ok()) << finish.status();
    EXPECT_TRUE(finish->accepted) << finish->detail;
  }
  db::RunSummary Summary(int64_t run) {
    auto db = db::Database::Open(dir.File("results.db"), db::OpenMode::kReadOnly);
    return *db::GetRunSummary(**db, run);
  }
};

}  // namespace ladder::coordinator::testing
