// Golden tests: each recipe renders the exact argv and environment from a cell's parameters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ladder/engines/recipe.h"

namespace ladder::engines {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Env = std::vector<std::pair<std::string, std::string>>;

RecipeContext Context() {
  RecipeContext c;
  c.port = 8123;
  c.ladder_binary = "/opt/ladder/bin/ladder";
  return c;
}

RenderedEngine Render(const std::string& engine, nlohmann::json params,
                      RecipeContext context = Context()) {
  auto recipe = FindBuiltinRecipe(engine);
  EXPECT_TRUE(recipe.ok()) << recipe.status();
  auto rendered = (*recipe)->Render(params, context);
  EXPECT_TRUE(rendered.ok()) << rendered.status();
  return rendered.ok() ? *rendered : RenderedEngine{};
}

absl::Status RenderError(const std::string& engine, nlohmann::json params) {
  auto recipe = FindBuiltinRecipe(engine);
  EXPECT_TRUE(recipe.ok());
  return (*recipe)->Render(params, Context()).status();
}

TEST(VllmRecipe, NewVersionUsesAttentionBackendFlag) {
  RenderedEngine r = Render("vllm", {{"engine", "vllm"},
                                     {"depth", 32768},
                                     {"model", "google/gemma-4-31B-it"},
                                     {"attention_backend", "TRITON_ATTN"},
                                     {"engine_version", "0.28.0"},
                                     {"spec", "mtp:1"},
                                     {"spec_model", "google/gemma-4-31B-it-assistant"},
                                     {"tensor_parallel_size", 2},
                                     {"max_model_len", 40960},
                                     {"seed", 0},
                                     {"extra_args", "--max-num-seqs 1"}});
  ASSERT_TRUE(r.launch.has_value());
  EXPECT_THAT(r.launch->argv,
              ElementsAre("vllm", "serve", "google/gemma-4-31B-it", "--host", "127.0.0.1",
                          "--port", "8123", "--seed", "0", "--attention-backend", "TRITON_ATTN",
                          "--speculative-config",
                          R"({"method":"mtp","model":"google/gemma-4-31B-it-assistant","num_speculative_tokens":1})",
                          "--tensor-parallel-size", "2", "--max-model-len", "40960",
                          "--no-enable-prefix-caching", "--max-num-seqs", "1"));
  EXPECT_TRUE(r.launch->env.empty());
  EXPECT_THAT(r.launch->env_unset, ElementsAre("VLLM_ATTENTION_BACKEND"));
  EXPECT_EQ(r.endpoints.base_url, "http://127.0.0.1:8123");
  EXPECT_EQ(r.endpoints.model, "google/gemma-4-31B-it");
  EXPECT_EQ(r.requested_backend, "TRITON_ATTN");
  EXPECT_EQ(r.spec_k, 1);
  EXPECT_EQ(r.spec_metrics.num_drafts, "vllm:spec_decode_num_drafts");
  EXPECT_EQ(r.spec_metrics.num_draft_tokens, "vllm:spec_decode_num_draft_tokens");
  EXPECT_EQ(r.spec_metrics.num_accepted_tokens, "vllm:spec_decode_num_accepted_tokens");
}

TEST(VllmRecipe, OldVersionUsesEnvironmentVariable) {
  RenderedEngine r = Render("vllm", {{"engine", "vllm"},
                                     {"depth", 1024},
                                     {"model", "m"},
                                     {"attention_backend", "FLASHINFER"},
                                     {"engine_version", "0.15.1"}});
  ASSERT_TRUE(r.launch.has_value());
  EXPECT_THAT(r.launch->argv, ElementsAre("vllm", "serve", "m", "--host", "127.0.0.1", "--port",
                                          "8123", "--no-enable-prefix-caching"));
  EXPECT_EQ(r.launch->env, (Env{{"VLLM_ATTENTION_BACKEND", "FLASHINFER"}}));
}

TEST(VllmRecipe, VersionFromInventoryAndRcSuffix) {
  RecipeContext c = Context();
  c.engine_versions["vllm"] = "0.15.2rc1+cu128";
  RenderedEngine r = Render("vllm", {{"engine", "vllm"}, {"depth", 1}, {"model", "m"},
                                     {"attention_backend", "TRITON_ATTN"},
                                     {"prefix_caching", true}, {"extra_env", {{"HF_HOME", "/h"}}}},
                            c);
  EXPECT_EQ(r.launch->env, (Env{{"VLLM_ATTENTION_BACKEND", "TRITON_ATTN"}, {"HF_HOME", "/h"}}));
  EXPECT_EQ(r.launch->argv.back(), "--enable-prefix-caching");
  c.engine_versions["vllm"] = "0.16.0";
  r = Render("vllm", {{"engine", "vllm"}, {"depth", 1}, {"model", "m"},
                      {"attention_backend", "TRITON_ATTN"}}, c);
  EXPECT_TRUE(r.launch->env.empty());
}

TEST(VllmRecipe, RejectsUnknownAndMistypedParameters) {
  absl::Status s = RenderError("vllm", {{"engine", "vllm"}, {"depth", 1}, {"model", "m"},
                                        {"tensor_parallel", 2}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("unknown parameter 'tensor_parallel'"));
  s = RenderError("vllm", {{"engine", "vllm"}, {"depth", 1}, {"model", "m"}, {"spec_k", "one"}});
  EXPECT_THAT(s.message(), HasSubstr("parameter 'spec_k': expected a non-negative integer"));
  s = RenderError("vllm", {{"engine", "vllm"}, {"depth", 1}});
  EXPECT_THAT(s.message(), HasSubstr("parameter 'model': is required"));
  s = RenderError("vllm", {{"engine", "vllm"}, {"model", "m"}});
  EXPECT_THAT(s.message(), HasSubstr("parameter 'depth': is required"));
  s = RenderError("vllm", {{"engine", "vllm"}, {"depth", 1}, {"model", "m"}, {"spec", "mtp:x"}});
  EXPECT_THAT(s.message(), HasSubstr("K in \"mtp:x\""));
  s = RenderError("vllm", {{"engine", "vllm"}, {"depth", 1}, {"model", "m"}, {"spec", "off"},
                           {"spec_k", 1}});
  EXPECT_THAT(s.message(), HasSubstr("not both"));
}

TEST(SglangRecipe, RendersEagleSpeculation) {
  RenderedEngine r = Render("sglang", {{"engine", "sglang"},
                                       {"depth", 8192},
                                       {"model", "Qwen/Qwen3-8B"},
                                       {"attention_backend", "triton"},
                                       {"spec_method", "EAGLE"},
                                       {"spec_k", 3},
                                       {"spec_model", "draft"},
                                       {"tensor_parallel_size", 2},
                                       {"max_model_len", 16384},
                                       {"seed", 7}});
  EXPECT_THAT(r.launch->argv,
              ElementsAre("python3", "-m", "sglang.launch_server", "--model-path",
                          "Qwen/Qwen3-8B", "--host", "127.0.0.1", "--port", "8123",
                          "--random-seed", "7", "--attention-backend", "triton",
                          "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path",
                          "draft", "--speculative-num-steps", "3", "--speculative-eagle-topk",
                          "1", "--speculative-num-draft-tokens", "4", "--tp-size", "2",
                          "--context-length", "16384", "--disable-radix-cache",
                          "--enable-metrics"));
  EXPECT_FALSE(r.spec_metrics.available());
  EXPECT_THAT(RenderError("sglang", {{"engine", "sglang"}, {"depth", 1}, {"model", "m"},
                                     {"spec_k", 2}}).message(),
              HasSubstr("spec_method"));
}

TEST(LlamaCppRecipe, RendersDraftModelOptions) {
  RenderedEngine r = Render("llama.cpp", {{"engine", "llama.cpp"},
                                          {"depth", 4096},
                                          {"model", "/models/target.gguf"},
                                          {"spec_model", "/models/draft.gguf"},
                                          {"spec_k", 8},
                                          {"spec_k_min", 2},
                                          {"gpu_layers", 99},
                                          {"gpu_layers_draft", 99},
                                          {"flash_attn", "on"},
                                          {"max_model_len", 8192}});
  EXPECT_THAT(r.launch->argv,
              ElementsAre("llama-server", "--model", "/models/target.gguf", "--host",
                          "127.0.0.1", "--port", "8123", "--metrics", "--ctx-size", "8192",
                          "--n-gpu-layers", "99", "--flash-attn", "on", "--model-draft",
                          "/models/draft.gguf", "--draft-max", "8", "--draft-min", "2",
                          "--gpu-layers-draft", "99"));
  EXPECT_EQ(r.endpoints.extra_request_fields, nlohmann::json({{"cache_prompt", false}}));
  EXPECT_THAT(RenderError("llama.cpp", {{"engine", "llama.cpp"}, {"depth", 1}, {"model", "m"},
                                        {"spec_k", 2}}).message(),
              HasSubstr("--model-draft"));
  EXPECT_THAT(RenderError("llama.cpp", {{"engine", "llama.cpp"}, {"depth", 1}, {"model", "m"},
                                        {"attention_backend", "x"}}).message(),
              HasSubstr("unknown parameter 'attention_backend'"));
}

TEST(ExternalRecipe, HasNothingToStartAndIsNotRestartable) {
  RenderedEngine r = Render("external", {{"engine", "external"},
                                         {"depth", 1024},
                                         {"url", "http://10.0.0.5:8000/"},
                                         {"model", "served"},
                                         {"attention_backend", "FLASHINFER"}});
  EXPECT_FALSE(r.launch.has_value());
  EXPECT_EQ(r.restartability, Restartability::kExternal);
  EXPECT_EQ(r.endpoints.base_url, "http://10.0.0.5:8000");
  EXPECT_THAT(RenderError("external", {{"engine", "external"}, {"depth", 1},
                                       {"url", "https://x"}}).message(),
              HasSubstr("https is not supported"));
}

TEST(SyntheticRecipe, RunsTheLadderBinary) {
  RenderedEngine r = Render("synthetic", {{"engine", "synthetic"},
                                          {"depth", 1024},
                                          {"preset", "tiny"},
                                          {"policy", "legacy"},
                                          {"spec", "mtp:1"},
                                          {"acceptance", 0.5},
                                          {"seed", 3},
                                          {"attention_backend", "TRITON_ATTN"},
                                          {"fault_malformed_json", true}});
  EXPECT_THAT(r.launch->argv,
              ElementsAre("/opt/ladder/bin/ladder", "engine", "synthetic", "--preset", "tiny",
                          "--host", "127.0.0.1", "--port", "8123", "--policy", "legacy",
                          "--spec-k", "1", "--acceptance", "0.5", "--seed", "3",
                          "--attention-backend", "TRITON_ATTN", "--malformed"));
  EXPECT_EQ(r.endpoints.model, "tiny");
  EXPECT_EQ(r.spec_k, 1);
  EXPECT_THAT(RenderError("synthetic", {{"engine", "synthetic"}, {"depth", 1},
                                        {"policy", "fast"}}).message(),
              HasSubstr("expected legacy or spec-aware"));
}

TEST(SyntheticRecipe, PassesTheModelDevice) {
  RenderedEngine r = Render("synthetic", {{"engine", "synthetic"},
                                          {"depth", 1024},
                                          {"preset", "gemma4-31b"},
                                          {"device", "cuda"}});
  EXPECT_THAT(r.launch->argv,
              ElementsAre("/opt/ladder/bin/ladder", "engine", "synthetic", "--preset",
                          "gemma4-31b", "--host", "127.0.0.1", "--port", "8123", "--device",
                          "cuda"));
  EXPECT_THAT(RenderError("synthetic", {{"engine", "synthetic"}, {"depth", 1},
                                        {"device", "tpu"}}).message(),
              HasSubstr("expected cpu, cuda or auto"));
}

TEST(Recipes, UnknownEngineListsKnownOnes) {
  auto r = FindBuiltinRecipe("tgi");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("vllm, sglang, llama.cpp, external, synthetic"));
}

TEST(Versions, CompareNumerically) {
  EXPECT_LT(CompareVersions("0.15.1", "0.16"), 0);
  EXPECT_EQ(CompareVersions("0.16.0", "0.16"), 0);
  EXPECT_GT(CompareVersions("0.28.0", "0.16"), 0);
  EXPECT_GT(CompareVersions("v1.2", "0.16"), 0);
  EXPECT_LT(CompareVersions("0.9.2", "0.16"), 0);
}

}  // namespace
}  // namespace ladder::engines
