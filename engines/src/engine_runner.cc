#include "ladder/engines/engine_runner.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ladder/common/mutex.h"
#include "ladder/common/utf8.h"
#include "ladder/engines/capabilities.h"
#include "ladder/engines/client.h"
#include "ladder/engines/engine_config.h"
#include "ladder/engines/engine_version.h"
#include "ladder/engines/load.h"
#include "ladder/engines/process.h"
#include "ladder/matrices/matrix.h"
#include "ladder/runner/validate.h"
#include "ladder/status_macros.h"
#include "message.h"
#include "params.h"

extern char** environ;

namespace ladder::engines {

struct EngineRunner::DetectedVersions {
  Mutex mu;
  // engine -> version, or the reason it could not be read.
  std::map<std::string, absl::StatusOr<std::string>> by_engine ABSL_GUARDED_BY(mu);
  // engine -> what its --help lists, or the reason it could not be read.
  std::map<std::string, absl::StatusOr<EngineCapabilities>> capabilities ABSL_GUARDED_BY(mu);
};

using internal::Cat;
using internal::ToStd;
namespace {

using runner::CellWork;
using runner::Evidence;
using runner::Measurement;
using runner::MeasurementSink;
using runner::UnitWork;
using Clock = std::chrono::steady_clock;

enum class Residency { kTogether, kOneAtATime };

// The settings shared by the cells of one arm (read from its first cell).
enum class Warmup { kPerDepth, kOnce, kNone };

struct ArmSettings {
  Warmup warmup = Warmup::kPerDepth;
  int short_tokens = 8;
  int long_tokens = 64;
  int request_retries = 3;
  std::chrono::milliseconds request_timeout{600'000};
  std::vector<std::string> probe_patterns;
  int32_t token_id_min = 1000;
  int32_t token_id_max = 30000;
};

struct Arm {
  int index = 0;
  const Recipe* recipe = nullptr;
  nlohmann::json params;   // the first cell's params (depth varies within the arm)
  std::string label;       // the cell key without depth
  std::vector<int> cells;  // indices into unit.cells
  // Each cell's request shape (depth and load parameters): two cells with the same shape and
  // configuration are duplicated arms (an A/A control) and get separate engines.
  std::set<std::string> shapes;
  ArmSettings settings;
};

// One started engine (a child process, or an external server).
struct LiveEngine {
  const Arm* arm = nullptr;
  int process_index = 0;
  RenderedEngine rendered;
  std::unique_ptr<EngineProcess> process;  // null for external servers
  std::unique_ptr<EngineClient> client;
  int port = 0;
  std::string version;
  double start_ms = 0;
  // Steady-clock wall time of each cell measurement (one round of one cell) in this process, µs:
  // the round cost behind the report's optimal-repeats plan, at a resolution the results' ms
  // time stamps do not have.
  std::vector<double> measure_us;
  // Untimed warm-up generations sent after the start, ms each.
  std::vector<double> warmup_ms;
  // Per cell index: the decode rates of its rounds, differenced and streamed, for the check
  // that they agree (RecordProcessEvidence).
  std::map<int, std::vector<double>> differenced_rates;
  std::map<int, std::vector<double>> stream_rates;
  // `engine_config` evidence: what the engine reported about its configuration and how it
  // compared with the cell's; null when the engine reports none.
  nlohmann::json config;
};

// Speculation counters read around one cell-round.
struct SpecReadings {
  std::optional<SpecCounters> before, after;              // drafts, draft tokens, accepted
  std::optional<SpecCounters> steps_before, steps_after;  // verify steps, generated tokens
};

double Median(std::vector<double> v) { return Percentile(std::move(v), 50); }

double StdDev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

std::string NormalizeBackend(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

// Parameters that shape the requests sent to an engine, not the engine: cells differing only in
// these share one engine process (a depth ladder, a concurrency sweep).
const std::vector<std::string>& RequestShapeParams() {
  static const std::vector<std::string> params = {
      "depth",           "concurrency",   "request_rate",  "num_requests", "duration_s",
      "warmup_requests", "output_tokens", "length_spread", "slo_ttft_ms",  "slo_itl_ms"};
  return params;
}

std::string LabelWithoutDepth(const CellWork& cell) {
  std::string label = matrices::CellKeyWithout(cell.key, RequestShapeParams());
  return label.empty() ? "default" : label;
}

absl::StatusOr<ArmSettings> ReadSettings(const nlohmann::json& params, std::string_view engine) {
  ArmSettings s;
  if (auto w = internal::GetString(params, "warmup")) {
    if (*w == "per_depth") {
      s.warmup = Warmup::kPerDepth;
    } else if (*w == "once") {
      s.warmup = Warmup::kOnce;
    } else if (*w == "none") {
      s.warmup = Warmup::kNone;
    } else {
      return internal::ParamError(engine, "warmup",
                                  Cat("expected per_depth, once or none, got \"", *w, "\""));
    }
  }
  s.short_tokens = static_cast<int>(internal::GetInt(params, "short_tokens").value_or(8));
  s.long_tokens = static_cast<int>(internal::GetInt(params, "long_tokens").value_or(64));
  if (s.long_tokens <= s.short_tokens) {
    return internal::ParamError(engine, "long_tokens",
                                Cat("must exceed short_tokens (", s.short_tokens, ")"));
  }
  s.request_retries = static_cast<int>(internal::GetInt(params, "request_retries").value_or(3));
  double timeout_s = internal::GetNumber(params, "request_timeout_s").value_or(600);
  if (timeout_s <= 0) return internal::ParamError(engine, "request_timeout_s", "must be > 0");
  s.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  if (params.contains("probe_patterns")) {
    ASSIGN_OR_RETURN(s.probe_patterns, internal::GetList(params, engine, "probe_patterns"));
  } else {
    s.probe_patterns = {"PROBE_3D_SPEC_ACTIVE"};
  }
  s.token_id_min = static_cast<int32_t>(internal::GetInt(params, "token_id_min").value_or(1000));
  s.token_id_max = static_cast<int32_t>(internal::GetInt(params, "token_id_max").value_or(30000));
  if (s.token_id_max <= s.token_id_min) {
    return internal::ParamError(engine, "token_id_max", "must exceed token_id_min");
  }
  return s;
}

absl::StatusOr<Residency> ReadResidency(const nlohmann::json& params, std::string_view engine) {
  Residency residency = (engine == "synthetic" || engine == "external") ? Residency::kTogether
                                                                        : Residency::kOneAtATime;
  if (auto r = internal::GetString(params, "arm_residency")) {
    if (*r == "together") {
      residency = Residency::kTogether;
    } else if (*r == "one_at_a_time") {
      residency = Residency::kOneAtATime;
    } else {
      return internal::ParamError(engine, "arm_residency",
                                  Cat("expected together or one_at_a_time, got \"", *r, "\""));
    }
  }
  return residency;
}

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  return absl::Status(status.code(), Cat(context, ": ", status.message()));
}

// Where to look when a running engine's configuration is not its cell's.
std::string ConfigMismatchHint(std::string_view engine) {
  if (engine == "llama.cpp") {
    return "check the model's training context (llama-server caps a slot's context at it from "
           "b6925, llama.cpp#16736), --fit, the agent's environment (LLAMA_ARG_* are removed "
           "unless extra_env sets them) and extra_args";
  }
  if (engine == "sglang") {
    return "SGLang adjusts its arguments after parsing them (server_args.py: an attention "
           "backend the model or platform does not support is replaced, speculative settings "
           "are derived); check the server's log, the agent's SGLANG_* variables and extra_args";
  }
  if (engine == "vllm") {
    return "check the server's log, the agent's VLLM_* variables and extra_args";
  }
  return "check extra_args and the agent's environment";
}

// Runs one unit; owns the live engines and the cancellation watchdog.
class UnitRun {
 public:
  UnitRun(const EngineRunnerOptions& options, EngineRunner::DetectedVersions& versions,
          const UnitWork& unit, MeasurementSink& sink)
      : options_(options),
        versions_(versions),
        context_(options.recipe_context),
        unit_(unit),
        sink_(sink) {}

