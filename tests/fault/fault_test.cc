// Faults that really happen to a fleet, done for real: processes are SIGKILLed mid-run.
// Each test ends with the same check: the run completes and every measured value is in the
// database exactly once.
#include <gtest/gtest.h>
#include <signal.h>

#include "fleet.h"
#include "process.h"
#include "proxy.h"

namespace ladder::testing {
namespace {

// ~1 s units on a 2-core machine, so a kill lands mid-unit.
constexpr const char* kSlowMatrix = R"(
name: fault-ladder
runner: kernel
axes:
  depth: [4096, 8192, 16384]
  path: [2d, 3d]
fixed: {backend: cpu, preset: tiny, dtype: f32, repeats: 8, warmup: 1}
pair: [path]
replicates: {sessions: 1, processes: 1, rounds: 4}
)";
constexpr int64_t kPerCell = 1 * 1 * 4;

TEST(Faults, AgentKilledMidUnitIsRequeuedAndFinishedByAnother) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  int port = 0;
  auto coordinator =
      StartCoordinator(dir, db, &port, {"--lease-ms", "2000", "--heartbeat-ms", "400"});
  ASSERT_GT(port, 0) << coordinator->Log();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("m.yaml"), kSlowMatrix);
  auto victim = StartAgent(dir, port, "victim");
  ASSERT_TRUE(WaitFor([&] { return !SessionOf(db, "victim").empty(); }, std::chrono::seconds(30)));
  auto submit =
      RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--coordinator", address});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string victim_session = SessionOf(db, "victim");
  // Wait until the victim holds a lease and has reported part of it, then kill it.
  ASSERT_TRUE(WaitFor(
      [&] {
        return QueryInt(db,
                        "SELECT COUNT(*) FROM measurements m JOIN attempts a ON a.id = "
                        "m.attempt_id WHERE a.state = 'leased' AND a.session_id = '" +
                            victim_session + "'") > 0;
      },
      std::chrono::seconds(60)))
      << victim->Log();
  victim->Signal(SIGKILL);
  victim->Wait(std::chrono::seconds(5));
  auto survivor = StartAgent(dir, port, "survivor");
  auto watch = RunCommand({LadderBinary(), "watch", "1", "--coordinator", address},
                          std::chrono::seconds(240));
  ASSERT_EQ(watch.exit_code, 0) << watch.err << coordinator->Log();
  // The killed attempt expired, and its unit was completed by the survivor.
  EXPECT_GE(
      QueryInt(db, "SELECT COUNT(*) FROM attempts WHERE state = 'expired' AND session_id = '" +
                       victim_session + "'"),
      1);
  EXPECT_EQ(
      QueryInt(db, "SELECT COUNT(*) FROM attempts WHERE state = 'done' AND session_id = '" +
                       victim_session + "'") +
          QueryInt(db, "SELECT COUNT(*) FROM attempts WHERE state = 'done' AND session_id = '" +
                           SessionOf(db, "survivor") + "'"),
      3);
  // The victim's partial results are kept, but none of them counts.
  EXPECT_EQ(QueryInt(db,
                     "SELECT COUNT(*) FROM valid_measurements m JOIN attempts a ON a.id = "
                     "m.attempt_id WHERE a.state != 'done'"),
            0);
  ExpectExactlyOnce(db, 1, kPerCell);
}

