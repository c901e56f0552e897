// `runner: command` end to end on loopback: `ladder local` (a real coordinator and real agents over
// gRPC, a real SQLite file) runs programs registered with --bench. The example program meets the
// result contract; small shell scripts play the programs that crash, hang, print garbage, print
// an undeclared metric or a value out of range, or print nothing. Each failure must fail its cell
// with the reason in the database and count nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fleet.h"
#include "process.h"

namespace ladder::testing {
namespace {

// A paired A/B of the example program: 2 sizes x 2 methods, 3 sessions x 2 processes x 2 rounds.
constexpr const char* kExampleMatrix = R"(
name: command-example
runner: command
command:
  bench: example
  args: ["--method", "{method}", "--size", "{size}", "--rounds", "{rounds}", "--seed", "{seed}"]
  timeout_s: 120
metrics:
  time_us: {unit: us, better: lower}
axes:
  size: [2000, 20000]
  method: [std_sort, heap_sort]
pair: [method]
together: [size]
replicates: {sessions: 3, processes: 2, rounds: 2}
)";

std::string WriteScript(const TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.File(name);
  WriteFile(path, "#!/bin/sh\n" + body);
  chmod(path.c_str(), 0755);
  return path;
}

// One cell, one session, one attempt: the run fails on its first bad start.
std::string OneCellMatrix(const std::string& extra_command = "",
                          const std::string& metrics = "time_us: {unit: us, better: lower}",
                          const std::string& args = "[\"{depth}\"]") {
  return "name: command-fault\nrunner: command\ncommand:\n  bench: prog\n  args: " + args + "\n" +
         extra_command + "metrics:\n  " + metrics +
         "\naxes:\n  depth: [7]\nreplicates: {sessions: 1, processes: 1, rounds: 2}\n"
         "max_attempts: 1\n";
}

struct LocalRun {
  CommandResult result;
  std::string db;
};

LocalRun RunLocal(const TempDir& dir, const std::string& matrix, const std::string& bench) {
  WriteFile(dir.File("m.yaml"), matrix);
  LocalRun run;
  run.db = dir.File("ladder.db");
  run.result = RunCommand({LadderBinary(), "local", dir.File("m.yaml"), "--db", run.db, "--agents",
                           "3", "--bench", bench},
                          std::chrono::seconds(280));
  return run;
}

std::string FailureReasons(const std::string& db) {
  return QueryText(db, "SELECT group_concat(reason, ' | ') FROM attempts WHERE state = 'failed'");
}

TEST(Command, ExampleProgramRunsThroughCoordinatorAndAgents) {
  TempDir dir;
  auto run = RunLocal(dir, kExampleMatrix, "example=" + std::string(LADDER_EXAMPLE_BENCH));
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  EXPECT_NE(run.result.out.find("4 of 4 cells done, 0 failed"), std::string::npos)
      << run.result.out;
  ExpectExactlyOnce(run.db, 1, 12);  // 3 sessions x 2 processes x 2 rounds
  // One start per cell and process, each with its rendered argv; the program's own evidence kept.
  EXPECT_EQ(QueryInt(run.db, "SELECT COUNT(*) FROM evidence WHERE kind = 'command_start'"), 24);
  EXPECT_EQ(QueryText(run.db,
                      "SELECT json_extract(e.value, '$.argv[2]') FROM evidence e JOIN cells c ON "
                      "c.id = e.cell_id WHERE e.kind = 'command_start' AND "
                      "json_extract(c.axes, '$.method') = 'heap_sort' LIMIT 1"),
            "heap_sort");
  EXPECT_EQ(QueryInt(run.db,
                     "SELECT COUNT(*) FROM evidence WHERE kind = 'program_evidence' AND "
                     "json_extract(value, '$.size') = 20000"),
            12);
  // The report reads `better` from the matrix and pairs the arms.
  auto report = RunCommand({LadderBinary(), "report", "1", "--db", run.db});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find("method heap_sort vs std_sort"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("lower is better"), std::string::npos) << report.out;
}

TEST(Command, ValidateAndLocalRefuseTheSameBadMatrices) {
  TempDir dir;
  const std::string prog =
      WriteScript(dir, "prog.sh", "echo '{\"metric\": \"time_us\", \"value\": 1}'\n");
  struct Case {
    std::string matrix;
    std::string expected;
  };
  const std::string metric = "time_us: {unit: us, better: lower}";
  const std::vector<Case> cases = {
      {OneCellMatrix("", metric, "[\"{dpeth}\"]"), "{dpeth} is neither an axis"},
      {"name: x\nrunner: command\ncommand: {bench: prog}\nmetrics:\n  " + metric +
           "\naxes: {depth: [1]}\nmetric: time_ms\n",
       "declares no metric \"time_ms\""},
      {"name: x\nrunner: command\ncommand: {bench: prog}\naxes: {depth: [1]}\n", "needs `metrics`"},
      {OneCellMatrix("", "time_us: {unit: us}"), "missing required key \"better\""},
      {OneCellMatrix("  extra_env: {CUDA_VISIBLE_DEVICES: \"1\"}\n"), "is the agent's"},
      {OneCellMatrix("", metric, "[\"{round}\"]"), "{round} is known only with start: per_round"},
  };
  for (const auto& c : cases) {
    const std::string& matrix = c.matrix;
    WriteFile(dir.File("bad.yaml"), matrix);
    auto validate = RunCommand({LadderBinary(), "validate", dir.File("bad.yaml")});
    EXPECT_EQ(validate.exit_code, 2) << matrix << validate.out << validate.err;
    EXPECT_NE(validate.err.find(c.expected), std::string::npos) << matrix << validate.err;
    EXPECT_NE(validate.err.find("bad.yaml:"), std::string::npos) << validate.err;
    auto local = RunCommand({LadderBinary(), "local", dir.File("bad.yaml"), "--db",
                             dir.File("bad.db"), "--bench", "prog=" + prog});
    EXPECT_EQ(local.exit_code, 2) << matrix << local.out << local.err;
    EXPECT_NE(local.err.find(c.expected), std::string::npos) << matrix << local.err;
  }
  // A bench none of its agents has: `local` says so before it starts anything.
  WriteFile(dir.File("m.yaml"), OneCellMatrix());
  auto missing = RunCommand({LadderBinary(), "local", dir.File("m.yaml"), "--db", dir.File("b.db"),
                             "--bench", "other=" + prog});
  EXPECT_EQ(missing.exit_code, 2) << missing.out << missing.err;
  EXPECT_NE(missing.err.find("no bench \"prog\""), std::string::npos) << missing.err;
  // A --bench that is no program is bad input too.
  auto not_a_program = RunCommand({LadderBinary(), "local", dir.File("m.yaml"), "--db",
                                   dir.File("c.db"), "--bench", "prog=" + dir.File("absent")});
  EXPECT_EQ(not_a_program.exit_code, 2) << not_a_program.err;
}

struct Fault {
  std::string name;
  std::string script;
  std::string expected_reason;
  std::string extra_command = "";
};

TEST(Command, ProgramsThatMisbehaveFailTheirCellWithTheReasonAndCountNothing) {
  const std::vector<Fault> faults = {
      {"crashes", "echo '{\"metric\": \"time_us\", \"value\": 3}'\nkill -SEGV $$\n",
       "killed by signal 11"},
      {"exits non-zero", "echo 'cannot open device' >&2\nexit 3\n", "exited with status 3"},
      {"hangs", "echo started\nexec sleep 100000\n", "ran past its timeout_s of 1 s",
       "  timeout_s: 1\n"},
      {"prints garbage",
       "printf '\\377\\376 not json {\\n'\nhead -c 3000 /dev/urandom | tr -d '\\n'\n",
       "printed no value of time_us"},
      {"prints an undeclared metric",
       "echo '{\"metric\": \"time_us\", \"value\": 3}'\necho '{\"metric\": \"speed\", \"value\": "
       "1}'\n",
       "printed metric \"speed\", which the matrix does not declare"},
      {"prints a value out of range", "echo '{\"metric\": \"time_us\", \"value\": -4}'\n",
       "time_us = -4 is out of range"},
      {"never prints", "exit 0\n", "printed no value of time_us"},
      {"prints too few rounds", "echo '{\"metric\": \"time_us\", \"value\": 3}'\n",
       "printed 1 of 2 rounds of time_us"},
      {"prints a round outside the design",
       "echo '{\"metric\": \"time_us\", \"value\": 3, \"round\": 5}'\n",
       "printed round 5 of time_us"},
  };
  for (const Fault& fault : faults) {
    SCOPED_TRACE(fault.name);
    TempDir dir;
    const std::string prog = WriteScript(dir, "prog.sh", fault.script);
    auto run = RunLocal(dir, OneCellMatrix(fault.extra_command), "prog=" + prog);
    EXPECT_EQ(run.result.exit_code, 4) << run.result.out << run.result.err;
    const std::string reasons = FailureReasons(run.db);
    EXPECT_NE(reasons.find(fault.expected_reason), std::string::npos) << reasons;
    EXPECT_EQ(QueryInt(run.db, "SELECT COUNT(*) FROM valid_measurements"), 0);
    // The evidence says why, next to the output's tail.
    EXPECT_GE(QueryInt(run.db, "SELECT COUNT(*) FROM evidence WHERE kind = 'failure'"), 1);
    EXPECT_GE(QueryInt(run.db, "SELECT COUNT(*) FROM evidence WHERE kind = 'log_tail'"), 1);
    EXPECT_EQ(QueryInt(run.db, "SELECT COUNT(*) FROM evidence WHERE NOT json_valid(value)"), 0);
  }
}

TEST(Command, PerRoundStartsOneProgramPerRoundAndCountsProbes) {
  TempDir dir;
  // The program says which round it is and prints the study's probe on stderr for depth 8 only.
  const std::string prog =
      WriteScript(dir, "prog.sh",
                  "[ \"$1\" = 8 ] && echo PROBE_3D_SPEC_ACTIVE >&2\n"
                  "echo \"{\\\"metric\\\": \\\"time_us\\\", \\\"value\\\": $(( $2 + 1 ))}\"\n"
                  "echo \"{\\\"metric\\\": \\\"calls\\\", \\\"value\\\": $ENV_DEPTH}\"\n");
  const std::string matrix = R"(
name: command-per-round
runner: command
command:
  bench: prog
  args: ["{depth}", "{round}"]
  start: per_round
  extra_env: {ENV_DEPTH: "{depth}"}
metrics:
  time_us: {unit: us, better: lower}
  calls: {unit: "1", better: higher, range: non_negative, required: false}
axes:
  depth: [4, 8]
replicates: {sessions: 1, processes: 2, rounds: 3}
)";
  auto run = RunLocal(dir, matrix, "prog=" + prog);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  // One start per (cell, process, round); the value the program printed is its round + 1.
  EXPECT_EQ(QueryInt(run.db, "SELECT COUNT(*) FROM evidence WHERE kind = 'command_start'"), 12);
  EXPECT_EQ(QueryInt(run.db,
                     "SELECT COUNT(*) FROM valid_measurements WHERE metric = 'time_us' "
                     "AND value != round + 1"),
            0);
  EXPECT_EQ(QueryInt(run.db,
                     "SELECT COUNT(*) FROM valid_measurements m JOIN cells c ON "
                     "c.id = m.cell_id WHERE m.metric = 'calls' AND "
                     "m.value = json_extract(c.axes, '$.depth')"),
            12);
  const std::string probes =
      "SELECT COALESCE(SUM(json_extract(e.value, '$.PROBE_3D_SPEC_ACTIVE')), 0) FROM evidence e "
      "JOIN cells c ON c.id = e.cell_id WHERE e.kind = 'probe_counts' AND "
      "json_extract(c.axes, '$.depth') = ";
  EXPECT_EQ(QueryInt(run.db, probes + "8"), 6);
  EXPECT_EQ(QueryInt(run.db, probes + "4"), 0);
}

