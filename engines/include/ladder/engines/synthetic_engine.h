// The synthetic engine: an OpenAI-compatible completions server whose model is random weights
// in a real model's shapes, with attention through ladder::kernels and its path policy.
//
// It exists so that the engine runner's whole path (process, health, completions, streaming,
// metrics, log evidence, faults) runs and is tested on machines without model weights, and so
// that the study's mechanism (speculation's second query row moving attention from the 3D to
// the 2D path) can be reproduced at model scale.
//
// HTTP API (all JSON unless stated):
//   POST /v1/completions  {"prompt": [token ids] | "text", "max_tokens": N, "stream": bool,
//                          "stream_options": {"include_usage": bool}, ...}; other OpenAI
//                          fields (temperature, ignore_eos, model) are accepted and ignored:
//                          decoding is always greedy and never stops early (ignore_eos).
//                          A string prompt counts one token per whitespace-separated word.
//   GET  /health          200 "OK" once the model is built
//   GET  /metrics         Prometheus text: vllm:spec_decode_num_drafts_total,
//                          vllm:spec_decode_num_draft_tokens_total,
//                          vllm:spec_decode_num_accepted_tokens_total (vLLM's names),
//                          vllm:prompt_tokens_total, vllm:generation_tokens_total and
//                          ladder:attention_calls_total{model,layer,path,q_rows}
//   GET  /v1/models, GET /version
//
// Model and cost: see docs/engines.md. In short, a decode step runs every layer (RMSNorm, Q/K/V
// and output projections, attention through kernels::RunAttention with the configured policy,
// gated MLP) and the tied LM head with greedy argmax. Prefill is approximated: the KV cache is
// filled with random values up to the prompt's depth instead of being computed. Speculation
// (spec_k > 0) costs what it costs in an engine: the drafter runs k single-row steps, the target
// verifies k+1 query rows in one step, and a seeded draw with the configured acceptance rate
// decides how many drafts are accepted (the tokens themselves are the target's argmax).
//
// Log (one line each, to the log callback, default stderr): "Using <NAME> backend" at start
// (preceded by "Forcing <NAME> ..." with force_backend), and the path of attention calls:
// a line containing PROBE_3D_SPEC_ACTIVE when the 3D path serves more than one query row,
// ATTN_PATH otherwise (log_paths: once per distinct (model, layer kind, path, rows); every
// call; or none).
//
// Thread safety: requests are served concurrently but generate one at a time (batch 1).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ladder::engines {

struct SyntheticEngineOptions {
  std::string preset = "tiny";  // SyntheticPresetNames()
  std::string host = "127.0.0.1";
  int port = 0;                   // 0: any free port (see SyntheticEngine::port())
  std::string policy = "legacy";  // kernels path policy: "legacy" (vLLM's gate) | "spec-aware"
  int spec_k = 0;                 // drafted tokens per step; 0: no speculation
  // Acceptance probability of each drafted token: a constant ("0.7") or a piecewise-linear
  // function of context depth ("1024:0.46,32768:0.12"), clamped outside its points.
  std::string acceptance = "0.7";
  uint64_t seed = 0;                                      // weights, KV fill and acceptance draws
  std::string attention_backend = "LADDER_UNIFIED_ATTN";  // the name logged as "Using ..."
  std::string force_backend;       // when set: logs "Forcing NAME" and uses NAME instead
  std::string log_paths = "once";  // "once" | "every" | "none"
  int threads = 1;                 // CPU attention worker threads
  // Continuous batching: up to this many requests decode together, one step for all of them
  // (each weight read once per step); 1 serves one request at a time.
  int max_batch = 64;
  // "cpu" | "cuda" | "auto": auto runs on the GPU when the binary was built with LADDER_CUDA
  // and a device is present, else on the CPU; "cuda" without one fails Start (Unavailable).
  std::string device = "auto";
  // The CUDA model's projections for steps of up to 4 rows: "gemv" (its own matrix-vector
  // kernel) or "cublas" (cuBLAS's GEMM, as for wider steps). The CPU model ignores it.
  std::string projection = "gemv";
  // Faults, for tests of the runner's failure paths (-1: off).
  int crash_after_requests = -1;  // exit(3) midway through completion request N+1
  int oom_after_requests = -1;    // log a CUDA out-of-memory error, exit(1), request N+1
  bool malformed = false;         // completions answer with invalid JSON
  int stall_request = -1;         // completion request N (0-based) waits stall_ms first
  int stall_ms = 0;               // ... before it is scheduled: the others go on meanwhile
  // Every decode step takes this much longer (percent of its own time): a planted slowdown, the
  // "slower build" of an A/B whose answer is known (docs/statistics.md, "Two runs on one host").
  int slow_steps_percent = 0;

  // InvalidArgument naming the offending field.
  absl::Status Validate() const;
};

std::vector<std::string> SyntheticPresetNames();

// A running synthetic engine (model built, HTTP server listening on its own thread).
class SyntheticEngine {
 public:
  using LogFn = std::function<void(std::string_view line)>;

  // Builds the model, binds host:port and starts serving. Errors: InvalidArgument for bad
  // options, FailedPrecondition when the port cannot be bound ("... already in use").
  // `log` receives every log line (default: stderr, flushed per line). `on_fatal` runs when
  // a crash/oom fault fires (default: std::_Exit with the fault's status).
  static absl::StatusOr<std::unique_ptr<SyntheticEngine>> Start(
      const SyntheticEngineOptions& options, LogFn log = nullptr,
      std::function<void(int status)> on_fatal = nullptr);

  ~SyntheticEngine();  // Stop()s
  SyntheticEngine(const SyntheticEngine&) = delete;
  SyntheticEngine& operator=(const SyntheticEngine&) = delete;

  int port() const;
  // Stops serving and joins the server thread. Idempotent, noexcept.
  void Stop() noexcept;

  class Impl;

 private:
  explicit SyntheticEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Runs the engine until SIGTERM or SIGINT (the process entry of `ladder engine synthetic`).
// Blocks those signals in the calling thread before starting the server, so call it from the
// main thread before other threads exist. Returns the Start error, or OK after a signal.
absl::Status RunSyntheticEngine(const SyntheticEngineOptions& options);

}  // namespace ladder::engines
