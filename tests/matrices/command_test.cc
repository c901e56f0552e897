// `runner: command`'s part of the matrix model: templates, and the configuration a run stores and
// a lease carries, read back exactly as written.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "ladder/matrices/matrix.h"

namespace ladder::matrices {
namespace {

constexpr const char* kMatrix = R"(
name: m
runner: command
command:
  bench: attn
  args: ["--depth", "{depth}", "{{literal}}", "--out={out}"]
  format: llama-bench
  start: per_round
  timeout_s: 12.5
  extra_env: {OMP_NUM_THREADS: "{threads}"}
  probe_patterns: [PROBE_3D_SPEC_ACTIVE, "3d path"]
metrics:
  gen_tok_s: {unit: tok/s, better: higher}
  share: {unit: "1", better: lower, range: share, required: false}
axes: {depth: [1024, 8192]}
fixed: {threads: 4}
)";

TEST(CommandMatrix, ParsesEveryFieldAndDefaultsTheMetricToTheFirstDeclared) {
  auto m = ParseMatrix(kMatrix, "m.yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(m->command.has_value());
  EXPECT_EQ(m->command->bench, "attn");
  EXPECT_EQ(m->command->args.size(), 4u);
  EXPECT_EQ(m->command->format, "llama-bench");
  EXPECT_EQ(m->command->start, CommandSpec::Start::kPerRound);
  EXPECT_DOUBLE_EQ(m->command->timeout_s, 12.5);
  EXPECT_EQ(m->command->extra_env.at("OMP_NUM_THREADS"), "{threads}");
  ASSERT_EQ(m->metrics.size(), 2u);
  EXPECT_EQ(m->metrics[0].better, MetricDeclaration::Better::kHigher);
  EXPECT_EQ(m->metrics[1].range, MetricDeclaration::Range::kShare);
  EXPECT_FALSE(m->metrics[1].required);
  // Where each argument is written, for errors found later.
  EXPECT_EQ(m->locations.at("command.args[1]").line, 6);
}

TEST(CommandMatrix, ConfigurationRoundTripsThroughItsJson) {
  auto m = ParseMatrix(kMatrix, "m.yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  const nlohmann::json json = RunnerConfigToJson(*m);
  auto back = RunnerConfigFromJson(nlohmann::json::parse(json.dump()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->command.args, m->command->args);
  EXPECT_EQ(back->command.extra_env, m->command->extra_env);
  EXPECT_EQ(back->command.probe_patterns, m->command->probe_patterns);
  EXPECT_EQ(back->command.start, CommandSpec::Start::kPerRound);
  EXPECT_EQ(RunnerConfigToJson(Matrix{}), nlohmann::json::object());
  EXPECT_EQ(back->metrics[1].name, "share");
  EXPECT_EQ(back->metrics[1].range, MetricDeclaration::Range::kShare);
  // A configuration no parser produced is refused, not half read.
  nlohmann::json broken = json;
  broken["metrics"][0]["better"] = "sideways";
  EXPECT_EQ(RunnerConfigFromJson(broken).status().code(), absl::StatusCode::kInvalidArgument);
  broken = json;
  broken["command"].erase("args");
  EXPECT_EQ(RunnerConfigFromJson(broken).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunnerConfigFromJson(nlohmann::json::object()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(CommandMatrix, TemplatesRenderPlaceholdersAndLiteralBraces) {
  auto lookup = [](std::string_view name) -> std::optional<std::string> {
    if (name == "depth") return "1024";
    return std::nullopt;
  };
  EXPECT_EQ(*RenderTemplate("--depth={depth}", lookup), "--depth=1024");
  EXPECT_EQ(*RenderTemplate("{{depth}} {depth}}}", lookup), "{depth} 1024}");
  EXPECT_EQ(*RenderTemplate("; rm -rf / $(depth)", lookup), "; rm -rf / $(depth)");
  EXPECT_EQ(RenderTemplate("{rows}", lookup).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(TemplatePlaceholders("{a}{b}").value(), (std::vector<std::string>{"a", "b"}));
  for (const char* bad : {"{", "}", "{}", "{a b}", "{1x}", "x{y"}) {
    EXPECT_EQ(TemplatePlaceholders(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace ladder::matrices