  ~UnitRun() {
    StopAll();
    {
      MutexLock lock(&mu_);
      finished_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
  }

  absl::Status Run() {
    if (unit_.cells.empty()) return absl::OkStatus();
    if (unit_.processes < 1 || unit_.rounds < 1) {
      return absl::InvalidArgumentError("engine runner: processes and rounds must be >= 1");
    }
    RETURN_IF_ERROR(BuildArms());
    watchdog_ = std::thread([this] { Watchdog(); });
    for (int p = 0; p < unit_.processes; ++p) {
      absl::Status s =
          residency_ == Residency::kTogether ? RunProcessTogether(p) : RunProcessOneAtATime(p);
      StopAll();
      if (!s.ok()) return cancelled_ ? absl::CancelledError("engine runner: unit cancelled") : s;
    }
    return absl::OkStatus();
  }

 private:
  // ------------------------------------------------------------------------------------------
  // Fills context_.engine_versions[engine] from the probe (once per runner), unless the cell or
  // the agent's configuration already says which version is installed.
  void DetectVersion(const std::string& engine, const nlohmann::json& params) {
    if (options_.version_detection == VersionDetection::kOff) return;
    DetectCapabilities(engine);
    if (internal::GetString(params, "engine_version").has_value()) return;
    if (context_.engine_versions.count(engine) > 0) return;
    if (!VersionCommand(engine, context_).has_value()) return;
    absl::StatusOr<std::string> version = absl::UnknownError("not probed");
    {
      MutexLock lock(&versions_.mu);
      auto it = versions_.by_engine.find(engine);
      if (it == versions_.by_engine.end()) {
        it = versions_.by_engine
                 .emplace(engine, DetectEngineVersion(engine, context_, options_.version_timeout))
                 .first;
      }
      version = it->second;
    }
    probes_[engine] = version.ok()
                          ? nlohmann::json{{"version", *version}}
                          : nlohmann::json{{"error", std::string(version.status().message())}};
    if (version.ok()) context_.engine_versions[engine] = *version;
  }

  // Fills context_.capabilities[engine] from the binary's --help (once per runner: an agent's
  // engines do not change under it), unless the agent's configuration already gives them. The
  // outcome is `engine_capabilities` evidence; a --help that cannot be read leaves the recipe
  // on its build-number table, and the evidence says why.
  void DetectCapabilities(const std::string& engine) {
    if (context_.capabilities.count(engine) > 0 || capability_probes_.count(engine) > 0) return;
    if (!HelpCommand(engine, context_).has_value()) return;
    absl::StatusOr<EngineCapabilities> caps = absl::UnknownError("not read");
    {
      MutexLock lock(&versions_.mu);
      auto it = versions_.capabilities.find(engine);
      if (it == versions_.capabilities.end()) {
        it = versions_.capabilities
                 .emplace(engine,
                          engines::DetectCapabilities(engine, context_, options_.version_timeout))
                 .first;
      }
      caps = it->second;
    }
    if (caps.ok()) {
      int removed = 0;
      for (const EngineOption& o : caps->options) removed += o.removed ? 1 : 0;
      capability_probes_[engine] = {{"source", caps->source},
                                    {"options", caps->options.size()},
                                    {"removed_options", removed}};
      context_.capabilities[engine] = *std::move(caps);
    } else {
      capability_probes_[engine] = {{"error", std::string(caps.status().message())}};
    }
  }

  absl::Status BuildArms() {
    std::map<std::string, std::vector<int>> by_config;  // config -> arm indices
    std::optional<Residency> residency;
    for (size_t i = 0; i < unit_.cells.size(); ++i) {
      const CellWork& cell = unit_.cells[i];
      if (!cell.params.is_object() || !cell.params.contains("engine") ||
          !cell.params["engine"].is_string()) {
        return absl::InvalidArgumentError(
            Cat("engine runner: cell ", cell.key, ": parameter 'engine' is required"));
      }
      std::string engine = cell.params["engine"].get<std::string>();
      const Recipe* recipe = nullptr;
      for (const auto& extra : options_.extra_recipes) {
        if (extra->name() == engine) recipe = extra.get();
      }
      if (recipe == nullptr) {
        auto found = FindBuiltinRecipe(engine);
        if (!found.ok()) return Annotate(found.status(), Cat("cell ", cell.key));
        recipe = *found;
      }
      if (auto s = ValidateParams(*recipe, cell.params); !s.ok()) {
        return Annotate(s, Cat("cell ", cell.key));
      }
      DetectVersion(engine, cell.params);
      // The same checks as `ladder validate`, now with the versions this agent detected, so
      // that parameter errors surface before any engine starts.
      if (auto s = CheckEngineCell(cell.params, recipe, context_); !s.ok()) {
        return Annotate(s, Cat("cell ", cell.key));
      }
      ASSIGN_OR_RETURN(Residency cell_residency, ReadResidency(cell.params, engine));
      if (residency.has_value() && *residency != cell_residency) {
        return absl::InvalidArgumentError(
            "engine runner: the cells of one unit disagree on arm_residency");
      }
      residency = cell_residency;

      nlohmann::json config = cell.params;
      nlohmann::json shape = nlohmann::json::object();
      for (const std::string& name : RequestShapeParams()) {
        if (config.contains(name)) {
          shape[name] = config[name];
          config.erase(name);
        }
      }
      const std::string shape_key = shape.dump();
      std::string config_key = config.dump();
      Arm* target = nullptr;
      for (int arm_index : by_config[config_key]) {
        if (arms_[arm_index].shapes.count(shape_key) == 0) {
          target = &arms_[arm_index];
          break;
        }
      }
      if (target == nullptr) {
        Arm arm;
        arm.index = static_cast<int>(arms_.size());
        arm.recipe = recipe;
        arm.params = cell.params;
        arm.label = LabelWithoutDepth(cell);
        ASSIGN_OR_RETURN(arm.settings, ReadSettings(cell.params, engine));
        by_config[config_key].push_back(arm.index);
        arms_.push_back(std::move(arm));
        target = &arms_.back();
      }
      target->cells.push_back(static_cast<int>(i));
      target->shapes.insert(shape_key);
    }
    residency_ = residency.value_or(Residency::kTogether);
    return absl::OkStatus();
  }

  std::vector<int> Order(int count, int process, int round) const {
    return runner::InterleavedOrder(count, unit_.seed, process, round);
  }

  // ------------------------------------------------------------------------------------------
  absl::Status RunProcessTogether(int p) {
    std::vector<LiveEngine*> engines(arms_.size(), nullptr);
    for (const Arm& arm : arms_) {
      ASSIGN_OR_RETURN(engines[arm.index], StartEngine(arm, p));
    }
    for (const Arm& arm : arms_) RETURN_IF_ERROR(Warm(*engines[arm.index]));
    std::vector<int> arm_of_cell(unit_.cells.size(), 0);
    for (const Arm& arm : arms_) {
      for (int c : arm.cells) arm_of_cell[c] = arm.index;
    }
    for (int r = 0; r < unit_.rounds; ++r) {
      for (int c : Order(static_cast<int>(unit_.cells.size()), p, r)) {
        RETURN_IF_ERROR(TimedMeasureCell(*engines[arm_of_cell[c]], c, p, r));
      }
    }
    for (const Arm& arm : arms_) RETURN_IF_ERROR(RecordProcessEvidence(*engines[arm.index]));
    return absl::OkStatus();
  }

  absl::Status RunProcessOneAtATime(int p) {
    // Arms in a seeded order per process (round index -1 keeps it apart from the cell orders).
    for (int a : Order(static_cast<int>(arms_.size()), p, -1)) {
      std::unique_lock<std::mutex> turn;
      if (options_.device_turn != nullptr) {
        turn = std::unique_lock<std::mutex>(*options_.device_turn, std::defer_lock);
        while (!turn.try_lock()) {
          if (IsCancelled()) return absl::CancelledError("engine runner: unit cancelled");
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
      absl::Status status = RunArm(arms_[a], p);
      StopAll();  // before the turn passes on: the device is free when the next engine starts
      RETURN_IF_ERROR(status);
    }
    return absl::OkStatus();
  }

  absl::Status RunArm(const Arm& arm, int p) {
    ASSIGN_OR_RETURN(LiveEngine * engine, StartEngine(arm, p));
    RETURN_IF_ERROR(Warm(*engine));
    std::set<int> mine(arm.cells.begin(), arm.cells.end());
    for (int r = 0; r < unit_.rounds; ++r) {
      for (int c : Order(static_cast<int>(unit_.cells.size()), p, r)) {
        if (mine.count(c) != 0) RETURN_IF_ERROR(TimedMeasureCell(*engine, c, p, r));
      }
    }
    return RecordProcessEvidence(*engine);
  }

  // ------------------------------------------------------------------------------------------
  std::string Context(const Arm& arm, int p) const {
    return Cat("engine ", arm.recipe->name(), " [", arm.label, "] process ", p);
  }

  absl::StatusOr<LiveEngine*> StartEngine(const Arm& arm, int p) {
    if (IsCancelled()) return absl::CancelledError("engine runner: unit cancelled");
    std::string context = Context(arm, p);
    auto live = std::make_unique<LiveEngine>();
    live->arm = &arm;
    live->process_index = p;
    RecipeContext rc = context_;
    // Render once with a placeholder port to learn whether there is anything to start.
    rc.port = 1;
    ASSIGN_OR_RETURN(RenderedEngine probe, arm.recipe->Render(arm.params, rc));
    if (probe.launch.has_value()) {
      absl::StatusOr<int> port =
          options_.pick_port ? options_.pick_port(rc.host) : PickFreePort(rc.host);
      if (!port.ok()) return Annotate(port.status(), context);
      rc.port = *port;
      if (auto s = CheckPortFree(rc.host, rc.port); !s.ok()) {
        return Annotate(s, Cat(context, ": cannot start engine"));
      }
    }
    ASSIGN_OR_RETURN(live->rendered, arm.recipe->Render(arm.params, rc));
    live->port = live->rendered.launch.has_value() ? rc.port : 0;
    ClientOptions client_options;
    client_options.request_timeout = arm.settings.request_timeout;
    live->client = std::make_unique<EngineClient>(live->rendered.endpoints, client_options);

    Clock::time_point start = Clock::now();
    if (live->rendered.launch.has_value()) {
      ProcessOptions po = options_.process;
      po.probe_patterns = arm.settings.probe_patterns;
      if (!options_.log_dir.empty()) {
        po.log_file = Cat(options_.log_dir, "/attempt", unit_.attempt_id, "-unit", unit_.unit_id,
                          "-arm", arm.index, "-proc", p, ".log");
      }
      auto process = EngineProcess::Start(*live->rendered.launch, po);
      if (!process.ok()) return Annotate(process.status(), context);
      MutexLock lock(&mu_);
      live->process = std::move(*process);
    }
    LiveEngine* raw = live.get();
    {
      MutexLock lock(&mu_);
      live_.push_back(std::move(live));
    }

    // Wait until healthy, the process dies, the deadline passes or the unit is cancelled.
    Clock::time_point deadline = start + raw->rendered.start_timeout;
    absl::Status last = absl::UnavailableError("no health check yet");
    while (true) {
      if (IsCancelled()) return absl::CancelledError("engine runner: unit cancelled");
      if (raw->process) {
        if (auto exit = raw->process->Poll()) {
          return FailWithLog(
              *raw, -1,
              absl::UnavailableError(Cat(context, ": engine ", raw->process->DescribeExit(*exit),
                                         " before becoming healthy")));
        }
      }
      last = raw->client->Health(std::chrono::milliseconds(2000));
      if (last.ok()) break;
      if (Clock::now() >= deadline) {
        double seconds = std::chrono::duration<double>(raw->rendered.start_timeout).count();
        return FailWithLog(
            *raw, -1,
            absl::DeadlineExceededError(Cat(context, ": engine did not become healthy within ",
                                            seconds, " s at ", raw->rendered.endpoints.base_url,
                                            raw->rendered.endpoints.health_path,
                                            " (last: ", last.message(), ")")));
      }
      std::this_thread::sleep_for(options_.health_poll_interval);
    }
    if (raw->process) {
      if (auto exit = raw->process->Poll()) {
        return FailWithLog(
            *raw, -1,
            absl::UnavailableError(Cat(context, ": engine ", raw->process->DescribeExit(*exit),
                                       " right after a health check passed (is another "
                                       "server on port ",
                                       raw->port, "?)")));
      }
    }
    raw->start_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    auto version = raw->client->Version();
    raw->version = version.ok() ? *version : raw->rendered.engine_version;
    RETURN_IF_ERROR(CheckEngineConfig(*raw, context));
    return raw;
  }

  // Reads the running engine's own report of its configuration and compares it with what the
  // recipe expects (engine_config.h). A value that differs fails the arm, naming both, after
  // `engine_config` and `engine_config_mismatch` evidence for each of its cells: the engine
  // is not running the cell's configuration, so nothing it measured would be that cell's.
  absl::Status CheckEngineConfig(LiveEngine& engine, const std::string& context) {
    const RenderedEngine& re = engine.rendered;
    if (re.endpoints.config_path.empty()) return absl::OkStatus();
    nlohmann::json value = {{"path", re.endpoints.config_path}, {"expected", re.expected_config}};
    nlohmann::json report;
    absl::StatusOr<std::string> body =
        engine.client->Get(re.endpoints.config_path, std::chrono::seconds(10));
    if (!body.ok()) {
      value["error"] = std::string(body.status().message());
    } else {
      report = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
      if (report.is_discarded() || !report.is_object()) {
        value["error"] = Cat("not a JSON object: ", ToValidUtf8(body->substr(0, 120)));
        report = nullptr;
      }
    }
    // vLLM's "non-default args" line: what it parsed from the command line, beside what its
    // /v1/models says it serves.
    nlohmann::json logged;
    if (re.engine == "vllm" && engine.process) {
      const std::string line = engine.process->Evidence().non_default_args_line;
      if (line.empty()) {
        value["non_default_args"] = {{"error", "the log has no \"non-default args\" line"}};
      } else {
        absl::StatusOr<nlohmann::json> args = ParseVllmNonDefaultArgs(line);
        if (args.ok()) {
          logged = *args;
          value["non_default_args"] = logged;
        } else {
          value["non_default_args"] = {{"error", std::string(args.status().message())},
                                       {"line", line.substr(0, 400)}};
        }
      }
    }
    const nlohmann::json reported = ReportedConfig(re.engine, report, logged);
    const ConfigCheck check = CheckConfig(re.expected_config, reported);
    value["reported"] = reported;
    value["mismatches"] = check.mismatches;
    value["not_verifiable"] = check.not_verifiable;
    engine.config = value;
    if (check.ok()) return absl::OkStatus();
    std::vector<std::string> what;
    for (const auto& m : check.mismatches) {
      const nlohmann::json& want = m["expected"];
      std::string asked = want.dump();
      if (want.is_object() && want.contains("min") && want.contains("max")) {
        asked = want["min"] == want["max"] ? want["min"].dump()
                                           : Cat(want["min"].dump(), " to ", want["max"].dump());
      }
      what.push_back(Cat(m["name"].get<std::string>(), ": the cell asked ", asked,
                         ", the engine reports ", m["reported"].dump()));
    }
    for (int c : engine.arm->cells) {
      const int64_t id = unit_.cells[c].cell_id;
      RETURN_IF_ERROR(
          sink_.RecordEvidence(Evidence{id, engine.process_index, "engine_config", value}));
      RETURN_IF_ERROR(sink_.RecordEvidence(
          Evidence{id, engine.process_index, "engine_config_mismatch", check.mismatches}));
    }
    return FailWithLog(engine, -1,
                       absl::FailedPreconditionError(
                           Cat(context, ": the running engine's configuration is not the cell's (",
                               re.endpoints.config_path, "): ", absl::StrJoin(what, "; "), "; ",
                               ConfigMismatchHint(re.engine))));
  }

  // Untimed generations before the first measured one: a fresh engine process pays first-use
  // costs (kernel selection and loading, buffer growth, allocator warm-up) on its first requests
  // at each prompt length, which would otherwise land in the first round's short request. One
  // long generation per distinct depth of the arm's batch-1 cells (warmup: per_depth), one at
  // the smallest depth (once), or none. Load cells have their own warm-up requests.
  absl::Status Warm(LiveEngine& engine) {
    const Arm& arm = *engine.arm;
    if (arm.settings.warmup == Warmup::kNone) return absl::OkStatus();
    std::set<int> depths;
    for (int c : arm.cells) {
      const CellWork& cell = unit_.cells[c];
      if (HasLoadParams(cell.params)) continue;
      depths.insert(static_cast<int>(cell.params["depth"].get<int64_t>()));
    }
    if (arm.settings.warmup == Warmup::kOnce && depths.size() > 1) {
      depths.erase(std::next(depths.begin()), depths.end());
    }
    for (int depth : depths) {
      if (IsCancelled()) return absl::CancelledError("engine runner: unit cancelled");
      const uint64_t seed =
          MixSeed({unit_.seed, static_cast<uint64_t>(unit_.attempt_id),
                   0x7761726d7570ULL /* "warmup" */, static_cast<uint64_t>(arm.index),
                   static_cast<uint64_t>(engine.process_index), static_cast<uint64_t>(depth)});
      const auto started = Clock::now();
      auto gen = GenerateRetrying(engine, -1, -1, depth, seed, arm.settings.long_tokens);
      if (!gen.ok()) {
        return EngineFailure(engine, -1, gen.status(),
                             Cat(Context(arm, engine.process_index), ", warm-up at depth ", depth),
                             "during the warm-up");
      }
      engine.warmup_ms.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - started).count());
    }
    return absl::OkStatus();
  }

  // One timed generation of a fresh prompt of `depth` token IDs. A request the engine answers
  // with an error of its own (an HTTP error status, or an error event mid-stream: llama-server
  // b10309 fails any request whose output is not valid UTF-8, common/chat.cpp "The model
  // produced output that does not match the expected Content-only format") is sent again with
  // another fresh prompt, up to `request_retries` times, and each retry is `request_retried`
  // evidence of the cell (`cell` >= 0) with the engine's message: the timing of a request that
  // completed is unaffected by which random prompt it had. A failure of the transport, a
  // malformed reply or a dead engine is not retried.
  absl::StatusOr<GenerationResult> GenerateRetrying(LiveEngine& engine, int cell, int round,
                                                    int depth, uint64_t seed, int tokens) {
    const ArmSettings& s = engine.arm->settings;
    for (int attempt = 0;; ++attempt) {
      const uint64_t prompt_seed =
          attempt == 0
              ? seed
              : MixSeed({seed, 0x7265747279ULL /* "retry" */, static_cast<uint64_t>(attempt)});
      std::vector<int32_t> prompt = MakePrompt(depth, prompt_seed, s.token_id_min, s.token_id_max);
      absl::StatusOr<GenerationResult> gen = engine.client->Generate(prompt, tokens);
      if (gen.ok() || gen.status().code() != absl::StatusCode::kInternal ||
          attempt >= s.request_retries || IsCancelled()) {
        return gen;
      }
      if (engine.process && engine.process->Poll().has_value()) return gen;
      if (cell >= 0) {
        RETURN_IF_ERROR(
            sink_.RecordEvidence(Evidence{unit_.cells[cell].cell_id,
                                          engine.process_index,
                                          "request_retried",
                                          {{"round", round},
                                           {"attempt", attempt + 1},
                                           {"error", std::string(gen.status().message())}}}));
      }
    }
  }

  void StopAll() {
    std::vector<std::unique_ptr<LiveEngine>> engines;
    {
      MutexLock lock(&mu_);
      engines.swap(live_);
    }
    for (auto& e : engines) {
      if (e->process) e->process->Kill();
    }
  }

  // ------------------------------------------------------------------------------------------
  // Records the log tail for `cell` (when >= 0, else for every cell of the arm) and returns
  // `status`.
  absl::Status FailWithLog(LiveEngine& engine, int cell, absl::Status status) {
    if (IsCancelled()) return absl::CancelledError("engine runner: unit cancelled");
    std::vector<std::string> tail;
    if (engine.process) {
      if (!engine.process->Poll().has_value()) engine.process->Kill();
      tail = engine.process->LogTail();
    }
    std::vector<int> cells = cell >= 0 ? std::vector<int>{cell} : engine.arm->cells;
    for (int c : cells) {
      Evidence ev;
      ev.cell_id = unit_.cells[c].cell_id;
      ev.process = engine.process_index;
      ev.kind = "log_tail";
      ev.value = tail;
      (void)sink_.RecordEvidence(ev);  // best effort: the failure itself is what matters
      Evidence reason = ev;
      reason.kind = "failure";
      reason.value = std::string(status.message());
      (void)sink_.RecordEvidence(reason);
    }
    if (!tail.empty()) {
      std::vector<std::string> last(tail.end() - std::min<size_t>(tail.size(), 5), tail.end());
      return absl::Status(status.code(),
                          Cat(status.message(), "; last log lines: ", absl::StrJoin(last, " | ")));
    }
    return status;
  }

  // A request to `engine` failed with `status`: when the engine died, the failure names the
  // death ("exited with status 3 mid-cell", "... after reporting out of memory"), not the
  // socket; either way the log tail goes with it. `cell` as in FailWithLog.
  absl::Status EngineFailure(LiveEngine& engine, int cell, const absl::Status& status,
                             const std::string& context, std::string_view when) {
    if (engine.process) {
      // The socket can fail a little before the process is reaped.
      for (int i = 0; i < 20 && !engine.process->Poll().has_value(); ++i) {
        if (status.code() != absl::StatusCode::kUnavailable) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (auto exit = engine.process->Poll()) {
        return FailWithLog(
            engine, cell,
            absl::UnavailableError(
                Cat(context, ": engine ", engine.process->DescribeExit(*exit), " ", when)));
      }
    }
    return FailWithLog(engine, cell, Annotate(status, context));
  }

  absl::Status RecordMetric(int64_t cell_id, int p, int r, std::string metric, double value,
                            std::string unit) {
    Measurement m;
    m.cell_id = cell_id;
    m.process = p;
    m.round = r;
    m.metric = std::move(metric);
    m.value = value;
    m.unit = std::move(unit);
    return sink_.Record(m);
  }

  absl::Status TimedMeasureCell(LiveEngine& engine, int c, int p, int r) {
    const auto started = Clock::now();
    absl::Status status = MeasureCell(engine, c, p, r);
    engine.measure_us.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - started).count());
    return status;
  }

