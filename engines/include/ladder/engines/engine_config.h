// The configuration a running engine reports about itself, against what its cell asked.
//
// A recipe renders flags; the engine may still run something else (`--fit` shrinking the
// context, an environment variable overriding a flag, a default that changed). After an engine
// is healthy the runner reads its own report (llama.cpp: GET /props; vLLM: GET /v1/models and
// its "non-default args" log line; SGLang: GET /get_server_info) and compares the values
// the recipe expects (RenderedEngine::expected_config) with it: a value that differs fails the
// arm with both; a value the engine does not report is "not verifiable", never a match.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace ladder::engines {

// The values of an engine's configuration report under the names recipes expect.
//   llama.cpp /props  n_ctx (default_generation_settings.n_ctx: one slot's context),
//                     total_slots, build_info (evidence only)
//   vllm  GET /v1/models: max_model_len (the first model card that has one; vLLM's ModelCard
//         carries it from about 0.4, older cards lack it). `logged`: the dict of its
//         "non-default args: {...}" line (ParseVllmNonDefaultArgs): max_model_len (when
//         /v1/models has none), tensor_parallel_size, seed, gpu_memory_utilization, dtype,
//         quantization, enforce_eager, enable_prefix_caching, attention_backend, and
//         speculative_config's method, model and num_speculative_tokens as
//         "speculative_config.method", ... The line lists only arguments that differ from
//         vLLM's defaults: a value the cell set to the default is absent, "not verifiable".
//   sglang  GET /get_server_info (its ServerArgs after their own adjustments, merged with the
//         scheduler's info; internal_states[0] is the scheduler's copy, which the model runner
//         may change further, and wins where it has the key): context_length, attention_backend,
//         speculative_algorithm, speculative_num_steps, speculative_eagle_topk,
//         speculative_num_draft_tokens, speculative_draft_model_path, tp_size,
//         mem_fraction_static, random_seed, disable_radix_cache; version (evidence only). A null
//         (not set) is absent.
// Attention backend names are compared as BackendName gives them. Keys the report lacks are
// absent. Any other engine: an empty object.
nlohmann::json ReportedConfig(std::string_view engine, const nlohmann::json& report,
                              const nlohmann::json& logged = nullptr);

// An attention backend's name as the configuration check compares it: upper case, the enum's
// class and value stripped ("<AttentionBackendEnum.FLASH_ATTN: ...>", "AttentionBackendEnum.
// FLASH_ATTN" -> "FLASH_ATTN"; SGLang's "fa3" -> "FA3").
std::string BackendName(std::string_view name);

// A Python literal as repr() prints it (dict, list, tuple, set, str, int, float, True, False,
// None), as JSON: tuples and sets become arrays, dict keys strings. A value that is no literal
// (an object's repr such as LoRAModulePath(name='x', ...), <Enum.X: 1>, inf) becomes the string
// of its text, so that one odd value does not hide the others. InvalidArgument when the text is
// cut off or unbalanced.
absl::StatusOr<nlohmann::json> ParsePythonLiteral(std::string_view text);

// The dict of vLLM's "non-default args: {...}" log line (vllm/entrypoints/utils.py,
// log_non_default_args: logger.info("non-default args: %s", non_default_args)). NotFound when
// the line has no such text, InvalidArgument when the dict cannot be read.
absl::StatusOr<nlohmann::json> ParseVllmNonDefaultArgs(std::string_view line);

struct ConfigCheck {
  nlohmann::json mismatches = nlohmann::json::array();  // [{name, expected, reported}]
  std::vector<std::string> not_verifiable;              // expected names the engine did not report
  bool ok() const { return mismatches.empty(); }
};

// Compares `expected` ({name: value}; a value is a number or string compared for equality, or
// {"min": a, "max": b}, an inclusive range) with `reported` (ReportedConfig).
ConfigCheck CheckConfig(const nlohmann::json& expected, const nlohmann::json& reported);

}  // namespace ladder::engines
