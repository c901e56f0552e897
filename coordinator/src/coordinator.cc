#include "ladder/coordinator/coordinator.h"
#include "ladder/coordinator/wire.h"
#include "metrics.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/support/server_interceptor.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent_calls.h"
#include "auth.h"
#include "ladder/db/json_rule.h"
#include "ladder/db/query.h"
#include "ladder/db/store.h"
#include "ladder/db/tokens.h"
#include "ladder/proto/tls.h"
#include "ladder/runner/schema.h"
#include "ladder/status_macros.h"
#include "ladder/v1/admin.grpc.pb.h"
#include "ladder/v1/agent.grpc.pb.h"
#include "text.h"

namespace ladder::coordinator {
namespace {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  if (db::IsDatabaseError(status)) {
    // The coordinator's own database failed: the caller learns that and whether to retry, the
    // log gets the SQL. A read-only or unopenable file is not the caller's permission problem
    // (agents stop for good on PERMISSION_DENIED), so it reads as unavailable.
    spdlog::error("database: {}", std::string(status.message()));
    switch (status.code()) {
      case absl::StatusCode::kResourceExhausted:
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "the coordinator cannot store more now (disk full?); retry later");
      case absl::StatusCode::kUnavailable:
      case absl::StatusCode::kPermissionDenied:
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "the coordinator's database is unavailable; retry later");
      default:
        return grpc::Status(grpc::StatusCode::INTERNAL,
                            "the coordinator's database failed (see its log); retry later");
    }
  }
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

// ReleaseRequest.reason: longer is truncated with a marker (agent.proto).
constexpr size_t kMaxReleaseReasonBytes = 1024;
// HeartbeatRequest.attempt_ids: an agent works on a handful of attempts at a time.
constexpr int kMaxHeartbeatAttempts = 1024;

bool IsName(std::string_view name, size_t max, std::string_view extra) {
  if (name.empty() || name.size() > max) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                    extra.find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

bool IsSessionId(std::string_view id) {
  if (id.size() < 8 || id.size() > 64) return false;
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) {
      return false;
    }
  }
  return true;
}

// The bounds of the wire contract (proto/ladder/v1/agent.proto) on what a host says it is.
absl::Status CheckInventory(const v1::Inventory& inv) {
  RETURN_IF_ERROR(CheckText("inventory.hostname", inv.hostname(), 253, TextRequired::kYes));
  RETURN_IF_ERROR(CheckText("inventory.machine_id", inv.machine_id(), 128));
  RETURN_IF_ERROR(CheckText("inventory.boot_id", inv.boot_id(), 128));
  RETURN_IF_ERROR(CheckText("inventory.cloud_instance_id", inv.cloud_instance_id(), 256));
  RETURN_IF_ERROR(CheckText("inventory.cpu_model", inv.cpu_model(), 256));
  RETURN_IF_ERROR(CheckText("inventory.agent_version", inv.agent_version(), 64));
  if (inv.cpu_cores() < 0 || inv.cpu_cores() > 65536) {
    return absl::InvalidArgumentError("inventory.cpu_cores must be in 0..65536");
  }
  if (inv.memory_mib() < 0) return absl::InvalidArgumentError("inventory.memory_mib must be >= 0");
  if (inv.gpus_size() > 64) return absl::InvalidArgumentError("inventory.gpus: at most 64");
  for (int i = 0; i < inv.gpus_size(); ++i) {
    const auto& g = inv.gpus(i);
    const std::string at = absl::StrCat("inventory.gpus[", i, "]");
    RETURN_IF_ERROR(CheckText(at + ".vendor", g.vendor(), 64));
    RETURN_IF_ERROR(CheckText(at + ".name", g.name(), 256));
    RETURN_IF_ERROR(CheckText(at + ".arch", g.arch(), 64));
    RETURN_IF_ERROR(CheckText(at + ".uuid", g.uuid(), 128));
    RETURN_IF_ERROR(CheckText(at + ".driver", g.driver(), 128));
    if (g.memory_mib() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".memory_mib must be >= 0"));
    }
  }
  if (inv.gpu_links_size() > 64 * 63 / 2) {
    return absl::InvalidArgumentError("inventory.gpu_links: at most 2016");
  }
  std::set<std::pair<int, int>> linked;
  for (int i = 0; i < inv.gpu_links_size(); ++i) {
    const auto& l = inv.gpu_links(i);
    const std::string at = absl::StrCat("inventory.gpu_links[", i, "]");
    if (l.a() < 0 || l.a() >= l.b() || l.b() >= inv.gpus_size()) {
      return absl::InvalidArgumentError(absl::StrCat(at, ": expected 0 <= a < b < ",
                                                     inv.gpus_size(), " (the GPUs listed), got ",
                                                     l.a(), ", ", l.b()));
    }
    if (!linked.insert({l.a(), l.b()}).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ": GPUs ", l.a(), " and ", l.b(), " are linked twice"));
    }
    if (l.kind().empty() || l.kind().size() > 16 ||
        !std::all_of(l.kind().begin(), l.kind().end(),
                     [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); })) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".kind: 1..16 characters of [A-Za-z0-9]"));
    }
  }
  if (inv.software_size() > 64) {
    return absl::InvalidArgumentError("inventory.software: at most 64 entries");
  }
  for (const auto& [k, v] : inv.software()) {
    RETURN_IF_ERROR(CheckText("inventory.software key", k, 64, TextRequired::kYes));
    RETURN_IF_ERROR(CheckText(absl::StrCat("inventory.software[", k, "]"), v, 256));
  }
  if (inv.features_size() > 64) {
    return absl::InvalidArgumentError("inventory.features: at most 64");
  }
  for (const auto& f : inv.features()) {
    if (!IsName(f, 64, ":.-")) {
      return absl::InvalidArgumentError(
          "inventory.features: each is 1..64 characters of [a-z0-9_:.-]");
    }
  }
  if (!inv.labels_json().empty()) {
    // The one JSON rule (no BOM, json_valid, depth), then the shape labels have.
    if (std::string why = db::JsonShapeRefusal(inv.labels_json(), 4096); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("inventory.labels_json: ", why));
    }
    auto labels = nlohmann::json::parse(inv.labels_json(), nullptr, false);
    if (labels.is_discarded() || !labels.is_object()) {
      return absl::InvalidArgumentError("inventory.labels_json: expected a JSON object");
    }
    for (const auto& [k, v] : labels.items()) {
      if (!v.is_string()) {
        return absl::InvalidArgumentError("inventory.labels_json: label values are strings");
      }
      RETURN_IF_ERROR(CheckText("inventory.labels_json key", k, 64, TextRequired::kYes));
      RETURN_IF_ERROR(CheckText("inventory.labels_json value", v.get<std::string>(), 256));
    }
  }
  return absl::OkStatus();
}

