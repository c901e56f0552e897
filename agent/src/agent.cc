#include "ladder/agent/agent.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kernel_runner.h"
#ifdef LADDER_HAVE_COMMAND
#include "ladder/command/command_runner.h"
#endif
#include "ladder/common/time.h"
#include "ladder/common/utf8.h"
#include "ladder/proto/tls.h"
#include "ladder/status_macros.h"
#include "ladder/v1/agent.grpc.pb.h"
#include "spool.h"

#ifdef LADDER_HAVE_ENGINES
#include "ladder/engines/engine_runner.h"
#endif

namespace ladder::agent {
namespace {

absl::Status FromGrpc(const grpc::Status& status, std::string_view what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(std::string(what), ": ", status.error_message()));
}

// Errors after which retrying cannot help: the coordinator refused us.
bool IsFatal(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         status.error_code() == grpc::StatusCode::PERMISSION_DENIED;
}

// Reads a whole file; "" for an empty path.
absl::StatusOr<std::string> ReadTextFile(const std::string& path, const char* flag) {
  if (path.empty()) return std::string();
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(flag, ": cannot read ", path, ": ", std::strerror(errno)));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

std::string NewUuid() {
  static thread_local std::mt19937_64 rng([] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device() ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }());
  uint64_t hi = rng(), lo = rng();
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // RFC 4122 variant
  char buffer[37];
  std::snprintf(buffer, sizeof(buffer), "%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(hi >> 32), static_cast<unsigned>((hi >> 16) & 0xffff),
                static_cast<unsigned>(hi & 0xffff), static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buffer;
}

absl::Status AgentOptions::Validate() const {
  if (coordinator.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--coordinator: expected HOST:PORT, got '", coordinator, "'"));
  }
  if (lease_wait_ms < 0 || report_batch <= 0) {
    return absl::InvalidArgumentError("lease wait and report batch must be positive");
  }
  if (grace_seconds < 1 || grace_seconds > 3600) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grace-seconds: expected 1 to 3600, got ", grace_seconds));
  }
  if (!gpus.empty()) RETURN_IF_ERROR(ParseGpuList(gpus).status());
  if (!fake_gpus_json.empty()) {
    auto parsed = nlohmann::json::parse(fake_gpus_json, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_array()) {
      return absl::InvalidArgumentError("--fake-gpus: expected a JSON array of GPU objects");
    }
  }
  return absl::OkStatus();
}

// After SIGTERM: how long reporting may still try, then how long the Release call may take.
constexpr auto kDrainOnStop = std::chrono::seconds(4);
constexpr auto kReleaseOnStop = std::chrono::seconds(2);

struct Agent::Impl {
  AgentOptions options;
  std::string session_id = NewUuid();
  // Sent with every Register of this session: lets a Register whose answer was lost be retried
  // under the same id until the session first calls in with its credential.
  // A secret: drawn from std::random_device (the kernel's generator on Linux), not the
  // session id's mt19937.
  const std::string registration_nonce = [] {
    std::random_device device;
    std::string hex;
    for (int i = 0; i < 8; ++i) hex += absl::StrFormat("%08x", device());
    return hex;
  }();
  std::unique_ptr<Spool> spool;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::AgentService::Stub> stub;
  std::map<std::string, std::unique_ptr<runner::Runner>> runners;
  std::map<std::string, std::string> benches;  // registered programs: name -> absolute path
  std::string join_token;

  // Attaches the credential of `sid` (this session's, or an earlier one's from the spool).
  void Authorize(grpc::ClientContext& context, const std::string& sid) {
    std::string value;
    if (sid == session_id) {
      absl::MutexLock lock(&mu);
      value = credential;
    } else {
      auto stored = spool->Credential(sid);
      if (stored.ok()) value = *stored;
    }
    if (!value.empty()) context.AddMetadata("authorization", "Bearer " + value);
  }
  HostInventory inventory;
  // Written by Register, which the leasing thread runs again while the heartbeat runs.
  std::atomic<int> heartbeat_interval_ms{5000};