// What the arms said reaches the report: the program's evidence leaves that tell the two arms
// apart and the probe that only one arm printed, never a leaf that varies from start to start.
TEST(Command, ReportSaysWhatTheArmsSaidDifferently) {
  TempDir dir;
  const std::string prog = WriteScript(
      dir, "prog.sh",
      "if [ \"$1\" = admitted ]; then path=3d; echo PROBE_3D_SPEC_ACTIVE >&2; else path=2d; fi\n"
      "echo \"{\\\"evidence\\\": {\\\"path\\\": {\\\"taken\\\": \\\"$path\\\"}, "
      "\\\"pid\\\": $$, \\\"gpu\\\": \\\"same\\\"}}\"\n"
      "echo '{\"metric\": \"time_us\", \"value\": 5}'\n");
  const std::string matrix = R"(
name: command-said
runner: command
command:
  bench: prog
  args: ["{impl}"]
  probe_patterns: [PROBE_3D_SPEC_ACTIVE]
metrics:
  time_us: {unit: us, better: lower}
axes:
  impl: [gated, admitted]
pair: [impl]
replicates: {sessions: 2, processes: 1, rounds: 1}
)";
  auto run = RunLocal(dir, matrix, "prog=" + prog);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  auto report = RunCommand({LadderBinary(), "report", "1", "--db", run.db, "--format", "json"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const auto doc = nlohmann::json::parse(report.out);
  const auto& comparisons = doc["runs"][0]["comparisons"];
  ASSERT_EQ(comparisons.size(), 1u) << report.out;
  EXPECT_EQ(
      comparisons[0]["said_differs"],
      nlohmann::json({"PROBE_3D_SPEC_ACTIVE: 0/2 starts -> 2/2 starts", "path.taken: 2d -> 3d"}))
      << comparisons.dump();
  for (const auto& cell : doc["runs"][0]["cells"]) {
    EXPECT_EQ(cell["starts_said"]["starts"], 2) << cell.dump();
    EXPECT_EQ(cell["starts_said"]["program"]["pid"], "(varies)") << cell.dump();
    EXPECT_EQ(cell["starts_said"]["program"]["gpu"], "same") << cell.dump();
  }
  auto text = RunCommand(
      {LadderBinary(), "report", "1", "--db", run.db, "--format", "text", "--sections", "said"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("impl admitted vs gated"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("path.taken: 2d -> 3d"), std::string::npos) << text.out;
}

// A program's evidence holding a terminal escape reaches the text report without it.
TEST(Command, ReportShowsNoTerminalEscapeAProgramPrinted) {
  TempDir dir;
  const std::string prog =
      WriteScript(dir, "prog.sh",
                  "if [ \"$1\" = b ]; then v='\\u001b[31mRED'; else v=plain; fi\n"
                  "printf '{\"evidence\": {\"note\": \"%s\"}}\\n' \"$v\"\n"
                  "echo '{\"metric\": \"time_us\", \"value\": 5}'\n");
  const std::string matrix =
      "name: esc\nrunner: command\ncommand: {bench: prog, args: [\"{arm}\"]}\n"
      "metrics: {time_us: {unit: us, better: lower}}\naxes: {arm: [a, b]}\npair: [arm]\n"
      "replicates: {sessions: 1, processes: 1, rounds: 1}\n";
  auto run = RunLocal(dir, matrix, "prog=" + prog);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  EXPECT_EQ(QueryInt(run.db,
                     "SELECT COUNT(*) FROM evidence WHERE kind = 'program_evidence' AND "
                     "instr(json_extract(value, '$.note'), char(27)) > 0"),
            1);  // stored as the program said it
  for (const char* format : {"text", "md"}) {
    auto report = RunCommand({LadderBinary(), "report", "1", "--db", run.db, "--format", format});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    EXPECT_NE(report.out.find("note: plain -> ?[31mRED"), std::string::npos) << report.out;
    EXPECT_EQ(report.out.find('\x1b'), std::string::npos) << format;
  }
}

// Each adapter through a real agent: a real Google Benchmark program, and nvbench's and
// llama-bench's own recorded outputs (tests/command/fixtures/README.md) replayed by a script, the
// nvbench one written to the {out} file as nvbench's --json writes it.
TEST(Command, EveryAdapterFillsTheDesignThroughARealAgent) {
  TempDir dir;
  {
    SCOPED_TRACE("gbench");
    const std::string matrix = R"(
name: command-gbench
runner: command
command:
  bench: gbench
  args: ["--benchmark_filter=^BM_Sort/{size}$", "--benchmark_repetitions={rounds}",
         "--benchmark_format=json", "--benchmark_min_time=0.01"]
  format: gbench
metrics:
  real_time: {unit: us, better: lower}
  items_per_second: {unit: 1/s, better: higher, required: false}
axes:
  size: [1000, 10000]
replicates: {sessions: 2, processes: 1, rounds: 3}
)";
    auto run = RunLocal(dir, matrix, "gbench=" + std::string(LADDER_GBENCH_SORT));
    ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
    ExpectExactlyOnce(run.db, 1, 6);
    // Google Benchmark reports ns; the matrix declares us: sorting 10 000 integers takes more
    // than a microsecond and less than a second.
    EXPECT_EQ(QueryInt(run.db,
                       "SELECT COUNT(*) FROM valid_measurements WHERE metric = "
                       "'real_time' AND unit = 'us' AND value > 1 AND value < 1e6"),
              12);
    EXPECT_EQ(QueryInt(run.db, "SELECT COUNT(*) FROM evidence WHERE kind = 'bench_context'"), 4);
  }
  const std::string fixtures = LADDER_COMMAND_FIXTURES;
  {
    SCOPED_TRACE("nvbench");
    TempDir nv;
    const std::string replay = WriteScript(nv, "nvbench.sh", "cp \"$2\" \"$1\"\n");
    const std::string matrix = R"(
name: command-nvbench
runner: command
command:
  bench: nvbench
  args: ["{out}", "{fixture}"]
  format: nvbench
  start: per_round
metrics:
  gpu_time: {unit: us, better: lower}
axes:
  arm: [a, b]
fixed: {fixture: ")" + fixtures +
                               R"(/nvbench-simple-device0.json"}
pair: [arm]
replicates: {sessions: 1, processes: 2, rounds: 2}
)";
    auto run = RunLocal(nv, matrix, "nvbench=" + replay);
    ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
    ExpectExactlyOnce(run.db, 1, 4);
    EXPECT_EQ(QueryText(run.db,
                        "SELECT DISTINCT json_extract(value, '$.parsed') FROM evidence "
                        "WHERE kind = 'command_start'"),
              "{out}");
  }
  {
    SCOPED_TRACE("llama-bench");
    TempDir lb;
    const std::string replay =
        WriteScript(lb, "llama-bench.sh", "echo 'loading model' >&2\ncat \"$1\"\n");
    const std::string matrix = R"(
name: command-llama-bench
runner: command
command:
  bench: llama-bench
  args: ["{fixture}"]
  format: llama-bench
metrics:
  prompt_tok_s: {unit: tok/s, better: higher}
  gen_tok_s: {unit: tok/s, better: higher}
  gen_time: {unit: ms, better: lower, required: false}
axes:
  fixture: [")" + fixtures + R"(/llama-bench-readme-b5163.jsonl"]
replicates: {sessions: 1, processes: 1, rounds: 5}
)";
    auto run = RunLocal(lb, matrix, "llama-bench=" + replay);
    ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
    // Round r is llama-bench's r-th sample: samples_ts[0] of the pp512 test of that README.
    EXPECT_EQ(QueryText(run.db,
                        "SELECT value FROM valid_measurements WHERE metric = "
                        "'prompt_tok_s' AND round = 0"),
              "7155.74");
    EXPECT_EQ(QueryInt(run.db,
                       "SELECT COUNT(*) FROM valid_measurements WHERE metric = 'gen_time' "
                       "AND unit = 'ms'"),
              5);
  }
  {
    SCOPED_TRACE("an adapter's ambiguity is the cell's failure");
    TempDir amb;
    const std::string replay = WriteScript(amb, "gbench.sh", "cat \"$1\"\n");
    const std::string matrix = R"(
name: command-ambiguous
runner: command
command: {bench: gbench, args: ["{fixture}"], format: gbench}
metrics:
  real_time: {unit: ns, better: lower}
axes:
  fixture: [")" + fixtures + R"(/gbench-two-benchmarks.json"]
max_attempts: 1
)";
    auto run = RunLocal(amb, matrix, "gbench=" + replay);
    EXPECT_EQ(run.result.exit_code, 4) << run.result.out << run.result.err;
    EXPECT_NE(FailureReasons(run.db).find("--benchmark_filter"), std::string::npos)
        << FailureReasons(run.db);
  }
}

