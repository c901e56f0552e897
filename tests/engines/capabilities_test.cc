// What a llama-server's own --help says it accepts (capabilities.h), the recipe rendered from it
// alone (a build number of 0), the child's environment, and the configuration check
// (engine_config.h): against b10309's recorded --help, b6722's --help rendered from its source,
// and /props as tools/server documents it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "fixture_files.h"
#include "ladder/engines/capabilities.h"
#include "ladder/engines/engine_config.h"
#include "ladder/engines/engine_version.h"
#include "ladder/engines/process.h"
#include "ladder/engines/recipe.h"

namespace ladder::engines {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

EngineCapabilities Help(const std::string& recording) {
  auto caps = ParseLlamaServerHelp(ReadFixture(recording, "help.txt"));
  EXPECT_TRUE(caps.ok()) << caps.status();
  return caps.ok() ? *caps : EngineCapabilities{};
}

absl::StatusOr<RenderedEngine> RenderWith(const EngineCapabilities& help, nlohmann::json cell) {
  RecipeContext c;
  c.port = 8123;
  c.capabilities["llama.cpp"] = help;
  return (*FindBuiltinRecipe("llama.cpp"))->Render(cell, c);
}

TEST(LlamaServerHelp, ReadsB10309) {
  EngineCapabilities caps = Help("llama.cpp-b10309-cpu");
  EXPECT_EQ(caps.source, "llama-server --help");
  const EngineOption* fa = caps.Find("--flash-attn");
  ASSERT_NE(fa, nullptr);
  EXPECT_THAT(fa->spellings, ElementsAre("-fa", "--flash-attn"));
  EXPECT_EQ(fa->value_hint, "[on|off|auto]");
  EXPECT_THAT(caps.Values("--flash-attn"), ElementsAre("on", "off", "auto"));
  EXPECT_THAT(caps.Values("--fit"), ElementsAre("on", "off"));
  // Spellings longer than 37 columns: the help is on the next line.
  const EngineOption* ngld = caps.Find("--gpu-layers-draft");
  ASSERT_NE(ngld, nullptr);
  EXPECT_THAT(ngld->spellings, ElementsAre("--spec-draft-ngl", "-ngld", "--gpu-layers-draft",
                                           "--n-gpu-layers-draft"));
  EXPECT_EQ(ngld->value_hint, "N");
  EXPECT_THAT(ngld->help, HasSubstr("max. number of draft model layers"));
  EXPECT_THAT(caps.Values("--spec-type"),
              ElementsAre("none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash",
                          "draft-dspark", "ngram-simple", "ngram-map-k", "ngram-map-k4v",
                          "ngram-mod", "ngram-cache"));
  // "--draft, --draft-n, --draft-max N   the argument has been removed. use
  // --spec-draft-n-max or --spec-ngram-mod-n-max": listed, never offered.
  ASSERT_NE(caps.Find("--draft-max"), nullptr);
  EXPECT_TRUE(caps.Find("--draft-max")->removed);
  EXPECT_FALSE(caps.Has("--draft-max"));
  EXPECT_EQ(caps.FirstOffered({"--draft-max", "--spec-draft-n-max"}), "--spec-draft-n-max");
  EXPECT_TRUE(caps.Has("--cache-ram"));
  EXPECT_FALSE(caps.Has("--no-such-option"));
  // Section headers ("----- common params -----") are no options.
  EXPECT_EQ(caps.Find("-----"), nullptr);
}

TEST(LlamaServerHelp, RefusesTextWithoutOptions) {
  auto caps = ParseLlamaServerHelp("error: unknown argument: --help\n");
  EXPECT_EQ(caps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(caps.status().message(), HasSubstr("listed no options"));
}

// The runner's probe runs the binary's --help: here a program that prints b10309's recorded
// --help as llama-server does, and one whose --help is not llama-server's (cat's options are
// indented: none in column 0).
TEST(LlamaServerHelp, DetectRunsTheHelpCommand) {
  const std::string script = ::testing::TempDir() + "/fake-llama-server";
  {
    std::ofstream out(script);
    out << "#!/bin/sh\ncat '" << LADDER_ENGINE_FIXTURES << "/llama.cpp-b10309-cpu/help.txt'\n";
  }
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  RecipeContext c;
  c.llama_server_executable = script;
  auto caps = DetectCapabilities("llama.cpp", c, std::chrono::seconds(30));
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->options.size(), Help("llama.cpp-b10309-cpu").options.size());
  EXPECT_TRUE(caps->Has("--spec-type"));
  c.llama_server_executable = "/bin/cat";
  auto not_llama = DetectCapabilities("llama.cpp", c, std::chrono::seconds(30));
  EXPECT_EQ(not_llama.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(not_llama.status().message(), HasSubstr("listed no options"));
  EXPECT_EQ(DetectCapabilities("external", c, std::chrono::seconds(1)).status().code(),
            absl::StatusCode::kNotFound);
}

// A llama-server built without git history reports build 0: its --help alone decides, and
// b10309's --help gives the newest spellings with everything pinned.
TEST(LlamaServerHelp, BuildZeroRendersFromItsHelpAlone) {
  EngineCapabilities caps = Help("llama.cpp-b10309-cpu");
  auto off = RenderWith(caps, {{"engine", "llama.cpp"},
                               {"depth", 1},
                               {"model", "/m.gguf"},
                               {"flash_attn", "off"},
                               {"engine_version", "b0"}});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_THAT(
      off->launch->argv,
      ElementsAre("llama-server", "--model", "/m.gguf", "--host", "127.0.0.1", "--port", "8123",
                  "--metrics", "--n-gpu-layers", "999", "--parallel", "1", "--cache-ram", "0",
                  "--fit", "off", "--flash-attn", "off", "--spec-type", "none"));
  EXPECT_EQ(off->rendered_from, "llama-server --help");
  auto on = RenderWith(caps, {{"engine", "llama.cpp"},
                              {"depth", 1},
                              {"model", "/m.gguf"},
                              {"spec", "draft:4"},
                              {"spec_model", "/d.gguf"},
                              {"engine_version", "b0"}});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_THAT(on->launch->argv,
              ElementsAre("llama-server", "--model", "/m.gguf", "--host", "127.0.0.1", "--port",
                          "8123", "--metrics", "--n-gpu-layers", "999", "--parallel", "1",
                          "--cache-ram", "0", "--fit", "off", "--flash-attn", "on", "--spec-type",
                          "draft-simple", "--model-draft", "/d.gguf", "--spec-draft-n-max", "4",
                          "--spec-draft-p-min", "0", "--spec-draft-ngl", "999"));
}

// b6722 (its --help rendered from common/arg.cpp at 8328fd4ba): the value form of --flash-attn,
// --draft-max, no --cache-ram, --fit or --spec-type. With build number 0 the --help alone says
// that this build drafts only with cache_prompt: speculation is refused with the reason.
TEST(LlamaServerHelp, B6722HelpAloneRefusesSpeculationAndSpellsOldFlags) {
  EngineCapabilities caps = Help("llama.cpp-b6722-help-rendered");
  auto off = RenderWith(caps, {{"engine", "llama.cpp"},
                               {"depth", 1},
                               {"model", "/m.gguf"},
                               {"max_model_len", 4096},
                               {"engine_version", "b0"}});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_THAT(off->launch->argv,
              ElementsAre("llama-server", "--model", "/m.gguf", "--host", "127.0.0.1", "--port",
                          "8123", "--metrics", "--ctx-size", "4096", "--n-gpu-layers", "999",
                          "--parallel", "1", "--flash-attn", "on"));
  EXPECT_FALSE(off->spec_off_pinned);
  auto on = RenderWith(caps, {{"engine", "llama.cpp"},
                              {"depth", 1},
                              {"model", "/m.gguf"},
                              {"spec", "draft:4"},
                              {"spec_model", "/d.gguf"},
                              {"engine_version", "b0"}});
  EXPECT_EQ(on.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(on.status().message(),
              HasSubstr("drafts only for requests with cache_prompt: true (no --cache-ram, its "
                        "--help does not list it: built before b6723"));
  auto mtp = RenderWith(caps, {{"engine", "llama.cpp"},
                               {"depth", 1},
                               {"model", "/m.gguf"},
                               {"spec", "mtp:2"},
                               {"engine_version", "b0"}});
  EXPECT_FALSE(mtp.ok());
}

// A --help without --spec-type (and with --cache-ram): an MTP cell fails at once, naming the
// option and the build that brought it; the spelling the binary lists is the one rendered.
TEST(LlamaServerHelp, MissingOptionIsNamed) {
  auto caps = ParseLlamaServerHelp(ReadFixture("llama.cpp-b6722-help-rendered", "help.txt") +
                                   "-cram, --cache-ram N                    set the maximum cache "
                                   "size in MiB (default: 8192, -1 - no limit, 0 -\n");
  ASSERT_TRUE(caps.ok());
  auto mtp = RenderWith(*caps, {{"engine", "llama.cpp"},
                                {"depth", 1},
                                {"model", "/m.gguf"},
                                {"spec", "mtp:2"},
                                {"engine_version", "b0"}});
  EXPECT_THAT(mtp.status().message(),
              HasSubstr("this llama-server has no --spec-type draft-mtp (not among the values its "
                        "--help lists): built before b9180?"));
  auto draft = RenderWith(*caps, {{"engine", "llama.cpp"},
                                  {"depth", 1},
                                  {"model", "/m.gguf"},
                                  {"spec", "draft:3"},
                                  {"spec_model", "/d.gguf"},
                                  {"engine_version", "b0"}});
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_THAT(draft->launch->argv, Contains("--draft-max"));
  EXPECT_THAT(draft->launch->argv, Contains("--draft-p-min"));
  EXPECT_THAT(draft->launch->argv, Contains("--gpu-layers-draft"));
  EXPECT_THAT(draft->launch->argv, Not(Contains("--spec-type")));
}

// LLAMA_ARG_* override llama-server's flags (b10309's --help: "(env: LLAMA_ARG_CTX_SIZE)"):
// they do not reach the child unless the cell sets them; the agent's own variables do.
TEST(ChildEnvironment, DropsLlamaArgUnlessTheCellSetsIt) {
  EngineCapabilities caps = Help("llama.cpp-b10309-cpu");
  EXPECT_THAT(caps.Find("--ctx-size")->help, HasSubstr("(env: LLAMA_ARG_CTX_SIZE)"));
  auto r = RenderWith(caps, {{"engine", "llama.cpp"},
                             {"depth", 1},
                             {"model", "/m.gguf"},
                             {"extra_env", "LLAMA_ARG_THREADS=4"}});
  ASSERT_TRUE(r.ok()) << r.status();
  const char* parent[] = {"LLAMA_ARG_CTX_SIZE=512", "LLAMA_ARG_THREADS=2", "CUDA_VISIBLE_DEVICES=1",
                          "PATH=/usr/bin",          "LLAMA_CACHE=/x",      nullptr};
  EXPECT_THAT(ChildEnvironment(*r->launch, parent),
              ElementsAre("CUDA_VISIBLE_DEVICES=1", "PATH=/usr/bin", "LLAMA_CACHE=/x",
                          "LLAMA_ARG_THREADS=4"));
}

// GET /props as tools/server/README.md at 82bb48500 (b10309) documents it (abridged to the keys
// read): n_ctx is one slot's context (server-context.cpp: meta->slot_n_ctx), total_slots the
// --parallel value.
const char kProps[] = R"json({
  "default_generation_settings": {
    "id": 0,
    "id_task": -1,
    "n_ctx": 1024,
    "speculative": false,
    "is_processing": false,
    "params": {
      "n_remain": -1,
      "n_decoded": 0,
      "stopping_word": ""
    }
  },
  "total_slots": 1,
  "model_path": "../models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
  "chat_template": "...",
  "chat_template_caps": {},
  "modalities": {
    "vision": false
  },
  "media_marker": "<__media_YoNhud46VdDqbuFmKYEO9PY7A4ARzRfg__>",
  "build_info": "b(build number)-(build commit hash)",
  "is_sleeping": false
})json";

TEST(EngineConfig, ReadsLlamaCppProps) {
  nlohmann::json reported = ReportedConfig("llama.cpp", nlohmann::json::parse(kProps));
  EXPECT_EQ(reported, nlohmann::json({{"n_ctx", 1024},
                                      {"total_slots", 1},
                                      {"build_info", "b(build number)-(build commit hash)"}}));
  EXPECT_EQ(ReportedConfig("llama.cpp", nlohmann::json::array()), nlohmann::json::object());
  EXPECT_EQ(ReportedConfig("vllm", nlohmann::json::parse(kProps)), nlohmann::json::object());
}

// The cell asked a 4096-token context with one slot; a server whose context was shrunk (by
// --fit, or a LLAMA_ARG_CTX_SIZE) reports 1024: a mismatch naming both.
TEST(EngineConfig, ContextOtherThanAskedIsAMismatch) {
  auto r = (*FindBuiltinRecipe("llama.cpp"))
               ->Render({{"engine", "llama.cpp"},
                         {"depth", 1},
                         {"model", "/m.gguf"},
                         {"max_model_len", 4096},
                         {"engine_version", "b10309"}},
                        RecipeContext{});
  ASSERT_TRUE(r.ok());
  nlohmann::json reported = ReportedConfig("llama.cpp", nlohmann::json::parse(kProps));
  ConfigCheck check = CheckConfig(r->expected_config, reported);
  EXPECT_FALSE(check.ok());
  EXPECT_EQ(
      check.mismatches,
      nlohmann::json::array(
          {{{"name", "n_ctx"}, {"expected", {{"min", 4096}, {"max", 4096}}}, {"reported", 1024}}}));
  // Asked 1000: padded to 1024 by the server, which is a match.
  EXPECT_TRUE(CheckConfig({{"n_ctx", {{"min", 1000}, {"max", 1024}}}}, reported).ok());
  // What the engine does not report is not verifiable, never a match.
  ConfigCheck unknown = CheckConfig({{"flash_attn", "on"}}, reported);
  EXPECT_TRUE(unknown.ok());
  EXPECT_THAT(unknown.not_verifiable, ElementsAre("flash_attn"));
}

}  // namespace
}  // namespace ladder::engines
