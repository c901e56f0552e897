// Small numeric helpers shared by the ladder::stats sources. Not installed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

namespace ladder::stats::internal {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

inline double Mean(std::span<const double> v) {
  if (v.empty()) return kNaN;
  // Two-pass-friendly plain sum; inputs here are at most millions of values of similar size.
  double sum = 0.0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

// Sample variance with the n − 1 denominator; NaN when n < 2.
inline double Variance(std::span<const double> v) {
  if (v.size() < 2) return kNaN;
  const double m = Mean(v);
  double ss = 0.0;
  for (double x : v) ss += (x - m) * (x - m);
  return ss / static_cast<double>(v.size() - 1);
}

inline double Covariance(std::span<const double> x, std::span<const double> y) {
  if (x.size() < 2 || x.size() != y.size()) return kNaN;
  const double mx = Mean(x);
  const double my = Mean(y);
  double s = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) s += (x[i] - mx) * (y[i] - my);
  return s / static_cast<double>(x.size() - 1);
}

// Quantile of sorted data by linear interpolation between order statistics (Hyndman & Fan
// type 7, the default of R and NumPy).
inline double QuantileSorted(std::span<const double> sorted, double p) {
  if (sorted.empty()) return kNaN;
  const double h = (static_cast<double>(sorted.size()) - 1.0) * p;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

// Welch-Satterthwaite degrees of freedom for a sum of independent variance terms v_k with
// df_k each: (Σ v_k)² / Σ (v_k² / df_k).
inline double WelchDf(std::span<const double> v, std::span<const double> df) {
  double num = 0.0;
  double den = 0.0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    num += v[i];
    den += v[i] * v[i] / df[i];
  }
  return den > 0.0 ? num * num / den : kInf;
}

}  // namespace ladder::stats::internal
