// The CLI as a user meets it: exit codes, messages, the built-in demo.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "fleet.h"
#include "process.h"

namespace ladder::testing {
namespace {

TEST(Cli, ValidateReportsFileLineAndColumnAndExitsTwo) {
  TempDir dir;
  WriteFile(dir.File("bad.yaml"), "name: bad\nrunner: kernel\naxes:\n  depth: [1024, -1]\n");
  auto result = RunCommand({LadderBinary(), "validate", dir.File("bad.yaml")});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("bad.yaml:4:"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("axes.depth[1]"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("expected a positive integer, got -1"), std::string::npos)
      << result.err;
}

TEST(Cli, ValidateSummarisesAGoodMatrix) {
  auto result = RunCommand(
      {LadderBinary(), "validate", std::string(LADDER_EXAMPLES_DIR) + "/demo-cpu.yaml", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto summary = nlohmann::json::parse(result.out);
  EXPECT_EQ(summary["cells"], 12);
  EXPECT_EQ(summary["units"], 18);  // 6 depth x rows groups (paired on path) x 3 sessions
}

TEST(Cli, MissingFileAndUnreachableCoordinatorAreExplained) {
  auto missing = RunCommand({LadderBinary(), "validate", "/nonexistent/m.yaml"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("/nonexistent/m.yaml"), std::string::npos) << missing.err;
  auto unreachable = RunCommand({LadderBinary(), "status", "--coordinator", "127.0.0.1:1"},
                                std::chrono::seconds(60));
  EXPECT_NE(unreachable.exit_code, 0);
  EXPECT_NE(unreachable.err.find("cannot reach the coordinator at 127.0.0.1:1"), std::string::npos)
      << unreachable.err;
  auto bad_run = RunCommand({LadderBinary(), "query", "abc", "--db", "/nonexistent.db"});
  EXPECT_EQ(bad_run.exit_code, 2);
  EXPECT_NE(bad_run.err.find("RUN: expected a run id"), std::string::npos) << bad_run.err;
}

// A CA file the CLI cannot use is bad input (exit 2) naming the file, never a silent fall back
// to the system's roots (which the CLI once did, so a typo in --tls-ca still "worked" against a
// publicly signed coordinator and failed confusingly against a private one). The coordinator's
// agent side reads its files through the same helper (ladder/proto/tls.h).
TEST(Cli, AnUnreadableOrEmptyCaFileIsAnError) {
  TempDir dir;
  auto missing = RunCommand({LadderBinary(), "status", "--coordinator", "127.0.0.1:1", "--tls-ca",
                             dir.File("absent.pem")});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find("--tls-ca: cannot read " + dir.File("absent.pem")), std::string::npos)
      << missing.err;
  WriteFile(dir.File("empty.pem"), "");
  auto empty = RunCommand({LadderBinary(), "status", "--coordinator", "127.0.0.1:1", "--tls-ca",
                           dir.File("empty.pem")});
  EXPECT_EQ(empty.exit_code, 2) << empty.err;
  EXPECT_NE(empty.err.find("holds no PEM block"), std::string::npos) << empty.err;
  auto coordinator = RunCommand({LadderBinary(), "coordinator", "--listen", "127.0.0.1:0", "--db",
                                 dir.File("c.db"), "--tls-cert", dir.File("empty.pem"), "--tls-key",
                                 dir.File("empty.pem")});
  EXPECT_NE(coordinator.exit_code, 0);
  EXPECT_NE(coordinator.err.find("--tls-key: " + dir.File("empty.pem") + " holds no PEM block"),
            std::string::npos)
      << coordinator.err;
}

TEST(Cli, LocalRunsTheBuiltInDemoEndToEnd) {
  TempDir dir;
  const std::string db = dir.File("ladder.db");
  auto result = RunCommand({LadderBinary(), "local", "--db", db});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("metric time_us (us)"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("12 of 12 cells done, 0 failed"), std::string::npos) << result.out;
  ExpectExactlyOnce(db, 1, 18);  // 3 sessions x 2 processes x 3 rounds
  // Its own agents register before it submits, so it never warns that none are connected.
  EXPECT_EQ(result.err.find("waiting for an agent"), std::string::npos) << result.err;
  // Every read-only command answers from the file, with no coordinator running.
  auto status = RunCommand({LadderBinary(), "status", "1", "--db", db, "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const auto summary = nlohmann::json::parse(status.out);
  EXPECT_EQ(summary.value("state", ""), "done") << status.out;
  EXPECT_EQ(summary.value("cellsDone", ""), "12") << status.out;  // int64 in proto JSON: a string
  auto listed = RunCommand({LadderBinary(), "status", "--db", db});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("demo-cpu"), std::string::npos) << listed.out;
  auto sessions = RunCommand({LadderBinary(), "sessions", "--db", db, "--json"});
  ASSERT_EQ(sessions.exit_code, 0) << sessions.err;
  EXPECT_EQ(nlohmann::json::parse(sessions.out).size(), 3u) << sessions.out;
  auto no_run = RunCommand({LadderBinary(), "status", "9", "--db", db});
  EXPECT_EQ(no_run.exit_code, 1);
  EXPECT_NE(no_run.err.find("9"), std::string::npos) << no_run.err;
  auto no_file = RunCommand({LadderBinary(), "status", "--db", dir.File("absent.db")});
  EXPECT_EQ(no_file.exit_code, 2) << no_file.err;
  // The same database answers offline; an unknown run is a clear error.
  auto unknown = RunCommand({LadderBinary(), "query", "9", "--db", db});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("run 9 not found"), std::string::npos) << unknown.err;
  // Export writes a complete file or none.
  auto exported =
      RunCommand({LadderBinary(), "export", "1", "--db", db, "--csv", "-o", dir.File("run1.csv")});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const std::string csv = ReadFile(dir.File("run1.csv"));
  const int64_t rows = std::count(csv.begin(), csv.end(), '\n') - 1;
  EXPECT_EQ(rows, QueryInt(db, "SELECT COUNT(*) FROM measurements"));
  EXPECT_FALSE(std::filesystem::exists(dir.File("run1.csv.tmp")));
}

TEST(Cli, LocalRefusesABadMatrixAndLeavesTheDatabaseAsItWas) {
  TempDir dir;
  const std::string db = dir.File("ladder.db");
  ASSERT_EQ(RunCommand({LadderBinary(), "local", "--db", db}).exit_code, 0);
  const int64_t before = QueryInt(db, "SELECT COUNT(*) FROM runs");
  WriteFile(dir.File("bad.yaml"), "name: bad\nrunner: kernel\naxes: {depth: [1]}\nbogus: 1\n");
  auto result = RunCommand({LadderBinary(), "local", dir.File("bad.yaml"), "--db", db});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("bad.yaml:4:1"), std::string::npos) << result.err;
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM runs"), before);
}

// `ladder validate` and a coordinator's Submit (here through `ladder local`) refuse exactly the
// same matrices with the same messages, the runners' parameter checks included.
TEST(Cli, ValidateAndSubmitRefuseTheSameMatrices) {
  TempDir dir;
  const std::string db = dir.File("ladder.db");
  const std::vector<std::string> bad = {
      // The parser's check.
      "name: bad\nrunner: kernel\naxes:\n  depth: [1024, -1]\n",
      // The kernel runner's checks: an unknown parameter, a bad value, an undeclared metric.
      "name: bad\nrunner: kernel\naxes:\n  depth: [64]\n  spec: [off, k1]\n",
      "name: bad\nrunner: kernel\naxes: {depth: [64]}\nfixed:\n  backend: tpu\n",
      "name: bad\nrunner: kernel\naxes: {depth: [64]}\nmetric: decode_tok_s\n",
      // The engine runner's checks, every cell rendered through its recipe as the agent will:
      // each of these passed `validate` before and failed every cell at run time.
      // vLLM refuses a method outside its SpeculativeMethod literal.
      "name: bad\nrunner: engine\naxes:\n  spec: [\"off\", \"lookahead:4\"]\n  depth: [1024]\n"
      "fixed: {engine: vllm, model: m}\npair: [spec]\n",
      // llama.cpp: a flash_attn value it has not got.
      "name: bad\nrunner: engine\naxes:\n  flash_attn: [\"on\", \"maybe\"]\n  depth: [1024]\n"
      "fixed: {engine: llama.cpp, model: m.gguf}\npair: [flash_attn]\n",
      // SGLang needs a method with speculation.
      "name: bad\nrunner: engine\naxes:\n  spec_k: [0, 2]\n  depth: [1024]\n"
      "fixed: {engine: sglang, model: m}\npair: [spec_k]\n",
      // The runner's own settings: long_tokens must exceed short_tokens; a warm-up it knows.
      "name: bad\nrunner: engine\naxes: {depth: [1024]}\n"
      "fixed: {engine: synthetic, short_tokens: 64, long_tokens: 8}\n",
      "name: bad\nrunner: engine\naxes: {depth: [1024]}\nfixed: {engine: synthetic, warmup: "
      "twice}\n",
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    const std::string path = dir.File("bad" + std::to_string(i) + ".yaml");
    WriteFile(path, bad[i]);
    auto validated = RunCommand({LadderBinary(), "validate", path});
    auto submitted = RunCommand({LadderBinary(), "local", path, "--db", db});
    EXPECT_EQ(validated.exit_code, 2) << bad[i] << validated.err;
    EXPECT_EQ(submitted.exit_code, 2) << bad[i] << submitted.err;
    const std::string message = validated.err.substr(0, validated.err.find('\n'));
    EXPECT_NE(message.find(path + ":"), std::string::npos) << message;
    EXPECT_NE(submitted.err.find(message), std::string::npos) << "validate said:\n"
                                                              << validated.err << "submit said:\n"
                                                              << submitted.err;
  }
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM runs"), 0);
}

TEST(Cli, HelpTeaches) {
  auto result = RunCommand({LadderBinary(), "--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const char* command : {"coordinator", "agent", "local", "submit", "validate", "status",
                              "watch", "cancel", "sessions", "query", "export", "kernels"}) {
    EXPECT_NE(result.out.find(command), std::string::npos) << command;
  }
}

TEST(Cli, KernelsBenchPrintsOneLinePerPoint) {
  auto result =
      RunCommand({LadderBinary(), "kernels", "bench", "--backend", "cpu", "--depths", "256",
                  "--rows", "1,2", "--policy", "2d,3d", "--warmup", "1", "--repeats", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::vector<std::string> lines;
  std::istringstream in(result.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu ", 0) == 0) lines.push_back(line);
  }
  EXPECT_EQ(lines.size(), 4u) << result.out;  // 2 row counts x 2 policies, a line each
  for (const auto& line : lines) EXPECT_NE(line.find("tiny"), std::string::npos) << line;
}

// The JSON points of `ladder kernels bench` on the CPU backend at one depth and one row, 3D, two
// timed calls, with `flag` set to `value`; null where it did not exit 0 (the failure recorded).
nlohmann::json BenchOnePoint(const std::string& depth, const std::string& flag,
                             const std::string& value) {
  auto result = RunCommand({LadderBinary(), "kernels", "bench", "--backend", "cpu", "--depths",
                            depth, "--rows", "1", "--policy", "3d", "--warmup", "1", "--repeats",
                            "2", flag, value, "--json"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return result.exit_code == 0 ? nlohmann::json::parse(result.out) : nlohmann::json();
}

// --tuning reaches the results (the CPU backend runs no GPU kernel, but records and validates
// it), and a tuning it cannot read is bad input naming the flag and the field.
TEST(Cli, KernelsBenchTakesATuningAndRefusesABadOne) {
  auto points = BenchOnePoint("256", "--tuning", "split_keys=off wide_work_groups=on");
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0]["tuning"], "wide_work_groups=on split_keys=off");
  auto bad = RunCommand(
      {LadderBinary(), "kernels", "bench", "--backend", "cpu", "--tuning", "split_key=off"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--tuning: tuning: unknown field 'split_key'"), std::string::npos)
      << bad.err;
  auto check = RunCommand({LadderBinary(), "kernels", "check", "--backend", "cpu", "--tuning",
                           "split_keys=on wide_work_groups=on"});
  EXPECT_EQ(check.exit_code, 2);
  EXPECT_NE(check.err.find("two different kernels"), std::string::npos) << check.err;
}

// --case narrows the case table to the names that contain it (one case under a sanitizer), and
// a filter that matches nothing is bad input rather than a green "0 passed".
TEST(Cli, KernelsCheckRunsTheCasesItIsAskedFor) {
  auto one = RunCommand({LadderBinary(), "kernels", "check", "--backend", "cpu", "--case",
                         "decode_d64_partial_first_page", "--repeats", "2"});
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("decode_d64_partial_first_page"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("1 passed, 0 failed"), std::string::npos) << one.out;
  auto d512 = RunCommand(
      {LadderBinary(), "kernels", "check", "--backend", "cpu", "--case", "d512", "--repeats", "1"});
  EXPECT_EQ(d512.exit_code, 0) << d512.err;
  EXPECT_EQ(d512.out.find("d64"), std::string::npos) << d512.out;
  EXPECT_NE(d512.out.find("mtp5_d512"), std::string::npos) << d512.out;
  auto none = RunCommand({LadderBinary(), "kernels", "check", "--case", "no_such_case"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no case name contains 'no_such_case'"), std::string::npos) << none.err;
}

// --segments replaces the policy's segment count on the 3D path (the sweeps in
// docs/performance.md), and a count the GPU backends cannot launch is refused before anything runs.
TEST(Cli, KernelsBenchForcesTheSegmentCount) {
  auto points = BenchOnePoint("1024", "--segments", "5");
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0]["path"], "3D");
  EXPECT_EQ(points[0]["segments"], 5);
  for (const char* bad : {"0", "4097", "many"}) {
    auto refused =
        RunCommand({LadderBinary(), "kernels", "bench", "--backend", "cpu", "--segments", bad});
    EXPECT_EQ(refused.exit_code, 2) << bad;
    EXPECT_NE(refused.err.find("--segments"), std::string::npos) << refused.err;
  }
}

// A flag the parser refuses is bad input, exit code 2 as the README promises (not the parser
// library's own codes); --help still exits 0.
TEST(Cli, ParseErrorsAreBadInput) {
  const std::vector<std::vector<std::string>> refused = {
      {"kernels", "bench", "--warmup", "abc"},      // does not convert
      {"kernels", "bench", "--no-such-flag"},       // unknown flag
      {"--log-level", "loud", "kernels", "check"},  // not a member
      {"validate"},                                 // missing argument
  };
  for (const auto& args : refused) {
    std::vector<std::string> argv = {LadderBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto result = RunCommand(argv);
    EXPECT_EQ(result.exit_code, 2) << args[0] << " " << args.back() << ": " << result.err;
    EXPECT_FALSE(result.err.empty()) << args.back();
  }
  EXPECT_EQ(RunCommand({LadderBinary(), "kernels", "bench", "--help"}).exit_code, 0);
  EXPECT_EQ(RunCommand({LadderBinary(), "--version"}).exit_code, 0);
}

}  // namespace
}  // namespace ladder::testing
