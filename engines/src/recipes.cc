// The built-in recipes. Each maps cell parameters onto one engine's command line; see
// docs/engines.md for the table of parameters and flags.
#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "ladder/engines/engine_config.h"
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

// llama.cpp build numbers (`git rev-list --count` of the commit, read in ngxson/llama.cpp, which
// carries ggml-org/llama.cpp's history). They are used only where the binary's --help was not
// read, or cannot tell (EAGLE3); docs/engines.md lists each with its commit.
// `--flash-attn on|off|auto` takes a value (was a bare flag, off by default) from #15434
// (e81b8e4b7, b6325), which also made flash attention `auto` and all layers on the GPU the
// defaults.
constexpr int kLlamaFirstBuildWithFlashAttnValue = 6325;
// `--draft-max/--draft-min` became `--spec-draft-n-max/--spec-draft-n-min` with #22397
// (14e733e36, b8955); the old names now fail at argument parsing.
constexpr int kLlamaFirstBuildWithSpecDraftFlags = 8955;
// Draft-model speculation is a `--spec-type draft-simple|draft-eagle3` from #22964 (634275fbb,
// b9131); `draft-mtp` from #22673 (255582687, b9180).
constexpr int kLlamaFirstBuildWithDraftSimple = 9131;
constexpr int kLlamaFirstBuildWithDraftMtp = 9180;
// `draft-eagle3` is listed from b9131 but drafts nothing until #18039 (88a39274e, b9606):
// before it common/speculative.cpp has `bool has_draft_eagle3 = false; // TODO PR-18039`.
constexpr int kLlamaFirstBuildWithEagle3 = 9606;
// `--spec-type` itself (with `none`, the value that pins speculation off) arrived with
// llama.cpp#18471 (commit 72d3b1898, 2026-01-28, b7864); it took ngram types only until b9131.
constexpr int kLlamaFirstBuildWithSpecTypeNone = 7864;
// The host-memory prompt cache, `--cache-ram N` (0 disables it), arrived with llama.cpp#16391
// (commit d00cbea63, 2025-10-09, b6723). On by default (8192 MiB): before each request the
// server may copy a slot's whole KV state to host memory, whatever the request's cache_prompt
// says, which is time in no token's latency (docs/engines.md, "Measured against a real
// llama.cpp"). The same commit let a slot draft without cache_prompt: before it
// tools/server/server.cpp had `return ctx_dft && params.speculative.n_max > 0 &&
// params.cache_prompt;` in can_speculate(), and ladder sends cache_prompt: false.
constexpr int kLlamaFirstBuildWithCacheRam = 6723;
// `--fit on|off` (adjust unset arguments to fit device memory, on by default) from #16653
// (b1f3a6e5d, b7407).
constexpr int kLlamaFirstBuildWithFit = 7407;
// A response's `timings` carry draft_n / draft_n_accepted (when the request drafted) from
// llama.cpp#12603 (5d0167026, 2025-03-28, b4984); before it no response says whether it
// drafted, so their absence is no zero (a real b4900: tests/engines/fixtures/
// llama.cpp-b4900-cpu). Its --help did not change: a build whose number is unknown reports
// them when its --help lists --cache-ram (b6723 on).
constexpr int kLlamaFirstBuildWithDraftTimings = 4984;

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

// What a vLLM or SGLang binary offers: from its --help when the runner read it
// (RecipeContext::capabilities); without it every flag is assumed, as the recipe always did (a
// flag the binary lacks then fails at its argument parsing, before anything is measured).
class ArgparseOffers {
 public:
  ArgparseOffers(const RecipeContext& context, std::string_view engine) : engine_(engine) {
    if (auto it = context.capabilities.find(std::string(engine));
        it != context.capabilities.end()) {
      help_ = &it->second;
    }
  }

  const EngineCapabilities* help() const { return help_; }
  bool Has(std::string_view flag) const { return help_ == nullptr || help_->Has(flag); }

  // The first of `spellings` the --help lists (without one: the first). A cell that needs the
  // flag is refused, naming it, when none is listed.
  absl::StatusOr<std::string> Spell(std::string_view param,
                                    std::initializer_list<std::string_view> spellings) const {
    if (help_ == nullptr) return std::string(*spellings.begin());
    if (auto flag = help_->FirstOffered(spellings)) return *flag;
    return ParamError(engine_, param,
                      Cat("this ", engine_, " has no ", *spellings.begin(), " (", help_->source,
                          " does not list it)"));
  }

