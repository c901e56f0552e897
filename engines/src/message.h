// String building for messages. Debian's abseil is built with its own absl::string_view (not
// std::string_view), so absl::StrCat does not take std::string_view; Cat takes both.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/string_view.h"

namespace ladder::engines::internal {

inline void AppendPiece(std::string& out, std::string_view s) { out.append(s); }
inline void AppendPiece(std::string& out, const std::string& s) { out.append(s); }
inline void AppendPiece(std::string& out, const char* s) { out.append(s); }
inline void AppendPiece(std::string& out, char c) { out.push_back(c); }
#if !defined(ABSL_USES_STD_STRING_VIEW)
inline void AppendPiece(std::string& out, absl::string_view s) { out.append(s.data(), s.size()); }
#endif
template <typename T>
requires(std::is_integral_v<T> && !std::is_same_v<T, char> &&
         !std::is_same_v<T, bool>) void AppendPiece(std::string& out, T v) {
  out.append(std::to_string(v));
}
inline void AppendPiece(std::string& out, bool v) { out.append(v ? "true" : "false"); }
inline void AppendPiece(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  out.append(buf);
}

template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (AppendPiece(out, args), ...);
  return out;
}

inline std::string_view ToStd(absl::string_view s) { return {s.data(), s.size()}; }

}  // namespace ladder::engines::internal
