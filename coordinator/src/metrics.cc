#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ladder::coordinator {
namespace {

struct Family {
  std::string name, help;
};

Family CounterFamily(Metrics::Counter c) {
  switch (c) {
    case Metrics::Counter::kRpcs:
      return {"ladder_rpcs_total", "gRPC calls answered, by method and status code."};
    case Metrics::Counter::kRecordsStored:
      return {"ladder_records_stored_total",
              "Records durably stored from agents' reports (measurement, evidence, finish)."};
    case Metrics::Counter::kRecordsRefused:
      return {"ladder_records_refused_total",
              "Records refused for good (outside the design or breaking the contract), by kind."};
    case Metrics::Counter::kReportsRejected:
      return {"ladder_reports_rejected_total",
              "Report calls refused whole (busy, shutting down, store failure), by status code."};
    case Metrics::Counter::kSessionsRevoked:
      return {"ladder_sessions_revoked_total",
              "Agent calls refused because the session's join token was revoked."};
    case Metrics::Counter::kRegistersRefused:
      return {"ladder_registers_refused_total",
              "Register calls refused (join token, session id owner), by status code; the log "
              "has at most one line per 10 s of them."};
    case Metrics::Counter::kLongPollsEnded:
      return {"ladder_long_polls_revoked_total",
              "Waiting Lease calls answered UNAUTHENTICATED because their token was revoked."};
  }
  return {"ladder_unknown_total", ""};
}

Family HistogramFamily(Metrics::Histogram h) {
  switch (h) {
    case Metrics::Histogram::kRpcDuration:
      return {"ladder_rpc_duration_seconds",
              "Time from a call's arrival to its answer, by method (Lease includes its wait)."};
    case Metrics::Histogram::kCommitDuration:
      return {"ladder_store_commit_duration_seconds",
              "Time of one group commit of agents' reports to the results database."};
    case Metrics::Histogram::kCommitRecords:
      return {"ladder_store_commit_records", "Records in one group commit."};
  }
  return {"ladder_unknown", ""};
}

const std::vector<double>& Bounds(Metrics::Histogram h) {
  static const std::vector<double> seconds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                              0.25,   0.5,   1,      2.5,   5,    10,    30};
  static const std::vector<double> records = {1, 10, 100, 1000, 10000, 100000};
  return h == Metrics::Histogram::kCommitRecords ? records : seconds;
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  // The shortest text that reads back as the same double: "0.0005", not "0.00050000000000000001".
  char buffer[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, v);
    if (std::strtod(buffer, nullptr) == v) break;
  }
  return buffer;
}

std::string Sample(const std::string& name, const std::string& labels, double value) {
  return absl::StrCat(name, labels.empty() ? "" : absl::StrCat("{", labels, "}"), " ",
                      Number(value), "\n");
}

}  // namespace

void Metrics::Add(Counter counter, std::string labels, double value) {
  MutexLock lock(&mu_);
  counters_[{counter, std::move(labels)}] += value;
}

void Metrics::Observe(Histogram histogram, double value, std::string labels) {
  const auto& bounds = Bounds(histogram);
  MutexLock lock(&mu_);
  HistogramData& data = histograms_[{histogram, std::move(labels)}];
  if (data.buckets.empty()) data.buckets.assign(bounds.size(), 0);
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (value <= bounds[i]) {
      ++data.buckets[i];
      break;
    }
  }
  ++data.count;
  data.sum += value;
}

void Metrics::SetSpoolBacklog(const std::string& session_id, int64_t records) {
  MutexLock lock(&mu_);
  spool_backlog_[session_id] =
      Backlog{std::clamp<int64_t>(records, 0, 1000000000000), std::chrono::steady_clock::now()};
}

