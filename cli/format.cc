#include "format.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include "absl/strings/str_split.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

namespace ladder::cli {
namespace {

bool LooksNumeric(const std::string& s) {
  if (s.empty() || s == "-") return true;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end && (*end == '\0' || *end == '%');
}

// Display width, counting UTF-8 code points (good enough for our ASCII-and-µ tables).
size_t DisplayWidth(const std::string& s) {
  size_t width = 0;
  for (unsigned char c : s) {
    if ((c & 0xc0) != 0x80) ++width;
  }
  return width;
}

std::string Truncate(const std::string& s, size_t width) {
  if (DisplayWidth(s) <= width) return s;
  if (width <= 1) return s.substr(0, width);
  std::string out;
  size_t w = 0;
  for (size_t i = 0; i < s.size() && w + 1 < width; ++i) {
    out.push_back(s[i]);
    if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) ++w;
  }
  return out + "…";
}

}  // namespace

bool StdoutIsTty() { return isatty(STDOUT_FILENO) == 1; }

int TerminalWidth() {
  if (const char* columns = std::getenv("COLUMNS")) {
    int value = std::atoi(columns);
    if (value > 20) return value;
  }
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
  return 100;
}

std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
  const size_t ncol = header.size();
  std::vector<size_t> width(ncol, 0);
  std::vector<bool> numeric(ncol, true);
  for (size_t c = 0; c < ncol; ++c) width[c] = DisplayWidth(header[c]);
  for (const auto& row : rows) {
    for (size_t c = 0; c < ncol && c < row.size(); ++c) {
      width[c] = std::max(width[c], DisplayWidth(row[c]));
      if (!LooksNumeric(row[c])) numeric[c] = false;
    }
  }
  // Shrink the widest column until the table fits (2 spaces between columns). Output that goes
  // to a file or a pipe is never truncated, unless COLUMNS asks for it.
  const bool fit = StdoutIsTty() || std::getenv("COLUMNS") != nullptr;
  const size_t limit = fit ? static_cast<size_t>(TerminalWidth()) : SIZE_MAX;
  auto total = [&] {
    size_t sum = 0;
    for (size_t w : width) sum += w;
    return sum + 2 * (ncol > 0 ? ncol - 1 : 0);
  };
  while (total() > limit) {
    auto widest = std::max_element(width.begin(), width.end());
    if (*widest <= 6) break;
    --*widest;
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < ncol; ++c) {
      std::string cell = Truncate(c < cells.size() ? cells[c] : "", width[c]);
      const size_t pad = width[c] - DisplayWidth(cell);
      if (c > 0) out += "  ";
      if (numeric[c]) {
        out += std::string(pad, ' ') + cell;
      } else {
        out += cell;
        if (c + 1 < ncol) out += std::string(pad, ' ');
      }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  std::vector<std::string> rule;
  for (size_t c = 0; c < ncol; ++c) rule.push_back(std::string(width[c], '-'));
  out += line(rule);
  for (const auto& row : rows) out += line(row);
  return out;
}

std::string FormatDuration(double seconds) {
  if (seconds < 0) return "?";
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total < 3600) return fmt::format("{} min {:02} s", total / 60, total % 60);
  return fmt::format("{} h {:02} min", total / 3600, (total % 3600) / 60);
}

std::string FormatNumber(double value) {
  if (std::isnan(value)) return "-";
  const double magnitude = std::fabs(value);
  if (magnitude != 0 && (magnitude >= 1e9 || magnitude < 1e-3)) return fmt::format("{:.3e}", value);
  if (magnitude >= 1000) return fmt::format("{:.0f}", value);
  if (magnitude >= 100) return fmt::format("{:.1f}", value);
  if (magnitude >= 10) return fmt::format("{:.2f}", value);
  return fmt::format("{:.3f}", value);
}

std::string FormatRoundTrip(double value) { return fmt::format("{}", value); }

std::string FormatShortest(double value) {
  if (std::isnan(value)) return "-";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return fmt::format("{:.4g}", value);
}

std::string FormatTimeMs(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S", &tm);
  return buffer;
}

std::string ProgressLine(int64_t done, int64_t total, int64_t leased, int64_t queued,
                         int64_t failed, double eta_seconds, int width) {
  const int bar = std::clamp(width - 70, 10, 40);
  const double fraction =
      total > 0 ? static_cast<double>(done + failed) / static_cast<double>(total) : 0;
  const int filled = static_cast<int>(fraction * bar);
  std::string out = "[" + std::string(static_cast<size_t>(filled), '#') +
                    std::string(static_cast<size_t>(bar - filled), '.') + "]";
  out += fmt::format(" {}/{} units  done {}  leased {}  queued {}  failed {}", done + failed, total,
                     done, leased, queued, failed);
  if (eta_seconds >= 0) out += "  ETA " + FormatDuration(eta_seconds);
  return out;
}

std::vector<std::string> SplitCsv(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    out.emplace_back(part);
  }
  return out;
}

std::string ForTerminal(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\n') || byte == 0x7f) c = '?';
  }
  return out;
}

}  // namespace ladder::cli