  // A load cell, one round: the requests LoadConfig describes, against the live engine; the
  // summary as metrics, the per-request rows as `load_requests` evidence.
  absl::Status MeasureLoadCell(LiveEngine& engine, int c, int p, int r) {
    const CellWork& cell = unit_.cells[c];
    const ArmSettings& s = engine.arm->settings;
    const int64_t id = cell.cell_id;
    std::string context = Cat(Context(*engine.arm, p), ", cell ", cell.key, ", round ", r);
    const uint64_t seed = MixSeed({unit_.seed, static_cast<uint64_t>(unit_.attempt_id),
                                   static_cast<uint64_t>(cell.cell_id), static_cast<uint64_t>(p),
                                   static_cast<uint64_t>(r)});
    ASSIGN_OR_RETURN(LoadConfig config, LoadConfigFromParams(cell.params, seed));
    auto send = [&](int index, int input_tokens, int output_tokens) {
      std::vector<int32_t> prompt =
          MakePrompt(input_tokens, MixSeed({seed, 0x72657175ULL, static_cast<uint64_t>(index)}),
                     s.token_id_min, s.token_id_max);
      return engine.client->Generate(prompt, output_tokens);
    };
    absl::StatusOr<std::vector<RequestRecord>> records =
        RunLoad(config, send, [this] { return IsCancelled(); });
    if (!records.ok()) {
      if (IsCancelled()) return absl::CancelledError("engine runner: unit cancelled");
      return Annotate(records.status(), context);
    }
    // A dead engine fails the cell; a few failed requests of a live one are part of the result.
    if (engine.process) {
      if (auto exit = engine.process->Poll()) {
        return FailWithLog(
            engine, c,
            absl::UnavailableError(
                Cat(context, ": engine ", engine.process->DescribeExit(*exit), " mid-cell")));
      }
    }
    LoadSummary sum = Summarize(config, *records);
    if (sum.measured == 0) {
      std::string first_error = "no measured request";
      for (const auto& rec : *records) {
        if (!rec.error.empty()) {
          first_error = rec.error;
          break;
        }
      }
      return FailWithLog(engine, c,
                         absl::UnavailableError(Cat(context, ": every measured request failed (",
                                                    sum.failed, "); first: ", first_error)));
    }
    // ttft_ms is every engine cell's required metric: a load cell's is its median TTFT.
    RETURN_IF_ERROR(RecordMetric(id, p, r, "ttft_ms", sum.ttft_ms_p50, "ms"));
    const std::pair<const char*, double> ms[] = {
        {"load_ttft_ms_p50", sum.ttft_ms_p50}, {"load_ttft_ms_p90", sum.ttft_ms_p90},
        {"load_ttft_ms_p99", sum.ttft_ms_p99}, {"load_itl_ms_p50", sum.itl_ms_p50},
        {"load_itl_ms_p90", sum.itl_ms_p90},   {"load_itl_ms_p99", sum.itl_ms_p99},
        {"load_e2e_ms_p50", sum.e2e_ms_p50},   {"load_e2e_ms_p90", sum.e2e_ms_p90},
        {"load_e2e_ms_p99", sum.e2e_ms_p99}};
    for (const auto& [metric, value] : ms)
      RETURN_IF_ERROR(RecordMetric(id, p, r, metric, value, "ms"));
    if (sum.window_s > 0) {
      RETURN_IF_ERROR(RecordMetric(id, p, r, "load_output_tok_s", sum.output_tok_s, "tok/s"));
      RETURN_IF_ERROR(RecordMetric(id, p, r, "load_req_s", sum.req_s, "req/s"));
      RETURN_IF_ERROR(RecordMetric(id, p, r, "load_drain_share", sum.drain_share, "1"));
    }
    if (sum.goodput_req_s.has_value()) {
      RETURN_IF_ERROR(RecordMetric(id, p, r, "load_goodput_req_s", *sum.goodput_req_s, "req/s"));
    }
    RETURN_IF_ERROR(RecordMetric(id, p, r, "load_requests", sum.measured, "1"));
    RETURN_IF_ERROR(RecordMetric(id, p, r, "load_failed_requests", sum.failed, "1"));
    // Evidence values are capped at 64 KiB by the store: the rows go in chunks.
    std::vector<nlohmann::json> chunks = RecordChunks(*records, 60 * 1024);
    for (size_t i = 0; i < chunks.size(); ++i) {
      nlohmann::json value = {{"round", r},
                              {"part", i},
                              {"parts", chunks.size()},
                              {"columns",
                               {"index", "warmup", "start_ms", "ttft_ms", "e2e_ms", "tokens_in",
                                "tokens_out", "itl_mean_ms", "itl_max_ms", "error"}},
                              {"rows", std::move(chunks[i])}};
      RETURN_IF_ERROR(sink_.RecordEvidence(Evidence{id, p, "load_requests", std::move(value)}));
    }
    return absl::OkStatus();
  }

