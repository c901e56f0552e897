// Simulated measurements of known truth for the ladder::stats tests.
//
// log(value) = log(mean) + u_s + v_sp + e_spr with independent normal effects per level, so
// the sds below are (approximately) relative spreads: 0.03 = 3 %.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ladder/stats/sample.h"

namespace ladder::stats::testing {

struct LevelSds {
  double session = 0.03;
  double process = 0.01;
  double round = 0.005;
};

struct Design {
  int sessions = 5;
  int processes = 3;
  int rounds = 10;
};

inline std::vector<Observation> SimulateCell(std::mt19937_64& rng, double mean, LevelSds sd,
                                             Design design) {
  std::normal_distribution<double> z(0.0, 1.0);
  std::vector<Observation> out;
  for (int s = 0; s < design.sessions; ++s) {
    const double u = sd.session * z(rng);
    for (int p = 0; p < design.processes; ++p) {
      const double v = sd.process * z(rng);
      for (int r = 0; r < design.rounds; ++r) {
        out.push_back({s, p, r, mean * std::exp(u + v + sd.round * z(rng))});
      }
    }
  }
  return out;
}

// Paired arms measured in the same sessions: the session effect u_s is shared by both arms and
// cancels in the ratio; w_as (sd `interaction`) is the arm × session interaction; each arm runs
// its own processes (ids 0.. for A, 100.. for B). The true ratio B/A is `ratio`.
inline PairedSample SimulatePaired(std::mt19937_64& rng, double mean_a, double ratio, LevelSds sd,
                                   double interaction, Design design) {
  std::normal_distribution<double> z(0.0, 1.0);
  PairedSample out;
  for (int s = 0; s < design.sessions; ++s) {
    const double u = sd.session * z(rng);
    for (int arm = 0; arm < 2; ++arm) {
      const double w = interaction * z(rng);
      const double mean = arm == 0 ? mean_a : mean_a * ratio;
      std::vector<Observation>& dst = arm == 0 ? out.a : out.b;
      for (int p = 0; p < design.processes; ++p) {
        const double v = sd.process * z(rng);
        for (int r = 0; r < design.rounds; ++r) {
          dst.push_back({s, arm * 100 + p, r, mean * std::exp(u + w + v + sd.round * z(rng))});
        }
      }
    }
  }
  return out;
}

// The mistake the library exists to prevent: every iteration treated as independent.
// Returns {lower, upper} of a 95 % interval for mean(values) (normal, all-iterations SE).
struct Bounds {
  double lower;
  double upper;
};

inline Bounds NaivePooledMeanInterval(const std::vector<Observation>& obs) {
  double sum = 0.0;
  for (const Observation& o : obs) sum += o.value;
  const double n = static_cast<double>(obs.size());
  const double m = sum / n;
  double ss = 0.0;
  for (const Observation& o : obs) ss += (o.value - m) * (o.value - m);
  const double se = std::sqrt(ss / (n - 1.0) / n);
  return {m - 1.959964 * se, m + 1.959964 * se};
}

// Ratio of pooled means with a delta-method SE from all iterations as independent.
inline Bounds NaivePooledRatioInterval(const PairedSample& sample) {
  const auto moments = [](const std::vector<Observation>& obs, double& mean, double& rel_var) {
    double sum = 0.0;
    for (const Observation& o : obs) sum += o.value;
    const double n = static_cast<double>(obs.size());
    mean = sum / n;
    double ss = 0.0;
    for (const Observation& o : obs) ss += (o.value - mean) * (o.value - mean);
    rel_var = ss / (n - 1.0) / n / (mean * mean);
  };
  double ma = 0, va = 0, mb = 0, vb = 0;
  moments(sample.a, ma, va);
  moments(sample.b, mb, vb);
  const double l = std::log(mb / ma);
  const double se = std::sqrt(va + vb);
  return {std::exp(l - 1.959964 * se), std::exp(l + 1.959964 * se)};
}

}  // namespace ladder::stats::testing
