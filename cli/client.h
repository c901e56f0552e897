// A thin synchronous client of the coordinator's admin service, for the CLI.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "ladder/db/series.h"
#include "ladder/v1/admin.grpc.pb.h"

namespace ladder::cli {

struct ClientOptions {
  std::string address;
  std::string token;  // admin token, sent as `authorization: Bearer ...`
  bool tls = false;
  std::string tls_ca_file;  // PEM roots; implies tls
};

class AdminClient {
 public:
  explicit AdminClient(const std::string& address) : AdminClient(PlainOptions(address)) {}
  // Opens a channel (no RPC yet). Leaves the CLI with ExitCode::kBadInput when a TLS file
  // cannot be read.
  explicit AdminClient(const ClientOptions& options);

  absl::StatusOr<v1::ValidateResponse> Validate(const std::string& yaml,
                                                const std::string& filename, int64_t max_cells);
  absl::StatusOr<v1::SubmitResponse> Submit(const std::string& yaml, const std::string& filename,
                                            int64_t max_cells, const db::RunTags& tags = {});
  absl::StatusOr<v1::RunSummary> GetRun(int64_t run_id);
  absl::StatusOr<v1::ListRunsResponse> ListRuns(int limit);
  absl::StatusOr<v1::RunSummary> Cancel(int64_t run_id);
  absl::StatusOr<v1::ListSessionsResponse> ListSessions();
  absl::StatusOr<nlohmann::json> Query(int64_t run_id, const std::vector<std::string>& by,
                                       const std::string& metric);
  absl::StatusOr<v1::CreateTokenResponse> CreateToken(const std::string& role,
                                                      const std::string& description,
                                                      int64_t expires_in_ms);
  absl::StatusOr<v1::ListTokensResponse> ListTokens();
  absl::Status RevokeToken(const std::string& id);
  v1::AdminService::Stub& stub() { return *stub_; }
  // Adds the token to a context (for streaming calls made through stub()).
  void Authorize(grpc::ClientContext& context) const;
  const std::string& address() const { return address_; }

 private:
  static ClientOptions PlainOptions(const std::string& address) {
    ClientOptions options;
    options.address = address;
    return options;
  }
  std::string address_;
  std::string token_;
  std::unique_ptr<v1::AdminService::Stub> stub_;
};

// Follows a run with WatchRun until it is done or cancelled, drawing a progress bar on stderr
// (unless quiet). Returns the final summary. Stops early when *interrupted becomes true.
absl::StatusOr<v1::RunSummary> WatchUntilDone(AdminClient& client, int64_t run_id, bool quiet,
                                              const std::atomic<bool>* interrupted);

// The flags every client command shares: where the coordinator is and how to prove who we are.
struct ClientFlags {
  std::string coordinator;
  std::string token_file;  // else $LADDER_TOKEN
  std::string tls_ca;
  bool tls = false;
  // Reads the token; fails the command (exit 2) when the file cannot be read.
  ClientOptions Options() const;
};
void AddClientFlags(CLI::App* cmd, ClientFlags& flags);

// `--tag KEY=VALUE` (repeatable) and `--note TEXT` of submit and local: what distinguishes the run
// in its matrix's history (db/series.h).
struct TagFlags {
  std::vector<std::string> tags;
  std::string note;
  // The tags, "note" included; fails the command (exit 2) with the reason when one is refused.
  db::RunTags Parse() const;
};
void AddTagFlags(CLI::App* cmd, TagFlags& flags);

}  // namespace ladder::cli