// Read-only access for the admin service: a connection of its own so reads never queue
// behind the writer.
class Reader {
 public:
  explicit Reader(std::unique_ptr<db::Database> db) : db_(std::move(db)) {}
  template <typename F>
  auto With(F&& f) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return f(*db_);
  }

 private:
  Mutex mu_;
  std::unique_ptr<db::Database> db_ ABSL_GUARDED_BY(mu_);
};

// Failures of the coordinator itself (a full disk, a read-only or locked database) are logged
// loudly here; the caller's own mistakes (unknown session, not yet complete) are only returned.
grpc::Status StoreFailure(const absl::Status& status, const char* what,
                          const std::string& session_id) {
  // A refusal of the caller's own request (another session's attempt) is not a failure.
  if (!db::IsDatabaseError(status) && status.code() == absl::StatusCode::kPermissionDenied) {
    return ToGrpc(status);
  }
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDataLoss:
      if (status.message() == "coordinator is shutting down") break;
      spdlog::error("{} for session {} failed: {}", what, session_id.substr(0, 8),
                    std::string(status.message()));
      break;
    default:
      break;
  }
  return ToGrpc(status);
}

void FillLease(const coordinator::Lease& l, v1::LeaseResponse* response) {
  response->set_has_work(true);
  response->set_attempt_id(l.attempt_id);
  response->set_unit_id(l.unit_id);
  response->set_run_id(l.run_id);
  response->set_runner(l.runner);
  response->set_runner_config_json(l.runner_config);
  response->set_processes(l.processes);
  response->set_rounds(l.rounds);
  response->set_seed(l.seed);
  response->set_lease_ms(l.lease_ms);
  for (const auto& cell : l.cells) {
    auto* c = response->add_cells();
    c->set_cell_id(cell.id);
    c->set_key(cell.key);
    c->set_params_json(cell.params_json);
  }
}

// The lease outcome as the call's answer.
grpc::Status AnswerLease(const absl::StatusOr<std::optional<coordinator::Lease>>& lease,
                         v1::LeaseResponse* response, const std::string& session_id) {
  if (!lease.ok()) return StoreFailure(lease.status(), "leasing", session_id);
  if (!lease->has_value()) {
    response->set_has_work(false);
    return grpc::Status::OK;
  }
  const coordinator::Lease& l = **lease;
  FillLease(l, response);
  spdlog::debug("attempt {} (run {} unit {}, {} cells) leased to session {}", l.attempt_id,
                l.run_id, l.unit_id, l.cells.size(), session_id.substr(0, 8));
  return grpc::Status::OK;
}

// The agent service on gRPC's callback API: no call holds a thread while it waits (long polls
// wait in the LeaseDispatcher, reports in the ReportIngestor's queue); the short calls run
// inline on gRPC's threads.
class AgentServiceImpl final : public v1::AgentService::CallbackService {
 public:
  AgentServiceImpl(Scheduler* scheduler, Authenticator* auth, const CoordinatorOptions& options,
                   Metrics* metrics)
      : scheduler_(scheduler),
        auth_(auth),
        metrics_(metrics),
        options_(options),
        dispatcher_(scheduler, AnswerLease,
                    [auth](const std::string& session) { return auth->SessionRevoked(session); }),
        ingestor_(
            scheduler, options.max_queued_report_records,
            [](const absl::Status& status, const std::string& session_id) {
              return StoreFailure(status, "storing results (none acknowledged)", session_id);
            },
            metrics) {}