std::string Metrics::Render() const {
  std::string out;
  MutexLock lock(&mu_);
  {
    const auto now = std::chrono::steady_clock::now();
    double sum = 0, max = 0;
    for (const auto& [session, backlog] : spool_backlog_) {
      if (now - backlog.seen > std::chrono::minutes(2)) continue;
      sum += static_cast<double>(backlog.records);
      max = std::max(max, static_cast<double>(backlog.records));
    }
    out += RenderGauge("ladder_agent_spool_records",
                       "Results in agents' spools not yet acknowledged, as their last heartbeats "
                       "said (sessions heard from in the last two minutes).",
                       {{"", sum}});
    out += RenderGauge("ladder_agent_spool_records_max",
                       "The largest spool backlog one agent reported.", {{"", max}});
  }
  for (Counter c : {Counter::kRpcs, Counter::kRecordsStored, Counter::kRecordsRefused,
                    Counter::kReportsRejected, Counter::kSessionsRevoked,
                    Counter::kRegistersRefused, Counter::kLongPollsEnded}) {
    const Family f = CounterFamily(c);
    absl::StrAppend(&out, "# HELP ", f.name, " ", f.help, "\n# TYPE ", f.name, " counter\n");
    bool any = false;
    for (const auto& [key, value] : counters_) {
      if (key.first != c) continue;
      out += Sample(f.name, key.second, value);
      any = true;
    }
    // A counter with no labels exists from the start, so rate() has a first point.
    if (!any && (c == Counter::kSessionsRevoked || c == Counter::kLongPollsEnded)) {
      out += Sample(f.name, "", 0);
    }
  }
  for (Histogram h :
       {Histogram::kRpcDuration, Histogram::kCommitDuration, Histogram::kCommitRecords}) {
    const Family f = HistogramFamily(h);
    absl::StrAppend(&out, "# HELP ", f.name, " ", f.help, "\n# TYPE ", f.name, " histogram\n");
    const auto& bounds = Bounds(h);
    for (const auto& [key, data] : histograms_) {
      if (key.first != h) continue;
      const std::string prefix = key.second.empty() ? "" : key.second + ",";
      uint64_t cumulative = 0;
      for (size_t i = 0; i < bounds.size(); ++i) {
        cumulative += data.buckets[i];
        out += Sample(absl::StrCat(f.name, "_bucket"),
                      absl::StrCat(prefix, "le=\"", Number(bounds[i]), "\""), cumulative);
      }
      out +=
          Sample(absl::StrCat(f.name, "_bucket"), absl::StrCat(prefix, "le=\"+Inf\""), data.count);
      out += Sample(absl::StrCat(f.name, "_sum"), key.second, data.sum);
      out += Sample(absl::StrCat(f.name, "_count"), key.second, data.count);
    }
  }
  return out;
}

std::string Metrics::Labels(
    std::initializer_list<std::pair<std::string_view, std::string_view>> labels) {
  std::string out;
  for (const auto& [name, value] : labels) {
    if (!out.empty()) out += ",";
    absl::StrAppend(&out, std::string(name), "=\"");
    for (char c : value) {
      if (c == '\\' || c == '"') {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    out += "\"";
  }
  return out;
}

std::string_view Metrics::RefusalKind(std::string_view reason_view) {
  const std::string reason(reason_view);
  if (absl::StrContains(reason, "out of range")) return "out_of_range";
  if (absl::StrContains(reason, "metric")) return "unknown_metric";
  if (absl::StrContains(reason, "different value") || absl::StrContains(reason, "second value")) {
    return "conflicting_value";
  }
  if (absl::StrContains(reason, "design") || absl::StrContains(reason, "attempt") ||
      absl::StrContains(reason, "cell") || absl::StrContains(reason, "round") ||
      absl::StrContains(reason, "process")) {
    return "outside_design";
  }
  if (absl::StrContains(reason, "uuid") || absl::StrContains(reason, "UTF-8") ||
      absl::StrContains(reason, "empty") || absl::StrContains(reason, "too long")) {
    return "malformed";
  }
  return "other";
}

std::string RenderGauge(std::string_view name, std::string_view help,
                        const std::vector<std::pair<std::string, double>>& samples) {
  const std::string family(name);
  std::string out =
      absl::StrCat("# HELP ", family, " ", std::string(help), "\n# TYPE ", family, " gauge\n");
  for (const auto& [labels, value] : samples) out += Sample(family, labels, value);
  return out;
}

}  // namespace ladder::coordinator