  std::atomic<bool> stopping{false};
  std::atomic<bool> release_current{false};
  // Shared by the leasing thread (Run, RunUnit), the reporter, the heartbeat and Stop().
  absl::Mutex mu;
  absl::CondVar wake;  // a result was spooled, an attempt ended, or the agent is leaving
  std::set<int64_t> current_attempts ABSL_GUARDED_BY(mu);
  std::set<int64_t> cancelled_attempts ABSL_GUARDED_BY(mu);
  bool reporter_done ABSL_GUARDED_BY(mu) = false;
  bool heartbeat_done ABSL_GUARDED_BY(mu) = false;  // set once the reporter has drained
  grpc::ClientContext* lease_context ABSL_GUARDED_BY(mu) = nullptr;  // cancelled by Stop
  std::set<std::string> parked_sessions ABSL_GUARDED_BY(mu);         // see Park
  // Set when the agent starts leaving: reporting gives up at this time (results stay spooled).
  std::optional<std::chrono::system_clock::time_point> drain_deadline ABSL_GUARDED_BY(mu);
  // When Stop(kFinishUnit) came: the grace (options.grace_seconds) counts from here.
  std::optional<std::chrono::system_clock::time_point> finish_requested_at ABSL_GUARDED_BY(mu);
  absl::Status fatal ABSL_GUARDED_BY(mu);
  // This session's, issued at Register (again after the coordinator lost the session) and
  // read by every thread that calls the coordinator.
  std::string credential ABSL_GUARDED_BY(mu);

  // --- the sink a runner writes into -----------------------------------------------------
  class Sink final : public runner::MeasurementSink {
   public:
    Sink(Impl* impl, int64_t attempt_id) : impl_(impl), attempt_id_(attempt_id) {}
    absl::Status Record(const runner::Measurement& m) override {
      v1::MeasurementRecord record;
      record.set_uuid(NewUuid());
      record.set_attempt_id(attempt_id_);
      record.set_cell_id(m.cell_id);
      record.set_process(m.process);
      record.set_round(m.round);
      record.set_metric(m.metric);
      record.set_value(m.value);
      record.set_unit(m.unit);
      record.set_measured_at_ms(UnixNowMs());
      RETURN_IF_ERROR(impl_->spool->AddResult(SpooledResult{
          record.uuid(), impl_->session_id, attempt_id_, false, record.SerializeAsString()}));
      ++measurements;
      impl_->wake.SignalAll();
      return absl::OkStatus();
    }
    absl::Status RecordEvidence(const runner::Evidence& e) override {
      v1::EvidenceRecord record;
      record.set_uuid(NewUuid());
      record.set_attempt_id(attempt_id_);
      record.set_cell_id(e.cell_id);
      record.set_process(e.process);
      record.set_kind(e.kind);
      // Engine text is not always UTF-8 (a byte-fallback token streams half a character): replace
      // what is not, rather than throw (dump's default) and terminate the agent.
      record.set_value_json(e.value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      record.set_recorded_at_ms(UnixNowMs());
      RETURN_IF_ERROR(impl_->spool->AddResult(SpooledResult{
          record.uuid(), impl_->session_id, attempt_id_, true, record.SerializeAsString()}));
      ++evidence;
      return absl::OkStatus();
    }
    bool Cancelled() const override {
      if (impl_->release_current.load()) return true;
      absl::MutexLock lock(&impl_->mu);
      return impl_->cancelled_attempts.count(attempt_id_) > 0;
    }
    int64_t measurements = 0;
    int64_t evidence = 0;

   private:
    Impl* impl_;
    int64_t attempt_id_;
  };

  void SetFatal(absl::Status status) {
    absl::MutexLock lock(&mu);
    if (fatal.ok()) fatal = std::move(status);
    stopping = true;
    release_current = true;
    wake.SignalAll();
  }

  // Sleeps up to `ms`, returning early when stopping.
  void Nap(int ms) {
    absl::MutexLock lock(&mu);
    const absl::Time until = absl::Now() + absl::Milliseconds(ms);
    while (!stopping.load()) {
      if (wake.WaitWithDeadline(&mu, until)) break;  // timed out
    }
  }

