#include "ladder/report/plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "internal.h"
#include "ladder/report/analysis.h"
#include "ladder/stats/distributions.h"
#include "ladder/status_macros.h"

namespace ladder::report {
namespace {

// One planned row before its spread is known: a cell, or a comparison of two cells.
struct PlannedRow {
  std::string key;
  std::string cell_key;                     // kTwoRuns: the cell
  std::string baseline_key, treatment_key;  // kPaired
};

// A spread pooled over runs: Σ df·var / Σ df.
struct Pooled {
  double sum = 0, df = 0;
  void Add(double var, double d) {
    if (std::isfinite(var) && d > 0) {
      sum += var * d;
      df += d;
    }
  }
};

// The variance of one session's log mean at the planned design, from a run's components (an
// unidentified process level is already inside the session component).
double SessionVarianceAt(const stats::VarianceComponents& c, int processes, int rounds) {
  if (std::isnan(c.t2[stats::kSession])) return kNaN;
  const double process = std::isnan(c.t2[stats::kProcess]) ? 0.0 : c.t2[stats::kProcess];
  return c.t2[stats::kSession] + process / processes +
         c.t2[stats::kRound] / (static_cast<double>(processes) * rounds);
}

std::string PlanPercent(double x) {
  return std::isfinite(x) ? absl::StrCat(FormatNumber(100 * x), " %") : "-";
}

// Columns of the text table: UTF-8 code points.
std::size_t PlanTextWidth(const std::string& text) {
  std::size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

absl::StatusOr<std::vector<int64_t>> EarlierRuns(db::Database& db, const std::string& name,
                                                 int max_runs) {
  ASSIGN_OR_RETURN(db::Statement stmt,
                   db.Prepare("SELECT r.id FROM runs r JOIN matrices m ON m.id = r.matrix_id "
                              "WHERE m.name = ?1 ORDER BY r.id DESC LIMIT ?2"));
  stmt.Bind(1, name).Bind(2, static_cast<int64_t>(max_runs));
  std::vector<int64_t> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back(stmt.Int(0));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

absl::Status PlanOptions::Validate() const {
  stats::PowerOptions p;
  p.threshold = threshold;
  p.confidence = confidence;
  p.power = power;
  RETURN_IF_ERROR(p.Validate());
  for (const auto* sd : {&session_sd, &process_sd, &round_sd, &interaction_sd}) {
    if (sd->has_value() && !(**sd >= 0 && std::isfinite(**sd))) {
      return absl::InvalidArgumentError(absl::StrCat("an assumed sd must be >= 0, got ", **sd));
    }
  }
  if (target.has_value() && !(*target > 0 && std::isfinite(*target))) {
    return absl::InvalidArgumentError(absl::StrCat("--target must be > 0, got ", *target));
  }
  if (max_runs < 1) return absl::InvalidArgumentError("max_runs must be >= 1");
  if (max_sessions < 2) return absl::InvalidArgumentError("max_sessions must be >= 2");
  return absl::OkStatus();
}

absl::StatusOr<MatrixPlan> PlanMatrix(const matrices::Matrix& matrix, db::Database* db,
                                      const PlanOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(matrices::Expansion expansion, matrices::Expand(matrix));
  MatrixPlan plan;
  plan.matrix_name = matrix.name;
  plan.metric = matrix.metric;
  plan.pair_axes = matrix.pair;
  plan.design = matrix.pair.empty() ? stats::PowerDesign::kTwoRuns : stats::PowerDesign::kPaired;
  plan.sessions = matrix.replicates.sessions;
  plan.processes = matrix.replicates.processes;
  plan.rounds = matrix.replicates.rounds;
  plan.threshold = options.threshold;
  plan.confidence = options.confidence;
  plan.power = options.power;
  plan.target = options.target;
  if (plan.sessions < 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replicates.sessions is ", plan.sessions,
        ": a verdict needs at least 2 sessions (3 for a run's own intervals); plan for more"));
  }

  // The rows: every cell, or every comparison of a cell against its pair axis's first value.
  std::vector<PlannedRow> planned;
  if (plan.design == stats::PowerDesign::kTwoRuns) {
    for (const auto& cell : expansion.cells) planned.push_back({cell.key, cell.key, "", ""});
  } else {
    std::map<std::string, const matrices::Cell*> by_key;
    for (const auto& cell : expansion.cells) by_key[cell.key] = &cell;
    std::vector<std::string> order;
    for (const auto& axis : matrix.axes) order.push_back(axis.name);
    for (const auto& pair_axis : matrix.pair) {
      // The baseline arm: the axis's first declared value.
      const auto axis = std::find_if(matrix.axes.begin(), matrix.axes.end(),
                                     [&](const matrices::Axis& a) { return a.name == pair_axis; });
      if (axis == matrix.axes.end() || axis->values.empty()) continue;
      const matrices::Value& first = axis->values.front();
      for (const auto& cell : expansion.cells) {
        if (!cell.axes.contains(pair_axis) || cell.axes[pair_axis] == first) continue;
        nlohmann::json axes = cell.axes;
        axes[pair_axis] = first;
        const std::string baseline = matrices::CellKey(order, axes);
        if (!by_key.count(baseline)) continue;
        const std::string context = matrices::CellKeyWithout(cell.key, {pair_axis});
        planned.push_back({absl::StrCat(context.empty() ? "" : context + ": ", pair_axis, "=",
                                        matrices::ValueToString(cell.axes[pair_axis]), " vs ",
                                        matrices::ValueToString(first)),
                           "", baseline, cell.key});
      }
    }
  }
  plan.family = planned.size();
  if (planned.empty()) return absl::FailedPreconditionError("the matrix has nothing to compare");

  // Where the spread comes from.
  std::map<std::string, Pooled> pooled;  // row key -> pooled variance
  const bool assumed =
      options.session_sd || options.process_sd || options.round_sd || options.interaction_sd;
  if (!assumed && db != nullptr) {
    ASSIGN_OR_RETURN(plan.runs, EarlierRuns(*db, matrix.name, options.max_runs));
    for (int64_t run : plan.runs) {
      AnalysisOptions analysis;
      analysis.bootstrap_draws = 0;
      analysis.threshold = options.threshold;
      analysis.metric = plan.metric;
      absl::StatusOr<RunAnalysis> a = AnalyzeRun(*db, run, analysis);
      if (!a.ok()) {
        plan.notes.push_back(absl::StrCat("run ", run, " left out: ", a.status().message()));
        continue;
      }
      if (plan.metric.empty()) plan.metric = a->info.metric;
      if (plan.design == stats::PowerDesign::kTwoRuns) {
        std::map<std::string, const CellStats*> cells;
        for (const auto& c : a->cells) cells[c.key] = &c;
        for (const auto& v : a->variance) {
          double var = kNaN, df = 0;
          if (v.components) {
            var = SessionVarianceAt(*v.components, plan.processes, plan.rounds);
            df = v.components->df[stats::kSession];
          } else if (auto c = cells.find(v.key);
                     c != cells.end() && c->second->interval &&
                     c->second->interval->scope == stats::IntervalScope::kBetweenSessions) {
            // No components (one round per process): the spread of the run's own session means.
            const stats::Interval& i = *c->second->interval;
            const double se = (std::log(i.upper) - std::log(i.lower)) /
                              (2 * stats::TwoSidedT(i.confidence, i.df));
            var = se * se * static_cast<double>(i.n_units);
            df = i.df;
          }
          pooled[v.key].Add(var, df);
        }
      } else {
        for (const auto& c : a->comparisons) {
          if (!c.arm_session) continue;
          pooled[c.baseline_key + "\n" + c.treatment_key].Add(
              2 * c.arm_session->interaction_ms, static_cast<double>(c.arm_session->sessions) - 1);
        }
      }
    }
  }
  std::string runs_text;
  if (!plan.runs.empty()) {
    std::vector<std::string> ids;
    for (int64_t r : plan.runs) ids.push_back(absl::StrCat(r));
    runs_text = absl::StrCat(plan.runs.size() == 1 ? "run " : "runs ", absl::StrJoin(ids, ", "));
  }
  if (assumed) {
    const double s = options.session_sd.value_or(0), p = options.process_sd.value_or(0),
                 r = options.round_sd.value_or(0), i = options.interaction_sd.value_or(0);
    const double within = p * p / plan.processes + r * r / (plan.processes * plan.rounds);
    const double var =
        plan.design == stats::PowerDesign::kTwoRuns ? s * s + within : 2 * (i * i + within);
    plan.source = absl::StrCat("assumed: between sessions ", PlanPercent(s), ", processes ",
                               PlanPercent(p), ", rounds ", PlanPercent(r),
                               plan.design == stats::PowerDesign::kPaired
                                   ? absl::StrCat(", arm × session ", PlanPercent(i))
                                   : "",
                               " (relative sds, as sds of log values)");
    for (const auto& row : planned)
      pooled[row.cell_key.empty() ? row.baseline_key + "\n" + row.treatment_key : row.cell_key].Add(
          var, 1);
  } else if (pooled.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        db == nullptr ? "no --db given"
                      : absl::StrCat("no earlier run of ", matrix.name, " in ", db->path(),
                                     plan.runs.empty() ? "" : " with a usable spread"),
        ": state an assumption with --session-sd (and --process-sd, --round-sd",
        plan.design == stats::PowerDesign::kPaired ? ", --interaction-sd" : "",
        "), e.g. --session-sd 3"));
  } else {
    plan.source = absl::StrCat(
        runs_text, " of ", matrix.name,
        plan.design == stats::PowerDesign::kTwoRuns
            ? absl::StrCat(": each cell's variance by level at ", plan.processes, " processes × ",
                           plan.rounds,
                           " rounds, pooled over the runs (weighted by their sessions' df)")
            : ": each comparison's per-session log-ratio variance (2 × the arm × session mean "
              "square, at those runs' design), pooled over the runs");
  }

