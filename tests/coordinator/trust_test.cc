// Trust, third pass (issue 57): every string an agent sends is bounded and clean, no view can be
// broken by a record, a revoked credential proves nothing. Each case is sent as a hostile agent
// would, through a real coordinator over loopback gRPC against a real SQLite file, and the log,
// the rows and the views are read back.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <future>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "ladder/db/sqlite.h"
#include "protocol_harness.h"

namespace ladder::coordinator {
namespace {

// Everything the coordinator logs while a test runs, formatted as the console sink writes it.
class CapturedLog final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string Text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    text_.append(formatted.data(), formatted.size());
  }
  void flush_() override {}

 private:
  std::string text_;
};

size_t Lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

class Trust : public Protocol {
 protected:
  void SetUp() override {
    log_ = std::make_shared<CapturedLog>();
    spdlog::default_logger()->sinks().push_back(log_);
    Protocol::SetUp();
  }
  void TearDown() override {
    StopCoordinator();
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), log_), sinks.end());
  }

  // A registered session of `token` holding the first unit of a fresh run.
  v1::LeaseResponse RegisterAndLease(const std::string& id, const std::string& token, Session* s) {
    EXPECT_TRUE(Register(RegisterRequestFor(id, token), s).ok());
    return Lease(*s);
  }

  std::string RevokeTokenOf(const std::string& token) {
    v1::RevokeTokenRequest revoke;
    revoke.set_id(token.substr(7, 8));
    v1::RevokeTokenResponse revoked;
    auto status = admin_->RevokeToken(Ctx(admin_token_).get(), revoke, &revoked);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return revoke.id();
  }

  std::string QueryText(const std::string& sql) {
    auto db = db::Database::Open(db_path_, db::OpenMode::kReadOnly);
    auto stmt = (*db)->Prepare(sql);
    EXPECT_TRUE(stmt.ok()) << stmt.status();
    auto row = stmt->Step();
    EXPECT_TRUE(row.ok() && *row);
    return stmt->Text(0);
  }

  // Every documented view and every query of docs/schema.md's examples, run to the end; the
  // first failure, or "".
  std::string RunDocumentedQueries() {
    std::vector<std::string> queries = {"SELECT * FROM valid_measurements",
                                        "SELECT * FROM load_requests"};
    std::ifstream in(LADDER_SCHEMA_DOC);
    std::stringstream doc;
    doc << in.rdbuf();
    const std::string text = doc.str();
    for (const std::regex& pattern :
         {std::regex("sqlite3 results\\.db \"([^\"]*)\""), std::regex("\"\"\"([^\"]*)\"\"\"")}) {
      for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern);
           it != std::sregex_iterator(); ++it) {
        queries.push_back((*it)[1]);
      }
    }
    EXPECT_GE(queries.size(), 7u) << "docs/schema.md's examples were not found";
    auto db = db::Database::Open(db_path_, db::OpenMode::kReadOnly);
    if (!db.ok()) return db.status().ToString();
    for (const auto& sql : queries) {
      auto stmt = (*db)->Prepare(sql);
      if (!stmt.ok()) return sql + ": " + stmt.status().ToString();
      while (true) {
        auto row = stmt->Step();
        if (!row.ok()) return sql + ": " + row.status().ToString();
        if (!*row) break;
      }
    }
    return "";
  }

  std::shared_ptr<CapturedLog> log_;
};

// Agent text that would forge log lines, move the cursor or reorder what a reader sees.
const std::string kHostile =
    "ok\nFAKE 2099-01-01 [error] forged\r\x1b[31mred\x1b]0;title\x07"
    "\xc2\x85"
    "nel\xe2\x80\xa8"
    "ls\xe2\x80\xae"
    "bidi\\";