  // A value the flag's choices ("{a,b,c}") do not include is refused; a flag without choices
  // takes anything. Compared without case: vLLM and SGLang name backends in either.
  absl::Status CheckChoice(std::string_view param, std::string_view flag,
                           std::string_view value) const {
    if (help_ == nullptr) return absl::OkStatus();
    const std::vector<std::string> choices = help_->Values(flag);
    if (choices.empty()) return absl::OkStatus();
    for (const std::string& c : choices) {
      if (absl::EqualsIgnoreCase(c, absl::string_view(value.data(), value.size()))) {
        return absl::OkStatus();
      }
    }
    return ParamError(engine_, param,
                      Cat("this ", engine_, "'s ", flag, " takes ", absl::StrJoin(choices, ", "),
                          " (", help_->source, "); got \"", value, "\""));
  }

  // The listed choice equal to `value` without case, else `value`.
  std::string Choice(std::string_view flag, std::string_view value) const {
    if (help_ != nullptr) {
      for (const std::string& c : help_->Values(flag)) {
        if (absl::EqualsIgnoreCase(c, absl::string_view(value.data(), value.size()))) return c;
      }
    }
    return std::string(value);
  }

 private:
  std::string engine_;
  const EngineCapabilities* help_ = nullptr;
};

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
    const ArgparseOffers offers(context, name());
    std::string model = *GetString(params, "model");
    std::vector<std::string>& argv = out.launch->argv;
    argv = {context.vllm_executable,     "serve", model, "--host", context.host, "--port",
            std::to_string(context.port)};
    nlohmann::json& expect = out.expected_config;
    // Adds FLAG VALUE for a parameter the cell gave, in the spelling the binary lists, and
    // expects vLLM's "non-default args" to say `value` under `key`.
    auto add = [&](std::string_view param, std::initializer_list<std::string_view> spellings,
                   const std::string& value, const nlohmann::json& expected) -> absl::Status {
      ASSIGN_OR_RETURN(std::string flag, offers.Spell(param, spellings));
      argv.insert(argv.end(), {flag, value});
      expect[std::string(param)] = expected;
      return absl::OkStatus();
    };
    if (auto seed = GetInt(params, "seed")) {
      RETURN_IF_ERROR(add("seed", {"--seed"}, std::to_string(*seed), *seed));
    }

    std::string version = ResolveVersion(params, context, name());
    out.engine_version = version;
    if (offers.help() != nullptr) {
      out.rendered_from = offers.help()->source;
    } else if (!version.empty()) {
      out.rendered_from = Cat("version ", version);
    } else {
      out.rendered_from = "newest spelling (version unknown)";
    }
    if (auto backend = GetString(params, "attention_backend")) {
      out.requested_backend = *backend;
      // The binary's --help decides where it read one; else the version (the flag from 0.13).
      const bool flag =
          offers.help() != nullptr
              ? offers.help()->Has("--attention-backend")
              : version.empty() || CompareVersions(version, kVllmFirstVersionWithFlag) >= 0;
      if (!flag) {
        out.launch->env.emplace_back(kVllmBackendEnv, *backend);
        if (offers.help() != nullptr) {
          out.render_notes.push_back(Cat(offers.help()->source,
                                         " lists no --attention-backend: the backend is set "
                                         "with ",
                                         kVllmBackendEnv));
        }
      } else {
        RETURN_IF_ERROR(offers.CheckChoice("attention_backend", "--attention-backend", *backend));
        argv.insert(argv.end(), {"--attention-backend", *backend});
        out.launch->env_unset.push_back(kVllmBackendEnv);
        expect["attention_backend"] = BackendName(*backend);
      }
    }
    out.ignored_spec_model = spec.ignored_model;
    if (spec.k > 0) {
      nlohmann::ordered_json config = nlohmann::ordered_json::object();
      if (!spec.method.empty()) {
        ASSIGN_OR_RETURN(std::string method, VllmSpecMethod(spec.method));
        config["method"] = method;
        expect["speculative_config.method"] = method;
      }
      if (!spec.model.empty()) {
        config["model"] = spec.model;
        expect["speculative_config.model"] = spec.model;
      }
      config["num_speculative_tokens"] = spec.k;
      expect["speculative_config.num_speculative_tokens"] = spec.k;
      ASSIGN_OR_RETURN(std::string flag, offers.Spell("spec", {"--speculative-config"}));
      argv.insert(argv.end(), {flag, config.dump()});
      out.spec_k = spec.k;
    }
    if (auto tp = GetInt(params, "tensor_parallel_size")) {
      RETURN_IF_ERROR(
          add("tensor_parallel_size", {"--tensor-parallel-size", "-tp"}, std::to_string(*tp), *tp));
    }
    if (auto len = GetInt(params, "max_model_len")) {
      RETURN_IF_ERROR(add("max_model_len", {"--max-model-len"}, std::to_string(*len), *len));
    }
    if (auto util = GetNumber(params, "gpu_memory_utilization")) {
      RETURN_IF_ERROR(
          add("gpu_memory_utilization", {"--gpu-memory-utilization"}, FormatNumber(*util), *util));
    }
    if (auto dtype = GetString(params, "dtype")) {
      RETURN_IF_ERROR(offers.CheckChoice("dtype", "--dtype", *dtype));
      RETURN_IF_ERROR(add("dtype", {"--dtype"}, *dtype, *dtype));
    }
    if (auto q = GetString(params, "quantization")) {
      RETURN_IF_ERROR(offers.CheckChoice("quantization", "--quantization", *q));
      RETURN_IF_ERROR(add("quantization", {"--quantization", "-q"}, *q, *q));
    }
    if (GetBool(params, "enforce_eager").value_or(false)) {
      ASSIGN_OR_RETURN(std::string flag, offers.Spell("enforce_eager", {"--enforce-eager"}));
      argv.push_back(flag);
      expect["enforce_eager"] = true;
    }
    if (GetBool(params, "prefix_caching").value_or(false)) {
      ASSIGN_OR_RETURN(std::string flag,
                       offers.Spell("prefix_caching", {"--enable-prefix-caching"}));
      argv.push_back(flag);
      expect["enable_prefix_caching"] = true;
    } else if (offers.Has("--no-enable-prefix-caching")) {
      argv.emplace_back("--no-enable-prefix-caching");
      expect["enable_prefix_caching"] = false;
    } else {
      // Before BooleanOptionalAction the flag was a bare --enable-prefix-caching, off unless
      // given.
      out.render_notes.push_back(Cat(offers.help()->source,
                                     " lists no --no-enable-prefix-caching: prefix caching is "
                                     "left to the build's default (off where the flag is a bare "
                                     "--enable-prefix-caching)"));
    }
    RETURN_IF_ERROR(AddExtras(out, params, name()));

    out.endpoints.base_url = BaseUrl(context);
    out.endpoints.version_path = "/version";
    out.endpoints.config_path = "/v1/models";
    out.endpoints.model = model;
    out.spec_metrics = VllmSpecMetrics();
    // VLLM_* variables (VLLM_USE_V1, VLLM_FLASH_ATTN_VERSION, ...) change what vLLM runs, but
    // others are a site's deliberate setup (VLLM_CACHE_ROOT, VLLM_HOST_IP): they reach it and
    // are recorded (VLLM_ATTENTION_BACKEND, which ladder sets, is handled above).
    out.recorded_env_prefixes = {"VLLM_"};
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
    const ArgparseOffers offers(context, name());
    std::string model = *GetString(params, "model");
    std::vector<std::string>& argv = out.launch->argv;
    ASSIGN_OR_RETURN(std::string model_flag, offers.Spell("model", {"--model-path", "--model"}));
    argv = {context.python_executable,
            "-m",
            "sglang.launch_server",
            model_flag,
            model,
            "--host",
            context.host,
            "--port",
            std::to_string(context.port)};
    nlohmann::json& expect = out.expected_config;
    // FLAG VALUE in the spelling the binary lists; /get_server_info must report `expected`
    // under `key` (ServerArgs' field).
    auto add = [&](std::string_view param, std::initializer_list<std::string_view> spellings,
                   const std::string& value, std::string_view key,
                   const nlohmann::json& expected) -> absl::Status {
      ASSIGN_OR_RETURN(std::string flag, offers.Spell(param, spellings));
      argv.insert(argv.end(), {flag, value});
      expect[std::string(key)] = expected;
      return absl::OkStatus();
    };
    if (auto seed = GetInt(params, "seed")) {
      RETURN_IF_ERROR(add("seed", {"--random-seed"}, std::to_string(*seed), "random_seed", *seed));
    }
    out.ignored_spec_model = spec.ignored_model;
    if (auto backend = GetString(params, "attention_backend")) {
      out.requested_backend = *backend;
      RETURN_IF_ERROR(offers.CheckChoice("attention_backend", "--attention-backend", *backend));
      // SGLang replaces a backend the model or platform cannot use (server_args.py: "Setting
      // attention backend to triton.", MLA models' own choices) without always saying so in a
      // line ladder reads; /get_server_info reports the one it kept.
      RETURN_IF_ERROR(add("attention_backend", {"--attention-backend"},
                          offers.Choice("--attention-backend", *backend), "attention_backend",
                          BackendName(*backend)));
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
      RETURN_IF_ERROR(offers.CheckChoice("spec_method", "--speculative-algorithm", algorithm));
      RETURN_IF_ERROR(add("spec_method", {"--speculative-algorithm"}, algorithm,
                          "speculative_algorithm", algorithm));
      if (!spec.model.empty()) {
        RETURN_IF_ERROR(add("spec_model", {"--speculative-draft-model-path"}, spec.model,
                            "speculative_draft_model_path", spec.model));
      }
      if (algorithm == "NGRAM") {
        // SGLang's NGRAM drafts a tree, not a chain: its top-k is the BFS breadth, whatever
        // --speculative-eagle-topk says (server_args.py, _handle_speculative_decoding:
        //   if self.speculative_algorithm == "NGRAM":
        //       ...
        //       self.speculative_eagle_topk = self.speculative_ngram_max_bfs_breadth
        // ), and --speculative-num-draft-tokens is the tree's size. spec_k is passed as a
        // budget of k drafted tokens (num_draft_tokens k + 1) with k steps and no top-k (one
        // would be overwritten); /get_server_info's values are in engine_config evidence.
        RETURN_IF_ERROR(add("spec_k", {"--speculative-num-steps"}, std::to_string(spec.k),
                            "speculative_num_steps", spec.k));
        RETURN_IF_ERROR(add("spec_k", {"--speculative-num-draft-tokens"},
                            std::to_string(spec.k + 1), "speculative_num_draft_tokens",
                            spec.k + 1));
        out.render_notes.push_back(
            "NGRAM: SGLang drafts a tree (top-k = --speculative-ngram-max-bfs-breadth) of "
            "--speculative-num-draft-tokens = spec_k + 1 tokens, not a chain of spec_k: compare "
            "its spec_k with other methods' only as the draft-token budget");
      } else {
        RETURN_IF_ERROR(add("spec_k", {"--speculative-num-steps"}, std::to_string(spec.k),
                            "speculative_num_steps", spec.k));
        RETURN_IF_ERROR(
            add("spec_k", {"--speculative-eagle-topk"}, "1", "speculative_eagle_topk", 1));
        RETURN_IF_ERROR(add("spec_k", {"--speculative-num-draft-tokens"},
                            std::to_string(spec.k + 1), "speculative_num_draft_tokens",
                            spec.k + 1));
      }
      out.spec_k = spec.k;
    }
    if (auto tp = GetInt(params, "tensor_parallel_size")) {
      RETURN_IF_ERROR(add("tensor_parallel_size", {"--tp-size", "--tensor-parallel-size"},
                          std::to_string(*tp), "tp_size", *tp));
    }
    if (auto len = GetInt(params, "max_model_len")) {
      RETURN_IF_ERROR(
          add("max_model_len", {"--context-length"}, std::to_string(*len), "context_length", *len));
    }
    if (auto frac = GetNumber(params, "mem_fraction_static")) {
      RETURN_IF_ERROR(add("mem_fraction_static", {"--mem-fraction-static"}, FormatNumber(*frac),
                          "mem_fraction_static", *frac));
    }
    if (!GetBool(params, "prefix_caching").value_or(false)) {
      ASSIGN_OR_RETURN(std::string flag, offers.Spell("prefix_caching", {"--disable-radix-cache"}));
      argv.push_back(flag);
      expect["disable_radix_cache"] = true;
    } else {
      expect["disable_radix_cache"] = false;
    }
    {
      ASSIGN_OR_RETURN(std::string flag, offers.Spell("engine", {"--enable-metrics"}));
      argv.push_back(flag);
    }
    out.rendered_from = offers.help() != nullptr ? offers.help()->source : "newest spelling";
    out.endpoints.config_path = "/get_server_info";
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
    // SGLANG_* variables change what the server runs (SGLANG_ENABLE_SPEC_V2 turns the overlap
    // scheduler on for EAGLE, server_args.py at 469c63e5) but the server also sets some itself
    // and a site may set others on purpose: they reach it, and are recorded.
    out.recorded_env_prefixes = {"SGLANG_"};
    if (spec.k > 0) {
      out.draft_timings = DraftTimings::kSglangSpecDetails;
      out.endpoints.extra_request_fields = {{"return_spec_tokens_details", true}};
    }
    out.start_timeout = StartTimeout(params, 1800);
    return out;
  }
};

