#include "ladder/stats/distributions.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "internal.h"

namespace ladder::stats {
namespace {

using internal::kInf;
using internal::kNaN;

// Continued fraction for I_x(a, b) (modified Lentz), converging for x < (a + 1) / (a + b + 2).
double BetaContinuedFraction(double a, double b, double x) {
  constexpr int kMaxIterations = 20000;
  constexpr double kEps = 1e-16;
  constexpr double kTiny = 1e-300;
  const double qab = a + b;
  const double qap = a + 1.0;
  const double qam = a - 1.0;
  double c = 1.0;
  double d = 1.0 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1.0) < kEps) break;
  }
  return h;
}

// I_x(a, b) given both x and y = 1 − x, so that callers who know y precisely (the t tail with
// small t²/(df + t²)) do not lose it to cancellation.
double IncompleteBeta(double a, double b, double x, double y) {
  if (x <= 0.0) return 0.0;
  if (y <= 0.0) return 1.0;
  const double log_front =
      a * std::log(x) + b * std::log(y) - (std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b));
  const double front = std::exp(log_front);
  if (x < (a + 1.0) / (a + b + 2.0)) return front * BetaContinuedFraction(a, b, x) / a;
  return 1.0 - front * BetaContinuedFraction(b, a, y) / b;
}

// P(T > t) for t >= 0.
double StudentUpperTail(double t, double df) {
  const double t2 = t * t;
  const double x = df / (df + t2);
  const double y = t2 / (df + t2);
  return 0.5 * IncompleteBeta(0.5 * df, 0.5, x, y);
}

// Finds u >= 0 with tail(u) == q for a decreasing tail function, by bracketing and bisection to
// full double precision. Robust rather than fast; each call costs ~100 tail evaluations.
template <typename Tail>
double InvertUpperTail(Tail tail, double q) {
  double lo = 0.0;
  double hi = 1.0;
  while (tail(hi) > q) {
    lo = hi;
    hi *= 2.0;
    if (hi > 1e300) return kInf;
  }
  for (int i = 0; i < 2000; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    if (tail(mid) > q) {
      lo = mid;
    } else {
      hi = mid;
    }
    if (hi - lo <= 1e-15 * hi) break;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

double RegularizedIncompleteBeta(double a, double b, double x) {
  if (!(a > 0.0) || !(b > 0.0) || !(x >= 0.0) || !(x <= 1.0)) return kNaN;
  return IncompleteBeta(a, b, x, 1.0 - x);
}

double NormalCdf(double z) {
  if (std::isnan(z)) return kNaN;
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

double NormalQuantile(double p) {
  if (!(p > 0.0) || !(p < 1.0)) return kNaN;
  if (p == 0.5) return 0.0;
  const double q = p < 0.5 ? p : 1.0 - p;
  const double z = InvertUpperTail([](double u) { return 0.5 * std::erfc(u / std::sqrt(2.0)); }, q);
  return p < 0.5 ? -z : z;
}

double StudentTCdf(double t, double df) {
  if (std::isnan(t) || !(df > 0.0)) return kNaN;
  if (std::isinf(df)) return NormalCdf(t);
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  const double tail = StudentUpperTail(std::fabs(t), df);
  return t >= 0.0 ? 1.0 - tail : tail;
}

double StudentTQuantile(double p, double df) {
  if (!(p > 0.0) || !(p < 1.0) || !(df > 0.0)) return kNaN;
  // Beyond ~1e12 df the t and normal quantiles agree to double precision.
  if (df > 1e12) return NormalQuantile(p);
  if (p == 0.5) return 0.0;
  // The inversion costs ~100 incomplete-beta evaluations, and callers ask for the same few
  // (p, df) again and again (every cell of a 100-run history at df = n_sessions − 1): a small
  // per-thread memo of exact arguments returns the same bits without repeating the work.
  struct Memo {
    double p = -1, df = -1, t = 0;
  };
  thread_local Memo memo[64];
  uint64_t bp = 0, bd = 0;
  std::memcpy(&bp, &p, sizeof bp);
  std::memcpy(&bd, &df, sizeof bd);
  Memo& m = memo[((bp * 0x9e3779b97f4a7c15ULL) ^ (bd * 0xbf58476d1ce4e5b9ULL)) >> 58];
  if (m.p == p && m.df == df) return m.t;
  const double q = p < 0.5 ? p : 1.0 - p;
  const double u = InvertUpperTail([df](double x) { return StudentUpperTail(x, df); }, q);
  const double t = p < 0.5 ? -u : u;
  m = {p, df, t};
  return t;
}

double TwoSidedT(double confidence, double df) {
  if (!(confidence > 0.0) || !(confidence < 1.0)) return kNaN;
  return StudentTQuantile(1.0 - (1.0 - confidence) / 2.0, df);
}

}  // namespace ladder::stats
