// Tokens, TLS and authorization, exercised through real processes.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>

#include "fleet.h"
#include "process.h"

namespace ladder::testing {
namespace {

constexpr const char* kTinyMatrix =
    "name: tiny\nrunner: kernel\naxes: {depth: [64, 128]}\n"
    "fixed: {backend: cpu, preset: tiny, dtype: f32, repeats: 2, warmup: 0}\n";

TEST(Security, TokensGateAgentsAndAdminCalls) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  const std::string admin = MakeToken(dir, db, "admin", "admin.token");
  const std::string agent = MakeToken(dir, db, "agent", "agent.token");
  int port = 0;
  auto coordinator =
      StartCoordinator(dir, db, &port, {"--require-tokens", "--heartbeat-ms", "300"});
  ASSERT_GT(port, 0) << coordinator->Log();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("m.yaml"), kTinyMatrix);

  // No token: refused, with a message that says what to do.
  auto anonymous =
      RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--coordinator", address});
  EXPECT_NE(anonymous.exit_code, 0);
  EXPECT_NE(anonymous.err.find("requires an admin token"), std::string::npos) << anonymous.err;
  // An agent token cannot submit.
  auto wrong_role = RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--coordinator",
                                address, "--token-file", dir.File("agent.token")});
  EXPECT_NE(wrong_role.exit_code, 0);
  EXPECT_NE(wrong_role.err.find("needs an admin token"), std::string::npos) << wrong_role.err;
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM runs"), 0);

  // An agent without a token exits non-zero at once, without retrying.
  auto tokenless = StartAgent(dir, port, "tokenless");
  auto code = tokenless->Wait(std::chrono::seconds(20));
  ASSERT_TRUE(code.has_value()) << "an agent refused by the coordinator must not retry forever";
  EXPECT_EQ(*code, 3);
  EXPECT_NE(tokenless->Log().find("requires a join token"), std::string::npos) << tokenless->Log();
  // A forged token is refused the same way.
  WriteFile(dir.File("forged.token"), agent.substr(0, agent.size() - 4) + "beef\n");
  auto forged = StartAgent(dir, port, "forged", {"--token-file", dir.File("forged.token")});
  EXPECT_EQ(forged->Wait(std::chrono::seconds(20)), 3);
  EXPECT_NE(forged->Log().find("token refused"), std::string::npos) << forged->Log();

  // With the right tokens the run completes.
  auto worker = StartAgent(dir, port, "worker", {"--token-file", dir.File("agent.token")});
  auto submit = RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--wait", "--coordinator",
                            address, "--token-file", dir.File("admin.token")});
  ASSERT_EQ(submit.exit_code, 0) << submit.err << worker->Log();
  ExpectExactlyOnce(db, 1, 1);

  // Secrets are stored hashed and never logged.
  const std::string secret = agent.substr(16);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM tokens WHERE secret_hash LIKE '%" + secret + "%'"),
            0);
  EXPECT_EQ(coordinator->Log().find(secret), std::string::npos);
  EXPECT_EQ(worker->Log().find(secret), std::string::npos);

  // Token management through the coordinator; revocation bites on the next call.
  auto listed = RunCommand({LadderBinary(), "token", "list", "--coordinator", address,
                            "--token-file", dir.File("admin.token")});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find(agent.substr(7, 8)), std::string::npos) << listed.out;
  EXPECT_EQ(listed.out.find(secret), std::string::npos);
  auto revoke = RunCommand({LadderBinary(), "token", "revoke", admin.substr(7, 8), "--coordinator",
                            address, "--token-file", dir.File("admin.token")});
  ASSERT_EQ(revoke.exit_code, 0) << revoke.err;
  auto after = RunCommand({LadderBinary(), "status", "--coordinator", address, "--token-file",
                           dir.File("admin.token")});
  EXPECT_NE(after.exit_code, 0);
  EXPECT_NE(after.err.find("token refused"), std::string::npos) << after.err;
}

TEST(Security, RefusesPlaintextBeyondLoopback) {
  TempDir dir;
  auto result = RunCommand(
      {LadderBinary(), "coordinator", "--listen", "0.0.0.0:0", "--db", dir.File("r.db")});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("without TLS"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("--insecure"), std::string::npos) << result.err;
}

TEST(Security, AgentsAndClientsSpeakTls) {
  TempDir dir;
  // A self-signed certificate for 127.0.0.1.
  auto openssl =
      RunCommand({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                  dir.File("key.pem"), "-out", dir.File("cert.pem"), "-days", "1", "-subj",
                  "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"});
  ASSERT_EQ(openssl.exit_code, 0) << openssl.err;
  const std::string db = dir.File("results.db");
  MakeToken(dir, db, "admin", "admin.token");
  MakeToken(dir, db, "agent", "agent.token");
  int port = 0;
  auto coordinator = StartCoordinator(dir, db, &port,
                                      {"--require-tokens", "--tls-cert", dir.File("cert.pem"),
                                       "--tls-key", dir.File("key.pem"), "--heartbeat-ms", "300"});
  ASSERT_GT(port, 0) << coordinator->Log();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  WriteFile(dir.File("m.yaml"), kTinyMatrix);
  // A plaintext client cannot talk to a TLS coordinator.
  auto plaintext = RunCommand(
      {LadderBinary(), "status", "--coordinator", address, "--token-file", dir.File("admin.token")},
      std::chrono::seconds(60));
  EXPECT_NE(plaintext.exit_code, 0);
  auto worker =
      StartAgent(dir, port, "worker",
                 {"--token-file", dir.File("agent.token"), "--tls-ca", dir.File("cert.pem")});
  auto submit =
      RunCommand({LadderBinary(), "submit", dir.File("m.yaml"), "--wait", "--coordinator", address,
                  "--token-file", dir.File("admin.token"), "--tls-ca", dir.File("cert.pem")});
  ASSERT_EQ(submit.exit_code, 0) << submit.err << worker->Log() << coordinator->Log();
  ExpectExactlyOnce(db, 1, 1);
}

}  // namespace
}  // namespace ladder::testing