TEST(Faults, CoordinatorKilledMidRunRestartsAndTheRunCompletes) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  int port = 0;
  auto coordinator =
      StartCoordinator(dir, db, &port, {"--lease-ms", "4000", "--heartbeat-ms", "400"});
  ASSERT_GT(port, 0) << coordinator->Log();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("m.yaml"), kSlowMatrix);
  auto a = StartAgent(dir, port, "a");
  auto b = StartAgent(dir, port, "b");
  auto submit =
      RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--coordinator", address});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  ASSERT_TRUE(WaitFor([&] { return QueryInt(db, "SELECT COUNT(*) FROM measurements") > 10; },
                      std::chrono::seconds(60)));
  coordinator->Signal(SIGKILL);
  ASSERT_TRUE(coordinator->Wait(std::chrono::seconds(5)).has_value());
  // Agents keep measuring into their spools while the coordinator is gone.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  int port2 = 0;
  auto restarted = StartCoordinator(
      dir, db, &port2, {"--lease-ms", "4000", "--heartbeat-ms", "400"}, port, "coordinator2.log");
  ASSERT_EQ(port2, port) << restarted->Log();
  auto watch = RunCommand({LadderBinary(), "watch", "1", "--coordinator", address},
                          std::chrono::seconds(240));
  ASSERT_EQ(watch.exit_code, 0) << watch.err << restarted->Log();
  ExpectExactlyOnce(db, 1, kPerCell);
  // Nothing is left behind in the agents' spools.
  a->Signal(SIGTERM);
  b->Signal(SIGTERM);
  EXPECT_EQ(a->Wait(std::chrono::seconds(20)), 0) << a->Log();
  EXPECT_EQ(b->Wait(std::chrono::seconds(20)), 0) << b->Log();
  EXPECT_EQ(QueryInt(dir.File("a-spool.db"), "SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(QueryInt(dir.File("b-spool.db"), "SELECT COUNT(*) FROM results"), 0);
}

TEST(Faults, AgentAndCoordinatorKilledTogether) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  int port = 0;
  auto coordinator =
      StartCoordinator(dir, db, &port, {"--lease-ms", "2000", "--heartbeat-ms", "400"});
  ASSERT_GT(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("m.yaml"), kSlowMatrix);
  auto a = StartAgent(dir, port, "a");
  auto b = StartAgent(dir, port, "b");
  ASSERT_EQ(RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--coordinator", address})
                .exit_code,
            0);
  ASSERT_TRUE(WaitFor([&] { return QueryInt(db, "SELECT COUNT(*) FROM measurements") > 10; },
                      std::chrono::seconds(60)));
  a->Signal(SIGKILL);
  coordinator->Signal(SIGKILL);
  a->Wait(std::chrono::seconds(5));
  coordinator->Wait(std::chrono::seconds(5));
  int port2 = 0;
  auto restarted = StartCoordinator(
      dir, db, &port2, {"--lease-ms", "2000", "--heartbeat-ms", "400"}, port, "coordinator2.log");
  ASSERT_EQ(port2, port) << restarted->Log();
  // The killed agent comes back (same disk, new session) and delivers what its spool held.
  auto a2 = StartAgent(dir, port, "a");
  auto watch = RunCommand({LadderBinary(), "watch", "1", "--coordinator", address},
                          std::chrono::seconds(240));
  ASSERT_EQ(watch.exit_code, 0) << watch.err << restarted->Log();
  ExpectExactlyOnce(db, 1, kPerCell);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(DISTINCT session_id) FROM attempts"), 3);
}

