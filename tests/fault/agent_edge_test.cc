// The agent at the edges of trust, with real processes: its session cannot be taken over, a
// spool full of another coordinator's results never stops it from working, and SIGTERM ends it
// in bounded time when its coordinator is gone.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "fleet.h"
#include "ladder/db/sqlite.h"
#include "ladder/v1/agent.grpc.pb.h"
#include "process.h"

namespace ladder::testing {
namespace {

constexpr const char* kTinyMatrix =
    "name: tiny\nrunner: kernel\naxes: {depth: [64, 128, 256]}\n"
    "fixed: {backend: cpu, preset: tiny, dtype: f32, repeats: 2, warmup: 0}\n"
    "replicates: {sessions: 1, processes: 1, rounds: 2}\n";

// Units of a few seconds each on two cores, so a signal lands mid-unit.
constexpr const char* kSlowMatrix =
    "name: slow\nrunner: kernel\naxes: {depth: [16384, 32768]}\n"
    "fixed: {backend: cpu, preset: tiny, dtype: f32, repeats: 20, warmup: 1}\n"
    "replicates: {sessions: 1, processes: 1, rounds: 30}\n";

TEST(AgentEdges, ASessionCannotBeTakenOverAndItsAgentFinishes) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  MakeToken(dir, db, "admin", "admin.token");
  // One agent token for the whole fleet, as docs/deploy.md hands it out: the attacker is
  // another holder of the victim's own join token.
  const std::string attacker_token = MakeToken(dir, db, "agent", "victim.token");
  int port = 0;
  auto coordinator = StartCoordinator(dir, db, &port, {"--require-tokens"});
  ASSERT_GT(port, 0) << coordinator->Log();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("m.yaml"), kTinyMatrix);
  auto submit = RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--coordinator", address,
                            "--token-file", dir.File("admin.token")});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  auto victim = StartAgent(dir, port, "victim", {"--token-file", dir.File("victim.token")});
  ASSERT_TRUE(WaitFor([&] { return !SessionOf(db, "victim").empty(); }, std::chrono::seconds(30)))
      << victim->Log();
  const std::string session = SessionOf(db, "victim");

  // The attacker registers the victim's session id with the fleet's token, with no nonce and
  // with one it made up: neither reopens a session that belongs to its credential.
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = v1::AgentService::NewStub(channel);
  for (const std::string nonce : {"", "made-up-nonce-0123456789abcdef"}) {
    v1::RegisterRequest request;
    request.set_session_id(session);
    request.set_join_token(attacker_token);
    request.set_registration_nonce(nonce);
    request.mutable_inventory()->set_hostname("attacker");
    request.mutable_inventory()->add_features("kernel");
    v1::RegisterResponse response;
    grpc::ClientContext context;
    auto status = stub->Register(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS) << status.error_message();
    EXPECT_TRUE(response.session_credential().empty());
  }
  EXPECT_EQ(QueryText(db, "SELECT hostname FROM sessions WHERE id = '" + session + "'"),
            QueryText(db, "SELECT hostname FROM sessions WHERE id = '" + session + "'"));
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM sessions WHERE hostname = 'attacker'"), 0);

  // The victim is not locked out: the run completes with its results only.
  auto watch = RunCommand({LadderBinary(), "watch", "1", "--coordinator", address, "--token-file",
                           dir.File("admin.token")},
                          std::chrono::seconds(120));
  ASSERT_EQ(watch.exit_code, 0) << watch.err << victim->Log();
  EXPECT_TRUE(victim->Running()) << victim->Log();
  ExpectExactlyOnce(db, 1, 2);
  EXPECT_EQ(
      QueryInt(db, "SELECT COUNT(*) FROM valid_measurements WHERE session_id != '" + session + "'"),
      0);
  victim->Signal(SIGTERM);
  EXPECT_EQ(victim->Wait(std::chrono::seconds(10)), 0) << victim->Log();
}

