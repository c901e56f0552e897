// Status propagation in the style of TRY / ASSIGN_OR_RETURN.
//
// ladder uses absl::Status / absl::StatusOr<T> as its one error type across libraries.
// Exceptions thrown by third-party libraries (yaml-cpp, nlohmann::json) are caught at the
// library boundary and turned into statuses there.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define LADDER_CONCAT_INNER_(a, b) a##b
#define LADDER_CONCAT_(a, b) LADDER_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function when not ok.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status ladder_status_ = (expr);          \
    if (!ladder_status_.ok()) return ladder_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` declares x from an absl::StatusOr, or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(LADDER_CONCAT_(ladder_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()