// Two builds as the paired arms of one run (matrices/examples/one-host-ab-cpu.yaml): the agent
// registers each build under its own name and `bench: "{build}"` starts the cell's. The judged
// metric is the sorts' comparisons, which both arms count on identical data (one seed per unit),
// so the ratio is known exactly whatever the load: ladder-example-bench-slow10 sorts 11 copies
// where ladder-example-bench sorts 10, a ratio of 1.1; the same program twice, 1.
TEST(Command, TwoBuildsAsPairedArmsOfOneRunAreJudgedByCompareArms) {
  TempDir dir;
  // The example as it ships, with fewer replicates (its 12 sessions x 4 processes are for time).
  std::string yaml = ReadFile(std::string(LADDER_EXAMPLES_DIR) + "/one-host-ab-cpu.yaml");
  const std::string shipped = "replicates: {sessions: 12, processes: 4, rounds: 2}";
  const std::size_t at = yaml.find(shipped);
  ASSERT_NE(at, std::string::npos) << yaml;
  yaml.replace(at, shipped.size(), "replicates: {sessions: 5, processes: 2, rounds: 2}");
  const std::string matrix = dir.File("one-host-ab-cpu.yaml");
  WriteFile(matrix, yaml);
  auto run_pair = [&](const std::string& db, const std::string& new_build) {
    return RunCommand({LadderBinary(), "local", matrix, "--db", db, "--agents", "5", "--bench",
                       "base=" + std::string(LADDER_EXAMPLE_BENCH), "--bench", "new=" + new_build},
                      std::chrono::seconds(280));
  };
  const std::string planted = dir.File("planted.db");
  auto run = run_pair(planted, LADDER_EXAMPLE_BENCH_SLOW10);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  // Each arm ran its own build: the bench named in every start, and the sorts the program did.
  EXPECT_EQ(QueryText(planted,
                      "SELECT group_concat(pair) FROM (SELECT DISTINCT json_extract(c.axes, "
                      "'$.build') || ':' || json_extract(e.value, '$.bench') AS pair FROM "
                      "evidence e JOIN cells c ON c.id = e.cell_id WHERE e.kind = "
                      "'command_start' ORDER BY pair)"),
            "base:base,new:new");
  EXPECT_EQ(QueryInt(planted,
                     "SELECT COUNT(*) FROM evidence e JOIN cells c ON c.id = e.cell_id WHERE "
                     "e.kind = 'program_evidence' AND json_extract(c.axes, '$.build') = 'new' "
                     "AND json_extract(e.value, '$.sorts') = 11"),
            10);  // 5 sessions x 2 processes

  auto judged = RunCommand({LadderBinary(), "compare", "latest", "--db", planted, "--arms",
                            "build=base,new", "--metric", "comparisons", "--json"});
  ASSERT_EQ(judged.exit_code, 0) << judged.err;
  const auto j = nlohmann::json::parse(judged.out);
  EXPECT_EQ(j["design"], "paired arms");
  ASSERT_EQ(j["rows"].size(), 1u) << judged.out;
  const auto& row = j["rows"][0];
  EXPECT_NEAR(row["ratio"]["estimate"].get<double>(), 1.1, 1e-9) << judged.out;
  EXPECT_EQ(row["sessions_a"], 5);
  EXPECT_EQ(row["ratio"]["df"], 4);
  EXPECT_EQ(row["matrix_verdict"], "slower") << judged.out;
  auto gate = RunCommand({LadderBinary(), "compare", "latest", "--db", planted, "--arms",
                          "build=base,new", "--metric", "comparisons", "--fail-on", "slower"});
  EXPECT_EQ(gate.exit_code, 5) << gate.out << gate.err;
  EXPECT_NE(gate.out.find("Paired ratio B/A of comparisons"), std::string::npos) << gate.out;
  EXPECT_NE(gate.out.find("paired arms of one run"), std::string::npos) << gate.out;

  // A/A: the same program under both names.
  const std::string same = dir.File("aa.db");
  auto aa = run_pair(same, LADDER_EXAMPLE_BENCH);
  ASSERT_EQ(aa.exit_code, 0) << aa.out << aa.err;
  auto aa_gate =
      RunCommand({LadderBinary(), "compare", "latest", "--db", same, "--arms", "build=base,new",
                  "--metric", "comparisons", "--fail-on", "slower", "--json"});
  EXPECT_EQ(aa_gate.exit_code, 0) << aa_gate.out << aa_gate.err;
  const auto aa_rows = nlohmann::json::parse(aa_gate.out)["rows"];
  ASSERT_EQ(aa_rows.size(), 1u);
  EXPECT_NEAR(aa_rows[0]["ratio"]["estimate"].get<double>(), 1.0, 1e-12);
  EXPECT_EQ(aa_rows[0]["matrix_verdict"], "no change");

  // Bad input: exit 2 with the reason.
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--arms", "build=base,nope"}, "has no value 'nope'"},
      {{"--arms", "method=a,b"}, "is not a paired axis"},
      {{"--arms", "build=base"}, "expected AXIS=BASE,NEW"},
      {{"--arms", "build=base,base"}, "two different values"},
      {{"--arms", "build=base,new", "--host-drift", "5"}, "are for two runs"},
  };
  for (const auto& [flags, expected] : bad) {
    std::vector<std::string> argv = {LadderBinary(), "compare", "latest", "--db", planted};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto refused = RunCommand(argv);
    EXPECT_EQ(refused.exit_code, 2) << flags[1] << refused.out << refused.err;
    EXPECT_NE(refused.err.find(expected), std::string::npos) << flags[1] << refused.err;
  }
  // An agent without one of the builds: `local` says so before it starts anything.
  auto missing = RunCommand({LadderBinary(), "local", matrix, "--db", dir.File("m.db"), "--bench",
                             "base=" + std::string(LADDER_EXAMPLE_BENCH)});
  EXPECT_EQ(missing.exit_code, 2) << missing.out << missing.err;
  EXPECT_NE(missing.err.find("no bench \"new\""), std::string::npos) << missing.err;
}