  absl::Status MeasureCell(LiveEngine& engine, int c, int p, int r) {
    if (IsCancelled()) return absl::CancelledError("engine runner: unit cancelled");
    if (HasLoadParams(unit_.cells[c].params)) return MeasureLoadCell(engine, c, p, r);
    const CellWork& cell = unit_.cells[c];
    const ArmSettings& s = engine.arm->settings;
    const int depth = static_cast<int>(cell.params["depth"].get<int64_t>());
    std::string context = Cat(Context(*engine.arm, p), ", cell ", cell.key, ", round ", r);
    auto engine_error = [&](const absl::Status& status) -> absl::Status {
      return EngineFailure(engine, c, status, context, "mid-cell");
    };

    // Counters before and after the cell's two requests (a build without them: NotFound,
    // and the next source is used).
    const RenderedEngine& re = engine.rendered;
    auto read = [&](bool steps) -> absl::StatusOr<std::optional<SpecCounters>> {
      absl::StatusOr<SpecCounters> counters =
          steps ? engine.client->ReadSpecStepCounters(re.spec_step_counters)
                : engine.client->ReadSpecCounters(re.spec_metrics);
      if (counters.ok()) return std::optional<SpecCounters>(*counters);
      if (counters.status().code() == absl::StatusCode::kNotFound) {
        return std::optional<SpecCounters>();
      }
      return counters.status();
    };
    SpecReadings readings;
    if (re.spec_metrics.available()) {
      auto c = read(false);
      if (!c.ok()) return engine_error(c.status());
      readings.before = *c;
    }
    if (re.spec_step_counters.available()) {
      auto c = read(true);
      if (!c.ok()) return engine_error(c.status());
      readings.steps_before = *c;
    }
    auto prompt_seed = [&](int which) {
      return MixSeed({unit_.seed, static_cast<uint64_t>(unit_.attempt_id),
                      static_cast<uint64_t>(cell.cell_id), static_cast<uint64_t>(p),
                      static_cast<uint64_t>(r), static_cast<uint64_t>(which)});
    };
    auto short_gen = GenerateRetrying(engine, c, r, depth, prompt_seed(0), s.short_tokens);
    if (!short_gen.ok()) return engine_error(short_gen.status());
    if (IsCancelled()) return absl::CancelledError("engine runner: unit cancelled");
    auto long_gen = GenerateRetrying(engine, c, r, depth, prompt_seed(1), s.long_tokens);
    if (!long_gen.ok()) return engine_error(long_gen.status());
    if (readings.before.has_value()) {
      auto c = read(false);
      if (!c.ok()) return engine_error(c.status());
      readings.after = *c;
    }
    if (readings.steps_before.has_value()) {
      auto c = read(true);
      if (!c.ok()) return engine_error(c.status());
      readings.steps_after = *c;
    }

    const int64_t id = cell.cell_id;
    double dt_ms = long_gen->total_ms - short_gen->total_ms;
    int dtokens = long_gen->completion_tokens - short_gen->completion_tokens;
    if (dt_ms > 0 && dtokens > 0) {
      RETURN_IF_ERROR(RecordMetric(id, p, r, "decode_tok_s", dtokens / (dt_ms / 1000.0), "tok/s"));
    } else {
      Evidence note{id, p, "measurement_note",
                    Cat("round ", r, ": no decode rate: long - short = ", dtokens, " tokens in ",
                        dt_ms, " ms")};
      RETURN_IF_ERROR(sink_.RecordEvidence(note));
    }
    if (dt_ms > 0 && dtokens > 0) engine.differenced_rates[c].push_back(dtokens / (dt_ms / 1000.0));
    if (auto stream = StreamDecodeRate(*long_gen)) {
      RETURN_IF_ERROR(RecordMetric(id, p, r, "decode_tok_s_stream", *stream, "tok/s"));
      engine.stream_rates[c].push_back(*stream);
    }
    if (long_gen->engine_decode_tok_s.has_value() && *long_gen->engine_decode_tok_s > 0) {
      RETURN_IF_ERROR(
          RecordMetric(id, p, r, "engine_decode_tok_s", *long_gen->engine_decode_tok_s, "tok/s"));
    }
    // Where each request's time went, per round: what explains a slow request (time before the
    // first token, the engine's own prefill and decode times, the end of the stream).
    auto timing = [](const GenerationResult& g) {
      nlohmann::json t = {{"total_ms", g.total_ms},
                          {"ttft_ms", g.ttft_ms},
                          {"last_text_ms", g.last_text_ms},
                          {"tokens", g.completion_tokens}};
      if (g.engine_prompt_ms) t["engine_prompt_ms"] = *g.engine_prompt_ms;
      if (g.engine_predicted_ms) t["engine_predicted_ms"] = *g.engine_predicted_ms;
      return t;
    };
    RETURN_IF_ERROR(sink_.RecordEvidence(
        Evidence{id,
                 p,
                 "request_timings",
                 {{"round", r}, {"short", timing(*short_gen)}, {"long", timing(*long_gen)}}}));
    if (const int bad = short_gen->invalid_utf8_events + long_gen->invalid_utf8_events; bad > 0) {
      RETURN_IF_ERROR(sink_.RecordEvidence(Evidence{
          id, p, "engine_invalid_utf8",
          Cat("round ", r, ": ", bad,
              " streamed events carried bytes that are not UTF-8 (read with U+FFFD in their "
              "place; the timing is unaffected)")}));
    }
    RETURN_IF_ERROR(RecordMetric(id, p, r, "t_short_ms", short_gen->total_ms, "ms"));
    RETURN_IF_ERROR(RecordMetric(id, p, r, "t_long_ms", long_gen->total_ms, "ms"));
    RETURN_IF_ERROR(RecordMetric(id, p, r, "ttft_ms", long_gen->ttft_ms, "ms"));
    if (!long_gen->gaps_ms.empty()) {
      double sum = 0;
      for (double g : long_gen->gaps_ms) sum += g;
      RETURN_IF_ERROR(
          RecordMetric(id, p, r, "itl_ms_p50", Percentile(long_gen->gaps_ms, 50), "ms"));
      RETURN_IF_ERROR(
          RecordMetric(id, p, r, "itl_ms_p90", Percentile(long_gen->gaps_ms, 90), "ms"));
      RETURN_IF_ERROR(RecordMetric(id, p, r, "itl_ms_mean",
                                   sum / static_cast<double>(long_gen->gaps_ms.size()), "ms"));
    }
    RETURN_IF_ERROR(RecordAcceptance(engine, c, p, r, readings, *short_gen, *long_gen));
    for (const GenerationResult* g : {&*short_gen, &*long_gen}) {
      if (g->reported_prompt_tokens >= 0 && g->reported_prompt_tokens != depth) {
        Evidence ev{id,
                    p,
                    "prompt_tokens_mismatch",
                    {{"sent", depth}, {"reported", g->reported_prompt_tokens}, {"round", r}}};
        RETURN_IF_ERROR(sink_.RecordEvidence(ev));
        break;
      }
    }
    if (!short_gen->usage_reported || !long_gen->usage_reported) {
      Evidence ev{id, p, "measurement_note",
                  "engine reported no usage; completion tokens assumed equal to max_tokens"};
      RETURN_IF_ERROR(sink_.RecordEvidence(ev));
    }
    return absl::OkStatus();
  }

