// `locate` end to end: a real coordinator process and SQLite file, agents speaking the real
// AgentService over loopback gRPC whose measured times follow a known model with a crossover at a
// known depth, the coordinator killed (SIGKILL) and restarted in the middle of the search, then
// the CLI's status, query, report and verify on the result.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fleet.h"
#include "ladder/db/sqlite.h"
#include "ladder/v1/agent.grpc.pb.h"
#include "process.h"

namespace ladder::testing {
namespace {

// The model: per-token time of arm 2d grows with depth, arm 3d is flat; they cross at 3000
// tokens (50 + 0.01·3000 = 80). Each session runs at its own speed (a factor common to both arms,
// which moves neither the ratio's crossing nor the root of the difference), and each measurement
// has 0.4 % noise, drawn from a generator seeded by the session's name.
constexpr double kTrueCrossover = 3000;
double ModelTimeUs(const std::string& path, double depth) {
  return path == "2d" ? 50.0 + 0.01 * depth : 80.0;
}

constexpr const char* kMatrix = R"(name: locate-e2e
runner: kernel
axes:
  depth: [1024, 2048, 4096, 8192]
  path: [2d, 3d]
fixed: {backend: cpu, preset: tiny}
pair: [path]
together: [depth]
replicates: {sessions: 2, processes: 1, rounds: 3}
metric: time_us
locate: {axis: depth, where: ratio = 1, resolution: 0.25 octave, min_step: 256, max_sessions: 6}
)";

// One agent session: Register, then Lease -> Report -> Finish until stopped. Every call is
// retried while the coordinator is down (a restart): the same uuids make a repeated Report a
// no-op, and a Finish the old coordinator already took is answered "not live", which is fine.
class CurveAgent {
 public:
  CurveAgent(std::string address, int index)
      : address_(std::move(address)),
        session_("00000000-0000-4000-8000-00000000000" + std::to_string(index)),
        index_(index),
        rng_(0x10ca7e00 + static_cast<uint64_t>(index)) {
    speed_ = std::exp(std::normal_distribution<double>(0.0, 0.05)(rng_));
    thread_ = std::thread([this] { Loop(); });
  }
  ~CurveAgent() {
    stop_ = true;
    thread_.join();
  }
  int units() const { return units_; }

