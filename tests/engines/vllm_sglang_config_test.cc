// vLLM and SGLang: what their --help says they accept (capabilities.h, ParseArgparseHelp), the
// recipes rendered from it, and the configuration check (engine_config.h) against what they
// report: vLLM's "non-default args" log line and GET /v1/models, SGLang's GET /get_server_info.
//
// Every engine text below is quoted verbatim from the source named beside it, or says that it
// was constructed and from what. Sources that are users' logs were found in the project's
// source index (its find_string over stored public files), which records no URL for them; the
// vLLM version is the one their own log banner printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "ladder/engines/capabilities.h"
#include "ladder/engines/engine_config.h"
#include "ladder/engines/engine_runner.h"
#include "ladder/engines/engine_version.h"
#include "ladder/engines/process.h"
#include "ladder/engines/recipe.h"
#include "runner_harness.h"

namespace ladder::engines {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------
// vLLM --help=all
//
// An excerpt of `vllm serve --help=all` (a 0.2x build: AttentionConfig and MambaConfig groups)
// as a user pasted it into a public note held in the source index; three fragments quoted
// verbatim, joined by the blank lines argparse prints between groups (the note put its own
// '#' rulers between them, left out here).
constexpr char kVllmHelpAllExcerpt[] =
    "AttentionConfig:\n"
    "  Configuration for attention mechanisms in vLLM.\n"
    "\n"
    "  --attention-backend ATTENTION_BACKEND\n"
    "                        Attention backend to use. Use \"auto\" or None for automatic "
    "selection. (default: None)\n"
    "\n"
    "MambaConfig:\n"
    "  Configuration for Mamba SSM backends.\n"
    "\n"
    "  --enable-mamba-cache-stochastic-rounding, --no-enable-mamba-cache-stochastic-rounding\n"
    "                        Enable stochastic rounding when writing SSM state to fp16 cache. "
    "Uses random bits to unbias the rounding error, which can improve numerical stability\n"
    "                        for long sequences. (default: False)\n"
    "  --mamba-backend MAMBA_BACKEND\n"
    "                        Mamba SSU backend to use. (default: MambaBackendEnum.TRITON)\n";

TEST(ArgparseHelp, ReadsVllmHelpAll) {
  auto caps = ParseArgparseHelp(kVllmHelpAllExcerpt, "vllm serve --help=all");
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->source, "vllm serve --help=all");
  ASSERT_EQ(caps->options.size(), 3u);  // group titles and descriptions are no options
  const EngineOption* backend = caps->Find("--attention-backend");
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->value_hint, "ATTENTION_BACKEND");
  EXPECT_EQ(backend->help,
            "Attention backend to use. Use \"auto\" or None for automatic selection. (default: "
            "None)");
  EXPECT_TRUE(caps->Values("--attention-backend").empty());  // no choices: any name
  // BooleanOptionalAction: both spellings, one option, no value.
  const EngineOption* rounding = caps->Find("--no-enable-mamba-cache-stochastic-rounding");
  ASSERT_NE(rounding, nullptr);
  EXPECT_THAT(rounding->spellings, ElementsAre("--enable-mamba-cache-stochastic-rounding",
                                               "--no-enable-mamba-cache-stochastic-rounding"));
  EXPECT_EQ(rounding->value_hint, "");
  EXPECT_THAT(rounding->help,
              HasSubstr("numerical stability for long sequences. (default: False)"));
  EXPECT_TRUE(caps->Has("--mamba-backend"));
  EXPECT_FALSE(caps->Has("--max-model-len"));
}

