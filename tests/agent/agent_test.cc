// The agent against a real coordinator in one process (loopback gRPC, a real SQLite file), with
// a runner of the test's own: what the agent does when a runner breaks the design.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "ladder/agent/agent.h"
#include "ladder/agent/cell_check.h"
#include "ladder/coordinator/coordinator.h"
#include "ladder/db/query.h"
#include "ladder/db/sqlite.h"
#include "process.h"

namespace ladder::agent {
namespace {

// A "kernel" runner that reports time_us but never time_us_min: every attempt it runs leaves
// required slots of the design empty.
class ForgetfulRunner final : public runner::Runner {
 public:
  std::string_view name() const override { return "kernel"; }
  absl::Status Run(const runner::UnitWork& unit, runner::MeasurementSink& sink) override {
    for (int p = 0; p < unit.processes; ++p) {
      for (int r = 0; r < unit.rounds; ++r) {
        for (const auto& cell : unit.cells) {
          for (const auto& [metric, u] :
               {std::pair{"time_us", "us"}, {"bytes_per_s", "B/s"}, {"segments", "1"}}) {
            if (auto s = sink.Record(runner::Measurement{cell.cell_id, p, r, metric, 1.0, u});
                !s.ok()) {
              return s;
            }
          }
        }
      }
    }
    return absl::OkStatus();
  }
};

TEST(Agent, ARunnerThatLeavesTheDesignUnfilledFailsItsCellsWithTheReason) {
  ladder::testing::TempDir dir;
  coordinator::CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = dir.File("results.db");
  options.heartbeat_interval_ms = 200;
  options.scheduler.runners = &RunnerSchemasWithChecks();
  auto coordinator = coordinator::Coordinator::Start(options);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();

  AgentOptions agent_options;
  agent_options.coordinator = (*coordinator)->address();
  agent_options.spool_path = dir.File("spool.db");
  agent_options.lease_wait_ms = 200;
  auto agent = Agent::Create(agent_options);
  ASSERT_TRUE(agent.ok()) << agent.status();
  (*agent)->AddRunner(std::make_unique<ForgetfulRunner>());
  std::thread running([&] { EXPECT_TRUE((*agent)->Run().ok()); });

  // Submitted as a user would, with the CLI against this coordinator.
  ladder::testing::WriteFile(dir.File("m.yaml"),
                             "name: forgetful\nrunner: kernel\naxes: {depth: [64]}\n"
                             "fixed: {backend: cpu, preset: tiny}\nmax_attempts: 1\n"
                             "replicates: {sessions: 1, processes: 1, rounds: 2}\n");
  auto submitted =
      ladder::testing::RunCommand({ladder::testing::LadderBinary(), "submit", dir.File("m.yaml"),
                                   "--wait", "--coordinator", (*coordinator)->address()},
                                  std::chrono::seconds(60));
  // The cell fails (exit 4) at once with the reason, instead of waiting for a lease to expire.
  EXPECT_EQ(submitted.exit_code, 4) << submitted.err;
  auto db = db::Database::Open(dir.File("results.db"), db::OpenMode::kReadOnly);
  ASSERT_TRUE(db.ok());
  auto summary = db::GetRunSummary(**db, 1);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->cells_failed, 1);
  ASSERT_FALSE(summary->failure_reasons.empty());
  EXPECT_NE(summary->failure_reasons[0].find("the runner did not fill the design"),
            std::string::npos)
      << summary->failure_reasons[0];
  auto valid = (*db)->Prepare("SELECT COUNT(*) FROM valid_measurements");
  ASSERT_TRUE(valid.ok() && *valid->Step());
  EXPECT_EQ(valid->Int(0), 0) << "an incomplete attempt counted";
  (*agent)->Stop(StopMode::kRelease);
  running.join();
  (*coordinator)->Shutdown();
}

}  // namespace
}  // namespace ladder::agent
