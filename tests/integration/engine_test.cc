// Issue 4 end to end on loopback: an engine matrix runs through the coordinator and agents;
// each agent starts the synthetic engine (this same binary) and measures it by depth
// differencing. The database ends up with decode rates, TTFT, acceptance per cell and the
// path evidence.
#include <gtest/gtest.h>
#include <filesystem>

#include "fleet.h"
#include "process.h"

namespace ladder::testing {
namespace {

constexpr const char* kEngineMatrix = R"(
name: synthetic-spec-ladder
runner: engine
axes:
  policy: [legacy, spec-aware]
  depth: [256, 1024]
  spec: ["off", "mtp:1"]
fixed: {engine: synthetic, preset: tiny, acceptance: 0.6, short_tokens: 4, long_tokens: 96}
pair: [spec]
together: [depth]
replicates: {sessions: 2, processes: 1, rounds: 2}
metric: decode_tok_s
)";

TEST(Engines, SyntheticLadderRunsThroughCoordinatorAndAgents) {
  TempDir dir;
  const std::string db = dir.File("ladder.db");
  WriteFile(dir.File("engine.yaml"), kEngineMatrix);
  auto result = RunCommand({LadderBinary(), "local", dir.File("engine.yaml"), "--db", db,
                            "--engine-logs", dir.File("engine-logs")},
                           std::chrono::seconds(280));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("metric decode_tok_s"), std::string::npos) << result.out;
  // Every engine process left its whole log (ladder local --engine-logs).
  int logs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.File("engine-logs"))) {
    EXPECT_NE(ReadFile(entry.path().string()).find("Using "), std::string::npos) << entry.path();
    ++logs;
  }
  EXPECT_GT(logs, 0);
  // 8 cells x 2 sessions x 1 process x 2 rounds.
  ExpectExactlyOnce(db, 1, 4);
  for (const char* metric : {"decode_tok_s", "ttft_ms"}) {
    EXPECT_EQ(QueryInt(db, std::string("SELECT COUNT(DISTINCT cell_id) FROM valid_measurements "
                                       "WHERE value > 0 AND metric = '") +
                               metric + "'"),
              8)
        << metric;
  }
  // Acceptance is captured per cell for the speculative arm.
  EXPECT_EQ(QueryInt(db,
                     "SELECT COUNT(DISTINCT m.cell_id) FROM valid_measurements m JOIN cells c "
                     "ON c.id = m.cell_id WHERE m.metric = 'mean_acceptance_length' AND "
                     "json_extract(c.axes, '$.spec') = 'mtp:1'"),
            4);
  // Evidence: the backend the engine said it used, and the 3D-with-speculation probe, which
  // fires under spec-aware and stays silent under legacy.
  EXPECT_GT(QueryInt(db, "SELECT COUNT(*) FROM evidence WHERE kind = 'engine_backend'"), 0);
  const std::string probes_sql =
      "SELECT COALESCE(SUM(json_extract(e.value, '$.PROBE_3D_SPEC_ACTIVE')), 0) FROM evidence e "
      "JOIN cells c ON c.id = e.cell_id WHERE e.kind = 'probe_counts' AND "
      "json_extract(c.axes, '$.spec') = 'mtp:1' AND json_extract(c.axes, '$.policy') = '";
  EXPECT_GT(QueryInt(db, probes_sql + "spec-aware'"), 0);
  EXPECT_EQ(QueryInt(db, probes_sql + "legacy'"), 0);
}

constexpr const char* kLoadMatrix = R"(
name: synthetic-load
runner: engine
axes:
  concurrency: [1, 4]
  spec: ["off", "mtp:1"]
fixed: {engine: synthetic, preset: tiny, device: cpu, acceptance: 0.6, depth: 128,
        output_tokens: 8, num_requests: 6, max_batch: 4}
pair: [spec]
together: [concurrency]
metric: load_output_tok_s
)";

// Load cells end to end: their attempts complete with ttft_ms as the one required metric, and
// the per-request rows reach the database as evidence.
TEST(Engines, LoadMatrixRunsThroughCoordinatorAndAgents) {
  TempDir dir;
  const std::string db = dir.File("ladder.db");
  WriteFile(dir.File("load.yaml"), kLoadMatrix);
  auto result = RunCommand({LadderBinary(), "local", dir.File("load.yaml"), "--db", db},
                           std::chrono::seconds(200));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  for (const char* metric : {"load_output_tok_s", "load_ttft_ms_p99", "ttft_ms"}) {
    EXPECT_EQ(QueryInt(db, std::string("SELECT COUNT(DISTINCT cell_id) FROM valid_measurements "
                                       "WHERE value > 0 AND metric = '") +
                               metric + "'"),
              4)
        << metric;
  }
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM valid_measurements WHERE metric = 't_long_ms'"), 0);
  // Warm-up (the concurrency) plus 6 measured requests per cell: 7 + 7 + 10 + 10 rows.
  EXPECT_EQ(QueryInt(db,
                     "SELECT SUM(json_array_length(value, '$.rows')) FROM evidence "
                     "WHERE kind = 'load_requests'"),
            34);
  // ... and read back one per request from the load_requests view (docs/schema.md).
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM load_requests"), 34);
  EXPECT_EQ(QueryInt(db,
                     "SELECT COUNT(*) FROM load_requests WHERE warmup = 0 AND "
                     "error IS NULL AND tokens_out = 8"),
            24);
}

}  // namespace
}  // namespace ladder::testing

namespace ladder::testing {
namespace {

// Every example matrix must be runnable as written: its cells pass the runner's own parameter
// checks (`ladder validate --runner-check` does the same for a user's file).
TEST(Examples, EveryExampleCellPassesItsRunnersParameterCheck) {
  for (const char* example : {"demo-cpu.yaml", "kernel-h200.yaml", "gemma4-mtp-ladder.yaml",
                              "gemma4-synthetic-ladder.yaml", "synthetic-load-cpu.yaml",
                              "gemma4-mtp-load.yaml", "gemma4-synthetic-load.yaml"}) {
    auto result = RunCommand({LadderBinary(), "validate", "--runner-check",
                              std::string(LADDER_EXAMPLES_DIR) + "/" + example});
    EXPECT_EQ(result.exit_code, 0) << example << ": " << result.out << result.err;
  }
  TempDir dir;
  WriteFile(dir.File("typo.yaml"),
            "name: t\nrunner: engine\naxes: {depth: [1024]}\n"
            "fixed: {engine: synthetic, polcy: legacy}\n");
  auto typo = RunCommand({LadderBinary(), "validate", "--runner-check", dir.File("typo.yaml")});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("polcy"), std::string::npos) << typo.err;
}

}  // namespace
}  // namespace ladder::testing
