// The scheduler under concurrent callers, without gRPC: sessions leasing (long polls), reporting
// and finishing in groups, a reaper ticking, all on their own threads. It is what the
// ThreadSanitizer build checks (CI runs it there); here it asserts that every unit is done
// exactly once and every result stored once.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler_harness.h"

namespace ladder::coordinator::testing {
namespace {

std::string ManyUnits(int n) {
  std::string yaml = "name: concurrent\nrunner: kernel\naxes:\n  depth: [";
  for (int i = 1; i <= n; ++i) yaml += (i > 1 ? ", " : "") + std::to_string(i * 16);
  yaml += "]\n  path: [2d, 3d]\npair: [path]\nreplicates: {sessions: 1, processes: 1, rounds: 2}\n";
  return yaml;
}

TEST(SchedulerConcurrency, SessionsLeasingReportingAndFinishingTogetherDoEachUnitOnce) {
  Harness h;
  constexpr int kUnits = 120;
  constexpr int kSessions = 4;
  for (int s = 0; s < kSessions; ++s) h.AddSession("session-" + std::to_string(s), "host");
  const std::string yaml = ManyUnits(kUnits);
  const int64_t run = h.Submit(yaml.c_str());

  std::atomic<bool> stop{false};
  std::atomic<int> finished{0};
  std::thread reaper([&] {
    while (!stop) {
      EXPECT_TRUE(h.scheduler->Tick().ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::vector<std::thread> sessions;
  for (int s = 0; s < kSessions; ++s) {
    sessions.emplace_back([&, s] {
      const std::string session = "session-" + std::to_string(s);
      std::vector<db::ReportIn> reports;
      std::vector<FinishIn> finishes;
      // Ends the held attempts in groups of up to three, as the report writer batches them.
      auto flush = [&] {
        if (reports.empty()) return;
        for (const auto& r : h.scheduler->ReportBatch(reports)) EXPECT_TRUE(r.ok()) << r.status();
        for (const auto& f : h.scheduler->FinishBatch(finishes)) {
          ASSERT_TRUE(f.ok()) << f.status();
          EXPECT_TRUE(f->accepted) << f->detail;
          finished++;
        }
        reports.clear();
        finishes.clear();
      };
      while (finished + static_cast<int>(finishes.size()) < kUnits) {
        auto lease = h.scheduler->LeaseFor(session, reports.empty() ? 20 : 0);
        ASSERT_TRUE(lease.ok()) << lease.status();
        if (!lease->has_value()) {
          flush();
          continue;
        }
        db::ReportIn report{session, {}, {}, {}};
        for (const auto& cell : (*lease)->cells) {
          for (int round = 0; round < 2; ++round) {
            report.measurements.push_back(db::MeasurementIn{
                absl::StrCat("m-", (*lease)->attempt_id, "-", cell.id, "-", round),
                (*lease)->attempt_id, cell.id, 0, round, "time_us", 1.0 + round, "us", 0});
          }
        }
        finishes.push_back(Succeeded(session, (*lease)->attempt_id,
                                     static_cast<int64_t>(report.measurements.size())));
        reports.push_back(std::move(report));
        if (reports.size() == 3) flush();
        h.scheduler->Heartbeat(session, {}).IgnoreError();
      }
      flush();
    });
  }
  for (auto& t : sessions) t.join();
  stop = true;
  reaper.join();

  EXPECT_EQ(finished, kUnits);
  const db::RunSummary summary = h.Summary(run);
  EXPECT_EQ(summary.state, db::RunState::kDone);
  EXPECT_EQ(summary.units_done, kUnits);
  EXPECT_EQ(summary.measurements, kUnits * 2 * 2);
  EXPECT_EQ(h.scheduler->live_attempts(), 0);
}

}  // namespace
}  // namespace ladder::coordinator::testing
