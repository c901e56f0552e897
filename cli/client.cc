#include "client.h"

#include <unistd.h>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "commands.h"
#include "exit_codes.h"
#include "format.h"
#include "ladder/proto/tls.h"

namespace ladder::cli {
namespace {

absl::Status FromGrpc(const grpc::Status& status, const std::string& address) {
  if (status.ok()) return absl::OkStatus();
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      status.error_message().find("coordinator is shutting down") == std::string::npos) {
    return absl::UnavailableError(absl::StrCat(
        "cannot reach the coordinator at ", address, " (", status.error_message(),
        "); is `ladder coordinator` running? Set --coordinator or LADDER_COORDINATOR"));
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

template <typename Request, typename Response, typename Method>
absl::StatusOr<Response> Call(v1::AdminService::Stub& stub, const std::string& address,
                              Method method, const Request& request, int timeout_s = 30,
                              const std::string& token = "") {
  grpc::ClientContext context;
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(timeout_s));
  Response response;
  grpc::Status status = (stub.*method)(&context, request, &response);
  if (!status.ok()) return FromGrpc(status, address);
  return response;
}

}  // namespace

AdminClient::AdminClient(const ClientOptions& options)
    : address_(options.address), token_(options.token) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  // An unreadable or empty CA file is bad input, never a silent fall back to the system roots.
  proto::ClientTls tls;
  tls.enabled = options.tls;
  tls.ca_file = options.tls_ca_file;
  auto credentials = proto::MakeChannelCredentials(tls);
  if (!credentials.ok()) Fail(credentials.status(), ExitCode::kBadInput);
  stub_ = v1::AdminService::NewStub(grpc::CreateCustomChannel(address_, *credentials, args));
}

void AdminClient::Authorize(grpc::ClientContext& context) const {
  if (!token_.empty()) context.AddMetadata("authorization", "Bearer " + token_);
}

absl::StatusOr<v1::CreateTokenResponse> AdminClient::CreateToken(const std::string& role,
                                                                 const std::string& description,
                                                                 int64_t expires_in_ms) {
  v1::CreateTokenRequest request;
  request.set_role(role);
  request.set_description(description);
  request.set_expires_in_ms(expires_in_ms);
  return Call<v1::CreateTokenRequest, v1::CreateTokenResponse>(
      *stub_, address_, &v1::AdminService::Stub::CreateToken, request, 30, token_);
}

absl::StatusOr<v1::ListTokensResponse> AdminClient::ListTokens() {
  return Call<v1::ListTokensRequest, v1::ListTokensResponse>(
      *stub_, address_, &v1::AdminService::Stub::ListTokens, v1::ListTokensRequest(), 30, token_);
}

absl::Status AdminClient::RevokeToken(const std::string& id) {
  v1::RevokeTokenRequest request;
  request.set_id(id);
  auto response = Call<v1::RevokeTokenRequest, v1::RevokeTokenResponse>(
      *stub_, address_, &v1::AdminService::Stub::RevokeToken, request, 30, token_);
  return response.status();
}

absl::StatusOr<v1::ValidateResponse> AdminClient::Validate(const std::string& yaml,
                                                           const std::string& filename,
                                                           int64_t max_cells) {
  v1::ValidateRequest request;
  request.set_yaml(yaml);
  request.set_filename(filename);
  request.set_max_cells(max_cells);
  return Call<v1::ValidateRequest, v1::ValidateResponse>(
      *stub_, address_, &v1::AdminService::Stub::Validate, request, 30, token_);
}

absl::StatusOr<v1::SubmitResponse> AdminClient::Submit(const std::string& yaml,
                                                       const std::string& filename,
                                                       int64_t max_cells, const db::RunTags& tags) {
  v1::SubmitRequest request;
  request.set_yaml(yaml);
  request.set_filename(filename);
  request.set_max_cells(max_cells);
  for (const auto& [key, value] : tags) (*request.mutable_tags())[key] = value;
  return Call<v1::SubmitRequest, v1::SubmitResponse>(
      *stub_, address_, &v1::AdminService::Stub::Submit, request, 120, token_);
}

absl::StatusOr<v1::RunSummary> AdminClient::GetRun(int64_t run_id) {
  v1::GetRunRequest request;
  request.set_run_id(run_id);
  return Call<v1::GetRunRequest, v1::RunSummary>(*stub_, address_, &v1::AdminService::Stub::GetRun,
                                                 request, 30, token_);
}

absl::StatusOr<v1::ListRunsResponse> AdminClient::ListRuns(int limit) {
  v1::ListRunsRequest request;
  request.set_limit(limit);
  return Call<v1::ListRunsRequest, v1::ListRunsResponse>(
      *stub_, address_, &v1::AdminService::Stub::ListRuns, request, 30, token_);
}

absl::StatusOr<v1::RunSummary> AdminClient::Cancel(int64_t run_id) {
  v1::CancelRunRequest request;
  request.set_run_id(run_id);
  auto response = Call<v1::CancelRunRequest, v1::CancelRunResponse>(
      *stub_, address_, &v1::AdminService::Stub::CancelRun, request, 30, token_);
  if (!response.ok()) return response.status();
  return response->run();
}