// ---------------------------------------------------------------------------------------------
// One spelling of a llama-server option and the first build that has it.
struct Spelling {
  std::string_view flag;
  int from = 0;
};

// What one llama-server offers: from its --help when the runner read it (RecipeContext::
// capabilities), else from its build number, else (build unknown, no --help) the newest
// spelling, which an older build refuses at argument parsing rather than measuring something
// else.
class LlamaOffers {
 public:
  LlamaOffers(const EngineCapabilities* help, std::optional<int> build)
      : help_(help), build_(build) {}

  const EngineCapabilities* help() const { return help_; }
  const std::optional<int>& build() const { return build_; }

  // Where a missing option was looked for, for messages.
  std::string Where() const {
    if (help_ != nullptr) return "its --help does not list it";
    return Cat("build b", build_.value_or(0));
  }

  // The spelling to pass among `spellings` (newest first): the first the --help offers, else
  // the first the build has, else the newest. NotFound naming the newest spelling and the build
  // it needs otherwise ("this llama-server has no --spec-type: built before b7864?").
  absl::StatusOr<std::string> Spell(std::initializer_list<Spelling> spellings) const {
    int oldest = spellings.begin()->from;
    for (const Spelling& s : spellings) {
      oldest = std::min(oldest, s.from);
      if (help_ != nullptr ? help_->Has(s.flag) : (!build_ || *build_ >= s.from)) {
        return std::string(s.flag);
      }
    }
    return Missing(spellings.begin()->flag, oldest);
  }
  bool Offers(std::initializer_list<Spelling> spellings) const { return Spell(spellings).ok(); }

