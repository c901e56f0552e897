#include <cmath>
#include <cstdio>
#include <string>

#include "internal.h"
#include "ladder/report/report.h"

namespace ladder::report {

std::string FormatNumber(double value) {
  if (std::isnan(value)) return "-";
  if (std::isinf(value)) return value > 0 ? "∞" : "−∞";
  if (value == 0) return "0";
  const double magnitude = std::fabs(value);
  char buffer[64];
  if (magnitude >= 1e9 || magnitude < 1e-4) {
    std::snprintf(buffer, sizeof buffer, "%.3e", value);
    return buffer;
  }
  const int digits = static_cast<int>(std::floor(std::log10(magnitude))) + 1;
  const int decimals = std::max(0, 4 - digits);
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string FormatChange(double ratio) {
  if (!std::isfinite(ratio)) return "-";
  const double percent = 100.0 * (ratio - 1.0);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.1f", std::fabs(percent));
  std::string text = buffer;
  if (text == "0.0") return "0.0 %";
  return std::string(percent < 0 ? "−" : "+") + text + " %";
}

std::string FormatDf(double df) {
  if (std::isnan(df)) return "-";
  if (std::isinf(df)) return "∞";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", df);
  return buffer;
}

std::string FormatInterval(const stats::Interval& interval) {
  if (interval.bounds == stats::Boundedness::kUnbounded) return "unbounded";
  return "[" + FormatNumber(interval.lower) + ", " + FormatNumber(interval.upper) + "]";
}

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '\n':
        out += "&#10;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace ladder::report
