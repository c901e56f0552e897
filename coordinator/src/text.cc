#include "text.h"

#include <google/protobuf/stubs/logging.h>

#include <cstdio>
#include <mutex>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ladder/common/utf8.h"

namespace ladder::coordinator {
namespace {

// The code point of the well-formed sequence of `length` bytes at text[i].
uint32_t CodePointAt(std::string_view text, size_t i, size_t length) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (length == 1) return c;
  uint32_t code = length == 2 ? (c & 0x1F) : length == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < length; ++k) {
    code = (code << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  }
  return code;
}

// What the rule refuses, named for a refusal; nullptr for an allowed code point.
const char* ForbiddenKind(uint32_t code) {
  if (code < 0x20 || code == 0x7F) return "a control character";
  if (code >= 0x80 && code <= 0x9F) return "a C1 control character";
  if (code == 0x2028 || code == 0x2029) return "a line or paragraph separator";
  if (code == 0x061C || code == 0x200E || code == 0x200F || (code >= 0x202A && code <= 0x202E) ||
      (code >= 0x2066 && code <= 0x2069)) {
    return "a bidirectional control";
  }
  if (code == 0xFEFF) return "a byte-order mark";
  return nullptr;
}

std::atomic<uint64_t> malformed_requests{0};
LogLimiter& ProtobufLogLimiter() {
  static LogLimiter limiter(std::chrono::seconds(10));
  return limiter;
}

void ProtobufLogHandler(google::protobuf::LogLevel level, const char* filename, int line,
                        const std::string& message) {
  if (level < google::protobuf::LOGLEVEL_ERROR) return;
  // Parsing a request with invalid UTF-8 in a string field logs an ERROR per request; gRPC
  // then refuses the call itself. A client must not be able to write a line per call.
  malformed_requests.fetch_add(1);
  uint64_t suppressed = 0;
  if (!ProtobufLogLimiter().Allow(&suppressed)) return;
  spdlog::warn(
      "protobuf {}:{}: {} ({} similar not logged; ladder_malformed_requests_total "
      "counts them)",
      filename == nullptr ? "" : filename, line, Untrusted(message), suppressed);
}

}  // namespace

size_t ForbiddenCharacterAt(std::string_view value, std::string* what) {
  size_t i = 0;
  while (i < value.size()) {
    const size_t n = Utf8SequenceAt(value, i);
    if (n == 0) {
      if (what != nullptr) {
        *what = absl::StrFormat("byte 0x%02X (not UTF-8)", static_cast<unsigned char>(value[i]));
      }
      return i;
    }
    const uint32_t code = CodePointAt(value, i, n);
    if (const char* kind = ForbiddenKind(code)) {
      if (what != nullptr) *what = absl::StrFormat("U+%04X (%s)", code, kind);
      return i;
    }
    i += n;
  }
  return std::string_view::npos;
}

absl::Status CheckText(std::string_view field, std::string_view value, size_t max_bytes,
                       TextRequired required) {
  if (required == TextRequired::kYes && value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), " is required"));
  }
  if (value.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), " is ", value.size(), " bytes; at most ", max_bytes));
  }
  std::string what;
  if (const size_t at = ForbiddenCharacterAt(value, &what); at != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), " contains ", what, " at byte ", at, "; see agent.proto"));
  }
  return absl::OkStatus();
}

std::string EscapeForLog(std::string_view value, size_t max_bytes) {
  std::string out;
  const std::string_view shown = value.substr(0, std::min(value.size(), max_bytes));
  out.reserve(shown.size() + 16);
  size_t i = 0;
  while (i < shown.size()) {
    size_t n = Utf8SequenceAt(value, i);  // whole sequences, even across the cut
    const auto c = static_cast<unsigned char>(value[i]);
    if (n == 0) {
      out += absl::StrFormat("\\x%02x", c);
      i += 1;
      continue;
    }
    const uint32_t code = CodePointAt(value, i, n);
    if (code == '\\') {
      out += "\\\\";
    } else if (code == '\n') {
      out += "\\n";
    } else if (code == '\r') {
      out += "\\r";
    } else if (code == '\t') {
      out += "\\t";
    } else if (code < 0x20 || code == 0x7F) {
      out += absl::StrFormat("\\x%02x", code);
    } else if (ForbiddenKind(code) != nullptr) {
      out += absl::StrFormat("\\u{%04x}", code);
    } else {
      out.append(value.substr(i, n));
    }
    i += n;
  }
  if (i < value.size()) absl::StrAppend(&out, "...[", value.size(), " bytes]");
  return out;
}

std::string BoundText(std::string_view value, size_t max_bytes) {
  std::string escaped = EscapeForLog(value, value.size());
  if (escaped.size() <= max_bytes) return escaped;
  const std::string marker = absl::StrCat(" [truncated from ", value.size(), " bytes]");
  size_t keep = max_bytes > marker.size() ? max_bytes - marker.size() : 0;
  // Back to a character boundary (the escaped text is valid UTF-8).
  while (keep > 0 && (static_cast<unsigned char>(escaped[keep]) & 0xC0) == 0x80) --keep;
  escaped.resize(keep);
  return escaped + marker.substr(0, max_bytes - keep);
}

bool LogLimiter::Allow(uint64_t* suppressed) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t next = next_allowed_ns_.load();
  const int64_t window = std::chrono::duration_cast<std::chrono::nanoseconds>(window_).count();
  if (now >= next && next_allowed_ns_.compare_exchange_strong(next, now + window)) {
    *suppressed = suppressed_.exchange(0);
    return true;
  }
  suppressed_.fetch_add(1);
  return false;
}

void InstallProtobufLogLimiter() {
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&ProtobufLogHandler); });
}

uint64_t MalformedRequestCount() { return malformed_requests.load(); }

}  // namespace ladder::coordinator