  absl::Status Register() {
    v1::RegisterRequest request;
    request.set_session_id(session_id);
    request.set_join_token(join_token);
    request.set_registration_nonce(registration_nonce);
    auto* inv = request.mutable_inventory();
    inv->set_hostname(inventory.hostname);
    inv->set_machine_id(inventory.machine_id);
    inv->set_boot_id(inventory.boot_id);
    inv->set_cloud_instance_id(inventory.cloud_instance_id);
    inv->set_cpu_model(inventory.cpu_model);
    inv->set_cpu_cores(inventory.cpu_cores);
    inv->set_memory_mib(inventory.memory_mib);
    inv->set_agent_version(LADDER_VERSION);
    for (const auto& g : inventory.gpus) {
      auto* gpu = inv->add_gpus();
      gpu->set_vendor(g.vendor);
      gpu->set_name(g.name);
      gpu->set_arch(g.arch);
      gpu->set_uuid(g.uuid);
      gpu->set_memory_mib(g.memory_mib);
      gpu->set_driver(g.driver);
    }
    for (const auto& l : inventory.gpu_links) {
      auto* link = inv->add_gpu_links();
      link->set_a(l.a);
      link->set_b(l.b);
      link->set_kind(l.kind);
    }
    for (const auto& [k, v] : inventory.software) (*inv->mutable_software())[k] = v;
    for (const auto& f : inventory.features) inv->add_features(f);
    for (const auto& [name, runner] : runners) {
      if (std::find(inventory.features.begin(), inventory.features.end(), name) ==
          inventory.features.end()) {
        inv->add_features(name);
      }
    }
    for (const auto& [name, path] : benches) inv->add_features("bench:" + name);
    nlohmann::json labels(options.labels);
    inv->set_labels_json(labels.dump());
    int backoff = 200;
    while (!stopping) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      Authorize(context, session_id);  // a registered session re-registers with its credential
      v1::RegisterResponse response;
      grpc::Status status = stub->Register(&context, request, &response);
      if (status.ok()) {
        const std::string& issued = response.session_credential();
        {
          absl::MutexLock lock(&mu);
          credential = issued;
        }
        if (!issued.empty()) {
          if (auto saved = spool->SaveCredential(session_id, issued); !saved.ok()) {
            return saved;
          }
        }
        if (response.heartbeat_interval_ms() > 0) {
          heartbeat_interval_ms = response.heartbeat_interval_ms();
        }
        spdlog::info("agent session {} registered with {}", session_id, options.coordinator);
        return absl::OkStatus();
      }
      if (IsFatal(status) || status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
        return FromGrpc(status, "registering with the coordinator");
      }
      spdlog::warn("cannot register with {} ({}); retrying in {} ms", options.coordinator,
                   status.error_message(), backoff);
      Nap(backoff);
      backoff = std::min(backoff * 2, options.max_backoff_ms);
    }
    return absl::CancelledError("stopped before registering");
  }

  // --- reporting: drains the spool; runs on its own thread ---------------------------------
  // Results of a session the coordinator cannot place (another coordinator's database, or an
  // earlier session whose credential this coordinator does not know) are parked: they stay in
  // the spool for `ladder agent --spool-status` and a later coordinator, are logged once, and
  // never hold back this session's reports or its leasing.
  void Park(const std::string& sid, const grpc::Status& status, int64_t pending) {
    {
      absl::MutexLock lock(&mu);
      if (!parked_sessions.insert(sid).second) return;
    }
    spdlog::warn(
        "coordinator cannot place results of session {} ({}); {} stay in the spool {} "
        "(see ladder agent --spool-status)",
        sid.substr(0, 8), status.error_message(), pending, options.spool_path);
  }
  bool Parked(const std::string& sid) {
    absl::MutexLock lock(&mu);
    return parked_sessions.count(sid) > 0;
  }
  // How long a reporting call may take: shorter once the agent is leaving, so SIGTERM ends the
  // process in bounded time whether or not the coordinator answers.
  // While draining, a call also waits for the channel to reconnect (within the drain) rather
  // than failing at once: a coordinator that is reachable again gets everything.
  void PrepareReportCall(grpc::ClientContext& context, std::chrono::seconds normal) {
    auto deadline = std::chrono::system_clock::now() + normal;
    absl::MutexLock lock(&mu);
    if (drain_deadline.has_value()) {
      deadline = std::min(deadline, *drain_deadline);
      context.set_wait_for_ready(true);
    }
    context.set_deadline(deadline);
  }

  // Returns true when it made progress.
  bool ReportOnce() {
    auto sessions = spool->PendingSessions();
    if (!sessions.ok()) {
      spdlog::error("spool: {}", sessions.status().ToString());
      return false;
    }
    bool progress = false;
    for (const std::string& sid : *sessions) {
      if (Parked(sid)) continue;
      if (ReportSession(sid)) progress = true;
      if (stopping && DrainOver()) break;
    }
    return progress;
  }

  bool DrainOver() {
    absl::MutexLock lock(&mu);
    return drain_deadline.has_value() && std::chrono::system_clock::now() >= *drain_deadline;
  }

  // Whether the coordinator's refusal means it will never take this session's results.
  bool CannotPlace(const std::string& sid, const grpc::Status& status) {
    if (sid == session_id) return false;  // our own: a re-register or a fatal error handles it
    return status.error_code() == grpc::StatusCode::NOT_FOUND || IsFatal(status);
  }