TEST_F(Trust, AHugeReleaseReasonChangesTheLogByOneLineAndNoRowHoldsMoreThanOneKiB) {
  Submit(kMatrix);
  Session a;
  auto lease = RegisterAndLease("aaaaaaaa-0000-0000-0000-000000000571", agent_token_a_, &a);
  ASSERT_TRUE(lease.has_work());
  std::string reason;
  while (reason.size() < 4'500'000) reason += kHostile;
  const size_t lines_before = Lines(log_->Text());
  v1::ReleaseRequest release;
  release.set_session_id(a.id);
  release.set_reason(reason);
  v1::ReleaseResponse released;
  auto status = agents_->Release(Ctx(a.credential).get(), release, &released);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::string log = log_->Text();
  EXPECT_LE(Lines(log), lines_before + 1);
  EXPECT_EQ(log.find('\x1b'), std::string::npos);
  EXPECT_EQ(log.find("\xe2\x80\xa8"), std::string::npos);
  EXPECT_EQ(log.find("FAKE 2099"), log.find("\\nFAKE 2099") + 2) << "a forged line starts a line";
  // The attempt was handed back with the reason cut at 1 KiB, marked, and clean.
  EXPECT_EQ(
      QueryText("SELECT state FROM attempts WHERE id = " + std::to_string(lease.attempt_id())),
      "failed");
  EXPECT_LE(QueryInt("SELECT MAX(length(CAST(reason AS BLOB))) FROM attempts"),
            1024 + static_cast<int64_t>(std::string("released by agent: ").size()));
  EXPECT_NE(
      QueryText("SELECT reason FROM attempts WHERE id = " + std::to_string(lease.attempt_id()))
          .find("[truncated from 4500"),
      std::string::npos);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM attempts WHERE instr(reason, char(10)) OR "
                     "instr(reason, char(27)) OR instr(reason, char(8232)) OR "
                     "instr(reason, char(133)) OR instr(reason, char(8238))"),
            0);
}

TEST_F(Trust, AFailureReasonIsOneLogLineAndIsStoredEscaped) {
  Submit(kMatrix);
  Session a;
  auto lease = RegisterAndLease("aaaaaaaa-0000-0000-0000-000000000572", agent_token_a_, &a);
  ASSERT_TRUE(lease.has_work());
  const size_t lines_before = Lines(log_->Text());
  v1::FinishResponse finished;
  auto status = Finish(a, lease.attempt_id(), false, 0, &finished, kHostile);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(finished.accepted());
  const std::string log = log_->Text();
  EXPECT_EQ(Lines(log), lines_before + 1) << log.substr(log.size() - 400);
  EXPECT_EQ(log.find('\x1b'), std::string::npos);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM attempts WHERE instr(reason, char(10)) OR "
                     "instr(reason, char(27)) OR instr(reason, char(8232))"),
            0);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM units WHERE instr(fail_reason, char(10)) OR "
                     "instr(fail_reason, char(27)) OR instr(fail_reason, char(8232))"),
            0);
  // Over the documented 4 KiB: refused, nothing written.
  auto again = RegisterAndLease("aaaaaaaa-0000-0000-0000-000000000573", agent_token_a_, &a);
  ASSERT_TRUE(again.has_work());
  EXPECT_EQ(Finish(a, again.attempt_id(), false, 0, &finished, std::string(4097, 'x')).error_code(),
            StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(
      QueryText("SELECT state FROM attempts WHERE id = " + std::to_string(again.attempt_id())),
      "leased");
}

