// Golden tests: each recipe renders the exact argv and environment from a cell's parameters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "ladder/engines/engine_version.h"
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
  EXPECT_THAT(
      r.launch->argv,
      ElementsAre(
          "vllm", "serve", "google/gemma-4-31B-it", "--host", "127.0.0.1", "--port", "8123",
          "--seed", "0", "--attention-backend", "TRITON_ATTN", "--speculative-config",
          R"({"method":"mtp","model":"google/gemma-4-31B-it-assistant","num_speculative_tokens":1})",
          "--tensor-parallel-size", "2", "--max-model-len", "40960", "--no-enable-prefix-caching",
          "--max-num-seqs", "1"));
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
                                     {"engine_version", "0.12.0"}});
  ASSERT_TRUE(r.launch.has_value());
  EXPECT_THAT(r.launch->argv, ElementsAre("vllm", "serve", "m", "--host", "127.0.0.1", "--port",
                                          "8123", "--no-enable-prefix-caching"));
  EXPECT_EQ(r.launch->env, (Env{{"VLLM_ATTENTION_BACKEND", "FLASHINFER"}}));
}

// 0.14 and 0.15 must get the flag: the variable is ignored from right after 0.14.0 on, so an
// environment variable there would silently measure vLLM's own default backend.
TEST(VllmRecipe, FlagFromThirteenOnEvenWhereTheVariableStillWorked) {
  for (const char* version : {"0.13.0", "0.14.1", "0.15.1", "0.16.0"}) {
    RenderedEngine r = Render("vllm", {{"engine", "vllm"},
                                       {"depth", 1},
                                       {"model", "m"},
                                       {"attention_backend", "TRITON_ATTN"},
                                       {"engine_version", version}});
    EXPECT_THAT(r.launch->argv, ::testing::Contains("--attention-backend")) << version;
    EXPECT_TRUE(r.launch->env.empty()) << version;
    EXPECT_THAT(r.launch->env_unset, ElementsAre("VLLM_ATTENTION_BACKEND")) << version;
  }
}

TEST(VllmRecipe, VersionFromInventoryAndRcSuffix) {
  RecipeContext c = Context();
  c.engine_versions["vllm"] = "0.12.2rc1+cu128";
  RenderedEngine r = Render("vllm",
                            {{"engine", "vllm"},
                             {"depth", 1},
                             {"model", "m"},
                             {"attention_backend", "TRITON_ATTN"},
                             {"prefix_caching", true},
                             {"extra_env", {{"HF_HOME", "/h"}}}},
                            c);
  EXPECT_EQ(r.launch->env, (Env{{"VLLM_ATTENTION_BACKEND", "TRITON_ATTN"}, {"HF_HOME", "/h"}}));
  EXPECT_EQ(r.launch->argv.back(), "--enable-prefix-caching");
  c.engine_versions["vllm"] = "0.13.0";
  r = Render(
      "vllm",
      {{"engine", "vllm"}, {"depth", 1}, {"model", "m"}, {"attention_backend", "TRITON_ATTN"}}, c);
  EXPECT_TRUE(r.launch->env.empty());
}

// The variables that pin an engine to its agent's GPUs belong to the agent: a cell cannot set
// them, in either form of extra_env, for any recipe.
TEST(VllmRecipe, ExtraEnvCannotMoveTheEngineToAnotherGpu) {
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                           "CUDA_DEVICE_ORDER", "NCCL_NVLS_ENABLE"}) {
    absl::Status s = RenderError(
        "vllm", {{"engine", "vllm"}, {"depth", 1}, {"model", "m"}, {"extra_env", {{name, "1"}}}});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(s.message(), HasSubstr(std::string(name) + " is set by the agent"));
    s = RenderError("sglang", {{"engine", "sglang"},
                               {"depth", 1},
                               {"model", "m"},
                               {"extra_env", std::string("HF_HOME=/h ") + name + "=0"}});
    EXPECT_THAT(s.message(), HasSubstr(std::string(name) + " is set by the agent")) << name;
  }
}

