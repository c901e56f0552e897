// UTF-8 at the edges: text that arrives from outside (a matrix file, an engine's streamed bytes,
// its log) must be valid UTF-8 before it reaches JSON or protobuf. nlohmann::json::dump() throws
// on invalid UTF-8 and protobuf refuses to parse a `string` field that holds it, so one stray
// byte from an engine (a model's byte-fallback token streams half a character, 0x90 alone) used
// to terminate the agent. The one owner of "is this valid UTF-8" and "make it valid".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ladder {

// Length of the well-formed UTF-8 sequence starting at text[i] (no overlongs, no surrogates, at
// most U+10FFFF), or 0 when the byte there does not start one.
inline size_t Utf8SequenceAt(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) return 1;
  size_t length = 0;
  uint32_t min = 0, code = 0;
  if ((c & 0xE0) == 0xC0) {
    length = 2, min = 0x80, code = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    length = 3, min = 0x800, code = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    length = 4, min = 0x10000, code = c & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xC0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

// Offset of the first byte that is not part of well-formed UTF-8, or npos.
inline size_t InvalidUtf8At(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = Utf8SequenceAt(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

inline bool IsValidUtf8(std::string_view text) {
  return InvalidUtf8At(text) == std::string_view::npos;
}

// `text` with every byte that is not part of well-formed UTF-8 replaced by U+FFFD (as a reader
// of a lossy stream would show it); valid text is returned unchanged.
inline std::string ToValidUtf8(std::string_view text) {
  size_t bad = InvalidUtf8At(text);
  if (bad == std::string_view::npos) return std::string(text);
  std::string out(text.substr(0, bad));
  out.reserve(text.size() + 8);
  size_t i = bad;
  while (i < text.size()) {
    const size_t n = Utf8SequenceAt(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace ladder
