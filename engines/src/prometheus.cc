#include "ladder/engines/prometheus.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "message.h"

namespace ladder::engines {

using internal::Cat;
using internal::ToStd;
namespace {

bool IsNameChar(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

std::optional<double> ParseValue(std::string_view token) {
  if (token == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (token == "+Inf" || token == "Inf") return std::numeric_limits<double>::infinity();
  if (token == "-Inf") return -std::numeric_limits<double>::infinity();
  std::string s(token);
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
}

std::string_view Strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Fields(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<PrometheusSample>> ParsePrometheusText(std::string_view text) {
  std::vector<PrometheusSample> out;
  int line_number = 0;
  size_t next = 0;
  while (next <= text.size()) {
    size_t nl = text.find('\n', next);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = Strip(text.substr(next, nl - next));
    next = nl + 1;
    ++line_number;
    if (line.empty() || line[0] == '#') continue;
    auto error = [&](std::string_view what) {
      return absl::InvalidArgumentError(
          Cat("prometheus text line ", line_number, ": ", what, ": \"", line, "\""));
    };
    PrometheusSample sample;
    size_t i = 0;
    while (i < line.size() && IsNameChar(line[i], i == 0)) ++i;
    if (i == 0) return error("expected a metric name");
    sample.name = std::string(line.substr(0, i));
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (true) {
        while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
        if (i >= line.size()) return error("unterminated label set");
        if (line[i] == '}') {
          ++i;
          break;
        }
        size_t name_start = i;
        while (i < line.size() && IsNameChar(line[i], i == name_start) && line[i] != ':') ++i;
        if (i == name_start) return error("expected a label name");
        std::string label(line.substr(name_start, i - name_start));
        while (i < line.size() && line[i] == ' ') ++i;
        if (i >= line.size() || line[i] != '=') return error("expected '=' after label name");
        ++i;
        while (i < line.size() && line[i] == ' ') ++i;
        if (i >= line.size() || line[i] != '"') return error("expected a quoted label value");
        ++i;
        std::string value;
        bool closed = false;
        while (i < line.size()) {
          char c = line[i++];
          if (c == '\\' && i < line.size()) {
            char e = line[i++];
            value.push_back(e == 'n' ? '\n' : e);
          } else if (c == '"') {
            closed = true;
            break;
          } else {
            value.push_back(c);
          }
        }
        if (!closed) return error("unterminated label value");
        sample.labels[label] = std::move(value);
      }
    }
    std::vector<std::string_view> rest = Fields(line.substr(i));
    if (rest.empty()) return error("missing value");
    if (rest.size() > 2) return error("unexpected text after value and timestamp");
    std::optional<double> value = ParseValue(rest[0]);
    if (!value.has_value()) return error("value is not a number");
    if (rest.size() == 2 && !ParseValue(rest[1]).has_value()) return error("bad timestamp");
    sample.value = *value;
    out.push_back(std::move(sample));
  }
  return out;
}

std::optional<double> SumCounter(const std::vector<PrometheusSample>& samples,
                                 std::string_view name) {
  std::string total = Cat(name, "_total");
  std::optional<double> sum;
  for (const auto& s : samples) {
    if (s.name == name || s.name == total) sum = sum.value_or(0) + s.value;
  }
  return sum;
}

}  // namespace ladder::engines
