// Sizes as users type them on a command line: "4096", "32K" (K = 1024, as context depths are
// quoted), and comma-separated lists of them ("1K,8K,32K").
#pragma once

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ladder {

// A positive size: digits with an optional K or k suffix (x1024). Errors name the text and
// what was expected; the result fits an int.
inline absl::StatusOr<int> ParseSize(std::string_view text) {
  std::string_view digits = text;
  int64_t multiplier = 1;
  if (!digits.empty() && (digits.back() == 'K' || digits.back() == 'k')) {
    multiplier = 1024;
    digits.remove_suffix(1);
  }
  int64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() ||
      value <= 0 || value > std::numeric_limits<int>::max() / multiplier) {
    return absl::InvalidArgumentError("expected a positive size like 1024 or 32K, got '" +
                                      std::string(text) + "'");
  }
  return static_cast<int>(value * multiplier);
}

// A comma-separated list of sizes ("1K,8K,32K"); empty items are errors, so "1K,,2K" is
// refused rather than silently read as two sizes.
inline absl::StatusOr<std::vector<int>> ParseSizeList(std::string_view text) {
  std::vector<int> sizes;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    absl::StatusOr<int> size = ParseSize(item);
    if (!size.ok()) return size.status();
    sizes.push_back(*size);
    if (comma == std::string_view::npos) return sizes;
    start = comma + 1;
  }
}

}  // namespace ladder