TEST(Faults, PreemptedAgentFinishesItsUnitWithinTheGrace) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  int port = 0;
  auto coordinator =
      StartCoordinator(dir, db, &port, {"--lease-ms", "4000", "--heartbeat-ms", "400"});
  ASSERT_GT(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("m.yaml"), kSlowMatrix);
  auto spot = StartAgent(dir, port, "spot", {"--grace", "finish", "--grace-seconds", "120"});
  ASSERT_EQ(RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--coordinator", address})
                .exit_code,
            0);
  ASSERT_TRUE(WaitFor([&] { return QueryInt(db, "SELECT COUNT(*) FROM measurements") > 0; },
                      std::chrono::seconds(60)));
  const int64_t leased = QueryInt(db, "SELECT MAX(id) FROM attempts");
  // The cloud's preemption notice: SIGTERM, then a grace period.
  spot->Signal(SIGTERM);
  // The event: the agent exits once its unit's results and finish are acknowledged (bounded by
  // its grace, 120 s, and this generous wait; no timing is asserted).
  auto code = spot->Wait(std::chrono::seconds(180));
  ASSERT_TRUE(code.has_value()) << "the agent overran its grace period";
  EXPECT_EQ(*code, 0) << spot->Log();
  // The unit it held was finished and delivered, not abandoned: done, every value of its
  // design stored, nothing left in the spool, and nothing else was started.
  EXPECT_EQ(QueryText(db, "SELECT state FROM attempts WHERE id = " + std::to_string(leased)),
            "done")
      << spot->Log();
  EXPECT_EQ(spot->Log().find("still in the spool"), std::string::npos) << spot->Log();
  EXPECT_EQ(QueryInt(db,
                     "SELECT COUNT(*) FROM attempts WHERE session_id = (SELECT session_id "
                     "FROM attempts WHERE id = " +
                         std::to_string(leased) + ")"),
            1);
  // A replacement VM picks up the rest.
  auto replacement = StartAgent(dir, port, "replacement");
  auto watch = RunCommand({LadderBinary(), "watch", "1", "--coordinator", address},
                          std::chrono::seconds(240));
  ASSERT_EQ(watch.exit_code, 0) << watch.err;
  ExpectExactlyOnce(db, 1, kPerCell);
}

TEST(Faults, FrozenAgentsLateResultsAreStaleNotDoubleCounted) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  int port = 0;
  auto coordinator =
      StartCoordinator(dir, db, &port, {"--lease-ms", "2000", "--heartbeat-ms", "400"});
  ASSERT_GT(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("m.yaml"), kSlowMatrix);
  auto slow = StartAgent(dir, port, "slow");
  ASSERT_TRUE(WaitFor([&] { return !SessionOf(db, "slow").empty(); }, std::chrono::seconds(30)));
  const std::string slow_session = SessionOf(db, "slow");
  ASSERT_EQ(RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--coordinator", address})
                .exit_code,
            0);
  ASSERT_TRUE(WaitFor([&] { return QueryInt(db, "SELECT COUNT(*) FROM attempts") > 0; },
                      std::chrono::seconds(60)));
  // Frozen (a stalled VM, or one cut off from the network) for longer than its lease.
  slow->Signal(SIGSTOP);
  auto other = StartAgent(dir, port, "other");
  ASSERT_TRUE(WaitFor(
      [&] {
        return QueryInt(db,
                        "SELECT COUNT(*) FROM attempts WHERE state = 'expired' AND "
                        "session_id = '" +
                            slow_session + "'") > 0;
      },
      std::chrono::seconds(60)));
  // It wakes up, finishes its measurement, and reports late.
  slow->Signal(SIGCONT);
  auto watch = RunCommand({LadderBinary(), "watch", "1", "--coordinator", address},
                          std::chrono::seconds(240));
  ASSERT_EQ(watch.exit_code, 0) << watch.err;
  ExpectExactlyOnce(db, 1, kPerCell);
  // Whatever it measured for the expired attempt is kept but never counts.
  EXPECT_EQ(
      QueryInt(db, "SELECT COUNT(*) FROM valid_measurements WHERE session_id = '" + slow_session +
                       "' AND attempt_id IN (SELECT id FROM attempts WHERE "
                       "state != 'done')"),
      0);
}