TEST(VllmRecipe, RejectsUnknownAndMistypedParameters) {
  absl::Status s = RenderError(
      "vllm", {{"engine", "vllm"}, {"depth", 1}, {"model", "m"}, {"tensor_parallel", 2}});
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
  s = RenderError(
      "vllm", {{"engine", "vllm"}, {"depth", 1}, {"model", "m"}, {"spec", "off"}, {"spec_k", 1}});
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
              ElementsAre("python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
                          "--host", "127.0.0.1", "--port", "8123", "--random-seed", "7",
                          "--attention-backend", "triton", "--speculative-algorithm", "EAGLE",
                          "--speculative-draft-model-path", "draft", "--speculative-num-steps", "3",
                          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                          "--tp-size", "2", "--context-length", "16384", "--disable-radix-cache",
                          "--enable-metrics"));
  EXPECT_FALSE(r.spec_metrics.available());
  // Never the windowed gauges: per-request details, else the verify-step counter
  // (sglang#25689: `name="sglang:spec_verify_calls_total"`; prometheus_client adds no second
  // `_total`, and the parser matches the name with or without it).
  EXPECT_EQ(r.draft_timings, DraftTimings::kSglangSpecDetails);
  EXPECT_EQ(r.endpoints.extra_request_fields,
            nlohmann::json({{"return_spec_tokens_details", true}}));
  EXPECT_EQ(r.spec_step_counters.verify_steps, "sglang:spec_verify_calls");
  EXPECT_THAT(
      RenderError("sglang", {{"engine", "sglang"}, {"depth", 1}, {"model", "m"}, {"spec_k", 2}})
          .message(),
      HasSubstr("spec_method"));
}