TEST_F(Trust, InventoryTextWithC1SeparatorsBidiOrABomIsRefusedAndNothingIsStored) {
  struct Case {
    std::string name;
    std::function<void(v1::Inventory&)> mutate;
  };
  const std::vector<Case> cases = {
      {"C1 NEL in hostname", [](auto& i) { i.set_hostname("host\xc2\x85x"); }},
      {"CSI in hostname",
       [](auto& i) {
         i.set_hostname(
             "host\xc2\x9b"
             "31m");
       }},
      {"U+2028 in hostname", [](auto& i) { i.set_hostname("host\xe2\x80\xa8x"); }},
      {"U+2029 in cpu_model", [](auto& i) { i.set_cpu_model("cpu\xe2\x80\xa9x"); }},
      {"RLO in agent_version", [](auto& i) { i.set_agent_version("1.0\xe2\x80\xae"); }},
      {"ESC in gpu name", [](auto& i) { i.add_gpus()->set_name("gpu\x1b[2J"); }},
      {"BOM in software value",
       [](auto& i) {
         (*i.mutable_software())["cuda"] =
             "\xef\xbb\xbf"
             "12";
       }},
      {"U+2028 escaped in a label", [](auto& i) { i.set_labels_json(R"({"a":"x\u2028y"})"); }},
      {"labels with a BOM", [](auto& i) { i.set_labels_json("\xef\xbb\xbf{\"a\":\"b\"}"); }},
      {"labels nested", [](auto& i) { i.set_labels_json(R"({"a":{"b":"c"}})"); }},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(cases[k].name);
    const std::string id = "bbbbbbbb-0000-0000-0000-00000000" + std::to_string(1000 + k);
    auto request = RegisterRequestFor(id, agent_token_a_);
    cases[k].mutate(*request.mutable_inventory());
    auto status = Register(request, nullptr);
    EXPECT_EQ(status.error_code(), StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM sessions WHERE id = '" + id + "'"), 0);
  }
}

TEST_F(Trust, EvidenceJsonThatAnyReaderRefusesIsRefusedAndTheViewsStayReadable) {
  const int64_t run = Submit(kMatrix);
  Session a;
  auto lease = RegisterAndLease("aaaaaaaa-0000-0000-0000-000000000574", agent_token_a_, &a);
  ASSERT_TRUE(lease.has_work());
  auto evidence = [&](const std::string& uuid, const std::string& json) {
    v1::EvidenceRecord e;
    e.set_uuid(uuid);
    e.set_attempt_id(lease.attempt_id());
    e.set_cell_id(lease.cells(0).cell_id());
    e.set_kind("load_requests");
    e.set_value_json(json);
    return e;
  };
  auto nested = [](int depth) {
    return "{\"rows\":" + std::string(static_cast<size_t>(depth), '[') +
           std::string(static_cast<size_t>(depth), ']') + "}";
  };
  v1::ReportResponse response;
  ASSERT_TRUE(Report(a, {},
                     {evidence("bom", "\xef\xbb\xbf{\"rows\":[]}"), evidence("deep", nested(2500)),
                      evidence("deeper", nested(30000)), evidence("d65", nested(64)),
                      evidence("ok", "{\"round\":0,\"rows\":[[0,0,1,2,3,4,5,6,7,8,\"\"]]}")},
                     &response)
                  .ok());
  std::map<std::string, std::string> refused;
  for (const auto& r : response.refused()) refused[r.uuid()] = r.reason();
  EXPECT_EQ(refused.size(), 4u);
  EXPECT_NE(refused["bom"].find("byte-order mark"), std::string::npos) << refused["bom"];
  EXPECT_NE(refused["deep"].find("deeper than 64"), std::string::npos) << refused["deep"];
  EXPECT_NE(refused["deeper"].find("deeper than 64"), std::string::npos);
  EXPECT_NE(refused["d65"].find("deeper than 64"), std::string::npos);  // 64 + the object
  EXPECT_EQ(response.acknowledged_uuids_size(), 1);
  CompleteHonestly(a, lease);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM evidence WHERE NOT json_valid(value)"), 0);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM load_requests WHERE run_id = " + std::to_string(run)),
            1);
  EXPECT_EQ(RunDocumentedQueries(), "");
}

