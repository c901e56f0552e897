// What the engines print and accept, quoted from their sources at a named commit (the format
// string and its arguments rendered as the logger renders them), against ladder's readers:
// backend evidence, speculation method names, SGLang's per-request speculation counts. Each
// quote names its repository, file and commit; docs/engines.md "Recipes against upstream"
// lists the same sources.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ladder/engines/client.h"
#include "ladder/engines/process.h"
#include "ladder/engines/recipe.h"

namespace ladder::engines {
namespace {

using ::testing::HasSubstr;

std::string Backend(std::string_view line) { return ParseBackendLine(line).backend; }
std::string Forced(std::string_view line) { return ParseBackendLine(line).forced; }

// vllm-project/vllm vllm/model_executor/layers/fused_moe/oracle/unquantized.py:
// at 8970309548cb: f"Using {backend.value} backend for Unquantized MoE";
// at 011fbfd6c93d: f"Using {backend.value} Unquantized MoE backend out of potential backends:
// {available_strs}." Every unquantized MoE model prints one: not an attention backend.
TEST(UpstreamLines, VllmMoeLinesAreNotAttentionBackends) {
  EXPECT_EQ(Backend("INFO 05-02 10:11:12 [unquantized.py:131] Using TRITON backend for "
                    "Unquantized MoE"),
            "");
  EXPECT_EQ(
      Backend("INFO [unquantized.py:131] Using FlashInfer CUTLASS backend for Unquantized MoE"),
      "");
  EXPECT_EQ(Backend("INFO [unquantized.py:140] Using TRITON Unquantized MoE backend out of "
                    "potential backends: ['TRITON', 'BATCHED_TRITON', 'FlashInfer TRTLLM', "
                    "'FlashInfer CUTLASS']."),
            "");
}

// vllm-project/vllm vllm/platforms/rocm.py, get_attn_backend_cls, at e2a00c7b342a (before
// vllm#35246): logger.info("Using Rocm Attention backend on V1 engine."), "Using Aiter Flash
// Attention backend on V1 engine.", "Using Triton Attention backend on V1 engine."; a later
// version of the same branches without " on V1 engine" (user log [rocm.py:292]).
TEST(UpstreamLines, VllmRocmLegacyLines) {
  EXPECT_EQ(Backend("INFO 11-14 09:00:00 [rocm.py:292] Using Rocm Attention backend."),
            "ROCM_ATTN");
  EXPECT_EQ(Backend("INFO [rocm.py:280] Using Rocm Attention backend on V1 engine."), "ROCM_ATTN");
  EXPECT_EQ(Backend("INFO [rocm.py:275] Using Aiter Flash Attention backend."), "ROCM_AITER_FA");
  EXPECT_EQ(Backend("INFO [rocm.py:275] Using Aiter Flash Attention backend on V1 engine."),
            "ROCM_AITER_FA");
  EXPECT_EQ(Backend("INFO [rocm.py:290] Using Triton Attention backend on V1 engine."),
            "TRITON_ATTN");
  EXPECT_EQ(Backend("INFO [rocm.py:270] Using Aiter Unified Attention backend on V1 engine."),
            "ROCM_AITER_UNIFIED_ATTN");
}

// vllm-project/vllm vllm/platforms/rocm.py at 001eda31e3d0 (vllm#35246): logger.info_once(
// "Using %s backend out of potential backends: %s.", ...), "Using %s backend (selected via
// --attention-backend).", and "Found incompatible backend(s) [%s] with %s. Overriding with %s out
// of potential backends: %s." The first rendered as in vllm#38627's test output.
TEST(UpstreamLines, VllmRocmSelectorLines) {
  EXPECT_EQ(Backend("INFO 03-31 14:00:58 [rocm.py:496] Using ROCM_AITER_FA backend out of "
                    "potential backends: ['ROCM_AITER_FA', 'ROCM_AITER_UNIFIED_ATTN', 'ROCM_ATTN', "
                    "'TRITON_ATTN']."),
            "ROCM_AITER_FA");
  EXPECT_EQ(
      Backend("INFO [rocm.py:470] Using ROCM_ATTN backend (selected via --attention-backend)."),
      "ROCM_ATTN");
  EXPECT_EQ(Backend("INFO [rocm.py:488] Found incompatible backend(s) [ROCM_AITER_FA] with "
                    "AttentionType.DECODER. Overriding with TRITON_ATTN out of potential "
                    "backends: ['ROCM_ATTN', 'TRITON_ATTN']."),
            "TRITON_ATTN");
}

// The vision encoder's backend is not the decoder's: vllm/platforms/rocm.py at 001eda31e3d0,
// get_vit_attn_backend: logger.info_once("Using AITER Flash Attention backend for ViT model."),
// "Using Flash Attention backend for ViT model.", "Using Torch SDPA backend for ViT model.",
// f"Using backend {backend} for vit attention"; the encoder layer (mm_encoder_attention.py):
// f"Using {self.attn_backend} for MMEncoderAttention."
TEST(UpstreamLines, VllmVitLinesAreNotTheDecoders) {
  EXPECT_EQ(Backend("INFO [rocm.py:395] Using AITER Flash Attention backend for ViT model."), "");
  EXPECT_EQ(Backend("INFO [rocm.py:401] Using Flash Attention backend for ViT model."), "");
  EXPECT_EQ(Backend("INFO [rocm.py:410] Using Torch SDPA backend for ViT model."), "");
  EXPECT_EQ(Backend("INFO [cuda.py:433] Using backend AttentionBackendEnum.FLASH_ATTN for vit "
                    "attention"),
            "");
  EXPECT_EQ(Backend("INFO [mm_encoder_attention.py:80] Using AttentionBackendEnum.TORCH_SDPA for "
                    "MMEncoderAttention."),
            "");
}

// vllm/model_executor/models/config.py, Gemma4Config: in 0.19 logger.info("Gemma4 model has
// heterogeneous head dimensions (head_dim=%d, global_head_dim=%d). Forcing TRITON_ATTN backend
// to prevent mixed-backend numerical divergence.", ...); from about 0.25 "... FA4 not available,
// forcing TRITON_ATTN backend." (lower case); where FA4 exists "... Using FA4 for all layers to
// avoid mixed FA3/FA4 penalty." forces nothing.
TEST(UpstreamLines, Gemma4ForcingLines) {
  EXPECT_EQ(Forced("INFO [config.py:101] Gemma4 model has heterogeneous head dimensions "
                   "(head_dim=256, global_head_dim=512). Forcing TRITON_ATTN backend to prevent "
                   "mixed-backend numerical divergence."),
            "TRITON_ATTN");
  EXPECT_EQ(Forced("INFO [config.py:115] Gemma4 model has heterogeneous head dimensions "
                   "(head_dim=256, global_head_dim=512). FA4 not available, forcing TRITON_ATTN "
                   "backend."),
            "TRITON_ATTN");
  // The line as a user's log of vLLM 0.2x shows it (quoted in the source index, with the
  // OutOfResources it led to on Turing): the name ends the sentence, its full stop is no part
  // of it.
  EXPECT_EQ(Forced("Gemma4 model has heterogeneous head dimensions {'sliding_attention': 256, "
                   "'full_attention': 512}. FA4 not available, forcing TRITON_ATTN."),
            "TRITON_ATTN");
  EXPECT_EQ(Forced("INFO [config.py:108] Gemma4 model has heterogeneous head dimensions "
                   "(head_dim=256, global_head_dim=512). Using FA4 for all layers to avoid mixed "
                   "FA3/FA4 penalty."),
            "");
}

// sgl-project/sglang python/sglang/srt/server_args.py at 469c63e54e7d: a requested backend
// replaced by SGLang is a forced backend (so a requested fa3 run on triton is a mismatch):
//   logger.warning("FlashAttention3 only supports fp8_e4m3 if using FP8; "
//                  "Setting attention backend to triton.")
//   logger.warning("The current platform does not support Intel AMX, will fallback to "
//                  "torch_native backend.")
TEST(UpstreamLines, SglangBackendOverrides) {
  EXPECT_EQ(Forced("[2026-08-01 10:00:00] FlashAttention3 only supports fp8_e4m3 if using FP8; "
                   "Setting attention backend to triton."),
            "triton");
  EXPECT_EQ(Forced("[2026-08-01 10:00:00] The current platform does not support Intel AMX, will "
                   "fallback to torch_native backend."),
            "torch_native");
  // Not a backend: a fallback of something else.
  EXPECT_EQ(Forced("The current platform does not support Intel XMX, will fallback to default."),
            "");
}

// SGLang's model runner replaced a requested backend for MLA models (python/sglang/srt/
// model_executor/model_runner.py in 2024 releases, as the source index holds it):
//   logger.info("MLA optimization is turned on. Use triton backend.")
//   self.server_args.attention_backend = "triton"
// and, with --enable-flashinfer-mla, "MLA optimization is turned on. Use flashinfer mla
// backend." (attention_backend = "flashinfer_mla"); later releases log f"MLA optimization is
// turned on. Use {server_args.attention_backend} backend." The first line as a user's SGLang
// log of 2024-11-25 printed it (two TP ranks), in the source index. Read as the backend run,
// so a cell that asked fa3 of such a server is a backend_mismatch.
TEST(UpstreamLines, SglangMlaLines) {
  EXPECT_EQ(Backend("[2024-11-25 00:47:11 TP0] MLA optimization is turned on. Use triton backend."),
            "triton");
  EXPECT_EQ(Backend("MLA optimization is turned on. Use flashinfer mla backend."),
            "flashinfer_mla");
  EXPECT_EQ(Forced("[2024-11-25 00:47:11 TP1] MLA optimization is turned on. Use triton backend."),
            "");
}

// vllm/config/speculative.py at 002e77c1f0ef: SpeculativeMethod = Literal["ngram", "medusa",
// "mlp_speculator", "draft_model", "suffix", "custom_class", EagleModelTypes (eagle, eagle3,
// extract_hidden_states, MTP names, dflash), NgramGPUTypes, DSparkModelTypes]: case-sensitive,
// no "draft". A matrix's names map onto it; anything else is refused before vLLM starts.
TEST(UpstreamLines, VllmSpeculativeMethods) {
  auto method = [](const std::string& spec) -> std::string {
    auto recipe = FindBuiltinRecipe("vllm");
    RecipeContext c;
    c.port = 1;
    auto r = (*recipe)->Render(
        {{"engine", "vllm"}, {"depth", 1}, {"model", "m"}, {"spec", spec}, {"spec_model", "d"}}, c);
    if (!r.ok()) return "error: " + std::string(r.status().message());
    for (size_t i = 0; i + 1 < r->launch->argv.size(); ++i) {
      if (r->launch->argv[i] == "--speculative-config") {
        return nlohmann::json::parse(r->launch->argv[i + 1]).value("method", "");
      }
    }
    return "";
  };
  EXPECT_EQ(method("draft:4"), "draft_model");
  EXPECT_EQ(method("Draft_Model:4"), "draft_model");
  EXPECT_EQ(method("EAGLE3:3"), "eagle3");
  EXPECT_EQ(method("mtp:1"), "mtp");
  EXPECT_EQ(method("deepseek_mtp:1"), "mtp");
  EXPECT_EQ(method("ngram:4"), "ngram");
  EXPECT_THAT(method("lookahead:4"), HasSubstr("vLLM's speculative methods are"));
}

// SGLang's per-request counts (sglang#33518, serving_completions.py; the example from its
// thread): a streamed chunk with empty choices carrying sglext.spec_tokens_details, before the
// usage chunk. Older releases name the counts spec_accept_token_num / spec_draft_token_num.
TEST(UpstreamLines, SglangSpecTokensDetails) {
  const std::string stream =
      "data: "
      "{\"id\":\"1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n"
      "data: {\"id\":\"1\",\"object\":\"text_completion\",\"choices\":[],\"sglext\":"
      "{\"spec_tokens_details\":{\"spec_accept_rate\":0.2930232558139535,\"spec_accept_length\":"
      "2.4651162790697674,\"spec_num_correct_drafts\":63,\"spec_num_proposed_drafts\":215,"
      "\"spec_verify_ct\":43,\"spec_correct_drafts_histogram\":[11,14,11,4,0,3]}}}\n\n"
      "data: {\"id\":\"1\",\"object\":\"text_completion\",\"choices\":[],\"usage\":"
      "{\"prompt_tokens\":5,\"completion_tokens\":106,\"total_tokens\":111}}\n\n"
      "data: [DONE]\n\n";
  CompletionStreamParser parser("http://sglang", 106);
  ASSERT_TRUE(parser.Feed(stream, 1));
  auto g = parser.Finish(2);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->verify_steps, 43);
  EXPECT_EQ(g->accepted_tokens, 63);
  EXPECT_EQ(g->draft_tokens, 215);
  // The older names (PR #13754's example: spec_accept_token_num 11, spec_draft_token_num 940).
  CompletionStreamParser old("http://sglang", 200);
  ASSERT_TRUE(old.Feed(
      "data: {\"choices\":[{\"text\":\"a\"}],\"sglext\":{\"spec_tokens_details\":"
      "{\"spec_verify_ct\":188,\"spec_accept_token_num\":11,\"spec_draft_token_num\":940}}}\n\n"
      "data: [DONE]\n\n",
      1));
  auto o = old.Finish(2);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->accepted_tokens, 11);
  EXPECT_EQ(o->draft_tokens, 940);
}

}  // namespace
}  // namespace ladder::engines
