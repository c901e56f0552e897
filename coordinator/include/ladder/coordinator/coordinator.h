// The coordinator process: the gRPC agent and admin services over one Scheduler and one Store,
// plus a reaper thread that expires leases. It is the only writer of the results database.
//
// Lifecycle: Start() binds, loads state and serves; Shutdown() is idempotent and noexcept: it
// stops accepting calls, wakes long polls, drains in-flight calls and joins the reaper.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/coordinator/scheduler.h"
#include "ladder/v1/admin.pb.h"

namespace ladder::coordinator {

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:7400";  // host:port; port 0 picks a free port
  std::string db_path = "results.db";
  SchedulerOptions scheduler;
  int heartbeat_interval_ms = 5000;  // told to agents at registration
  int max_lease_wait_ms = 20000;     // cap on an agent's long poll
  int max_message_bytes = 16 << 20;
  int reaper_interval_ms = 500;

  // Security. A listener on a non-loopback address requires TLS (unless `insecure`) and always
  // requires tokens; `require_tokens` turns tokens on for loopback too.
  std::string tls_cert_file;       // PEM server certificate chain
  std::string tls_key_file;        // PEM private key
  std::string tls_client_ca_file;  // PEM CA: when set, clients must present a certificate (mTLS)
  bool insecure = false;           // allow plaintext beyond loopback (behind a tunnel)
  bool require_tokens = false;
  double session_calls_per_second = 200;        // per-session rate limit (0: none)
  int max_report_records = 20000;               // per Report call
  int64_t max_queued_report_records = 1000000;  // reports waiting for the writer; more: busy

  int64_t fault_db_growth_pages = 0;  // tests only: simulate a full disk after this growth
  // The one time source of the coordinator (leases, sessions, tokens). nullptr: the system
  // clock. Must outlive the coordinator.
  const Clock* clock = nullptr;

  bool IsLoopback() const;

  absl::Status Validate() const;
};

class Coordinator {
 public:
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(const CoordinatorOptions& options);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // The bound port (useful when listening on port 0).
  int port() const;
  std::string address() const;
  const std::string& db_path() const;

  // What the web pages and /metrics read (web/), in-process: the admin service's answers (a run
  // with its ETA and waiting reason, recent runs, sessions) without a gRPC hop.
  absl::StatusOr<v1::RunSummary> GetRun(int64_t run_id);
  absl::StatusOr<v1::ListRunsResponse> ListRuns(int limit);
  absl::StatusOr<v1::ListSessionsResponse> ListSessions();
  // OK for a valid admin token; without one only when neither this coordinator nor the caller
  // (`required`: a listener beyond loopback) asks for tokens. UNAUTHENTICATED / PERMISSION_DENIED.
  absl::Status CheckAdminToken(const std::string& token, bool required);
  // Prometheus' text format (0.0.4): RPCs, ingest, store commits, refusals, revocations, and
  // sessions / units / runs by state (docs/web.md).
  std::string MetricsText();

  // Blocks until Shutdown() is called from another thread.
  void Wait();
  void Shutdown() noexcept;

 private:
  struct Impl;
  explicit Coordinator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ladder::coordinator
