// SplitMix64 (Steele, Lea and Flood, 2014), the one seeded mixer of ladder: matrix seeds,
// visiting orders, the load generator's arrivals and the synthetic engine's weights all derive
// from it, so one seed means one sequence wherever it is read.
#pragma once

#include <cstdint>

namespace ladder {

inline constexpr uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ULL;

// SplitMix64's bijective finalizer.
inline constexpr uint64_t SplitMixFinalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The SplitMix64 output for `x`: the finalizer of x + gamma.
inline constexpr uint64_t SplitMix64(uint64_t x) { return SplitMixFinalize(x + kSplitMixGamma); }

// The generator: the next value of the sequence `state` walks, advancing it.
inline uint64_t SplitMix64Next(uint64_t& state) {
  const uint64_t out = SplitMix64(state);
  state += kSplitMixGamma;
  return out;
}

// Uniform in [0, 1) from the next value's top 53 bits.
inline double SplitMix64Unit(uint64_t& state) {
  return static_cast<double>(SplitMix64Next(state) >> 11) * (1.0 / 9007199254740992.0);
}

// A seed derived from two (a parent seed and an index), order-sensitive.
inline constexpr uint64_t MixSeeds(uint64_t a, uint64_t b) {
  return SplitMixFinalize(a ^ (b + kSplitMixGamma + (a << 6) + (a >> 2)));
}

}  // namespace ladder