TEST_F(Trust, AnOlderDatabaseWithJsonNoReaderAcceptsIsReadableAfterMigration) {
  Submit(kMatrix);
  Session a;
  auto lease = RegisterAndLease("aaaaaaaa-0000-0000-0000-000000000575", agent_token_a_, &a);
  ASSERT_TRUE(lease.has_work());
  CompleteHonestly(a, lease);
  StopCoordinator();
  {
    // What an older coordinator (schema v9) stored: evidence nlohmann accepted and SQLite
    // does not, in a done attempt, and a session's labels with a BOM.
    auto db = db::Database::Open(db_path_, db::OpenMode::kReadWrite);
    ASSERT_TRUE(db.ok());
    const std::string insert =
        "INSERT INTO evidence(uuid, run_id, cell_id, attempt_id, session_id, process, kind, "
        "value, recorded_at) SELECT ?1, m.run_id, m.cell_id, m.attempt_id, m.session_id, 0, "
        "'load_requests', ?2, 0 FROM measurements m LIMIT 1";
    const std::vector<std::pair<std::string, std::string>> rows = {
        {"old-bom", "\xef\xbb\xbf{\"round\":0,\"rows\":[]}"},
        {"old-deep", "{\"rows\":" + std::string(2500, '[') + std::string(2500, ']') + "}"}};
    for (const auto& [uuid, value] : rows) {
      auto stmt = (*db)->Prepare(insert);
      ASSERT_TRUE(stmt.ok()) << stmt.status();
      ASSERT_TRUE(stmt->Bind(1, uuid).Bind(2, value).Run().ok());
    }
    ASSERT_TRUE((*db)->Exec("UPDATE sessions SET labels = char(65279) || '{}'").ok());
    ASSERT_TRUE((*db)
                    ->Exec("DROP TABLE evidence_refused; DROP TABLE session_json_refused; "
                           "DROP TABLE run_tags; DROP TABLE baselines; DROP INDEX "
                           "matrices_by_name; DROP INDEX runs_by_matrix; DROP INDEX "
                           "measurements_by_run; PRAGMA user_version = 9")
                    .ok());
  }
  // The old database is broken as the issue says (so this test can fail).
  EXPECT_NE(RunDocumentedQueries(), "");
  StartCoordinator();  // migrates to v10
  EXPECT_EQ(RunDocumentedQueries(), "");
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM evidence_refused WHERE uuid IN ('old-bom', "
                     "'old-deep')"),
            2);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM session_json_refused WHERE column_name = 'labels'"), 1);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM evidence WHERE NOT json_valid(value)"), 0);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM valid_measurements"),
            static_cast<int64_t>(HonestRecords(lease).size()));
}

TEST_F(Trust, OneUuidNamesOneRecordAcrossReports) {
  Submit(kMatrix);
  Session a;
  auto lease = RegisterAndLease("aaaaaaaa-0000-0000-0000-000000000576", agent_token_a_, &a);
  ASSERT_TRUE(lease.has_work());
  auto records = HonestRecords(lease);
  v1::EvidenceRecord e;
  e.set_attempt_id(lease.attempt_id());
  e.set_cell_id(lease.cells(0).cell_id());
  e.set_kind("path");
  e.set_value_json("\"2d\"");
  v1::ReportResponse response;
  // A measurement's uuid, then evidence under it.
  ASSERT_TRUE(Report(a, {records[0]}, {}, &response).ok());
  ASSERT_EQ(response.acknowledged_uuids_size(), 1);
  e.set_uuid(records[0].uuid());
  response.Clear();
  ASSERT_TRUE(Report(a, {}, {e}, &response).ok());
  ASSERT_EQ(response.refused_size(), 1);
  EXPECT_NE(response.refused(0).reason().find("used by a measurement"), std::string::npos);
  // Evidence's uuid, then a measurement under it.
  e.set_uuid("evidence-first");
  response.Clear();
  ASSERT_TRUE(Report(a, {}, {e}, &response).ok());
  ASSERT_EQ(response.acknowledged_uuids_size(), 1);
  auto m = records[1];
  m.set_uuid("evidence-first");
  response.Clear();
  ASSERT_TRUE(Report(a, {m}, {}, &response).ok());
  ASSERT_EQ(response.refused_size(), 1);
  EXPECT_NE(response.refused(0).reason().find("used by an evidence record"), std::string::npos);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM measurements m JOIN evidence e ON e.uuid = m.uuid"), 0);
}