  bool ReportSession(const std::string& sid) {
    auto pending = spool->PendingResults(options.report_batch, sid);
    if (!pending.ok()) {
      spdlog::error("spool: {}", pending.status().ToString());
      return false;
    }
    bool progress = false;
    if (!pending->empty()) {
      std::map<std::string, v1::ReportRequest> requests;
      std::map<int64_t, int64_t> in_batch;  // attempt -> its records in this batch
      v1::ReportRequest& request = requests[sid];
      request.set_session_id(sid);
      for (const auto& r : *pending) {
        ++in_batch[r.attempt_id];
        if (r.is_evidence) {
          request.add_evidence()->ParseFromString(r.payload);
        } else {
          request.add_measurements()->ParseFromString(r.payload);
        }
      }
      AttachFinishes(in_batch, requests);
      grpc::ClientContext context;
      PrepareReportCall(context, std::chrono::seconds(15));
      Authorize(context, sid);
      v1::ReportResponse response;
      grpc::Status status = stub->Report(&context, request, &response);
      if (!status.ok()) {
        if (CannotPlace(sid, status)) {
          Park(sid, status, static_cast<int64_t>(pending->size()));
        } else if (IsFatal(status)) {
          SetFatal(FromGrpc(status, "reporting results"));
        } else if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
          // The batch as a whole breaks the contract (a bug in this agent): keep it for
          // inspection rather than sending it forever.
          Park(sid, status, static_cast<int64_t>(pending->size()));
        }
        return false;
      }
      std::vector<std::string> done(response.acknowledged_uuids().begin(),
                                    response.acknowledged_uuids().end());
      // Refused records are outside the design and will never be accepted.
      for (const auto& r : response.refused()) done.push_back(r.uuid());
      if (response.refused_size() > 0) {
        spdlog::warn("coordinator refused {} results of session {} (first: {})",
                     response.refused_size(), sid.substr(0, 8), response.refused(0).reason());
      }
      if (response.stale_uuids_size() > 0) {
        spdlog::warn("{} results arrived after their lease ended; stored as stale",
                     response.stale_uuids_size());
      }
      if (auto s = spool->Remove(done); !s.ok()) spdlog::error("spool: {}", s.ToString());
      for (const auto& outcome : response.finished()) {
        if (outcome.retry()) continue;  // stays spooled; finished on its own below or later
        if (!outcome.accepted())
          spdlog::warn("attempt {}: {}", outcome.attempt_id(), outcome.detail());
        (void)spool->RemoveFinish(outcome.attempt_id());
      }
      progress = true;
    }
    auto finishes = spool->PendingFinishes();
    if (!finishes.ok()) return progress;
    for (const auto& f : *finishes) {
      if (f.session_id != sid) continue;
      auto left = spool->PendingCount(f.attempt_id);
      if (!left.ok() || *left > 0) continue;  // its results go first
      v1::FinishRequest request;
      request.set_session_id(f.session_id);
      request.set_attempt_id(f.attempt_id);
      request.set_ok(f.ok);
      request.set_failure_reason(f.reason);
      request.set_measurement_count(f.measurement_count);
      request.set_evidence_count(f.evidence_count);
      grpc::ClientContext context;
      PrepareReportCall(context, std::chrono::seconds(15));
      Authorize(context, f.session_id);
      v1::FinishResponse response;
      grpc::Status status = stub->Finish(&context, request, &response);
      const auto code = status.error_code();
      if (status.ok() || code == grpc::StatusCode::NOT_FOUND ||
          code == grpc::StatusCode::INVALID_ARGUMENT ||
          (code == grpc::StatusCode::PERMISSION_DENIED && f.session_id == session_id &&
           status.error_message().find("attempt") != std::string::npos)) {
        // Done, or an answer no retry can change: the finish leaves the spool.
        if (status.ok() && !response.accepted()) {
          spdlog::warn("attempt {}: {}", f.attempt_id, response.detail());
        } else if (!status.ok()) {
          spdlog::warn("attempt {}: finish refused: {}", f.attempt_id, status.error_message());
        }
        (void)spool->RemoveFinish(f.attempt_id);
        progress = true;
      } else if (code == grpc::StatusCode::FAILED_PRECONDITION && f.ok &&
                 status.error_message().find("slots of the design filled") != std::string::npos) {
        // Every result of the attempt is delivered, yet the design is not filled: the runner
        // left required slots empty. Say so now, as a failure the coordinator retries
        // elsewhere, instead of letting the lease expire with no reason.
        SpooledFinish failed = f;
        failed.ok = false;
        failed.reason = "the runner did not fill the design: " + status.error_message();
        spdlog::warn("attempt {}: {}", f.attempt_id, failed.reason);
        if (auto s = spool->AddFinish(failed); !s.ok()) spdlog::error("spool: {}", s.ToString());
        progress = true;
      } else if (CannotPlace(f.session_id, status)) {
        Park(f.session_id, status, 1);
        return progress;
      } else if (IsFatal(status)) {
        SetFatal(FromGrpc(status, "finishing an attempt"));
        return progress;
      } else {
        return progress;  // unreachable or not yet complete: try again later
      }
    }
    return progress;
  }

  // A finished attempt whose last results are all in this batch rides along with them: the
  // coordinator finishes it once they are stored, saving a Finish round trip per unit.
  void AttachFinishes(const std::map<int64_t, int64_t>& in_batch,
                      std::map<std::string, v1::ReportRequest>& requests) {
    auto finishes = spool->PendingFinishes();
    if (!finishes.ok()) return;
    for (const auto& f : *finishes) {
      auto request = requests.find(f.session_id);
      if (request == requests.end()) continue;
      auto left = spool->PendingCount(f.attempt_id);
      auto here = in_batch.find(f.attempt_id);
      if (!left.ok() || *left != (here == in_batch.end() ? 0 : here->second)) continue;
      v1::FinishRequest* finish = request->second.add_finishes();
      finish->set_session_id(f.session_id);
      finish->set_attempt_id(f.attempt_id);
      finish->set_ok(f.ok);
      finish->set_failure_reason(f.reason);
      finish->set_measurement_count(f.measurement_count);
      finish->set_evidence_count(f.evidence_count);
    }
  }

  // True when nothing but parked sessions' results is waiting.
  bool NothingToReport() {
    auto sessions = spool->PendingSessions();
    if (!sessions.ok()) return false;
    for (const auto& sid : *sessions) {
      if (!Parked(sid)) return false;
    }
    return true;
  }

  void ReporterLoop() {
    int backoff = 100;
    while (true) {
      // Whether the agent is leaving is read before the spool is looked at: everything the last
      // unit produced was spooled before `reporter_done` was set, so a spool found empty after
      // seeing it set is really empty. (Deciding on emptiness seen before a wait let the drain
      // end with the last unit's results still spooled.)
      bool leaving;
      {
        absl::MutexLock lock(&mu);
        leaving = reporter_done;
      }
      const bool progress = ReportOnce();
      const bool empty = NothingToReport() || DrainOver();
      {
        absl::MutexLock lock(&mu);
        if (leaving && (empty || !fatal.ok())) return;
        if (progress) {
          backoff = 100;
          continue;
        }
        auto until =
            std::chrono::system_clock::now() + std::chrono::milliseconds(empty ? 500 : backoff);
        // Leaving: wake at the end of the drain whatever the backoff has grown to.
        if (drain_deadline.has_value()) until = std::min(until, *drain_deadline);
        wake.WaitWithDeadline(&mu, absl::FromChrono(until));
        if (drain_deadline.has_value() && std::chrono::system_clock::now() >= *drain_deadline) {
          return;
        }
      }
      if (!empty) backoff = std::min(backoff * 2, options.max_backoff_ms);
    }
  }

  // --- heartbeats: keep leases alive and learn about cancellation ---------------------------
  void HeartbeatLoop() {
    while (true) {
      {
        absl::MutexLock lock(&mu);
        const absl::Time until = absl::Now() + absl::Milliseconds(heartbeat_interval_ms.load());
        while (!heartbeat_done) {
          if (wake.WaitWithDeadline(&mu, until)) break;  // timed out: time to beat
        }
      }
      v1::HeartbeatRequest request;
      request.set_session_id(session_id);
      {
        absl::MutexLock lock(&mu);
        if (heartbeat_done) return;
        for (int64_t id : current_attempts) request.add_attempt_ids(id);
      }
      // A unit that ended but whose finish is not yet acknowledged is still this session's
      // lease: keep it alive while its results are delivered (a drain after SIGTERM on a
      // loaded machine can outlast a lease).
      if (auto finishes = spool->PendingFinishes(); finishes.ok()) {
        for (const auto& f : *finishes) {
          if (f.session_id == session_id) request.add_attempt_ids(f.attempt_id);
        }
      }
      if (auto pending = spool->TotalPending(); pending.ok()) {
        request.set_spool_pending_records(*pending);
      }
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      Authorize(context, session_id);
      v1::HeartbeatResponse response;
      grpc::Status status = stub->Heartbeat(&context, request, &response);
      if (!status.ok()) {
        if (IsFatal(status)) SetFatal(FromGrpc(status, "heartbeat"));
        continue;
      }
      if (response.cancelled_attempt_ids_size() > 0) {
        absl::MutexLock lock(&mu);
        for (int64_t id : response.cancelled_attempt_ids()) {
          if (current_attempts.count(id) && !cancelled_attempts.count(id)) {
            spdlog::warn("coordinator says stop attempt {} (cancelled or lease lost)", id);
          }
          cancelled_attempts.insert(id);
        }
      }
    }
  }

  void RunUnit(const v1::LeaseResponse& lease) {
    runner::UnitWork work;
    work.attempt_id = lease.attempt_id();
    work.unit_id = lease.unit_id();
    work.run_id = lease.run_id();
    work.runner = lease.runner();
    work.runner_config = lease.runner_config_json();
    work.processes = lease.processes();
    work.rounds = lease.rounds();
    work.seed = lease.seed();
    absl::Status status;
    for (const auto& c : lease.cells()) {
      auto params = nlohmann::json::parse(c.params_json(), nullptr, false);
      if (params.is_discarded() || !params.is_object()) {
        status = absl::InvalidArgumentError(absl::StrCat("cell ", c.key(), ": bad params JSON"));
        break;
      }
      work.cells.push_back(runner::CellWork{c.cell_id(), c.key(), std::move(params)});
    }
    {
      absl::MutexLock lock(&mu);
      current_attempts.insert(work.attempt_id);
    }
    Sink sink(this, work.attempt_id);
    const auto started = std::chrono::steady_clock::now();
    if (status.ok()) {
      auto runner = runners.find(work.runner);
      if (runner == runners.end()) {
        status =
            absl::UnimplementedError(absl::StrCat("this agent has no runner '", work.runner, "'"));
      } else {
        spdlog::info("attempt {}: running {} cells ({} processes x {} rounds) with the {} runner",
                     work.attempt_id, work.cells.size(), work.processes, work.rounds, work.runner);
        // A runner reports failures as statuses; an exception escaping one (a library that
        // throws on what an engine sent) fails this attempt, never the agent.
        try {
          status = runner->second->Run(work, sink);
        } catch (const std::exception& e) {
          status = absl::InternalError(
              absl::StrCat("the ", work.runner, " runner threw: ", ToValidUtf8(e.what())));
        }
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    bool coordinator_cancelled;
    {
      absl::MutexLock lock(&mu);
      coordinator_cancelled = cancelled_attempts.count(work.attempt_id) > 0;
    }
    if (status.ok()) {
      spdlog::info("attempt {} measured {} values in {:.1f} s", work.attempt_id, sink.measurements,
                   seconds);
    } else if (coordinator_cancelled) {
      spdlog::info("attempt {} stopped: cancelled by the coordinator", work.attempt_id);
    } else if (release_current) {
      spdlog::info("attempt {} abandoned: agent stopping; releasing it", work.attempt_id);
    } else {
      spdlog::warn("attempt {} failed: {}", work.attempt_id, std::string(status.message()));
    }
    // Cancelled or released attempts need no Finish: the coordinator already ended them, or
    // Release will.
    if (!coordinator_cancelled && !(release_current && !status.ok())) {
      SpooledFinish finish{
          session_id,        work.attempt_id,
          status.ok(),       status.ok() ? "" : ToValidUtf8(std::string(status.message())),
          sink.measurements, sink.evidence};
      if (auto s = spool->AddFinish(finish); !s.ok()) {
        spdlog::error("spool: cannot record the end of attempt {}: {}", work.attempt_id,
                      s.ToString());
      }
    }
    {
      absl::MutexLock lock(&mu);
      current_attempts.erase(work.attempt_id);
    }
    wake.SignalAll();
  }

  absl::Status Run() {
    RETURN_IF_ERROR(Register());
    std::thread reporter([this] { ReporterLoop(); });
    std::thread heartbeat([this] { HeartbeatLoop(); });
    int units = 0;
    int backoff = 200;
    while (!stopping) {
      if (options.units_limit > 0 && units >= options.units_limit) break;
      v1::LeaseRequest request;
      request.set_session_id(session_id);
      request.set_wait_ms(options.lease_wait_ms);
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(options.lease_wait_ms + 10000));
      Authorize(context, session_id);
      v1::LeaseResponse lease;
      {
        absl::MutexLock lock(&mu);
        if (stopping) break;
        lease_context = &context;
      }
      grpc::Status status = stub->Lease(&context, request, &lease);
      {
        absl::MutexLock lock(&mu);
        lease_context = nullptr;
      }
      if (stopping && status.error_code() == grpc::StatusCode::CANCELLED) break;
      if (!status.ok()) {
        if (IsFatal(status)) {
          SetFatal(FromGrpc(status, "leasing work"));
          break;
        }
        if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
          // The coordinator lost our session (new database): register again.
          if (auto s = Register(); !s.ok()) {
            SetFatal(s);
            break;
          }
          continue;
        }
        spdlog::warn("lease from {} failed ({}); retrying in {} ms", options.coordinator,
                     status.error_message(), backoff);
        Nap(backoff);
        backoff = std::min(backoff * 2, options.max_backoff_ms);
        continue;
      }
      backoff = 200;
      if (!lease.has_work()) {
        if (options.exit_when_idle) break;
        continue;
      }
      RunUnit(lease);
      ++units;
    }
    // Leaving: deliver what we have, then tell the coordinator we are gone. After a signal
    // both are bounded (kDrainOnStop, then a short Release) so a preempted VM or a systemd
    // stop ends the process in seconds; what is not delivered stays in the spool.
    {
      absl::MutexLock lock(&mu);
      reporter_done = true;
      if (stopping) {
        // Released: a few seconds. Finishing the unit (--grace finish): until everything the
        // unit produced is acknowledged, within the grace the operator gave from the signal,
        // keeping the last seconds for the Release.
        auto deadline = std::chrono::system_clock::now() + kDrainOnStop;
        if (!release_current && finish_requested_at.has_value()) {
          deadline =
              std::max(deadline, *finish_requested_at +
                                     std::chrono::seconds(options.grace_seconds) - kReleaseOnStop);
        }
        drain_deadline = deadline;
        // Reconnect now, not when the backoff of a long outage would next try.
        grpc::experimental::ChannelResetConnectionBackoff(channel.get());
      }
    }
    wake.SignalAll();
    reporter.join();
    {
      absl::MutexLock lock(&mu);
      heartbeat_done = true;
    }
    wake.SignalAll();
    heartbeat.join();
    {
      absl::MutexLock lock(&mu);
      if (!fatal.ok()) return fatal;
    }
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         (release_current ? kReleaseOnStop : std::chrono::seconds(5)));
    Authorize(context, session_id);
    v1::ReleaseRequest request;
    request.set_session_id(session_id);
    auto pending = spool->TotalPending();
    const bool undelivered = pending.ok() && *pending > 0;
    request.set_reason(release_current ? "agent stopped (signal)"
                       : undelivered
                           ? absl::StrCat("agent stopped before the coordinator acknowledged ",
                                          *pending, " of its results (they stay in its spool)")
                           : "agent finished");
    v1::ReleaseResponse response;
    grpc::Status status = stub->Release(&context, request, &response);
    if (!status.ok()) {
      spdlog::warn("could not release session {}: {}", session_id, status.error_message());
    }
    auto left = spool->TotalPending();
    if (left.ok() && *left > 0) {
      spdlog::warn("{} results are still in the spool {}; they will be reported next start", *left,
                   options.spool_path);
    }
    return absl::OkStatus();
  }
};

