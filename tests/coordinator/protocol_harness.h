// The fixture of the wire-contract tests (protocol_test.cc, trust_test.cc): a real coordinator
// on loopback gRPC over a real SQLite file, tokens required, the runners' real schemas, a clock
// the test moves; helpers that act as an honest agent and read the database back.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ladder/agent/cell_check.h"
#include "ladder/coordinator/coordinator.h"
#include "ladder/db/sqlite.h"
#include "ladder/db/store.h"
#include "ladder/db/tokens.h"
#include "ladder/v1/admin.grpc.pb.h"
#include "ladder/v1/agent.grpc.pb.h"
#include "process.h"

namespace ladder::coordinator {
namespace {

using grpc::StatusCode;

// Two depths, two paired paths: two units of two cells, each 2 processes x 3 rounds.
constexpr const char* kMatrix = R"(
name: protocol-test
runner: kernel
axes:
  depth: [64, 128]
  path: [2d, 3d]
fixed: {backend: cpu, preset: tiny}
pair: [path]
replicates: {sessions: 1, processes: 2, rounds: 3}
)";
constexpr int kProcesses = 2;
constexpr int kRounds = 3;
constexpr const char* kMetrics[] = {"time_us", "time_us_min", "bytes_per_s", "segments"};
constexpr const char* kUnits[] = {"us", "us", "B/s", "1"};

// The coordinator's one clock, movable by the test (lease expiry) and safe to read from the
// reaper thread.
class TestClock final : public Clock {
 public:
  int64_t NowMs() const override { return now_.load(); }
  void Advance(int64_t ms) { now_ += ms; }

 private:
  std::atomic<int64_t> now_{1'700'000'000'000};
};

struct Session {
  std::string id;
  std::string credential;
};

// The value an honest agent reports for a slot: any abuse that reached valid_measurements
// shows up as a value that is not this.
double HonestValue(int64_t cell, int process, int round, int metric) {
  // segments is a count (a whole number >= 1): distinct per slot like the others.
  if (metric == 3) return 100000.0 + static_cast<double>(cell) * 1000 + process * 100 + round;
  return 1000.0 + static_cast<double>(cell) * 10 + process + round * 0.25 + metric * 0.001;
}

class Protocol : public ::testing::Test {
 protected:
  void SetUp() override {
    db_path_ = dir_.File("results.db");
    {
      auto store = db::Store::Open(db_path_);
      ASSERT_TRUE(store.ok()) << store.status();
      auto db = db::Database::Open(db_path_, db::OpenMode::kReadWrite);
      auto admin = db::CreateToken(**db, db::Role::kAdmin, "test", 0, clock_.NowMs());
      ASSERT_TRUE(admin.ok()) << admin.status();
      admin_token_ = admin->plaintext;
    }
    StartCoordinator();
    agent_token_a_ = CreateAgentToken("agent a");
    agent_token_b_ = CreateAgentToken("agent b");
  }

  // Starts (or, after StopCoordinator, restarts) the coordinator on db_path_.
  void StartCoordinator() {
    CoordinatorOptions options;
    options.listen = "127.0.0.1:0";
    options.db_path = db_path_;
    options.require_tokens = true;
    options.session_calls_per_second = 0;
    options.reaper_interval_ms = 20;
    options.clock = &clock_;
    options.scheduler.lease_ms = 5000;
    options.heartbeat_interval_ms = 1000;
    options.scheduler.runners = &agent::RunnerSchemasWithChecks();
    auto started = Coordinator::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    coordinator_ = std::move(*started);
    channel_ = grpc::CreateChannel(coordinator_->address(), grpc::InsecureChannelCredentials());
    agents_ = v1::AgentService::NewStub(channel_);
    admin_ = v1::AdminService::NewStub(channel_);
  }