// Writes results of a session this coordinator never saw into a spool file, as an agent that
// once worked for another coordinator would have left them.
void PlantForeignResults(const std::string& spool_path, int count) {
  // Creates the spool's tables.
  auto status = RunCommand({LadderBinary(), "agent", "--spool", spool_path, "--spool-status"});
  ASSERT_EQ(status.exit_code, 2) << status.err;  // no spool yet: said so, nothing created
  auto db = db::Database::Open(spool_path, db::OpenMode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)
                  ->Exec(R"sql(
    CREATE TABLE IF NOT EXISTS results (
      seq INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, session_id TEXT NOT NULL,
      attempt_id INTEGER NOT NULL, is_evidence INTEGER NOT NULL, payload BLOB NOT NULL) STRICT;
  )sql")
                  .ok());
  for (int i = 0; i < count; ++i) {
    v1::MeasurementRecord m;
    m.set_uuid("foreign-" + std::to_string(i));
    m.set_attempt_id(7);
    m.set_cell_id(3);
    m.set_round(i);
    m.set_metric("time_us");
    m.set_value(1.5);
    m.set_unit("us");
    auto insert = (*db)->Prepare(
        "INSERT INTO results(uuid, session_id, attempt_id, is_evidence, payload) "
        "VALUES (?1, 'f0f0f0f0-another-coordinators-session', 7, 0, ?2)");
    ASSERT_TRUE(insert.ok());
    ASSERT_TRUE(insert->Bind(1, m.uuid()).BindBlob(2, m.SerializeAsString()).Run().ok());
  }
}

TEST(AgentEdges, AnotherCoordinatorsResultsInTheSpoolNeverStopTheAgent) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  const std::string spool = dir.File("returning-spool.db");
  PlantForeignResults(spool, 5);
  int port = 0;
  auto coordinator = StartCoordinator(dir, db, &port, {"--heartbeat-ms", "300"});
  ASSERT_GT(port, 0) << coordinator->Log();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("m.yaml"), kTinyMatrix);
  auto agent = StartAgent(dir, port, "returning");  // spool: returning-spool.db
  auto submit =
      RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--wait", "--coordinator", address},
                 std::chrono::seconds(120));
  ASSERT_EQ(submit.exit_code, 0) << submit.err << agent->Log();
  ExpectExactlyOnce(db, 1, 2);
  // The foreign results stay in the spool, said once in the log and by --spool-status.
  const std::string log = agent->Log();
  size_t mentions = 0;
  for (size_t at = log.find("cannot place results"); at != std::string::npos;
       at = log.find("cannot place results", at + 1)) {
    ++mentions;
  }
  EXPECT_EQ(mentions, 1u) << log;
  agent->Signal(SIGTERM);
  EXPECT_EQ(agent->Wait(std::chrono::seconds(10)), 0) << agent->Log();
  auto status = RunCommand({LadderBinary(), "agent", "--spool", spool, "--spool-status", "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  auto backlog = nlohmann::json::parse(status.out);
  ASSERT_EQ(backlog.size(), 1u) << status.out;
  EXPECT_EQ(backlog[0]["session_id"], "f0f0f0f0-another-coordinators-session");
  EXPECT_EQ(backlog[0]["results"], 5);
}

TEST(AgentEdges, SigtermEndsAnAgentWhoseCoordinatorIsGoneWithinTenSeconds) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  const std::string spool = dir.File("orphan-spool.db");
  int port = 0;
  auto coordinator = StartCoordinator(dir, db, &port, {"--heartbeat-ms", "300"});
  ASSERT_GT(port, 0) << coordinator->Log();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("m.yaml"), kSlowMatrix);
  auto agent = StartAgent(dir, port, "orphan");
  auto submit =
      RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--coordinator", address});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  ASSERT_TRUE(WaitFor([&] { return QueryInt(db, "SELECT COUNT(*) FROM measurements") > 0; },
                      std::chrono::seconds(60)))
      << agent->Log();
  coordinator->Signal(SIGKILL);
  coordinator->Wait(std::chrono::seconds(5));
  // The agent keeps measuring into its spool with nobody to report to.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto start = std::chrono::steady_clock::now();
  agent->Signal(SIGTERM);
  auto code = agent->Wait(std::chrono::seconds(15));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(code.has_value()) << "still running 15 s after SIGTERM\n" << agent->Log();
  EXPECT_LE(took, 10.0) << agent->Log();
  auto status = RunCommand({LadderBinary(), "agent", "--spool", spool, "--spool-status", "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  auto backlog = nlohmann::json::parse(status.out);
  ASSERT_EQ(backlog.size(), 1u) << status.out << agent->Log();
  EXPECT_GT(backlog[0]["results"].get<int>(), 0) << "the undelivered results were lost";
}

}  // namespace
}  // namespace ladder::testing
