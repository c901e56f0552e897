// The Store's methods for crossover location (`locate`): the run's cells as the scheduler needs
// them, the decisions of one line, and probes added atomically with the decision that asked for
// them, so a coordinator killed at any instant restarts with either both or neither.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "ladder/db/store.h"
#include "ladder/status_macros.h"
#include "store_internal.h"

namespace ladder::db {
namespace {

nlohmann::json JsonOr(const std::string& text, nlohmann::json fallback) {
  auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? fallback : parsed;
}

void BindOptional(db::Statement& stmt, int index, double value) {
  if (std::isfinite(value)) {
    stmt.Bind(index, value);
  } else {
    stmt.BindNull(index);
  }
}

absl::Status InsertDecision(db::Database& db, int64_t run_id, const LocateDecisionRow& d) {
  ASSIGN_OR_RETURN(
      db::Statement stmt,
      db.Prepare("INSERT INTO adaptive_decisions(run_id, group_key, sessions, half_width, target, "
                 "decision, "
                 "reason, decided_at, option, outcome, depth, bracket_lower, bracket_upper) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'locate', ?9, ?10, ?11, ?12)"));
  stmt.Bind(1, run_id)
      .Bind(2, d.line_key)
      .Bind(3, d.sessions)
      .Bind(5, d.target)
      .Bind(6, d.decision)
      .Bind(7, d.reason)
      .Bind(8, d.decided_at);
  BindOptional(stmt, 4, d.half_width);
  if (d.outcome.empty()) {
    stmt.BindNull(9);
  } else {
    stmt.Bind(9, d.outcome);
  }
  BindOptional(stmt, 10, d.depth);
  BindOptional(stmt, 11, d.bracket_lower);
  BindOptional(stmt, 12, d.bracket_upper);
  return stmt.Run();
}

}  // namespace

namespace internal {

absl::StatusOr<int64_t> InsertQueuedUnit(db::Database& db, int64_t run_id,
                                         const std::string& group_key, int replicate, uint64_t seed,
                                         const std::vector<int64_t>& cell_ids) {
  ASSIGN_OR_RETURN(db::Statement unit,
                   db.Prepare("INSERT INTO units(run_id, idx, replicate, group_key, seed, state) "
                              "VALUES (?1, (SELECT COALESCE(MAX(idx), -1) + 1 FROM units WHERE "
                              "run_id = ?1), ?2, ?3, ?4, "
                              "'queued')"));
  RETURN_IF_ERROR(unit.Bind(1, run_id)
                      .Bind(2, replicate)
                      .Bind(3, group_key)
                      .Bind(4, static_cast<int64_t>(seed))
                      .Run());
  const int64_t unit_id = db.LastInsertRowId();
  ASSIGN_OR_RETURN(
      db::Statement member,
      db.Prepare("INSERT INTO unit_cells(unit_id, cell_id, position) VALUES (?1, ?2, ?3)"));
  for (size_t i = 0; i < cell_ids.size(); ++i) {
    member.Reset();
    RETURN_IF_ERROR(
        member.Bind(1, unit_id).Bind(2, cell_ids[i]).Bind(3, static_cast<int64_t>(i)).Run());
  }
  return unit_id;
}

}  // namespace internal

absl::StatusOr<std::vector<CellRecord>> Store::RunCells(int64_t run_id) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      db::Statement stmt,
      db_->Prepare("SELECT id, idx, key, axes, params FROM cells WHERE run_id = ?1 ORDER BY idx"));
  stmt.Bind(1, run_id);
  std::vector<CellRecord> cells;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    cells.push_back(CellRecord{stmt.Int(0), static_cast<int>(stmt.Int(1)), stmt.Text(2),
                               JsonOr(stmt.Text(3), nlohmann::json::object()),
                               JsonOr(stmt.Text(4), nlohmann::json::object())});
  }
  return cells;
}

absl::StatusOr<std::vector<LocateDecisionRow>> Store::LocateDecisions(int64_t run_id,
                                                                      const std::string& line_key) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      db::Statement stmt,
      db_->Prepare(
          "SELECT group_key, decision, COALESCE(outcome, ''), sessions, half_width, target, depth, "
          "bracket_lower, bracket_upper, reason, decided_at FROM adaptive_decisions "
          "WHERE run_id = ?1 AND option = 'locate' AND group_key = ?2 ORDER BY id"));
  stmt.Bind(1, run_id).Bind(2, line_key);
  std::vector<LocateDecisionRow> out;
  const auto optional = [&stmt](int column) {
    return stmt.IsNull(column) ? std::numeric_limits<double>::quiet_NaN() : stmt.Double(column);
  };
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    LocateDecisionRow d;
    d.line_key = stmt.Text(0);
    d.decision = stmt.Text(1);
    d.outcome = stmt.Text(2);
    d.sessions = static_cast<int>(stmt.Int(3));
    d.half_width = optional(4);
    d.target = stmt.Double(5);
    d.depth = optional(6);
    d.bracket_lower = optional(7);
    d.bracket_upper = optional(8);
    d.reason = stmt.Text(9);
    d.decided_at = stmt.Int(10);
    out.push_back(std::move(d));
  }
  return out;
}

absl::StatusOr<Store::ProbeIds> Store::AddLocateProbe(int64_t run_id,
                                                      const std::vector<NewCell>& cells,
                                                      const std::string& group_key,
                                                      const std::vector<uint64_t>& seeds,
                                                      const LocateDecisionRow& decision) {
  MutexLock lock(&mu_);
  db::Database& db = *db_;
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(db));
  ProbeIds ids;
  ASSIGN_OR_RETURN(
      db::Statement insert,
      db.Prepare("INSERT INTO cells(run_id, idx, key, axes, params) VALUES (?1, "
                 "(SELECT COALESCE(MAX(idx), -1) + 1 FROM cells WHERE run_id = ?1), ?2, ?3, ?4)"));
  for (const NewCell& cell : cells) {
    insert.Reset();
    RETURN_IF_ERROR(insert.Bind(1, run_id)
                        .Bind(2, cell.key)
                        .Bind(3, cell.axes.dump())
                        .Bind(4, cell.params.dump())
                        .Run());
    ids.cell_ids.push_back(db.LastInsertRowId());
  }
  for (size_t r = 0; r < seeds.size(); ++r) {
    ASSIGN_OR_RETURN(int64_t unit_id,
                     internal::InsertQueuedUnit(db, run_id, group_key, static_cast<int>(r),
                                                seeds[r], ids.cell_ids));
    ids.unit_ids.push_back(unit_id);
  }
  RETURN_IF_ERROR(InsertDecision(db, run_id, decision));
  RETURN_IF_ERROR(tx.Commit());
  return ids;
}

absl::StatusOr<int64_t> Store::AddLocateReplicate(int64_t run_id, const std::string& group_key,
                                                  int replicate, uint64_t seed,
                                                  const std::vector<int64_t>& cell_ids,
                                                  const LocateDecisionRow& decision) {
  MutexLock lock(&mu_);
  db::Database& db = *db_;
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(db));
  ASSIGN_OR_RETURN(int64_t unit_id,
                   internal::InsertQueuedUnit(db, run_id, group_key, replicate, seed, cell_ids));
  RETURN_IF_ERROR(InsertDecision(db, run_id, decision));
  RETURN_IF_ERROR(tx.Commit());
  return unit_id;
}

absl::Status Store::RecordLocateDecision(int64_t run_id, const LocateDecisionRow& decision) {
  MutexLock lock(&mu_);
  return InsertDecision(*db_, run_id, decision);
}

}  // namespace ladder::db