TEST_F(Trust, AnotherSessionsCredentialOnAnUnknownSessionIsPermissionDenied) {
  Session a;
  ASSERT_TRUE(
      Register(RegisterRequestFor("aaaaaaaa-0000-0000-0000-000000000577", agent_token_a_), &a)
          .ok());
  const std::string unknown = "ffffffff-0000-0000-0000-000000000577";
  Session stranger{unknown, a.credential};
  v1::LeaseRequest lease;
  lease.set_session_id(unknown);
  v1::LeaseResponse leased;
  EXPECT_EQ(agents_->Lease(Ctx(a.credential).get(), lease, &leased).error_code(),
            StatusCode::PERMISSION_DENIED);
  v1::HeartbeatRequest beat;
  beat.set_session_id(unknown);
  v1::HeartbeatResponse beaten;
  EXPECT_EQ(agents_->Heartbeat(Ctx(a.credential).get(), beat, &beaten).error_code(),
            StatusCode::PERMISSION_DENIED);
  v1::ReportResponse reported;
  EXPECT_EQ(Report(stranger, {}, {}, &reported).error_code(), StatusCode::PERMISSION_DENIED);
  v1::FinishResponse finished;
  EXPECT_EQ(Finish(stranger, 1, true, 0, &finished).error_code(), StatusCode::PERMISSION_DENIED);
  v1::ReleaseRequest release;
  release.set_session_id(unknown);
  v1::ReleaseResponse released;
  EXPECT_EQ(agents_->Release(Ctx(a.credential).get(), release, &released).error_code(),
            StatusCode::PERMISSION_DENIED);
  // Garbage still authenticates nobody.
  EXPECT_EQ(agents_->Heartbeat(Ctx("not-a-credential").get(), beat, &beaten).error_code(),
            StatusCode::UNAUTHENTICATED);
}

TEST_F(Trust, ACredentialIssuedUnderARevokedTokenProvesNothingAndItsAttemptIsRequeuedAtOnce) {
  Submit(kMatrix);
  Session a;
  const std::string id = "aaaaaaaa-0000-0000-0000-000000000578";
  auto lease = RegisterAndLease(id, agent_token_a_, &a);
  ASSERT_TRUE(lease.has_work());
  auto records = HonestRecords(lease);
  v1::ReportResponse reported;
  ASSERT_TRUE(Report(a, records, {}, &reported).ok());
  RevokeTokenOf(agent_token_a_);
  // Re-registering the session with another live join token and the revoked credential.
  auto again = RegisterRequestFor(id, agent_token_b_);
  Session reopened;
  auto status = Register(again, &reopened, a.credential);
  EXPECT_EQ(status.error_code(), StatusCode::UNAUTHENTICATED) << status.error_message();
  // Finishing the attempt leased under it.
  v1::FinishResponse finished;
  EXPECT_EQ(Finish(a, lease.attempt_id(), true, static_cast<int64_t>(records.size()), &finished)
                .error_code(),
            StatusCode::UNAUTHENTICATED);
  // The attempt is over and its unit queued now, with no clock moved: another session takes it.
  EXPECT_EQ(
      QueryText("SELECT state FROM attempts WHERE id = " + std::to_string(lease.attempt_id())),
      "failed");
  Session b;
  auto taken = RegisterAndLease("bbbbbbbb-0000-0000-0000-000000000578", agent_token_b_, &b);
  bool same_unit = taken.unit_id() == lease.unit_id();
  if (!same_unit && taken.has_work()) {
    // The other unit came first; the revoked one is next.
    CompleteHonestly(b, taken);
    taken = Lease(b);
    same_unit = taken.unit_id() == lease.unit_id();
  }
  EXPECT_TRUE(same_unit);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM valid_measurements WHERE attempt_id = " +
                     std::to_string(lease.attempt_id())),
            0);
}

