// `ladder plan m.yaml`: the power a matrix has, said before it runs.
//
// For each cell (a matrix without `pair:`, judged by `ladder compare` between two runs) or each
// paired comparison (a matrix with `pair:`, judged within each session by `ladder report`), the
// smallest change the planned design (the matrix's `replicates`) detects with the wanted power
// (80 %) under the verdict: the whole interval beyond the ±threshold band, and over the matrix,
// Holm over its cells or comparisons (the worst case: one changed, the others not). And, for a
// target change, the sessions that detect it. The math is stats/power.h.
//
// The spread comes from earlier runs of a matrix with the same name in the database (the latest
// `max_runs` of them, each cell's variance by level evaluated at the planned design and pooled
// over the runs, weighted by their sessions' df; a comparison's per-session log-ratio variance
// from its arm × session decomposition), or from a stated assumption (PlanOptions' sds), which
// overrides the runs when given. A cell the runs did not measure takes the median of the others,
// and says so.
//
// Read-only over the database (which may be null: no history). Errors: InvalidArgument for bad
// options; FailedPrecondition when there is neither history nor an assumption (the message says
// which flag states one), or fewer than 2 planned sessions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "ladder/db/sqlite.h"
#include "ladder/matrices/matrix.h"
#include "ladder/stats/power.h"
#include "ladder/stats/variance.h"

namespace ladder::report {

struct PlanOptions {
  double threshold = 0.02;   // the verdict's band, as compare / report
  double confidence = 0.95;  // the verdict's
  double power = 0.80;
  std::optional<double> target;  // a change (0.05 = 5 %) to give the sessions needed for
  // A stated assumption, as relative sds (0.03 = 3 %, taken as sds of log values): the spread
  // between sessions, between processes of a session, between rounds of a process, and (paired
  // matrices) of each arm's effect per session (arm × session). Any given: the assumption is
  // used instead of the database, the missing ones taken as 0.
  std::optional<double> session_sd, process_sd, round_sd, interaction_sd;
  int max_runs = 5;  // the latest earlier runs pooled
  int max_sessions = 1000;
  absl::Status Validate() const;
};

struct PlanRow {
  // A cell key, or for a comparison "context: treatment vs baseline" (context: other axes).
  std::string key;
  double per_session_sd = 0;  // sd of a session's log value (kTwoRuns) or log-ratio (kPaired)
  std::string sd_source;      // "runs 3, 4", "assumed", "median of the other cells"
  std::optional<stats::DetectableChange> matrix;    // Holm over the family
  std::optional<stats::DetectableChange> per_cell;  // the per-cell (per-comparison) verdict
  std::optional<stats::SessionsNeeded> sessions_for_target;  // under the matrix verdict
  std::string error;
};

struct MatrixPlan {
  std::string matrix_name, metric;
  stats::PowerDesign design = stats::PowerDesign::kTwoRuns;
  std::vector<std::string> pair_axes;
  int sessions = 0, processes = 0, rounds = 0;  // planned
  std::size_t family = 0;                       // cells or comparisons judged together
  double threshold = 0.02, confidence = 0.95, power = 0.80;
  std::optional<double> target;
  std::vector<int64_t> runs;  // earlier runs the spread came from (empty: assumed)
  std::string source;         // one sentence: where the spread came from
  std::vector<PlanRow> rows;
  double median_mdc = 0, max_mdc = 0;  // of rows' matrix MDC (up)
  std::vector<std::string> notes;
};

absl::StatusOr<MatrixPlan> PlanMatrix(const matrices::Matrix& matrix, db::Database* db,
                                      const PlanOptions& options = {});

std::string RenderPlanText(const MatrixPlan& plan);
nlohmann::json ToJson(const MatrixPlan& plan);  // stable keys; NaN -> null

}  // namespace ladder::report