  // Acceptance for one cell-round, with one definition across engines: acceptance_rate =
  // accepted / drafted tokens, mean_acceptance_length = 1 + accepted / drafts (tokens per
  // verify step, the bonus token included). From the best source the engine has, recorded as
  // `acceptance_source` evidence:
  //   metrics        counter deltas around the two requests (vLLM; llama.cpp from #26389)
  //   timings        the requests' own counts (llama.cpp `timings`: absent = none drafted)
  //   spec_details   the requests' own counts (SGLang sglext.spec_tokens_details)
  //   verify_steps   SGLang's verify-step and generated-token counters: the mean acceptance
  //                  length only (no drafted-token count exists there)
  // Never SGLang's windowed gauges. The speculation state is checked both ways: a speculation
  // cell that drafted nothing gets `speculation_not_engaged`; a cell with speculation off whose
  // engine drafted fails (its numbers are not a spec-off measurement).
  absl::Status RecordAcceptance(LiveEngine& engine, int c, int p, int r,
                                const SpecReadings& readings, const GenerationResult& short_gen,
                                const GenerationResult& long_gen) {
    const RenderedEngine& re = engine.rendered;
    const int64_t id = unit_.cells[c].cell_id;
    std::optional<double> drafts, draft_tokens, accepted;
    std::string source;
    const auto both = [&](auto field) -> std::optional<double> {
      if (!(long_gen.*field).has_value() && !(short_gen.*field).has_value()) return std::nullopt;
      return (long_gen.*field).value_or(0) + (short_gen.*field).value_or(0);
    };
    const bool counters_went_back =
        readings.before.has_value() && readings.after.has_value() &&
        (readings.after->num_drafts < readings.before->num_drafts ||
         readings.after->num_draft_tokens < readings.before->num_draft_tokens ||
         readings.after->num_accepted_tokens < readings.before->num_accepted_tokens);
    if (counters_went_back) {
      // A counter that went down was reset (the engine restarted its metrics): its delta is no
      // count, and a negative one is out of every count's range.
      RETURN_IF_ERROR(sink_.RecordEvidence(
          Evidence{id, p, "measurement_note",
                   Cat("round ", r,
                       ": the speculation counters went backwards; no acceptance "
                       "from them this round")}));
    } else if (readings.before.has_value() && readings.after.has_value()) {
      source = "metrics";
      drafts = readings.after->num_drafts - readings.before->num_drafts;
      draft_tokens = readings.after->num_draft_tokens - readings.before->num_draft_tokens;
      accepted = readings.after->num_accepted_tokens - readings.before->num_accepted_tokens;
    } else if (re.draft_timings == DraftTimings::kLlamaCppTimings) {
      source = "timings";
      draft_tokens = both(&GenerationResult::draft_tokens).value_or(0);
      accepted = both(&GenerationResult::accepted_tokens).value_or(0);
    } else if (re.draft_timings == DraftTimings::kSglangSpecDetails &&
               both(&GenerationResult::verify_steps).has_value()) {
      source = "spec_details";
      drafts = both(&GenerationResult::verify_steps);
      draft_tokens = both(&GenerationResult::draft_tokens);
      accepted = both(&GenerationResult::accepted_tokens);
    } else if (re.spec_k > 0 && readings.steps_before.has_value() &&
               readings.steps_after.has_value()) {
      source = "verify_steps";
      const double steps = readings.steps_after->num_drafts - readings.steps_before->num_drafts;
      const double generated =
          readings.steps_after->num_accepted_tokens - readings.steps_before->num_accepted_tokens;
      drafts = steps;
      // Each request's first token is sampled at prefill, not by a verify step: the cell's two
      // requests add two tokens no step produced.
      constexpr double kRequestsPerCellRound = 2;
      if (steps > 0 && generated >= kRequestsPerCellRound) {
        RETURN_IF_ERROR(RecordMetric(id, p, r, "spec_drafts", steps, "1"));
        RETURN_IF_ERROR(RecordMetric(id, p, r, "mean_acceptance_length",
                                     (generated - kRequestsPerCellRound) / steps, "tok"));
      }
      draft_tokens = steps > 0 ? std::optional<double>() : std::optional<double>(0.0);
    }
    if (source != "verify_steps") {
      if (drafts) RETURN_IF_ERROR(RecordMetric(id, p, r, "spec_drafts", *drafts, "1"));
      if (draft_tokens) {
        RETURN_IF_ERROR(RecordMetric(id, p, r, "spec_draft_tokens", *draft_tokens, "1"));
      }
      if (accepted) RETURN_IF_ERROR(RecordMetric(id, p, r, "spec_accepted_tokens", *accepted, "1"));
      if (draft_tokens && accepted && *draft_tokens > 0) {
        RETURN_IF_ERROR(RecordMetric(id, p, r, "acceptance_rate", *accepted / *draft_tokens, "1"));
      }
      if (drafts && accepted && *drafts > 0) {
        RETURN_IF_ERROR(
            RecordMetric(id, p, r, "mean_acceptance_length", 1.0 + *accepted / *drafts, "tok"));
      }
    }
    if (r == 0) {
      if (!source.empty()) {
        RETURN_IF_ERROR(sink_.RecordEvidence(Evidence{id, p, "acceptance_source", source}));
      } else if (re.spec_k > 0) {
        // Whether the engine drafted at all cannot be told: "not verifiable", never zero. The
        // report shows it as a flag on the cell.
        RETURN_IF_ERROR(sink_.RecordEvidence(
            Evidence{id, p, "speculation_not_verifiable",
                     Cat(re.engine,
                         " reported no per-request or per-cell speculation counts: whether "
                         "this cell drafted is not verifiable")}));
        RETURN_IF_ERROR(sink_.RecordEvidence(Evidence{
            id,
            p,
            "acceptance_source",
            {{"source", nullptr},
             {"reason", Cat(re.engine,
                            " gave no per-request speculation counts and no counters that cover "
                            "exactly this cell; no acceptance is recorded (never a windowed "
                            "gauge)")}}}));
      }
    }
    // Tokens drafted in this cell-round, where a source says; a count of verify steps alone
    // says drafting happened.
    std::optional<double> drafted = draft_tokens;
    if (!drafted.has_value() && drafts.has_value()) drafted = *drafts;
    if (re.spec_k > 0 && drafted.has_value() && *drafted <= 0) {
      RETURN_IF_ERROR(sink_.RecordEvidence(
          Evidence{id, p, "speculation_not_engaged",
                   Cat("round ", r, ": spec_k=", re.spec_k, " but the engine drafted no tokens (",
                       source, "); it ran the target model alone")}));
    }
    if (re.spec_k == 0 && drafted.has_value() && *drafted > 0) {
      Evidence ev{id, p, "speculation_while_off",
                  Cat("round ", r, ": speculation is off in this cell but the engine drafted ",
                      *drafted, " tokens (", source, ")")};
      RETURN_IF_ERROR(sink_.RecordEvidence(ev));
      return FailWithLog(
          engine, c,
          absl::FailedPreconditionError(
              Cat(Context(*engine.arm, p), ", cell ", unit_.cells[c].key, ", round ", r,
                  ": speculation is off but the engine drafted ", *drafted, " tokens (", source,
                  "): not a spec-off measurement; pin it off (llama.cpp: a build with --spec-type "
                  "none, or extra_args) or check the engine's defaults")));
    }
    return absl::OkStatus();
  }

