#include "agent_calls.h"
#include "text.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace ladder::coordinator {

namespace {
constexpr size_t kMaxFailureReasonBytes = 4096;
}  // namespace

FinishIn FinishFromRequest(const std::string& session_id, const v1::FinishRequest& request) {
  FinishIn finish;
  finish.session_id = session_id;
  finish.attempt_id = request.attempt_id();
  finish.outcome = request.ok() ? AttemptOutcome::kSucceeded : AttemptOutcome::kFailed;
  // At most 4 KiB (longer is refused by the scheduler, INVALID_ARGUMENT); what is stored is
  // escaped like a log line (text.h), cut back to 4 KiB with a marker if escaping grew it.
  finish.failure_reason = request.failure_reason().size() > kMaxFailureReasonBytes
                              ? request.failure_reason()
                              : BoundText(request.failure_reason(), kMaxFailureReasonBytes);
  finish.measurement_count = request.measurement_count();
  finish.evidence_count = request.evidence_count();
  return finish;
}
namespace {

// A dispatcher pass also runs this often with no signal, to answer calls whose wait is over.
constexpr auto kMaxDispatchSleep = std::chrono::milliseconds(100);

// Leases per store transaction.
constexpr size_t kMaxLeaseBatch = 256;

// Records per transaction: large enough to amortise the commit, small enough that one batch
// does not hold the store for long.
constexpr size_t kMaxBatchRecords = 20000;

}  // namespace

std::shared_ptr<LeaseCall> LeaseCall::Create(std::string session_id, v1::LeaseResponse* response,
                                             std::chrono::steady_clock::time_point deadline) {
  auto call = std::make_shared<LeaseCall>(std::move(session_id), response, deadline);
  call->self_ = call;
  return call;
}

bool LeaseCall::TryAcquire() {
  int expected = kWaiting;
  return state_.compare_exchange_strong(expected, kBusy);
}

void LeaseCall::PutBack() {
  state_.store(kWaiting);
  // A cancellation that came while this was busy could not finish it: do it now.
  if (cancelled_.load() && TryAcquire()) Complete(grpc::Status::CANCELLED);
}

void LeaseCall::Complete(const grpc::Status& status) {
  state_.store(kDone);
  Finish(status);
}

void LeaseCall::OnCancel() {
  cancelled_.store(true);
  int expected = kWaiting;
  if (state_.compare_exchange_strong(expected, kDone)) Finish(grpc::Status::CANCELLED);
}

void LeaseCall::OnDone() { self_.reset(); }

LeaseDispatcher::LeaseDispatcher(Scheduler* scheduler, Answer answer,
                                 std::function<bool(const std::string&)> revoked)
    : scheduler_(scheduler),
      answer_(std::move(answer)),
      revoked_(std::move(revoked)),
      next_deadline_(std::chrono::steady_clock::now() + kMaxDispatchSleep) {
  scheduler_->SetWorkListener([this] { Poke(); });
  thread_ = std::thread([this] { Loop(); });
}

void LeaseDispatcher::Add(std::shared_ptr<LeaseCall> call) {
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      incoming_.push_back(std::move(call));
      cv_.notify_one();
      return;
    }
  }
  call->Complete(grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator is shutting down"));
}

void LeaseDispatcher::Poke() {
  MutexLock lock(&mu_);
  work_signalled_ = true;
  cv_.notify_one();
}

std::vector<std::shared_ptr<LeaseCall>> LeaseDispatcher::Serve(
    std::vector<std::shared_ptr<LeaseCall>> calls) {
  std::vector<std::shared_ptr<LeaseCall>> still;
  for (size_t begin = 0; begin < calls.size(); begin += kMaxLeaseBatch) {
    const size_t end = std::min(calls.size(), begin + kMaxLeaseBatch);
    std::vector<std::string> sessions;
    std::vector<size_t> asked;  // positions in `calls` of the sessions asked for work
    for (size_t i = begin; i < end; ++i) {
      if (IsRevoked(calls[i]->session_id())) {
        calls[i]->Complete(RevokedStatus());
        continue;
      }
      sessions.push_back(calls[i]->session_id());
      asked.push_back(i);
    }
    auto leases = scheduler_->TryLeaseBatch(sessions);
    const auto now = std::chrono::steady_clock::now();
    for (size_t k = 0; k < asked.size(); ++k) {
      const size_t i = asked[k];
      LeaseCall& call = *calls[i];
      const auto& lease = leases[k];
      // Revoked while the batch was leased: the unit goes back to the queue at once (the
      // revocation's own release may have run before this lease was taken).
      if (lease.ok() && lease->has_value() && IsRevoked(call.session_id())) {
        (void)scheduler_->Release(call.session_id(), "its join token was revoked");
        call.Complete(RevokedStatus());
        continue;
      }
      if (!lease.ok() || lease->has_value() || now >= call.deadline()) {
        call.Complete(answer_(lease, call.response(), call.session_id()));
      } else {
        still.push_back(std::move(calls[i]));
      }
    }
  }
  return still;
}

