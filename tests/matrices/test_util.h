// Helpers shared by the matrix tests.
#pragma once

#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "ladder/matrices/matrix.h"

namespace ladder::matrices::testing {

// Parses `yaml` as "m.yaml", failing the test (with the message) when it does not parse.
inline Matrix MustParse(std::string_view yaml, const ParseOptions& options = {}) {
  auto matrix = ParseMatrix(yaml, "m.yaml", options);
  EXPECT_TRUE(matrix.ok()) << matrix.status();
  return matrix.ok() ? *std::move(matrix) : Matrix{};
}

inline Expansion MustExpand(const Matrix& matrix, const ParseOptions& options = {}) {
  auto expansion = Expand(matrix, options);
  EXPECT_TRUE(expansion.ok()) << expansion.status();
  return expansion.ok() ? *std::move(expansion) : Expansion{};
}

// The message of a parse that must fail with InvalidArgument ("" when it parsed).
inline std::string ParseError(std::string_view yaml, const ParseOptions& options = {}) {
  auto matrix = ParseMatrix(yaml, "m.yaml", options);
  if (matrix.ok()) return "";
  EXPECT_EQ(matrix.status().code(), absl::StatusCode::kInvalidArgument) << matrix.status();
  return std::string(matrix.status().message());
}

}  // namespace ladder::matrices::testing