absl::StatusOr<v1::ListSessionsResponse> AdminClient::ListSessions() {
  return Call<v1::ListSessionsRequest, v1::ListSessionsResponse>(
      *stub_, address_, &v1::AdminService::Stub::ListSessions, v1::ListSessionsRequest(), 30,
      token_);
}

absl::StatusOr<nlohmann::json> AdminClient::Query(int64_t run_id,
                                                  const std::vector<std::string>& by,
                                                  const std::string& metric) {
  v1::QueryRequest request;
  request.set_run_id(run_id);
  for (const auto& b : by) request.add_by(b);
  request.set_metric(metric);
  auto response = Call<v1::QueryRequest, v1::QueryResponse>(
      *stub_, address_, &v1::AdminService::Stub::Query, request, 30, token_);
  if (!response.ok()) return response.status();
  auto parsed = nlohmann::json::parse(response->result_json(), nullptr, false);
  if (parsed.is_discarded()) return absl::InternalError("coordinator sent malformed query JSON");
  return parsed;
}

absl::StatusOr<v1::RunSummary> WatchUntilDone(AdminClient& client, int64_t run_id, bool quiet,
                                              const std::atomic<bool>* interrupted) {
  const bool tty = isatty(STDERR_FILENO) == 1;
  v1::RunSummary last;
  bool have_last = false;
  int reconnects = 0;
  while (!(interrupted && interrupted->load())) {
    grpc::ClientContext context;
    client.Authorize(context);
    v1::WatchRunRequest request;
    request.set_run_id(run_id);
    auto reader = client.stub().WatchRun(&context, request);
    v1::RunSummary summary;
    std::string previous_line;
    std::string previous_reason;
    while (reader->Read(&summary)) {
      reconnects = 0;
      last = summary;
      have_last = true;
      if (!quiet && summary.waiting_reason() != previous_reason) {
        // Once per change, on a line of its own: why the queued units are not moving.
        previous_reason = summary.waiting_reason();
        if (!previous_reason.empty()) {
          std::cerr << (tty ? "\r\033[K" : "") << "run " << run_id << ": " << previous_reason
                    << "\n";
        }
      }
      if (!quiet) {
        std::string line = ProgressLine(
            summary.units_done(), summary.units_total(), summary.units_leased(),
            summary.units_queued(), summary.units_failed(), summary.eta_seconds(), TerminalWidth());
        if (tty) {
          std::cerr << "\r" << line << "\033[K" << std::flush;
        } else if (line != previous_line) {
          std::cerr << line << "\n";
        }
        previous_line = line;
      }
      if (interrupted && interrupted->load()) context.TryCancel();
    }
    grpc::Status status = reader->Finish();
    if (!quiet && tty) std::cerr << "\n";
    if (have_last && (last.state() == "done" || last.state() == "cancelled")) return last;
    if (status.ok()) continue;
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      return absl::NotFoundError(status.error_message());
    }
    if (status.error_code() == grpc::StatusCode::CANCELLED) break;
    // The coordinator restarted or the network dropped: keep watching.
    if (++reconnects > 120) {
      return absl::UnavailableError("lost the coordinator for two minutes: " +
                                    status.error_message());
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  if (have_last) return last;
  return absl::CancelledError("interrupted");
}

ClientOptions ClientFlags::Options() const {
  ClientOptions options;
  options.address = coordinator.empty() ? DefaultCoordinator() : coordinator;
  options.tls = tls;
  options.tls_ca_file = tls_ca;
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) Fail("--token-file: cannot read " + token_file, ExitCode::kBadInput);
    std::getline(in, options.token);
  } else if (const char* env = std::getenv("LADDER_TOKEN"); env && *env) {
    options.token = env;
  }
  while (!options.token.empty() && (options.token.back() == '\r' || options.token.back() == ' ')) {
    options.token.pop_back();
  }
  return options;
}

void AddClientFlags(CLI::App* cmd, ClientFlags& flags) {
  flags.coordinator = DefaultCoordinator();
  cmd->add_option("--coordinator", flags.coordinator,
                  "coordinator HOST:PORT (default: $LADDER_COORDINATOR or 127.0.0.1:7400)")
      ->capture_default_str();
  cmd->add_option("--token-file", flags.token_file,
                  "file holding an admin token (default: $LADDER_TOKEN)");
  cmd->add_option("--tls-ca", flags.tls_ca, "PEM CA to verify the coordinator's certificate");
  cmd->add_flag("--tls", flags.tls, "use TLS with the system's CA roots");
}

db::RunTags TagFlags::Parse() const {
  db::RunTags out;
  for (const auto& flag : tags) {
    if (auto s = db::AddTagFlag(flag, &out); !s.ok()) Fail(s, ExitCode::kBadInput);
  }
  if (!note.empty()) {
    if (out.count("note")) Fail("--note and --tag note=... both given", ExitCode::kBadInput);
    out.emplace("note", note);
  }
  if (auto s = db::ValidateRunTags(out); !s.ok()) Fail(s, ExitCode::kBadInput);
  return out;
}

void AddTagFlags(CLI::App* cmd, TagFlags& flags) {
  cmd->add_option("--tag", flags.tags,
                  "KEY=VALUE stored with the run (repeatable), e.g. --tag build=abc123: what "
                  "distinguishes it in `ladder history` (key: letters, digits, _ . -)");
  cmd->add_option("--note", flags.note, "a free note stored with the run (the tag `note`)");
}

}  // namespace ladder::cli