bool LeaseDispatcher::IsRevoked(const std::string& session_id) const {
  return revoked_ && revoked_(session_id);
}

grpc::Status LeaseDispatcher::RevokedStatus() {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "the token this session joined with was revoked");
}

size_t LeaseDispatcher::EndSessions(const std::set<std::string>& sessions,
                                    const grpc::Status& status) {
  std::vector<std::shared_ptr<LeaseCall>> incoming, waiting;
  {
    MutexLock lock(&mu_);
    auto take = [&](std::vector<std::shared_ptr<LeaseCall>>& from,
                    std::vector<std::shared_ptr<LeaseCall>>& to) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      for (auto it = from.begin(); it != from.end();) {
        if (sessions.count((*it)->session_id()) != 0) {
          to.push_back(std::move(*it));
          it = from.erase(it);
        } else {
          ++it;
        }
      }
    };
    take(incoming_, incoming);
    take(waiting_, waiting);
  }
  // A call in incoming_ is kBusy and owned by the list; one in waiting_ is kWaiting, or was
  // cancelled meanwhile (then it is finished already).
  size_t answered = 0;
  for (auto& call : incoming) {
    call->Complete(status);
    ++answered;
  }
  for (auto& call : waiting) {
    if (!call->TryAcquire()) continue;
    call->Complete(status);
    ++answered;
  }
  return answered;
}

size_t LeaseDispatcher::waiting() {
  MutexLock lock(&mu_);
  return waiting_.size() + incoming_.size();
}

void LeaseDispatcher::Loop() {
  while (true) {
    std::vector<std::shared_ptr<LeaseCall>> calls, waited;
    {
      MutexLock lock(&mu_);
      mu_.WaitUntil(cv_, next_deadline_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stopping_ || !incoming_.empty() || work_signalled_;  // called with mu_ held
      });
      if (stopping_) return;
      calls.swap(incoming_);
      // The calls already waiting are tried again only when work may have come or a deadline
      // is due: a new call does not cost a pass over a thousand idle ones.
      const auto now = std::chrono::steady_clock::now();
      if (work_signalled_ || now >= next_deadline_) {
        work_signalled_ = false;
        waited.swap(waiting_);
        next_deadline_ = now + kMaxDispatchSleep;
      }
    }
    for (auto& call : waited) {
      if (call->TryAcquire()) calls.push_back(std::move(call));  // else: cancelled meanwhile
    }
    std::vector<std::shared_ptr<LeaseCall>> still = Serve(std::move(calls));
    MutexLock lock(&mu_);
    for (auto& call : still) {
      next_deadline_ = std::min(next_deadline_, call->deadline());
      // Back before it is visible to the next pass, which skips calls it cannot acquire.
      call->PutBack();
      waiting_.push_back(std::move(call));
    }
  }
}

void LeaseDispatcher::Stop() {
  scheduler_->SetWorkListener(nullptr);  // the scheduler may outlive this dispatcher
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  std::vector<std::shared_ptr<LeaseCall>> incoming, waiting;
  {
    MutexLock lock(&mu_);
    incoming.swap(incoming_);
    waiting.swap(waiting_);
  }
  const grpc::Status unavailable(grpc::StatusCode::UNAVAILABLE, "coordinator is shutting down");
  for (auto& call : incoming) call->Complete(unavailable);
  for (auto& call : waiting) {
    if (call->TryAcquire()) call->Complete(unavailable);
  }
}

ReportIngestor::ReportIngestor(
    Scheduler* scheduler, size_t max_queued_records,
    std::function<grpc::Status(const absl::Status&, const std::string&)> failure, Metrics* metrics)
    : scheduler_(scheduler),
      metrics_(metrics),
      max_queued_records_(max_queued_records),
      failure_(std::move(failure)) {
  thread_ = std::thread([this] { Loop(); });
}

void ReportIngestor::Add(Call call) {
  bool stopping = false;
  {
    MutexLock lock(&mu_);
    stopping = stopping_;
    if (!stopping && queued_records_ + call.records <= max_queued_records_) {
      queued_records_ += call.records;
      queue_.push_back(std::move(call));
      cv_.notify_one();
      return;
    }
  }
  if (metrics_ != nullptr) {
    metrics_->Add(Metrics::Counter::kReportsRejected,
                  Metrics::Labels({{"code", stopping ? "UNAVAILABLE" : "RESOURCE_EXHAUSTED"}}));
  }
  // Outside the lock: finishing may run gRPC code.
  call.reactor->Finish(
      stopping ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator is shutting down")
               : grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                              "coordinator busy writing results; retry shortly"));
}