  // A token was revoked: its sessions' long polls end now (UNAUTHENTICATED) and their live
  // attempts go back to the queue now, not at lease expiry; their results never count.
  void EndRevokedSessions(const std::set<std::string>& sessions) {
    const size_t ended = dispatcher_.EndSessions(
        sessions, grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                               "the token this session joined with was revoked"));
    if (ended > 0) {
      metrics_->Add(Metrics::Counter::kLongPollsEnded, "", static_cast<double>(ended));
    }
    for (const auto& session : sessions) {
      if (auto s = scheduler_->Release(session, "its join token was revoked"); !s.ok()) {
        spdlog::error("re-queueing the attempts of revoked session {}: {}", session.substr(0, 8),
                      s.ToString());
      }
    }
  }

  size_t waiting_leases() { return dispatcher_.waiting(); }

  // Ends the waits: long polls are answered "unavailable"; queued reports are written first.
  void Stop() {
    dispatcher_.Stop();
    ingestor_.Stop();
  }

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(RegisterNow(*context, request, response));
    return reactor;
  }

  grpc::ServerUnaryReactor* Lease(grpc::CallbackServerContext* context,
                                  const v1::LeaseRequest* request,
                                  v1::LeaseResponse* response) override {
    if (auto s = auth_->CheckSession(*context, request->session_id()); !s.ok()) {
      auto* reactor = context->DefaultReactor();
      reactor->Finish(ToGrpc(s));
      return reactor;
    }
    int wait = std::clamp(request->wait_ms(), 0, options_.max_lease_wait_ms);
    // Never hold a call past the client's own deadline.
    const auto client_left = std::chrono::duration_cast<std::chrono::milliseconds>(
        context->deadline() - std::chrono::system_clock::now());
    if (client_left.count() > 0 && client_left.count() < wait + 1000) {
      wait = std::max<int>(0, static_cast<int>(client_left.count()) - 1000);
    }
    // The dispatcher thread tries it (with the others that came meanwhile, one transaction for
    // all) and keeps it waiting if there is no work: no gRPC thread blocks on the scheduler.
    auto call =
        LeaseCall::Create(request->session_id(), response,
                          std::chrono::steady_clock::now() + std::chrono::milliseconds(wait));
    LeaseCall* raw = call.get();
    dispatcher_.Add(std::move(call));
    return raw;
  }

  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(HeartbeatNow(*context, request, response));
    return reactor;
  }

  grpc::ServerUnaryReactor* Report(grpc::CallbackServerContext* context,
                                   const v1::ReportRequest* request,
                                   v1::ReportResponse* response) override {
    auto* reactor = context->DefaultReactor();
    ReportIngestor::Call call;
    if (auto s = ParseReport(*context, request, &call.report, &call.refused); !s.ok()) {
      reactor->Finish(s);
      return reactor;
    }
    for (const auto& finish : request->finishes()) {
      if (!finish.session_id().empty() && finish.session_id() != request->session_id()) {
        reactor->Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                     "a report may finish only its own session's attempts"));
        return reactor;
      }
      call.finishes.push_back(finish);
    }
    call.records =
        call.report.measurements.size() + call.report.evidence.size() + call.finishes.size();
    call.response = response;
    call.reactor = reactor;
    ingestor_.Add(std::move(call));
    return reactor;
  }

  grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                   const v1::FinishRequest* request,
                                   v1::FinishResponse* response) override {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(FinishNow(*context, request, response));
    return reactor;
  }

  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* context,
                                    const v1::ReleaseRequest* request,
                                    v1::ReleaseResponse*) override {
    auto* reactor = context->DefaultReactor();
    if (auto s = auth_->CheckSession(*context, request->session_id()); !s.ok()) {
      reactor->Finish(ToGrpc(s));
      return reactor;
    }
    // The proto's rule for this one field: longer than 1 KiB is truncated with a marker, not
    // refused (an agent that is leaving must still hand its attempts back).
    const std::string reason = BoundText(request->reason(), kMaxReleaseReasonBytes);
    spdlog::info("session {} leaving: {}", request->session_id().substr(0, 8), Untrusted(reason));
    reactor->Finish(ToGrpc(scheduler_->Release(request->session_id(), reason)));
    return reactor;
  }

 private:
  grpc::Status RegisterNow(const grpc::CallbackServerContext& context,
                           const v1::RegisterRequest* request, v1::RegisterResponse* response) {
    if (!IsSessionId(request->session_id())) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "session_id must be a UUID: 8 to 64 characters of [A-Za-z0-9-]");
    }
    if (!request->has_inventory()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "inventory is required");
    }
    if (const std::string& nonce = request->registration_nonce();
        !nonce.empty() && (nonce.size() < 16 || nonce.size() > 128 ||
                           !std::all_of(nonce.begin(), nonce.end(), [](char c) {
                             return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
                           }))) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "registration_nonce must be 16 to 128 characters of [A-Za-z0-9-]");
    }
    const auto& inv = request->inventory();
    if (auto s = CheckInventory(inv); !s.ok()) return ToGrpc(s);
    db::SessionRow row;
    row.id = request->session_id();
    row.hostname = inv.hostname();
    row.machine_id = inv.machine_id().empty() ? inv.hostname() : inv.machine_id();
    row.boot_id = inv.boot_id();
    row.cloud_instance_id = inv.cloud_instance_id();
    row.cpu_model = inv.cpu_model();
    row.cpu_cores = inv.cpu_cores();
    row.memory_mib = inv.memory_mib();
    row.agent_version = inv.agent_version();
    row.software = nlohmann::json::object();
    for (const auto& [k, v] : inv.software()) row.software[k] = v;
    row.features = nlohmann::json::array();
    for (const auto& f : inv.features()) row.features.push_back(f);
    row.labels = inv.labels_json().empty() ? nlohmann::json::object()
                                           : nlohmann::json::parse(inv.labels_json());
    for (const auto& g : inv.gpus()) {
      row.gpus.push_back(
          db::GpuRow{g.vendor(), g.name(), g.arch(), g.uuid(), g.driver(), g.memory_mib()});
    }
    for (const auto& l : inv.gpu_links())
      row.gpu_links.push_back(db::GpuLinkRow{l.a(), l.b(), l.kind()});
    // Check the token and the session id's owner before storing anything about the caller.
    auto token_id =
        auth_->AdmitRegister(context, request->join_token(), row.id, request->registration_nonce());
    if (!token_id.ok()) {
      // Counted in /metrics; logged at most once per window (a stranger may try thousands).
      metrics_->Add(
          Metrics::Counter::kRegistersRefused,
          Metrics::Labels({{"code", absl::StatusCodeToString(token_id.status().code())}}));
      static LogLimiter limiter(std::chrono::seconds(10));
      if (uint64_t suppressed = 0; limiter.Allow(&suppressed)) {
        spdlog::warn(
            "register refused for host {}: {} ({} more refused since the last line; "
            "ladder_registers_refused_total counts them)",
            Untrusted(row.hostname), std::string(token_id.status().message()), suppressed);
      }
      return ToGrpc(token_id.status());
    }
    if (!auth_->required() && scheduler_->LiveAttemptsOf(row.id) > 0) {
      // Without credentials nothing tells the session's agent from an impostor; a session
      // that holds leased work keeps it.
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                          absl::StrCat("session ", row.id.substr(0, 8),
                                       " is registered and holds leased work; an agent "
                                       "registers under a fresh session id"));
    }
    if (auto s = scheduler_->RegisterSession(row); !s.ok()) return ToGrpc(s);
    auto credential = auth_->IssueCredential(row.id, *token_id, request->registration_nonce());
    if (!credential.ok()) return ToGrpc(credential.status());
    response->set_session_credential(*credential);
    spdlog::info("session {} registered: host {} ({} GPUs, features {}, agent {})",
                 row.id.substr(0, 8), Untrusted(row.hostname), row.gpus.size(),
                 Untrusted(row.features.dump()), Untrusted(row.agent_version));
    response->set_heartbeat_interval_ms(options_.heartbeat_interval_ms);
    return grpc::Status::OK;
  }

  grpc::Status HeartbeatNow(const grpc::CallbackServerContext& context,
                            const v1::HeartbeatRequest* request, v1::HeartbeatResponse* response) {
    if (auto s = auth_->CheckSession(context, request->session_id()); !s.ok()) return ToGrpc(s);
    if (request->attempt_ids_size() > kMaxHeartbeatAttempts) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("attempt_ids: at most ", kMaxHeartbeatAttempts, ", got ",
                                       request->attempt_ids_size()));
    }
    std::vector<int64_t> ids(request->attempt_ids().begin(), request->attempt_ids().end());
    auto stop = scheduler_->Heartbeat(request->session_id(), ids);
    if (!stop.ok()) return ToGrpc(stop.status());
    metrics_->SetSpoolBacklog(request->session_id(), request->spool_pending_records());
    for (int64_t id : *stop) response->add_cancelled_attempt_ids(id);
    return grpc::Status::OK;
  }

  // Turns the request into the store's input. Malformed as a whole (no session, too many
  // records, a record without a usable uuid) is INVALID_ARGUMENT; a record whose own fields
  // break the contract (metric or kind name, a value that is not finite) is refused alone, in
  // `refused`; what only the design can judge is the store's to refuse.
  grpc::Status ParseReport(const grpc::CallbackServerContext& context,
                           const v1::ReportRequest* request, db::ReportIn* report,
                           std::vector<db::RefusedRecord>* refused) {
    if (auto s = auth_->CheckSession(context, request->session_id()); !s.ok()) return ToGrpc(s);
    if (request->measurements_size() + request->evidence_size() + request->finishes_size() >
        options_.max_report_records) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("a report may carry at most ", options_.max_report_records,
                                       " records; send smaller batches"));
    }
    auto usable_uuid = [&](const std::string& uuid) {
      return !uuid.empty() && uuid.size() <= 64 && CheckText("uuid", uuid, 64).ok();
    };
    report->session_id = request->session_id();
    report->measurements.reserve(static_cast<size_t>(request->measurements_size()));
    for (int i = 0; i < request->measurements_size(); ++i) {
      const auto& m = request->measurements(i);
      if (!usable_uuid(m.uuid())) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("measurements[", i,
                                         "]: uuid must be 1 to 64 printable "
                                         "bytes"));
      }
      if (!runner::IsValidMetricName(m.metric())) {
        refused->push_back({m.uuid(), "metric names match [a-z][a-z0-9_]{0,63}"});
        continue;
      }
      if (!std::isfinite(m.value())) {
        refused->push_back({m.uuid(), absl::StrCat("value of ", m.metric(), " is not finite")});
        continue;
      }
      if (auto s = CheckText("unit", m.unit(), 16); !s.ok()) {
        refused->push_back({m.uuid(), std::string(s.message())});
        continue;
      }
      report->measurements.push_back(db::MeasurementIn{m.uuid(), m.attempt_id(), m.cell_id(),
                                                       m.process(), m.round(), m.metric(),
                                                       m.value(), m.unit(), m.measured_at_ms()});
    }
    for (int i = 0; i < request->evidence_size(); ++i) {
      const auto& e = request->evidence(i);
      if (!usable_uuid(e.uuid())) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("evidence[", i,
                                         "]: uuid must be 1 to 64 printable "
                                         "bytes"));
      }
      if (!runner::IsValidMetricName(e.kind())) {
        refused->push_back({e.uuid(), "evidence kinds match [a-z][a-z0-9_]{0,63}"});
        continue;
      }
      // The one JSON rule, as far as it can be judged without the database (the store asks
      // SQLite's json_valid() too): refused alone, so the rest of the batch is stored.
      if (std::string why = db::JsonShapeRefusal(e.value_json(), db::kMaxEvidenceJsonBytes);
          !why.empty()) {
        refused->push_back({e.uuid(), absl::StrCat("evidence value_json: ", why)});
        continue;
      }
      report->evidence.push_back(db::EvidenceIn{e.uuid(), e.attempt_id(), e.cell_id(), e.process(),
                                                e.kind(), e.value_json(), e.recorded_at_ms()});
    }
    return grpc::Status::OK;
  }

  grpc::Status FinishNow(const grpc::CallbackServerContext& context,
                         const v1::FinishRequest* request, v1::FinishResponse* response) {
    if (auto s = auth_->CheckSession(context, request->session_id()); !s.ok()) return ToGrpc(s);
    auto result = scheduler_->Finish(FinishFromRequest(request->session_id(), *request));
    if (!result.ok()) {
      if (result.status().code() == absl::StatusCode::kFailedPrecondition ||
          result.status().code() == absl::StatusCode::kInvalidArgument ||
          result.status().code() == absl::StatusCode::kNotFound ||
          result.status().code() == absl::StatusCode::kPermissionDenied) {
        return ToGrpc(result.status());
      }
      return StoreFailure(result.status(), "finishing", request->session_id());
    }
    response->set_accepted(result->accepted);
    response->set_detail(result->detail);
    if (request->ok()) {
      spdlog::debug("attempt {} finished by session {}: {}", request->attempt_id(),
                    request->session_id().substr(0, 8), result->detail);
    } else {
      spdlog::warn("attempt {} failed on session {}: {}", request->attempt_id(),
                   request->session_id().substr(0, 8), Untrusted(request->failure_reason()));
    }
    return grpc::Status::OK;
  }

  Scheduler* scheduler_;
  Authenticator* auth_;
  Metrics* const metrics_;
  const CoordinatorOptions& options_;
  LeaseDispatcher dispatcher_;
  ReportIngestor ingestor_;
};