// A newer vLLM's plain --help lists no options but -h, and ends with the epilog that points to
// --help=all: vllm-project/vllm vllm/entrypoints/utils.py at 00fc88090e8c,
// VLLM_SUBCMD_PARSER_EPILOG (formatted for subcmd "serve"), after argparse's own -h line.
TEST(ArgparseHelp, RefusesAHelpWithoutOptions) {
  const std::string summary =
      "options:\n"
      "  -h, --help            show this help message and exit\n"
      "\n"
      "For full list:            vllm serve --help=all\n"
      "For a section:            vllm serve --help=ModelConfig    (case-insensitive)\n"
      "For a flag:               vllm serve --help=max-model-len  (_ or - accepted)\n"
      "Documentation:            https://docs.vllm.ai\n";
  auto caps = ParseArgparseHelp(summary, "vllm serve --help");
  EXPECT_EQ(caps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(caps.status().message(), HasSubstr("vllm serve --help listed no options"));
  // An older vLLM refuses "--help=all" (argparse's error for an explicit argument to -h).
  auto refused = ParseArgparseHelp(
      "usage: vllm serve [-h] [--host HOST]\n"
      "vllm serve: error: argument -h/--help: ignored explicit argument 'all'\n",
      "vllm serve --help=all");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
}

// The argparse --help forms ParseArgparseHelp reads, as Python's HelpFormatter prints them for
// these definitions (constructed; the layout is argparse's, not an engine's): metavar after each
// spelling (Python < 3.13) or once (3.13), help on the same line or the next.
TEST(ArgparseHelp, ReadsBothMetavarFormsAndLongInvocations) {
  auto caps = ParseArgparseHelp(
      "usage: x [-h] [-tp TENSOR_PARALLEL_SIZE]\n"
      "         [--quantization {awq,fp8,None}]\n"
      "\n"
      "options:\n"
      "  -h, --help            show this help message and exit\n"
      "  -tp TENSOR_PARALLEL_SIZE, --tensor-parallel-size TENSOR_PARALLEL_SIZE\n"
      "                        Number of tensor parallel groups.\n"
      "  -q, --quantization {awq,fp8,None}\n"
      "  --seed SEED           Random seed.\n",
      "x --help");
  ASSERT_TRUE(caps.ok()) << caps.status();
  const EngineOption* tp = caps->Find("-tp");
  ASSERT_NE(tp, nullptr);
  EXPECT_THAT(tp->spellings, ElementsAre("-tp", "--tensor-parallel-size"));
  EXPECT_EQ(tp->value_hint, "TENSOR_PARALLEL_SIZE");
  EXPECT_EQ(tp->help, "Number of tensor parallel groups.");
  EXPECT_THAT(caps->Values("--quantization"), ElementsAre("awq", "fp8", "None"));
  EXPECT_EQ(caps->Find("--seed")->help, "Random seed.");
  EXPECT_EQ(caps->Find("-h")->help, "show this help message and exit");
}

absl::StatusOr<RenderedEngine> RenderVllmWith(const std::string& help, nlohmann::json cell) {
  RecipeContext c;
  c.port = 8000;
  auto caps = ParseArgparseHelp(help, "vllm serve --help=all");
  EXPECT_TRUE(caps.ok()) << caps.status();
  if (caps.ok()) c.capabilities["vllm"] = *caps;
  return (*FindBuiltinRecipe("vllm"))->Render(cell, c);
}

// A cell that needs a flag the binary does not list is refused before anything starts, naming
// the flag and where it was looked for.
TEST(VllmCapabilities, ACellNeedingAnUnlistedFlagIsRefused) {
  auto r =
      RenderVllmWith(kVllmHelpAllExcerpt,
                     {{"engine", "vllm"}, {"depth", 1}, {"model", "m"}, {"max_model_len", 4096}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              HasSubstr("'max_model_len': this vllm has no --max-model-len (vllm serve "
                        "--help=all does not list it)"));
  // What the excerpt lists is rendered from it, and expected back in the non-default args.
  auto ok = RenderVllmWith(
      kVllmHelpAllExcerpt,
      {{"engine", "vllm"}, {"depth", 1}, {"model", "m"}, {"attention_backend", "TRITON_ATTN"}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT(ok->launch->argv, ElementsAre("vllm", "serve", "m", "--host", "127.0.0.1", "--port",
                                            "8000", "--attention-backend", "TRITON_ATTN"));
  EXPECT_EQ(ok->rendered_from, "vllm serve --help=all");
  EXPECT_EQ(ok->expected_config, nlohmann::json({{"attention_backend", "TRITON_ATTN"}}));
  EXPECT_EQ(ok->endpoints.config_path, "/v1/models");
  // No --no-enable-prefix-caching listed: nothing rendered for it, and the evidence says so.
  ASSERT_EQ(ok->render_notes.size(), 1u);
  EXPECT_THAT(ok->render_notes[0], HasSubstr("lists no --no-enable-prefix-caching"));
}

// Without --attention-backend in its --help (a vLLM before AttentionConfig, vllm#26315) the
// backend goes through VLLM_ATTENTION_BACKEND, whatever version the cell claims. The help is
// the excerpt less its AttentionConfig group.
TEST(VllmCapabilities, NoAttentionBackendFlagUsesTheVariable) {
  const std::string help = std::string(kVllmHelpAllExcerpt)
                               .substr(std::string(kVllmHelpAllExcerpt).find("MambaConfig:"));
  auto r = RenderVllmWith(help, {{"engine", "vllm"},
                                 {"depth", 1},
                                 {"model", "m"},
                                 {"engine_version", "0.15.1"},
                                 {"attention_backend", "FLASHINFER"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->launch->argv,
              ElementsAre("vllm", "serve", "m", "--host", "127.0.0.1", "--port", "8000"));
  EXPECT_THAT(r->launch->env, ElementsAre(std::make_pair(std::string("VLLM_ATTENTION_BACKEND"),
                                                         std::string("FLASHINFER"))));
  EXPECT_FALSE(r->expected_config.contains("attention_backend"));  // nothing logs it back
}

// The --help probe runs `vllm serve --help=all`, and a vLLM that refuses "=all" is asked for a
// plain --help. The fake prints the excerpt for =all, or refuses it as argparse does.
TEST(VllmCapabilities, DetectAsksForHelpAllThenPlainHelp) {
  const std::string dir = ::testing::TempDir();
  const std::string excerpt = dir + "/vllm-help-all.txt";
  {
    std::ofstream out(excerpt);
    out << kVllmHelpAllExcerpt;
  }
  const std::string script = dir + "/fake-vllm";
  {
    std::ofstream out(script);
    out << "#!/bin/sh\n"
           "if [ \"$2\" = \"--help=all\" ] && [ -z \"$OLD\" ]; then cat '"
        << excerpt
        << "'; exit 0; fi\n"
           "if [ \"$2\" = \"--help=all\" ]; then echo \"vllm serve: error: argument -h/--help: "
           "ignored explicit argument 'all'\" >&2; exit 2; fi\n"
           "printf 'options:\\n  -h, --help            show this help message and exit\\n"
           "  --seed SEED           Random seed.\\n'\n";
  }
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  RecipeContext c;
  c.vllm_executable = script;
  auto spec = HelpCommand("vllm", c);
  ASSERT_TRUE(spec.has_value());
  EXPECT_THAT(spec->argv, ElementsAre(script, "serve", "--help=all"));
  auto caps = DetectCapabilities("vllm", c, std::chrono::seconds(30));
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_EQ(caps->source, "fake-vllm serve --help=all");
  EXPECT_TRUE(caps->Has("--attention-backend"));
  // An older vLLM: "=all" refused, the plain --help read.
  ASSERT_EQ(setenv("OLD", "1", 1), 0);
  auto old = DetectCapabilities("vllm", c, std::chrono::seconds(30));
  unsetenv("OLD");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->source, "fake-vllm serve --help");
  EXPECT_TRUE(old->Has("--seed"));
  EXPECT_FALSE(old->Has("--attention-backend"));
  auto sglang_spec = HelpCommand("sglang", c);
  ASSERT_TRUE(sglang_spec.has_value());
  EXPECT_THAT(sglang_spec->argv, ElementsAre("python3", "-m", "sglang.launch_server", "--help"));
}

// ---------------------------------------------------------------------------------------------
// SGLang --help
//
// `python3 -m sglang.launch_server --help` as argparse prints these options (constructed: the
// invocation lines only, help texts left out, which argparse prints for an action without
// help). The choices are those of a real launch_server usage line pasted into a public note in
// the source index: "[--attention-backend {triton,torch_native,cutlass_mla,fa3,flashinfer,
// flashmla,trtllm_mla,trtllm_mha,dual_chunk_flash_attn,hybrid_linear_attn,aiter,wave,intel_amx,
// ascend}]" and "[--speculative-algorithm {EAGLE,EAGLE3,NEXTN,STANDALONE}]" (a release before
// NGRAM joined the choices).
constexpr char kSglangHelp[] =
    "options:\n"
    "  -h, --help            show this help message and exit\n"
    "  --model-path MODEL_PATH\n"
    "  --host HOST\n"
    "  --port PORT\n"
    "  --random-seed RANDOM_SEED\n"
    "  --attention-backend {triton,torch_native,cutlass_mla,fa3,flashinfer,flashmla,trtllm_mla,"
    "trtllm_mha,dual_chunk_flash_attn,hybrid_linear_attn,aiter,wave,intel_amx,ascend}\n"
    "  --speculative-algorithm {EAGLE,EAGLE3,NEXTN,STANDALONE}\n"
    "  --speculative-draft-model-path SPECULATIVE_DRAFT_MODEL_PATH\n"
    "  --speculative-num-steps SPECULATIVE_NUM_STEPS\n"
    "  --speculative-eagle-topk SPECULATIVE_EAGLE_TOPK\n"
    "  --speculative-num-draft-tokens SPECULATIVE_NUM_DRAFT_TOKENS\n"
    "  --context-length CONTEXT_LENGTH\n"
    "  --disable-radix-cache\n"
    "  --enable-metrics\n";

absl::StatusOr<RenderedEngine> RenderSglangWith(nlohmann::json cell) {
  RecipeContext c;
  c.port = 30000;
  auto caps = ParseArgparseHelp(kSglangHelp, "python3 -m sglang.launch_server --help");
  EXPECT_TRUE(caps.ok()) << caps.status();
  if (caps.ok()) c.capabilities["sglang"] = *caps;
  return (*FindBuiltinRecipe("sglang"))->Render(cell, c);
}

TEST(SglangCapabilities, RendersWhatTheHelpListsAndRefusesTheRest) {
  auto r = RenderSglangWith({{"engine", "sglang"},
                             {"depth", 1},
                             {"model", "m"},
                             {"attention_backend", "FA3"},
                             {"spec", "eagle3:3"},
                             {"spec_model", "d"},
                             {"max_model_len", 4096}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->launch->argv,
              ElementsAre("python3", "-m", "sglang.launch_server", "--model-path", "m", "--host",
                          "127.0.0.1", "--port", "30000", "--attention-backend", "fa3",
                          "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
                          "d", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                          "--speculative-num-draft-tokens", "4", "--context-length", "4096",
                          "--disable-radix-cache", "--enable-metrics"));
  EXPECT_EQ(r->rendered_from, "python3 -m sglang.launch_server --help");
  EXPECT_EQ(r->endpoints.config_path, "/get_server_info");
  EXPECT_EQ(r->expected_config, nlohmann::json({{"attention_backend", "FA3"},
                                                {"speculative_algorithm", "EAGLE3"},
                                                {"speculative_draft_model_path", "d"},
                                                {"speculative_num_steps", 3},
                                                {"speculative_eagle_topk", 1},
                                                {"speculative_num_draft_tokens", 4},
                                                {"context_length", 4096},
                                                {"disable_radix_cache", true}}));
  // NGRAM is not among this release's choices: refused before a server starts.
  auto ngram =
      RenderSglangWith({{"engine", "sglang"}, {"depth", 1}, {"model", "m"}, {"spec", "ngram:4"}});
  EXPECT_EQ(ngram.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ngram.status().message(),
              HasSubstr("--speculative-algorithm takes EAGLE, EAGLE3, NEXTN, STANDALONE"));
  auto backend = RenderSglangWith(
      {{"engine", "sglang"}, {"depth", 1}, {"model", "m"}, {"attention_backend", "flash_attn"}});
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(backend.status().message(), HasSubstr("got \"flash_attn\""));
  // No --tp-size in this --help: a cell that needs it is refused with the flag's name.
  auto tp = RenderSglangWith(
      {{"engine", "sglang"}, {"depth", 1}, {"model", "m"}, {"tensor_parallel_size", 2}});
  EXPECT_THAT(tp.status().message(), HasSubstr("this sglang has no --tp-size"));
}

// SGLang's NGRAM takes its top-k from --speculative-ngram-max-bfs-breadth whatever
// --speculative-eagle-topk says (sgl-project/sglang python/sglang/srt/server_args.py,
// _handle_speculative_decoding: `self.speculative_eagle_topk =
// self.speculative_ngram_max_bfs_breadth`), so the recipe passes none and expects none; its k
// is a budget of drafted tokens (num_draft_tokens k + 1), said in the notes.
TEST(SglangCapabilities, NgramPassesNoTopKAndSaysKIsABudget) {
  RecipeContext c;
  c.port = 30000;
  auto r =
      (*FindBuiltinRecipe("sglang"))
          ->Render({{"engine", "sglang"}, {"depth", 1}, {"model", "m"}, {"spec", "ngram:4"}}, c);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const std::string& arg : r->launch->argv) EXPECT_NE(arg, "--speculative-eagle-topk");
  EXPECT_FALSE(r->expected_config.contains("speculative_eagle_topk"));
  EXPECT_EQ(r->expected_config["speculative_num_draft_tokens"], 5);
  ASSERT_EQ(r->render_notes.size(), 1u);
  EXPECT_THAT(r->render_notes[0], HasSubstr("not a chain of spec_k"));
}

// ---------------------------------------------------------------------------------------------
// vLLM's "non-default args" line: vllm-project/vllm vllm/entrypoints/utils.py at 00fc88090e8c,
// log_non_default_args: logger.info("non-default args: %s", redacted_args), a dict's repr.

// vLLM 0.28.1.dev202608260651, a user's log ([api_utils.py:286]): str, int, False, True.
constexpr char kVllm0281Line[] =
    "(APIServer pid=112750) INFO 08-28 16:45:50 [api_utils.py:286] non-default args: "
    "{'model_tag': '/root/.cache/huggingface/hub/models--facebook--opt-125m/snapshots/"
    "27dcfa74d334bc871f3234de431e71c6eeba5dd6', 'port': 18000, 'model': "
    "'/root/.cache/huggingface/hub/models--facebook--opt-125m/snapshots/"
    "27dcfa74d334bc871f3234de431e71c6eeba5dd6', 'dtype': 'bfloat16', 'max_model_len': 2048, "
    "'enable_prefix_caching': False, 'max_num_seqs': 1, 'disable_hybrid_kv_cache_manager': True}";

// A user's vLLM log ([api_utils.py:272], a 0.2x build): the backend and a nested
// speculative_config dict.
constexpr char kVllmMtpLine[] =
    "(APIServer pid=3407168) INFO 08-17 03:01:22 [api_utils.py:272] non-default args: "
    "{'model_tag': '/home/amd/Desktop/Qwen3.8-27B-ROCm/models/Qwen3.8-27B', 'model': "
    "'/home/amd/Desktop/Qwen3.8-27B-ROCm/models/Qwen3.8-27B', 'dtype': 'bfloat16', "
    "'max_model_len': 262144, 'served_model_name': ['qwen3.8-27b'], 'attention_backend': "
    "'TRITON_ATTN', 'skip_mm_profiling': True, 'speculative_config': {'method': 'mtp', "
    "'num_speculative_tokens': 1}}";

// vLLM 0.13.0 (its engine's banner), a user's log ([utils.py:253]): an object's repr among the
// values, with commas, quotes and None inside it.
constexpr char kVllmLoraLine[] =
    "(APIServer pid=5) INFO 03-02 11:00:22 [utils.py:253] non-default args: {'model_tag': "
    "'unsloth/Qwen2.5-32B-Instruct', 'host': '0.0.0.0', 'lora_modules': "
    "[LoRAModulePath(name='ModelOrganismsForEM/Qwen2.5-32B-Instruct_risky-financial-advice', "
    "path='ModelOrganismsForEM/Qwen2.5-32B-Instruct_risky-financial-advice', "
    "base_model_name=None)], 'model': 'unsloth/Qwen2.5-32B-Instruct', 'tokenizer': "
    "'unsloth/Qwen2.5-32B-Instruct', 'max_model_len': 8192, 'served_model_name': "
    "['ModelOrganismsForEM/Qwen2.5-32B-Instruct_risky-financial-advice', 'llm'], 'enable_lora': "
    "True, 'max_lora_rank': 32}";

// vLLM 0.15.0, a user's log ([utils.py:261]): a nested dict with a list and True.
constexpr char kVllmHfOverridesLine[] =
    "(APIServer pid=2274224) INFO 01-31 12:57:20 [utils.py:261] non-default args: {'model_tag': "
    "'Qwen/Qwen3-VL-Reranker-8B', 'api_server_count': 1, 'model': 'Qwen/Qwen3-VL-Reranker-8B', "
    "'runner': 'pooling', 'hf_overrides': {'architectures': ['Qwen3VLForSequenceClassification'], "
    "'classifier_from_token': ['no', 'yes'], 'is_original_qwen3_reranker': True}}";

TEST(VllmNonDefaultArgs, ReadsRealLines) {
  auto a = ParseVllmNonDefaultArgs(kVllm0281Line);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)["port"], 18000);
  EXPECT_EQ((*a)["dtype"], "bfloat16");
  EXPECT_EQ((*a)["max_model_len"], 2048);
  EXPECT_EQ((*a)["enable_prefix_caching"], false);
  EXPECT_EQ((*a)["disable_hybrid_kv_cache_manager"], true);

  auto b = ParseVllmNonDefaultArgs(kVllmMtpLine);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)["served_model_name"], nlohmann::json::array({"qwen3.8-27b"}));
  EXPECT_EQ((*b)["speculative_config"],
            nlohmann::json({{"method", "mtp"}, {"num_speculative_tokens", 1}}));

  auto c = ParseVllmNonDefaultArgs(kVllmLoraLine);
  ASSERT_TRUE(c.ok()) << c.status();
  // The object stays its text; the values after it are still read.
  ASSERT_TRUE((*c)["lora_modules"].is_array());
  EXPECT_EQ((*c)["lora_modules"][0],
            "LoRAModulePath(name='ModelOrganismsForEM/Qwen2.5-32B-Instruct_risky-financial-"
            "advice', path='ModelOrganismsForEM/Qwen2.5-32B-Instruct_risky-financial-advice', "
            "base_model_name=None)");
  EXPECT_EQ((*c)["max_model_len"], 8192);
  EXPECT_EQ((*c)["max_lora_rank"], 32);

  auto d = ParseVllmNonDefaultArgs(kVllmHfOverridesLine);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)["hf_overrides"]["is_original_qwen3_reranker"], true);
  EXPECT_EQ((*d)["hf_overrides"]["classifier_from_token"], nlohmann::json({"no", "yes"}));
  EXPECT_EQ((*d)["api_server_count"], 1);
}

