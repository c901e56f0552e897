// Terminal presentation for the CLI: tables that fit the terminal, durations, progress bars.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ladder::cli {

// Columns are right-aligned when every cell in them looks numeric. When the table is wider
// than the terminal, the widest columns are truncated with an ellipsis.
std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

int TerminalWidth();  // COLUMNS, else the tty's width, else 100
bool StdoutIsTty();

// Text from the database (a program's or an engine's own words) made safe for a terminal: C0
// control bytes other than a newline, and DEL, become '?', so no escape sequence reaches it.
std::string ForTerminal(const std::string& text);
std::string FormatDuration(double seconds);  // "3.2 s", "4 min 10 s", "2 h 05 min"
std::string FormatNumber(double value);      // 4 significant digits, no exponent below 1e9
// The shortest text that reads back as exactly `value` (fmt's "{}"); "nan", "inf", "-inf".
std::string FormatRoundTrip(double value);
// Counts and df: "4", "2.5", "7.31" (up to 3 significant decimals, no trailing zeros).
std::string FormatShortest(double value);
std::string FormatTimeMs(int64_t unix_ms);  // "2026-11-29 07:40:12"

// "[#########.......] 12/40 cells  done 10  leased 2  queued 28  failed 0  ETA 1 min 10 s"
std::string ProgressLine(int64_t done, int64_t total, int64_t leased, int64_t queued,
                         int64_t failed, double eta_seconds, int width);

// "a, b,,c" -> {"a", "b", "c"}: a flag's comma-separated list, blank items dropped.
std::vector<std::string> SplitCsv(const std::string& text);

}  // namespace ladder::cli