class AdminServiceImpl final : public v1::AdminService::Service {
 public:
  // `on_revoked` is given the sessions a revoked token admitted.
  AdminServiceImpl(Scheduler* scheduler, Reader* reader, Authenticator* auth,
                   std::atomic<bool>* stopping,
                   std::function<void(const std::set<std::string>&)> on_revoked)
      : scheduler_(scheduler),
        reader_(reader),
        auth_(auth),
        stopping_(stopping),
        on_revoked_(std::move(on_revoked)) {}

  grpc::Status CreateToken(grpc::ServerContext* context, const v1::CreateTokenRequest* request,
                           v1::CreateTokenResponse* response) override {
    if (auto s = auth_->CheckAdmin(*context); !s.ok()) return ToGrpc(s);
    auto role = db::ParseRole(request->role());
    if (!role.ok()) return ToGrpc(role.status());
    auto created = auth_->CreateToken(*role, request->description(), request->expires_in_ms());
    if (!created.ok()) return ToGrpc(created.status());
    FillToken(created->info, response->mutable_info());
    response->set_token(created->plaintext);
    spdlog::info("token {} created (role {})", created->info.id, request->role());
    return grpc::Status::OK;
  }

  grpc::Status ListTokens(grpc::ServerContext* context, const v1::ListTokensRequest*,
                          v1::ListTokensResponse* response) override {
    if (auto s = auth_->CheckAdmin(*context); !s.ok()) return ToGrpc(s);
    auto tokens = auth_->ListTokens();
    if (!tokens.ok()) return ToGrpc(tokens.status());
    for (const auto& t : *tokens) FillToken(t, response->add_tokens());
    return grpc::Status::OK;
  }

