// The spine end to end: a real coordinator process, two real agent processes on loopback,
// a real SQLite file, driven by the real CLI.
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include "fleet.h"
#include "process.h"

namespace ladder::testing {
namespace {

TEST(Spine, CoordinatorAndThreeAgentsRunTheDemoMatrix) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  int port = 0;
  auto coordinator =
      StartCoordinator(dir, db, &port, {"--heartbeat-ms", "500", "--lease-ms", "5000"});
  ASSERT_GT(port, 0) << coordinator->Log();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  auto a = StartAgent(dir, port, "a");
  auto b = StartAgent(dir, port, "b");
  auto c = StartAgent(dir, port, "c");  // the demo asks for 3 sessions per cell

  const std::string matrix = std::string(LADDER_EXAMPLES_DIR) + "/demo-cpu.yaml";
  auto submit = RunCommand({LadderBinary(), "submit", matrix, "--wait", "--coordinator", address});
  ASSERT_EQ(submit.exit_code, 0) << submit.out << submit.err << coordinator->Log();
  const std::string run = LastLine(submit.out);
  EXPECT_EQ(run, "1");

  auto status = RunCommand({LadderBinary(), "status", run, "--coordinator", address});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("DONE: every cell completed."), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("12 done, 0 failed, 12 total"), std::string::npos) << status.out;

  auto query = RunCommand({LadderBinary(), "query", run, "--coordinator", address, "--json"});
  ASSERT_EQ(query.exit_code, 0) << query.err;
  auto result = nlohmann::json::parse(query.out);
  ASSERT_EQ(result["rows"].size(), 12u);
  for (const auto& row : result["rows"]) {
    // 3 sessions x 2 processes x 3 rounds per cell, from three distinct sessions.
    EXPECT_EQ(row["n"], 18) << row.dump();
    EXPECT_EQ(row["sessions"], 3) << row.dump();
    EXPECT_GT(row["median"].get<double>(), 0);
  }
  EXPECT_EQ(result["rows"][0]["group"]["depth"], 256);
  EXPECT_EQ(result["rows"][0]["group"]["path"], "2d");

  // The table groups by the axes asked for.
  auto table =
      RunCommand({LadderBinary(), "query", run, "--coordinator", address, "--by", "depth,path"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("depth  path"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" 4096  3d"), std::string::npos) << table.out;

  // Offline, on the file, without the coordinator.
  auto offline = RunCommand({LadderBinary(), "query", run, "--db", db, "--csv"});
  ASSERT_EQ(offline.exit_code, 0) << offline.err;
  EXPECT_EQ(std::count(offline.out.begin(), offline.out.end(), '\n'), 13);

  auto sessions = RunCommand({LadderBinary(), "sessions", "--coordinator", address, "--json"});
  ASSERT_EQ(sessions.exit_code, 0);
  auto listed = nlohmann::json::parse(sessions.out);
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_FALSE(listed[0]["inventory"]["boot_id"].get<std::string>().empty());
  EXPECT_GT(listed[0]["inventory"]["cpu_cores"].get<int>(), 0);

  ExpectExactlyOnce(db, 1, 18);

  // Agents leave cleanly on SIGTERM.
  a->Signal(SIGTERM);
  b->Signal(SIGTERM);
  c->Signal(SIGTERM);
  EXPECT_EQ(a->Wait(std::chrono::seconds(20)), 0) << a->Log();
  EXPECT_EQ(b->Wait(std::chrono::seconds(20)), 0) << b->Log();
  EXPECT_EQ(c->Wait(std::chrono::seconds(20)), 0) << c->Log();
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM sessions WHERE state = 'gone'"), 3);
  coordinator->Signal(SIGTERM);
  EXPECT_EQ(coordinator->Wait(std::chrono::seconds(20)), 0) << coordinator->Log();
}

TEST(Spine, CancelStopsARunAndAgentsMoveOn) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  int port = 0;
  auto coordinator =
      StartCoordinator(dir, db, &port, {"--heartbeat-ms", "300", "--lease-ms", "5000"});
  ASSERT_GT(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("slow.yaml"), R"(
name: slow
runner: kernel
axes:
  depth: [16384, 32768]
  path: [2d, 3d]
fixed: {backend: cpu, preset: tiny, dtype: f32, repeats: 50, warmup: 1}
pair: [path]
replicates: {sessions: 1, processes: 1, rounds: 20}
)");
  auto submit =
      RunCommand({LadderBinary(), "submit", dir.File("slow.yaml"), "--coordinator", address});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  auto a = StartAgent(dir, port, "a");
  ASSERT_TRUE(WaitFor([&] { return QueryInt(db, "SELECT COUNT(*) FROM attempts") > 0; },
                      std::chrono::seconds(30)));
  auto cancel = RunCommand({LadderBinary(), "cancel", "1", "--coordinator", address});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_NE(cancel.out.find("CANCELLED"), std::string::npos);
  // The agent learns it at its next heartbeat and stops the unit.
  EXPECT_TRUE(
      WaitFor([&] { return a->Log().find("cancelled by the coordinator") != std::string::npos; },
              std::chrono::seconds(30)))
      << a->Log();
  EXPECT_EQ(QueryText(db, "SELECT state FROM runs WHERE id = 1"), "cancelled");
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM attempts WHERE state = 'leased'"), 0);
  // A new run is served by the same agent.
  WriteFile(dir.File("quick.yaml"),
            "name: quick\nrunner: kernel\naxes: {depth: [64]}\n"
            "fixed: {backend: cpu, preset: tiny, dtype: f32}\n");
  auto quick = RunCommand(
      {LadderBinary(), "submit", dir.File("quick.yaml"), "--wait", "--coordinator", address});
  EXPECT_EQ(quick.exit_code, 0) << quick.err << a->Log();
}

}  // namespace
}  // namespace ladder::testing
