// Crossover location: the pure step (DecideLocateStep) on hand-made rungs, and the scheduler
// locating a known crossover from agents whose ratio follows a known curve, through restarts.
#include "ladder/coordinator/locate.h"

#include <cmath>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ladder/db/sqlite.h"
#include "ladder/stats/adaptive.h"
#include "scheduler_harness.h"

namespace ladder::coordinator {
namespace {

using testing::Harness;
using testing::Succeeded;

LocateConfig Config() {
  LocateConfig c;
  c.axis = "depth";
  c.pair_axis = "path";
  c.arm_a = "2d";
  c.arm_b = "3d";
  c.declared = {1024, 2048, 4096, 8192};
  c.resolution_octaves = 0.25;
  c.min_step = 256;
  c.max_sessions = 8;
  return c;
}

constexpr int kFirstDecided = stats::kMinDecisionSessions + stats::kCommittedSessions;  // 6

// A rung whose ratio interval is estimate·(1 ± half_width) from `sessions` sessions. From
// kFirstDecided sessions on its decision interval (the projection from the first sessions −
// kCommittedSessions) is `decision_estimate`·(1 ± half_width), by default the same as the ratio.
LocateRung Rung(double depth, double estimate, double half_width, int sessions = kFirstDecided,
                double decision_estimate = 0) {
  LocateRung r;
  r.depth = depth;
  stats::Interval i;
  i.estimate = estimate;
  i.lower = estimate * (1 - half_width);
  i.upper = estimate * (1 + half_width);
  i.n_units = static_cast<size_t>(sessions);
  i.scope = sessions > 1 ? stats::IntervalScope::kBetweenSessions
                         : stats::IntervalScope::kWithinSessionOnly;
  r.ratio = i;
  r.units = sessions;
  if (sessions >= kFirstDecided) {
    stats::Interval d = i;
    if (decision_estimate > 0) {
      d.estimate = decision_estimate;
      d.lower = decision_estimate * (1 - half_width);
      d.upper = decision_estimate * (1 + half_width);
    }
    d.n_units = static_cast<size_t>(sessions - stats::kCommittedSessions);
    r.decision = d;
  } else {
    r.decision_error = "too few sessions";
  }
  return r;
}

TEST(LocateStep, ProbesTheLog2MidpointOfTheFirstSignChange) {
  const auto step = DecideLocateStep(
      Config(),
      {Rung(1024, 0.8, 0.01), Rung(2048, 0.9, 0.01), Rung(4096, 1.1, 0.01), Rung(8192, 1.3, 0.01)},
      std::nullopt);
  EXPECT_EQ(step.action, LocateAction::kProbe) << step.reason;
  EXPECT_EQ(step.depth, 2816);  // √(2048·4096) = 2896, nearest multiple of 256 in log2
  EXPECT_EQ(step.bracket_lower, 2048);
  EXPECT_EQ(step.bracket_upper, 4096);
  EXPECT_NE(step.reason.find("probe its log2-midpoint 2816"), std::string::npos) << step.reason;
}

TEST(LocateStep, AnUndecidedProbeGetsAnotherSessionUntilTheBudget) {
  const std::vector<LocateRung> rungs = {Rung(2048, 0.9, 0.01), Rung(2816, 0.99, 0.03, 6),
                                         Rung(4096, 1.1, 0.01)};
  auto step = DecideLocateStep(Config(), rungs, 2816.0);
  EXPECT_EQ(step.action, LocateAction::kAddSession) << step.reason;
  EXPECT_EQ(step.depth, 2816);
  EXPECT_EQ(step.sessions, 6);
  EXPECT_NE(step.reason.find("projected from the first 2 of 6 sessions neither excludes 1 nor "
                             "lies within 1 ± 1 %: session 7 of at most 8"),
            std::string::npos)
      << step.reason;
  // Before its sixth session a probe has no decision, however clear its interval looks.
  for (int sessions = 2; sessions < kFirstDecided; ++sessions) {
    const std::vector<LocateRung> early = {Rung(2048, 0.9, 0.01), Rung(2816, 0.8, 0.01, sessions),
                                           Rung(4096, 1.1, 0.01)};
    step = DecideLocateStep(Config(), early, 2816.0);
    EXPECT_EQ(step.action, LocateAction::kAddSession) << step.reason;
    EXPECT_NE(step.reason.find("no decision yet"), std::string::npos) << step.reason;
  }

  std::vector<LocateRung> spent = rungs;
  spent[1].units = 8;
  step = DecideLocateStep(Config(), spent, 2816.0);
  EXPECT_EQ(step.action, LocateAction::kStop);
  EXPECT_EQ(step.outcome, "budget_spent");
  EXPECT_NE(step.reason.find("after 8 of max_sessions 8"), std::string::npos) << step.reason;
  EXPECT_EQ(step.bracket_lower, 2048) << "the bracket the probe was placed in";
  EXPECT_EQ(step.bracket_upper, 4096);
}

TEST(LocateStep, TheVerdictIsReadFromTheDecisionIntervalNotTheReportedOne) {
  // The interval over all sessions excludes 1, the projection from the first ones does not:
  // undecided. (The last kCommittedSessions sessions are measured after the decision.)
  auto step = DecideLocateStep(
      Config(), {Rung(2048, 0.9, 0.01), Rung(2816, 0.97, 0.02, 6, 1.0), Rung(4096, 1.1, 0.01)},
      2816.0);
  EXPECT_EQ(step.action, LocateAction::kAddSession) << step.reason;
  // The projection excludes 1 below, the estimate over all sessions is above 1: the bracket
  // would take the estimate's side, so the verdict decides nothing.
  step = DecideLocateStep(
      Config(), {Rung(2048, 0.9, 0.01), Rung(2816, 1.004, 0.003, 6, 0.99), Rung(4096, 1.1, 0.01)},
      2816.0);
  EXPECT_EQ(step.action, LocateAction::kAddSession) << step.reason;
  EXPECT_NE(step.reason.find("across 1"), std::string::npos) << step.reason;
  // The projection excludes 1 and the estimate agrees, though the interval over all sessions
  // does not exclude 1: decided, and the bracket moves.
  step = DecideLocateStep(
      Config(), {Rung(2048, 0.9, 0.01), Rung(2816, 0.995, 0.01, 6, 0.97), Rung(4096, 1.1, 0.01)},
      2816.0);
  EXPECT_EQ(step.action, LocateAction::kProbe) << step.reason;
  EXPECT_EQ(step.depth, 3328);
}

TEST(LocateStep, OneSessionNeverDecidesAProbe) {
  const auto step = DecideLocateStep(
      Config(), {Rung(2048, 0.9, 0.01), Rung(2816, 0.9, 0.001, 1), Rung(4096, 1.1, 0.01)}, 2816.0);
  EXPECT_EQ(step.action, LocateAction::kAddSession) << step.reason;
  EXPECT_NE(step.reason.find("within-session noise"), std::string::npos) << step.reason;
}

TEST(LocateStep, ADecidedProbeNarrowsTheBracket) {
  // 2816 excludes 1 (below): the bracket moves up to [2816, 4096] and its midpoint is probed.
  auto step = DecideLocateStep(
      Config(), {Rung(2048, 0.9, 0.01), Rung(2816, 0.97, 0.005), Rung(4096, 1.1, 0.01)}, 2816.0);
  EXPECT_EQ(step.action, LocateAction::kProbe) << step.reason;
  EXPECT_EQ(step.depth, 3328);
  // Within 1 ± 1 % also decides: the estimate's side is used.
  step = DecideLocateStep(Config(),
                          {Rung(2048, 0.9, 0.01), Rung(2816, 0.97, 0.005), Rung(3328, 1.002, 0.005),
                           Rung(4096, 1.1, 0.01)},
                          3328.0);
  EXPECT_EQ(step.action, LocateAction::kStop) << step.reason;
  EXPECT_EQ(step.outcome, "resolved");
  EXPECT_EQ(step.bracket_lower, 2816);
  EXPECT_EQ(step.bracket_upper, 3328);
}

TEST(LocateStep, StopsWithoutACrossingOrData) {
  auto step =
      DecideLocateStep(Config(), {Rung(1024, 0.8, 0.01), Rung(8192, 0.9, 0.01)}, std::nullopt);
  EXPECT_EQ(step.outcome, "no_crossing");
  LocateRung failed;
  failed.depth = 2048;
  failed.error = "no session measured both arms";
  step = DecideLocateStep(Config(), {Rung(1024, 0.8, 0.01), failed}, std::nullopt);
  EXPECT_EQ(step.outcome, "no_data");
  // A failed rung at the midpoint is not probed again.
  LocateRung mid = failed;
  mid.depth = 2816;
  step =
      DecideLocateStep(Config(), {Rung(2048, 0.9, 0.01), mid, Rung(4096, 1.1, 0.01)}, std::nullopt);
  EXPECT_EQ(step.outcome, "no_data");
  EXPECT_NE(step.reason.find("measured without a ratio"), std::string::npos) << step.reason;
}

TEST(LocateStep, StepLimitedWhenNoMultipleOfMinStepFits) {
  LocateConfig c = Config();
  c.min_step = 4096;
  const auto step =
      DecideLocateStep(c, {Rung(4096, 0.9, 0.01), Rung(8192, 1.1, 0.01)}, std::nullopt);
  EXPECT_EQ(step.outcome, "step_limited") << step.reason;
}

// ---- The scheduler, over a real store ----

constexpr double kCrossover = 3000;  // tokens: where the 3d path starts to lose (rows=1)

// rows=2 crosses deeper, so two lines of one run have different answers.
constexpr double kDeepCrossover = 6500;
double CrossoverOf(const nlohmann::json& params) {
  return params.value("rows", 1) == 2 ? kDeepCrossover : kCrossover;
}

constexpr const char* kLocate = R"(
name: locate
runner: kernel
axes:
  rows: [1]
  depth: [1024, 2048, 4096, 8192]
  path: [2d, 3d]
pair: [path]
together: [depth]
replicates: {sessions: 2, processes: 1, rounds: 2}
locate: {axis: depth, where: ratio = 1, resolution: 0.25 octave, min_step: 256, max_sessions: 6}
)";

// Times whose ratio 3d / 2d is (depth / 3000)^0.3, times a session's noise.
class KnownCurve {
 public:
  double Value(const std::string& session, int64_t depth, const std::string& path, int round,
               double crossover = kCrossover) {
    std::mt19937_64 rng(std::hash<std::string>{}(session) ^ static_cast<uint64_t>(depth) * 31 ^
                        static_cast<uint64_t>(round) * 7 ^ (path == "3d" ? 0x5bd1e995 : 0));
    std::normal_distribution<double> noise(0.0, 0.006);
    const double base = 100.0 * std::exp(noise(rng));
    return path == "3d" ? base * std::pow(static_cast<double>(depth) / crossover, 0.3) : base;
  }
};

void CompleteOnCurve(Harness& h, KnownCurve& curve, const std::string& session,
                     const Lease& lease) {
  std::vector<db::MeasurementIn> ms;
  for (const auto& cell : lease.cells) {
    const auto params = nlohmann::json::parse(cell.params_json);
    for (int round = 0; round < 2; ++round) {
      ms.push_back(db::MeasurementIn{
          "m-" + std::to_string(lease.attempt_id) + "-" + std::to_string(cell.id) + "-" +
              std::to_string(round),
          lease.attempt_id, cell.id, 0, round, "time_us",
          curve.Value(session, params["depth"].get<int64_t>(), params["path"].get<std::string>(),
                      round, CrossoverOf(params)),
          "us", 0});
    }
  }
  ASSERT_TRUE(h.scheduler->Report(session, ms, {}).ok());
  auto finish =
      h.scheduler->Finish(Succeeded(session, lease.attempt_id, static_cast<int64_t>(ms.size())));
  ASSERT_TRUE(finish.ok()) << finish.status();
  EXPECT_TRUE(finish->accepted) << finish->detail;
}

// Leases and completes units round-robin over the sessions until none is left to lease.
int Drain(Harness& h, KnownCurve& curve, const std::vector<std::string>& sessions,
          int max_units = 1000) {
  int done = 0;
  bool progress = true;
  while (progress && done < max_units) {
    progress = false;
    for (const auto& s : sessions) {
      if (done >= max_units) break;
      auto lease = h.LeaseNow(s);
      if (!lease) continue;
      CompleteOnCurve(h, curve, s, *lease);
      ++done;
      progress = true;
    }
  }
  return done;
}

struct DecisionRow {
  std::string line, decision, outcome, reason;
  double depth, lower, upper;
};

std::vector<DecisionRow> LocateDecisions(Harness& h) {
  auto db = db::Database::Open(h.dir.File("results.db"), db::OpenMode::kReadOnly);
  auto stmt = (*db)->Prepare(
      "SELECT group_key, decision, COALESCE(outcome, ''), reason, COALESCE(depth, -1), "
      "COALESCE(bracket_lower, -1), COALESCE(bracket_upper, -1) FROM adaptive_decisions "
      "WHERE option = 'locate' ORDER BY id");
  std::vector<DecisionRow> out;
  while (*stmt->Step()) {
    out.push_back({stmt->Text(0), stmt->Text(1), stmt->Text(2), stmt->Text(3), stmt->Double(4),
                   stmt->Double(5), stmt->Double(6)});
  }
  return out;
}

int64_t Count(Harness& h, const std::string& sql) {
  auto db = db::Database::Open(h.dir.File("results.db"), db::OpenMode::kReadOnly);
  auto stmt = (*db)->Prepare(sql);
  EXPECT_TRUE(stmt.ok()) << stmt.status();
  return *stmt->Step() ? stmt->Int(0) : -1;
}

std::vector<std::string> Sessions(Harness& h, int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    ids.push_back("session-" + std::to_string(i));
    h.AddSession(ids.back(), "host-" + std::to_string(i));
  }
  return ids;
}