TEST(Faults, FullDiskFailsLoudlyAndNothingUnstoredIsAcknowledged) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  int port = 0;
  auto full = StartCoordinator(
      dir, db, &port,
      {"--lease-ms", "3000", "--heartbeat-ms", "400", "--fault-db-growth-pages", "3"});
  ASSERT_GT(port, 0) << full->Log();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("m.yaml"), kSlowMatrix);
  auto a = StartAgent(dir, port, "a");
  ASSERT_EQ(RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--coordinator", address})
                .exit_code,
            0);
  // The disk fills: writes fail loudly and the agent keeps what it measured.
  ASSERT_TRUE(WaitFor([&] { return full->Log().find("full") != std::string::npos; },
                      std::chrono::seconds(90)))
      << full->Log();
  ASSERT_TRUE(
      WaitFor([&] { return QueryInt(dir.File("a-spool.db"), "SELECT COUNT(*) FROM results") > 0; },
              std::chrono::seconds(30)));
  full->Signal(SIGKILL);
  full->Wait(std::chrono::seconds(5));
  // Space is freed (a coordinator without the limit): everything arrives, exactly once.
  int port2 = 0;
  auto restarted = StartCoordinator(
      dir, db, &port2, {"--lease-ms", "3000", "--heartbeat-ms", "400"}, port, "coordinator2.log");
  ASSERT_EQ(port2, port) << restarted->Log();
  auto watch = RunCommand({LadderBinary(), "watch", "1", "--coordinator", address},
                          std::chrono::seconds(240));
  ASSERT_EQ(watch.exit_code, 0) << watch.err << restarted->Log();
  ExpectExactlyOnce(db, 1, kPerCell);
  a->Signal(SIGTERM);
  EXPECT_EQ(a->Wait(std::chrono::seconds(30)), 0) << a->Log();
  EXPECT_EQ(QueryInt(dir.File("a-spool.db"), "SELECT COUNT(*) FROM results"), 0);
}

TEST(Faults, NetworkCutLongerThanTheLease) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  int port = 0;
  auto coordinator =
      StartCoordinator(dir, db, &port, {"--lease-ms", "2000", "--heartbeat-ms", "400"});
  ASSERT_GT(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  TcpProxy link(port);
  WriteFile(dir.File("m.yaml"), kSlowMatrix);
  // The remote agent reaches the coordinator only through the link we control.
  auto remote = StartAgent(dir, link.port(), "remote");
  ASSERT_TRUE(WaitFor([&] { return !SessionOf(db, "remote").empty(); }, std::chrono::seconds(30)));
  const std::string remote_session = SessionOf(db, "remote");
  ASSERT_EQ(RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--coordinator", address})
                .exit_code,
            0);
  ASSERT_TRUE(WaitFor([&] { return QueryInt(db, "SELECT COUNT(*) FROM measurements") > 0; },
                      std::chrono::seconds(60)));
  link.Cut();
  // Its lease expires on the coordinator's side while it keeps measuring into its spool.
  ASSERT_TRUE(WaitFor(
      [&] {
        return QueryInt(db,
                        "SELECT COUNT(*) FROM attempts WHERE state = 'expired' AND "
                        "session_id = '" +
                            remote_session + "'") > 0;
      },
      std::chrono::seconds(30)));
  auto local = StartAgent(dir, port, "local");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  link.Restore();
  auto watch = RunCommand({LadderBinary(), "watch", "1", "--coordinator", address},
                          std::chrono::seconds(240));
  ASSERT_EQ(watch.exit_code, 0) << watch.err;
  ExpectExactlyOnce(db, 1, kPerCell);
  // After the link heals the remote agent delivers everything it kept (on its own, when its
  // backoff next tries: SIGTERM's drain is bounded, so it is not what delivers them), then
  // leaves cleanly.
  EXPECT_TRUE(WaitFor(
      [&] { return QueryInt(dir.File("remote-spool.db"), "SELECT COUNT(*) FROM results") == 0; },
      std::chrono::seconds(90)))
      << remote->Log();
  remote->Signal(SIGTERM);
  EXPECT_EQ(remote->Wait(std::chrono::seconds(60)), 0) << remote->Log();
  EXPECT_EQ(QueryInt(dir.File("remote-spool.db"), "SELECT COUNT(*) FROM results"), 0)
      << remote->Log();
  EXPECT_NE(remote->Log().find("retrying"), std::string::npos) << remote->Log();
}

}  // namespace
}  // namespace ladder::testing
