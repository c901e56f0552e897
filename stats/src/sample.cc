#include "ladder/stats/sample.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "internal.h"

namespace ladder::stats {

std::size_t Hierarchy::NumObservations() const {
  std::size_t n = 0;
  for (const SessionGroup& s : sessions) {
    for (const ProcessGroup& p : s.processes) n += p.values.size();
  }
  return n;
}

absl::StatusOr<Hierarchy> BuildHierarchy(std::span<const Observation> observations,
                                         ValueDomain domain) {
  if (observations.empty()) return absl::InvalidArgumentError("no observations");
  std::vector<Observation> sorted(observations.begin(), observations.end());
  for (const Observation& o : sorted) {
    if (!std::isfinite(o.value) || (domain == ValueDomain::kPositive && !(o.value > 0.0))) {
      return absl::InvalidArgumentError(
          absl::StrCat("observation (session ", o.session, ", process ", o.process, ", round ",
                       o.round, ") has value ", o.value,
                       domain == ValueDomain::kPositive ? "; a finite value > 0 is required"
                                                        : "; a finite value is required"));
    }
  }
  const auto key = [](const Observation& o) { return std::tie(o.session, o.process, o.round); };
  std::sort(sorted.begin(), sorted.end(),
            [&](const Observation& x, const Observation& y) { return key(x) < key(y); });
  Hierarchy h;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const Observation& o = sorted[i];
    if (i > 0 && key(sorted[i - 1]) == key(o)) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate observation (session ", o.session,
                                                     ", process ", o.process, ", round ", o.round,
                                                     ")"));
    }
    if (h.sessions.empty() || h.sessions.back().id != o.session) {
      h.sessions.push_back(SessionGroup{o.session, {}});
    }
    SessionGroup& s = h.sessions.back();
    if (s.processes.empty() || s.processes.back().id != o.process) {
      s.processes.push_back(ProcessGroup{o.process, {}});
    }
    s.processes.back().values.push_back(o.value);
  }
  return h;
}

absl::StatusOr<BalancedShape> CheckBalanced(const Hierarchy& hierarchy) {
  if (hierarchy.sessions.empty()) return absl::FailedPreconditionError("no sessions");
  BalancedShape shape;
  shape.sessions = hierarchy.sessions.size();
  shape.processes_per_session = hierarchy.sessions.front().processes.size();
  shape.rounds_per_process = hierarchy.sessions.front().processes.front().values.size();
  for (const SessionGroup& s : hierarchy.sessions) {
    if (s.processes.size() != shape.processes_per_session) {
      return absl::FailedPreconditionError(absl::StrCat(
          "unbalanced design: session ", s.id, " has ", s.processes.size(), " processes, session ",
          hierarchy.sessions.front().id, " has ", shape.processes_per_session));
    }
    for (const ProcessGroup& p : s.processes) {
      if (p.values.size() != shape.rounds_per_process) {
        return absl::FailedPreconditionError(
            absl::StrCat("unbalanced design: session ", s.id, " process ", p.id, " has ",
                         p.values.size(), " rounds, expected ", shape.rounds_per_process));
      }
    }
  }
  return shape;
}

double ProcessMean(const ProcessGroup& process) { return internal::Mean(process.values); }

double SessionMean(const SessionGroup& session) {
  std::vector<double> means;
  means.reserve(session.processes.size());
  for (const ProcessGroup& p : session.processes) means.push_back(ProcessMean(p));
  return internal::Mean(means);
}

}  // namespace ladder::stats
