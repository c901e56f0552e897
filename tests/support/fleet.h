// Helpers for tests that run a real fleet: agents as child processes and checks on the
// results database.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ladder/db/sqlite.h"
#include "process.h"

namespace ladder::testing {

inline std::unique_ptr<ChildProcess> StartAgent(const TempDir& dir, int port,
                                                const std::string& name,
                                                std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {LadderBinary(),  "agent",
                                   "--coordinator", "127.0.0.1:" + std::to_string(port),
                                   "--spool",       dir.File(name + "-spool.db"),
                                   "--label",       "name=" + name};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return std::make_unique<ChildProcess>(argv, dir.File(name + ".log"));
}

// One integer from a query on the results database (opened read-only for the query).
inline int64_t QueryInt(const std::string& db_path, const std::string& sql) {
  auto db = db::Database::Open(db_path, db::OpenMode::kReadOnly);
  if (!db.ok()) return -1;
  auto stmt = (*db)->Prepare(sql);
  if (!stmt.ok()) return -1;
  auto row = stmt->Step();
  if (!row.ok() || !*row) return -1;
  return stmt->Int(0);
}

inline std::string QueryText(const std::string& db_path, const std::string& sql) {
  auto db = db::Database::Open(db_path, db::OpenMode::kReadOnly);
  if (!db.ok()) return "";
  auto stmt = (*db)->Prepare(sql);
  if (!stmt.ok()) return "";
  auto row = stmt->Step();
  if (!row.ok() || !*row) return "";
  return stmt->Text(0);
}

// The session id of the agent started with `--label name=NAME` ("" until it registered).
inline std::string SessionOf(const std::string& db_path, const std::string& name) {
  return QueryText(db_path,
                   "SELECT id FROM sessions WHERE json_extract(labels, '$.name') = '" + name + "'");
}

// Creates a token directly in the database (the bootstrap path), writes it to `file` in `dir`
// and returns it.
inline std::string MakeToken(const TempDir& dir, const std::string& db_path,
                             const std::string& role, const std::string& file) {
  auto created = RunCommand({LadderBinary(), "token", "create", "--role", role, "--db", db_path});
  EXPECT_EQ(created.exit_code, 0) << created.err;
  std::string token = created.out.substr(0, created.out.find('\n'));
  WriteFile(dir.File(file), token + "\n");
  return token;
}

// The invariant every fault test ends with: the run is done with no failed unit, each cell has
// exactly sessions x processes x rounds valid values of every metric it reported, no valid
// (cell, session, process, round, metric) appears twice, and each unit has exactly one
// completed attempt.
inline void ExpectExactlyOnce(const std::string& db_path, int64_t run, int64_t per_cell) {
  const std::string r = std::to_string(run);
  EXPECT_EQ(QueryText(db_path, "SELECT state FROM runs WHERE id = " + r), "done");
  EXPECT_EQ(QueryInt(db_path, "SELECT COUNT(*) FROM units WHERE state != 'done' AND run_id = " + r),
            0);
  EXPECT_EQ(
      QueryInt(db_path,
               "SELECT COUNT(*) FROM (SELECT cell_id, metric, COUNT(*) AS n FROM "
               "valid_measurements WHERE run_id = " +
                   r + " GROUP BY cell_id, metric HAVING n != " + std::to_string(per_cell) + ")"),
      0)
      << "some (cell, metric) has a count other than " << per_cell;
  EXPECT_EQ(QueryInt(db_path,
                     "SELECT COUNT(*) FROM (SELECT COUNT(*) AS n FROM valid_measurements "
                     "WHERE run_id = " +
                         r + " GROUP BY cell_id, session_id, process, round, metric HAVING n > 1)"),
            0)
      << "a measurement was counted twice";
  EXPECT_EQ(QueryInt(db_path, "SELECT COUNT(*) - COUNT(DISTINCT uuid) FROM measurements"), 0);
  EXPECT_EQ(QueryInt(db_path,
                     "SELECT COUNT(*) FROM (SELECT u.id FROM units u LEFT JOIN attempts a ON "
                     "a.unit_id = u.id AND a.state = 'done' WHERE u.run_id = " +
                         r + " GROUP BY u.id HAVING COUNT(a.id) != 1)"),
            0)
      << "a unit without exactly one completed attempt";
  EXPECT_EQ(QueryInt(db_path, "SELECT COUNT(*) FROM cells WHERE run_id = " + r +
                                  " AND id NOT IN (SELECT cell_id FROM valid_measurements)"),
            0)
      << "a cell without results";
}

}  // namespace ladder::testing
