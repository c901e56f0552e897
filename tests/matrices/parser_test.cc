// ParseMatrix: fields land in the Matrix, defaults apply, scalars are typed by the YAML 1.2 core
// schema, and targeted errors carry line:column and the field path.
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ladder/matrices/matrix.h"
#include "test_util.h"

namespace ladder::matrices {
namespace {

using testing::MustParse;
using testing::ParseError;

constexpr char kFull[] = R"(name: attention-depth-ladder
description: free text
runner: kernel
axes:
  backend: [cpu]
  depth: [1024, 4096, 16384]
  query_rows: [1, 2]
fixed: {preset: tiny, dtype: fp32, scale: 0.5, causal: true}
exclude:
  - {depth: 16384, query_rows: 2}
pair: [query_rows]
together: [depth]
replicates: {sessions: 2, processes: 1, rounds: 3}
requires: {gpu_vendor: nvidia, gpu_name: "*H100*", gpu_count: 1, min_gpu_memory_mib: 40000, features: [cuda]}
metric: time_us
seed: 42
max_attempts: 5
)";

TEST(MatrixParser, ReadsEveryField) {
  const Matrix m = MustParse(kFull);
  EXPECT_EQ(m.name, "attention-depth-ladder");
  EXPECT_EQ(m.description, "free text");
  EXPECT_EQ(m.runner, "kernel");
  ASSERT_EQ(m.axes.size(), 3u);
  EXPECT_EQ(m.axes[0].name, "backend");
  EXPECT_EQ(m.axes[1].name, "depth");
  EXPECT_EQ(m.axes[2].name, "query_rows");
  EXPECT_EQ(m.axes[1].values, (std::vector<Value>{1024, 4096, 16384}));
  EXPECT_EQ(m.fixed.at("preset"), "tiny");
  EXPECT_EQ(m.fixed.at("scale"), 0.5);
  EXPECT_EQ(m.fixed.at("causal"), true);
  ASSERT_EQ(m.exclude.size(), 1u);
  EXPECT_EQ(m.exclude[0].at("depth"), 16384);
  EXPECT_EQ(m.pair, std::vector<std::string>{"query_rows"});
  EXPECT_EQ(m.together, std::vector<std::string>{"depth"});
  EXPECT_EQ(m.replicates.sessions, 2);
  EXPECT_EQ(m.replicates.processes, 1);
  EXPECT_EQ(m.replicates.rounds, 3);
  EXPECT_EQ(m.requirements.gpu_vendor, "nvidia");
  EXPECT_EQ(m.requirements.gpu_name_glob, "*H100*");
  EXPECT_EQ(m.requirements.gpu_count, 1);
  EXPECT_EQ(m.requirements.min_gpu_memory_mib, 40000);
  EXPECT_EQ(m.requirements.features, std::vector<std::string>{"cuda"});
  EXPECT_EQ(m.metric, "time_us");
  EXPECT_EQ(m.seed, 42u);
  EXPECT_EQ(m.max_attempts, 5);
  EXPECT_FALSE(m.aa_control.has_value());
}

TEST(MatrixParser, AppliesDefaults) {
  const Matrix m = MustParse("name: m\nrunner: engine\naxes: {spec: [off, k1]}\n");
  EXPECT_EQ(m.replicates.sessions, 1);
  EXPECT_EQ(m.replicates.processes, 1);
  EXPECT_EQ(m.replicates.rounds, 1);
  EXPECT_EQ(m.max_attempts, 3);
  EXPECT_EQ(m.seed, DefaultSeed("m"));
  EXPECT_TRUE(m.requirements.gpu_vendor.empty());
  EXPECT_EQ(m.requirements.gpu_count, 0);
  EXPECT_TRUE(m.fixed.empty());
  EXPECT_TRUE(m.metric.empty());
}

TEST(MatrixParser, DefaultSeedIsFnv1aOfName) {
  EXPECT_EQ(DefaultSeed(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(DefaultSeed("a"), 0xaf63dc4c8601ec8cULL);  // published FNV-1a 64 test vector
  EXPECT_NE(DefaultSeed("m1"), DefaultSeed("m2"));
}

TEST(MatrixParser, TypesScalarsByYaml12CoreSchema) {
  const Matrix m = MustParse(R"(name: m
runner: engine
axes:
  spec: [off, on, yes, "false", true, 1, "2", 0.25, 1.0, 1e3, -7, 0x10]
)");
  const auto& v = m.axes[0].values;
  ASSERT_EQ(v.size(), 12u);
  EXPECT_EQ(v[0], "off");  // not false: YAML 1.1 booleans are strings here
  EXPECT_EQ(v[1], "on");
  EXPECT_EQ(v[2], "yes");
  EXPECT_EQ(v[3], "false");  // quoted: a string
  EXPECT_EQ(v[4], true);
  EXPECT_TRUE(v[5].is_number_integer());
  EXPECT_EQ(v[6], "2");
  EXPECT_TRUE(v[7].is_number_float());
  EXPECT_TRUE(v[8].is_number_float());
  EXPECT_EQ(v[9], 1000.0);
  EXPECT_EQ(v[10], -7);
  EXPECT_EQ(v[11], 16);
}

TEST(MatrixParser, ValueToStringRendersKeys) {
  EXPECT_EQ(ValueToString(Value(16384)), "16384");
  EXPECT_EQ(ValueToString(Value(-3)), "-3");
  EXPECT_EQ(ValueToString(Value(18446744073709551615ULL)), "18446744073709551615");
  EXPECT_EQ(ValueToString(Value(0.1)), "0.1");
  EXPECT_EQ(ValueToString(Value(1.0)), "1.0");
  EXPECT_EQ(ValueToString(Value(1e300)), "1e+300");
  EXPECT_EQ(ValueToString(Value("TRITON_ATTN")), "TRITON_ATTN");
  EXPECT_EQ(ValueToString(Value(true)), "true");
  EXPECT_EQ(ValueToString(Value(false)), "false");
}

TEST(MatrixParser, NullOptionalKeysAreAbsent) {
  const Matrix m = MustParse("name: m\nrunner: kernel\naxes: {depth: [1]}\nexclude:\nfixed:\n");
  EXPECT_TRUE(m.exclude.empty());
  EXPECT_TRUE(m.fixed.empty());
}

TEST(MatrixParser, AcceptsLargeSeed) {
  const Matrix m =
      MustParse("name: m\nrunner: kernel\naxes: {depth: [1]}\nseed: 18446744073709551615\n");
  EXPECT_EQ(m.seed, 18446744073709551615ULL);
}

TEST(MatrixParser, GpuVendorAnyMeansEmpty) {
  const Matrix m =
      MustParse("name: m\nrunner: kernel\naxes: {depth: [1]}\nrequires: {gpu_vendor: any}\n");
  EXPECT_EQ(m.requirements.gpu_vendor, "");
}

TEST(MatrixParser, ParsesAAControl) {
  const Matrix m = MustParse(R"(name: m
runner: engine
axes:
  spec: [off, k1]
pair: [spec]
aa_control: {axis: spec, of: "off", as: off-copy}
)");
  ASSERT_TRUE(m.aa_control.has_value());
  EXPECT_EQ(m.aa_control->axis, "spec");
  EXPECT_EQ(m.aa_control->of, "off");
  EXPECT_EQ(m.aa_control->as, "off-copy");
  EXPECT_EQ(m.axes[0].values.size(), 2u);  // the arm is added by Expand, not the parser
}

TEST(MatrixParser, ReportsPathAndOneBasedLocation) {
  const std::string error = ParseError(R"(name: m
runner: kernel
axes:
  depth: [1024, 4096, -1]
)");
  EXPECT_EQ(error, "m.yaml:4:23: axes.depth[2]: expected a positive integer, got -1");
}

TEST(MatrixParser, UnknownKeyListsAllowedKeysAndSuggests) {
  const std::string error =
      ParseError("name: m\nrunner: kernel\naxes: {depth: [1]}\nreplicates: {session: 2}\n");
  EXPECT_NE(error.find("m.yaml:4:14: unknown key \"session\" in replicates"), std::string::npos)
      << error;
  EXPECT_NE(error.find("did you mean \"sessions\"?"), std::string::npos) << error;
  EXPECT_NE(error.find("allowed keys: sessions, processes, rounds"), std::string::npos) << error;
}

TEST(MatrixParser, PositiveIntegerChecksApplyToFixed) {
  EXPECT_EQ(ParseError("name: m\nrunner: kernel\naxes: {x: [1]}\nfixed: {head_dim: 0}\n"),
            "m.yaml:4:19: fixed.head_dim: expected a positive integer, got 0");
  EXPECT_EQ(ParseError("name: m\nrunner: kernel\naxes: {x: [1]}\nfixed: {kv_heads: \"2\"}\n"),
            "m.yaml:4:19: fixed.kv_heads: expected a positive integer, got \"2\"");
}

TEST(MatrixParser, FileNotFound) {
  auto m = ParseMatrixFile("/nonexistent/dir/m.yaml");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("/nonexistent/dir/m.yaml"), std::string::npos);
}

TEST(MatrixParser, FileErrorsNameTheFile) {
  const std::string path = ::testing::TempDir() + "/matrix_parser_test.yaml";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("name: m\nrunner: gpu\naxes: {x: [1]}\n", f);
    std::fclose(f);
  }
  auto m = ParseMatrixFile(path);
  std::remove(path.c_str());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(
      m.status().message(),
      path + ":2:9: runner: unknown runner \"gpu\"; expected one of: kernel, engine, command");
}

TEST(MatrixParser, NeverThrowsOnOddInput) {
  const char* inputs[] = {"",
                          "---",
                          "~",
                          "[",
                          "{",
                          "a: [",
                          "\t",
                          "\"",
                          ": :",
                          "? a\n? a\n",
                          "name: m\nrunner: kernel\naxes: {x: [[1]]}\n",
                          "name: m\nrunner: kernel\naxes: {x: [{a: 1}]}\n",
                          "name: m\nrunner: kernel\naxes: {[a]: [1]}\n",
                          "&a [*a]",
                          "!!binary aGVsbG8=",
                          "name: !foo m\n"};
  for (const char* input : inputs) {
    absl::StatusOr<Matrix> m = Matrix{};
    EXPECT_NO_THROW(m = ParseMatrix(input, "odd.yaml")) << input;
    EXPECT_FALSE(m.ok()) << input;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << input;
  }
}

}  // namespace
}  // namespace ladder::matrices
