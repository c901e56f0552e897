// The built-in recipes. Each maps cell parameters onto one engine's command line; see
// docs/engines.md for the table of parameters and flags.
#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "ladder/engines/engine_version.h"
#include "ladder/engines/load.h"
#include "ladder/engines/recipe.h"
#include "ladder/status_macros.h"
#include "message.h"
#include "params.h"

namespace ladder::engines {

using internal::Cat;
using internal::ToStd;
namespace {

using internal::GetBool;
using internal::GetEnv;
using internal::GetInt;
using internal::GetList;
using internal::GetNumber;
using internal::GetSpec;
using internal::GetString;
using internal::ParamError;

// The version boundaries below are where the engines' own sources changed a spelling; each is
// listed with its upstream pull request and the release it was confirmed in, in
// docs/engines.md ("Recipes against upstream").
constexpr char kVllmBackendEnv[] = "VLLM_ATTENTION_BACKEND";
// --attention-backend arrived with AttentionConfig (vllm#26315, about 0.13); the variable was
// deprecated then and removed after 0.14.0 (vllm#32812): later builds ignore it silently.
constexpr char kVllmFirstVersionWithFlag[] = "0.13";

// llama.cpp: `--flash-attn on|off|auto` takes a value (was a bare flag) from about b6327.
constexpr int kLlamaFirstBuildWithFlashAttnValue = 6327;
// `--draft-max/--draft-min` became `--spec-draft-n-max/--spec-draft-n-min` (llama.cpp#22397,
// merged 2026-04-26; confirmed in b9022); the old names now fail at argument parsing.
constexpr int kLlamaFirstBuildWithSpecDraftFlags = 9022;
// Draft-model speculation is a `--spec-type draft-*` (llama.cpp#22964, 2026-05-12; confirmed in
// b9180, the MTP release); from then on a draft model alone does not engage drafting.
constexpr int kLlamaFirstBuildWithSpecType = 9180;
// `--spec-type` itself (with `none`, the value that pins speculation off) arrived with
// llama.cpp#18471 (commit 72d3b1898, 2026-01-28, b7864); it took ngram types only until b9180.
constexpr int kLlamaFirstBuildWithSpecTypeNone = 7864;
// The host-memory prompt cache, `--cache-ram N` (0 disables it), arrived with llama.cpp#16391
// (commit d00cbea63, 2025-10-09, b6723). On by default (8192 MiB): before each request the
// server may copy a slot's whole KV state to host memory, whatever the request's cache_prompt
// says, which is time in no token's latency (docs/engines.md, "Measured against a real
// llama.cpp").
constexpr int kLlamaFirstBuildWithCacheRam = 6723;

// The version the rendering assumes: the cell's `engine_version`, else what the runner detected.
std::string ResolveVersion(const nlohmann::json& params, const RecipeContext& context,
                           std::string_view engine) {
  std::string version = GetString(params, "engine_version").value_or("");
  if (version.empty()) {
    auto it = context.engine_versions.find(std::string(engine));
    if (it != context.engine_versions.end()) version = it->second;
  }
  return version;
}

std::string BaseUrl(const RecipeContext& context) {
  return Cat("http://", context.host, ":", context.port);
}

std::chrono::milliseconds StartTimeout(const nlohmann::json& params, double default_s) {
  double s = GetNumber(params, "start_timeout_s").value_or(default_s);
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

std::string FormatNumber(double v) { return absl::StrFormat("%g", v); }

// Appends "--flag value" when the parameter is present.
void AddInt(std::vector<std::string>& argv, const nlohmann::json& params, std::string_view name,
            std::string_view flag) {
  if (auto v = GetInt(params, name)) {
    argv.emplace_back(flag);
    argv.push_back(std::to_string(*v));
  }
}
void AddString(std::vector<std::string>& argv, const nlohmann::json& params, std::string_view name,
               std::string_view flag) {
  if (auto v = GetString(params, name)) {
    argv.emplace_back(flag);
    argv.push_back(*v);
  }
}
void AddNumber(std::vector<std::string>& argv, const nlohmann::json& params, std::string_view name,
               std::string_view flag) {
  if (auto v = GetNumber(params, name)) {
    argv.emplace_back(flag);
    argv.push_back(FormatNumber(*v));
  }
}

absl::Status AddExtras(RenderedEngine& out, const nlohmann::json& params, std::string_view engine) {
  ASSIGN_OR_RETURN(std::vector<std::string> extra, GetList(params, engine, "extra_args"));
  for (auto& arg : extra) out.launch->argv.push_back(std::move(arg));
  ASSIGN_OR_RETURN(auto env, GetEnv(params, engine, "extra_env"));
  for (auto& kv : env) out.launch->env.push_back(std::move(kv));
  return absl::OkStatus();
}

SpecMetricNames VllmSpecMetrics() {
  return {"vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
          "vllm:spec_decode_num_accepted_tokens"};
}

const ParamSpec kSpec{"spec", ParamType::kString, false,
                      "\"off\", \"METHOD\" or \"METHOD:K\" (shorthand for spec_method/spec_k)"};
const ParamSpec kSpecMethod{"spec_method", ParamType::kString, false, "speculation method"};
const ParamSpec kSpecK{"spec_k", ParamType::kNonNegativeInteger, false,
                       "speculative tokens per step; 0 = off"};
const ParamSpec kSpecModel{"spec_model", ParamType::kString, false, "draft/assistant model"};
const ParamSpec kExtraArgs{"extra_args", ParamType::kStringOrList, false,
                           "arguments appended verbatim (a list, or a string split on spaces)"};
const ParamSpec kExtraEnv{"extra_env", ParamType::kStringOrObject, false,
                          "environment variables: {K: V} or \"K=V K2=V2\""};
const ParamSpec kEngineVersion{"engine_version", ParamType::kString, false,
                               "installed engine version (overrides the agent's inventory)"};

// vLLM's `SpeculativeMethod` (vllm/config/speculative.py at 002e77c1) is a case-sensitive
// Literal: a method outside it makes `vllm serve` refuse to start. The matrix's
// engine-neutral names map onto it (any case): draft / draft_model -> draft_model; the rest are
// vLLM's own names, lower-cased. The model-type MTP names (deepseek_mtp, ...) are accepted by
// vLLM and rewritten to mtp with a deprecation warning; ladder passes mtp for them.
absl::StatusOr<std::string> VllmSpecMethod(std::string_view method) {
  std::string m;
  for (char c : method) m.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (m == "draft" || m == "draft_model" || m == "draft-simple") return std::string("draft_model");
  static constexpr std::string_view kMethods[] = {
      "ngram",        "medusa",    "mlp_speculator", "draft_model",           "suffix",
      "custom_class", "eagle",     "eagle3",         "extract_hidden_states", "mtp",
      "dflash",       "ngram_gpu", "dspark"};
  for (std::string_view known : kMethods) {
    if (m == known) return std::string(known);
  }
  if (m.size() > 4 && m.compare(m.size() - 4, 4, "_mtp") == 0) return std::string("mtp");
  return ParamError("vllm", "spec_method",
                    Cat("vLLM's speculative methods are draft (draft_model), eagle, eagle3, mtp, "
                        "ngram, ngram_gpu, medusa, mlp_speculator, suffix, dflash, dspark, "
                        "extract_hidden_states, custom_class; got \"",
                        method, "\""));
}

// ---------------------------------------------------------------------------------------------
class VllmRecipe final : public Recipe {
 public:
  std::string_view name() const override { return "vllm"; }
  const std::vector<ParamSpec>& parameters() const override {
    static const std::vector<ParamSpec> kParams = {
        {"model", ParamType::kString, true, "vllm serve MODEL"},
        {"attention_backend", ParamType::kString, false,
         "--attention-backend (>= 0.13) or VLLM_ATTENTION_BACKEND (< 0.13)"},
        kEngineVersion,
        kSpec,
        kSpecMethod,
        kSpecK,
        kSpecModel,
        {"tensor_parallel_size", ParamType::kPositiveInteger, false, "--tensor-parallel-size"},
        {"max_model_len", ParamType::kPositiveInteger, false, "--max-model-len"},
        {"gpu_memory_utilization", ParamType::kNumber, false, "--gpu-memory-utilization"},
        {"dtype", ParamType::kString, false, "--dtype"},
        {"quantization", ParamType::kString, false, "--quantization"},
        {"enforce_eager", ParamType::kBool, false, "--enforce-eager when true"},
        {"prefix_caching", ParamType::kBool, false,
         "default false: --no-enable-prefix-caching; true: --enable-prefix-caching"},
        {"seed", ParamType::kInteger, false, "--seed"},
        kExtraArgs,
        kExtraEnv,
    };
    return kParams;
  }

  absl::StatusOr<RenderedEngine> Render(const nlohmann::json& params,
                                        const RecipeContext& context) const override {
    RETURN_IF_ERROR(ValidateParams(*this, params));
    ASSIGN_OR_RETURN(internal::SpecRequest spec, GetSpec(params, name()));
    RenderedEngine out;
    out.engine = std::string(name());
    out.launch.emplace();
    std::string model = *GetString(params, "model");
    std::vector<std::string>& argv = out.launch->argv;
    argv = {context.vllm_executable,     "serve", model, "--host", context.host, "--port",
            std::to_string(context.port)};
    AddInt(argv, params, "seed", "--seed");

    std::string version = ResolveVersion(params, context, name());
    out.engine_version = version;
    if (auto backend = GetString(params, "attention_backend")) {
      out.requested_backend = *backend;
      if (!version.empty() && CompareVersions(version, kVllmFirstVersionWithFlag) < 0) {
        out.launch->env.emplace_back(kVllmBackendEnv, *backend);
      } else {
        argv.insert(argv.end(), {"--attention-backend", *backend});
        out.launch->env_unset.push_back(kVllmBackendEnv);
      }
    }
    out.ignored_spec_model = spec.ignored_model;
    if (spec.k > 0) {
      nlohmann::ordered_json config = nlohmann::ordered_json::object();
      if (!spec.method.empty()) {
        ASSIGN_OR_RETURN(std::string method, VllmSpecMethod(spec.method));
        config["method"] = method;
      }
      if (!spec.model.empty()) config["model"] = spec.model;
      config["num_speculative_tokens"] = spec.k;
      argv.insert(argv.end(), {"--speculative-config", config.dump()});
      out.spec_k = spec.k;
    }
    AddInt(argv, params, "tensor_parallel_size", "--tensor-parallel-size");
    AddInt(argv, params, "max_model_len", "--max-model-len");
    AddNumber(argv, params, "gpu_memory_utilization", "--gpu-memory-utilization");
    AddString(argv, params, "dtype", "--dtype");
    AddString(argv, params, "quantization", "--quantization");
    if (GetBool(params, "enforce_eager").value_or(false)) argv.emplace_back("--enforce-eager");
    argv.emplace_back(GetBool(params, "prefix_caching").value_or(false)
                          ? "--enable-prefix-caching"
                          : "--no-enable-prefix-caching");
    RETURN_IF_ERROR(AddExtras(out, params, name()));

    out.endpoints.base_url = BaseUrl(context);
    out.endpoints.version_path = "/version";
    out.endpoints.model = model;
    out.spec_metrics = VllmSpecMetrics();
    out.start_timeout = StartTimeout(params, 1800);
    return out;
  }
};

// SGLang's --speculative-algorithm choices (server_args.py): EAGLE, EAGLE3, NEXTN, STANDALONE,
// NGRAM. A matrix's engine-neutral names map onto them; "" for anything else.
std::string SglangAlgorithm(std::string_view method) {
  std::string upper;
  for (char c : method)
    upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  if (upper == "EAGLE" || upper == "EAGLE3" || upper == "NEXTN" || upper == "STANDALONE" ||
      upper == "NGRAM") {
    return upper;
  }
  if (upper == "MTP") return "NEXTN";
  if (upper == "DRAFT" || upper == "DRAFT_MODEL") return "STANDALONE";
  return "";
}

// ---------------------------------------------------------------------------------------------
class SglangRecipe final : public Recipe {
 public:
  std::string_view name() const override { return "sglang"; }
  const std::vector<ParamSpec>& parameters() const override {
    static const std::vector<ParamSpec> kParams = {
        {"model", ParamType::kString, true, "--model-path"},
        {"attention_backend", ParamType::kString, false, "--attention-backend"},
        kEngineVersion,
        kSpec,
        kSpecMethod,
        kSpecK,
        kSpecModel,
        {"tensor_parallel_size", ParamType::kPositiveInteger, false, "--tp-size"},
        {"max_model_len", ParamType::kPositiveInteger, false, "--context-length"},
        {"mem_fraction_static", ParamType::kNumber, false, "--mem-fraction-static"},
        {"prefix_caching", ParamType::kBool, false,
         "default false: --disable-radix-cache; true: radix cache on"},
        {"seed", ParamType::kInteger, false, "--random-seed"},
        {"metric_num_drafts", ParamType::kString, false, "Prometheus counter of drafts"},
        {"metric_num_draft_tokens", ParamType::kString, false, "counter of drafted tokens"},
        {"metric_num_accepted_tokens", ParamType::kString, false, "counter of accepted tokens"},
        kExtraArgs,
        kExtraEnv,
    };
    return kParams;
  }

  absl::StatusOr<RenderedEngine> Render(const nlohmann::json& params,
                                        const RecipeContext& context) const override {
    RETURN_IF_ERROR(ValidateParams(*this, params));
    ASSIGN_OR_RETURN(internal::SpecRequest spec, GetSpec(params, name()));
    RenderedEngine out;
    out.engine = std::string(name());
    out.launch.emplace();
    std::string model = *GetString(params, "model");
    std::vector<std::string>& argv = out.launch->argv;
    argv = {context.python_executable,
            "-m",
            "sglang.launch_server",
            "--model-path",
            model,
            "--host",
            context.host,
            "--port",
            std::to_string(context.port)};
    AddInt(argv, params, "seed", "--random-seed");
    out.ignored_spec_model = spec.ignored_model;
    if (auto backend = GetString(params, "attention_backend")) {
      out.requested_backend = *backend;
      argv.insert(argv.end(), {"--attention-backend", *backend});
    }
    if (spec.k > 0) {
      if (spec.method.empty()) {
        return ParamError(name(), "spec_method",
                          "is required with spec_k > 0 (--speculative-algorithm, e.g. EAGLE)");
      }
      std::string algorithm = SglangAlgorithm(spec.method);
      if (algorithm.empty()) {
        return ParamError(name(), "spec_method",
                          Cat("SGLang's --speculative-algorithm takes EAGLE, EAGLE3, NEXTN, "
                              "STANDALONE or NGRAM (mtp reads NEXTN, draft reads STANDALONE); "
                              "got \"",
                              spec.method, "\""));
      }
      argv.insert(argv.end(), {"--speculative-algorithm", algorithm});
      if (!spec.model.empty()) {
        argv.insert(argv.end(), {"--speculative-draft-model-path", spec.model});
      }
      argv.insert(argv.end(),
                  {"--speculative-num-steps", std::to_string(spec.k), "--speculative-eagle-topk",
                   "1", "--speculative-num-draft-tokens", std::to_string(spec.k + 1)});
      out.spec_k = spec.k;
    }
    AddInt(argv, params, "tensor_parallel_size", "--tp-size");
    AddInt(argv, params, "max_model_len", "--context-length");
    AddNumber(argv, params, "mem_fraction_static", "--mem-fraction-static");
    if (!GetBool(params, "prefix_caching").value_or(false)) {
      argv.emplace_back("--disable-radix-cache");
    }
    argv.emplace_back("--enable-metrics");
    RETURN_IF_ERROR(AddExtras(out, params, name()));

    out.engine_version = ResolveVersion(params, context, name());
    out.endpoints.base_url = BaseUrl(context);
    out.endpoints.model = model;
    // Acceptance per cell, never from SGLang's gauges (sglang:spec_accept_length / _rate
    // describe its last window of decode_log_interval steps, reset after each window: a
    // previous cell's, or 0.0 before the first). In order: counters a site names for a build
    // that has them; each request's sglext.spec_tokens_details (sglang#33518), asked for in
    // speculation cells; the verify-step and generated-token counters (sglang#25689).
    out.spec_metrics = {GetString(params, "metric_num_drafts").value_or(""),
                        GetString(params, "metric_num_draft_tokens").value_or(""),
                        GetString(params, "metric_num_accepted_tokens").value_or("")};
    out.spec_step_counters = {"sglang:spec_verify_calls", "sglang:generation_tokens"};
    if (spec.k > 0) {
      out.draft_timings = DraftTimings::kSglangSpecDetails;
      out.endpoints.extra_request_fields = {{"return_spec_tokens_details", true}};
    }
    out.start_timeout = StartTimeout(params, 1800);
    return out;
  }
};

// ---------------------------------------------------------------------------------------------
class LlamaCppRecipe final : public Recipe {
 public:
  std::string_view name() const override { return "llama.cpp"; }
  const std::vector<ParamSpec>& parameters() const override {
    static const std::vector<ParamSpec> kParams = {
        {"model", ParamType::kString, true, "--model (a GGUF path)"},
        kEngineVersion,
        kSpec,
        kSpecMethod,
        kSpecK,
        kSpecModel,
        {"spec_k_min", ParamType::kNonNegativeInteger, false,
         "--spec-draft-n-min (b9022 on) or --draft-min"},
        {"spec_p_min", ParamType::kNumber, false, "--spec-draft-p-min (b9022 on) or --draft-p-min"},
        {"gpu_layers", ParamType::kInteger, false, "--n-gpu-layers"},
        {"gpu_layers_draft", ParamType::kInteger, false,
         "--spec-draft-ngl (b9022 on) or --gpu-layers-draft"},
        {"flash_attn", ParamType::kString, false,
         "--flash-attn on|off|auto (b6327 on); before: a bare --flash-attn for on"},
        {"max_model_len", ParamType::kPositiveInteger, false, "--ctx-size"},
        {"prefix_caching", ParamType::kBool, false,
         "default false: --cache-ram 0 (b6723 on); true: the server's prompt cache"},
        {"parallel", ParamType::kPositiveInteger, false,
         "--parallel N slots; default 1 for batch-1 cells, the server's own (auto) for load "
         "cells"},
        {"seed", ParamType::kInteger, false, "--seed"},
        kExtraArgs,
        kExtraEnv,
    };
    return kParams;
  }

  absl::StatusOr<RenderedEngine> Render(const nlohmann::json& params,
                                        const RecipeContext& context) const override {
    RETURN_IF_ERROR(ValidateParams(*this, params));
    ASSIGN_OR_RETURN(internal::SpecRequest spec, GetSpec(params, name()));
    RenderedEngine out;
    out.engine = std::string(name());
    out.launch.emplace();
    out.ignored_spec_model = spec.ignored_model;
    out.engine_version = ResolveVersion(params, context, name());
    // An unknown build renders the newest spelling: a build too old for it fails at argument
    // parsing, loudly, rather than measuring something else.
    std::optional<int> build = LlamaCppBuild(out.engine_version);
    if (!out.engine_version.empty() && !build.has_value()) {
      return ParamError(
          name(), "engine_version",
          Cat("expected a build number such as b7100, got \"", out.engine_version, "\""));
    }
    auto at_least = [&](int first) { return !build.has_value() || *build >= first; };
    std::string model = *GetString(params, "model");
    std::vector<std::string>& argv = out.launch->argv;
    argv = {context.llama_server_executable, "--model",  model, "--host", context.host, "--port",
            std::to_string(context.port),    "--metrics"};
    AddInt(argv, params, "seed", "--seed");
    AddInt(argv, params, "max_model_len", "--ctx-size");
    AddInt(argv, params, "gpu_layers", "--n-gpu-layers");
    // One slot for a batch-1 cell: each request then has the whole context, and no other slot's
    // old prompt sits in a unified KV cache (with the prompt cache off, idle slots are not
    // cleared; a second 1K prompt in a 2K context then fails "Context size has been exceeded").
    if (auto slots = GetInt(params, "parallel")) {
      argv.insert(argv.end(), {"--parallel", std::to_string(*slots)});
    } else if (!HasLoadParams(params)) {
      argv.insert(argv.end(), {"--parallel", "1"});
    }
    if (!GetBool(params, "prefix_caching").value_or(false) &&
        at_least(kLlamaFirstBuildWithCacheRam)) {
      argv.insert(argv.end(), {"--cache-ram", "0"});
    }
    if (auto fa = GetString(params, "flash_attn")) {
      if (*fa != "on" && *fa != "off" && *fa != "auto") {
        return ParamError(name(), "flash_attn", Cat("expected on, off or auto, got \"", *fa, "\""));
      }
      if (at_least(kLlamaFirstBuildWithFlashAttnValue)) {
        argv.insert(argv.end(), {"--flash-attn", *fa});
      } else if (*fa == "on") {
        argv.emplace_back("--flash-attn");  // older builds: a bare flag, off unless given
      } else if (*fa == "auto") {
        return ParamError(name(), "flash_attn",
                          Cat("\"auto\" needs llama-server b", kLlamaFirstBuildWithFlashAttnValue,
                              " or later; this is ", out.engine_version));
      }
    }
    if (spec.k > 0) {
      ASSIGN_OR_RETURN(std::string spec_type, LlamaSpecType(spec.method));
      const bool mtp = spec_type == "draft-mtp";
      if (spec.model.empty() && !mtp) {
        return ParamError(name(), "spec_model",
                          "is required with speculation (llama-server drafts with --model-draft)");
      }
      const bool new_flags = at_least(kLlamaFirstBuildWithSpecDraftFlags);
      if (at_least(kLlamaFirstBuildWithSpecType)) {
        argv.insert(argv.end(), {"--spec-type", spec_type});
      } else if (spec_type != "draft-simple") {
        return ParamError(name(), "spec_method",
                          Cat(spec_type, " needs llama-server b", kLlamaFirstBuildWithSpecType,
                              " or later; this is ", out.engine_version));
      }
      // --model-draft (alias -md) is accepted before and after the rename to --spec-draft-model.
      if (!spec.model.empty()) argv.insert(argv.end(), {"--model-draft", spec.model});
      argv.insert(argv.end(),
                  {new_flags ? "--spec-draft-n-max" : "--draft-max", std::to_string(spec.k)});
      AddInt(argv, params, "spec_k_min", new_flags ? "--spec-draft-n-min" : "--draft-min");
      AddNumber(argv, params, "spec_p_min", new_flags ? "--spec-draft-p-min" : "--draft-p-min");
      AddInt(argv, params, "gpu_layers_draft",
             new_flags ? "--spec-draft-ngl" : "--gpu-layers-draft");
      out.spec_k = spec.k;
    } else if (at_least(kLlamaFirstBuildWithSpecTypeNone)) {
      // Pinned off: a build whose default turns some drafting on (llama.cpp#28391 proposes
      // ngram-mod by default), or that infers a draft type from the model, must not draft in
      // an arm that measures the target alone.
      argv.insert(argv.end(), {"--spec-type", "none"});
      out.spec_off_pinned = true;
    }
    RETURN_IF_ERROR(AddExtras(out, params, name()));
    out.endpoints.base_url = BaseUrl(context);
    out.endpoints.model = model;
    // timings_per_token: llama-server reports draft_n / draft_n_accepted in `timings`, the
    // acceptance source on builds whose /metrics has no speculation counters.
    out.endpoints.extra_request_fields = {{"cache_prompt", false}, {"timings_per_token", true}};
    // Counters exported from llama.cpp#26389 on (named after vLLM's); absent before, when the
    // runner falls back to the response timings.
    out.spec_metrics = {"llamacpp:spec_decode_num_drafts", "llamacpp:spec_decode_num_draft_tokens",
                        "llamacpp:spec_decode_num_accepted_tokens"};
    out.draft_timings = DraftTimings::kLlamaCppTimings;
    out.start_timeout = StartTimeout(params, 900);
    return out;
  }

 private:
  // llama-server's --spec-type for a matrix's method: draft-simple for a separate draft model
  // (the default), draft-mtp for a model's own MTP head, draft-eagle3 for an EAGLE3 drafter.
  absl::StatusOr<std::string> LlamaSpecType(const std::string& method) const {
    std::string m;
    for (char c : method)
      m.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    if (m.empty() || m == "draft" || m == "draft_model" || m == "draft-simple") {
      return std::string("draft-simple");
    }
    if (m == "mtp" || m == "draft-mtp") return std::string("draft-mtp");
    if (m == "eagle3" || m == "draft-eagle3") return std::string("draft-eagle3");
    return ParamError(
        name(), "spec_method",
        Cat("llama-server drafts with draft (a draft model), mtp or eagle3; got \"", method, "\""));
  }
};

// ---------------------------------------------------------------------------------------------
class ExternalRecipe final : public Recipe {
 public:
  std::string_view name() const override { return "external"; }
  const std::vector<ParamSpec>& parameters() const override {
    static const std::vector<ParamSpec> kParams = {
        {"url", ParamType::kString, true, "base URL of a running server, http://host:port"},
        {"model", ParamType::kString, false, "the request's model field"},
        {"attention_backend", ParamType::kString, false,
         "the backend the server is expected to use (recorded; not checkable without its log)"},
        kEngineVersion,
        kSpec,
        kSpecMethod,
        kSpecK,
        kSpecModel,
        {"health_path", ParamType::kString, false, "default /health"},
        {"metrics_path", ParamType::kString, false, "default /metrics"},
    };
    return kParams;
  }

  absl::StatusOr<RenderedEngine> Render(const nlohmann::json& params,
                                        const RecipeContext& context) const override {
    RETURN_IF_ERROR(ValidateParams(*this, params));
    ASSIGN_OR_RETURN(internal::SpecRequest spec, GetSpec(params, name()));
    RenderedEngine out;
    out.engine = std::string(name());
    std::string url = *GetString(params, "url");
    if (url.rfind("http://", 0) != 0) {
      return ParamError(
          name(), "url",
          Cat("expected http://host:port, got \"", url, "\" (https is not supported)"));
    }
    while (!url.empty() && url.back() == '/') url.pop_back();
    out.endpoints.base_url = url;
    out.endpoints.model = GetString(params, "model").value_or("");
    out.endpoints.health_path = GetString(params, "health_path").value_or("/health");
    out.endpoints.metrics_path = GetString(params, "metrics_path").value_or("/metrics");
    out.endpoints.version_path = "/version";
    out.requested_backend = GetString(params, "attention_backend").value_or("");
    out.engine_version = GetString(params, "engine_version").value_or("");
    out.spec_metrics = VllmSpecMetrics();
    out.restartability = Restartability::kExternal;
    out.spec_k = spec.k;
    out.start_timeout = StartTimeout(params, 30);
    return out;
  }
};

// ---------------------------------------------------------------------------------------------
class SyntheticRecipe final : public Recipe {
 public:
  std::string_view name() const override { return "synthetic"; }
  const std::vector<ParamSpec>& parameters() const override {
    static const std::vector<ParamSpec> kParams = {
        {"preset", ParamType::kString, false, "--preset (tiny, gemma4-31b); default tiny"},
        {"policy", ParamType::kString, false, "--policy legacy|spec-aware"},
        kSpec,
        kSpecMethod,
        kSpecK,
        kSpecModel,
        {"acceptance", ParamType::kStringOrNumber, false,
         "--acceptance RATE or DEPTH:RATE,DEPTH:RATE,..."},
        {"seed", ParamType::kInteger, false, "--seed"},
        {"attention_backend", ParamType::kString, false, "--attention-backend (logged name)"},
        {"force_backend", ParamType::kString, false,
         "--force-backend: log 'Forcing NAME' and use it whatever was asked"},
        {"log_paths", ParamType::kString, false, "--log-paths once|every|none"},
        {"threads", ParamType::kPositiveInteger, false, "--threads (CPU)"},
        {"max_batch", ParamType::kPositiveInteger, false,
         "--max-batch: requests decoded together (continuous batching; default 64)"},
        {"device", ParamType::kString, false,
         "--device cpu|cuda|auto (the engine's default: auto = cuda when it has a GPU)"},
        {"projection", ParamType::kString, false,
         "--projection gemv|cublas (CUDA model, steps of up to 4 rows)"},
        {"fault_crash_after_requests", ParamType::kNonNegativeInteger, false,
         "--crash-after-requests N: exit during request N+1"},
        {"fault_oom_after_requests", ParamType::kNonNegativeInteger, false,
         "--oom-after-requests N: log an out-of-memory error and exit during request N+1"},
        {"fault_malformed_json", ParamType::kBool, false, "--malformed: invalid JSON replies"},
        {"fault_stall_request", ParamType::kNonNegativeInteger, false,
         "--stall-request N: completion request N waits fault_stall_ms before it is served"},
        {"fault_stall_ms", ParamType::kNonNegativeInteger, false, "--stall-ms"},
        {"fault_slow_steps_percent", ParamType::kNonNegativeInteger, false,
         "--slow-steps-percent N: every decode step takes N % longer (a planted slowdown)"},
    };
    return kParams;
  }

  absl::StatusOr<RenderedEngine> Render(const nlohmann::json& params,
                                        const RecipeContext& context) const override {
    RETURN_IF_ERROR(ValidateParams(*this, params));
    ASSIGN_OR_RETURN(internal::SpecRequest spec, GetSpec(params, name()));
    RenderedEngine out;
    out.engine = std::string(name());
    out.launch.emplace();
    std::string preset = GetString(params, "preset").value_or("tiny");
    std::vector<std::string>& argv = out.launch->argv;
    argv = {context.ladder_binary,
            "engine",
            "synthetic",
            "--preset",
            preset,
            "--host",
            context.host,
            "--port",
            std::to_string(context.port)};
    if (auto policy = GetString(params, "policy")) {
      if (*policy != "legacy" && *policy != "spec-aware") {
        return ParamError(name(), "policy",
                          Cat("expected legacy or spec-aware, got \"", *policy, "\""));
      }
      argv.insert(argv.end(), {"--policy", *policy});
    }
    if (spec.k > 0) {
      argv.insert(argv.end(), {"--spec-k", std::to_string(spec.k)});
      out.spec_k = spec.k;
    }
    if (auto acc = GetNumber(params, "acceptance")) {
      argv.insert(argv.end(), {"--acceptance", FormatNumber(*acc)});
    } else if (auto acc_s = GetString(params, "acceptance")) {
      argv.insert(argv.end(), {"--acceptance", *acc_s});
    }
    AddInt(argv, params, "seed", "--seed");
    if (auto backend = GetString(params, "attention_backend")) {
      out.requested_backend = *backend;
      argv.insert(argv.end(), {"--attention-backend", *backend});
    }
    AddString(argv, params, "force_backend", "--force-backend");
    if (auto log_paths = GetString(params, "log_paths")) {
      if (*log_paths != "once" && *log_paths != "every" && *log_paths != "none") {
        return ParamError(name(), "log_paths",
                          Cat("expected once, every or none, got \"", *log_paths, "\""));
      }
      argv.insert(argv.end(), {"--log-paths", *log_paths});
    }
    AddInt(argv, params, "threads", "--threads");
    AddInt(argv, params, "max_batch", "--max-batch");
    if (auto device = GetString(params, "device")) {
      if (*device != "cpu" && *device != "cuda" && *device != "auto") {
        return ParamError(name(), "device",
                          Cat("expected cpu, cuda or auto, got \"", *device, "\""));
      }
      argv.insert(argv.end(), {"--device", *device});
    }
    if (auto projection = GetString(params, "projection")) {
      if (*projection != "gemv" && *projection != "cublas") {
        return ParamError(name(), "projection",
                          Cat("expected gemv or cublas, got \"", *projection, "\""));
      }
      argv.insert(argv.end(), {"--projection", *projection});
    }
    AddInt(argv, params, "fault_crash_after_requests", "--crash-after-requests");
    AddInt(argv, params, "fault_oom_after_requests", "--oom-after-requests");
    if (GetBool(params, "fault_malformed_json").value_or(false)) argv.emplace_back("--malformed");
    AddInt(argv, params, "fault_stall_request", "--stall-request");
    AddInt(argv, params, "fault_stall_ms", "--stall-ms");
    AddInt(argv, params, "fault_slow_steps_percent", "--slow-steps-percent");

    out.endpoints.base_url = BaseUrl(context);
    out.endpoints.version_path = "/version";
    out.endpoints.model = preset;
    out.spec_metrics = VllmSpecMetrics();
    out.start_timeout = StartTimeout(params, 120);
    return out;
  }
};

}  // namespace

absl::StatusOr<const Recipe*> FindBuiltinRecipe(std::string_view engine) {
  static const VllmRecipe kVllm;
  static const SglangRecipe kSglang;
  static const LlamaCppRecipe kLlamaCpp;
  static const ExternalRecipe kExternal;
  static const SyntheticRecipe kSynthetic;
  static const Recipe* const kAll[] = {&kVllm, &kSglang, &kLlamaCpp, &kExternal, &kSynthetic};
  for (const Recipe* recipe : kAll) {
    if (recipe->name() == engine) return recipe;
  }
  return absl::NotFoundError(Cat("unknown engine \"", engine,
                                 "\" (known: ", absl::StrJoin(BuiltinRecipeNames(), ", "), ")"));
}

std::vector<std::string> BuiltinRecipeNames() {
  return {"vllm", "sglang", "llama.cpp", "external", "synthetic"};
}

}  // namespace ladder::engines