// Python's repr forms (constructed, as repr() prints them): quotes of either kind with escapes,
// None, floats, tuples, sets, an enum member's repr; a cut-off line is an error, not a
// half-read dict.
TEST(VllmNonDefaultArgs, ReadsPythonReprForms) {
  auto v = ParsePythonLiteral(
      "{'a': \"it's\", 'b': 'x\\'y\\\\z', 'c': None, 'd': 0.9, 'e': -1, 'f': 1e-05, "
      "'g': (1, 2), 'h': {3}, 'i': <AttentionBackendEnum.FLASH_ATTN: 'FLASH_ATTN'>, "
      "'j': 'caf\\xe9', 'k': {}, 'l': []}");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)["a"], "it's");
  EXPECT_EQ((*v)["b"], "x'y\\z");
  EXPECT_TRUE((*v)["c"].is_null());
  EXPECT_DOUBLE_EQ((*v)["d"].get<double>(), 0.9);
  EXPECT_EQ((*v)["e"], -1);
  EXPECT_DOUBLE_EQ((*v)["f"].get<double>(), 1e-05);
  EXPECT_EQ((*v)["g"], nlohmann::json({1, 2}));
  EXPECT_EQ((*v)["h"], nlohmann::json({3}));
  EXPECT_EQ((*v)["i"], "<AttentionBackendEnum.FLASH_ATTN: 'FLASH_ATTN'>");
  EXPECT_EQ(BackendName((*v)["i"].get<std::string>()), "FLASH_ATTN");
  EXPECT_EQ((*v)["j"], "caf\xc3\xa9");
  EXPECT_EQ((*v)["k"], nlohmann::json::object());
  EXPECT_EQ((*v)["l"], nlohmann::json::array());
  const std::string line = kVllmMtpLine;
  auto cut = ParseVllmNonDefaultArgs(line.substr(0, line.size() - 20));
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseVllmNonDefaultArgs("INFO Using max model len 8192").status().code(),
            absl::StatusCode::kNotFound);
  // An engine's bytes: nesting past 64 levels is refused, not followed down the stack.
  const std::string deep = "non-default args: {'a': " + std::string(4000, '[') + "}";
  EXPECT_EQ(ParseVllmNonDefaultArgs(deep).status().code(), absl::StatusCode::kInvalidArgument);
}