  grpc::Status RevokeToken(grpc::ServerContext* context, const v1::RevokeTokenRequest* request,
                           v1::RevokeTokenResponse*) override {
    if (auto s = auth_->CheckAdmin(*context); !s.ok()) return ToGrpc(s);
    auto revoked = auth_->RevokeToken(request->id());
    if (!revoked.ok()) return ToGrpc(revoked.status());
    spdlog::info("token {} revoked; {} sessions admitted under it end now",
                 Untrusted(request->id()), revoked->size());
    if (on_revoked_) on_revoked_(*revoked);
    return grpc::Status::OK;
  }

  grpc::Status Validate(grpc::ServerContext* context, const v1::ValidateRequest* request,
                        v1::ValidateResponse* response) override {
    if (auto s = auth_->CheckAdmin(*context); !s.ok()) return ToGrpc(s);
    auto result = scheduler_->Validate(request->yaml(), request->filename(), request->max_cells());
    if (!result.ok()) return ToGrpc(result.status());
    response->set_cell_count(result->cells);
    response->set_unit_count(result->units);
    response->set_matrix_name(result->name);
    response->set_warning(result->warning);
    return grpc::Status::OK;
  }

  grpc::Status Submit(grpc::ServerContext* context, const v1::SubmitRequest* request,
                      v1::SubmitResponse* response) override {
    if (auto s = auth_->CheckAdmin(*context); !s.ok()) return ToGrpc(s);
    // The key rule first, so that a refusal naming the key never carries a character the text
    // rule refuses; then the text rule on each value.
    db::RunTags tags(request->tags().begin(), request->tags().end());
    if (auto s = db::ValidateRunTags(tags); !s.ok()) return ToGrpc(s);
    for (const auto& [key, value] : tags) {
      if (auto s = CheckText("tags." + key, value, db::kMaxTagValueBytes); !s.ok()) {
        return ToGrpc(s);
      }
    }
    auto result =
        scheduler_->Submit(request->yaml(), request->filename(), request->max_cells(), tags);
    if (!result.ok()) return ToGrpc(result.status());
    spdlog::info("run {} submitted: matrix {}, {} cells in {} units", result->run_id,
                 Untrusted(result->name), result->cells, result->units);
    response->set_run_id(result->run_id);
    response->set_cell_count(result->cells);
    response->set_unit_count(result->units);
    response->set_warning(result->warning);
    if (!result->warning.empty()) {
      spdlog::warn("run {}: {}", result->run_id, Untrusted(result->warning));
    }
    return grpc::Status::OK;
  }