TEST(SchedulerLocate, LocatesAKnownCrossoverWithinTheResolution) {
  Harness h;
  KnownCurve curve;
  const int64_t run = h.Submit(kLocate);
  const auto sessions = Sessions(h, 7);
  const int units = Drain(h, curve, sessions);

  const auto decisions = LocateDecisions(h);
  ASSERT_FALSE(decisions.empty());
  const DecisionRow& last = decisions.back();
  EXPECT_EQ(last.decision, "stop");
  EXPECT_EQ(last.outcome, "resolved") << last.reason;
  EXPECT_EQ(last.line, "rows=1");
  EXPECT_LE(last.lower, kCrossover);
  EXPECT_GE(last.upper, kCrossover);
  EXPECT_LT(std::log2(last.upper / last.lower), 0.25) << last.reason;
  // From a 1-octave bracket, each probe halves it: three probes at most reach 0.25 octave.
  int probes = 0;
  for (const auto& d : decisions) probes += d.decision == "probe" ? 1 : 0;
  EXPECT_GE(probes, 2);
  EXPECT_LE(probes, 3);
  // Every probe cell is in the database with a canonical key, both arms, and ran to completion.
  EXPECT_EQ(Count(h, "SELECT COUNT(*) FROM cells WHERE run_id = " + std::to_string(run)),
            8 + 2 * probes);
  for (const auto& d : decisions) {
    if (d.decision != "probe") continue;
    const std::string depth = std::to_string(static_cast<int64_t>(d.depth));
    EXPECT_EQ(Count(h, "SELECT COUNT(*) FROM cells WHERE key IN ('rows=1,depth=" + depth +
                           ",path=2d', 'rows=1,depth=" + depth + ",path=3d')"),
              2)
        << depth;
    EXPECT_EQ(static_cast<int64_t>(d.depth) % 256, 0);
  }
  EXPECT_EQ(h.Summary(run).state, db::RunState::kDone);
  EXPECT_EQ(Count(h, "SELECT COUNT(*) FROM units WHERE state != 'done'"), 0);
  EXPECT_EQ(Count(h, "SELECT COUNT(*) FROM units"), units);
  // Planned: 2 units; each probe: 2 units plus any added session.
  int added = 0;
  for (const auto& d : decisions) added += d.decision == "add_session" ? 1 : 0;
  EXPECT_EQ(units, 2 + 2 * probes + added);
  // A probe is decided from its sixth session at the earliest: 2 planned + 4 added.
  EXPECT_GE(added, (kFirstDecided - 2) * probes);
  // A probe's replicates ran in distinct sessions.
  EXPECT_EQ(Count(h,
                  "SELECT COUNT(*) FROM (SELECT u.group_key, a.session_id, COUNT(*) AS n "
                  "FROM units u JOIN attempts a ON a.unit_id = u.id AND a.state = 'done' "
                  "GROUP BY u.group_key, a.session_id HAVING n > 1)"),
            0);
}