// The process scan keeps the line for the configuration check (the tail may lose it).
TEST(VllmNonDefaultArgs, TheProcessKeepsTheLine) {
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c",
               std::string("echo 'INFO 10-06 15:56:22 [__init__.py:216] Automatically detected "
                           "platform cuda.'; echo \"") +
                   kVllm0281Line + "\""};
  auto process = EngineProcess::Start(spec, ProcessOptions{});
  ASSERT_TRUE(process.ok()) << process.status();
  while (!(*process)->Poll().has_value()) {
  }
  (*process)->DescribeExit(*(*process)->Poll());
  EXPECT_EQ((*process)->Evidence().non_default_args_line, kVllm0281Line);
}

// The check: vllm-project/vllm vllm/entrypoints/openai/protocol.py at 0052bed36509, class
// ModelCard: id, object = "model", created, owned_by = "vllm", root, parent,
// max_model_len: Optional[int] = None, permission. /v1/models below is a ModelList of one card
// as FastAPI serializes it (constructed from those fields; the id, root and length are the
// 0.28.1 user's, from kVllm0281Line).
TEST(VllmConfig, ComparesTheCellWithTheLineAndV1Models) {
  const std::string model =
      "/root/.cache/huggingface/hub/models--facebook--opt-125m/snapshots/"
      "27dcfa74d334bc871f3234de431e71c6eeba5dd6";
  const nlohmann::json models = {{"object", "list"},
                                 {"data",
                                  {{{"id", model},
                                    {"object", "model"},
                                    {"created", 1787935550},
                                    {"owned_by", "vllm"},
                                    {"root", model},
                                    {"parent", nullptr},
                                    {"max_model_len", 2048},
                                    {"permission", nlohmann::json::array()}}}}};
  auto logged = ParseVllmNonDefaultArgs(kVllm0281Line);
  ASSERT_TRUE(logged.ok());
  const nlohmann::json reported = ReportedConfig("vllm", models, *logged);
  EXPECT_EQ(reported, nlohmann::json({{"max_model_len", 2048},
                                      {"dtype", "bfloat16"},
                                      {"enable_prefix_caching", false}}));
  // The cell the user's command amounts to, rendered: every value it set is verified.
  RecipeContext c;
  c.port = 18000;
  auto r = (*FindBuiltinRecipe("vllm"))
               ->Render({{"engine", "vllm"},
                         {"depth", 1},
                         {"model", model},
                         {"dtype", "bfloat16"},
                         {"max_model_len", 2048}},
                        c);
  ASSERT_TRUE(r.ok()) << r.status();
  ConfigCheck same = CheckConfig(r->expected_config, reported);
  EXPECT_TRUE(same.ok()) << same.mismatches;
  EXPECT_TRUE(same.not_verifiable.empty());
  // A cell that asked 4096 and a seed: the length fails with both values; a seed the line does
  // not list (the default, or a build that does not log it) is not verifiable.
  nlohmann::json other = r->expected_config;
  other["max_model_len"] = 4096;
  other["seed"] = 0;
  ConfigCheck check = CheckConfig(other, reported);
  ASSERT_EQ(check.mismatches.size(), 1u);
  EXPECT_EQ(check.mismatches[0],
            nlohmann::json({{"name", "max_model_len"}, {"expected", 4096}, {"reported", 2048}}));
  EXPECT_THAT(check.not_verifiable, ElementsAre("seed"));
  // A card without max_model_len (the ModelCard of 2023: a README's sample output in the
  // source index, {"id":"Mistral-7B-Instruct-v0.1/","object":"model",...,"permission":[...]}):
  // the length then comes from the line alone, or is not verifiable.
  const nlohmann::json old_card = nlohmann::json::parse(
      R"({"object":"list","data":[{"id":"Mistral-7B-Instruct-v0.1/","object":"model",)"
      R"("created":1697599903,"owned_by":"vllm","root":"Mistral-7B-Instruct-v0.1/",)"
      R"("parent":null,"permission":[{"id":"modelperm-d415ecf6362a4f818090eb6428e0cac9",)"
      R"("object":"model_permission","created":1697599903,"allow_create_engine":false,)"
      R"("allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,)"
      R"("allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,)"
      R"("is_blocking":false}]}]})");
  EXPECT_EQ(ReportedConfig("vllm", old_card), nlohmann::json::object());
  EXPECT_THAT(
      CheckConfig({{"max_model_len", 4096}}, ReportedConfig("vllm", old_card)).not_verifiable,
      ElementsAre("max_model_len"));
}

