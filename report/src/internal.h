// Helpers shared by the analysis, report and verify sources. Not part of the public API.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ladder/stats/interval.h"

namespace ladder::report {

// "depth=256,path=2d" -> {{"depth","256"},{"path","2d"}}.
std::vector<std::pair<std::string, std::string>> SplitKey(const std::string& key);

// 4 significant digits, no exponent for ordinary magnitudes; "-" for NaN, "∞" for infinities.
std::string FormatNumber(double value);
// A ratio as a signed percent change: 0.292 -> "−70.8 %"; uses U+2212 for minus.
std::string FormatChange(double ratio);
// Degrees of freedom and small counts: "2", "7.31", "inf".
std::string FormatDf(double df);
// "[0.281, 0.303]" or "unbounded".
std::string FormatInterval(const stats::Interval& interval);

}  // namespace ladder::report
