// The runners' schemas and the one matrix validation every door uses.
#include <algorithm>
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "ladder/agent/cell_check.h"
#include "ladder/matrices/matrix.h"
#include "ladder/runner/runner.h"
#include "ladder/runner/schema.h"
#include "ladder/runner/validate.h"

namespace ladder::runner {
namespace {

absl::Status Validate(const std::string& yaml, const RunnerSchemas& schemas) {
  auto matrix = matrices::ParseMatrix(yaml, "m.yaml");
  EXPECT_TRUE(matrix.ok()) << matrix.status();
  auto expansion = matrices::Expand(*matrix);
  EXPECT_TRUE(expansion.ok()) << expansion.status();
  return ValidateMatrix(*matrix, *expansion, schemas);
}

TEST(Schema, MetricNamesAreSafeIdentifiers) {
  for (const char* good : {"time_us", "a", "decode_tok_s", "x9_"}) {
    EXPECT_TRUE(IsValidMetricName(good)) << good;
  }
  for (std::string bad :
       {std::string(""), std::string("Time_us"), std::string("9lives"), std::string("time-us"),
        std::string("time us"), std::string("time\0us", 7), std::string(65, 'a')}) {
    EXPECT_FALSE(IsValidMetricName(bad)) << bad;
  }
  EXPECT_TRUE(IsValidMetricName(std::string(64, 'a')));
}

TEST(Schema, BuiltinRunnersDeclareTheirMetricsWithUnits) {
  const RunnerSchemas& schemas = BuiltinMetricSchemas();
  const RunnerSchema* kernel = schemas.Find("kernel");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->required_metric_count(), 4);
  ASSERT_NE(kernel->FindMetric("time_us"), nullptr);
  EXPECT_EQ(kernel->FindMetric("time_us")->unit, "us");
  EXPECT_FALSE(kernel->FindMetric("gpu_clock_mhz")->required);
  EXPECT_EQ(kernel->FindMetric("decode_tok_s"), nullptr);
  const RunnerSchema* engine = schemas.Find("engine");
  ASSERT_NE(engine, nullptr);
  // ttft_ms only: load cells send no short/long pair, so t_short_ms / t_long_ms are optional.
  EXPECT_EQ(engine->required_metric_count(), 1);
  EXPECT_TRUE(engine->FindMetric("ttft_ms")->required);
  EXPECT_FALSE(engine->FindMetric("t_short_ms")->required);
  EXPECT_EQ(engine->FindMetric("load_output_tok_s")->unit, "tok/s");
  EXPECT_EQ(schemas.Find("gpu"), nullptr);
  for (const auto& name : schemas.names()) {
    for (const auto& m : schemas.Find(name)->metrics) {
      EXPECT_TRUE(IsValidMetricName(m.name)) << m.name;
    }
  }
}

TEST(ValidateMatrix, PointsAtTheParameterARunnerRefuses) {
  const RunnerSchemas& schemas = agent::RunnerSchemasWithChecks();
  // An unknown axis: the value's line and column.
  auto status =
      Validate("name: m\nrunner: kernel\naxes:\n  depth: [64]\n  spec: [off, k1]\n", schemas);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("m.yaml:5:10: axes.spec[0]: cell depth=64,spec=off: kernel "
                                  "runner: unknown parameter 'spec'"),
            std::string::npos)
      << status.message();
  // One message per distinct problem: spec=k1 has the same one, so it is not repeated.
  EXPECT_EQ(status.message().find("axes.spec[1]"), std::string::npos) << status.message();
  // A tuning field the kernels removed says why, at its line and column, for an old A/B matrix.
  status = Validate("name: m\nrunner: kernel\naxes:\n  depth: [64]\n  bulk_copies: [auto, on]\n",
                    schemas);
  EXPECT_NE(status.message().find("m.yaml:5:17: axes.bulk_copies[0]"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("was removed"), std::string::npos) << status.message();
  // A bad fixed parameter: its `fixed` entry.
  status =
      Validate("name: m\nrunner: kernel\naxes: {depth: [64]}\nfixed:\n  backend: tpu\n", schemas);
  EXPECT_NE(status.message().find("m.yaml:5:12: fixed.backend: cell depth=64: parameter backend"),
            std::string::npos)
      << status.message();
  // A wrongly typed axis value.
  status = Validate("name: m\nrunner: kernel\naxes:\n  depth: [64]\n  dtype: [bf16, 7]\n", schemas);
  EXPECT_NE(status.message().find("m.yaml:5:17: axes.dtype[1]"), std::string::npos)
      << status.message();
  // A metric the runner does not report.
  status =
      Validate("name: m\nrunner: kernel\naxes: {depth: [64]}\nmetric: decode_tok_s\n", schemas);
  EXPECT_NE(status.message().find("m.yaml:4:9: metric: the kernel runner reports no metric "
                                  "\"decode_tok_s\""),
            std::string::npos)
      << status.message();
  // Good matrices pass, with and without parameter checks.
  const std::string good =
      "name: m\nrunner: kernel\naxes: {depth: [64, 128], path: [2d, 3d]}\n"
      "fixed: {backend: cpu, preset: tiny}\nmetric: time_us\n";
  EXPECT_TRUE(Validate(good, schemas).ok());
  EXPECT_TRUE(Validate(good, BuiltinMetricSchemas()).ok());
}

TEST(ValidateMatrix, EngineCellsAreCheckedByTheirRecipe) {
  auto status =
      Validate("name: e\nrunner: engine\naxes: {depth: [1024]}\nfixed: {engine: vllm-nightly}\n",
               agent::RunnerSchemasWithChecks());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("m.yaml:4:17: fixed.engine"), std::string::npos)
      << status.message();
}