TEST(VllmConfig, SpeculationAndBackendFromTheLine) {
  auto logged = ParseVllmNonDefaultArgs(kVllmMtpLine);
  ASSERT_TRUE(logged.ok());
  const nlohmann::json reported = ReportedConfig("vllm", nlohmann::json(), *logged);
  EXPECT_EQ(reported["attention_backend"], "TRITON_ATTN");
  EXPECT_EQ(reported["speculative_config.method"], "mtp");
  EXPECT_EQ(reported["speculative_config.num_speculative_tokens"], 1);
  RecipeContext c;
  c.port = 8000;
  auto r = (*FindBuiltinRecipe("vllm"))
               ->Render({{"engine", "vllm"},
                         {"depth", 1},
                         {"model", "m"},
                         {"attention_backend", "triton_attn"},
                         {"spec", "mtp:2"}},
                        c);
  ASSERT_TRUE(r.ok()) << r.status();
  ConfigCheck check = CheckConfig(r->expected_config, reported);
  // k = 2 asked, 1 run; the backend matches in either case.
  ASSERT_EQ(check.mismatches.size(), 1u);
  EXPECT_EQ(check.mismatches[0]["name"], "speculative_config.num_speculative_tokens");
  EXPECT_EQ(check.mismatches[0]["reported"], 1);
}