TEST(SchedulerLocate, ARestartNeitherLosesNorDuplicatesAProbe) {
  Harness h;
  KnownCurve curve;
  const int64_t run = h.Submit(kLocate);
  const auto sessions = Sessions(h, 7);
  // The first planned unit completes normally; the second is finished in the store only, as if
  // the coordinator had been killed between ending the attempt and stepping the line.
  auto first = h.LeaseNow(sessions[0]);
  ASSERT_TRUE(first);
  CompleteOnCurve(h, curve, sessions[0], *first);
  auto second = h.LeaseNow(sessions[1]);
  ASSERT_TRUE(second);
  std::vector<db::MeasurementIn> ms;
  for (const auto& cell : second->cells) {
    const auto params = nlohmann::json::parse(cell.params_json);
    for (int round = 0; round < 2; ++round) {
      ms.push_back(db::MeasurementIn{"k-" + std::to_string(cell.id) + "-" + std::to_string(round),
                                     second->attempt_id, cell.id, 0, round, "time_us",
                                     curve.Value(sessions[1], params["depth"].get<int64_t>(),
                                                 params["path"].get<std::string>(), round),
                                     "us", 0});
    }
  }
  ASSERT_TRUE(h.scheduler->Report(sessions[1], ms, {}).ok());
  ASSERT_TRUE(h.store
                  ->EndAttempt(second->attempt_id, db::AttemptState::kDone, "", second->unit_id,
                               db::UnitState::kDone, 0, h.clock.now)
                  .ok());
  EXPECT_TRUE(LocateDecisions(h).empty());

  h.Restart();  // steps the line: the probe the killed coordinator owed
  auto decisions = LocateDecisions(h);
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions[0].decision, "probe");
  EXPECT_EQ(decisions[0].depth, 2816);
  h.Restart();  // nothing new measured: nothing new decided
  EXPECT_EQ(LocateDecisions(h).size(), 1u);
  EXPECT_EQ(Count(h, "SELECT COUNT(*) FROM cells"), 10);

  // Restart again in the middle of the probe's replicates, then run to the end.
  auto probe_unit = h.LeaseNow(sessions[2]);
  ASSERT_TRUE(probe_unit);
  CompleteOnCurve(h, curve, sessions[2], *probe_unit);
  h.Restart();
  Drain(h, curve, sessions);
  decisions = LocateDecisions(h);
  ASSERT_FALSE(decisions.empty());
  EXPECT_EQ(decisions.back().outcome, "resolved") << decisions.back().reason;
  std::set<double> probed;
  for (const auto& d : decisions) {
    if (d.decision == "probe") {
      EXPECT_TRUE(probed.insert(d.depth).second) << d.depth;
    }
  }
  EXPECT_EQ(Count(h, "SELECT COUNT(*) FROM cells"), 8 + 2 * static_cast<int64_t>(probed.size()));
  EXPECT_EQ(
      Count(h, "SELECT COUNT(*) FROM (SELECT key FROM cells GROUP BY key HAVING COUNT(*) > 1)"), 0);
  EXPECT_EQ(h.Summary(run).state, db::RunState::kDone);
}