  std::vector<double> known;
  for (const auto& [key, p] : pooled) {
    if (p.df > 0) known.push_back(p.sum / p.df);
  }
  std::sort(known.begin(), known.end());
  const double median_var = known.empty() ? kNaN : known[known.size() / 2];

  stats::PowerOptions per_cell;
  per_cell.threshold = options.threshold;
  per_cell.confidence = options.confidence;
  per_cell.power = options.power;
  stats::PowerOptions holm = per_cell;
  holm.family = plan.family;
  stats::DetectableChangeTable matrix_table(plan.design, holm);
  stats::DetectableChangeTable cell_table(plan.design, per_cell);
  std::vector<double> mdcs;
  for (const auto& p : planned) {
    PlanRow row;
    row.key = p.key;
    const std::string key =
        p.cell_key.empty() ? p.baseline_key + "\n" + p.treatment_key : p.cell_key;
    auto it = pooled.find(key);
    double var = kNaN;
    if (it != pooled.end() && it->second.df > 0) {
      var = it->second.sum / it->second.df;
      row.sd_source = assumed ? "assumed" : runs_text;
    } else if (std::isfinite(median_var)) {
      var = median_var;
      row.sd_source = "median of the others";
    }
    row.per_session_sd = std::sqrt(var);
    if (!std::isfinite(var)) {
      row.error = "no spread known";
    } else {
      auto m = matrix_table.At(row.per_session_sd, plan.sessions);
      auto c = cell_table.At(row.per_session_sd, plan.sessions);
      if (!m.ok() || !c.ok()) {
        row.error = std::string((!m.ok() ? m : c).status().message());
      } else {
        row.matrix = *m;
        row.per_cell = *c;
        mdcs.push_back(m->up);
        if (options.target) {
          auto n =
              matrix_table.SessionsFor(row.per_session_sd, *options.target, options.max_sessions);
          if (n.ok()) row.sessions_for_target = *n;
        }
      }
    }
    plan.rows.push_back(std::move(row));
  }
  std::sort(mdcs.begin(), mdcs.end());
  plan.median_mdc = mdcs.empty() ? kNaN : mdcs[mdcs.size() / 2];
  plan.max_mdc = mdcs.empty() ? kNaN : mdcs.back();
  if (!assumed && !plan.runs.empty() && plan.runs.size() == 1) {
    plan.notes.push_back(
        "the spread rests on one run: with few sessions a variance is itself uncertain by a "
        "large factor (2 df: ~40x); more runs of the matrix make the plan firmer");
  }
  if (plan.design == stats::PowerDesign::kTwoRuns) {
    plan.notes.push_back(
        "two runs on one host are also apart by the host's drift between runs, which no "
        "session spread measures: `ladder compare` adds it from repeated runs of the same build "
        "when there are some; pairing both builds in one run (`pair:`) removes it");
  }
  return plan;
}