void ReportIngestor::Loop() {
  while (true) {
    std::vector<Call> batch;
    {
      MutexLock lock(&mu_);
      mu_.Wait(cv_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stopping_ || !queue_.empty();  // called with mu_ held
      });
      if (queue_.empty()) return;  // stopping, and everything queued is written
      size_t records = 0;
      while (!queue_.empty() &&
             (batch.empty() || records + queue_.front().records <= kMaxBatchRecords)) {
        records += queue_.front().records;
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      queued_records_ -= records;
    }
    Write(std::move(batch));
  }
}

void ReportIngestor::Write(std::vector<Call> batch) {
  std::vector<db::ReportIn> reports;
  std::vector<std::string> sessions;
  reports.reserve(batch.size());
  for (auto& call : batch) {
    sessions.push_back(call.report.session_id);
    reports.push_back(std::move(call.report));
  }
  size_t records = 0;
  for (const auto& call : batch) records += call.records;
  const auto commit_start = std::chrono::steady_clock::now();
  auto outcomes = scheduler_->ReportBatch(std::move(reports));
  if (metrics_ != nullptr) {
    metrics_->Observe(
        Metrics::Histogram::kCommitDuration,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - commit_start).count());
    metrics_->Observe(Metrics::Histogram::kCommitRecords, static_cast<double>(records));
  }
  // The finishes riding on the stored reports, ended together once their results are in.
  std::vector<FinishIn> finishes;
  std::vector<v1::FinishOutcome*> finish_outcomes;
  for (size_t i = 0; i < batch.size(); ++i) {
    Call& call = batch[i];
    const auto& outcome = outcomes[i];
    if (!outcome.ok()) continue;
    for (const auto& uuid : outcome->stored) call.response->add_acknowledged_uuids(uuid);
    for (const auto& uuid : outcome->stale) call.response->add_stale_uuids(uuid);
    for (const std::vector<db::RefusedRecord>* list :
         {static_cast<const std::vector<db::RefusedRecord>*>(&call.refused), &outcome->refused}) {
      for (const auto& r : *list) {
        auto* out = call.response->add_refused();
        out->set_uuid(r.uuid);
        out->set_reason(r.reason);
      }
    }
    if (metrics_ != nullptr) {
      metrics_->Add(Metrics::Counter::kRecordsStored, Metrics::Labels({{"kind", "measurement"}}),
                    static_cast<double>(outcome->measurements_inserted));
      metrics_->Add(Metrics::Counter::kRecordsStored, Metrics::Labels({{"kind", "evidence"}}),
                    static_cast<double>(outcome->evidence_inserted));
      for (const std::vector<db::RefusedRecord>* list :
           {static_cast<const std::vector<db::RefusedRecord>*>(&call.refused), &outcome->refused}) {
        for (const auto& r : *list) {
          metrics_->Add(Metrics::Counter::kRecordsRefused,
                        Metrics::Labels({{"reason", Metrics::RefusalKind(r.reason)}}));
        }
      }
    }
    const size_t refused = call.refused.size() + outcome->refused.size();
    if (refused > 0) {
      // One line per report, not per record: a hostile agent must not flood the log.
      spdlog::warn(
          "session {}: refused {} records outside the design (first: {})", sessions[i].substr(0, 8),
          refused,
          Untrusted((call.refused.empty() ? outcome->refused : call.refused).front().reason));
    }
    for (const auto& f : call.finishes) {
      finishes.push_back(FinishFromRequest(sessions[i], f));
      v1::FinishOutcome* out = call.response->add_finished();
      out->set_attempt_id(f.attempt_id());
      finish_outcomes.push_back(out);
    }
  }
  if (!finishes.empty()) {
    auto ended = scheduler_->FinishBatch(finishes);
    for (size_t k = 0; k < ended.size(); ++k) {
      v1::FinishOutcome* out = finish_outcomes[k];
      if (!ended[k].ok()) {
        // Logged when it is the coordinator's own failure; the agent keeps the finish unless
        // no later call could change the answer.
        const grpc::Status status = failure_(ended[k].status(), finishes[k].session_id);
        const auto code = ended[k].status().code();
        out->set_retry(code != absl::StatusCode::kInvalidArgument &&
                       code != absl::StatusCode::kNotFound &&
                       code != absl::StatusCode::kPermissionDenied);
        out->set_detail(status.error_message());
        continue;
      }
      out->set_accepted(ended[k]->accepted);
      out->set_detail(ended[k]->detail);
      if (ended[k]->accepted && finishes[k].outcome == AttemptOutcome::kFailed) {
        spdlog::warn("attempt {} failed on session {}: {}", finishes[k].attempt_id,
                     finishes[k].session_id.substr(0, 8), Untrusted(finishes[k].failure_reason));
      }
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].reactor->Finish(outcomes[i].ok() ? grpc::Status::OK
                                              : failure_(outcomes[i].status(), sessions[i]));
  }
}

void ReportIngestor::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ladder::coordinator