  absl::Status RecordProcessEvidence(LiveEngine& engine) {
    LogEvidence log;
    if (engine.process) log = engine.process->Evidence();
    const RenderedEngine& re = engine.rendered;
    nlohmann::json backend = {
        {"requested", re.requested_backend}, {"backends", log.backends}, {"forced", log.forced}};
    nlohmann::json mismatch = nullptr;
    if (!re.requested_backend.empty() && (!log.backends.empty() || !log.forced.empty())) {
      std::string want = NormalizeBackend(re.requested_backend);
      bool seen = false;
      for (const auto& b : log.backends) seen = seen || NormalizeBackend(b) == want;
      bool forced_other = false;
      for (const auto& f : log.forced) forced_other = forced_other || NormalizeBackend(f) != want;
      mismatch = !seen || forced_other;
    } else if (re.requested_backend.empty()) {
      mismatch = false;  // nothing was asked for: whatever the engine chose is not a mismatch
    }
    // The backend the server's configuration report names (SGLang /get_server_info, vLLM's
    // non-default args): SGLang replaces a requested backend without a line the log scan reads
    // (an MLA model's own choice), and its report says which one it kept.
    if (engine.config.is_object() && engine.config.contains("reported") &&
        engine.config["reported"].is_object() &&
        engine.config["reported"].contains("attention_backend") &&
        engine.config["reported"]["attention_backend"].is_string()) {
      const std::string configured = engine.config["reported"]["attention_backend"];
      backend["configured"] = configured;
      if (!re.requested_backend.empty()) {
        const bool differs = NormalizeBackend(configured) != NormalizeBackend(re.requested_backend);
        mismatch = (mismatch.is_boolean() && mismatch.get<bool>()) || differs;
      }
    }
    bool restartable = re.restartability == Restartability::kRestartable;
    nlohmann::json process_info = {{"engine", re.engine},
                                   {"restartable", restartable},
                                   {"base_url", re.endpoints.base_url},
                                   {"start_ms", engine.start_ms},
                                   {"start_us", engine.start_ms * 1000.0},
                                   {"measure_us", engine.measure_us},
                                   {"warmup_ms", engine.warmup_ms},
                                   {"spec_k", re.spec_k}};
    if (!re.ignored_spec_model.empty()) {
      process_info["spec_model_ignored"] = re.ignored_spec_model;  // speculation off
    }
    if (re.spec_off_pinned) process_info["spec_off_pinned"] = true;
    if (!re.rendered_from.empty()) process_info["rendered_from"] = re.rendered_from;
    if (!re.pinned.empty()) process_info["pinned"] = re.pinned;
    if (!re.render_notes.empty()) process_info["notes"] = re.render_notes;
    if (re.launch.has_value()) {
      // The agent's variables that did not reach the engine (LLAMA_ARG_*), and those of the
      // engine's own that did (VLLM_*, SGLANG_*): either can change what it runs.
      nlohmann::json dropped = nlohmann::json::array();
      nlohmann::json inherited = nlohmann::json::object();
      const std::vector<std::string> child = ChildEnvironment(*re.launch, environ);
      for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        std::string_view entry(*e);
        std::string key(entry.substr(0, entry.find('=')));
        for (const std::string& prefix : re.launch->env_unset_prefixes) {
          if (key.rfind(prefix, 0) == 0 &&
              std::find(child.begin(), child.end(), std::string(entry)) == child.end()) {
            dropped.push_back(key);
          }
        }
        for (const std::string& prefix : re.recorded_env_prefixes) {
          if (key.rfind(prefix, 0) == 0 && entry.size() > key.size()) {
            inherited[key] = ToValidUtf8(entry.substr(key.size() + 1));
          }
        }
      }
      if (!dropped.empty()) process_info["env_dropped"] = dropped;
      if (!inherited.empty()) process_info["env_inherited"] = inherited;
    }
    if (re.launch.has_value()) {
      process_info["argv"] = re.launch->argv;
      nlohmann::json env = nlohmann::json::object();
      for (const auto& [k, v] : re.launch->env) env[k] = v;
      process_info["env"] = env;
      process_info["pid"] = engine.process ? engine.process->pid() : 0;
      process_info["port"] = engine.port;
      process_info["log_lines"] = log.lines;
    } else {
      process_info["note"] =
          "external server: the runner cannot restart it, so process replicates share one "
          "server and its log is not visible";
    }
    for (int c : engine.arm->cells) {
      const int64_t id = unit_.cells[c].cell_id;
      const int p = engine.process_index;
      RETURN_IF_ERROR(RecordDecodeRateCheck(engine, c));
      RETURN_IF_ERROR(sink_.RecordEvidence(Evidence{id, p, "engine_backend", backend}));
      RETURN_IF_ERROR(sink_.RecordEvidence(Evidence{id, p, "backend_mismatch", mismatch}));
      if (engine.process) {
        RETURN_IF_ERROR(sink_.RecordEvidence(Evidence{id, p, "probe_counts", log.probe_counts}));
      }
      RETURN_IF_ERROR(sink_.RecordEvidence(Evidence{id, p, "engine_version", engine.version}));
      if (auto probe = probes_.find(re.engine); probe != probes_.end()) {
        RETURN_IF_ERROR(
            sink_.RecordEvidence(Evidence{id, p, "engine_version_detected", probe->second}));
      }
      if (auto caps = capability_probes_.find(re.engine); caps != capability_probes_.end()) {
        RETURN_IF_ERROR(sink_.RecordEvidence(Evidence{id, p, "engine_capabilities", caps->second}));
      }
      if (!engine.config.is_null()) {
        RETURN_IF_ERROR(sink_.RecordEvidence(Evidence{id, p, "engine_config", engine.config}));
      }
      RETURN_IF_ERROR(sink_.RecordEvidence(Evidence{id, p, "engine_process", process_info}));
      RETURN_IF_ERROR(sink_.RecordEvidence(Evidence{id, p, "restartable", restartable}));
    }
    return absl::OkStatus();
  }