TEST(Command, ABenchTemplateMustNameAxesThatRenderBenchNames) {
  TempDir dir;
  const std::string head =
      "name: t\nrunner: command\nmetrics: {time_us: {unit: us, better: lower}}\n"
      "axes: {build: [base, new]}\npair: [build]\ncommand:\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  bench: \"{bulid}\"\n", "{bulid} in a bench name must be an axis or a fixed parameter"},
      {"  bench: \"{process}\"\n", "{process} in a bench name must be an axis"},
      {"  bench: \"Sort-{build}\"\n", "renders \"Sort-base\", which is not a bench name"},
      {"  bench: \"{build\"\n", "bad.yaml:7:10"},
  };
  for (const auto& [bench, expected] : cases) {
    WriteFile(dir.File("bad.yaml"), head + bench);
    auto validate = RunCommand({LadderBinary(), "validate", dir.File("bad.yaml")});
    EXPECT_EQ(validate.exit_code, 2) << bench << validate.out << validate.err;
    EXPECT_NE(validate.err.find(expected), std::string::npos) << bench << validate.err;
    EXPECT_NE(validate.err.find("bad.yaml:7:10"), std::string::npos) << bench << validate.err;
  }
  WriteFile(dir.File("good.yaml"), head + "  bench: \"sort-{build}\"\n");
  auto good = RunCommand({LadderBinary(), "validate", dir.File("good.yaml")});
  EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
}

}  // namespace
}  // namespace ladder::testing
