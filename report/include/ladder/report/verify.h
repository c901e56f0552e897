// `ladder verify`: figures in a Markdown document, each marked with the query that produced it,
// recomputed from the database. The mark is an HTML comment placed right before the figure:
//
//   <!-- ladder: run=1 cell="depth=32768" stat=change arm=mtp-k1 tol=0.5% -->−70.8 %
//
// Keys (values may be "quoted"):
//   run=N        the run (required)
//   stat=S       ratio | change | ratio_lower | ratio_upper        (paired comparison)
//                mean | median | sd | cv | n | sessions | mean_lower | mean_upper   (one cell)
//                repro (needs run2=M: % difference of the cell's mean between the runs)
//   cell="k=v,…" cell selector: every named axis must match; the figure's query must select
//                exactly one cell (or one comparison) — ambiguity is an error, not a guess
//   arm=V        for comparison stats: the arm B value of the pair axis (the baseline is the
//                axis's first value, or the A/A source for the A/A arm)
//   metric=M     default: the run's metric
//   method=M     t (default) | bootstrap | fieller, for ratio/ratio_lower/ratio_upper
//   tol=T        "0.5%": relative to the recomputed value; "0.05": absolute, in the figure's
//                own unit (percent points for change and cv). Default: half a unit in the last
//                digit written (−70.8 → ±0.05).
// The stated figure is the number right after the comment: an optional sign (+, -, or U+2212),
// digits with optional thousands commas and a decimal point, optionally followed by %.
// change and cv are in percent: change = 100·(ratio − 1).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/db/sqlite.h"
#include "ladder/report/analysis.h"

namespace ladder::report {

struct FigureCheck {
  std::string file;
  int line = 0;       // 1-based line of the mark
  std::string query;  // the mark's text, e.g. `run=1 cell="depth=32768" stat=change ...`
  std::string stated_text;
  double stated = 0.0;
  double recomputed = 0.0;
  double tolerance = 0.0;  // absolute, in the figure's unit
  bool ok = false;
  std::string error;  // a mark that cannot be checked is a failure, with the reason
};

// Finds every `<!-- ladder: ... -->` mark in `text` and checks it against `db`. Returns one check
// per mark (empty when the document has none). Errors only for invalid options.
absl::StatusOr<std::vector<FigureCheck>> VerifyDocument(db::Database& db, const std::string& text,
                                                        const std::string& filename,
                                                        const AnalysisOptions& options = {});

// "DOC.md:12: stated −70.8, recomputed −65.21, tolerance ±0.05: drifted (run=1 ...)".
std::string DescribeCheck(const FigureCheck& check);

}  // namespace ladder::report
