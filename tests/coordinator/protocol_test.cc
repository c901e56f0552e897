// The wire contract under abuse: a real coordinator (loopback gRPC, a real SQLite file, tokens
// required, the runners' real schemas) answers what a hostile or buggy client sends with the
// code proto/ladder/v1/*.proto documents, and `valid_measurements` ends up holding exactly the
// design's slots with the honest values, whatever was sent in between.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <random>
#include <set>
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
#include "protocol_harness.h"

namespace ladder::coordinator {
namespace {

using grpc::StatusCode;

TEST_F(Protocol, RegisterRefusesMalformedInventoriesAndTakeovers) {
  struct Case {
    std::string name;
    std::function<void(v1::RegisterRequest&)> mutate;
    StatusCode code;
  };
  const std::vector<Case> cases = {
      {"empty session id", [](auto& r) { r.set_session_id(""); }, StatusCode::INVALID_ARGUMENT},
      {"short session id", [](auto& r) { r.set_session_id("abc"); }, StatusCode::INVALID_ARGUMENT},
      {"long session id", [](auto& r) { r.set_session_id(std::string(65, 'a')); },
       StatusCode::INVALID_ARGUMENT},
      {"NUL in session id", [](auto& r) { r.set_session_id(std::string("abcd\0efgh", 9)); },
       StatusCode::INVALID_ARGUMENT},
      {"no inventory", [](auto& r) { r.clear_inventory(); }, StatusCode::INVALID_ARGUMENT},
      {"empty hostname", [](auto& r) { r.mutable_inventory()->set_hostname(""); },
       StatusCode::INVALID_ARGUMENT},
      {"10 000-character hostname",
       [](auto& r) { r.mutable_inventory()->set_hostname(std::string(10000, 'h')); },
       StatusCode::INVALID_ARGUMENT},
      {"NUL in hostname",
       [](auto& r) { r.mutable_inventory()->set_hostname(std::string("ho\0st", 5)); },
       StatusCode::INVALID_ARGUMENT},
      {"negative cpu cores", [](auto& r) { r.mutable_inventory()->set_cpu_cores(-1); },
       StatusCode::INVALID_ARGUMENT},
      {"negative memory", [](auto& r) { r.mutable_inventory()->set_memory_mib(-1); },
       StatusCode::INVALID_ARGUMENT},
      {"5 000 GPUs",
       [](auto& r) {
         for (int i = 0; i < 5000; ++i) r.mutable_inventory()->add_gpus()->set_name("g");
       },
       StatusCode::INVALID_ARGUMENT},
      {"GPU memory -1",
       [](auto& r) {
         auto* g = r.mutable_inventory()->add_gpus();
         g->set_vendor("nvidia");
         g->set_memory_mib(-1);
       },
       StatusCode::INVALID_ARGUMENT},
      {"labels not JSON", [](auto& r) { r.mutable_inventory()->set_labels_json("{oops"); },
       StatusCode::INVALID_ARGUMENT},
      {"labels not an object", [](auto& r) { r.mutable_inventory()->set_labels_json("[1]"); },
       StatusCode::INVALID_ARGUMENT},
      {"feature with a space", [](auto& r) { r.mutable_inventory()->add_features("a b"); },
       StatusCode::INVALID_ARGUMENT},
      {"no join token", [](auto& r) { r.set_join_token(""); }, StatusCode::UNAUTHENTICATED},
      {"forged join token",
       [](auto& r) { r.set_join_token(r.join_token().substr(0, 60) + "beef"); },
       StatusCode::UNAUTHENTICATED},
  };
  for (const auto& c : cases) {
    auto request = RegisterRequestFor("11111111-aaaa-bbbb-cccc-000000000001", agent_token_a_);
    c.mutate(request);
    EXPECT_EQ(Register(request, nullptr).error_code(), c.code) << c.name;
  }
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM sessions"), 0) << "a refused Register stored something";

  // The takeover: a session belongs to its credential. The same session id under another
  // agent token is refused; so is the same id under the victim's own join token (every agent
  // of a fleet may hold it), once the victim has called in.
  Session victim;
  auto victim_request = RegisterRequestFor("22222222-aaaa-bbbb-cccc-000000000002", agent_token_a_);
  victim_request.set_registration_nonce("victims-own-nonce-0123456789");
  ASSERT_TRUE(Register(victim_request, &victim).ok());
  auto takeover =
      Register(RegisterRequestFor("22222222-aaaa-bbbb-cccc-000000000002", agent_token_b_), nullptr);
  EXPECT_EQ(takeover.error_code(), StatusCode::ALREADY_EXISTS) << takeover.error_message();
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM sessions WHERE hostname = 'host-22222222'"), 1);
  // Before the victim's first call, its lost answer can be retried with its nonce (and only
  // with it): that issues a new credential and ends the one whose answer was lost.
  auto wrong_nonce = RegisterRequestFor(victim.id, agent_token_a_);
  wrong_nonce.set_registration_nonce("someone-elses-nonce-0123456789");
  EXPECT_EQ(Register(wrong_nonce, nullptr).error_code(), StatusCode::ALREADY_EXISTS);
  Session retried;
  ASSERT_TRUE(Register(victim_request, &retried).ok());
  v1::HeartbeatRequest beat;
  beat.set_session_id(victim.id);
  v1::HeartbeatResponse beat_response;
  EXPECT_EQ(agents_->Heartbeat(Ctx(victim.credential).get(), beat, &beat_response).error_code(),
            StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(agents_->Heartbeat(Ctx(retried.credential).get(), beat, &beat_response).ok());
  // It has called in: neither its join token nor its nonce reopens it now.
  auto same_token = Register(RegisterRequestFor(victim.id, agent_token_a_), nullptr);
  EXPECT_EQ(same_token.error_code(), StatusCode::ALREADY_EXISTS) << same_token.error_message();
  EXPECT_EQ(Register(victim_request, nullptr).error_code(), StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(agents_->Heartbeat(Ctx(retried.credential).get(), beat, &beat_response).ok());
  // Its credential does (a coordinator restart, a re-register), whatever join token it
  // presents, and that ends the previous credential.
  Session again;
  EXPECT_TRUE(
      Register(RegisterRequestFor(victim.id, agent_token_b_), &again, retried.credential).ok());
  EXPECT_TRUE(agents_->Heartbeat(Ctx(again.credential).get(), beat, &beat_response).ok());
  EXPECT_EQ(agents_->Heartbeat(Ctx(retried.credential).get(), beat, &beat_response).error_code(),
            StatusCode::UNAUTHENTICATED);
  // Codes: a credential no session holds (garbage, a join token sent as one) authenticates
  // nobody; another session's credential is a session overstepping.
  EXPECT_EQ(agents_->Heartbeat(Ctx("garbage").get(), beat, &beat_response).error_code(),
            StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(agents_->Heartbeat(Ctx(agent_token_a_).get(), beat, &beat_response).error_code(),
            StatusCode::UNAUTHENTICATED);
  Session other;
  ASSERT_TRUE(
      Register(RegisterRequestFor("33333333-aaaa-bbbb-cccc-000000000003", agent_token_b_), &other)
          .ok());
  EXPECT_EQ(agents_->Heartbeat(Ctx(other.credential).get(), beat, &beat_response).error_code(),
            StatusCode::PERMISSION_DENIED);
  // A malformed nonce is bad input.
  auto bad_nonce = RegisterRequestFor("44444444-aaaa-bbbb-cccc-000000000004", agent_token_a_);
  bad_nonce.set_registration_nonce("short");
  EXPECT_EQ(Register(bad_nonce, nullptr).error_code(), StatusCode::INVALID_ARGUMENT);
}

TEST_F(Protocol, OutOfDesignRecordsAreRefusedOneByOneAndNeverCount) {
  Session a, b;
  ASSERT_TRUE(
      Register(RegisterRequestFor("aaaaaaaa-0000-0000-0000-000000000001", agent_token_a_), &a)
          .ok());
  ASSERT_TRUE(
      Register(RegisterRequestFor("bbbbbbbb-0000-0000-0000-000000000002", agent_token_b_), &b)
          .ok());
  const int64_t run = Submit(kMatrix);
  const int64_t other_run = Submit(std::string(kMatrix) + "seed: 7\n");
  auto lease_a = Lease(a);
  auto lease_b = Lease(b);
  ASSERT_TRUE(lease_a.has_work() && lease_b.has_work());
  ASSERT_EQ(lease_a.run_id(), run);
  ASSERT_EQ(lease_a.processes(), kProcesses);
  ASSERT_EQ(lease_a.rounds(), kRounds);
  const int64_t cell = lease_a.cells(0).cell_id();
  // A heartbeat naming another session's live attempt is refused as a whole.
  {
    v1::HeartbeatRequest beat;
    beat.set_session_id(b.id);
    beat.add_attempt_ids(lease_b.attempt_id());
    beat.add_attempt_ids(lease_a.attempt_id());
    v1::HeartbeatResponse beat_response;
    EXPECT_EQ(agents_->Heartbeat(Ctx(b.credential).get(), beat, &beat_response).error_code(),
              StatusCode::PERMISSION_DENIED);
  }
  // A cell of the other unit (b's) and one of another run.
  const int64_t foreign_cell = lease_b.cells(0).cell_id();
  const int64_t other_run_cell =
      QueryInt("SELECT MIN(id) FROM cells WHERE run_id = " + std::to_string(other_run));

  auto record = [&](const std::string& uuid) {
    v1::MeasurementRecord m;
    m.set_uuid(uuid);
    m.set_attempt_id(lease_a.attempt_id());
    m.set_cell_id(cell);
    m.set_process(0);
    m.set_round(0);
    m.set_metric("time_us");
    m.set_unit("us");
    m.set_value(42);
    return m;
  };
  struct Case {
    std::string name;
    std::function<void(v1::MeasurementRecord&)> mutate;
    std::string reason;  // in ReportResponse.refused
  };
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Case> cases = {
      {"cell of another unit", [&](auto& m) { m.set_cell_id(foreign_cell); }, "not a cell"},
      {"cell of another run", [&](auto& m) { m.set_cell_id(other_run_cell); }, "not a cell"},
      {"unknown cell", [&](auto& m) { m.set_cell_id(987654321); }, "not a cell"},
      {"process -1", [](auto& m) { m.set_process(-1); }, "process -1 is outside"},
      {"process 6", [](auto& m) { m.set_process(6); }, "process 6 is outside"},
      {"round -1", [](auto& m) { m.set_round(-1); }, "round -1 is outside"},
      {"round 2^31-1", [](auto& m) { m.set_round(2147483647); }, "outside the design"},
      {"NaN", [](auto& m) { m.set_value(std::nan("")); }, "not finite"},
      {"+inf", [&](auto& m) { m.set_value(inf); }, "not finite"},
      {"-inf", [&](auto& m) { m.set_value(-inf); }, "not finite"},
      {"NUL in metric", [](auto& m) { m.set_metric(std::string("time\0us", 7)); }, "metric names"},
      {"upper-case metric", [](auto& m) { m.set_metric("Time_us"); }, "metric names"},
      {"65-character metric", [](auto& m) { m.set_metric(std::string(65, 'm')); }, "metric names"},
      {"undeclared metric", [](auto& m) { m.set_metric("latency_us"); }, "reports no metric"},
      {"engine metric on a kernel run", [](auto& m) { m.set_metric("decode_tok_s"); },
       "reports no metric"},
      {"wrong unit", [](auto& m) { m.set_unit("ms"); }, "reported in us"},
      // Values no measurement can have (runner/src/schema.cc: each metric's range).
      {"negative time", [](auto& m) { m.set_value(-3); }, "time_us = -3 is out of range: > 0"},
      {"zero time", [](auto& m) { m.set_value(0); }, "time_us = 0 is out of range"},
      {"1e308 us", [](auto& m) { m.set_value(1e308); }, "time_us = 1e+308 is out of range"},
      {"zero segments",
       [](auto& m) {
         m.set_metric("segments");
         m.set_unit("1");
         m.set_value(0);
       },
       "segments = 0 is out of range: >= 1"},
      {"half a segment",
       [](auto& m) {
         m.set_metric("segments");
         m.set_unit("1");
         m.set_value(2.5);
       },
       "a whole number"},
      {"unknown attempt", [](auto& m) { m.set_attempt_id(987654321); }, "unknown attempt"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    auto m = record("bad-" + std::to_string(i));
    cases[i].mutate(m);
    v1::ReportResponse response;
    auto status = Report(a, {m}, {}, &response);
    ASSERT_TRUE(status.ok()) << cases[i].name << ": " << status.error_message();
    EXPECT_EQ(response.acknowledged_uuids_size(), 0) << cases[i].name;
    ASSERT_EQ(response.refused_size(), 1) << cases[i].name;
    EXPECT_EQ(response.refused(0).uuid(), m.uuid());
    EXPECT_NE(response.refused(0).reason().find(cases[i].reason), std::string::npos)
        << cases[i].name << ": " << response.refused(0).reason();
    EXPECT_EQ(response.refused(0).reason().find("SQL"), std::string::npos);
  }
  // A filled slot keeps its value: a second record for it under a new uuid is refused, the
  // same record again is acknowledged again.
  const auto honest_first = HonestRecords(lease_a)[0];
  v1::ReportResponse response;
  ASSERT_TRUE(Report(a, {honest_first}, {}, &response).ok());
  EXPECT_EQ(response.acknowledged_uuids_size(), 1);
  auto duplicate = honest_first;
  duplicate.set_uuid("second");
  duplicate.set_value(4242);
  ASSERT_TRUE(Report(a, {duplicate, honest_first}, {}, &response).ok());
  EXPECT_EQ(response.acknowledged_uuids_size(), 1);
  ASSERT_EQ(response.refused_size(), 1);
  EXPECT_EQ(response.refused(0).uuid(), "second");
  EXPECT_NE(response.refused(0).reason().find("slot already filled"), std::string::npos);
  // The proto's uuid rules: a stored uuid again with another value is refused (the first value
  // stays); one uuid twice in one report is answered once: acknowledged when the copies are the
  // same record, refused when they differ.
  auto same_uuid = honest_first;
  same_uuid.set_value(honest_first.value() + 1);
  ASSERT_TRUE(Report(a, {same_uuid}, {}, &response).ok());
  EXPECT_EQ(response.acknowledged_uuids_size(), 0);
  ASSERT_EQ(response.refused_size(), 1);
  EXPECT_NE(response.refused(0).reason().find("another value"), std::string::npos)
      << response.refused(0).reason();
  auto twice = HonestRecords(lease_a)[1];
  ASSERT_TRUE(Report(a, {twice, twice}, {}, &response).ok());
  ASSERT_EQ(response.acknowledged_uuids_size(), 1);
  EXPECT_EQ(response.refused_size(), 0);
  auto other = HonestRecords(lease_a)[2];
  auto other_changed = other;
  other_changed.set_value(other.value() + 1);
  ASSERT_TRUE(Report(a, {other, other_changed}, {}, &response).ok());
  EXPECT_EQ(response.acknowledged_uuids_size(), 0);
  ASSERT_EQ(response.refused_size(), 1);
  EXPECT_EQ(response.refused(0).uuid(), other.uuid());
  EXPECT_NE(response.refused(0).reason().find("sent twice"), std::string::npos);

  // Malformed as a whole: INVALID_ARGUMENT, nothing stored.
  {
    auto empty_uuid = record("");
    EXPECT_EQ(Report(a, {empty_uuid}, {}, &response).error_code(), StatusCode::INVALID_ARGUMENT);
    auto long_uuid = record(std::string(65, 'u'));
    EXPECT_EQ(Report(a, {long_uuid}, {}, &response).error_code(), StatusCode::INVALID_ARGUMENT);
    std::vector<v1::MeasurementRecord> flood(20001, record("x"));
    for (size_t i = 0; i < flood.size(); ++i) flood[i].set_uuid("flood-" + std::to_string(i));
    EXPECT_EQ(Report(a, flood, {}, &response).error_code(), StatusCode::INVALID_ARGUMENT);
  }
  // Another session's attempt: PERMISSION_DENIED for the whole call, under either name.
  {
    auto intruder = record("intruder");
    intruder.set_attempt_id(lease_b.attempt_id());
    intruder.set_cell_id(foreign_cell);
    auto status = Report(a, {record("good-with-intruder"), intruder}, {}, &response);
    EXPECT_EQ(status.error_code(), StatusCode::PERMISSION_DENIED) << status.error_message();
    EXPECT_EQ(Report(a, {record("as-b")}, {}, &response, b.id).error_code(),
              StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM measurements WHERE uuid IN "
                       "('intruder', 'good-with-intruder', 'as-b')"),
              0);
  }
  // Evidence: a leased cell, valid JSON, under 64 KiB, a proper kind.
  {
    auto evidence = [&](const std::string& uuid) {
      v1::EvidenceRecord e;
      e.set_uuid(uuid);
      e.set_attempt_id(lease_a.attempt_id());
      e.set_cell_id(cell);
      e.set_process(0);
      e.set_kind("kernel_path");
      e.set_value_json(R"({"path":"2d"})");
      return e;
    };
    auto not_json = evidence("e-not-json");
    not_json.set_value_json("{path: 2d");
    auto huge = evidence("e-huge");
    huge.set_value_json("\"" + std::string(1 << 20, 'x') + "\"");
    auto foreign = evidence("e-foreign");
    foreign.set_cell_id(foreign_cell);
    auto kind = evidence("e-kind");
    kind.set_kind(std::string("bad\0kind", 8));
    auto process = evidence("e-process");
    process.set_process(99);
    ASSERT_TRUE(
        Report(a, {}, {evidence("e-good"), not_json, huge, foreign, kind, process}, &response)
            .ok());
    EXPECT_EQ(response.acknowledged_uuids_size(), 1);
    EXPECT_EQ(response.refused_size(), 5);
  }
  // Finish: nothing half-finished, the design decides.
  {
    v1::FinishResponse finished;
    EXPECT_EQ(Finish(a, lease_a.attempt_id(), true, -1, &finished).error_code(),
              StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(
        Finish(a, lease_a.attempt_id(), false, 0, &finished, std::string(5000, 'r')).error_code(),
        StatusCode::INVALID_ARGUMENT);
    // Announcing fewer than stored does not make an incomplete attempt done.
    auto early = Finish(a, lease_a.attempt_id(), true, 0, &finished);
    EXPECT_EQ(early.error_code(), StatusCode::FAILED_PRECONDITION) << early.error_message();
    EXPECT_NE(early.error_message().find("slots of the design filled"), std::string::npos)
        << early.error_message();
    EXPECT_EQ(Finish(a, lease_b.attempt_id(), true, 0, &finished).error_code(),
              StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(Finish(a, 987654321, true, 0, &finished).error_code(), StatusCode::NOT_FOUND);
  }
  // The honest agents complete both units; the run is done with exactly the design.
  CompleteHonestly(a, lease_a);
  CompleteHonestly(b, lease_b);
  v1::GetRunRequest get;
  get.set_run_id(run);
  v1::RunSummary summary;
  ASSERT_TRUE(admin_->GetRun(Ctx(admin_token_).get(), get, &summary).ok());
  EXPECT_EQ(summary.state(), "done");
  EXPECT_EQ(summary.cells_done(), 4);
  ExpectExactlyTheDesign(run, 4);
}

TEST_F(Protocol, AnExpiredLeaseKeepsLateResultsStaleAndTheRunCompletesElsewhere) {
  Session a, b;
  ASSERT_TRUE(
      Register(RegisterRequestFor("aaaaaaaa-0000-0000-0000-000000000011", agent_token_a_), &a)
          .ok());
  ASSERT_TRUE(
      Register(RegisterRequestFor("bbbbbbbb-0000-0000-0000-000000000012", agent_token_b_), &b)
          .ok());
  const int64_t run = Submit(kMatrix);
  auto lease_a = Lease(a);
  auto lease_b = Lease(b);
  ASSERT_TRUE(lease_a.has_work() && lease_b.has_work());
  // b goes silent past its lease (a keeps heartbeating).
  v1::HeartbeatRequest beat;
  beat.set_session_id(a.id);
  beat.add_attempt_ids(lease_a.attempt_id());
  v1::HeartbeatResponse beat_response;
  clock_.Advance(3000);
  ASSERT_TRUE(agents_->Heartbeat(Ctx(a.credential).get(), beat, &beat_response).ok());
  clock_.Advance(3000);
  for (int i = 0; i < 200 && QueryInt("SELECT COUNT(*) FROM attempts WHERE state = 'expired'") == 0;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(QueryInt("SELECT COUNT(*) FROM attempts WHERE state = 'expired'"), 1);
  // b's late results are kept as stale; its finish is not accepted.
  auto late = HonestRecords(lease_b);
  v1::ReportResponse response;
  ASSERT_TRUE(Report(b, late, {}, &response).ok());
  EXPECT_EQ(response.stale_uuids_size(), static_cast<int>(late.size()));
  v1::FinishResponse finished;
  ASSERT_TRUE(
      Finish(b, lease_b.attempt_id(), true, static_cast<int64_t>(late.size()), &finished).ok());
  EXPECT_FALSE(finished.accepted());
  // a finishes its own unit, then takes b's.
  CompleteHonestly(a, lease_a);
  auto again = Lease(a);
  ASSERT_TRUE(again.has_work());
  CompleteHonestly(a, again);
  ExpectExactlyTheDesign(run, 4);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM measurements WHERE stale = 1"),
            static_cast<int64_t>(late.size()));
}

TEST_F(Protocol, RevokingATokenEndsTheSessionsItAdmitted) {
  Session a;
  ASSERT_TRUE(
      Register(RegisterRequestFor("aaaaaaaa-0000-0000-0000-000000000021", agent_token_a_), &a)
          .ok());
  v1::HeartbeatRequest beat;
  beat.set_session_id(a.id);
  v1::HeartbeatResponse beat_response;
  ASSERT_TRUE(agents_->Heartbeat(Ctx(a.credential).get(), beat, &beat_response).ok());
  v1::RevokeTokenRequest revoke;
  revoke.set_id(agent_token_a_.substr(7, 8));
  v1::RevokeTokenResponse revoked;
  ASSERT_TRUE(admin_->RevokeToken(Ctx(admin_token_).get(), revoke, &revoked).ok());
  auto status = agents_->Heartbeat(Ctx(a.credential).get(), beat, &beat_response);
  EXPECT_EQ(status.error_code(), StatusCode::UNAUTHENTICATED) << status.error_message();
  v1::LeaseRequest lease;
  lease.set_session_id(a.id);
  v1::LeaseResponse leased;
  EXPECT_EQ(agents_->Lease(Ctx(a.credential).get(), lease, &leased).error_code(),
            StatusCode::UNAUTHENTICATED);
}

TEST_F(Protocol, AdminCallsAnswerWithTheDocumentedCodes) {
  auto admin = [&] { return Ctx(admin_token_); };
  {
    v1::CreateTokenRequest request;
    request.set_role("agent");
    request.set_expires_in_ms(-1);
    v1::CreateTokenResponse response;
    EXPECT_EQ(admin_->CreateToken(admin().get(), request, &response).error_code(),
              StatusCode::INVALID_ARGUMENT);
    request.set_expires_in_ms(0);
    request.set_role("root");
    EXPECT_EQ(admin_->CreateToken(admin().get(), request, &response).error_code(),
              StatusCode::INVALID_ARGUMENT);
    // An agent token is not an admin token.
    request.set_role("agent");
    EXPECT_EQ(admin_->CreateToken(Ctx(agent_token_a_).get(), request, &response).error_code(),
              StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(admin_->CreateToken(Ctx("").get(), request, &response).error_code(),
              StatusCode::UNAUTHENTICATED);
  }
  {
    v1::RevokeTokenRequest request;
    request.set_id("deadbeef");
    v1::RevokeTokenResponse response;
    EXPECT_EQ(admin_->RevokeToken(admin().get(), request, &response).error_code(),
              StatusCode::NOT_FOUND);
  }
  {
    v1::GetRunRequest request;
    request.set_run_id(424242);
    v1::RunSummary response;
    auto status = admin_->GetRun(admin().get(), request, &response);
    EXPECT_EQ(status.error_code(), StatusCode::NOT_FOUND);
    EXPECT_EQ(status.error_message().find(db_path_), std::string::npos) << "a path leaked";
    v1::CancelRunRequest cancel;
    cancel.set_run_id(424242);
    v1::CancelRunResponse cancelled;
    EXPECT_EQ(admin_->CancelRun(admin().get(), cancel, &cancelled).error_code(),
              StatusCode::NOT_FOUND);
    v1::QueryRequest query;
    query.set_run_id(424242);
    v1::QueryResponse queried;
    EXPECT_EQ(admin_->Query(admin().get(), query, &queried).error_code(), StatusCode::NOT_FOUND);
  }
  {
    // Submit and Validate refuse what `ladder validate` refuses, runner checks included, with
    // file:line:col; nothing is stored.
    v1::SubmitRequest request;
    request.set_filename("m.yaml");
    request.set_yaml(
        "name: bad\nrunner: kernel\naxes:\n  depth: [64]\n  spec: [off, k1]\n"
        "fixed: {backend: cpu}\n");
    v1::SubmitResponse response;
    auto status = admin_->Submit(admin().get(), request, &response);
    EXPECT_EQ(status.error_code(), StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("m.yaml:5:10: axes.spec[0]: cell depth=64,spec=off: "
                                          "kernel runner: unknown parameter 'spec'"),
              std::string::npos)
        << status.error_message();
    v1::ValidateRequest validate;
    validate.set_yaml(request.yaml());
    validate.set_filename("m.yaml");
    v1::ValidateResponse validated;
    EXPECT_EQ(admin_->Validate(admin().get(), validate, &validated).error_message(),
              status.error_message());
    request.set_yaml("name: bad\nrunner: kernel\naxes: {depth: [64]}\nmetric: decode_tok_s\n");
    EXPECT_EQ(admin_->Submit(admin().get(), request, &response).error_code(),
              StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM runs"), 0);
  }
  {
    // A run no connected agent can take says why, at submission and while it waits.
    Session cpu;
    ASSERT_TRUE(
        Register(RegisterRequestFor("cccccccc-0000-0000-0000-000000000031", agent_token_a_), &cpu)
            .ok());
    v1::SubmitRequest request;
    request.set_filename("gpu.yaml");
    request.set_yaml(std::string(kMatrix) + "requires: {gpu_vendor: nvidia}\n");
    v1::SubmitResponse response;
    ASSERT_TRUE(admin_->Submit(admin().get(), request, &response).ok());
    EXPECT_NE(response.warning().find("waiting for an agent with gpu_vendor=nvidia"),
              std::string::npos)
        << response.warning();
    EXPECT_NE(response.warning().find("1 agent connected, none match"), std::string::npos)
        << response.warning();
    v1::GetRunRequest get;
    get.set_run_id(response.run_id());
    v1::RunSummary summary;
    ASSERT_TRUE(admin_->GetRun(admin().get(), get, &summary).ok());
    EXPECT_EQ(summary.waiting_reason(), response.warning());
  }
}

// grpc.health.v1.Health/Check by hand (Debian ships no generated health client): the request
// is field 1 (service name), the answer field 1 (1 = SERVING).
int HealthStatus(const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  grpc::GenericStub stub(channel);
  std::string request;
  request.push_back(0x0a);
  request.push_back(static_cast<char>(service.size()));
  request += service;
  grpc::Slice slice(request);
  grpc::ByteBuffer in(&slice, 1), out;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &in, &out,
                 [&](grpc::Status s) { done.set_value(s); });
  grpc::Status status = done.get_future().get();
  if (!status.ok()) return -static_cast<int>(status.error_code());
  std::vector<grpc::Slice> slices;
  (void)out.Dump(&slices);
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return bytes.size() == 2 && bytes[0] == 0x08 ? bytes[1] : 0;
}

TEST_F(Protocol, HealthAnswersForEachServiceName) {
  for (const char* service : {"", "ladder.v1.AgentService", "ladder.v1.AdminService"}) {
    EXPECT_EQ(HealthStatus(channel_, service), 1) << "service '" << service << "'";
  }
  EXPECT_EQ(HealthStatus(channel_, "no.such.Service"), -static_cast<int>(StatusCode::NOT_FOUND));
}

// Any interleaving of honest and abusive calls ends with a complete run whose valid values are
// exactly the honest ones.
TEST_F(Protocol, InterleavedHonestAndAbusiveCallsLeaveExactlyTheHonestValues) {
  Session a, b;
  ASSERT_TRUE(
      Register(RegisterRequestFor("aaaaaaaa-0000-0000-0000-000000000041", agent_token_a_), &a)
          .ok());
  ASSERT_TRUE(
      Register(RegisterRequestFor("bbbbbbbb-0000-0000-0000-000000000042", agent_token_b_), &b)
          .ok());
  const int64_t run = Submit(kMatrix);
  auto lease_a = Lease(a);
  auto lease_b = Lease(b);
  ASSERT_TRUE(lease_a.has_work() && lease_b.has_work());
  const Session* owner[2] = {&a, &b};
  const v1::LeaseResponse* leases[2] = {&lease_a, &lease_b};
  std::vector<v1::MeasurementRecord> honest[2] = {HonestRecords(lease_a), HonestRecords(lease_b)};
  std::vector<bool> sent[2] = {std::vector<bool>(honest[0].size()),
                               std::vector<bool>(honest[1].size())};

  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    for (int step = 0; step < 60; ++step) {
      const int who = static_cast<int>(rng() % 2);
      const Session& s = *owner[who];
      const v1::LeaseResponse& lease = *leases[who];
      v1::ReportResponse response;
      v1::FinishResponse finished;
      switch (rng() % 7) {
        case 0: {  // an honest chunk, possibly repeated
          std::vector<v1::MeasurementRecord> chunk;
          for (int k = 0; k < 5; ++k) {
            const size_t i = rng() % honest[who].size();
            chunk.push_back(honest[who][i]);
            sent[who][i] = true;
          }
          ASSERT_TRUE(Report(s, chunk, {}, &response).ok());
          break;
        }
        case 1: {  // a second value for an honest slot already filled, under a fresh uuid
          // (A slot's first value is the one kept: before the honest one arrives, nothing
          // tells a session's own second value from its first.)
          std::vector<size_t> filled;
          for (size_t i = 0; i < sent[who].size(); ++i) {
            if (sent[who][i]) filled.push_back(i);
          }
          if (filled.empty()) break;
          auto m = honest[who][filled[rng() % filled.size()]];
          m.set_uuid("dup-" + std::to_string(seed) + "-" + std::to_string(step));
          m.set_value(-1);
          ASSERT_TRUE(Report(s, {m}, {}, &response).ok());
          break;
        }
        case 2: {  // out of design
          auto m = honest[who][rng() % honest[who].size()];
          m.set_uuid("ood-" + std::to_string(seed) + "-" + std::to_string(step));
          m.set_round(static_cast<int>(kRounds + rng() % 100));
          m.set_value(-2);
          ASSERT_TRUE(Report(s, {m}, {}, &response).ok());
          EXPECT_EQ(response.refused_size(), 1);
          break;
        }
        case 3: {  // into the other session's attempt
          auto m = honest[1 - who][rng() % honest[1 - who].size()];
          m.set_uuid("steal-" + std::to_string(seed) + "-" + std::to_string(step));
          m.set_value(-3);
          EXPECT_EQ(Report(s, {m}, {}, &response).error_code(), StatusCode::PERMISSION_DENIED);
          break;
        }
        case 4: {  // a premature or false finish
          auto status =
              Finish(s, lease.attempt_id(), true, static_cast<int64_t>(rng() % 3), &finished);
          EXPECT_FALSE(status.ok() && finished.accepted()) << "finished with slots missing";
          break;
        }
        case 5: {  // a finish of the other's attempt
          EXPECT_EQ(Finish(s, leases[1 - who]->attempt_id(), false, 0, &finished).error_code(),
                    StatusCode::PERMISSION_DENIED);
          break;
        }
        default: {  // non-finite
          auto m = honest[who][rng() % honest[who].size()];
          m.set_uuid("nan-" + std::to_string(seed) + "-" + std::to_string(step));
          m.set_value(std::nan(""));
          ASSERT_TRUE(Report(s, {m}, {}, &response).ok());
          break;
        }
      }
    }
  }
  // The honest agents send the rest and finish.
  for (int who = 0; who < 2; ++who) CompleteHonestly(*owner[who], *leases[who]);
  ExpectExactlyTheDesign(run, 4);
  EXPECT_EQ(QueryInt("SELECT COUNT(*) FROM valid_measurements WHERE value < 0"), 0);
}

}  // namespace
}  // namespace ladder::coordinator

namespace ladder::coordinator {
namespace {

// `runner: command`: the run's declared metrics are the only ones stored, in their unit and
// range, whatever an agent (one that skips its runner's checks) sends; the lease carries the
// program's configuration; a unit goes only to a session that advertises the program; the
// attempt is done only when every required slot is filled.
TEST_F(Protocol, ACommandRunStoresOnlyWhatItsMatrixDeclares) {
  const int64_t run = Submit(R"(
name: command-protocol
runner: command
command: {bench: sorter, args: ["--n", "{n}"]}
metrics:
  time_us: {unit: us, better: lower}
  hit_share: {unit: "1", better: higher, range: share, required: false}
axes: {n: [10]}
replicates: {sessions: 1, processes: 1, rounds: 2}
)");
  ASSERT_GT(run, 0);
  // A session without the program gets nothing; one that advertises bench:sorter gets the unit.
  Session plain, with_bench;
  auto without = RegisterRequestFor("aaaaaaaa-0000-0000-0000-000000000001", agent_token_a_);
  without.mutable_inventory()->add_features("command");  // the runner, not the program
  ASSERT_TRUE(Register(without, &plain).ok());
  EXPECT_FALSE(Lease(plain).has_work());
  auto request = RegisterRequestFor("bbbbbbbb-0000-0000-0000-000000000002", agent_token_a_);
  request.mutable_inventory()->add_features("command");
  request.mutable_inventory()->add_features("bench:sorter");
  ASSERT_TRUE(Register(request, &with_bench).ok());
  const v1::LeaseResponse lease = Lease(with_bench);
  ASSERT_TRUE(lease.has_work());
  EXPECT_EQ(lease.runner(), "command");
  const auto config = nlohmann::json::parse(lease.runner_config_json());
  EXPECT_EQ(config["command"]["bench"], "sorter");
  EXPECT_EQ(config["metrics"][0]["name"], "time_us");
  const int64_t cell = lease.cells(0).cell_id();
  auto record = [&](const std::string& uuid, int round, const std::string& metric,
                    const std::string& unit, double value) {
    v1::MeasurementRecord m;
    m.set_uuid(uuid);
    m.set_attempt_id(lease.attempt_id());
    m.set_cell_id(cell);
    m.set_process(0);
    m.set_round(round);
    m.set_metric(metric);
    m.set_unit(unit);
    m.set_value(value);
    return m;
  };
  v1::ReportResponse response;
  ASSERT_TRUE(
      Report(
          with_bench,
          {record("ok-0", 0, "time_us", "us", 5), record("undeclared", 0, "speed", "1", 1),
           record("kernel-metric", 0, "segments", "1", 4),
           record("other-unit", 1, "time_us", "ms", 5), record("negative", 1, "time_us", "us", -5),
           record("share-over-one", 0, "hit_share", "1", 1.5)},
          {}, &response)
          .ok());
  EXPECT_EQ(response.acknowledged_uuids_size(), 1);
  ASSERT_EQ(response.refused_size(), 5);
  std::string reasons;
  for (const auto& r : response.refused()) reasons += r.uuid() + ": " + r.reason() + "\n";
  EXPECT_NE(reasons.find("undeclared: the command runner reports no metric named \"speed\""),
            std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("kernel-metric: the command runner reports no metric named"),
            std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("other-unit: metric time_us is reported in us"), std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("negative: time_us = -5 is out of range"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("share-over-one: hit_share = 1.5 is out of range"), std::string::npos)
      << reasons;
  // One of two required slots: not done.
  v1::FinishResponse finished;
  const grpc::Status early = Finish(with_bench, lease.attempt_id(), true, 1, &finished);
  EXPECT_EQ(early.error_code(), StatusCode::FAILED_PRECONDITION) << early.error_message();
  EXPECT_NE(early.error_message().find("slots of the design filled"), std::string::npos);
  // Across a restart the coordinator checks against the stored declarations, not memory; the
  // second slot then fills the design (the optional metric is not needed).
  StopCoordinator();
  StartCoordinator();
  ASSERT_TRUE(Report(with_bench,
                     {record("ok-1", 1, "time_us", "us", 6),
                      record("undeclared-after-restart", 1, "speed", "1", 1)},
                     {}, &response)
                  .ok());
  ASSERT_EQ(response.refused_size(), 1);
  EXPECT_EQ(response.refused(0).uuid(), "undeclared-after-restart");
  const grpc::Status done = Finish(with_bench, lease.attempt_id(), true, 2, &finished);
  ASSERT_TRUE(done.ok()) << done.error_message();
  EXPECT_TRUE(finished.accepted()) << finished.detail();
  EXPECT_EQ(
      QueryInt("SELECT COUNT(*) FROM valid_measurements WHERE run_id = " + std::to_string(run)), 2);
}

}  // namespace
}  // namespace ladder::coordinator