TEST(SchedulerLocate, LinesOfAPlainAxisAreLocatedIndependently) {
  // depth is a grouping axis here (not `together`): each rung is its own group of units, and
  // a line is complete only when all of them have ended.
  Harness h;
  KnownCurve curve;
  const int64_t run = h.Submit(R"(
name: locate-plain
runner: kernel
axes:
  rows: [1, 2]
  depth: [1024, 2048, 4096, 8192, 16384]
  path: [2d, 3d]
pair: [path]
replicates: {sessions: 2, processes: 1, rounds: 2}
locate: {axis: depth, resolution: 0.25 octave, min_step: 256, max_sessions: 6}
)");
  Drain(h, curve, Sessions(h, 7));
  std::map<std::string, DecisionRow> stops;
  std::map<std::string, int> probes;
  for (const auto& d : LocateDecisions(h)) {
    if (d.decision == "stop") {
      EXPECT_TRUE(stops.emplace(d.line, d).second) << d.line;
    }
    if (d.decision == "probe") ++probes[d.line];
  }
  ASSERT_EQ(stops.size(), 2u);
  for (const auto& [line, crossover] : std::vector<std::pair<std::string, double>>{
           {"rows=1", kCrossover}, {"rows=2", kDeepCrossover}}) {
    const DecisionRow& stop = stops.at(line);
    EXPECT_EQ(stop.outcome, "resolved") << stop.reason;
    EXPECT_LE(stop.lower, crossover) << line;
    EXPECT_GE(stop.upper, crossover) << line;
    EXPECT_LT(std::log2(stop.upper / stop.lower), 0.25);
    EXPECT_LE(probes[line], 3) << line;
  }
  // A probe's unit group is the canonical group of a plain depth axis: its cell key without the
  // pair axis.
  EXPECT_GT(Count(h,
                  "SELECT COUNT(*) FROM units u JOIN unit_cells uc ON uc.unit_id = u.id "
                  "JOIN cells c ON c.id = uc.cell_id WHERE c.idx >= 20 AND "
                  "c.key = u.group_key || ',path=' || json_extract(c.axes, '$.path')"),
            0);
  EXPECT_EQ(Count(h,
                  "SELECT COUNT(*) FROM units u JOIN unit_cells uc ON uc.unit_id = u.id "
                  "JOIN cells c ON c.id = uc.cell_id WHERE "
                  "c.key != u.group_key || ',path=' || json_extract(c.axes, '$.path')"),
            0);
  EXPECT_EQ(h.Summary(run).state, db::RunState::kDone);
}

