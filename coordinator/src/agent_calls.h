// The two agent calls that must not hold a thread each at a thousand agents. Private.
//
// LeaseDispatcher: a Lease that finds no work waits as a LeaseCall (a gRPC callback reactor) in
// a list; one dispatcher thread serves the list whenever the scheduler signals that work may be
// available, and answers "no work" when a call's wait is over. A thousand idle agents cost a
// thousand small objects, not a thousand threads.
//
// ReportIngestor: Reports are queued and written by one thread, all that are waiting in one
// transaction (group commit); each call is answered only after its transaction committed, so
// nothing is acknowledged that is not stored.
#pragma once

#include "metrics.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "ladder/common/mutex.h"
#include "ladder/coordinator/scheduler.h"
#include "ladder/db/store.h"
#include "ladder/v1/agent.grpc.pb.h"

namespace ladder::coordinator {

// The scheduler's view of a finish on the wire (a Finish call, or one riding on a Report).
FinishIn FinishFromRequest(const std::string& session_id, const v1::FinishRequest& request);

// One Lease RPC. Exactly one party finishes it: the handler, the dispatcher or a cancellation.
// Whoever moves it from kWaiting owns it until it is finished or put back.
class LeaseCall final : public grpc::ServerUnaryReactor {
 public:
  LeaseCall(std::string session_id, v1::LeaseResponse* response,
            std::chrono::steady_clock::time_point deadline)
      : session_id_(std::move(session_id)), response_(response), deadline_(deadline) {}

  // Created owned by its creator (kBusy); `self` keeps it alive until gRPC is done with it.
  static std::shared_ptr<LeaseCall> Create(std::string session_id, v1::LeaseResponse* response,
                                           std::chrono::steady_clock::time_point deadline);

  const std::string& session_id() const { return session_id_; }
  v1::LeaseResponse* response() const { return response_; }
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }

  // kWaiting -> kBusy. False when it was already finished (cancelled).
  bool TryAcquire();
  // kBusy -> kWaiting; finishes it as cancelled when a cancellation came meanwhile.
  void PutBack();
  // kBusy -> done.
  void Complete(const grpc::Status& status);

  void OnCancel() override;
  void OnDone() override;

 private:
  enum State : int { kWaiting, kBusy, kDone };
  const std::string session_id_;
  v1::LeaseResponse* const response_;
  const std::chrono::steady_clock::time_point deadline_;
  std::atomic<int> state_{kBusy};
  std::atomic<bool> cancelled_{false};
  std::shared_ptr<LeaseCall> self_;
};

class LeaseDispatcher {
 public:
  using Answer = std::function<grpc::Status(const absl::StatusOr<std::optional<Lease>>&,
                                            v1::LeaseResponse*, const std::string&)>;
  // `answer` turns a lease outcome into the call's status and response. Registers itself as the
  // scheduler's work listener.
  // `revoked(session)` (may be empty) tells a session whose token was revoked: its calls are
  // answered UNAUTHENTICATED and never leased to.
  LeaseDispatcher(Scheduler* scheduler, Answer answer,
                  std::function<bool(const std::string&)> revoked = {});
  ~LeaseDispatcher() { Stop(); }

  // Takes a new call (kBusy, owned by the caller until now): it is tried at once, with the other
  // calls that arrived meanwhile, in one batch; then it waits for work or for its deadline.
  void Add(std::shared_ptr<LeaseCall> call);
  // Answers the waiting calls of `sessions` with `status` now (their token was revoked).
  // Returns how many were answered.
  size_t EndSessions(const std::set<std::string>& sessions, const grpc::Status& status);
  // Calls waiting for work now (a gauge).
  size_t waiting() ABSL_LOCKS_EXCLUDED(mu_);
  // Answers every call "unavailable" and joins the thread. Idempotent.
  void Stop();

 private:
  void Loop();
  bool IsRevoked(const std::string& session_id) const;
  static grpc::Status RevokedStatus();
  // Work may be available (the scheduler's listener).
  void Poke();
  // Tries every call (each kBusy) in batches; returns those still waiting (kBusy).
  std::vector<std::shared_ptr<LeaseCall>> Serve(std::vector<std::shared_ptr<LeaseCall>> calls);

  Scheduler* const scheduler_;
  const Answer answer_;
  const std::function<bool(const std::string&)> revoked_;
  Mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<LeaseCall>> incoming_ ABSL_GUARDED_BY(mu_);  // new calls, kBusy
  std::vector<std::shared_ptr<LeaseCall>> waiting_ ABSL_GUARDED_BY(mu_);   // tried, kWaiting
  // The earliest deadline in waiting_.
  std::chrono::steady_clock::time_point next_deadline_ ABSL_GUARDED_BY(mu_);
  bool work_signalled_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class ReportIngestor {
 public:
  struct Call {
    db::ReportIn report;
    // Records refused before the store saw them (their own fields break the contract).
    std::vector<db::RefusedRecord> refused;
    // Attempts the report completes, finished once its records are committed.
    std::vector<v1::FinishRequest> finishes;
    v1::ReportResponse* response = nullptr;
    grpc::ServerUnaryReactor* reactor = nullptr;
    size_t records = 0;
  };
  // `max_queued_records` bounds the queue: past it, calls are refused (RESOURCE_EXHAUSTED) and
  // the agent, which keeps its results spooled, retries later.
  // `failure` turns a store error into the call's status (and logs the coordinator's own).
  // `metrics` (may be null) counts what is stored and refused and times each group commit.
  ReportIngestor(Scheduler* scheduler, size_t max_queued_records,
                 std::function<grpc::Status(const absl::Status&, const std::string&)> failure,
                 Metrics* metrics = nullptr);
  ~ReportIngestor() { Stop(); }

  // Queues the call, or finishes it at once with an error (full queue, stopped).
  void Add(Call call);
  // Writes what is queued, then joins the thread. Idempotent.
  void Stop();

 private:
  void Loop();
  void Write(std::vector<Call> batch);

  Scheduler* const scheduler_;
  Metrics* const metrics_;
  const size_t max_queued_records_;
  const std::function<grpc::Status(const absl::Status&, const std::string&)> failure_;
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<Call> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_records_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ladder::coordinator