  absl::Status Missing(std::string_view flag, int from) const {
    std::string when = from > 0 ? Cat(": built before b", from, "?") : std::string();
    return absl::FailedPreconditionError(
        Cat("this llama-server has no ", flag, " (", Where(), ")", when));
  }

  // --flash-attn takes on|off|auto (b6325 on), rather than being a bare flag.
  bool FlashAttnTakesValue() const {
    if (help_ != nullptr) {
      const EngineOption* fa = help_->Find("--flash-attn");
      return fa != nullptr && !fa->removed && !fa->value_hint.empty();
    }
    return !build_ || *build_ >= kLlamaFirstBuildWithFlashAttnValue;
  }

  // The values --spec-type takes (empty: no --spec-type).
  std::vector<std::string> SpecTypes() const {
    if (help_ != nullptr) {
      if (!help_->Has("--spec-type")) return {};
      return help_->Values("--spec-type");
    }
    std::vector<std::string> types;
    if (build_ && *build_ < kLlamaFirstBuildWithSpecTypeNone) return types;
    types = {"none", "ngram-cache", "ngram-simple", "ngram-map-k", "ngram-map-k4v"};
    if (!build_ || *build_ >= kLlamaFirstBuildWithDraftSimple) {
      types.insert(types.end(), {"draft-simple", "draft-eagle3"});
    }
    if (!build_ || *build_ >= kLlamaFirstBuildWithDraftMtp) types.emplace_back("draft-mtp");
    return types;
  }