  void StopCoordinator() {
    agents_.reset();
    admin_.reset();
    channel_.reset();
    coordinator_.reset();
  }

  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& bearer) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!bearer.empty()) context->AddMetadata("authorization", "Bearer " + bearer);
    return context;
  }

  std::string CreateAgentToken(const std::string& description) {
    v1::CreateTokenRequest request;
    request.set_role("agent");
    request.set_description(description);
    v1::CreateTokenResponse response;
    auto status = admin_->CreateToken(Ctx(admin_token_).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.token();
  }

  static v1::RegisterRequest RegisterRequestFor(const std::string& id, const std::string& token) {
    v1::RegisterRequest request;
    request.set_session_id(id);
    request.set_join_token(token);
    auto* inv = request.mutable_inventory();
    inv->set_hostname("host-" + id.substr(0, 8));
    inv->set_machine_id("machine-" + id.substr(0, 8));
    inv->add_features("kernel");
    inv->add_features("cpu");
    return request;
  }

  grpc::Status Register(const v1::RegisterRequest& request, Session* out,
                        const std::string& bearer = "") {
    v1::RegisterResponse response;
    auto status = agents_->Register(Ctx(bearer).get(), request, &response);
    if (status.ok() && out != nullptr) {
      out->id = request.session_id();
      out->credential = response.session_credential();
    }
    return status;
  }

  int64_t Submit(const std::string& yaml) {
    v1::SubmitRequest request;
    request.set_yaml(yaml);
    request.set_filename("m.yaml");
    v1::SubmitResponse response;
    auto status = admin_->Submit(Ctx(admin_token_).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.run_id();
  }

  v1::LeaseResponse Lease(const Session& s) {
    v1::LeaseRequest request;
    request.set_session_id(s.id);
    request.set_wait_ms(0);
    v1::LeaseResponse response;
    auto status = agents_->Lease(Ctx(s.credential).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // Every record of the lease's design, with honest values and stable uuids.
  static std::vector<v1::MeasurementRecord> HonestRecords(const v1::LeaseResponse& lease) {
    std::vector<v1::MeasurementRecord> out;
    for (const auto& cell : lease.cells()) {
      for (int p = 0; p < lease.processes(); ++p) {
        for (int r = 0; r < lease.rounds(); ++r) {
          for (int k = 0; k < 4; ++k) {
            v1::MeasurementRecord m;
            m.set_uuid("honest-" + std::to_string(lease.attempt_id()) + "-" +
                       std::to_string(cell.cell_id()) + "-" + std::to_string(p) + "-" +
                       std::to_string(r) + "-" + std::to_string(k));
            m.set_attempt_id(lease.attempt_id());
            m.set_cell_id(cell.cell_id());
            m.set_process(p);
            m.set_round(r);
            m.set_metric(kMetrics[k]);
            m.set_unit(kUnits[k]);
            m.set_value(HonestValue(cell.cell_id(), p, r, k));
            out.push_back(m);
          }
        }
      }
    }
    return out;
  }

  grpc::Status Report(const Session& s, const std::vector<v1::MeasurementRecord>& ms,
                      const std::vector<v1::EvidenceRecord>& ev, v1::ReportResponse* response,
                      const std::string& as_session = "") {
    v1::ReportRequest request;
    request.set_session_id(as_session.empty() ? s.id : as_session);
    for (const auto& m : ms) *request.add_measurements() = m;
    for (const auto& e : ev) *request.add_evidence() = e;
    return agents_->Report(Ctx(s.credential).get(), request, response);
  }

  grpc::Status Finish(const Session& s, int64_t attempt, bool ok, int64_t count,
                      v1::FinishResponse* response, const std::string& reason = "") {
    v1::FinishRequest request;
    request.set_session_id(s.id);
    request.set_attempt_id(attempt);
    request.set_ok(ok);
    request.set_failure_reason(reason);
    request.set_measurement_count(count);
    return agents_->Finish(Ctx(s.credential).get(), request, response);
  }

  // Reports the lease's honest records (in batches) and finishes it; the attempt is done.
  void CompleteHonestly(const Session& s, const v1::LeaseResponse& lease) {
    auto records = HonestRecords(lease);
    v1::ReportResponse reported;
    ASSERT_TRUE(Report(s, records, {}, &reported).ok());
    EXPECT_EQ(reported.acknowledged_uuids_size(), static_cast<int>(records.size()));
    EXPECT_EQ(reported.refused_size(), 0);
    v1::FinishResponse finished;
    auto status =
        Finish(s, lease.attempt_id(), true, static_cast<int64_t>(records.size()), &finished);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(finished.accepted()) << finished.detail();
  }

  int64_t QueryInt(const std::string& sql) {
    auto db = db::Database::Open(db_path_, db::OpenMode::kReadOnly);
    auto stmt = (*db)->Prepare(sql);
    EXPECT_TRUE(stmt.ok()) << stmt.status();
    auto row = stmt->Step();
    EXPECT_TRUE(row.ok() && *row);
    return stmt->Int(0);
  }

  // valid_measurements holds exactly every slot of the run's design, once, with its honest
  // value, and nothing else.
  void ExpectExactlyTheDesign(int64_t run_id, int64_t cells) {
    const std::string run = std::to_string(run_id);
    EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM valid_measurements WHERE run_id = " + run),
              cells * kProcesses * kRounds * 4);
    EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM (SELECT 1 FROM valid_measurements WHERE run_id = " +
                       run + " GROUP BY cell_id, process, round, metric)"),
              cells * kProcesses * kRounds * 4);
    // Every value is the honest one (metric index from its name).
    EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM valid_measurements WHERE run_id = " + run +
                       " AND abs(value - CASE metric WHEN 'segments' THEN "
                       "100000.0 + cell_id * 1000 + process * 100 + round ELSE "
                       "(1000.0 + cell_id * 10 + process + round * 0.25 + "
                       "0.001 * CASE metric WHEN 'time_us' THEN 0 WHEN 'time_us_min' THEN 1 "
                       "WHEN 'bytes_per_s' THEN 2 ELSE 99 END) END) > 1e-9"),
              0);
    EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM valid_measurements WHERE run_id = " + run +
                       " AND (process < 0 OR process >= 2 OR round < 0 OR round >= 3)"),
              0);
  }

  ladder::testing::TempDir dir_;
  std::string db_path_;
  TestClock clock_;
  std::string admin_token_, agent_token_a_, agent_token_b_;
  std::unique_ptr<Coordinator> coordinator_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentService::Stub> agents_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
};

}  // namespace
}  // namespace ladder::coordinator
