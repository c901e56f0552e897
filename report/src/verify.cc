#include "ladder/report/verify.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "internal.h"
#include "ladder/status_macros.h"

namespace ladder::report {
namespace {

// key=value pairs of a mark; values may be double-quoted.
absl::StatusOr<std::map<std::string, std::string>> ParseMark(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i >= text.size()) break;
    const size_t eq = text.find('=', i);
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected key=value at \"", text.substr(i), "\""));
    }
    std::string key = text.substr(i, eq - i);
    if (key.empty() || key.find(' ') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("bad key \"", key, "\""));
    }
    i = eq + 1;
    std::string value;
    if (i < text.size() && text[i] == '"') {
      const size_t close = text.find('"', i + 1);
      if (close == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("unterminated quote after ", key, "="));
      }
      value = text.substr(i + 1, close - i - 1);
      i = close + 1;
    } else {
      const size_t end = text.find_first_of(" \t\n", i);
      value = text.substr(i, end == std::string::npos ? std::string::npos : end - i);
      i = end == std::string::npos ? text.size() : end;
    }
    if (out.count(key)) return absl::InvalidArgumentError(absl::StrCat("repeated key ", key));
    out[key] = value;
  }
  return out;
}

// The number at the start of `text` (after spaces). Sets *decimals to the digits written after
// the point.
bool ParseStated(const std::string& text, double* value, int* decimals, std::string* written) {
  size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  const size_t start = i;
  double sign = 1;
  if (text.compare(i, 3, "\xE2\x88\x92") == 0) {  // U+2212 minus
    sign = -1;
    i += 3;
  } else if (i < text.size() && (text[i] == '-' || text[i] == '+')) {
    sign = text[i] == '-' ? -1 : 1;
    ++i;
  }
  std::string digits;
  bool point = false;
  *decimals = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits += c;
      if (point) ++*decimals;
    } else if (c == '.' && !point && i + 1 < text.size() &&
               std::isdigit(static_cast<unsigned char>(text[i + 1]))) {
      digits += c;
      point = true;
    } else if (c == ',' && !point && !digits.empty() && i + 3 < text.size() + 0 &&
               std::isdigit(static_cast<unsigned char>(text[i + 1]))) {
      // thousands separator
    } else {
      break;
    }
    ++i;
  }
  if (digits.empty()) return false;
  size_t end = i;
  while (end < text.size() && text[end] == ' ') ++end;
  if (end < text.size() && text[end] == '%') {
    i = end + 1;
  }
  *value = sign * std::strtod(digits.c_str(), nullptr);
  *written = text.substr(start, i - start);
  return true;
}

bool SelectorMatches(const std::vector<std::pair<std::string, std::string>>& selector,
                     const std::string& key) {
  const auto pairs = SplitKey(key);
  for (const auto& [k, v] : selector) {
    bool found = false;
    for (const auto& [kk, vv] : pairs) {
      if (kk == k && vv == v) found = true;
    }
    if (!found) return false;
  }
  return true;
}

class Checker {
 public:
  Checker(db::Database& db, const AnalysisOptions& options) : db_(db), options_(options) {}

  absl::StatusOr<const RunAnalysis*> Analysis(int64_t run, const std::string& metric) {
    auto key = std::make_pair(run, metric);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second.get();
    AnalysisOptions options = options_;
    options.metric = metric;
    ASSIGN_OR_RETURN(RunAnalysis a, AnalyzeRun(db_, run, options));
    auto [inserted, ok] = cache_.emplace(key, std::make_unique<RunAnalysis>(std::move(a)));
    (void)ok;
    return inserted->second.get();
  }