  // The run's summary as the wire shows it; NOT_FOUND (without the database's path) for an
  // unknown run.
  grpc::Status Summarize(int64_t run_id, v1::RunSummary* out) {
    auto summary = reader_->With([&](db::Database& d) { return db::GetRunSummary(d, run_id); });
    if (!summary.ok()) {
      if (summary.status().code() == absl::StatusCode::kNotFound) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no run ", run_id));
      }
      return ToGrpc(summary.status());
    }
    FillRunSummary(*summary, out);
    if (!db::IsFinished(summary->state)) {
      out->set_waiting_reason(scheduler_->WhyWaiting(run_id));
      // Work that no connected agent can take has no end to estimate.
      if (!out->waiting_reason().empty()) out->set_eta_seconds(-1);
    }
    return grpc::Status::OK;
  }

  grpc::Status GetRun(grpc::ServerContext* context, const v1::GetRunRequest* request,
                      v1::RunSummary* response) override {
    if (auto s = auth_->CheckAdmin(*context); !s.ok()) return ToGrpc(s);
    return Summarize(request->run_id(), response);
  }

  grpc::Status ListRuns(grpc::ServerContext* context, const v1::ListRunsRequest* request,
                        v1::ListRunsResponse* response) override {
    if (auto s = auth_->CheckAdmin(*context); !s.ok()) return ToGrpc(s);
    auto runs = reader_->With([&](db::Database& d) { return db::ListRuns(d, request->limit()); });
    if (!runs.ok()) return ToGrpc(runs.status());
    for (const auto& r : *runs) FillRunSummary(r, response->add_runs());
    return grpc::Status::OK;
  }

  grpc::Status WatchRun(grpc::ServerContext* context, const v1::WatchRunRequest* request,
                        grpc::ServerWriter<v1::RunSummary>* writer) override {
    if (auto s = auth_->CheckAdmin(*context); !s.ok()) return ToGrpc(s);
    std::string last;
    while (!context->IsCancelled() && !stopping_->load()) {
      v1::RunSummary message;
      if (auto s = Summarize(request->run_id(), &message); !s.ok()) return s;
      std::string serialized = message.SerializeAsString();
      if (serialized != last) {
        if (!writer->Write(message)) return grpc::Status::OK;
        last = std::move(serialized);
      }
      if (auto state = db::ParseRunState(message.state()); state.ok() && db::IsFinished(*state)) {
        return grpc::Status::OK;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      // A stream lives no longer than its admin token: revoked (or expired), it ends.
      if (auto s = auth_->CheckAdmin(*context); !s.ok()) return ToGrpc(s);
    }
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator is shutting down");
  }

  grpc::Status CancelRun(grpc::ServerContext* context, const v1::CancelRunRequest* request,
                         v1::CancelRunResponse* response) override {
    if (auto s = auth_->CheckAdmin(*context); !s.ok()) return ToGrpc(s);
    if (auto s = Summarize(request->run_id(), response->mutable_run()); !s.ok()) return s;
    if (auto s = scheduler_->Cancel(request->run_id()); !s.ok()) return ToGrpc(s);
    spdlog::info("run {} cancelled", request->run_id());
    return Summarize(request->run_id(), response->mutable_run());
  }

  grpc::Status ListSessions(grpc::ServerContext* context, const v1::ListSessionsRequest*,
                            v1::ListSessionsResponse* response) override {
    if (auto s = auth_->CheckAdmin(*context); !s.ok()) return ToGrpc(s);
    auto sessions = reader_->With([&](db::Database& d) { return db::ListSessions(d); });
    if (!sessions.ok()) return ToGrpc(sessions.status());
    for (const auto& s : *sessions) FillSessionInfo(s, response->add_sessions());
    return grpc::Status::OK;
  }

  grpc::Status Query(grpc::ServerContext* context, const v1::QueryRequest* request,
                     v1::QueryResponse* response) override {
    if (auto s = auth_->CheckAdmin(*context); !s.ok()) return ToGrpc(s);
    db::QueryOptions options;
    options.run_id = request->run_id();
    options.by.assign(request->by().begin(), request->by().end());
    options.metric = request->metric();
    v1::RunSummary exists;
    if (auto s = Summarize(request->run_id(), &exists); !s.ok()) return s;
    if (request->by_size() > 64) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "by: at most 64 axes");
    }
    auto result = reader_->With([&](db::Database& d) { return db::QueryRun(d, options); });
    if (!result.ok()) return ToGrpc(result.status());
    response->set_result_json(db::ToJson(*result).dump());
    return grpc::Status::OK;
  }

 private:
  static void FillToken(const db::TokenInfo& t, v1::TokenInfo* out) {
    out->set_id(t.id);
    out->set_role(db::RoleName(t.role));
    out->set_description(t.description);
    out->set_created_at_ms(t.created_at_ms);
    out->set_expires_at_ms(t.expires_at_ms);
    out->set_revoked_at_ms(t.revoked_at_ms);
  }

  Scheduler* scheduler_;
  Reader* reader_;
  Authenticator* auth_;
  std::atomic<bool>* stopping_;
  const std::function<void(const std::set<std::string>&)> on_revoked_;
};

}  // namespace