TEST(SchedulerLocate, PrecisionLeavesProbeGroupsToLocate) {
  Harness h;
  KnownCurve curve;
  std::string yaml = kLocate;
  yaml += "precision: {ratio_half_width: 50%, max_sessions: 2}\n";
  h.Submit(yaml.c_str());
  Drain(h, curve, Sessions(h, 7));
  // Precision decided once, on the ladder's group; every other decision is locate's.
  EXPECT_EQ(Count(h, "SELECT COUNT(*) FROM adaptive_decisions WHERE option = 'precision'"), 1);
  EXPECT_EQ(Count(h,
                  "SELECT COUNT(*) FROM adaptive_decisions WHERE option = 'precision' AND "
                  "group_key = 'rows=1'"),
            1);
  EXPECT_EQ(Count(h,
                  "SELECT COUNT(*) FROM adaptive_decisions WHERE option = 'precision' AND "
                  "group_key != 'rows=1'"),
            0);
  EXPECT_GT(Count(h, "SELECT COUNT(*) FROM adaptive_decisions WHERE option = 'locate'"), 1);
}

// ---- The same search along an engine's load axis ----

// Closed-loop concurrency: speculation's throughput gain (spec / off, a rate) falls as the batch
// fills, (10.5 / concurrency)^0.3, and crosses 1 at 10.5 requests in flight, between the declared
// rungs 4 and 16. Concurrency is an integer axis: every probe must be a whole number of requests.
constexpr double kConcurrencyCrossover = 10.5;