  // The recomputed figure of one mark.
  absl::StatusOr<double> Recompute(const std::map<std::string, std::string>& mark) {
    auto get = [&](const std::string& k) {
      auto it = mark.find(k);
      return it == mark.end() ? std::string() : it->second;
    };
    static const std::vector<std::string> kKeys = {"run",    "stat",   "cell", "arm",
                                                   "metric", "method", "tol",  "run2"};
    for (const auto& [k, v] : mark) {
      if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown key \"", k, "\"; keys: ", absl::StrJoin(kKeys, ", ")));
      }
    }
    int64_t run = 0;
    if (!absl::SimpleAtoi(get("run"), &run) || run <= 0) {
      return absl::InvalidArgumentError("run=N is required");
    }
    const std::string stat = get("stat");
    if (stat.empty()) return absl::InvalidArgumentError("stat= is required");
    ASSIGN_OR_RETURN(const RunAnalysis* a, Analysis(run, get("metric")));
    const auto selector = SplitKey(get("cell"));
    static const std::vector<std::string> kRatio = {"ratio", "change", "ratio_lower",
                                                    "ratio_upper"};
    static const std::vector<std::string> kCell = {
        "mean", "median", "sd", "cv", "n", "sessions", "mean_lower", "mean_upper", "repro"};
    static const std::vector<std::string> kLine = {
        "crossover",     "crossover_lower", "crossover_upper", "bracket_lower",
        "bracket_upper", "probes",          "probe_cells"};
    if (std::find(kLine.begin(), kLine.end(), stat) != kLine.end()) {
      return RecomputeLine(*a, run, stat, selector, get("arm"));
    }
    if (std::find(kRatio.begin(), kRatio.end(), stat) != kRatio.end()) {
      const std::string arm = get("arm");
      std::vector<const Comparison*> found;
      for (const auto& cmp : a->comparisons) {
        if (!arm.empty() && cmp.treatment_value != arm) continue;
        if (!SelectorMatches(selector, cmp.treatment_key)) continue;
        found.push_back(&cmp);
      }
      if (found.size() != 1) {
        std::vector<std::string> keys;
        for (const auto* c : found) keys.push_back(c->treatment_key);
        return absl::InvalidArgumentError(
            absl::StrCat("the selector matches ", found.size(), " comparisons of run ", run,
                         found.empty() ? "" : ": " + absl::StrJoin(keys, " | "),
                         found.empty() ? " (name cell= and arm= of a compared cell)"
                                       : " (narrow cell= or arm=)"));
      }
      const Comparison& cmp = *found.front();
      const std::string method = get("method").empty() ? "t" : get("method");
      const RatioResult* r = method == "t"           ? &cmp.t
                             : method == "bootstrap" ? &cmp.bootstrap
                             : method == "fieller"   ? &cmp.fieller
                                                     : nullptr;
      if (!r) return absl::InvalidArgumentError("method= must be t, bootstrap or fieller");
      if (!r->interval) {
        return absl::FailedPreconditionError(
            absl::StrCat("no ", method, " interval for ", cmp.treatment_key, ": ", r->error));
      }
      if (stat == "ratio") return r->interval->estimate;
      if (stat == "change") return 100.0 * (r->interval->estimate - 1.0);
      if (stat == "ratio_lower") return r->interval->lower;
      return r->interval->upper;
    }
    if (std::find(kCell.begin(), kCell.end(), stat) == kCell.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown stat \"", stat, "\"; stats: ", absl::StrJoin(kRatio, ", "), ", ",
                       absl::StrJoin(kCell, ", "), ", ", absl::StrJoin(kLine, ", ")));
    }
    std::vector<const CellStats*> found;
    for (const auto& c : a->cells) {
      if (SelectorMatches(selector, c.key)) found.push_back(&c);
    }
    if (found.size() != 1) {
      std::vector<std::string> keys;
      for (const auto* c : found) keys.push_back(c->key);
      return absl::InvalidArgumentError(
          absl::StrCat("the selector matches ", found.size(), " cells of run ", run,
                       found.empty() ? "" : ": " + absl::StrJoin(keys, " | ")));
    }
    const CellStats& cell = *found.front();
    if (stat == "n") return static_cast<double>(cell.n);
    if (stat == "sessions") return static_cast<double>(cell.sessions);
    if (!cell.summary) return absl::FailedPreconditionError(cell.key + " has no data");
    if (stat == "mean") return cell.summary->mean;
    if (stat == "median") return cell.summary->median;
    if (stat == "sd") return cell.summary->sd;
    if (stat == "cv") return 100.0 * cell.summary->cv;
    if (stat == "mean_lower" || stat == "mean_upper") {
      if (!cell.interval) {
        return absl::FailedPreconditionError(cell.key + ": " + cell.interval_error);
      }
      return stat == "mean_lower" ? cell.interval->lower : cell.interval->upper;
    }
    // repro
    int64_t run2 = 0;
    if (!absl::SimpleAtoi(get("run2"), &run2) || run2 <= 0) {
      return absl::InvalidArgumentError("stat=repro needs run2=M");
    }
    ASSIGN_OR_RETURN(const RunAnalysis* b, Analysis(run2, get("metric")));
    const CellStats* other = b->FindCell(cell.key);
    if (!other || !other->summary) {
      return absl::FailedPreconditionError(
          absl::StrCat("run ", run2, " has no data for ", cell.key));
    }
    const double x = cell.summary->mean, y = other->summary->mean;
    return 100.0 * std::fabs(x - y) / ((x + y) / 2);
  }

 private:
  // A ladder line's crossover figures. The selector matches the line's key (the cell key
  // without the depth and pair axes); `arm` narrows to one treatment arm.
  absl::StatusOr<double> RecomputeLine(
      const RunAnalysis& a, int64_t run, const std::string& stat,
      const std::vector<std::pair<std::string, std::string>>& selector, const std::string& arm) {
    std::vector<const LadderLine*> found;
    for (const auto& line : a.lines) {
      if (!arm.empty() && line.treatment_value != arm) continue;
      if (SelectorMatches(selector, line.key)) found.push_back(&line);
    }
    if (found.size() != 1) {
      std::vector<std::string> labels;
      for (const auto* l : found) labels.push_back(l->label);
      return absl::InvalidArgumentError(absl::StrCat(
          "the selector matches ", found.size(), " ladder lines of run ", run,
          found.empty() ? "" : ": " + absl::StrJoin(labels, " | "),
          found.empty() ? " (name the line's other axes in cell=)" : " (narrow cell= or arm=)"));
    }
    const LadderLine& line = *found.front();
    if (stat == "probes" || stat == "probe_cells") {
      if (!line.located) {
        return absl::FailedPreconditionError(
            absl::StrCat(line.label, ": the run has no locate decisions for this line"));
      }
      return static_cast<double>(stat == "probes" ? line.located->probes.size()
                                                  : static_cast<size_t>(line.located->cells));
    }
    if (stat == "bracket_lower" || stat == "bracket_upper") {
      // The coordinator's bracket when it located this line, else the measured ladder's.
      double lower = std::numeric_limits<double>::quiet_NaN(), upper = lower;
      if (line.located && std::isfinite(line.located->bracket_lower)) {
        lower = line.located->bracket_lower;
        upper = line.located->bracket_upper;
      } else if (line.crossing) {
        lower = line.crossing->bracket_lower;
        upper = line.crossing->bracket_upper;
      } else {
        return absl::FailedPreconditionError(
            absl::StrCat(line.label, ": the ratio does not cross 1"));
      }
      return stat == "bracket_lower" ? lower : upper;
    }
    if (!line.crossover_fit) {
      return absl::FailedPreconditionError(
          absl::StrCat(line.label, ": no crossover fit",
                       line.crossover_error.empty() ? "" : ": " + line.crossover_error));
    }
    if (line.crossover_fit->bounds == stats::Boundedness::kUnbounded) {
      return absl::FailedPreconditionError(absl::StrCat(
          line.label, ": the crossover's interval is unbounded (", line.crossover_fit->note, ")"));
    }
    if (stat == "crossover") return line.crossover_fit->estimate;
    return stat == "crossover_lower" ? line.crossover_fit->lower : line.crossover_fit->upper;
  }

  db::Database& db_;
  AnalysisOptions options_;
  std::map<std::pair<int64_t, std::string>, std::unique_ptr<RunAnalysis>> cache_;
};

}  // namespace