 private:
  const EngineCapabilities* help_;
  std::optional<int> build_;
};

bool Contains(const std::vector<std::string>& list, std::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// llama.cpp pads a context to a multiple of 256 (src/llama-context.cpp at 82bb48500:
// `cparams.n_ctx = GGML_PAD(cparams.n_ctx, 256);`; older builds pad less).
int64_t PadContext(int64_t n) { return (n + 255) / 256 * 256; }

// Pinned when a cell does not say: every layer on the GPU (the default from b6325; 0 before),
// flash attention on (what `auto`, the default from b6325, picks where the device has it; off
// before), the draft's p_min 0 (the default from #23269, b9235; 0.75 before).
constexpr int kPinnedGpuLayers = 999;
constexpr char kPinnedFlashAttn[] = "on";
constexpr double kPinnedDraftPMin = 0.0;

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
         "--spec-draft-n-min (b8955 on) or --draft-min"},
        {"spec_p_min", ParamType::kNumber, false,
         "--spec-draft-p-min (b8955 on) or --draft-p-min; default 0 (pinned)"},
        {"gpu_layers", ParamType::kInteger, false, "--n-gpu-layers; default 999 (all, pinned)"},
        {"gpu_layers_draft", ParamType::kInteger, false,
         "--spec-draft-ngl (b8955 on) or --gpu-layers-draft; default 999 (pinned)"},
        {"flash_attn", ParamType::kString, false,
         "--flash-attn on|off|auto (b6325 on; before: a bare --flash-attn for on); default on "
         "(pinned)"},
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
    if (!out.engine_version.empty() && !LlamaCppBuild(out.engine_version).has_value()) {
      return ParamError(
          name(), "engine_version",
          Cat("expected a build number such as b7100, got \"", out.engine_version, "\""));
    }
    const std::optional<int> build = KnownLlamaCppBuild(out.engine_version);
    const EngineCapabilities* help = nullptr;
    if (auto it = context.capabilities.find(std::string(name()));
        it != context.capabilities.end()) {
      help = &it->second;
    }
    const LlamaOffers offers(help, build);
    if (help != nullptr) {
      out.rendered_from = help->source;
    } else if (build.has_value()) {
      out.rendered_from = Cat("build b", *build);
    } else if (!out.engine_version.empty()) {
      out.rendered_from = Cat("newest spelling (", out.engine_version,
                              " is no build number: built without its git history?)");
    } else {
      out.rendered_from = "newest spelling (build unknown)";
    }
    // A cell the binary cannot run as asked is a parameter error of that cell on that agent.
    auto refuse = [&](std::string_view param, const absl::Status& why) {
      return ParamError(name(), param, ToStd(why.message()));
    };
    auto spell = [&](std::string_view param,
                     std::initializer_list<Spelling> spellings) -> absl::StatusOr<std::string> {
      auto flag = offers.Spell(spellings);
      if (!flag.ok()) return refuse(param, flag.status());
      return flag;
    };

    std::string model = *GetString(params, "model");
    std::vector<std::string>& argv = out.launch->argv;
    ASSIGN_OR_RETURN(std::string model_flag, spell("model", {{"--model"}, {"-m"}}));
    ASSIGN_OR_RETURN(std::string metrics_flag, spell("engine", {{"--metrics"}}));
    argv = {context.llama_server_executable, model_flag,  model, "--host", context.host, "--port",
            std::to_string(context.port),    metrics_flag};
    if (auto seed = GetInt(params, "seed")) {
      ASSIGN_OR_RETURN(std::string flag, spell("seed", {{"--seed"}, {"-s"}}));
      argv.insert(argv.end(), {flag, std::to_string(*seed)});
    }
    std::optional<int64_t> slots = GetInt(params, "parallel");
    if (!slots.has_value() && !HasLoadParams(params)) slots = 1;
    if (auto ctx = GetInt(params, "max_model_len")) {
      ASSIGN_OR_RETURN(std::string flag, spell("max_model_len", {{"--ctx-size"}, {"-c"}}));
      argv.insert(argv.end(), {flag, std::to_string(*ctx)});
      // /props reports one slot's context: the whole context only with one slot.
      if (slots == 1) {
        out.expected_config["n_ctx"] = {{"min", *ctx}, {"max", PadContext(*ctx)}};
      }
    }
    {
      std::optional<int64_t> layers = GetInt(params, "gpu_layers");
      if (!layers.has_value()) {
        layers = kPinnedGpuLayers;
        out.pinned["gpu_layers"] = kPinnedGpuLayers;
      }
      ASSIGN_OR_RETURN(std::string flag,
                       spell("gpu_layers", {{"--n-gpu-layers"}, {"--gpu-layers"}, {"-ngl"}}));
      argv.insert(argv.end(), {flag, std::to_string(*layers)});
    }
    // One slot for a batch-1 cell: each request then has the whole context, and no other slot's
    // old prompt sits in a unified KV cache (with the prompt cache off, idle slots are not
    // cleared; a second 1K prompt in a 2K context then fails "Context size has been exceeded").
    if (slots.has_value()) {
      ASSIGN_OR_RETURN(std::string flag, spell("parallel", {{"--parallel"}, {"-np"}}));
      argv.insert(argv.end(), {flag, std::to_string(*slots)});
      out.expected_config["total_slots"] = *slots;
    }
    const bool has_cache_ram = offers.Offers({{"--cache-ram", kLlamaFirstBuildWithCacheRam}});
    if (!GetBool(params, "prefix_caching").value_or(false) && has_cache_ram) {
      argv.insert(argv.end(), {"--cache-ram", "0"});
    }
    // --fit (on by default from b7407) changes unset arguments (the context, the layers on the
    // GPU) to fit the device's memory: what the cell asked must be what runs.
    if (offers.Offers({{"--fit", kLlamaFirstBuildWithFit}})) {
      argv.insert(argv.end(), {"--fit", "off"});
      out.pinned["fit"] = "off";
    }
    {
      std::string fa = GetString(params, "flash_attn").value_or("");
      if (fa.empty()) {
        fa = kPinnedFlashAttn;
        out.pinned["flash_attn"] = fa;
      }
      if (fa != "on" && fa != "off" && fa != "auto") {
        return ParamError(name(), "flash_attn", Cat("expected on, off or auto, got \"", fa, "\""));
      }
      const bool listed = offers.Offers({{"--flash-attn"}, {"-fa"}});
      if (listed && offers.FlashAttnTakesValue()) {
        argv.insert(argv.end(), {"--flash-attn", fa});
      } else if (fa == "auto") {
        return refuse("flash_attn",
                      absl::FailedPreconditionError(Cat(
                          "\"auto\" needs a llama-server whose --flash-attn takes a value (b",
                          kLlamaFirstBuildWithFlashAttnValue, " on); this one's is a bare flag (",
                          offers.help() ? "its --help" : out.rendered_from, ")")));
      } else if (fa == "on") {
        if (!listed) return refuse("flash_attn", offers.Missing("--flash-attn", 0));
        argv.emplace_back("--flash-attn");  // older builds: a bare flag, off unless given
      }
    }
    const std::vector<std::string> spec_types = offers.SpecTypes();
    if (spec.k > 0) {
      ASSIGN_OR_RETURN(std::string spec_type, LlamaSpecType(spec.method));
      const bool mtp = spec_type == "draft-mtp";
      if (spec.model.empty() && !mtp) {
        return ParamError(name(), "spec_model",
                          "is required with speculation (llama-server drafts with --model-draft)");
      }
      if (!has_cache_ram) {
        return refuse("spec",
                      absl::FailedPreconditionError(
                          Cat("this llama-server drafts only for requests with cache_prompt: true "
                              "(no --cache-ram, ",
                              offers.Where(), ": built before b", kLlamaFirstBuildWithCacheRam,
                              ", where can_speculate() required cache_prompt), and ladder sends "
                              "cache_prompt: false so that every prompt is computed in full; its "
                              "speculation cells would run the target alone: use b",
                              kLlamaFirstBuildWithCacheRam, " or later")));
      }
      const bool draft_types = Contains(spec_types, "draft-simple");
      if (Contains(spec_types, spec_type)) {
        argv.insert(argv.end(), {"--spec-type", spec_type});
      } else if (spec_type != "draft-simple" || draft_types) {
        const int from = mtp ? kLlamaFirstBuildWithDraftMtp : kLlamaFirstBuildWithDraftSimple;
        return refuse("spec_method", absl::FailedPreconditionError(Cat(
                                         "this llama-server has no --spec-type ", spec_type, " (",
                                         offers.help() ? "not among the values its --help lists"
                                                       : Cat("build b", build.value_or(0)),
                                         "): built before b", from, "?")));
      }  // else: before b9131 a draft model alone engages drafting
      if (spec_type == "draft-eagle3") {
        if (build.has_value() && *build < kLlamaFirstBuildWithEagle3) {
          return refuse("spec_method",
                        absl::FailedPreconditionError(
                            Cat("draft-eagle3 drafts from b", kLlamaFirstBuildWithEagle3,
                                " (llama.cpp#18039); b", *build,
                                " lists it but loads an EAGLE3 head as a plain draft or drafts "
                                "nothing")));
        }
        if (!build.has_value()) {
          out.render_notes.push_back(
              Cat("draft-eagle3 is listed from b", kLlamaFirstBuildWithDraftSimple,
                  " but drafts only from b", kLlamaFirstBuildWithEagle3,
                  "; this build's number is unknown, so only the speculation check can tell"));
        }
      }
      if (!spec.model.empty()) {
        ASSIGN_OR_RETURN(std::string flag,
                         spell("spec_model", {{"--model-draft"}, {"--spec-draft-model"}, {"-md"}}));
        argv.insert(argv.end(), {flag, spec.model});
      }
      ASSIGN_OR_RETURN(std::string n_max,
                       spell("spec_k", {{"--spec-draft-n-max", kLlamaFirstBuildWithSpecDraftFlags},
                                        {"--draft-max"}}));
      argv.insert(argv.end(), {n_max, std::to_string(spec.k)});
      if (auto k_min = GetInt(params, "spec_k_min")) {
        ASSIGN_OR_RETURN(
            std::string flag,
            spell("spec_k_min",
                  {{"--spec-draft-n-min", kLlamaFirstBuildWithSpecDraftFlags}, {"--draft-min"}}));
        argv.insert(argv.end(), {flag, std::to_string(*k_min)});
      }
      {
        std::optional<double> p_min = GetNumber(params, "spec_p_min");
        if (!p_min.has_value()) {
          p_min = kPinnedDraftPMin;
          out.pinned["spec_p_min"] = kPinnedDraftPMin;
        }
        ASSIGN_OR_RETURN(
            std::string flag,
            spell("spec_p_min",
                  {{"--spec-draft-p-min", kLlamaFirstBuildWithSpecDraftFlags}, {"--draft-p-min"}}));
        argv.insert(argv.end(), {flag, FormatNumber(*p_min)});
      }
      if (!spec.model.empty()) {
        std::optional<int64_t> layers = GetInt(params, "gpu_layers_draft");
        if (!layers.has_value()) {
          layers = kPinnedGpuLayers;
          out.pinned["gpu_layers_draft"] = kPinnedGpuLayers;
        }
        ASSIGN_OR_RETURN(
            std::string flag,
            spell("gpu_layers_draft", {{"--spec-draft-ngl", kLlamaFirstBuildWithSpecDraftFlags},
                                       {"--gpu-layers-draft"},
                                       {"-ngld"}}));
        argv.insert(argv.end(), {flag, std::to_string(*layers)});
      }
      out.spec_k = spec.k;
    } else if (Contains(spec_types, "none")) {
      // Pinned off: a build whose default turns some drafting on (llama.cpp#28391 proposes
      // ngram-mod by default), or that infers a draft type from the model, must not draft in
      // an arm that measures the target alone.
      argv.insert(argv.end(), {"--spec-type", "none"});
      out.spec_off_pinned = true;
    }
    RETURN_IF_ERROR(AddExtras(out, params, name()));
    // LLAMA_ARG_* variables set the options the command line leaves unset (common/arg.cpp
    // applies the environment first, then argv, which wins: seen on b4900, b8000 and b10587);
    // one in the agent's environment would change every cell. A cell's own extra_env keeps
    // the ones it sets.
    out.launch->env_unset_prefixes = {"LLAMA_ARG_"};
    out.endpoints.base_url = BaseUrl(context);
    out.endpoints.model = model;
    out.endpoints.config_path = "/props";
    // timings_per_token: llama-server reports draft_n / draft_n_accepted in `timings`, the
    // acceptance source on builds whose /metrics has no speculation counters.
    out.endpoints.extra_request_fields = {{"cache_prompt", false}, {"timings_per_token", true}};
    // Counters exported from llama.cpp#26389 on (named after vLLM's); absent before, when the
    // runner falls back to the response timings.
    out.spec_metrics = {"llamacpp:spec_decode_num_drafts", "llamacpp:spec_decode_num_draft_tokens",
                        "llamacpp:spec_decode_num_accepted_tokens"};
    const bool reports_draft_n =
        build.has_value() ? *build >= kLlamaFirstBuildWithDraftTimings : has_cache_ram;
    if (reports_draft_n) {
      out.draft_timings = DraftTimings::kLlamaCppTimings;
    } else {
      // No source says whether a cell drafted: no acceptance metrics, never zeros read from
      // absence (speculation cells are refused on such builds; off arms are given nothing
      // that drafts, but nothing measures that either).
      out.render_notes.push_back(
          Cat("this llama-server's responses carry no draft_n (before b",
              kLlamaFirstBuildWithDraftTimings,
              ", llama.cpp#12603) and its /metrics no speculation counters: whether a cell "
              "drafted is not verifiable, and no draft counts are recorded"));
    }
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