constexpr const char* kLocateConcurrency = R"(
name: locate-concurrency
runner: engine
axes:
  concurrency: [1, 4, 16, 64]
  spec: ["off", "mtp:1"]
fixed: {engine: synthetic, preset: tiny, depth: 512, output_tokens: 32, num_requests: 24}
pair: [spec]
together: [concurrency]
replicates: {sessions: 2, processes: 1, rounds: 2}
metric: decode_tok_s
locate: {axis: concurrency, where: ratio = 1, resolution: 0.25 octave, max_sessions: 6}
)";

double TokPerS(const std::string& session, int64_t concurrency, const std::string& spec,
               int round) {
  std::mt19937_64 rng(std::hash<std::string>{}(session) ^ static_cast<uint64_t>(concurrency) * 31 ^
                      static_cast<uint64_t>(round) * 7 ^ (spec == "off" ? 0 : 0x5bd1e995));
  std::normal_distribution<double> noise(0.0, 0.006);
  const double off = 40.0 * static_cast<double>(concurrency) /
                     (1.0 + 0.05 * static_cast<double>(concurrency)) * std::exp(noise(rng));
  return spec == "off"
             ? off
             : off * std::pow(kConcurrencyCrossover / static_cast<double>(concurrency), 0.3);
}

// Completes an engine unit on the curve above: every cell, two rounds.
void CompleteLoadUnit(Harness& h, const std::string& session, const Lease& lease) {
  std::vector<db::MeasurementIn> ms;
  for (const auto& cell : lease.cells) {
    const auto params = nlohmann::json::parse(cell.params_json);
    ASSERT_TRUE(params["concurrency"].is_number_integer()) << cell.params_json;
    for (int round = 0; round < 2; ++round) {
      ms.push_back(db::MeasurementIn{"c-" + std::to_string(lease.attempt_id) + "-" +
                                         std::to_string(cell.id) + "-" + std::to_string(round),
                                     lease.attempt_id, cell.id, 0, round, "decode_tok_s",
                                     TokPerS(session, params["concurrency"].get<int64_t>(),
                                             params["spec"].get<std::string>(), round),
                                     "tok/s", 0});
    }
  }
  ASSERT_TRUE(h.scheduler->Report(session, ms, {}).ok());
  auto finish =
      h.scheduler->Finish(Succeeded(session, lease.attempt_id, static_cast<int64_t>(ms.size())));
  ASSERT_TRUE(finish.ok()) << finish.status();
  EXPECT_TRUE(finish->accepted) << finish->detail;
}