absl::StatusOr<std::string> DescribeSpool(const std::string& spool_path, bool json) {
  if (!std::ifstream(spool_path)) {
    return absl::NotFoundError(absl::StrCat("no spool at ", spool_path));
  }
  ASSIGN_OR_RETURN(auto spool, Spool::Open(spool_path));
  ASSIGN_OR_RETURN(auto backlog, spool->Backlog());
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& b : backlog) {
      out.push_back(
          {{"session_id", b.session_id}, {"results", b.results}, {"finishes", b.finishes}});
    }
    return out.dump(2) + "\n";
  }
  if (backlog.empty()) return absl::StrCat(spool_path, ": empty (every result was delivered)\n");
  std::string text = absl::StrCat(spool_path, ": results not yet acknowledged by a coordinator\n",
                                  "session                               results  finishes\n");
  for (const auto& b : backlog) {
    text += absl::StrFormat("%-36s  %7d  %8d\n", b.session_id, b.results, b.finishes);
  }
  text +=
      "They are reported when an agent with this spool reaches the coordinator that leased "
      "them; another coordinator refuses them and they stay here.\n";
  return text;
}

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() = default;

absl::StatusOr<std::unique_ptr<Agent>> Agent::Create(const AgentOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  // First: detecting the inventory sets the environment every process of this agent inherits
  // (its GPUs, NCCL), before gRPC or anything else starts a thread that reads it.
  InventoryOptions inventory_options;
  if (!options.gpus.empty()) {
    ASSIGN_OR_RETURN(inventory_options.gpus, ParseGpuList(options.gpus));
  }
  if (!options.fake_gpus_json.empty()) {
    inventory_options.fake_gpus.emplace();
    for (const auto& g : nlohmann::json::parse(options.fake_gpus_json)) {
      inventory_options.fake_gpus->push_back(
          GpuInfo{g.value("vendor", ""), g.value("name", ""), g.value("arch", ""),
                  g.value("uuid", ""), g.value("memory_mib", int64_t{0}), g.value("driver", "")});
    }
  }
  ASSIGN_OR_RETURN(impl->inventory, DetectInventory(inventory_options));
  if (impl->options.spool_path.empty()) impl->options.spool_path = "ladder-spool.db";
  ASSIGN_OR_RETURN(impl->spool, Spool::Open(impl->options.spool_path));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // Reconnect quickly after a coordinator restart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::ChannelCredentials> credentials,
      proto::MakeChannelCredentials(proto::ClientTls{options.tls, options.tls_ca_file,
                                                     options.tls_cert_file, options.tls_key_file}));
  if (!options.token_file.empty()) {
    ASSIGN_OR_RETURN(std::string token, ReadTextFile(options.token_file, "--token-file"));
    while (!token.empty() &&
           (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
      token.pop_back();
    }
    if (token.empty()) {
      return absl::InvalidArgumentError("--token-file: " + options.token_file + " is empty");
    }
    impl->join_token = std::move(token);
  }
  impl->channel = grpc::CreateCustomChannel(options.coordinator, credentials, args);
  impl->stub = v1::AgentService::NewStub(impl->channel);
  auto kernel = MakeKernelRunner();
  std::string name(kernel->name());
  impl->runners[name] = std::move(kernel);
#ifdef LADDER_HAVE_COMMAND
  {
    command::BenchRegistry registry;
    for (const auto& flag : options.benches) {
      if (absl::Status s = registry.Add(flag); !s.ok()) {
        return absl::InvalidArgumentError(std::string(s.message()));
      }
    }
    for (const auto& file : options.bench_files) {
      if (absl::Status s = registry.AddFile(file); !s.ok()) {
        return absl::InvalidArgumentError(std::string(s.message()));
      }
    }
    if (registry.programs().size() > 48) {
      return absl::InvalidArgumentError("--bench: at most 48 programs per agent");
    }
    impl->benches = registry.programs();
    command::CommandRunnerOptions command_options;
    command_options.programs = registry.programs();
    command_options.device_turn = &DeviceTurn();
    impl->runners["command"] = command::MakeCommandRunner(std::move(command_options));
  }
#else
  if (!options.benches.empty() || !options.bench_files.empty()) {
    return absl::InvalidArgumentError(
        "--bench: this ladder was built without the command runner (LADDER_ENGINES=OFF)");
  }
#endif
#ifdef LADDER_HAVE_ENGINES
  {
    // The synthetic engine is this same binary (`ladder engine synthetic`).
    engines::EngineRunnerOptions engine_options;
    engine_options.recipe_context.ladder_binary =
        options.ladder_binary.empty() ? std::string("/proc/self/exe") : options.ladder_binary;
    engine_options.log_dir = options.engine_log_dir;
    engine_options.device_turn = &DeviceTurn();
    impl->runners["engine"] = std::make_unique<engines::EngineRunner>(engine_options);
  }
#endif
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

std::vector<std::string> Agent::bench_names() const {
  std::vector<std::string> names;
  for (const auto& [name, path] : impl_->benches) names.push_back(name);
  return names;
}

void Agent::AddRunner(std::unique_ptr<runner::Runner> runner) {
  std::string name(runner->name());
  impl_->runners[name] = std::move(runner);
}

absl::Status Agent::Run() { return impl_->Run(); }

void Agent::Stop(StopMode mode) noexcept {
  if (mode == StopMode::kRelease) impl_->release_current = true;
  absl::MutexLock lock(&impl_->mu);
  if (mode == StopMode::kFinishUnit && !impl_->finish_requested_at.has_value()) {
    impl_->finish_requested_at = std::chrono::system_clock::now();
  }
  impl_->stopping = true;
  if (impl_->lease_context) impl_->lease_context->TryCancel();
  impl_->wake.SignalAll();
}

const std::string& Agent::session_id() const { return impl_->session_id; }

}  // namespace ladder::agent
