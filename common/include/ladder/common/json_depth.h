// How deep a JSON text nests, found by one scan before any parser sees it: nlohmann's parser and
// SQLite's json functions recurse, so a document nested thousands deep must be refused first.
#pragma once

#include <string_view>

namespace ladder {

// True when brackets outside string literals nest deeper than `limit`. A scan, not a parser: it
// tracks only whether it is inside a string (and its escapes); text that is not JSON at all is
// left to the parser to refuse.
inline bool JsonNestsDeeperThan(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > limit) return true;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return false;
}

}  // namespace ladder
