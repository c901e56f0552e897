// The one error type of ladder::kernels.
//
// kernels/ must build with nothing but the C++20 standard library (and a GPU runtime), so it
// cannot use absl::Status like the rest of ladder. Callers outside kernels/ convert a
// KernelError into their own status at the boundary (see agent/'s kernel runner).
//
// Nothing in kernels/ throws across its API and nothing calls exit(): every fallible call
// returns Result<T> (a value or a KernelError) or Status (= Result<void>).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ladder::kernels {

enum class ErrorCode {
  kInvalidArgument,  // the caller's input is wrong (bad shape, unknown preset, ...)
  kNotFound,         // a named thing (preset, case) does not exist
  kUnavailable,      // backend not compiled in, or no device present
  kUnsupported,      // a valid request this backend cannot do (e.g. f32 on the GPU)
  kDeviceError,      // a GPU runtime call failed; the message names the call and file:line
  kCheckFailed,      // a correctness check did not hold
};

std::string_view ToString(ErrorCode code);

struct KernelError {
  ErrorCode code = ErrorCode::kInvalidArgument;
  std::string message;

  std::string ToString() const;  // "<code>: <message>"
};

inline KernelError Error(ErrorCode code, std::string message) {
  return KernelError{code, std::move(message)};
}

// A value or an error. Accessing value() of an error Result is a programming error
// (checked by assertion in debug builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Result(KernelError error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  const T& value() const& { return std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const KernelError& error() const { return std::get<1>(v_); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, KernelError> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(KernelError error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  const KernelError& error() const { return error_; }

 private:
  KernelError error_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Status OkStatus() { return Status(); }

}  // namespace ladder::kernels

#define LADDER_K_CONCAT_INNER_(a, b) a##b
#define LADDER_K_CONCAT_(a, b) LADDER_K_CONCAT_INNER_(a, b)

// Returns the error of a Status/Result expression from the enclosing function.
#define LADDER_K_TRY(expr)                             \
  do {                                                 \
    auto ladder_k_r_ = (expr);                         \
    if (!ladder_k_r_.ok()) return ladder_k_r_.error(); \
  } while (0)

// `LADDER_K_ASSIGN_OR_RETURN(auto x, MakeX());`
#define LADDER_K_ASSIGN_OR_RETURN(lhs, expr) \
  LADDER_K_ASSIGN_OR_RETURN_IMPL_(LADDER_K_CONCAT_(ladder_k_result_, __LINE__), lhs, expr)
#define LADDER_K_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return tmp.error();                    \
  lhs = std::move(tmp).value()