TEST_F(Trust, ALongPollInFlightAtRevocationIsAnsweredUnauthenticated) {
  Session a;
  ASSERT_TRUE(
      Register(RegisterRequestFor("aaaaaaaa-0000-0000-0000-000000000579", agent_token_a_), &a)
          .ok());
  // No run: the call waits for work.
  auto waiting = std::async(std::launch::async, [&] {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    context->AddMetadata("authorization", "Bearer " + a.credential);
    v1::LeaseRequest request;
    request.set_session_id(a.id);
    request.set_wait_ms(20000);
    v1::LeaseResponse response;
    return agents_->Lease(context.get(), request, &response);
  });
  // Wait for the event: the coordinator holds the call.
  while (coordinator_->MetricsText().find("\nladder_leases_waiting 1") == std::string::npos) {
    ASSERT_NE(waiting.wait_for(std::chrono::milliseconds(5)), std::future_status::ready)
        << waiting.get().error_message();
  }
  RevokeTokenOf(agent_token_a_);
  // Had the revocation not ended it, the call would wait out its 20 s and answer OK.
  auto status = waiting.get();
  EXPECT_EQ(status.error_code(), StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_NE(coordinator_->MetricsText().find("ladder_long_polls_revoked_total 1"),
            std::string::npos);
}

TEST_F(Trust, AWatchRunStreamEndsWhenItsAdminTokenIsRevoked) {
  const int64_t run = Submit(kMatrix);
  v1::CreateTokenRequest create;
  create.set_role("admin");
  create.set_description("watcher");
  v1::CreateTokenResponse watcher;
  ASSERT_TRUE(admin_->CreateToken(Ctx(admin_token_).get(), create, &watcher).ok());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  context.AddMetadata("authorization", "Bearer " + watcher.token());
  v1::WatchRunRequest request;
  request.set_run_id(run);
  auto stream = admin_->WatchRun(&context, request);
  v1::RunSummary summary;
  ASSERT_TRUE(stream->Read(&summary));  // the stream is live
  RevokeTokenOf(watcher.token());
  while (stream->Read(&summary)) {
  }
  auto status = stream->Finish();
  EXPECT_EQ(status.error_code(), StatusCode::UNAUTHENTICATED) << status.error_message();
}

TEST_F(Trust, RepeatedFieldsAreCappedAndRefusedRegistersAreCountedNotLogged) {
  Session a;
  ASSERT_TRUE(
      Register(RegisterRequestFor("aaaaaaaa-0000-0000-0000-000000000580", agent_token_a_), &a)
          .ok());
  v1::HeartbeatRequest beat;
  beat.set_session_id(a.id);
  for (int i = 0; i < 1025; ++i) beat.add_attempt_ids(i);
  v1::HeartbeatResponse beaten;
  EXPECT_EQ(agents_->Heartbeat(Ctx(a.credential).get(), beat, &beaten).error_code(),
            StatusCode::INVALID_ARGUMENT);
  const size_t lines_before = Lines(log_->Text());
  for (int i = 0; i < 200; ++i) {
    auto request = RegisterRequestFor("cccccccc-0000-0000-0000-" + std::to_string(100000000000 + i),
                                      "ladder_00000000_" + std::string(48, '0'));
    EXPECT_EQ(Register(request, nullptr).error_code(), StatusCode::UNAUTHENTICATED);
  }
  EXPECT_LE(Lines(log_->Text()), lines_before + 1);
  EXPECT_NE(coordinator_->MetricsText().find(
                "ladder_registers_refused_total{code=\"UNAUTHENTICATED\"} 200"),
            std::string::npos)
      << coordinator_->MetricsText();
}

TEST_F(Trust, RefusalReasonsPrintTheExactValueRefused) {
  Submit(kMatrix);
  Session a;
  auto lease = RegisterAndLease("aaaaaaaa-0000-0000-0000-000000000581", agent_token_a_, &a);
  ASSERT_TRUE(lease.has_work());
  auto records = HonestRecords(lease);
  auto bytes = records[2];  // bytes_per_s, at most 1e16
  ASSERT_EQ(bytes.metric(), "bytes_per_s");
  bytes.set_value(1.0000000000000002e16);
  auto segments = records[3];  // a whole number
  ASSERT_EQ(segments.metric(), "segments");
  segments.set_value(1.0000000001);
  v1::ReportResponse response;
  ASSERT_TRUE(Report(a, {bytes, segments}, {}, &response).ok());
  ASSERT_EQ(response.refused_size(), 2);
  EXPECT_NE(response.refused(0).reason().find("bytes_per_s = 10000000000000002 is out of range"),
            std::string::npos)
      << response.refused(0).reason();
  EXPECT_NE(response.refused(1).reason().find("segments = 1.0000000001 is out of range"),
            std::string::npos)
      << response.refused(1).reason();
}

}  // namespace
}  // namespace ladder::coordinator

