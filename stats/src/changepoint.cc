#include "ladder/stats/changepoint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "ladder/stats/distributions.h"

namespace ladder::stats {
namespace {

// τ is profiled over a fixed grid: 0, then 0.01 % to 300 % (relative, log scale) in 64 steps.
// A grid (not a continuous optimiser) keeps the fit and its bootstrap replicates the same
// procedure, and the grid's resolution (13 % per step in τ) is finer than τ can be told.
constexpr int kTauGrid = 65;

double TauAt(int g) {
  if (g == 0) return 0.0;
  const double lo = std::log(1e-4), hi = std::log(3.0);
  return std::exp(lo + (hi - lo) * (g - 1) / (kTauGrid - 2));
}

// Splitmix64 and Box–Muller: the bootstrap's normals, the same on every platform.
struct Normals {
  uint64_t state;
  double spare = 0;
  bool has_spare = false;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Unit() { return (static_cast<double>(Next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  double Draw() {
    if (has_spare) {
      has_spare = false;
      return spare;
    }
    const double r = std::sqrt(-2 * std::log(Unit())), t = 2 * std::numbers::pi * Unit();
    spare = r * std::sin(t);
    has_spare = true;
    return r * std::cos(t);
  }
};

// Profile log-likelihoods of one series: ℓ₀ (no change) and ℓ₁(k) for every k, each maximised
// over the τ grid; argmax τ kept.
struct Profile {
  double l0 = -std::numeric_limits<double>::infinity();
  int tau0 = 0;
  std::vector<double> l1;  // by k (entries below min_before unused)
  std::vector<int> tau1;
};

// The weights 1 / (s_i² + τ²) at every grid point, and Σ log w: fixed for a series and its
// bootstrap replicates (which share the s_i), so computed once.
struct Weights {
  std::size_t n = 0;
  std::vector<double> w;      // [g * n + i]
  std::vector<double> log_w;  // Σ_i log w at g
};

Weights MakeWeights(std::span<const double> var) {
  Weights out;
  out.n = var.size();
  out.w.resize(kTauGrid * out.n);
  out.log_w.assign(kTauGrid, 0.0);
  for (int g = 0; g < kTauGrid; ++g) {
    const double tau = TauAt(g);
    for (std::size_t i = 0; i < out.n; ++i) {
      const double w = 1.0 / (var[i] + tau * tau + 1e-18);
      out.w[g * out.n + i] = w;
      out.log_w[g] += std::log(w);
    }
  }
  return out;
}

Profile Fit(std::span<const double> y, const Weights& weights, std::size_t min_before) {
  const std::size_t n = y.size();
  Profile p;
  p.l1.assign(n, -std::numeric_limits<double>::infinity());
  p.tau1.assign(n, 0);
  std::vector<double> sw(n + 1), swy(n + 1), swyy(n + 1);
  for (int g = 0; g < kTauGrid; ++g) {
    const double* w = &weights.w[g * n];
    for (std::size_t i = 0; i < n; ++i) {
      sw[i + 1] = sw[i] + w[i];
      swy[i + 1] = swy[i] + w[i] * y[i];
      swyy[i + 1] = swyy[i] + w[i] * y[i] * y[i];
    }
    // Weighted residual sum of squares of [a, b) about its weighted mean.
    auto ssr = [&](std::size_t a, std::size_t b) {
      const double sum_w = sw[b] - sw[a], wy = swy[b] - swy[a];
      return std::max(0.0, swyy[b] - swyy[a] - wy * wy / sum_w);
    };
    const double base =
        0.5 * (weights.log_w[g] - static_cast<double>(n) * std::log(2 * std::numbers::pi));
    const double l0 = base - 0.5 * ssr(0, n);
    if (l0 > p.l0) {
      p.l0 = l0;
      p.tau0 = g;
    }
    for (std::size_t k = min_before; k < n; ++k) {
      const double l1 = base - 0.5 * (ssr(0, k) + ssr(k, n));
      if (l1 > p.l1[k]) {
        p.l1[k] = l1;
        p.tau1[k] = g;
      }
    }
  }
  return p;
}

std::size_t BestK(const Profile& p, std::size_t min_before) {
  std::size_t best = min_before;
  for (std::size_t k = min_before; k < p.l1.size(); ++k) {
    if (p.l1[k] > p.l1[best]) best = k;
  }
  return best;
}

double WeightedMean(std::span<const double> y, std::span<const double> var, double tau,
                    std::size_t a, std::size_t b) {
  double sw = 0, swy = 0;
  for (std::size_t i = a; i < b; ++i) {
    const double w = 1.0 / (var[i] + tau * tau + 1e-18);
    sw += w;
    swy += w * y[i];
  }
  return swy / sw;
}

}  // namespace

absl::Status ChangePointOptions::Validate() const {
  if (!(alpha > 0 && alpha < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("alpha must be in (0, 1), got ", alpha));
  }
  if (draws < 19) return absl::InvalidArgumentError(absl::StrCat("draws must be >= 19"));
  if (min_before < 1) return absl::InvalidArgumentError("min_before must be >= 1");
  return absl::OkStatus();
}

absl::StatusOr<ChangePoint> FindChangePoint(std::span<const SeriesPoint> series,
                                            const ChangePointOptions& options) {
  if (auto s = options.Validate(); !s.ok()) return s;
  const std::size_t n = series.size();
  if (n < options.min_before + 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("a change-point needs at least ", options.min_before + 1, " runs (",
                     options.min_before, " before the change and 1 after); ", n, " given"));
  }
  std::vector<double> y(n), var(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(series[i].log_value) || !std::isfinite(series[i].se) || series[i].se < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("point ", i, ": value and standard error must be finite, se >= 0"));
    }
    y[i] = series[i].log_value;
    var[i] = series[i].se * series[i].se;
  }
  const Weights weights = MakeWeights(var);
  const Profile p = Fit(y, weights, options.min_before);
  ChangePoint out;
  out.index = BestK(p, options.min_before);
  out.statistic = std::max(0.0, 2 * (p.l1[out.index] - p.l0));
  out.drift_sd = TauAt(p.tau1[out.index]);
  out.drift_sd_null = TauAt(p.tau0);
  out.step = WeightedMean(y, var, out.drift_sd, out.index, n) -
             WeightedMean(y, var, out.drift_sd, 0, out.index);
  // χ²₁(1 − alpha) = z²(1 − alpha/2).
  const double z = NormalQuantile(1 - options.alpha / 2);
  for (std::size_t k = options.min_before; k < n; ++k) {
    if (2 * (p.l1[out.index] - p.l1[k]) <= z * z) out.plausible.push_back(k);
  }
  // The bootstrap under the fitted no-change model.
  const double mu0 = WeightedMean(y, var, out.drift_sd_null, 0, n);
  Normals normals{options.seed};
  std::vector<double> sim(n);
  int exceed = 0;
  for (int d = 0; d < options.draws; ++d) {
    for (std::size_t i = 0; i < n; ++i) {
      sim[i] = mu0 + normals.Draw() * std::sqrt(var[i] + out.drift_sd_null * out.drift_sd_null);
    }
    const Profile q = Fit(sim, weights, options.min_before);
    const double t = 2 * (q.l1[BestK(q, options.min_before)] - q.l0);
    if (t >= out.statistic - 1e-9) ++exceed;
  }
  out.p_value = (1.0 + exceed) / (options.draws + 1.0);
  out.detected = out.p_value < options.alpha;
  return out;
}

}  // namespace ladder::stats