// Counts and times every call by method and status code (ladder_rpcs_total,
// ladder_rpc_duration_seconds). Method labels come from the served services' descriptors, so a
// client naming methods that do not exist adds one label value ("other"), not one per name.
class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(std::string method, Metrics* metrics)
      : method_(std::move(method)), metrics_(metrics), start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      metrics_->Add(
          Metrics::Counter::kRpcs,
          Metrics::Labels({{"method", method_}, {"code", CodeName(status.error_code())}}));
      metrics_->Observe(
          Metrics::Histogram::kRpcDuration,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(),
          Metrics::Labels({{"method", method_}}));
    }
    methods->Proceed();
  }

 private:
  static const char* CodeName(grpc::StatusCode code) {
    static constexpr const char* kNames[] = {"OK",
                                             "CANCELLED",
                                             "UNKNOWN",
                                             "INVALID_ARGUMENT",
                                             "DEADLINE_EXCEEDED",
                                             "NOT_FOUND",
                                             "ALREADY_EXISTS",
                                             "PERMISSION_DENIED",
                                             "RESOURCE_EXHAUSTED",
                                             "FAILED_PRECONDITION",
                                             "ABORTED",
                                             "OUT_OF_RANGE",
                                             "UNIMPLEMENTED",
                                             "INTERNAL",
                                             "UNAVAILABLE",
                                             "DATA_LOSS",
                                             "UNAUTHENTICATED"};
    const int i = static_cast<int>(code);
    return i >= 0 && i < 17 ? kNames[i] : "UNKNOWN";
  }
  const std::string method_;
  Metrics* const metrics_;
  const std::chrono::steady_clock::time_point start_;
};

class RpcMetricsFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsFactory(Metrics* metrics) : metrics_(metrics) {
    for (const char* service : {"ladder.v1.AgentService", "ladder.v1.AdminService"}) {
      const auto* descriptor =
          google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
      if (descriptor == nullptr) continue;
      for (int i = 0; i < descriptor->method_count(); ++i) {
        known_[absl::StrCat("/", service, "/", descriptor->method(i)->name())] =
            std::string(descriptor->method(i)->name());
      }
    }
  }
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    auto it = known_.find(info->method());
    return new RpcMetricsInterceptor(it != known_.end() ? it->second : "other", metrics_);
  }

 private:
  Metrics* const metrics_;
  std::map<std::string, std::string> known_;  // "/pkg.Service/Method" -> "Method"
};

absl::Status CoordinatorOptions::Validate() const {
  if (listen.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen: expected HOST:PORT, got '", listen, "'"));
  }
  if (db_path.empty()) return absl::InvalidArgumentError("--db: a database file is required");
  if (tls_cert_file.empty() != tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!tls_client_ca_file.empty() && tls_cert_file.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  if (!IsLoopback() && tls_cert_file.empty() && !insecure) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to listen on ", listen,
        " without TLS: agents on the internet would send "
        "their tokens and results in clear. Pass --tls-cert and --tls-key, or --insecure if a "
        "VPN or SSH tunnel already protects this address"));
  }
  if (scheduler.lease_ms < 1000) {
    return absl::InvalidArgumentError("--lease-ms: must be at least 1000");
  }
  if (heartbeat_interval_ms <= 0 || heartbeat_interval_ms * 2 > scheduler.lease_ms) {
    return absl::InvalidArgumentError(
        "--heartbeat-ms: must be positive and at most half the lease");
  }
  return absl::OkStatus();
}

bool CoordinatorOptions::IsLoopback() const {
  const std::string host = listen.substr(0, listen.rfind(':'));
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host == "::1" ||
         host.rfind("127.", 0) == 0;
}

struct Coordinator::Impl {
  CoordinatorOptions options;
  Metrics metrics;
  const Clock* clock = nullptr;
  std::unique_ptr<db::Store> store;
  std::unique_ptr<Reader> reader;
  std::unique_ptr<Authenticator> auth;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<AgentServiceImpl> agent_service;
  std::unique_ptr<AdminServiceImpl> admin_service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::atomic<bool> stopping{false};
  std::thread reaper;
  Mutex mu;
  std::condition_variable stopped_cv;
  bool stopped ABSL_GUARDED_BY(mu) = false;

  void ReaperLoop() {
    while (true) {
      {
        MutexLock lock(&mu);
        const auto next = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(options.reaper_interval_ms);
        mu.WaitUntil(stopped_cv, next, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return stopped;  // called with mu held
        });
        if (stopped) return;
      }
      if (auto s = scheduler->Tick(); !s.ok()) spdlog::error("reaper: {}", s.ToString());
    }
  }
};

Coordinator::Coordinator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Coordinator::~Coordinator() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(const CoordinatorOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->clock = options.clock != nullptr ? options.clock : &SystemClock();
  ASSIGN_OR_RETURN(impl->store, db::Store::Open(options.db_path));
  if (options.fault_db_growth_pages > 0) {
    RETURN_IF_ERROR(impl->store->LimitGrowthForTesting(options.fault_db_growth_pages));
    spdlog::warn("fault injection: the database may grow by {} pages only",
                 options.fault_db_growth_pages);
  }
  ASSIGN_OR_RETURN(auto read_db, db::Database::Open(options.db_path, db::OpenMode::kReadWrite));
  impl->reader = std::make_unique<Reader>(std::move(read_db));
  ASSIGN_OR_RETURN(impl->scheduler,
                   Scheduler::Create(impl->store.get(), impl->clock, options.scheduler));
  ASSIGN_OR_RETURN(auto auth_db, db::Database::Open(options.db_path, db::OpenMode::kReadWrite));
  // Beyond loopback, tokens are always required.
  const bool require_tokens = options.require_tokens || !options.IsLoopback();
  impl->auth = std::make_unique<Authenticator>(
      std::move(auth_db), impl->clock,
      require_tokens ? Authenticator::TokenPolicy::kRequired : Authenticator::TokenPolicy::kOff,
      options.session_calls_per_second, std::max(50.0, options.session_calls_per_second));
  impl->auth->set_metrics(&impl->metrics);
  impl->agent_service = std::make_unique<AgentServiceImpl>(impl->scheduler.get(), impl->auth.get(),
                                                           impl->options, &impl->metrics);
  impl->admin_service = std::make_unique<AdminServiceImpl>(
      impl->scheduler.get(), impl->reader.get(), impl->auth.get(), &impl->stopping,
      [service = impl->agent_service.get()](const std::set<std::string>& sessions) {
        service->EndRevokedSessions(sessions);
      });
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   proto::MakeServerCredentials(proto::ServerTls{
                       options.tls_cert_file, options.tls_key_file, options.tls_client_ca_file}));

  InstallProtobufLogLimiter();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, credentials, &impl->port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.RegisterService(impl->agent_service.get());
  builder.RegisterService(impl->admin_service.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<RpcMetricsFactory>(&impl->metrics));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen, " (address in use or not local?)"));
  }
  if (auto* health = impl->server->GetHealthCheckService()) {
    for (const char* service : {"", "ladder.v1.AgentService", "ladder.v1.AdminService"}) {
      health->SetServingStatus(service, true);
    }
  }
  impl->reaper = std::thread([raw = impl.get()] { raw->ReaperLoop(); });
  spdlog::info(
      "coordinator listening on {} (database {}, {}, tokens {})",
      options.listen.substr(0, options.listen.rfind(':')) + ":" + std::to_string(impl->port),
      options.db_path,
      options.tls_cert_file.empty() ? "plaintext"
                                    : (options.tls_client_ca_file.empty() ? "TLS" : "mutual TLS"),
      require_tokens ? "required" : "off");
  return std::unique_ptr<Coordinator>(new Coordinator(std::move(impl)));
}

