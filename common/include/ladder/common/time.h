// The clocks ladder reads, in the unit it stores: milliseconds.
//
// Wall time (UnixNowMs) is what the database records (created_at_ms, last_seen_ms, token
// expiry) and what agents and coordinator compare; steady time (SteadyNowMs) measures
// durations and deadlines inside one process and never jumps with NTP.
#pragma once

#include <chrono>
#include <cstdint>

namespace ladder {

// Milliseconds since the Unix epoch.
inline int64_t UnixNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Milliseconds on a monotonic clock with an arbitrary origin: compare two readings only.
inline int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The milliseconds from `start` to `end` on the steady clock, with the fraction (latencies).
inline double MsBetween(std::chrono::steady_clock::time_point start,
                        std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

}  // namespace ladder
