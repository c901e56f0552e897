#include "ladder/engines/synthetic_engine_cli.h"

namespace ladder::engines {

void AddSyntheticEngineFlags(CLI::App& app, SyntheticEngineOptions& o) {
  app.add_option("--preset", o.preset, "Model shapes: tiny (CPU tests) or gemma4-31b")
      ->capture_default_str();
  app.add_option("--host", o.host, "Address to bind")->capture_default_str();
  app.add_option("--port", o.port, "Port to bind; 0 picks a free one")->capture_default_str();
  app.add_option("--policy", o.policy,
                 "Attention path policy: legacy (3D only for one query row, as vLLM ships) or "
                 "spec-aware (3D also for speculative verification)")
      ->check(CLI::IsMember({"legacy", "spec-aware"}))
      ->capture_default_str();
  app.add_option("--spec-k", o.spec_k, "Drafted tokens per step; 0 turns speculation off")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
  app.add_option("--acceptance", o.acceptance,
                 "Acceptance probability per drafted token: RATE, or DEPTH:RATE,DEPTH:RATE,... "
                 "interpolated linearly in depth")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of weights, KV fill and acceptance draws")
      ->capture_default_str();
  app.add_option("--attention-backend", o.attention_backend,
                 "Backend name to log as 'Using NAME backend'")
      ->capture_default_str();
  app.add_option("--force-backend", o.force_backend,
                 "Log 'Forcing NAME' and use NAME whatever --attention-backend says");
  app.add_option("--log-paths", o.log_paths,
                 "Log attention paths: once per distinct kind, every call, or none")
      ->check(CLI::IsMember({"once", "every", "none"}))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "CPU attention threads")->capture_default_str();
  app.add_option("--max-batch", o.max_batch,
                 "Requests decoded together in one step (continuous batching); 1: one at a time")
      ->capture_default_str();
  app.add_option("--device", o.device,
                 "Where the model runs: cpu (fp32 weights shared per layer kind), cuda (bf16 "
                 "weights per layer on the GPU, cuBLAS projections, device-resident attention) "
                 "or auto (cuda when this binary has it and a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  app.add_option("--projection", o.projection,
                 "CUDA model, steps of up to 4 rows: gemv (its own matrix-vector kernel, one "
                 "pass over each weight) or cublas (cuBLAS's GEMM, as for wider steps)")
      ->check(CLI::IsMember({"gemv", "cublas"}))
      ->capture_default_str();
  app.add_option("--crash-after-requests", o.crash_after_requests,
                 "Fault: exit midway through the completion request after N requests");
  app.add_option("--oom-after-requests", o.oom_after_requests,
                 "Fault: log a CUDA out-of-memory error and exit after N requests");
  app.add_flag("--malformed", o.malformed, "Fault: answer completions with invalid JSON");
  app.add_option("--stall-request", o.stall_request,
                 "Fault: completion request N (0-based) waits --stall-ms before being scheduled");
  app.add_option("--stall-ms", o.stall_ms, "Fault: how long --stall-request waits");
  app.add_option("--slow-steps-percent", o.slow_steps_percent,
                 "Fault: every decode step spins this much longer (percent of its own time), "
                 "a planted slowdown for A/B designs whose answer is known");
}

}  // namespace ladder::engines