int Coordinator::port() const { return impl_->port; }

const std::string& Coordinator::db_path() const { return impl_->options.db_path; }

absl::StatusOr<v1::RunSummary> Coordinator::GetRun(int64_t run_id) {
  v1::RunSummary out;
  if (auto s = impl_->admin_service->Summarize(run_id, &out); !s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  return out;
}

absl::StatusOr<v1::ListRunsResponse> Coordinator::ListRuns(int limit) {
  auto runs = impl_->reader->With([&](db::Database& d) { return db::ListRuns(d, limit); });
  if (!runs.ok()) return runs.status();
  v1::ListRunsResponse out;
  for (const auto& r : *runs) {
    auto* run = out.add_runs();
    FillRunSummary(r, run);
    if (!db::IsFinished(r.state)) {
      run->set_waiting_reason(impl_->scheduler->WhyWaiting(r.run_id));
      if (!run->waiting_reason().empty()) run->set_eta_seconds(-1);
    }
  }
  return out;
}

absl::StatusOr<v1::ListSessionsResponse> Coordinator::ListSessions() {
  auto sessions = impl_->reader->With([&](db::Database& d) { return db::ListSessions(d); });
  if (!sessions.ok()) return sessions.status();
  v1::ListSessionsResponse out;
  for (const auto& s : *sessions) FillSessionInfo(s, out.add_sessions());
  return out;
}

absl::Status Coordinator::CheckAdminToken(const std::string& token, bool required) {
  return impl_->auth->CheckAdminToken(token, required);
}

std::string Coordinator::MetricsText() {
  std::string out = impl_->metrics.Render();
  out += RenderGauge("ladder_leases_waiting", "Lease calls waiting for work (long polls).",
                     {{"", static_cast<double>(impl_->agent_service->waiting_leases())}});
  absl::StrAppend(&out,
                  "# HELP ladder_malformed_requests_total Requests protobuf could not parse "
                  "(invalid UTF-8 in a string field); the log has at most one line per 10 s.\n"
                  "# TYPE ladder_malformed_requests_total counter\n"
                  "ladder_malformed_requests_total ",
                  MalformedRequestCount(), "\n");
  auto counts = impl_->reader->With([&](db::Database& d) { return db::CountByState(d); });
  if (!counts.ok()) {
    // The scrape still answers: the counters above are the coordinator's own.
    spdlog::warn("metrics: {}", counts.status().ToString());
    return out;
  }
  std::vector<std::pair<std::string, double>> sessions, units, runs;
  for (const auto& [state, n] : counts->sessions) {
    sessions.push_back({Metrics::Labels({{"state", state}}), static_cast<double>(n)});
  }
  for (const auto& [state, n] : counts->units_of_open_runs) {
    units.push_back({Metrics::Labels({{"state", state}}), static_cast<double>(n)});
  }
  for (const auto& [state, n] : counts->runs) {
    runs.push_back({Metrics::Labels({{"state", state}}), static_cast<double>(n)});
  }
  out += RenderGauge("ladder_sessions", "Agent sessions by state (active: connected).", sessions);
  out +=
      RenderGauge("ladder_units",
                  "Units of the runs not yet finished, by state (summed over those runs).", units);
  out += RenderGauge("ladder_runs", "Runs by state.", runs);
  return out;
}

std::string Coordinator::address() const {
  const std::string& listen = impl_->options.listen;
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
  return absl::StrCat(host, ":", impl_->port);
}

void Coordinator::Wait() {
  MutexLock lock(&impl_->mu);
  impl_->mu.Wait(impl_->stopped_cv, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return impl_->stopped;  // called with mu held
  });
}

void Coordinator::Shutdown() noexcept {
  if (!impl_) return;
  if (impl_->stopping.exchange(true)) return;
  if (auto* health = impl_->server->GetHealthCheckService()) health->Shutdown();
  impl_->scheduler->Shutdown();
  // Long polls are answered first, so the server's drain does not wait for them; reports
  // already queued are written (and acknowledged) before the server stops.
  impl_->agent_service->Stop();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  {
    MutexLock lock(&impl_->mu);
    impl_->stopped = true;
  }
  impl_->stopped_cv.notify_all();
  if (impl_->reaper.joinable()) impl_->reaper.join();
}

}  // namespace ladder::coordinator