 private:
  template <typename Call>
  bool Retry(Call call) {
    while (!stop_) {
      if (call().ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  void Loop() {
    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    auto stub = v1::AgentService::NewStub(channel);
    v1::RegisterRequest reg;
    reg.set_session_id(session_);
    auto* inv = reg.mutable_inventory();
    inv->set_hostname("curve-host-" + std::to_string(index_));
    inv->set_machine_id("curve-machine-" + std::to_string(index_));
    inv->set_boot_id("boot-" + std::to_string(index_));
    inv->set_cpu_model("model");
    inv->set_cpu_cores(1);
    inv->add_features("kernel");
    inv->add_features("cpu");
    inv->set_agent_version("locate-test");
    v1::RegisterResponse registered;
    if (!Retry([&] {
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
          return stub->Register(&ctx, reg, &registered);
        })) {
      return;
    }
    while (!stop_) {
      v1::LeaseRequest lease_request;
      lease_request.set_session_id(session_);
      lease_request.set_wait_ms(300);
      v1::LeaseResponse lease;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      if (!stub->Lease(&ctx, lease_request, &lease).ok()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      if (!lease.has_work()) continue;
      v1::ReportRequest report;
      report.set_session_id(session_);
      for (const auto& cell : lease.cells()) {
        const auto params = nlohmann::json::parse(cell.params_json());
        const double depth = params.at("depth").get<double>();
        const std::string path = params.at("path").get<std::string>();
        for (int round = 0; round < lease.rounds(); ++round) {
          const double time_us = speed_ * ModelTimeUs(path, depth) *
                                 std::exp(std::normal_distribution<double>(0.0, 0.004)(rng_));
          // Every metric the kernel runner must report, so the coordinator takes the unit as
          // done (the design decides completeness).
          const std::pair<const char*, std::pair<double, const char*>> metrics[] = {
              {"time_us", {time_us, "us"}},
              {"time_us_min", {time_us, "us"}},
              {"bytes_per_s", {1e6 * depth / time_us, "B/s"}},
              {"segments", {1, "1"}}};
          for (const auto& [metric, value] : metrics) {
            auto* m = report.add_measurements();
            m->set_uuid(session_ + "-" + std::to_string(lease.attempt_id()) + "-" +
                        std::to_string(cell.cell_id()) + "-" + std::to_string(round) + "-" +
                        metric);
            m->set_attempt_id(lease.attempt_id());
            m->set_cell_id(cell.cell_id());
            m->set_process(0);
            m->set_round(round);
            m->set_metric(metric);
            m->set_value(value.first);
            m->set_unit(value.second);
          }
        }
      }
      v1::ReportResponse reported;
      if (!Retry([&] {
            grpc::ClientContext c;
            c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
            return stub->Report(&c, report, &reported);
          })) {
        return;
      }
      v1::FinishRequest finish;
      finish.set_session_id(session_);
      finish.set_attempt_id(lease.attempt_id());
      finish.set_ok(true);
      finish.set_measurement_count(report.measurements_size());
      v1::FinishResponse finished;
      if (!Retry([&] {
            grpc::ClientContext c;
            c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
            return stub->Finish(&c, finish, &finished);
          })) {
        return;
      }
      ++units_;
    }
  }

  std::string address_;
  std::string session_;
  int index_;
  std::mt19937_64 rng_;
  double speed_ = 1.0;
  std::atomic<bool> stop_{false};
  std::atomic<int> units_{0};
  std::thread thread_;
};

struct Decision {
  std::string decision, outcome, reason;
  double depth, lower, upper;
};

std::vector<Decision> LocateDecisions(const std::string& db_path) {
  std::vector<Decision> out;
  auto db = db::Database::Open(db_path, db::OpenMode::kReadOnly);
  if (!db.ok()) return out;
  auto stmt = (*db)->Prepare(
      "SELECT decision, COALESCE(outcome, ''), reason, COALESCE(depth, -1), "
      "COALESCE(bracket_lower, -1), COALESCE(bracket_upper, -1) FROM adaptive_decisions "
      "WHERE option = 'locate' ORDER BY id");
  if (!stmt.ok()) return out;
  while (true) {
    auto row = stmt->Step();
    if (!row.ok() || !*row) break;
    out.push_back({stmt->Text(0), stmt->Text(1), stmt->Text(2), stmt->Double(3), stmt->Double(4),
                   stmt->Double(5)});
  }
  return out;
}

TEST(Locate, FindsAKnownCrossoverThroughACoordinatorRestart) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  int port = 0;
  auto coordinator = StartCoordinator(dir, db, &port, {"--lease-ms", "10000"});
  ASSERT_GT(port, 0) << coordinator->Log();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("locate.yaml"), kMatrix);
  auto submit =
      RunCommand({LadderBinary(), "submit", dir.File("locate.yaml"), "--coordinator", address});
  ASSERT_EQ(submit.exit_code, 0) << submit.out << submit.err;

  std::vector<std::unique_ptr<CurveAgent>> agents;
  for (int i = 0; i < 7; ++i) agents.push_back(std::make_unique<CurveAgent>(address, i));

  // Kill the coordinator as soon as the first probe is decided, and restart it on the same file.
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& d : LocateDecisions(db)) {
          if (d.decision == "probe") return true;
        }
        return false;
      },
      std::chrono::seconds(60)))
      << coordinator->Log();
  coordinator->Signal(SIGKILL);
  coordinator->Wait(std::chrono::seconds(10));
  const size_t decisions_before = LocateDecisions(db).size();
  coordinator = StartCoordinator(dir, db, &port, {"--lease-ms", "10000"}, port, "coordinator2.log");
  ASSERT_GT(port, 0) << coordinator->Log();

  ASSERT_TRUE(
      WaitFor([&] { return QueryText(db, "SELECT state FROM runs WHERE id = 1") == "done"; },
              std::chrono::seconds(120)))
      << coordinator->Log();
  agents.clear();

  // The search: resolved, bracketing the true crossover within the resolution, in few probes.
  const auto decisions = LocateDecisions(db);
  ASSERT_GE(decisions.size(), decisions_before);
  const Decision& last = decisions.back();
  EXPECT_EQ(last.decision, "stop");
  EXPECT_EQ(last.outcome, "resolved") << last.reason;
  EXPECT_LE(last.lower, kTrueCrossover) << last.reason;
  EXPECT_GE(last.upper, kTrueCrossover) << last.reason;
  EXPECT_LT(std::log2(last.upper / last.lower), 0.25);
  std::set<double> probes;
  int added_sessions = 0;
  for (const auto& d : decisions) {
    EXPECT_FALSE(d.reason.empty());
    if (d.decision == "probe") {
      EXPECT_TRUE(probes.insert(d.depth).second) << "probed twice";
    }
    if (d.decision == "add_session") ++added_sessions;
  }
  EXPECT_GE(probes.size(), 2u);
  EXPECT_LE(probes.size(), 3u) << "one octave to 0.25 takes at most three halvings";
  EXPECT_EQ(std::count_if(decisions.begin(), decisions.end(),
                          [](const Decision& d) { return d.decision == "stop"; }),
            1);

  // Every decision is accounted for in the database: probe cells, units, sessions.
  const int64_t probe_cells = 2 * static_cast<int64_t>(probes.size());
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM cells WHERE run_id = 1"), 8 + probe_cells);
  EXPECT_EQ(QueryInt(db,
                     "SELECT COUNT(*) FROM (SELECT key FROM cells GROUP BY key "
                     "HAVING COUNT(*) > 1)"),
            0);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM units WHERE run_id = 1"),
            2 + 2 * static_cast<int64_t>(probes.size()) + added_sessions);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM units WHERE state != 'done'"), 0);
  EXPECT_EQ(QueryInt(db,
                     "SELECT COUNT(*) FROM (SELECT cell_id, session_id, round, metric, "
                     "COUNT(*) AS n FROM valid_measurements "
                     "GROUP BY cell_id, session_id, round, metric HAVING n > 1)"),
            0)
      << "a measurement counted twice";

  // Probe cells are cells like any other: status, query, report.
  auto status = RunCommand(
      {LadderBinary(), "status", "1", "--coordinator", "127.0.0.1:" + std::to_string(port)});
  ASSERT_EQ(status.exit_code, 0) << status.out << status.err;
  const std::string cells_line = std::to_string(8 + probe_cells) + " done, 0 failed, " +
                                 std::to_string(8 + probe_cells) + " total";
  EXPECT_NE(status.out.find(cells_line), std::string::npos) << status.out;
  auto query = RunCommand({LadderBinary(), "query", "1", "--db", db, "--json"});
  ASSERT_EQ(query.exit_code, 0) << query.err;
  EXPECT_EQ(nlohmann::json::parse(query.out)["rows"].size(), static_cast<size_t>(8 + probe_cells));

  auto report =
      RunCommand({LadderBinary(), "report", "1", "--db", db, "--format", "json", "--draws", "0"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const auto json = nlohmann::json::parse(report.out);
  const auto& line = json["runs"][0]["ladder"][0];
  ASSERT_TRUE(line.contains("located")) << line.dump(2);
  EXPECT_EQ(line["located"]["outcome"], "resolved");
  EXPECT_EQ(line["located"]["probes"].size(), probes.size());
  EXPECT_EQ(line["located"]["cells"], probe_cells);
  EXPECT_EQ(line["located"]["added_sessions"], added_sessions);
  EXPECT_EQ(line["located"]["bracket"][0].get<double>(), last.lower);
  EXPECT_EQ(line["located"]["bracket"][1].get<double>(), last.upper);
  // The crossover from the linear fit of the per-token difference, over ladder and probes.
  const double crossover = line["crossover_fit"]["estimate"].get<double>();
  EXPECT_NEAR(crossover, kTrueCrossover, 0.03 * kTrueCrossover) << line.dump(2);
  EXPECT_LT(line["crossover_fit"]["lower"].get<double>(), crossover);
  EXPECT_GT(line["crossover_fit"]["upper"].get<double>(), crossover);

  // The figures, for the test log (docs/statistics.md quotes a run of this test).
  std::printf(
      "locate: %zu probes, %d added sessions, bracket [%g, %g], crossover %.1f [%.1f, "
      "%.1f] (true %g), %lld probe cells, %lld units in all\n",
      probes.size(), added_sessions, last.lower, last.upper, crossover,
      line["crossover_fit"]["lower"].get<double>(), line["crossover_fit"]["upper"].get<double>(),
      kTrueCrossover, static_cast<long long>(probe_cells),
      static_cast<long long>(QueryInt(db, "SELECT COUNT(*) FROM units")));

  auto md =
      RunCommand({LadderBinary(), "report", "1", "--db", db, "--format", "md", "--draws", "0"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("Located crossover"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("resolved"), std::string::npos) << md.out;

  // A write-up can pin the figure: the recomputed crossover holds, a wrong one drifts.
  char figure[64];
  std::snprintf(figure, sizeof figure, "%.0f", crossover);
  WriteFile(dir.File("ok.md"),
            std::string("Speculation stops paying at <!-- ladder: run=1 stat=crossover tol=1 -->") +
                figure + " tokens, bracketed from <!-- ladder: run=1 stat=bracket_lower -->" +
                std::to_string(static_cast<int64_t>(last.lower)) +
                " in <!-- ladder: run=1 "
                "stat=probes -->" +
                std::to_string(probes.size()) + " probes.\n");
  auto verify = RunCommand({LadderBinary(), "verify", dir.File("ok.md"), "--db", db});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  WriteFile(dir.File("drift.md"),
            "It crosses at <!-- ladder: run=1 stat=crossover tol=1% -->4500 tokens.\n");
  auto drift = RunCommand({LadderBinary(), "verify", dir.File("drift.md"), "--db", db});
  EXPECT_EQ(drift.exit_code, 1) << drift.out << drift.err;
  EXPECT_NE((drift.out + drift.err).find("DRIFTED"), std::string::npos) << drift.out << drift.err;

  coordinator->Signal(SIGTERM);
  EXPECT_EQ(coordinator->Wait(std::chrono::seconds(20)), 0) << coordinator->Log();
}

}  // namespace
}  // namespace ladder::testing