TEST(SchedulerLocate, LocatesACrossoverInConcurrencyAtWholeRequests) {
  Harness h;
  const int64_t run = h.Submit(kLocateConcurrency);
  ASSERT_GT(run, 0);
  std::vector<std::string> sessions;
  for (int i = 0; i < 7; ++i) {
    db::SessionRow row;
    row.id = "engine-session-" + std::to_string(i);
    row.hostname = row.machine_id = "engine-host-" + std::to_string(i);
    row.features = {"engine", "cpu"};
    ASSERT_TRUE(h.scheduler->RegisterSession(row).ok());
    sessions.push_back(row.id);
  }
  int units = 0;
  for (bool progress = true; progress && units < 200;) {
    progress = false;
    for (const auto& s : sessions) {
      auto lease = h.LeaseNow(s);
      if (!lease) continue;
      CompleteLoadUnit(h, s, *lease);
      ++units;
      progress = true;
    }
  }

  const auto decisions = LocateDecisions(h);
  ASSERT_FALSE(decisions.empty());
  const DecisionRow& last = decisions.back();
  EXPECT_EQ(last.decision, "stop");
  EXPECT_EQ(last.outcome, "resolved") << last.reason;
  EXPECT_EQ(last.line, "") << "one line: no axis besides concurrency and spec";
  EXPECT_LE(last.lower, kConcurrencyCrossover);
  EXPECT_GE(last.upper, kConcurrencyCrossover);
  EXPECT_LT(std::log2(last.upper / last.lower), 0.25) << last.reason;
  EXPECT_EQ(last.lower, std::round(last.lower));
  EXPECT_EQ(last.upper, std::round(last.upper));
  // Every probe is a whole concurrency strictly inside the declared bracket [4, 16], stored as
  // an integer in both arms' axes and parameters, with a canonical key; none probed twice.
  std::set<int64_t> probed;
  for (const auto& d : decisions) {
    if (d.decision != "probe") continue;
    EXPECT_EQ(d.depth, std::round(d.depth)) << d.reason;
    EXPECT_GT(d.depth, 4);
    EXPECT_LT(d.depth, 16);
    const int64_t c = static_cast<int64_t>(d.depth);
    EXPECT_TRUE(probed.insert(c).second) << c;
    const std::string n = std::to_string(c);
    EXPECT_EQ(Count(h, "SELECT COUNT(*) FROM cells WHERE key IN ('concurrency=" + n +
                           ",spec=off', 'concurrency=" + n + ",spec=mtp:1')"),
              2)
        << n;
    EXPECT_EQ(
        Count(h, "SELECT COUNT(*) FROM cells WHERE json_extract(axes, '$.concurrency') = " + n +
                     " AND json_type(axes, '$.concurrency') = 'integer' AND "
                     "json_type(params, '$.concurrency') = 'integer'"),
        2)
        << n;
  }
  EXPECT_GE(probed.size(), 2u);
  EXPECT_LE(probed.size(), 4u);
  EXPECT_EQ(Count(h, "SELECT COUNT(*) FROM cells WHERE run_id = " + std::to_string(run)),
            8 + 2 * static_cast<int64_t>(probed.size()));
  EXPECT_EQ(h.Summary(run).state, db::RunState::kDone);
  EXPECT_EQ(Count(h, "SELECT COUNT(*) FROM units WHERE state != 'done'"), 0);
  EXPECT_EQ(Count(h, "SELECT COUNT(*) FROM units"), units);
}

}  // namespace
}  // namespace ladder::coordinator
