// A thin synchronous client of the coordinator's admin service, for the CLI.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "ladder/v1/admin.grpc.pb.h"

namespace ladder::cli {

class AdminClient {
 public:
  explicit AdminClient(const std::string& address);

  absl::StatusOr<v1::ValidateResponse> Validate(const std::string& yaml,
                                                const std::string& filename, int64_t max_cells);
  absl::StatusOr<v1::SubmitResponse> Submit(const std::string& yaml, const std::string& filename,
                                            int64_t max_cells);
  absl::StatusOr<v1::RunSummary> GetRun(int64_t run_id);
  absl::StatusOr<v1::ListRunsResponse> ListRuns(int limit);
  absl::StatusOr<v1::RunSummary> Cancel(int64_t run_id);
  absl::StatusOr<v1::ListSessionsResponse> ListSessions();
  absl::StatusOr<nlohmann::json> Query(int64_t run_id, const std::vector<std::string>& by,
                                       const std::string& metric);
  v1::AdminService::Stub& stub() { return *stub_; }
  const std::string& address() const { return address_; }

 private:
  std::string address_;
  std::unique_ptr<v1::AdminService::Stub> stub_;
};

// Follows a run with WatchRun until it is done or cancelled, drawing a progress bar on stderr
// (unless quiet). Returns the final summary. Stops early when *interrupted becomes true.
absl::StatusOr<v1::RunSummary> WatchUntilDone(AdminClient& client, int64_t run_id, bool quiet,
                                              const std::atomic<bool>* interrupted);

std::vector<std::string> SplitCsv(const std::string& text);

}  // namespace ladder::cli
