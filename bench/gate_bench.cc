// ladder-bench-gate: what a CI gate over a whole matrix (`ladder compare --fail-on slower`) gets
// wrong and what it can see, simulated through the functions `ladder compare` calls
// (stats::UnpairedLogRatioInterval, ClassifyChange, BandExceedancePValue, HolmAdjust).
//
// Two runs of an m-cell matrix, each on its own n sessions (VMs). A cell's session mean is
// exp(u + w + e): u the session's effect on that cell (sd `session`), w a cell × session
// interaction (1 %), e the within-session noise of a mean over 3 processes × 10 rounds (1 %
// process, 0.5 % round). The cells are independent: the hardest case for a family of tests (a
// session effect shared by every cell makes their verdicts move together, and fewer gates fail).
//
// Printed (docs/statistics.md, "One gate over many cells"):
//   1. A/A: the fraction of matrices in which any cell is called slower or faster, per cell and
//      with Holm, with Clopper–Pearson 95 % intervals.
//   2. Power: the smallest regression of one cell (the others unchanged) that the matrix verdict
//      calls slower in 80 % of matrices, and the power at a 5 % regression.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ladder/stats/compare.h"
#include "ladder/stats/distributions.h"

namespace {

using ladder::stats::BandExceedancePValue;
using ladder::stats::ChangeClass;
using ladder::stats::ClassifyChange;
using ladder::stats::HolmAdjust;
using ladder::stats::Interval;
using ladder::stats::UnpairedLogRatioInterval;

constexpr double kThreshold = 0.02;
constexpr double kAlpha = 0.05;

// The p-quantile of Beta(a, b), by bisection on the regularized incomplete beta.
double BetaQuantile(double p, double a, double b) {
  double lo = 0.0, hi = 1.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (ladder::stats::RegularizedIncompleteBeta(a, b, mid) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

struct Proportion {
  int k = 0, n = 0;
  double Lower() const { return k == 0 ? 0.0 : BetaQuantile(0.025, k, n - k + 1); }
  double Upper() const { return k == n ? 1.0 : BetaQuantile(0.975, k + 1, n - k); }
  std::string Text() const {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.1f %% [%.1f, %.1f]", 100.0 * k / n, 100 * Lower(),
                  100 * Upper());
    return buf;
  }
};

struct Fleet {
  const char* name;
  double session;  // sd of a session's effect on a cell
};

class Simulator {
 public:
  Simulator(std::uint64_t seed, Fleet fleet, int sessions)
      : rng_(seed), fleet_(fleet), sessions_(sessions) {}

  // One run's session means of one cell, its truth `factor` × 100.
  std::vector<double> Run(double factor) {
    static const double within = std::sqrt(0.01 * 0.01 / 3 + 0.005 * 0.005 / 30);
    std::vector<double> out;
    for (int s = 0; s < sessions_; ++s) {
      out.push_back(100.0 * factor *
                    std::exp(fleet_.session * z_(rng_) + 0.01 * z_(rng_) + within * z_(rng_)));
    }
    return out;
  }
  // The standard normals behind one run, so that a planted effect can be redrawn with the same
  // noise (common random numbers make power monotone in the effect).
  std::vector<double> Noise() {
    std::vector<double> out;
    for (int i = 0; i < 3 * sessions_; ++i) out.push_back(z_(rng_));
    return out;
  }
  std::vector<double> FromNoise(const std::vector<double>& noise, double factor) const {
    static const double within = std::sqrt(0.01 * 0.01 / 3 + 0.005 * 0.005 / 30);
    std::vector<double> out;
    for (int s = 0; s < sessions_; ++s) {
      out.push_back(100.0 * factor *
                    std::exp(fleet_.session * noise[3 * s] + 0.01 * noise[3 * s + 1] +
                             within * noise[3 * s + 2]));
    }
    return out;
  }

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<double> z_{0.0, 1.0};
  Fleet fleet_;
  int sessions_;
};

struct AaResult {
  Proportion per_cell, holm;
};

AaResult AaGate(std::uint64_t seed, Fleet fleet, int sessions, int cells, int matrices) {
  Simulator sim(seed, fleet, sessions);
  AaResult out;
  out.per_cell.n = out.holm.n = matrices;
  std::vector<double> p(static_cast<std::size_t>(cells));
  for (int e = 0; e < matrices; ++e) {
    bool any = false;
    for (int c = 0; c < cells; ++c) {
      const Interval r = *UnpairedLogRatioInterval(sim.Run(1.0), sim.Run(1.0));
      const ChangeClass k = ClassifyChange(r, kThreshold);
      any |= k == ChangeClass::kAbove || k == ChangeClass::kBelow;
      p[static_cast<std::size_t>(c)] = BandExceedancePValue(r, kThreshold);
    }
    out.per_cell.k += any;
    const std::vector<double> adj = HolmAdjust(p);
    out.holm.k += std::any_of(adj.begin(), adj.end(), [](double x) { return x < kAlpha; });
  }
  return out;
}

struct PowerResult {
  double detectable = NAN;  // smallest regression with ≥ 80 % power (the grid's step: 0.5 %)
  Proportion at_five;       // power at a 5 % regression
};

// One planted cell (a time: its regression is a ratio above 1) among `cells`; the others A/A.
PowerResult Power(std::uint64_t seed, Fleet fleet, int sessions, int cells, int matrices) {
  Simulator sim(seed, fleet, sessions);
  struct Matrix {
    std::vector<double> null_p;  // the unchanged cells' p-values
    std::vector<double> base, candidate;
  };
  std::vector<Matrix> ms(static_cast<std::size_t>(matrices));
  for (Matrix& m : ms) {
    for (int c = 1; c < cells; ++c) {
      m.null_p.push_back(
          BandExceedancePValue(*UnpairedLogRatioInterval(sim.Run(1.0), sim.Run(1.0)), kThreshold));
    }
    m.base = sim.Noise();
    m.candidate = sim.Noise();
  }
  const auto power = [&](double effect) {
    Proportion out;
    out.n = matrices;
    std::vector<double> p;
    for (const Matrix& m : ms) {
      const Interval r = *UnpairedLogRatioInterval(sim.FromNoise(m.base, 1.0),
                                                   sim.FromNoise(m.candidate, 1.0 + effect));
      p = m.null_p;
      p.insert(p.begin(), BandExceedancePValue(r, kThreshold));
      const ChangeClass k = ClassifyChange(r, kThreshold);
      out.k += k == ChangeClass::kAbove && HolmAdjust(p)[0] < kAlpha;
    }
    return out;
  };
  PowerResult out;
  out.at_five = power(0.05);
  for (double effect = 0.02; effect <= 1.0; effect += 0.005) {
    const Proportion pw = power(effect);
    if (pw.k >= 0.8 * pw.n) {
      out.detectable = effect;
      break;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Simulates a CI gate over a matrix (ladder compare --fail-on slower): the A/A failure "
      "rate per cell and with Holm, and the regression the matrix verdict detects with 80 % "
      "power, at 3/5/10 sessions per run and 20/200 cells. See docs/statistics.md."};
  int matrices = 2000;
  std::uint64_t seed = 1;
  bool json = false;
  app.add_option("--matrices", matrices, "simulated matrices per row (default 2000)")
      ->check(CLI::Range(10, 1000000));
  app.add_option("--seed", seed, "seed (default 1)");
  app.add_flag("--json", json, "JSON instead of Markdown");
  CLI11_PARSE(app, argc, argv);

  const Fleet fleets[] = {{"quiet (0.5 % between sessions)", 0.005},
                          {"noisy (3 % between sessions)", 0.03}};
  nlohmann::json rows = nlohmann::json::array();
  if (!json) {
    std::printf(
        "| fleet | sessions per run | cells | A/A gate fails, per cell | A/A gate fails, Holm | "
        "regression detected with 80 %% power | power at +5 %% |\n"
        "| --- | --- | --- | --- | --- | --- | --- |\n");
  }
  std::uint64_t s = seed;
  for (const Fleet& fleet : fleets) {
    for (int sessions : {3, 5, 10}) {
      for (int cells : {20, 200}) {
        const AaResult aa = AaGate(++s, fleet, sessions, cells, matrices);
        const PowerResult pw = Power(++s, fleet, sessions, cells, matrices);
        char detect[32];
        if (std::isnan(pw.detectable)) {
          std::snprintf(detect, sizeof detect, "> 100 %%");
        } else {
          std::snprintf(detect, sizeof detect, "+%.1f %%", 100 * pw.detectable);
        }
        if (json) {
          rows.push_back(
              {{"fleet", fleet.name},
               {"session_sd", fleet.session},
               {"sessions", sessions},
               {"cells", cells},
               {"matrices", matrices},
               {"aa_fail_per_cell", aa.per_cell.k},
               {"aa_fail_holm", aa.holm.k},
               {"detectable_80",
                std::isnan(pw.detectable) ? nlohmann::json() : nlohmann::json(pw.detectable)},
               {"power_at_5pct", static_cast<double>(pw.at_five.k) / matrices}});
        } else {
          std::printf("| %s | %d | %d | %s | %s | %s | %s |\n", fleet.name, sessions, cells,
                      aa.per_cell.Text().c_str(), aa.holm.Text().c_str(), detect,
                      pw.at_five.Text().c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  if (json) std::printf("%s\n", rows.dump(2).c_str());
  return 0;
}
