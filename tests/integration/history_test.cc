// The demo of docs/history.md end to end: matrices/examples/history-cpu.yaml run five times by
// `ladder local` into one database (a real coordinator and real agents over loopback gRPC), the
// first three with ladder's example sort, the last two with the same program built with a planted
// 3x slowdown (ladder-example-bench-slow: it sorts each round's data three times). `ladder
// history` names the baseline and flags run 4 as where it began, with the tag that changed there;
// `ladder compare --against baseline latest --fail-on slower` exits 5; bad input exits 2 with the
// reason. The series judged is the sort's comparisons, which the program counts: its work, which
// no load on a shared CI machine moves (its time there swung by -38 % to +590 % between runs of
// one build and of the other, and the time series is what a quiet machine shows in the docs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fleet.h"
#include "process.h"

namespace ladder::testing {
namespace {

CommandResult LocalHistoryRun(const std::string& db, const std::string& bench,
                              const std::string& build) {
  return RunCommand(
      {LadderBinary(), "local", std::string(LADDER_EXAMPLES_DIR) + "/history-cpu.yaml", "--db", db,
       "--agents", "5", "--bench", "sorter=" + bench, "--tag", "build=" + build},
      std::chrono::seconds(280));
}

TEST(History, FiveRunsWithAPlantedSlowdownFromTheFourthAreFlaggedWhereItBegan) {
  TempDir dir;
  const std::string db = dir.File("h.db");
  for (int i = 1; i <= 5; ++i) {
    const bool slow = i >= 4;
    auto run = LocalHistoryRun(db, slow ? LADDER_EXAMPLE_BENCH_SLOW : LADDER_EXAMPLE_BENCH,
                               slow ? "slow" : "good");
    ASSERT_EQ(run.exit_code, 0) << "run " << i << "\n" << run.out << run.err;
  }
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM runs WHERE state = 'done'"), 5);
  EXPECT_EQ(QueryText(db,
                      "SELECT group_concat(value, ',') FROM (SELECT value FROM run_tags "
                      "WHERE key = 'build' ORDER BY run_id)"),
            "good,good,good,slow,slow");

  auto set = RunCommand({LadderBinary(), "baseline", "set", "1", "--db", db});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find("baseline 'default' of matrix history-cpu: run 1"), std::string::npos)
      << set.out;
  auto listed = RunCommand({LadderBinary(), "baseline", "list", "--db", db, "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const auto baselines = nlohmann::json::parse(listed.out);
  ASSERT_EQ(baselines.size(), 1u) << listed.out;
  EXPECT_EQ(baselines[0]["run_id"], 1);

  auto history = RunCommand(
      {LadderBinary(), "history", "history-cpu", "--db", db, "--json", "--metric", "comparisons"});
  ASSERT_EQ(history.exit_code, 0) << history.err;
  const auto h = nlohmann::json::parse(history.out);
  const std::string shown =
      RunCommand({LadderBinary(), "history", "history-cpu", "--db", db, "--metric", "comparisons"})
          .out;
  SCOPED_TRACE(shown);
  EXPECT_EQ(h["baseline"]["run_id"], 1);
  EXPECT_EQ(h["baseline"]["name"], "default");
  ASSERT_EQ(h["runs"].size(), 5u);
  ASSERT_EQ(h["series"].size(), 2u);
  for (const auto& s : h["series"]) {
    ASSERT_EQ(s["points"].size(), 5u) << s.dump();
    EXPECT_EQ(s["points"][4]["matrix_verdict"], "slower") << s.dump();
    const auto& cp = s["change_point"];
    ASSERT_TRUE(cp.is_object()) << s.dump();
    EXPECT_TRUE(cp["located"].get<bool>()) << cp.dump();
    EXPECT_EQ(cp["first_run"], 4) << cp.dump();
    ASSERT_FALSE(cp["changes"].empty()) << cp.dump();
    EXPECT_EQ(cp["changes"][0], "tag build: good → slow") << cp.dump();
    EXPECT_FALSE(s["points"][2]["moved"].get<bool>());
    EXPECT_TRUE(s["points"][3]["moved"].get<bool>());
  }
  auto text =
      RunCommand({LadderBinary(), "history", "history-cpu", "--db", db, "--metric", "comparisons"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Baseline: baseline 'default' (run 1)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("began at run 4"), std::string::npos) << text.out;

  auto gate = RunCommand({LadderBinary(), "compare", "--against", "baseline", "latest", "--db", db,
                          "--fail-on", "slower", "--metric", "comparisons"});
  EXPECT_EQ(gate.exit_code, 5) << gate.out << gate.err;
  EXPECT_NE(gate.out.find("run 5 vs run 1"), std::string::npos) << gate.out;
  auto positional = RunCommand({LadderBinary(), "compare", "baseline", "3", "--db", db, "--fail-on",
                                "slower", "--metric", "comparisons"});
  EXPECT_EQ(positional.exit_code, 0) << positional.out << positional.err;

  // Bad input: the right exit code and the reason.
  auto unknown_matrix = RunCommand({LadderBinary(), "history", "no-such-matrix", "--db", db});
  EXPECT_EQ(unknown_matrix.exit_code, 2);
  EXPECT_NE(unknown_matrix.err.find("no matrix named 'no-such-matrix'"), std::string::npos)
      << unknown_matrix.err;
  auto unknown_name =
      RunCommand({LadderBinary(), "compare", "--against", "before-upgrade", "latest", "--db", db});
  EXPECT_EQ(unknown_name.exit_code, 2);
  EXPECT_NE(unknown_name.err.find("has no baseline named 'before-upgrade'; its baselines: "
                                  "default"),
            std::string::npos)
      << unknown_name.err;
  auto bad_name = RunCommand({LadderBinary(), "baseline", "set", "1", "--name", "a b", "--db", db});
  EXPECT_EQ(bad_name.exit_code, 2) << bad_name.err;
  auto bad_tag = RunCommand({LadderBinary(), "local", "--db", db, "--tag", "no-equals-sign"});
  EXPECT_EQ(bad_tag.exit_code, 2);
  EXPECT_NE(bad_tag.err.find("expected KEY=VALUE"), std::string::npos) << bad_tag.err;
  // A run of another matrix is not this series' baseline.
  WriteFile(dir.File("other.yaml"),
            "name: other\nrunner: command\ncommand:\n  bench: sorter\n  args: [\"--size\", "
            "\"{size}\", \"--rounds\", \"{rounds}\"]\nmetrics:\n  time_us: {unit: us, better: "
            "lower}\naxes:\n  size: [1000]\nreplicates: {sessions: 1, processes: 1, rounds: 1}\n");
  auto other = RunCommand({LadderBinary(), "local", dir.File("other.yaml"), "--db", db, "--bench",
                           std::string("sorter=") + LADDER_EXAMPLE_BENCH},
                          std::chrono::seconds(120));
  ASSERT_EQ(other.exit_code, 0) << other.out << other.err;
  auto foreign =
      RunCommand({LadderBinary(), "history", "history-cpu", "--db", db, "--baseline-run", "6"});
  EXPECT_EQ(foreign.exit_code, 2);
  EXPECT_NE(foreign.err.find("run 6 is a run of matrix 'other'"), std::string::npos) << foreign.err;
  auto no_baseline = RunCommand({LadderBinary(), "compare", "--against", "baseline", "latest",
                                 "--db", db, "--fail-on", "slower"});
  EXPECT_EQ(no_baseline.exit_code, 2);
  EXPECT_NE(no_baseline.err.find("matrix 'other' has no baseline named 'default'"),
            std::string::npos)
      << no_baseline.err;
}

}  // namespace
}  // namespace ladder::testing
