// The one door for text an agent or client sends, and the one writer of such text to the log.
// Private to coordinator/.
//
// Every string field of a request passes CheckText (refused with INVALID_ARGUMENT naming the
// field) or, where the proto says it is truncated, BoundText. Either way what is stored holds no
// byte that can start a log line, a terminal escape sequence or reorder what a reader sees:
//
//   refused everywhere: invalid UTF-8; C0 controls (U+0000..U+001F, tab and newline included);
//     DEL (U+007F); C1 controls (U+0080..U+009F); the line and paragraph separators U+2028 and
//     U+2029; the bidi controls U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069; a
//     byte-order mark (U+FEFF).
//
// Whatever still reaches the log from outside (a reason already stored by an older
// coordinator, a failure reason, a hostname) is written through Untrusted(), which escapes the
// same characters (\n, \x1b, \u{2028}, ...) and bounds the length, so one event is one line.
//
// Thread safety: pure functions; LogLimiter is safe to call from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <spdlog/fmt/fmt.h>

#include "absl/status/status.h"

namespace ladder::coordinator {

enum class TextRequired { kNo, kYes };

// The character rule above and `max_bytes`: OK, or INVALID_ARGUMENT "FIELD is N bytes; at most
// M", "FIELD is required", "FIELD contains U+001B (a control character) at byte 4", ...
absl::Status CheckText(std::string_view field, std::string_view value, size_t max_bytes,
                       TextRequired required = TextRequired::kNo);

// The offset of the first character the rule refuses, or npos; `*what` (may be null) says which.
size_t ForbiddenCharacterAt(std::string_view value, std::string* what = nullptr);

// Text the proto says is truncated rather than refused (ReleaseRequest.reason): forbidden
// characters escaped as for the log, then cut at a character boundary to at most `max_bytes`
// with the marker " [truncated from N bytes]" (the marker is counted within max_bytes).
std::string BoundText(std::string_view value, size_t max_bytes);

// `value` escaped for one log line: backslash as \\, C0/DEL/invalid bytes as \n, \t, \r or
// \xNN, C1/bidi/separators/BOM as \u{XXXX}; longer than `max_bytes` (of the original), the
// rest is replaced by "...[N bytes]".
std::string EscapeForLog(std::string_view value, size_t max_bytes = 512);

// For spdlog/fmt: spdlog::warn("... {}", Untrusted(reason)) writes EscapeForLog(reason).
struct Untrusted {
  explicit Untrusted(std::string_view t, size_t max = 512) : text(t), max_bytes(max) {}
  std::string_view text;
  size_t max_bytes;
};

// Bounds how often one kind of event is logged: the first event of each window is logged, the
// others only counted; the next logged one says how many were not. Callers count every event
// in /metrics themselves.
class LogLimiter {
 public:
  explicit LogLimiter(std::chrono::steady_clock::duration window) : window_(window) {}
  // True when this event may be logged; `*suppressed` is then the number not logged since the
  // last one that was.
  bool Allow(uint64_t* suppressed);

 private:
  const std::chrono::steady_clock::duration window_;
  std::atomic<int64_t> next_allowed_ns_{0};
  std::atomic<uint64_t> suppressed_{0};
};

// Installs (once per process) protobuf's log handler: its ERROR lines (a request with invalid
// UTF-8 in a string field, one line each) become a counter, ladder_malformed_requests_total,
// and at most one log line per 10 s.
void InstallProtobufLogLimiter();
// The count above (for /metrics).
uint64_t MalformedRequestCount();

}  // namespace ladder::coordinator

template <>
struct fmt::formatter<ladder::coordinator::Untrusted> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const ladder::coordinator::Untrusted& u, FormatContext& ctx) const
      -> decltype(ctx.out()) {
    const std::string escaped = ladder::coordinator::EscapeForLog(u.text, u.max_bytes);
    return fmt::formatter<std::string_view>::format(std::string_view(escaped), ctx);
  }
};