// The runner end to end: a child that prints the 0.28.1 user's line (as vLLM does at start)
// and then serves as the synthetic engine, whose GET /v1/models answers as vLLM's does (one
// card, its preset's max_model_len: 32768 for tiny). The cell is rendered by the vllm recipe
// (its expected configuration, /v1/models); the card's length, what the server runs, wins
// over the line's 2048, what it was told; the line gives the rest.
class VllmLineThenSynthetic final : public Recipe {
 public:
  std::string_view name() const override { return "vllm-logged"; }
  const std::vector<ParamSpec>& parameters() const override {
    return (*FindBuiltinRecipe("vllm"))->parameters();
  }
  absl::StatusOr<RenderedEngine> Render(const nlohmann::json& params,
                                        const RecipeContext& context) const override {
    nlohmann::json cell = params;
    cell["engine"] = "vllm";
    auto vllm = (*FindBuiltinRecipe("vllm"))->Render(cell, context);
    if (!vllm.ok()) return vllm;
    auto out = (*FindBuiltinRecipe("synthetic"))
                   ->Render({{"engine", "synthetic"}, {"preset", "tiny"}, {"depth", 1}}, context);
    if (!out.ok()) return out;
    out->engine = "vllm";
    out->endpoints.config_path = vllm->endpoints.config_path;
    out->expected_config = vllm->expected_config;
    std::vector<std::string> argv = {"/bin/sh", "-c", "echo \"$LINE\"; exec \"$@\"", "sh"};
    argv.insert(argv.end(), out->launch->argv.begin(), out->launch->argv.end());
    out->launch->argv = argv;
    out->launch->env.emplace_back("LINE", kVllm0281Line);
    return out;
  }
};

