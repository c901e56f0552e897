// The agent's `engine` runner: measures served inference engines by depth differencing.
//
// For one unit:
//   1. Every cell's parameters are validated against its recipe (params["engine"]); the
//      installed version of vllm / sglang / llama.cpp is probed once (VersionDetection) and
//      recorded per cell as `engine_version_detected` evidence.
//   2. Cells are grouped into arms: cells whose parameters are equal except the request shape
//      (`depth` and the load parameters: concurrency, request_rate, ...) share an arm and so one
//      engine process (a duplicated arm, e.g. an A/A control with identical parameters, stays
//      separate).
//   3. For each process index p < unit.processes, each arm gets one engine process (fresh port,
//      own process group), started once and reused for all of its depths and rounds.
//      Arm residency (parameter `arm_residency`):
//        together        all arms' engines run at once; each round visits all cells of the unit
//                        in `order(cells, seed, p, round)`, so arms are interleaved within a
//                        round (the runner contract). Default for synthetic and external.
//        one_at_a_time   one engine at a time (a GPU holds one model): arms run in a seeded
//                        order per process, and each round visits that arm's cells in the order
//                        the unit order gives them. Default for vllm, sglang and llama.cpp.
//      An engine is killed (its whole process group, waiting until it is gone, so its GPU
//      memory is free) before the next one starts, and when the unit ends, fails or is
//      cancelled.
//   4. A cell at depth d, in one round: read the speculation counters; a streamed greedy
//      completion of a fresh seeded prompt of exactly d token IDs for short_tokens (8), then
//      another fresh prompt for long_tokens (64); read the counters again. Recorded metrics:
//        decode_tok_s   (long - short tokens) / (t_long - t_short)                   tok/s
//        t_short_ms, t_long_ms                                                       ms
//        ttft_ms        time to first token of the long request                      ms
//        itl_ms_p50, itl_ms_p90, itl_ms_mean   gaps between streamed chunks (long)   ms
//        spec_drafts, spec_draft_tokens, spec_accepted_tokens   counter deltas       1
//        acceptance_rate          accepted / drafted tokens                          1
//        mean_acceptance_length   1 + accepted / drafts                              tok
//      (acceptance metrics only where the engine reports them: RecordAcceptance's sources.)
//      A load cell (concurrency or request_rate, load.h) sends its requests instead and records
//      ttft_ms (the median) and the load_* metrics, plus `load_requests` evidence rows.
//   5. Evidence per (cell, process), after the process's rounds: engine_backend (backends the
//      log named, forced backends, the requested one), backend_mismatch (true/false; null when
//      the log named no backend), probe_counts (per configured pattern, for that engine process),
//      engine_version, engine_process (argv, port, pid, restartable) and restartable (false for
//      external servers). On a failure, log_tail (the last 200 lines) for the failing cell.
//
// Errors: a failed unit returns a non-ok status whose message names the engine, the arm, the
// process index and what happened ("exited with status 3", "did not become healthy within 60 s",
// "malformed JSON from engine ...", "port 8000 on 127.0.0.1 is already in use"). Parameter
// errors are InvalidArgument; cancellation is Cancelled.
//
// Threads: Run is called from one thread at a time. While it runs, a watchdog thread polls
// sink.Cancelled() every 100 ms and kills the unit's engines when it turns true, so an
// in-flight request ends promptly; MeasurementSink::Cancelled must therefore be thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/engines/process.h"
#include "ladder/engines/recipe.h"
#include "ladder/runner/runner.h"

namespace ladder::engines {

// Whether the runner asks vllm, sglang and llama.cpp for their installed version (their
// `--version`, engine_version.h) before rendering, so that the recipe spells flags for that
// build. A cell's `engine_version` parameter skips the probe.
enum class VersionDetection { kProbe, kOff };

struct EngineRunnerOptions {
  // Executables, bind host and engine versions. Its `port` is ignored (chosen per engine).
  RecipeContext recipe_context;
  // Recipes consulted before the built-ins, by name (tests add fakes; a site can add engines).
  std::vector<std::shared_ptr<const Recipe>> extra_recipes;
  // Chooses an engine's port; empty: PickFreePort. Tests inject a taken port.
  std::function<absl::StatusOr<int>(const std::string& host)> pick_port;
  ProcessOptions process;  // probe_patterns is replaced by the cell's `probe_patterns` if given
  std::chrono::milliseconds health_poll_interval{200};
  VersionDetection version_detection = VersionDetection::kProbe;
  std::chrono::milliseconds version_timeout{120'000};  // `vllm --version` imports torch
  // Engines that run one at a time (a GPU holds one model) hold this mutex from their start to
  // their stop, when set: the agents of one process (`ladder local` runs one per session on one
  // machine) then take turns on the device an engine process at a time, so that no timed
  // request shares the GPU with another agent's engine. Not owned; outlives the runner.
  std::mutex* device_turn = nullptr;
  // When non-empty, each engine's full log is written to
  // <log_dir>/attempt<A>-unit<U>-arm<I>-proc<P>.log.
  std::string log_dir;
};

// Everything the runner checks about one cell before any engine starts, in the order it checks
// it: the recipe exists (`recipe`, else the built-in named by params["engine"]), the parameters
// have the recipe's names and types, the recipe renders them (with `context`: a placeholder
// port; `ladder validate` passes no engine versions, so the newest spelling is assumed), and the
// runner's own settings (short/long tokens, request timeout, token ids, warm-up, arm residency,
// load configuration) hold. InvalidArgument naming the parameter (runner::ParamOf) otherwise.
// `ladder validate`, the coordinator's Submit and the agent call this, so they refuse the same
// cells; only a cell that needs a newer engine build than the agent has (known at run time
// from its `--version`) can pass here and be refused by the agent.
absl::Status CheckEngineCell(const nlohmann::json& params, const Recipe* recipe = nullptr,
                             const RecipeContext& context = {});

class EngineRunner final : public runner::Runner {
 public:
  explicit EngineRunner(EngineRunnerOptions options = {});
  ~EngineRunner() override;

  std::string_view name() const override { return "engine"; }
  absl::Status Run(const runner::UnitWork& unit, runner::MeasurementSink& sink) override;

  // Versions detected once per engine for the runner's lifetime (an agent's engines do not
  // change under it), shared with each unit's run. Defined in engine_runner.cc.
  struct DetectedVersions;

 private:
  EngineRunnerOptions options_;
  std::shared_ptr<DetectedVersions> versions_;
};

}  // namespace ladder::engines