std::string RenderPlanText(const MatrixPlan& p) {
  const bool paired = p.design == stats::PowerDesign::kPaired;
  std::string out = absl::StrCat(
      "Plan for ", p.matrix_name, p.metric.empty() ? "" : " (" + p.metric + ")", ": ", p.sessions,
      " sessions x ", p.processes, " processes x ", p.rounds, " rounds",
      paired ? " per run" : " per run, compared as two runs", "\nSpread: ", p.source, ".\n",
      paired ? absl::StrCat(
                   "Verdict: paired within each session (pair: ", absl::StrJoin(p.pair_axes, ", "),
                   "), ", p.family, " comparisons, as `ladder report` judges them")
             : absl::StrCat("Verdict: `ladder compare` of two runs, ", p.family, " cells"),
      "; band ±", FormatDf(100 * p.threshold), " %, ", FormatDf(100 * p.confidence),
      " % confidence; the matrix verdict is Holm over the ", p.family, ".\n",
      "Smallest change detected with ", FormatDf(100 * p.power), " % power (one ",
      paired ? "comparison" : "cell",
      " changed, the others not; up / down, the log scale is symmetric):\n\n");
  std::vector<std::vector<std::string>> table;
  table.push_back({paired ? "comparison" : "cell", "sd/session",
                   absl::StrCat("matrix (Holm, ", p.family, ")"),
                   paired ? "per comparison" : "per cell",
                   p.target ? absl::StrCat("sessions for ", PlanPercent(*p.target)) : ""});
  for (const auto& r : p.rows) {
    if (!r.error.empty()) {
      table.push_back({r.key, "-", r.error, "", ""});
      continue;
    }
    std::string sessions;
    if (r.sessions_for_target) sessions = SessionsNeededText(*r.sessions_for_target);
    table.push_back(
        {r.key, PlanPercent(r.per_session_sd) + (r.sd_source == "median of the others" ? " *" : ""),
         absl::StrCat("+", PlanPercent(r.matrix->up), " / -", PlanPercent(r.matrix->down)),
         absl::StrCat("+", PlanPercent(r.per_cell->up)), sessions});
  }
  std::vector<std::size_t> width(5, 0);
  for (const auto& row : table) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      width[i] = std::max(width[i], PlanTextWidth(row[i]));
    }
  }
  for (const auto& row : table) {
    std::string line = "  ";
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i] + std::string(width[i] - PlanTextWidth(row[i]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out += absl::StrCat("\nOver the matrix: median +", PlanPercent(p.median_mdc), ", largest +",
                      PlanPercent(p.max_mdc), ".\n");
  for (const auto& r : p.rows) {
    if (r.sd_source == "median of the others") {
      out += "* not measured in those runs: the median of the others.\n";
      break;
    }
  }
  for (const auto& n : p.notes) out += "Note: " + n + ".\n";
  return out;
}

nlohmann::json ToJson(const MatrixPlan& p) {
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
  auto change = [&](const std::optional<stats::DetectableChange>& d) {
    if (!d) return nlohmann::json();
    return nlohmann::json{{"up", num(d->up)},         {"down", num(d->down)},
                          {"lambda", num(d->lambda)}, {"log_se", num(d->log_se)},
                          {"sessions", d->sessions},  {"df", num(d->df)}};
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : p.rows) {
    nlohmann::json row = {{"key", r.key},
                          {"per_session_sd", num(r.per_session_sd)},
                          {"sd_source", r.sd_source},
                          {"matrix", change(r.matrix)},
                          {"per_cell", change(r.per_cell)}};
    if (r.sessions_for_target) {
      row["sessions_for_target"] = {{"sessions", r.sessions_for_target->sessions},
                                    {"text", SessionsNeededText(*r.sessions_for_target)}};
    }
    if (!r.error.empty()) row["error"] = r.error;
    rows.push_back(std::move(row));
  }
  return {
      {"matrix", p.matrix_name},
      {"metric", p.metric},
      {"design", p.design == stats::PowerDesign::kPaired ? "paired" : "two_runs"},
      {"pair_axes", p.pair_axes},
      {"replicates", {{"sessions", p.sessions}, {"processes", p.processes}, {"rounds", p.rounds}}},
      {"family", p.family},
      {"threshold", p.threshold},
      {"confidence", p.confidence},
      {"power", p.power},
      {"target", p.target ? nlohmann::json(*p.target) : nlohmann::json()},
      {"runs", p.runs},
      {"source", p.source},
      {"rows", rows},
      {"median_mdc", num(p.median_mdc)},
      {"max_mdc", num(p.max_mdc)},
      {"notes", p.notes}};
}

}  // namespace ladder::report
