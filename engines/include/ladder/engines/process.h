// The engine process supervisor: starts an engine in its own process group, captures its
// output, scans it for evidence, and kills the whole group.
//
// Output: the child's stdout and stderr go to one pipe, read by a thread owned by the
// EngineProcess. Lines are kept in a ring buffer of the last `tail_lines` lines (each truncated
// to 4 KiB) and scanned as they arrive:
//   - attention backend lines and forcing lines, as ParseBackendLine reads them;
//   - probe patterns: literal substrings, each occurrence on a line counted once per line;
//   - out-of-memory markers ("out of memory", "OutOfMemoryError", "OOM");
//   - vLLM's "non-default args: {...}" line (the arguments it parsed, engine_config.h).
//
// Lifetime: the destructor kills the group (SIGTERM, then SIGKILL after the grace period) and
// joins the reader. Kill is idempotent and noexcept. The child gets PR_SET_PDEATHSIG=SIGKILL,
// so an agent that dies does not leave engines holding GPU memory.
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/engines/recipe.h"

namespace ladder::engines {

struct ProcessOptions {
  std::vector<std::string> probe_patterns = {"PROBE_3D_SPEC_ACTIVE"};
  size_t tail_lines = 200;
  std::chrono::milliseconds kill_grace{10'000};  // SIGTERM -> SIGKILL
  // When set, every output line is also appended to this file (created, truncated).
  std::string log_file;
  // When set, the child's stdout goes to this file (created, truncated, mode 0600) instead of
  // the pipe, byte for byte; only its stderr is scanned and kept in the tail. For programs whose
  // stdout is a document to parse (the command runner), not a log.
  std::string stdout_file;
};

// What the log has shown so far.
struct LogEvidence {
  std::vector<std::string> backends;  // distinct names from "Using ... backend", in order seen
  std::vector<std::string> forced;    // distinct names from "Forcing ..." lines
  std::map<std::string, int64_t> probe_counts;  // every configured pattern, 0 when unseen
  bool out_of_memory = false;
  int64_t lines = 0;
  // vLLM's "non-default args: {...}" line (vllm/entrypoints/utils.py, log_non_default_args),
  // the first one seen, as printed (UTF-8 made valid); "" when none was.
  std::string non_default_args_line;
};

struct ExitInfo {
  bool signaled = false;
  int code = 0;                  // exit status, or the signal number when signaled
  std::string Describe() const;  // "exited with status 3" / "killed by signal 9 (Killed)"
};

class EngineProcess {
 public:
  // Forks and execs `spec`. Fails (Internal/NotFound) when the pipe or fork fails or the
  // program cannot be executed (the exec error is reported, e.g. "No such file or directory").
  static absl::StatusOr<std::unique_ptr<EngineProcess>> Start(const LaunchSpec& spec,
                                                              const ProcessOptions& options);

  ~EngineProcess();
  EngineProcess(const EngineProcess&) = delete;
  EngineProcess& operator=(const EngineProcess&) = delete;

  int pid() const;

  // nullopt while the process runs; its exit once it has ended (reaps it).
  std::optional<ExitInfo> Poll();

  // Kills the process group: SIGTERM, then SIGKILL after the grace period; waits until the
  // group is gone (bounded) so that its GPU memory is released. Safe to call repeatedly.
  void Kill() noexcept;

  LogEvidence Evidence() const;
  std::vector<std::string> LogTail() const;

  // A one-line reason for a dead process: its exit, plus "out of memory" when the log said so.
  std::string DescribeExit(const ExitInfo& info) const;

  class Impl;

 private:
  explicit EngineProcess(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What one log line says about the attention backend. The forms recognised, each confirmed in
// the engine's source (docs/engines.md has the table):
//   vLLM >= 0.11, its own choice   "Using FLASH_ATTN attention backend out of potential ..."
//   vLLM, a requested backend      "Using AttentionBackendEnum.TRITON_ATTN backend."
//   vLLM < 0.11                    "Using Flash Attention backend on V1 engine." -> FLASH_ATTN
//   SGLang, its own choice         "... Use flashinfer backend by default."      -> flashinfer
//   the synthetic engine           "Using TRITON_ATTN backend."
//   an override                    "Forcing TRITON_ATTN ..." (upper-case names only)
// Other "Using ... backend" lines (MoE, prefill, sampler backends) yield nothing.
struct BackendLine {
  std::string backend;  // "" when the line names no attention backend
  std::string forced;   // "" when the line forces none
};
BackendLine ParseBackendLine(std::string_view line);

// The environment a child started from `spec` gets: `parent` (a null-terminated environ array)
// without spec.env_unset, without names that start with one of spec.env_unset_prefixes, and
// without the names spec.env sets; then spec.env, in its order. Pure; EngineProcess::Start uses
// it.
std::vector<std::string> ChildEnvironment(const LaunchSpec& spec, const char* const* parent);

// Returns a TCP port on `host` that is free now (bound to port 0 and released). Another program
// may take it before the engine binds it; the runner checks the engine really serves it.
absl::StatusOr<int> PickFreePort(const std::string& host);

// OK when nothing listens on host:port and it can be bound; FailedPrecondition otherwise.
absl::Status CheckPortFree(const std::string& host, int port);

}  // namespace ladder::engines
