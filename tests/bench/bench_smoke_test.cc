// Runs ladder-bench-coordinator briefly and checks its own exactly-once verdict and numbers.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

struct Output {
  int exit_code = -1;
  std::string out;
};

Output RunBench(const std::string& args) {
  Output result;
  const std::string command = std::string(LADDER_BENCH_BINARY) + " " + args + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TEST(CoordinatorBench, TwentyAgentsEveryMeasurementStoredExactlyOnce) {
  const Output run = RunBench("--agents 20 --seconds 3 --cells 3000 --per-cell 4 --json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const auto json = nlohmann::json::parse(run.out, nullptr, false);
  ASSERT_TRUE(json.is_array() && json.size() == 1) << run.out;
  const auto& point = json[0];
  EXPECT_EQ(point["agents"], 20);
  EXPECT_EQ(point["errors"], 0) << point.dump(2);
  EXPECT_TRUE(point["exactly_once"].get<bool>()) << point.dump(2);
  EXPECT_GT(point["measurements_acked"].get<int64_t>(), 0);
  EXPECT_EQ(point["db_rows"], point["measurements_acked"]);
  EXPECT_EQ(point["db_distinct"], point["db_rows"]);
  // Every finished unit reported 4 measurements for its one cell.
  EXPECT_EQ(point["measurements_acked"].get<int64_t>(), 4 * point["units_done"].get<int64_t>());
  EXPECT_GT(point["leases"].get<int64_t>(), 0);
  EXPECT_GT(point["rss_after_kib"].get<int64_t>(), 0);
  // The coordinator runs in a process of its own, measured apart from the agents.
  EXPECT_GT(point["coordinator_rss_after_kib"].get<int64_t>(), 0);
  EXPECT_GT(point["coordinator_cpu_s"].get<double>(), 0);
}

TEST(CoordinatorBench, MatrixSmallerThanTheWindowCompletes) {
  // 200 units for 20 agents: the run ends early when every unit is done.
  const Output run = RunBench("--agents 20 --seconds 30 --cells 200 --per-cell 8 --json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const auto json = nlohmann::json::parse(run.out, nullptr, false);
  ASSERT_TRUE(json.is_array() && json.size() == 1) << run.out;
  EXPECT_EQ(json[0]["units_done"], 200) << json[0].dump(2);
  EXPECT_EQ(json[0]["measurements_acked"], 1600);  // 2 rounds x the 4 required metrics
  EXPECT_TRUE(json[0]["exactly_once"].get<bool>());
  EXPECT_LT(json[0]["window_s"].get<double>(), 29.0);
}

}  // namespace