absl::StatusOr<std::vector<FigureCheck>> VerifyDocument(db::Database& db, const std::string& text,
                                                        const std::string& filename,
                                                        const AnalysisOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  Checker checker(db, options);
  std::vector<FigureCheck> checks;
  static const std::string kOpen = "<!--";
  size_t pos = 0;
  while ((pos = text.find(kOpen, pos)) != std::string::npos) {
    const size_t close = text.find("-->", pos);
    if (close == std::string::npos) break;
    std::string body = text.substr(pos + kOpen.size(), close - pos - kOpen.size());
    const size_t start = pos;
    pos = close + 3;
    size_t b = 0;
    while (b < body.size() && std::isspace(static_cast<unsigned char>(body[b]))) ++b;
    if (body.compare(b, 7, "ladder:") != 0) continue;
    body = body.substr(b + 7);
    while (!body.empty() && std::isspace(static_cast<unsigned char>(body.back()))) body.pop_back();
    while (!body.empty() && std::isspace(static_cast<unsigned char>(body.front()))) {
      body.erase(body.begin());
    }
    FigureCheck check;
    check.file = filename;
    check.line = 1 + static_cast<int>(std::count(
                         text.begin(), text.begin() + static_cast<std::ptrdiff_t>(start), '\n'));
    check.query = body;
    const size_t eol = text.find('\n', pos);
    const std::string after =
        text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    int decimals = 0;
    if (!ParseStated(after, &check.stated, &decimals, &check.stated_text)) {
      check.error = "no number right after the mark";
      checks.push_back(std::move(check));
      continue;
    }
    auto mark = ParseMark(body);
    if (!mark.ok()) {
      check.error = std::string(mark.status().message());
      checks.push_back(std::move(check));
      continue;
    }
    auto value = checker.Recompute(*mark);
    if (!value.ok()) {
      check.error = std::string(value.status().message());
      checks.push_back(std::move(check));
      continue;
    }
    check.recomputed = *value;
    const auto tol = mark->find("tol");
    if (tol == mark->end()) {
      check.tolerance = 0.5 * std::pow(10.0, -decimals);
    } else {
      std::string t = tol->second;
      const bool relative = !t.empty() && t.back() == '%';
      if (relative) t.pop_back();
      char* end = nullptr;
      const double x = std::strtod(t.c_str(), &end);
      if (t.empty() || end != t.c_str() + t.size() || !(x >= 0)) {
        check.error = "tol= must be a number, optionally followed by %";
        checks.push_back(std::move(check));
        continue;
      }
      check.tolerance = relative ? x / 100.0 * std::fabs(check.recomputed) : x;
    }
    // A tiny allowance so that a figure rounded exactly at the boundary passes.
    check.ok = std::isfinite(check.recomputed) &&
               std::fabs(check.stated - check.recomputed) <= check.tolerance * (1 + 1e-9) + 1e-12;
    checks.push_back(std::move(check));
  }
  return checks;
}

std::string DescribeCheck(const FigureCheck& c) {
  std::string where = absl::StrCat(c.file, ":", c.line, ": ");
  if (!c.error.empty()) {
    return absl::StrCat(where, "cannot check ",
                        c.stated_text.empty() ? "" : "\"" + c.stated_text + "\" ", "(", c.query,
                        "): ", c.error);
  }
  return absl::StrCat(where, c.ok ? "ok" : "DRIFTED", ": stated ", c.stated_text, ", recomputed ",
                      FormatNumber(c.recomputed), ", tolerance ±", FormatNumber(c.tolerance), " (",
                      c.query, ")");
}

}  // namespace ladder::report
