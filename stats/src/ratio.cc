#include "ladder/stats/ratio.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "internal.h"
#include "ladder/stats/distributions.h"

namespace ladder::stats {
namespace {

using internal::kInf;
using internal::kNaN;

absl::Status ValidateConfidence(double confidence) {
  if (!(confidence > 0.0 && confidence < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("confidence ", confidence, " not in (0, 1)"));
  }
  return absl::OkStatus();
}

// Both arms grouped, with sessions matched one to one (same ids, same order).
struct PairedHierarchy {
  Hierarchy a;
  Hierarchy b;
};

absl::StatusOr<PairedHierarchy> BuildPaired(const PairedSample& sample) {
  if (sample.a.empty() || sample.b.empty()) {
    return absl::InvalidArgumentError("a paired sample needs observations in both arms");
  }
  absl::StatusOr<Hierarchy> a = BuildHierarchy(sample.a, ValueDomain::kPositive);
  if (!a.ok()) return absl::InvalidArgumentError(absl::StrCat("arm A: ", a.status().message()));
  absl::StatusOr<Hierarchy> b = BuildHierarchy(sample.b, ValueDomain::kPositive);
  if (!b.ok()) return absl::InvalidArgumentError(absl::StrCat("arm B: ", b.status().message()));
  std::size_t i = 0;
  for (; i < a->sessions.size() && i < b->sessions.size(); ++i) {
    if (a->sessions[i].id != b->sessions[i].id) break;
  }
  if (i != a->sessions.size() || i != b->sessions.size()) {
    const bool missing_in_b = i < a->sessions.size() &&
                              (i >= b->sessions.size() || a->sessions[i].id < b->sessions[i].id);
    const std::int64_t id = missing_in_b ? a->sessions[i].id : b->sessions[i].id;
    return absl::InvalidArgumentError(absl::StrCat("session ", id, " has observations only in arm ",
                                                   missing_in_b ? "A" : "B",
                                                   "; a paired design needs both arms"));
  }
  return PairedHierarchy{*std::move(a), *std::move(b)};
}

// With a single session, the units whose spread stands in for between-session variation: the
// process means, or the rounds of the lone process.
std::vector<double> WithinSessionUnits(const SessionGroup& s) {
  if (s.processes.size() >= 2) {
    std::vector<double> units;
    for (const ProcessGroup& p : s.processes) units.push_back(ProcessMean(p));
    return units;
  }
  return s.processes.front().values;
}

// The quotient mean_B / mean_A with the moments Fieller and the delta method need.
struct QuotientSetup {
  QuotientMoments moments;
  double df = 0.0;
  std::size_t n_units = 0;
  IntervalScope scope = IntervalScope::kBetweenSessions;
};

absl::StatusOr<QuotientSetup> SetUpQuotient(const PairedHierarchy& h) {
  QuotientSetup q;
  const std::size_t n = h.a.sessions.size();
  if (n >= 2) {
    std::vector<double> ma;
    std::vector<double> mb;
    for (std::size_t s = 0; s < n; ++s) {
      ma.push_back(SessionMean(h.a.sessions[s]));
      mb.push_back(SessionMean(h.b.sessions[s]));
    }
    const double dn = static_cast<double>(n);
    q.moments = {internal::Mean(mb), internal::Mean(ma), internal::Variance(mb) / dn,
                 internal::Variance(ma) / dn, internal::Covariance(mb, ma) / dn};
    q.df = dn - 1.0;
    q.n_units = n;
    return q;
  }
  const std::vector<double> ua = WithinSessionUnits(h.a.sessions.front());
  const std::vector<double> ub = WithinSessionUnits(h.b.sessions.front());
  if (ua.size() < 2 || ub.size() < 2) {
    return absl::FailedPreconditionError(
        "one session with a single observation in an arm: no interval is possible");
  }
  const double va = internal::Variance(ua) / static_cast<double>(ua.size());
  const double vb = internal::Variance(ub) / static_cast<double>(ub.size());
  q.moments = {internal::Mean(ub), internal::Mean(ua), vb, va, 0.0};
  const double v[] = {vb, va};
  const double d[] = {static_cast<double>(ub.size() - 1), static_cast<double>(ua.size() - 1)};
  q.df = internal::WelchDf(v, d);
  q.n_units = std::min(ua.size(), ub.size());
  q.scope = IntervalScope::kWithinSessionOnly;
  return q;
}

absl::StatusOr<Interval> QuotientInterval(const PairedSample& sample, const RatioOptions& options,
                                          Interval (*method)(const QuotientMoments&, double)) {
  if (absl::Status st = options.Validate(); !st.ok()) return st;
  absl::StatusOr<PairedHierarchy> h = BuildPaired(sample);
  if (!h.ok()) return h.status();
  absl::StatusOr<QuotientSetup> q = SetUpQuotient(*h);
  if (!q.ok()) return q.status();
  Interval out = method(q->moments, TwoSidedT(options.confidence, q->df));
  out.confidence = options.confidence;
  out.df = q->df;
  out.n_units = q->n_units;
  out.scope = q->scope;
  out.estimand = "B/A: ratio of means of session means";
  if (q->scope == IntervalScope::kWithinSessionOnly) {
    out.note = std::string(kWithinSessionNote);
    out.estimand = "B/A: ratio of means (one session)";
  }
  if (out.bounds == Boundedness::kUnbounded) {
    if (!out.note.empty()) out.note += "; ";
    out.note += "unbounded: the denominator is not significantly different from zero";
  }
  return out;
}

// Uniform integer in [0, n) from mt19937_64 by rejection: exact and identical on every platform
// (std::uniform_int_distribution is implementation-defined).
std::size_t UniformIndex(std::mt19937_64& rng, std::size_t n) {
  const std::uint64_t range = static_cast<std::uint64_t>(n);
  const std::uint64_t limit =
      std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % range;
  std::uint64_t x = rng();
  while (x >= limit) x = rng();
  return static_cast<std::size_t>(x % range);
}

double ResampledProcessMean(const ProcessGroup& p, std::mt19937_64& rng) {
  const std::size_t r = p.values.size();
  double sum = 0.0;
  for (std::size_t k = 0; k < r; ++k) sum += p.values[UniformIndex(rng, r)];
  return sum / static_cast<double>(r);
}

double ResampledSessionMean(const SessionGroup& s, std::span<const std::size_t> picks,
                            std::mt19937_64& rng) {
  double sum = 0.0;
  for (std::size_t k : picks) sum += ResampledProcessMean(s.processes[k], rng);
  return sum / static_cast<double>(picks.size());
}

bool SameProcessIds(const SessionGroup& x, const SessionGroup& y) {
  if (x.processes.size() != y.processes.size()) return false;
  for (std::size_t i = 0; i < x.processes.size(); ++i) {
    if (x.processes[i].id != y.processes[i].id) return false;
  }
  return true;
}

}  // namespace

absl::Status RatioOptions::Validate() const { return ValidateConfidence(confidence); }

absl::Status BootstrapOptions::Validate() const {
  if (absl::Status st = ValidateConfidence(confidence); !st.ok()) return st;
  if (draws < 100) {
    return absl::InvalidArgumentError(absl::StrCat("bootstrap draws ", draws, " < 100"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SessionRatio>> SessionRatios(const PairedSample& sample) {
  absl::StatusOr<PairedHierarchy> h = BuildPaired(sample);
  if (!h.ok()) return h.status();
  std::vector<SessionRatio> out;
  for (std::size_t s = 0; s < h->a.sessions.size(); ++s) {
    SessionRatio r;
    r.session = h->a.sessions[s].id;
    r.mean_a = SessionMean(h->a.sessions[s]);
    r.mean_b = SessionMean(h->b.sessions[s]);
    r.log_ratio = std::log(r.mean_b) - std::log(r.mean_a);
    out.push_back(r);
  }
  return out;
}

absl::StatusOr<Interval> PairedRatioInterval(const PairedSample& sample,
                                             const RatioOptions& options) {
  if (absl::Status st = options.Validate(); !st.ok()) return st;
  absl::StatusOr<PairedHierarchy> h = BuildPaired(sample);
  if (!h.ok()) return h.status();
  Interval out;
  out.confidence = options.confidence;
  double mean_l = 0.0;
  double se = 0.0;
  const std::size_t n = h->a.sessions.size();
  if (n >= 2) {
    std::vector<double> l;
    for (std::size_t s = 0; s < n; ++s) {
      l.push_back(std::log(SessionMean(h->b.sessions[s])) -
                  std::log(SessionMean(h->a.sessions[s])));
    }
    mean_l = internal::Mean(l);
    se = std::sqrt(internal::Variance(l) / static_cast<double>(n));
    out.df = static_cast<double>(n - 1);
    out.n_units = n;
  } else {
    // Delta method on the log scale: var(log m̄) ≈ var(units) / (k · m̄²), arms independent.
    const std::vector<double> ua = WithinSessionUnits(h->a.sessions.front());
    const std::vector<double> ub = WithinSessionUnits(h->b.sessions.front());
    if (ua.size() < 2 || ub.size() < 2) {
      return absl::FailedPreconditionError(
          "one session with a single observation in an arm: no interval is possible");
    }
    const double ma = internal::Mean(ua);
    const double mb = internal::Mean(ub);
    const double va = internal::Variance(ua) / (static_cast<double>(ua.size()) * ma * ma);
    const double vb = internal::Variance(ub) / (static_cast<double>(ub.size()) * mb * mb);
    mean_l = std::log(mb) - std::log(ma);
    se = std::sqrt(va + vb);
    const double v[] = {va, vb};
    const double d[] = {static_cast<double>(ua.size() - 1), static_cast<double>(ub.size() - 1)};
    out.df = internal::WelchDf(v, d);
    out.n_units = std::min(ua.size(), ub.size());
    out.scope = IntervalScope::kWithinSessionOnly;
    out.note = std::string(kWithinSessionNote);
  }
  const double t = TwoSidedT(options.confidence, out.df);
  out.estimate = std::exp(mean_l);
  out.lower = std::exp(mean_l - t * se);
  out.upper = std::exp(mean_l + t * se);
  out.estimand =
      n >= 2 ? "B/A: geometric mean of per-session ratios" : "B/A: ratio of the session's means";
  return out;
}

absl::StatusOr<Interval> BootstrapRatioInterval(const PairedSample& sample,
                                                const BootstrapOptions& options) {
  if (absl::Status st = options.Validate(); !st.ok()) return st;
  absl::StatusOr<PairedHierarchy> h = BuildPaired(sample);
  if (!h.ok()) return h.status();
  const std::size_t n = h->a.sessions.size();
  if (n == 1 && options.levels == BootstrapLevels::kSessionsOnly) {
    return absl::FailedPreconditionError(
        "resampling sessions needs at least two sessions; use kAllLevels for a within-session "
        "interval");
  }
  std::vector<double> l(n);
  std::vector<bool> shared(n);
  for (std::size_t s = 0; s < n; ++s) {
    l[s] = std::log(SessionMean(h->b.sessions[s])) - std::log(SessionMean(h->a.sessions[s]));
    shared[s] = SameProcessIds(h->a.sessions[s], h->b.sessions[s]);
  }

  std::mt19937_64 rng(options.seed);
  std::vector<double> draws(static_cast<std::size_t>(options.draws));
  std::vector<std::size_t> picks_a;
  std::vector<std::size_t> picks_b;
  const auto pick_processes = [&rng](const SessionGroup& s, std::vector<std::size_t>& picks) {
    picks.resize(s.processes.size());
    for (std::size_t& k : picks) k = UniformIndex(rng, s.processes.size());
  };
  for (double& draw : draws) {
    double sum_l = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t s = UniformIndex(rng, n);
      if (options.levels == BootstrapLevels::kSessionsOnly) {
        sum_l += l[s];
        continue;
      }
      const SessionGroup& sa = h->a.sessions[s];
      const SessionGroup& sb = h->b.sessions[s];
      pick_processes(sa, picks_a);
      if (shared[s]) {
        picks_b = picks_a;
      } else {
        pick_processes(sb, picks_b);
      }
      const double ma = ResampledSessionMean(sa, picks_a, rng);
      const double mb = ResampledSessionMean(sb, picks_b, rng);
      sum_l += std::log(mb) - std::log(ma);
    }
    draw = sum_l / static_cast<double>(n);  // on the log scale
  }
  std::sort(draws.begin(), draws.end());
  const double alpha = 1.0 - options.confidence;
  const double mean_l = internal::Mean(l);
  Interval out;
  out.estimate = std::exp(mean_l);
  out.confidence = options.confidence;
  out.n_units = n;
  out.estimand = "B/A: geometric mean of per-session ratios";
  const double q_lo = internal::QuantileSorted(draws, alpha / 2.0);
  const double q_hi = internal::QuantileSorted(draws, 1.0 - alpha / 2.0);
  if (n == 1 || options.calibration == BootstrapCalibration::kPercentile) {
    out.lower = std::exp(q_lo);
    out.upper = std::exp(q_hi);
    out.df = kNaN;
  } else {
    // Scale the deviations from the estimate so that, for a normal ℓ, the interval is the t
    // interval: the bootstrap variance of mean ℓ* is ((n−1)/n)·s²/n, and its quantiles are
    // normal-theory ones.
    const double dn = static_cast<double>(n);
    const double scale = std::sqrt(dn / (dn - 1.0)) * TwoSidedT(options.confidence, dn - 1.0) /
                         NormalQuantile(1.0 - alpha / 2.0);
    out.lower = std::exp(mean_l + scale * (q_lo - mean_l));
    out.upper = std::exp(mean_l + scale * (q_hi - mean_l));
    out.df = dn - 1.0;
  }
  if (n == 1) {
    out.scope = IntervalScope::kWithinSessionOnly;
    out.note = std::string(kWithinSessionNote);
  }
  return out;
}

Interval FiellerQuotient(const QuotientMoments& m, double t) {
  Interval out;
  out.estimate = m.numerator / m.denominator;
  const double t2 = t * t;
  // ρ²·A − 2ρ·B + C <= 0 with:
  const double a = m.denominator * m.denominator - t2 * m.var_denominator;
  const double b = m.numerator * m.denominator - t2 * m.covariance;
  const double c = m.numerator * m.numerator - t2 * m.var_numerator;
  if (!(a > 0.0)) {
    out.bounds = Boundedness::kUnbounded;
    out.lower = -kInf;
    out.upper = kInf;
    return out;
  }
  const double disc = std::max(0.0, b * b - a * c);
  const double root = std::sqrt(disc);
  out.lower = (b - root) / a;
  out.upper = (b + root) / a;
  return out;
}

Interval DeltaQuotient(const QuotientMoments& m, double t) {
  Interval out;
  const double r = m.numerator / m.denominator;
  out.estimate = r;
  // var(N/D) ≈ (var_N − 2r·cov + r²·var_D) / D².
  const double var = (m.var_numerator - 2.0 * r * m.covariance + r * r * m.var_denominator) /
                     (m.denominator * m.denominator);
  const double half = t * std::sqrt(std::max(0.0, var));
  out.lower = r - half;
  out.upper = r + half;
  return out;
}

absl::StatusOr<Interval> FiellerRatioInterval(const PairedSample& sample,
                                              const RatioOptions& options) {
  return QuotientInterval(sample, options, &FiellerQuotient);
}

absl::StatusOr<Interval> DeltaRatioInterval(const PairedSample& sample,
                                            const RatioOptions& options) {
  return QuotientInterval(sample, options, &DeltaQuotient);
}

}  // namespace ladder::stats
