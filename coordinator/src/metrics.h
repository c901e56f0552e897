// The coordinator's operational metrics, rendered in Prometheus' text exposition format
// (version 0.0.4) for `/metrics`. Private to coordinator/.
//
// Debian 12 packages no Prometheus client library for C++, so this is the small part of one
// ladder needs: counters and histograms with a fixed, bounded set of label values (an RPC method,
// a gRPC code, a refusal's kind), never a run or session id. Gauges are computed at scrape time
// by the caller (Coordinator::MetricsText) from the scheduler and the database.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "ladder/common/mutex.h"

namespace ladder::coordinator {

class Metrics {
 public:
  // Counters (monotonic, `_total`).
  enum class Counter {
    kRpcs,              // ladder_rpcs_total{method, code}
    kRecordsStored,     // ladder_records_stored_total{kind}: measurement | evidence | finish
    kRecordsRefused,    // ladder_records_refused_total{reason}
    kReportsRejected,   // ladder_reports_rejected_total{code}: a whole Report refused
    kSessionsRevoked,   // ladder_sessions_revoked_total: calls refused for a revoked token
    kRegistersRefused,  // ladder_registers_refused_total{code}: Register refused (token, id)
    kLongPollsEnded,    // ladder_long_polls_revoked_total: waiting Leases ended by revocation
  };
  // Histograms (seconds, or records for batch sizes).
  enum class Histogram {
    kRpcDuration,     // ladder_rpc_duration_seconds{method}: Lease includes its long poll
    kCommitDuration,  // ladder_store_commit_duration_seconds: one group commit of reports
    kCommitRecords,   // ladder_store_commit_records: records in one group commit
  };

  void Add(Counter counter, std::string labels = "", double value = 1);
  // What a session's last heartbeat said its agent's spool holds (ladder_agent_spool_records).
  // Values are clamped to [0, 1e12]; a session silent for two minutes drops out.
  void SetSpoolBacklog(const std::string& session_id, int64_t records);
  void Observe(Histogram histogram, double value, std::string labels = "");

  // Every family this registry owns, in the text format, HELP and TYPE lines included.
  std::string Render() const;

  // A label set in the text format: {"method", "Lease"} -> `method="Lease"` (values escaped).
  static std::string Labels(std::initializer_list<std::pair<std::string_view, std::string_view>>);
  // A refusal reason as one of a bounded set of kinds: out_of_range, unknown_metric,
  // outside_design, conflicting_value, malformed, other.
  static std::string_view RefusalKind(std::string_view reason);

 private:
  struct HistogramData {
    std::vector<uint64_t> buckets;  // cumulative counts are made at render time
    uint64_t count = 0;
    double sum = 0;
  };
  mutable Mutex mu_;
  std::map<std::pair<Counter, std::string>, double> counters_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<Histogram, std::string>, HistogramData> histograms_ ABSL_GUARDED_BY(mu_);
  struct Backlog {
    int64_t records = 0;
    std::chrono::steady_clock::time_point seen;
  };
  std::map<std::string, Backlog> spool_backlog_ ABSL_GUARDED_BY(mu_);
};

// A gauge family rendered by the caller: HELP, TYPE and one sample per label set.
std::string RenderGauge(std::string_view name, std::string_view help,
                        const std::vector<std::pair<std::string, double>>& samples);

}  // namespace ladder::coordinator
