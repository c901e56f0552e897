// Distribution functions the interval methods need: Student's t and the standard normal.
//
// Pure functions, thread-safe, no allocation. Accuracy: about 1e-12 relative for the quantiles
// over the ranges ladder uses (df >= 0.5, tail probabilities down to 1e-12). Arguments outside
// the domain (p outside (0, 1), df <= 0 or NaN) return NaN rather than an error: these are
// building blocks, and every public interval function validates its inputs before calling them.
#pragma once

namespace ladder::stats {

// P(T <= t) for Student's t with `df` degrees of freedom (df may be fractional, e.g. the
// Welch-Satterthwaite value; df = +infinity gives the standard normal).
double StudentTCdf(double t, double df);

// The p-quantile of Student's t: the t with StudentTCdf(t, df) == p. E.g.
// StudentTQuantile(0.975, 10) = 2.228139. df = +infinity gives NormalQuantile(p).
double StudentTQuantile(double p, double df);

// The multiplier of a two-sided interval at `confidence` (e.g. 0.95):
// StudentTQuantile(1 - (1 - confidence) / 2, df).
double TwoSidedT(double confidence, double df);

// Standard normal CDF and quantile.
double NormalCdf(double z);
double NormalQuantile(double p);

// Regularized incomplete beta function I_x(a, b), a, b > 0, 0 <= x <= 1.
double RegularizedIncompleteBeta(double a, double b, double x);

}  // namespace ladder::stats
