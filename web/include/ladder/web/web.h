// The coordinator's web pages and Prometheus endpoint: a small read-only application served
// from the coordinator's own process, state and database. No second process, no build step, no
// network: every page and script is embedded in the binary.
//
//   /                runs: state, progress, ETA and why a run waits (live)
//   /runs/ID         one run, live, with its failed cells and its results (the report library's
//                    page, marked provisional until the run is done)
//   /compare?a=&b=   two runs side by side, as `ladder compare` and `ladder report A B` show them
//   /fleet           sessions: host, GPUs, driver and versions, labels, state, attempts
//   /sessions/ID     one session's attempts
//   /api/...         the JSON the pages read (runs, runs/ID, sessions, sessions/ID/attempts)
//   /metrics         Prometheus' text format (docs/metrics.md)
//
// Security as on the gRPC port: beyond loopback it needs TLS (the coordinator's certificate)
// and an admin token on every request, as `Authorization: Bearer TOKEN` or the cookie that
// `?token=TOKEN` sets. On loopback a token is needed only where the coordinator requires one.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ladder/coordinator/coordinator.h"

namespace ladder::web {

struct WebOptions {
  std::string listen;         // HOST:PORT, or PORT alone for 127.0.0.1:PORT; port 0 picks one
  bool metrics_only = false;  // serve /metrics and nothing else
  std::string tls_cert_file, tls_key_file;  // PEM; required beyond loopback unless `insecure`
  bool insecure = false;                    // allow plaintext beyond loopback (behind a tunnel)
};

class WebServer {
 public:
  // Binds and serves on a thread of its own; `coordinator` must outlive the server.
  static absl::StatusOr<std::unique_ptr<WebServer>> Start(const WebOptions& options,
                                                          coordinator::Coordinator* coordinator);
  ~WebServer();  // stops serving
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  int port() const;
  // "http://127.0.0.1:PORT/" (https for TLS): what to open in a browser.
  std::string url() const;

 private:
  struct Impl;
  explicit WebServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ladder::web