// SGLang's --speculative-algorithm choices are EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM: a
// matrix's mtp / draft map onto them, anything else is refused before a GPU is rented.
TEST(SglangRecipe, MapsSpeculationMethodsOntoItsAlgorithms) {
  auto algorithm = [](const std::string& spec) {
    RenderedEngine r = Render(
        "sglang",
        {{"engine", "sglang"}, {"depth", 1}, {"model", "m"}, {"spec", spec}, {"spec_model", "d"}});
    auto it = std::find(r.launch->argv.begin(), r.launch->argv.end(), "--speculative-algorithm");
    return it == r.launch->argv.end() || it + 1 == r.launch->argv.end() ? std::string() : *(it + 1);
  };
  EXPECT_EQ(algorithm("mtp:2"), "NEXTN");
  EXPECT_EQ(algorithm("eagle3:3"), "EAGLE3");
  EXPECT_EQ(algorithm("draft:4"), "STANDALONE");
  EXPECT_EQ(algorithm("NGRAM:4"), "NGRAM");
  absl::Status s = RenderError(
      "sglang", {{"engine", "sglang"}, {"depth", 1}, {"model", "m"}, {"spec", "medusa:2"}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("EAGLE, EAGLE3, NEXTN, STANDALONE or NGRAM"));
}

nlohmann::json LlamaDraftCell(const std::string& version) {
  nlohmann::json cell = {{"engine", "llama.cpp"},
                         {"depth", 4096},
                         {"model", "/models/target.gguf"},
                         {"spec_model", "/models/draft.gguf"},
                         {"spec_k", 8},
                         {"spec_k_min", 2},
                         {"spec_p_min", 0.5},
                         {"gpu_layers", 99},
                         {"gpu_layers_draft", 99},
                         {"flash_attn", "on"},
                         {"max_model_len", 8192}};
  if (!version.empty()) cell["engine_version"] = version;
  return cell;
}

// Before b6325 (llama.cpp#15434, e81b8e4b7): --flash-attn is a bare flag and drafting is
// --draft-max / --draft-min; and before b6723 a slot drafts only for requests with cache_prompt
// (tools/server/server.cpp at d00cbea63^: `return ctx_dft && params.speculative.n_max > 0 &&
// params.cache_prompt;`), which ladder sends false: such speculation cells are refused.
TEST(LlamaCppRecipe, BeforeFlashAttnTookAValue) {
  nlohmann::json off = LlamaDraftCell("b6324");
  off.erase("spec_model");
  off["spec_k"] = 0;
  EXPECT_THAT(Render("llama.cpp", off).launch->argv,
              ElementsAre("llama-server", "--model", "/models/target.gguf", "--host", "127.0.0.1",
                          "--port", "8123", "--metrics", "--ctx-size", "8192", "--n-gpu-layers",
                          "99", "--parallel", "1", "--flash-attn"));
  off["flash_attn"] = "off";
  EXPECT_THAT(Render("llama.cpp", off).launch->argv,
              ::testing::Not(::testing::Contains(::testing::HasSubstr("flash"))));
  off["flash_attn"] = "auto";
  EXPECT_THAT(RenderError("llama.cpp", off).message(), HasSubstr("b6325 on"));
  off["engine_version"] = "b6325";  // the first build with the value form
  EXPECT_THAT(Render("llama.cpp", off).launch->argv, ::testing::Contains("auto"));
  absl::Status spec = RenderError("llama.cpp", LlamaDraftCell("b6722"));
  EXPECT_EQ(spec.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.message(), HasSubstr("drafts only for requests with cache_prompt: true"));
  EXPECT_THAT(spec.message(), HasSubstr("use b6723 or later"));
}

// b6723 to before b8955: --flash-attn on|off|auto, still --draft-max; --fit off from b7407.
TEST(LlamaCppRecipe, FlashAttnValueWithTheOldDraftFlags) {
  RenderedEngine r = Render("llama.cpp", LlamaDraftCell("b7100"));
  EXPECT_THAT(r.launch->argv,
              ElementsAre("llama-server", "--model", "/models/target.gguf", "--host", "127.0.0.1",
                          "--port", "8123", "--metrics", "--ctx-size", "8192", "--n-gpu-layers",
                          "99", "--parallel", "1", "--cache-ram", "0", "--flash-attn", "on",
                          "--model-draft", "/models/draft.gguf", "--draft-max", "8", "--draft-min",
                          "2", "--draft-p-min", "0.5", "--gpu-layers-draft", "99"));
  EXPECT_EQ(r.rendered_from, "build b7100");
  // The last build before #22397 (14e733e36, b8955) still spells --draft-max.
  EXPECT_THAT(Render("llama.cpp", LlamaDraftCell("b8954")).launch->argv,
              ::testing::Contains("--draft-max"));
  EXPECT_THAT(Render("llama.cpp", LlamaDraftCell("b7407")).launch->argv,
              ::testing::Contains("--fit"));
  EXPECT_THAT(Render("llama.cpp", LlamaDraftCell("b7406")).launch->argv,
              ::testing::Not(::testing::Contains("--fit")));
}

// b8955 (llama.cpp#22397, 14e733e36) to before b9131: the --spec-draft-* names, no draft-*
// --spec-type yet (a draft model alone drafts).
TEST(LlamaCppRecipe, SpecDraftFlagsAfterTheRename) {
  RenderedEngine r = Render("llama.cpp", LlamaDraftCell("b8955"));
  EXPECT_THAT(
      r.launch->argv,
      ElementsAre("llama-server", "--model", "/models/target.gguf", "--host", "127.0.0.1", "--port",
                  "8123", "--metrics", "--ctx-size", "8192", "--n-gpu-layers", "99", "--parallel",
                  "1", "--cache-ram", "0", "--fit", "off", "--flash-attn", "on", "--model-draft",
                  "/models/draft.gguf", "--spec-draft-n-max", "8", "--spec-draft-n-min", "2",
                  "--spec-draft-p-min", "0.5", "--spec-draft-ngl", "99"));
}

// b9131 on (llama.cpp#22964, 634275fbb), and an undetected build: drafting must be asked for
// with --spec-type, or the target runs alone.
TEST(LlamaCppRecipe, SpecTypeFromB9131AndForAnUnknownBuild) {
  for (const std::string version : {"b9131", "b11004", ""}) {
    RenderedEngine r = Render("llama.cpp", LlamaDraftCell(version));
    EXPECT_THAT(r.launch->argv,
                ElementsAre("llama-server", "--model", "/models/target.gguf", "--host", "127.0.0.1",
                            "--port", "8123", "--metrics", "--ctx-size", "8192", "--n-gpu-layers",
                            "99", "--parallel", "1", "--cache-ram", "0", "--fit", "off",
                            "--flash-attn", "on", "--spec-type", "draft-simple", "--model-draft",
                            "/models/draft.gguf", "--spec-draft-n-max", "8", "--spec-draft-n-min",
                            "2", "--spec-draft-p-min", "0.5", "--spec-draft-ngl", "99"))
        << version;
  }
  RecipeContext c = Context();
  c.engine_versions["llama.cpp"] = "b8000";  // detected by the runner
  nlohmann::json cell = LlamaDraftCell("");
  EXPECT_THAT(Render("llama.cpp", cell, c).launch->argv, ::testing::Contains("--draft-max"));
}

// A build without its git history says "version: 0 (unknown)", a shallow clone build 1: their
// number says nothing, so they get the newest spelling, never the oldest (which would drop
// --cache-ram 0 and --spec-type none and render flash_attn: off as nothing).
TEST(LlamaCppRecipe, BuildZeroOrOneIsUnknownNotOldest) {
  EXPECT_EQ(*ParseEngineVersion("llama.cpp", "version: 0 (unknown)\nbuilt with cc\n"), "b0");
  for (const std::string version : {"b0", "b1"}) {
    EXPECT_EQ(KnownLlamaCppBuild(version), std::nullopt);
    nlohmann::json cell = {{"engine", "llama.cpp"}, {"depth", 1},
                           {"model", "/m.gguf"},    {"spec", "off"},
                           {"flash_attn", "off"},   {"engine_version", version}};
    RenderedEngine r = Render("llama.cpp", cell);
    EXPECT_THAT(
        r.launch->argv,
        ElementsAre("llama-server", "--model", "/m.gguf", "--host", "127.0.0.1", "--port", "8123",
                    "--metrics", "--n-gpu-layers", "999", "--parallel", "1", "--cache-ram", "0",
                    "--fit", "off", "--flash-attn", "off", "--spec-type", "none"))
        << version;
    EXPECT_THAT(r.rendered_from, HasSubstr("no build number"));
  }
  EXPECT_EQ(KnownLlamaCppBuild("b2"), 2);
}

// What a cell does not say is pinned, so that no default of the build moves the measurement:
// every layer on the GPU and flash attention on (defaults from #15434, b6325; 0 and off before),
// the draft's p_min 0 (from #23269, d14ce3dab, b9235: `float p_min = 0.0f;`, 0.75f before).
TEST(LlamaCppRecipe, PinsWhatTheCellDoesNotSay) {
  nlohmann::json cell = {{"engine", "llama.cpp"},   {"depth", 1},
                         {"model", "/m.gguf"},      {"spec", "draft:4"},
                         {"spec_model", "/d.gguf"}, {"engine_version", "b9234"}};
  RenderedEngine r = Render("llama.cpp", cell);
  EXPECT_THAT(r.launch->argv,
              ElementsAre("llama-server", "--model", "/m.gguf", "--host", "127.0.0.1", "--port",
                          "8123", "--metrics", "--n-gpu-layers", "999", "--parallel", "1",
                          "--cache-ram", "0", "--fit", "off", "--flash-attn", "on", "--spec-type",
                          "draft-simple", "--model-draft", "/d.gguf", "--spec-draft-n-max", "4",
                          "--spec-draft-p-min", "0", "--spec-draft-ngl", "999"));
  EXPECT_EQ(r.pinned, nlohmann::json({{"gpu_layers", 999},
                                      {"fit", "off"},
                                      {"flash_attn", "on"},
                                      {"spec_p_min", 0.0},
                                      {"gpu_layers_draft", 999}}));
  EXPECT_THAT(r.launch->env_unset_prefixes, ElementsAre("LLAMA_ARG_"));
  EXPECT_EQ(r.endpoints.config_path, "/props");
}

// /props reports one slot's context (padded to 256) and the slots: what a batch-1 cell expects.
TEST(LlamaCppRecipe, ExpectsTheContextAndSlotsItAsked) {
  RenderedEngine r = Render("llama.cpp", LlamaDraftCell("b10309"));
  EXPECT_EQ(r.expected_config,
            nlohmann::json({{"n_ctx", {{"min", 8192}, {"max", 8192}}}, {"total_slots", 1}}));
  nlohmann::json cell = LlamaDraftCell("b10309");
  cell["max_model_len"] = 1000;
  EXPECT_EQ(Render("llama.cpp", cell).expected_config["n_ctx"],
            nlohmann::json({{"min", 1000}, {"max", 1024}}));
  cell["parallel"] = 4;  // a slot has a share of the context: n_ctx is not checked
  EXPECT_EQ(Render("llama.cpp", cell).expected_config, nlohmann::json({{"total_slots", 4}}));
}

TEST(LlamaCppRecipe, MtpNeedsNoDraftModelButANewBuild) {
  nlohmann::json cell = {{"engine", "llama.cpp"},
                         {"depth", 1},
                         {"model", "/m.gguf"},
                         {"spec", "mtp:3"},
                         {"engine_version", "b9769"}};
  EXPECT_THAT(Render("llama.cpp", cell).launch->argv,
              ElementsAre("llama-server", "--model", "/m.gguf", "--host", "127.0.0.1", "--port",
                          "8123", "--metrics", "--n-gpu-layers", "999", "--parallel", "1",
                          "--cache-ram", "0", "--fit", "off", "--flash-attn", "on", "--spec-type",
                          "draft-mtp", "--spec-draft-n-max", "3", "--spec-draft-p-min", "0"));
  cell["engine_version"] = "b9179";
  EXPECT_THAT(RenderError("llama.cpp", cell).message(),
              HasSubstr("this llama-server has no --spec-type draft-mtp (build b9179): built "
                        "before b9180?"));
  cell["engine_version"] = "latest";
  EXPECT_THAT(RenderError("llama.cpp", cell).message(), HasSubstr("a build number"));
}

// draft-eagle3 is listed from b9131 but drafts from #18039 (88a39274e, b9606): before it
// common/speculative.cpp has `bool has_draft_eagle3 = false; // TODO PR-18039`.
TEST(LlamaCppRecipe, Eagle3DraftsFromB9606) {
  nlohmann::json cell = {{"engine", "llama.cpp"},   {"depth", 1},
                         {"model", "/m.gguf"},      {"spec", "eagle3:3"},
                         {"spec_model", "/e.gguf"}, {"engine_version", "b9605"}};
  EXPECT_THAT(RenderError("llama.cpp", cell).message(),
              HasSubstr("draft-eagle3 drafts from b9606"));
  cell["engine_version"] = "b9606";
  EXPECT_THAT(Render("llama.cpp", cell).launch->argv, ::testing::Contains("draft-eagle3"));
  cell["engine_version"] = "b0";  // unknown: rendered, with a note that only the check can tell
  RenderedEngine r = Render("llama.cpp", cell);
  ASSERT_EQ(r.render_notes.size(), 1u);
  EXPECT_THAT(r.render_notes[0], HasSubstr("only the speculation check can tell"));
}

TEST(LlamaCppRecipe, AcceptanceFromCountersElseTimings) {
  RenderedEngine r = Render("llama.cpp", LlamaDraftCell("b9180"));
  EXPECT_EQ(r.spec_metrics.num_drafts, "llamacpp:spec_decode_num_drafts");
  EXPECT_EQ(r.spec_metrics.num_draft_tokens, "llamacpp:spec_decode_num_draft_tokens");
  EXPECT_EQ(r.spec_metrics.num_accepted_tokens, "llamacpp:spec_decode_num_accepted_tokens");
  EXPECT_EQ(r.draft_timings, DraftTimings::kLlamaCppTimings);
  EXPECT_EQ(r.endpoints.extra_request_fields,
            nlohmann::json({{"cache_prompt", false}, {"timings_per_token", true}}));
  EXPECT_THAT(RenderError("llama.cpp",
                          {{"engine", "llama.cpp"}, {"depth", 1}, {"model", "m"}, {"spec_k", 2}})
                  .message(),
              HasSubstr("--model-draft"));
  EXPECT_THAT(
      RenderError(
          "llama.cpp",
          {{"engine", "llama.cpp"}, {"depth", 1}, {"model", "m"}, {"attention_backend", "x"}})
          .message(),
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
  EXPECT_THAT(RenderError("external", {{"engine", "external"}, {"depth", 1}, {"url", "https://x"}})
                  .message(),
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
                          "--host", "127.0.0.1", "--port", "8123", "--policy", "legacy", "--spec-k",
                          "1", "--acceptance", "0.5", "--seed", "3", "--attention-backend",
                          "TRITON_ATTN", "--malformed"));
  EXPECT_EQ(r.endpoints.model, "tiny");
  EXPECT_EQ(r.spec_k, 1);
  EXPECT_THAT(RenderError("synthetic", {{"engine", "synthetic"}, {"depth", 1}, {"policy", "fast"}})
                  .message(),
              HasSubstr("expected legacy or spec-aware"));
}

TEST(SyntheticRecipe, PassesTheModelDevice) {
  RenderedEngine r = Render(
      "synthetic",
      {{"engine", "synthetic"}, {"depth", 1024}, {"preset", "gemma4-31b"}, {"device", "cuda"}});
  EXPECT_THAT(r.launch->argv,
              ElementsAre("/opt/ladder/bin/ladder", "engine", "synthetic", "--preset", "gemma4-31b",
                          "--host", "127.0.0.1", "--port", "8123", "--device", "cuda"));
  EXPECT_THAT(RenderError("synthetic", {{"engine", "synthetic"}, {"depth", 1}, {"device", "tpu"}})
                  .message(),
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

TEST(EngineVersion, ParsesEachEnginesOutput) {
  EXPECT_EQ(*ParseEngineVersion("vllm",
                                "INFO 12-01 [__init__.py] Automatically detected platform "
                                "cuda.\n0.15.1\n"),
            "0.15.1");
  EXPECT_EQ(*ParseEngineVersion("sglang", "0.5.4.post1\n"), "0.5.4.post1");
  EXPECT_EQ(*ParseEngineVersion("llama.cpp",
                                "ggml_cuda_init: found 1 CUDA devices\n"
                                "version: 7100 (c49daff5b)\nbuilt with cc\n"),
            "b7100");
  EXPECT_EQ(*ParseEngineVersion("llama.cpp", "version: 0.1.2-dev (build 10513, commit 2f3923bc8)"),
            "b10513");
  EXPECT_EQ(ParseEngineVersion("llama.cpp", "error: invalid argument").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ParseEngineVersion("vllm", "Traceback: No module named torch").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(LlamaCppBuild("b9180"), 9180);
  EXPECT_EQ(LlamaCppBuild("9180"), 9180);
  EXPECT_EQ(LlamaCppBuild("0.15.1"), std::nullopt);
}

TEST(EngineVersion, DetectRunsTheVersionCommand) {
  RecipeContext c = Context();
  c.llama_server_executable = "/bin/echo";  // prints its argument: "--version"
  auto v = DetectEngineVersion("llama.cpp", c, std::chrono::seconds(10));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(v.status().message(), HasSubstr("--version"));
  c.vllm_executable = "/nonexistent/vllm";
  EXPECT_FALSE(DetectEngineVersion("vllm", c, std::chrono::seconds(10)).ok());
  EXPECT_FALSE(VersionCommand("synthetic", c).has_value());
}

}  // namespace
}  // namespace ladder::engines