  // The differenced decode rate holds only while the two requests differ in nothing but their
  // length; the streamed rate is the tokens' own arrival. Where the two disagree by more than
  // their spread across rounds (or the difference gave no rate in some rounds), the cell gets
  // `decode_rate_disagreement` evidence with both.
  absl::Status RecordDecodeRateCheck(const LiveEngine& engine, int c) {
    auto find = [](const std::map<int, std::vector<double>>& m, int key) {
      auto it = m.find(key);
      return it == m.end() ? std::vector<double>{} : it->second;
    };
    const std::vector<double> diff = find(engine.differenced_rates, c);
    const std::vector<double> stream = find(engine.stream_rates, c);
    if (stream.empty()) return absl::OkStatus();
    const double diff_median = diff.empty() ? 0 : Median(diff);
    const double stream_median = Median(stream);
    const double spread = std::max(StdDev(diff), StdDev(stream));
    const bool missing = diff.size() < stream.size();
    const bool apart = !diff.empty() && std::abs(diff_median - stream_median) > 2 * spread &&
                       std::abs(diff_median - stream_median) > 0.02 * stream_median;
    if (!missing && !apart) return absl::OkStatus();
    nlohmann::json value = {{"differenced_median_tok_s", diff_median},
                            {"stream_median_tok_s", stream_median},
                            {"differenced_rounds", diff.size()},
                            {"stream_rounds", stream.size()},
                            {"spread_tok_s", spread},
                            {"reason", missing ? "the difference gave no rate in some rounds"
                                               : "medians apart by more than twice the spread"}};
    return sink_.RecordEvidence(Evidence{unit_.cells[c].cell_id, engine.process_index,
                                         "decode_rate_disagreement", std::move(value)});
  }

