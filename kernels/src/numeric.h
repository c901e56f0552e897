// Host-side conversions between float and the 16-bit dtypes (round to nearest even).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define LADDER_KERNELS_HD __host__ __device__
#else
#define LADDER_KERNELS_HD
#endif

namespace ladder::kernels::internal {

// BitCast without C++20 (this header is also compiled as C++17 device code).
template <typename To, typename From>
inline To BitCast(const From& f) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  std::memcpy(&t, &f, sizeof(To));
  return t;
}

inline uint16_t FloatToBf16(float f) {
  uint32_t x = BitCast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
inline float Bf16ToFloat(uint16_t h) { return BitCast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t FloatToHalf(float f) {
  const uint32_t x = BitCast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)
    return static_cast<uint16_t>(sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (absx < 0x38800000u) {  // half subnormal: value * 2^24 rounded to an integer
    const float a = BitCast<float>(absx);
    const auto m = static_cast<uint32_t>(std::nearbyint(a * 16777216.0f));
    return static_cast<uint16_t>(sign | m);
  }
  const uint32_t mant = absx & 0x7fffffu;
  const uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (e == 31) return BitCast<float>(sign | 0x7f800000u | (m << 13));
  return BitCast<float>(sign | ((e - 15 + 127) << 23) | (m << 13));
}

// splitmix64: the seeded generator behind every generated input (host and device agree).
LADDER_KERNELS_HD inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// A value in about [-1.73, 1.73] with unit variance-ish (sum of two uniforms, centered).
LADDER_KERNELS_HD inline float HashToValue(uint64_t seed, uint64_t index) {
  const uint64_t r = SplitMix64(seed * 0x632be59bd9b4e019ull + index);
  const float u1 = static_cast<float>(r & 0xffffffu) * (1.0f / 16777216.0f);
  const float u2 = static_cast<float>((r >> 32) & 0xffffffu) * (1.0f / 16777216.0f);
  return (u1 + u2 - 1.0f) * 2.449489743f;  // var of (u1+u2-1) is 1/6
}

}  // namespace ladder::kernels::internal
