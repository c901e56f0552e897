// The agent process: one per host. It opens a session with its inventory, pulls units from the
// coordinator, runs them with the runner each unit names, and reports every result from its
// spool until the coordinator acknowledges it.
//
// Durability: a measurement is written to the spool (SQLite) before the runner continues; it
// leaves the spool only when the coordinator says it is stored. A coordinator that cannot be
// reached makes the agent finish its current unit, keep the results, and retry with backoff.
//
// Lifecycle: Run() blocks until Stop() (from a signal-watching thread) or until the coordinator
// refuses the agent's credentials. Stop(kRelease) abandons the current unit and releases it to
// the coordinator; Stop(kFinishUnit) lets the current unit finish first (a preemption grace).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/agent/inventory.h"
#include "ladder/runner/runner.h"

namespace ladder::agent {

struct AgentOptions {
  std::string coordinator = "127.0.0.1:7400";
  std::string spool_path;  // default: ./ladder-spool.db
  std::map<std::string, std::string> labels;
  int lease_wait_ms = 10000;  // long poll per Lease call
  int report_batch = 500;     // results per Report call
  int max_backoff_ms = 30000;
  int units_limit = 0;  // exit after this many units (0: no limit); for tests
  // `ladder agent --grace finish`: how long after the signal the agent may take to deliver
  // what its last unit produced (every result and the unit's finish acknowledged) before it
  // releases its session and exits. The clouds' preemption notices: GCP 30 s, AWS 120 s.
  int grace_seconds = 30;
  bool exit_when_idle = false;  // exit when a lease poll comes back empty; for `local`
  // `--gpus 0,1`: the host's devices this agent uses, as nvidia-smi / rocm-smi number them; the
  // agent and every process it starts see only those (DetectInventory). Empty: all of them.
  std::string gpus;
  std::string fake_gpus_json;  // test hook: replaces detected GPUs (JSON array)
  std::string ladder_binary;   // runs `ladder engine synthetic`; default /proc/self/exe
  std::string engine_log_dir;  // full engine logs go here when set
  // `--bench NAME=PATH` (repeatable) and `--bench-file FILE`: the programs `runner: command`
  // cells may run, and nothing else (command::BenchRegistry checks them at Create: a bad one is
  // InvalidArgument). Each is advertised as the feature "bench:NAME".
  std::vector<std::string> benches;
  std::vector<std::string> bench_files;
  // Security: the join token is read from a file (never the command line, never logged).
  std::string token_file;
  bool tls = false;           // TLS with the system's roots (implied by tls_ca_file)
  std::string tls_ca_file;    // PEM roots to verify the coordinator with
  std::string tls_cert_file;  // client certificate for mutual TLS
  std::string tls_key_file;
  absl::Status Validate() const;
};

enum class StopMode { kRelease, kFinishUnit };

// What a spool file holds, per session: results and attempt endings not yet acknowledged by a
// coordinator (`ladder agent --spool-status`). A table, or JSON when `json`.
absl::StatusOr<std::string> DescribeSpool(const std::string& spool_path, bool json);

class Agent {
 public:
  static absl::StatusOr<std::unique_ptr<Agent>> Create(const AgentOptions& options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  absl::Status Run();
  void Stop(StopMode mode) noexcept;
  const std::string& session_id() const;

  // The names of the programs registered with --bench / --bench-file, sorted.
  std::vector<std::string> bench_names() const;

  // Adds or replaces a runner (the kernel runner is built in).
  void AddRunner(std::unique_ptr<runner::Runner> runner);

 private:
  struct Impl;
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Generates a random RFC 4122 version 4 UUID.
std::string NewUuid();

}  // namespace ladder::agent