// Every example a user copies, and every matrix of the kernel lab (kernels/ab/), passes the
// check the agent makes at run time (each cell rendered through its runner), so
// `ladder validate matrices/examples/*.yaml kernels/ab/*.yaml` passes.
TEST(ValidateMatrix, EveryExampleAndLabMatrixPassesTheRunnersChecks) {
  for (const std::string dir : {LADDER_MATRICES_EXAMPLES_DIR, LADDER_KERNELS_AB_DIR}) {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".yaml") continue;
      ++count;
      auto matrix = matrices::ParseMatrixFile(entry.path().string());
      ASSERT_TRUE(matrix.ok()) << matrix.status();
      auto expansion = matrices::Expand(*matrix);
      ASSERT_TRUE(expansion.ok()) << expansion.status();
      EXPECT_TRUE(ValidateMatrix(*matrix, *expansion, agent::RunnerSchemasWithChecks()).ok())
          << entry.path() << ": "
          << ValidateMatrix(*matrix, *expansion, agent::RunnerSchemasWithChecks());
    }
    EXPECT_GT(count, 5) << dir;
  }
}

// A matrix that names no metric gets one its cells record: load cells send no batch-1 requests,
// so decode_tok_s would leave `ladder local` with nothing to show.
TEST(DefaultMetric, IsOneEveryCellRecords) {
  auto metric_of = [](const std::string& yaml) {
    auto matrix = matrices::ParseMatrix(yaml, "m.yaml");
    EXPECT_TRUE(matrix.ok()) << matrix.status();
    return matrix.ok() ? DefaultMetric(*matrix) : "";
  };
  EXPECT_EQ(metric_of("name: k\nrunner: kernel\naxes: {depth: [1024]}\n"), "time_us");
  EXPECT_EQ(metric_of("name: e\nrunner: engine\naxes: {depth: [1024]}\n"), "decode_tok_s");
  EXPECT_EQ(metric_of("name: e\nrunner: engine\naxes: {concurrency: [1, 4]}\n"),
            "load_output_tok_s");
  EXPECT_EQ(metric_of("name: e\nrunner: engine\naxes: {depth: [1024]}\nfixed: {request_rate: 2}\n"),
            "load_output_tok_s");
  // Every example that names its metric names this one, or one its cells also record.
  for (const auto& entry : std::filesystem::directory_iterator(LADDER_MATRICES_EXAMPLES_DIR)) {
    auto matrix = matrices::ParseMatrixFile(entry.path().string());
    ASSERT_TRUE(matrix.ok()) << matrix.status();
    const bool load = DefaultMetric(*matrix) == "load_output_tok_s";
    if (load) EXPECT_TRUE(matrix->metric.rfind("load_", 0) == 0) << entry.path();
  }
}

// One seed gives one order, whichever runner asks (the engine runner had its own shuffle once,
// so a seed named two orders): a permutation, the same for the same inputs, different across
// rounds and processes.
TEST(InterleavedOrder, IsOneSeededPermutationPerProcessAndRound) {
  const std::vector<int> a = InterleavedOrder(6, 9, 0, 0);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(a, InterleavedOrder(6, 9, 0, 0));
  bool rounds_differ = false, processes_differ = false;
  for (int r = 1; r < 5; ++r) rounds_differ = rounds_differ || InterleavedOrder(6, 9, 0, r) != a;
  for (int p = 1; p < 5; ++p) {
    processes_differ = processes_differ || InterleavedOrder(6, 9, p, 0) != a;
  }
  EXPECT_TRUE(rounds_differ);
  EXPECT_TRUE(processes_differ);
  EXPECT_TRUE(InterleavedOrder(0, 9, 0, 0).empty());
  EXPECT_EQ(InterleavedOrder(1, 9, 0, 0), (std::vector<int>{0}));
}

}  // namespace
}  // namespace ladder::runner
