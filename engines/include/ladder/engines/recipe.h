// Engine recipes: how to start an inference server for one cell, and where to talk to it.
//
// A recipe renders a cell's parameters (the matrix's `fixed` + `axes` values, a JSON object of
// scalars) and a free port into a LaunchSpec (argv as a vector, never a shell string, plus
// environment changes) and the endpoints the runner measures through. Rendering is pure: the
// same parameters and context always give the same argv and environment (golden-tested).
//
// Parameter names and types are validated strictly: an unknown name, a wrong type or a value
// out of range is InvalidArgument naming the engine and the parameter, e.g.
//   "vllm: parameter 'spec_k': expected a non-negative integer, got \"one\"".
// The parameters every engine shares (engine, depth, short_tokens, ...) are listed by
// CommonParameters(); docs/engines.md lists each recipe's parameters and the flags they map to.
//
// Executables are never taken from a cell: the vLLM/SGLang/llama.cpp programs and the ladder
// binary come from the agent's configuration (RecipeContext).
//
// Thread safety: recipes are immutable; Render may be called from any thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "ladder/engines/capabilities.h"

namespace ladder::engines {

// What to exec. argv[0] is looked up on PATH when it has no '/'.
struct LaunchSpec {
  std::vector<std::string> argv;
  // Variables set in the child's environment (on top of the agent's own), in this order.
  std::vector<std::pair<std::string, std::string>> env;
  // Variables removed from the child's environment (e.g. a stale VLLM_ATTENTION_BACKEND).
  std::vector<std::string> env_unset;
  // Every variable whose name starts with one of these is removed too (llama.cpp's
  // `LLAMA_ARG_*`, which override its flags), except those `env` sets.
  std::vector<std::string> env_unset_prefixes;
};

// Where the runner talks to a served engine.
struct EngineEndpoints {
  std::string base_url;  // "http://127.0.0.1:8123"
  std::string health_path = "/health";
  std::string completions_path = "/v1/completions";
  std::string metrics_path = "/metrics";  // empty: the engine exposes no metrics
  std::string version_path;               // empty: version not queryable over HTTP
  // Where the running engine reports its effective configuration (llama.cpp `/props`, vLLM
  // `/v1/models` beside its "non-default args" log line, SGLang `/get_server_info`); empty: the
  // engine reports none the runner reads.
  std::string config_path;
  std::string model;  // the request's "model" field; empty: omitted
  nlohmann::json extra_request_fields = nlohmann::json::object();  // merged into each request
};

// Prometheus counter names of the speculative-decoding counters. Names are given without the
// `_total` suffix; the parser matches both. Empty strings: the engine exports none.
struct SpecMetricNames {
  std::string num_drafts;
  std::string num_draft_tokens;
  std::string num_accepted_tokens;
  bool available() const { return !num_drafts.empty() && !num_accepted_tokens.empty(); }
};

// SGLang's counters: verify steps (one target forward per step; `sglang:spec_verify_calls`,
// sglang#25689) and generated tokens. Their deltas over a cell give its mean acceptance length
// (generated / steps, the bonus token included, as vLLM's 1 + accepted / drafts); SGLang has no
// counter of drafted or accepted tokens. Empty strings: not exported.
struct SpecStepCounterNames {
  std::string verify_steps;
  std::string generated_tokens;
  bool available() const { return !verify_steps.empty() && !generated_tokens.empty(); }
};

// Per-request speculation counts an engine puts in its responses.
enum class DraftTimings {
  kNone,
  // llama-server's `timings`: draft_n (drafted) and draft_n_accepted, present only when the
  // request drafted (server-task.cpp: `if (draft_n > 0)`), so absent means none drafted. From
  // b4984 on; an older build's recipe says kNone (absence there is no zero).
  kLlamaCppTimings,
  // SGLang's `sglext.spec_tokens_details` (sglang#33518, asked for with
  // "return_spec_tokens_details": true): spec_verify_ct, spec_num_correct_drafts,
  // spec_num_proposed_drafts (older names spec_accepted_drafts / spec_proposed_drafts,
  // spec_accept_token_num / spec_draft_token_num).
  kSglangSpecDetails,
};

enum class Restartability { kRestartable, kExternal };

// The fully rendered engine for one arm configuration.
struct RenderedEngine {
  std::string engine;                // recipe name
  std::optional<LaunchSpec> launch;  // nullopt: an external server (nothing to start)
  EngineEndpoints endpoints;
  SpecMetricNames spec_metrics;
  SpecStepCounterNames spec_step_counters;
  DraftTimings draft_timings = DraftTimings::kNone;
  Restartability restartability = Restartability::kRestartable;
  std::chrono::milliseconds start_timeout{600'000};
  std::string requested_backend;  // the attention backend the cell asked for, or ""
  std::string engine_version;     // the version the rendering assumed, or ""
  int spec_k = 0;                 // speculative tokens per step (0: speculation off)
  // Speculation off: a draft model the cell gave (in `fixed`, for its "on" arms) that this arm
  // does not pass to the engine; and whether the command line pins speculation off
  // (llama.cpp's `--spec-type none`). Both recorded in `engine_process` evidence.
  std::string ignored_spec_model;
  bool spec_off_pinned = false;
  // What the rendering rested on: "llama-server --help" (the binary's own list), "build b7100"
  // (the recipe's table), or "newest spelling (build unknown)". Recorded in `engine_process`.
  std::string rendered_from;
  // Settings the cell did not give that the recipe passes anyway, so that no default of the
  // build can move the measurement ({"flash_attn": "on", "fit": "off", ...}).
  nlohmann::json pinned = nlohmann::json::object();
  // What the running engine must report back for the parameters the cell set or the recipe
  // pinned, by the engine's own names (llama.cpp /props: {"n_ctx": 8192, "total_slots": 1};
  // vLLM: {"max_model_len": 8192, "speculative_config.num_speculative_tokens": 3}; SGLang:
  // {"context_length": 8192, "attention_backend": "FA3"}; engine_config.h).
  // The runner reads the engine's configuration after it is healthy (`engine_config` evidence)
  // and fails the arm when a value differs. Empty: nothing to check.
  nlohmann::json expected_config = nlohmann::json::object();
  // Environment variables of the agent that reach the engine and may change what it runs
  // (vLLM's VLLM_*, SGLang's SGLANG_*): recorded, by these name prefixes, in `engine_process`.
  std::vector<std::string> recorded_env_prefixes;
  // What the rendering could not settle and the evidence should say (recorded in
  // `engine_process`).
  std::vector<std::string> render_notes;
};

// The agent's configuration that recipes need. Defaults suit a host with the engines on PATH.
struct RecipeContext {
  std::string host = "127.0.0.1";  // the address engines bind and the runner calls
  int port = 0;                    // the free port chosen for this engine process
  std::string vllm_executable = "vllm";
  std::string python_executable = "python3";  // runs `-m sglang.launch_server`
  std::string llama_server_executable = "llama-server";
  std::string ladder_binary = "/proc/self/exe";  // runs `engine synthetic`
  // Installed engine versions by recipe name, e.g. {"vllm": "0.15.1", "llama.cpp": "b7100"}: the
  // engine runner fills it from DetectEngineVersion (engine_version.h) before rendering. A
  // cell's `engine_version` parameter wins over this. When neither says, recipes render the
  // newest spelling they know.
  std::map<std::string, std::string> engine_versions;
  // What each installed engine's --help lists, by recipe name (the engine runner fills it from
  // DetectCapabilities, engine_version.h). When present, a recipe renders only options listed
  // there, in the spelling listed, and refuses a cell that needs one the binary lacks; when
  // absent (`ladder validate`, a probe that failed), it falls back to the build-number table.
  std::map<std::string, EngineCapabilities> capabilities;
};

enum class ParamType {
  kString,
  kInteger,
  kNonNegativeInteger,
  kPositiveInteger,
  kNumber,
  kBool,
  kStringOrNumber,
  kStringOrList,
  kStringOrObject,
  kAny
};

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kString;
  bool required = false;
  std::string help;  // one line: what it maps to
};

// An engine recipe. Implementations are stateless.
class Recipe {
 public:
  virtual ~Recipe() = default;
  virtual std::string_view name() const = 0;
  // The engine-specific parameters (the common ones are CommonParameters()).
  virtual const std::vector<ParamSpec>& parameters() const = 0;
  // Validates `params` (an object; common parameters are accepted and ignored here) and renders
  // the engine. InvalidArgument on any invalid parameter.
  virtual absl::StatusOr<RenderedEngine> Render(const nlohmann::json& params,
                                                const RecipeContext& context) const = 0;
};

// Parameters every engine cell accepts; read by the runner, not by recipes.
const std::vector<ParamSpec>& CommonParameters();

// The built-in recipes: "vllm", "sglang", "llama.cpp", "external", "synthetic".
// NotFound (listing the known names) for any other name.
absl::StatusOr<const Recipe*> FindBuiltinRecipe(std::string_view engine);
std::vector<std::string> BuiltinRecipeNames();

// Checks that every key of `params` is a common or a recipe parameter of the right type and that
// required ones are present. InvalidArgument naming the first offending parameter.
absl::Status ValidateParams(const Recipe& recipe, const nlohmann::json& params);

// Compares dotted versions numerically ("0.15.1" < "0.16"); a non-numeric suffix ("0.16.0rc1",
// "0.15.1+cu128") is ignored. Returns <0, 0, >0.
int CompareVersions(std::string_view a, std::string_view b);

}  // namespace ladder::engines
