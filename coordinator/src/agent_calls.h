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

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ladder/coordinator/scheduler.h"
#include "ladder/db/store.h"
#include "ladder/v1/agent.grpc.pb.h"

namespace ladder::coordinator {

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
  // `fill` writes a granted lease into the response.
  LeaseDispatcher(Scheduler* scheduler,
                  std::function<grpc::Status(const absl::StatusOr<std::optional<Lease>>&,
                                             v1::LeaseResponse*, const std::string&)>
                      answer);
  ~LeaseDispatcher() { Stop(); }

  // Serves the call now if work is there; otherwise it waits (the call must be kBusy, owned by
  // the caller). `seen` is the work generation read before the caller's own attempt.
  void Wait(std::shared_ptr<LeaseCall> call, uint64_t seen);
  // Answers every waiting call "unavailable" and joins the thread. Idempotent.
  void Stop();
  size_t waiting() const;

 private:
  void Loop();
  // Tries the call once (it must be kBusy); true when it was finished.
  bool Serve(LeaseCall& call, std::chrono::steady_clock::time_point now);

  Scheduler* const scheduler_;
  const std::function<grpc::Status(const absl::StatusOr<std::optional<Lease>>&,
                                   v1::LeaseResponse*, const std::string&)>
      answer_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<LeaseCall>> waiting_;  // oldest first
  bool stopping_ = false;
  std::thread thread_;
};

class ReportIngestor {
 public:
  struct Call {
    db::ReportIn report;
    // Attempts the report completes, finished once its records are committed.
    std::vector<v1::FinishRequest> finishes;
    v1::ReportResponse* response = nullptr;
    grpc::ServerUnaryReactor* reactor = nullptr;
    size_t records = 0;
  };
  // `max_queued_records` bounds the queue: past it, calls are refused (RESOURCE_EXHAUSTED) and
  // the agent, which keeps its results spooled, retries later.
  // `failure` turns a store error into the call's status (and logs the coordinator's own).
  ReportIngestor(Scheduler* scheduler, size_t max_queued_records,
                 std::function<grpc::Status(const absl::Status&, const std::string&)> failure);
  ~ReportIngestor() { Stop(); }

  // Queues the call, or finishes it at once with an error (full queue, stopped).
  void Add(Call call);
  // Writes what is queued, then joins the thread. Idempotent.
  void Stop();

 private:
  void Loop();
  void Write(std::vector<Call> batch);

  Scheduler* const scheduler_;
  const size_t max_queued_records_;
  const std::function<grpc::Status(const absl::Status&, const std::string&)> failure_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Call> queue_;
  size_t queued_records_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ladder::coordinator