  // ------------------------------------------------------------------------------------------
  bool IsCancelled() {
    if (cancelled_) return true;
    if (sink_.Cancelled()) cancelled_ = true;
    return cancelled_;
  }

  void Watchdog() {
    MutexLock lock(&mu_);
    while (!finished_) {
      mu_.WaitUntil(cv_, std::chrono::steady_clock::now() + std::chrono::milliseconds(100),
                    [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
                      return finished_;  // called with mu_ held
                    });
      if (finished_) break;
      if (sink_.Cancelled()) {
        cancelled_ = true;
        for (auto& e : live_) {
          if (e->process) e->process->Kill();
        }
      }
    }
  }

  const EngineRunnerOptions& options_;
  EngineRunner::DetectedVersions& versions_;
  RecipeContext context_;  // the agent's, plus the versions detected for this unit's engines
  std::map<std::string, nlohmann::json> probes_;  // engine -> {"version"} or {"error"}
  // engine -> {"source", "options"} or {"error"}: how its --help was read.
  std::map<std::string, nlohmann::json> capability_probes_;
  const UnitWork& unit_;
  MeasurementSink& sink_;
  std::vector<Arm> arms_;  // stable after BuildArms (LiveEngine points into it)
  Residency residency_ = Residency::kTogether;

  Mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<LiveEngine>> live_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> cancelled_{false};
  std::thread watchdog_;
};

}  // namespace

absl::Status CheckEngineCell(const nlohmann::json& params, const Recipe* recipe,
                             const RecipeContext& context) {
  if (!params.is_object() || !params.contains("engine") || !params["engine"].is_string()) {
    return runner::ParamError("engine", "engine runner: parameter 'engine' (a string) is required");
  }
  const std::string engine = params["engine"].get<std::string>();
  if (recipe == nullptr) {
    absl::StatusOr<const Recipe*> found = FindBuiltinRecipe(engine);
    if (!found.ok()) return runner::ParamError("engine", ToStd(found.status().message()));
    recipe = *found;
  }
  RETURN_IF_ERROR(ValidateParams(*recipe, params));
  RecipeContext placeholder = context;
  placeholder.port = 1;
  RETURN_IF_ERROR(recipe->Render(params, placeholder).status());
  RETURN_IF_ERROR(ReadSettings(params, engine).status());
  RETURN_IF_ERROR(ReadResidency(params, engine).status());
  if (HasLoadParams(params)) RETURN_IF_ERROR(LoadConfigFromParams(params, 0).status());
  return absl::OkStatus();
}

EngineRunner::EngineRunner(EngineRunnerOptions options)
    : options_(std::move(options)), versions_(std::make_shared<DetectedVersions>()) {}
EngineRunner::~EngineRunner() = default;

absl::Status EngineRunner::Run(const runner::UnitWork& unit, runner::MeasurementSink& sink) {
  UnitRun run(options_, *versions_, unit, sink);
  return run.Run();
}

}  // namespace ladder::engines