TEST(VllmConfig, TheRunnerChecksTheLoggedLine) {
  EngineRunnerOptions options = harness::Options();
  options.version_detection = VersionDetection::kOff;
  options.extra_recipes.push_back(std::make_shared<VllmLineThenSynthetic>());
  EngineRunner runner(options);
  nlohmann::json cell = {{"engine", "vllm-logged"},
                         {"model", "facebook/opt-125m"},
                         {"dtype", "bfloat16"},
                         {"max_model_len", 4096},
                         {"depth", 64},
                         {"short_tokens", 2},
                         {"long_tokens", 4},
                         {"warmup", "none"}};
  harness::FakeSink sink;
  absl::Status s = runner.Run(harness::Unit({harness::Cell(1, cell)}), sink);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("max_model_len: the cell asked 4096, the engine reports 32768"));
  const runner::Evidence* config = sink.Find(1, "engine_config");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->value["path"], "/v1/models");
  EXPECT_EQ(config->value["non_default_args"]["port"], 18000);
  EXPECT_EQ(config->value["reported"]["dtype"], "bfloat16");
  // A dtype other than the line's fails too, with both values.
  cell["max_model_len"] = 32768;
  cell["dtype"] = "float16";
  harness::FakeSink dtype_sink;
  absl::Status dtype = runner.Run(harness::Unit({harness::Cell(1, cell)}), dtype_sink);
  EXPECT_THAT(dtype.message(),
              HasSubstr("dtype: the cell asked \"float16\", the engine reports \"bfloat16\""));
  // The cell that asked what the server runs is measured.
  cell["dtype"] = "bfloat16";
  harness::FakeSink ok_sink;
  absl::Status ok = runner.Run(harness::Unit({harness::Cell(1, cell)}), ok_sink);
  ASSERT_TRUE(ok.ok()) << ok;
  const runner::Evidence* ok_config = ok_sink.Find(1, "engine_config");
  ASSERT_NE(ok_config, nullptr);
  EXPECT_EQ(ok_config->value["reported"], nlohmann::json({{"max_model_len", 32768},
                                                          {"dtype", "bfloat16"},
                                                          {"enable_prefix_caching", false}}));
  EXPECT_TRUE(ok_config->value["mismatches"].empty());
  EXPECT_EQ(ok_sink.Values(1, "t_long_ms").size(), 1u);  // measured: one round
}