namespace ladder::coordinator {
namespace {

// The door's property: whatever bytes an agent puts in any string field of Register, Report,
// Finish and Release — random bytes, control characters, invalid UTF-8, separators, escapes —
// the database stays intact, every documented view and query answers, and the log stays one
// event per line with no escape sequence. Seeded: a failure names its seed and repeats.
TEST_F(Trust, RandomBytesInEveryStringFieldLeaveTheDatabaseViewsAndLogIntact) {
  Submit(kMatrix);
  std::mt19937_64 random(20261207);
  const std::vector<std::string> hostile = {
      "\n", "\r", "\x1b[2J", "\xe2\x80\xa8", "\xe2\x80\xae", "\xef\xbb\xbf", "\xc2\x85", "\xff",
      "\"", "\\", "{",       "\x00"};
  auto bytes = [&](size_t max_length) {
    std::string s;
    const size_t n = random() % (max_length + 1);
    while (s.size() < n) {
      if (random() % 4 == 0) {
        s += hostile[random() % hostile.size()];
      } else {
        s.push_back(static_cast<char>(random() % 256));
      }
    }
    return s;
  };
  int accepted_registers = 0;
  for (int i = 0; i < 120; ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i));
    char id[64];
    std::snprintf(id, sizeof id, "dddddddd-0000-0000-0000-%012d", i);
    v1::RegisterRequest request = RegisterRequestFor(id, agent_token_a_);
    auto* inv = request.mutable_inventory();
    switch (i % 6) {
      case 0:
        inv->set_hostname(bytes(300));
        break;
      case 1:
        inv->set_machine_id(bytes(200));
        break;
      case 2:
        (*inv->mutable_software())[bytes(40)] = bytes(300);
        break;
      case 3:
        inv->set_labels_json("{\"k\": \"" + bytes(300) + "\"}");
        break;
      case 4:
        inv->add_features(bytes(80));
        break;
      case 5: {
        auto* gpu = inv->add_gpus();
        gpu->set_vendor("nvidia");
        gpu->set_name(bytes(300));
        gpu->set_driver(bytes(150));
        break;
      }
    }
    Session s;
    if (!Register(request, &s).ok()) continue;
    ++accepted_registers;
    const v1::LeaseResponse lease = Lease(s);
    if (!lease.has_work()) continue;
    v1::MeasurementRecord m;
    m.set_uuid(bytes(70));
    m.set_attempt_id(lease.attempt_id());
    m.set_cell_id(lease.cells(0).cell_id());
    m.set_metric(i % 2 ? std::string("time_us") : bytes(70));
    m.set_unit(bytes(20));
    m.set_value(1.0);
    v1::EvidenceRecord e;
    e.set_uuid("evidence-" + std::to_string(i));
    e.set_attempt_id(lease.attempt_id());
    e.set_cell_id(lease.cells(0).cell_id());
    e.set_kind(i % 3 ? std::string("note") : bytes(70));
    e.set_value_json(i % 2 ? "\"" + bytes(200) + "\"" : bytes(200));
    v1::ReportResponse reported;
    (void)Report(s, {m}, {e}, &reported);
    if (i % 2) {
      v1::FinishResponse finished;
      (void)Finish(s, lease.attempt_id(), false, 0, &finished, bytes(5000));
    } else {
      v1::ReleaseRequest release;
      release.set_session_id(s.id);
      release.set_reason(bytes(3000));
      v1::ReleaseResponse released;
      (void)agents_->Release(Ctx(s.credential).get(), release, &released);
    }
  }
  EXPECT_GT(accepted_registers, 0);
  EXPECT_EQ(QueryText("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(RunDocumentedQueries(), "");
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM evidence WHERE NOT json_valid(value)"), 0);
  const std::string log = log_->Text();
  EXPECT_EQ(log.find('\x1b'), std::string::npos);
  EXPECT_EQ(log.find("\xe2\x80\xa8"), std::string::npos);
  EXPECT_EQ(log.find("\xc2\x85"), std::string::npos);
  // One event per line: every line opens with the logger's time stamp.
  size_t start = 0;
  while (start < log.size()) {
    const size_t end = log.find('\n', start);
    const std::string line = log.substr(start, end - start);
    EXPECT_TRUE(line.rfind("[20", 0) == 0) << "a line that is no event: " << line.substr(0, 120);
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

}  // namespace
}  // namespace ladder::coordinator