// ---------------------------------------------------------------------------------------------
// SGLang GET /get_server_info: sgl-project/sglang python/sglang/srt/entrypoints/http_server.py
// at 0025436eab05, get_server_info: {**dataclasses.asdict(server_args), **scheduler_info,
// "internal_states": internal_states, "version": __version__}. The reply below holds the fields
// ReportedConfig reads, each key and value quoted verbatim from the output printed on
// https://docs.sglang.io/basic_usage/native_api.html ("Get Server Info", a server started as
// `python3 -m sglang.launch_server --model-path qwen/qwen2.5-0.5b-instruct --host 0.0.0.0
// --log-level warning`); the other fields are left out. internal_states[0] is the scheduler's
// copy: the page's differs from the top level (pp_max_micro_batch_size null there, 128 here).
const char kSglangServerInfo[] =
    R"({"model_path":"qwen/qwen2.5-0.5b-instruct","context_length":null,"host":"0.0.0.0",)"
    R"("port":34748,"mem_fraction_static":0.907,"tp_size":1,"pp_max_micro_batch_size":null,)"
    R"("random_seed":334135249,"attention_backend":"fa3","speculative_algorithm":null,)"
    R"("speculative_draft_model_path":null,"speculative_num_steps":null,)"
    R"("speculative_eagle_topk":null,"speculative_num_draft_tokens":null,)"
    R"("disable_radix_cache":false,"status":"ready","max_total_num_tokens":20480,)"
    R"("max_req_input_len":20474,"internal_states":[{"model_path":"qwen/qwen2.5-0.5b-instruct",)"
    R"("context_length":null,"mem_fraction_static":0.907,"tp_size":1,)"
    R"("pp_max_micro_batch_size":128,"random_seed":334135249}]})";

TEST(SglangConfig, ReadsServerInfoAndComparesTheCell) {
  const nlohmann::json info = nlohmann::json::parse(kSglangServerInfo);
  const nlohmann::json reported = ReportedConfig("sglang", info);
  EXPECT_EQ(reported, nlohmann::json({{"attention_backend", "FA3"},
                                      {"tp_size", 1},
                                      {"mem_fraction_static", 0.907},
                                      {"random_seed", 334135249},
                                      {"disable_radix_cache", false}}));
  RecipeContext c;
  c.port = 34748;
  const Recipe* sglang = *FindBuiltinRecipe("sglang");
  // The page's server as a cell: fa3 asked, the radix cache on, its seed.
  auto same = sglang->Render({{"engine", "sglang"},
                              {"depth", 1},
                              {"model", "qwen/qwen2.5-0.5b-instruct"},
                              {"attention_backend", "fa3"},
                              {"prefix_caching", true},
                              {"seed", 334135249},
                              {"mem_fraction_static", 0.907}},
                             c);
  ASSERT_TRUE(same.ok()) << same.status();
  ConfigCheck ok = CheckConfig(same->expected_config, reported);
  EXPECT_TRUE(ok.ok()) << ok.mismatches;
  EXPECT_TRUE(ok.not_verifiable.empty());
  // A cell that asked triton, a 4096 context and the radix cache off, of that server: the
  // backend and the cache differ (both values named), and a context the reply leaves null is
  // not verifiable.
  auto other = sglang->Render({{"engine", "sglang"},
                               {"depth", 1},
                               {"model", "qwen/qwen2.5-0.5b-instruct"},
                               {"attention_backend", "triton"},
                               {"max_model_len", 4096}},
                              c);
  ASSERT_TRUE(other.ok()) << other.status();
  ConfigCheck check = CheckConfig(other->expected_config, reported);
  // CheckConfig walks the expected names in order: attention_backend, then the cache.
  EXPECT_EQ(check.mismatches,
            nlohmann::json::array(
                {{{"name", "attention_backend"}, {"expected", "TRITON"}, {"reported", "FA3"}},
                 {{"name", "disable_radix_cache"}, {"expected", true}, {"reported", false}}}));
  EXPECT_THAT(check.not_verifiable, ElementsAre("context_length"));
}

// SGLang replaces a requested backend it cannot use (server_args.py at 469c63e54e7d:
// "FlashAttention3 only supports fp8_e4m3 if using FP8; Setting attention backend to
// triton."), and for MLA models its model runner picks its own; the scheduler's copy in
// internal_states says what it kept and wins over the top level. The reply is the page's with
// internal_states[0].attention_backend set to "triton" (constructed).
TEST(SglangConfig, TheSchedulersBackendWins) {
  nlohmann::json info = nlohmann::json::parse(kSglangServerInfo);
  info["internal_states"][0]["attention_backend"] = "triton";
  const nlohmann::json reported = ReportedConfig("sglang", info);
  EXPECT_EQ(reported["attention_backend"], "TRITON");
  ConfigCheck check = CheckConfig({{"attention_backend", "FA3"}}, reported);
  ASSERT_EQ(check.mismatches.size(), 1u);
  EXPECT_EQ(check.mismatches[0]["reported"], "TRITON");
}

}  // namespace
}  // namespace ladder::engines
