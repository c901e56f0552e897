// The web pages and /metrics as people use them: a real coordinator process with --http, real
// agent processes on loopback, a real SQLite file; the pages' JSON and the metrics read over
// HTTP and checked against the database and `ladder query`.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "fleet.h"
#include "process.h"

namespace ladder::testing {
namespace {

// The address a coordinator printed for `what` ("web pages" or "metrics"), once it has.
std::string PrintedUrl(ChildProcess& coordinator, const std::string& what) {
  const std::regex line(what + ": (https?://[^ \n]+/)");
  for (int i = 0; i < 6000; ++i) {
    std::smatch m;
    const std::string log = coordinator.Log();
    if (std::regex_search(log, m, line)) return m[1];
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "the coordinator never printed its " << what << " address:\n"
                << coordinator.Log();
  return "";
}

struct Url {
  std::string scheme_host_port;
  explicit Url(const std::string& url) : scheme_host_port(url.substr(0, url.size() - 1)) {}
};

// Prometheus text format, the subset ladder writes: "name{labels} value" per line.
std::map<std::string, double> ParseSamples(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

TEST(Web, ThePagesFollowARunAndAgreeWithTheDatabase) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  int port = 0;
  auto coordinator = StartCoordinator(dir, db, &port, {"--http", "0", "--heartbeat-ms", "300"});
  ASSERT_GT(port, 0) << coordinator->Log();
  const std::string url = PrintedUrl(*coordinator, "web pages");
  ASSERT_FALSE(url.empty());
  httplib::Client web(Url(url).scheme_host_port);

  // The pages answer before anything has run: no runs, no sessions.
  auto empty = web.Get("/api/runs");
  ASSERT_TRUE(empty);
  ASSERT_EQ(empty->status, 200) << empty->body;
  EXPECT_TRUE(nlohmann::json::parse(empty->body).value("runs", nlohmann::json::array()).empty());
  for (const char* page : {"/", "/fleet", "/runs/1"}) {
    auto res = web.Get(page);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << page;
    EXPECT_NE(res->get_header_value("Content-Type").find("text/html"), std::string::npos);
  }

  auto a = StartAgent(dir, port, "a");
  auto b = StartAgent(dir, port, "b");
  auto c = StartAgent(dir, port, "c");
  const std::string address = "127.0.0.1:" + std::to_string(port);
  auto submit =
      RunCommand({LadderBinary(), "submit", std::string(LADDER_EXAMPLES_DIR) + "/demo-cpu.yaml",
                  "--coordinator", address});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;

  // Follow the run as the page does until it is done: progress only moves forward.
  int64_t last_units_done = -1;
  std::string state;
  for (int i = 0; i < 60000 && state != "done"; ++i) {
    auto res = web.Get("/api/runs/1");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const auto run = nlohmann::json::parse(res->body);
    state = run.at("state").get<std::string>();
    const int64_t done = std::stoll(run.at("units_done").get<std::string>());
    EXPECT_GE(done, last_units_done);
    last_units_done = done;
    if (state != "done") std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(state, "done") << coordinator->Log();
  EXPECT_EQ(last_units_done, 18);
  auto run = nlohmann::json::parse(web.Get("/api/runs/1")->body);
  EXPECT_EQ(run.at("cells_done"), "12");
  EXPECT_EQ(std::stoll(run.at("measurements").get<std::string>()),
            QueryInt(db, "SELECT COUNT(*) FROM measurements WHERE run_id = 1"));

  // The results page is the report library's, with every cell `ladder query` shows, and no
  // provisional banner once the run is done.
  auto report = web.Get("/runs/1/report");
  ASSERT_TRUE(report);
  ASSERT_EQ(report->status, 200) << report->body;
  EXPECT_EQ(report->body.find("id=\"provisional\""), std::string::npos);
  auto query = RunCommand({LadderBinary(), "query", "1", "--db", db, "--json"});
  ASSERT_EQ(query.exit_code, 0) << query.err;
  for (const auto& row : nlohmann::json::parse(query.out).at("rows")) {
    const std::string depth = std::to_string(row["group"]["depth"].get<int>());
    EXPECT_NE(report->body.find("depth=" + depth), std::string::npos) << depth;
  }
  // The matrix's history page: one run so far, standing in as its own baseline, one point per
  // cell; an unknown matrix or cell is refused with the reason.
  auto history = web.Get("/matrices/demo-cpu");
  ASSERT_TRUE(history);
  ASSERT_EQ(history->status, 200) << history->body;
  EXPECT_NE(history->body.find("History of demo-cpu"), std::string::npos);
  const std::regex point("<circle class=\"history-point baseline[^>]* data-run=\"1\"");
  EXPECT_EQ(std::distance(std::sregex_iterator(history->body.begin(), history->body.end(), point),
                          std::sregex_iterator()),
            static_cast<std::ptrdiff_t>(12))
      << history->body;
  EXPECT_NE(history->get_header_value("Content-Security-Policy").find("default-src 'none'"),
            std::string::npos);
  auto one_cell = web.Get("/matrices/demo-cpu?cells=depth=4096,path=3d");
  ASSERT_TRUE(one_cell);
  ASSERT_EQ(one_cell->status, 200) << one_cell->body;
  const std::regex chart("<svg class=\"history\"[^>]* data-cell=\"depth=4096,[^\"]*path=3d\"");
  EXPECT_EQ(std::distance(std::sregex_iterator(one_cell->body.begin(), one_cell->body.end(), chart),
                          std::sregex_iterator()),
            static_cast<std::ptrdiff_t>(2))  // query_rows 1 and 2
      << one_cell->body;
  EXPECT_EQ(one_cell->body.find("depth=256"), std::string::npos);
  auto no_matrix = web.Get("/matrices/no-such-matrix");
  ASSERT_TRUE(no_matrix);
  EXPECT_EQ(no_matrix->status, 404) << no_matrix->body;
  auto no_cell = web.Get("/matrices/demo-cpu?cells=depth=3");
  ASSERT_TRUE(no_cell);
  EXPECT_EQ(no_cell->status, 400) << no_cell->body;

  auto unknown = web.Get("/runs/99/report");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404) << unknown->body;
  auto compared = web.Get("/compare?a=1&b=x");
  ASSERT_TRUE(compared);
  EXPECT_EQ(compared->status, 400) << compared->body;

  // The fleet: every session, with the attempts each ran.
  auto sessions = nlohmann::json::parse(web.Get("/api/sessions")->body).at("sessions");
  ASSERT_EQ(sessions.size(), 3u);
  int64_t attempts = 0;
  for (const auto& s : sessions) {
    auto listed = web.Get("/api/sessions/" + s.at("session_id").get<std::string>() + "/attempts");
    ASSERT_TRUE(listed);
    ASSERT_EQ(listed->status, 200) << listed->body;
    const auto rows = nlohmann::json::parse(listed->body);
    for (const auto& a : rows) EXPECT_EQ(a.at("run_id"), 1);
    attempts += static_cast<int64_t>(rows.size());
    EXPECT_EQ(std::stoll(s.at("attempts_done").get<std::string>()),
              static_cast<int64_t>(rows.size()));
  }
  EXPECT_EQ(attempts, QueryInt(db, "SELECT COUNT(*) FROM attempts"));

  // /metrics: its counts are the database's.
  auto metrics = web.Get("/metrics");
  ASSERT_TRUE(metrics);
  ASSERT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
  const auto samples = ParseSamples(metrics->body);
  EXPECT_EQ(samples.at("ladder_records_stored_total{kind=\"measurement\"}"),
            QueryInt(db, "SELECT COUNT(*) FROM measurements"));
  EXPECT_EQ(samples.at("ladder_records_stored_total{kind=\"evidence\"}"),
            QueryInt(db, "SELECT COUNT(*) FROM evidence"));
  EXPECT_EQ(samples.at("ladder_rpcs_total{method=\"Register\",code=\"OK\"}"), 3);
  EXPECT_EQ(samples.at("ladder_rpcs_total{method=\"Submit\",code=\"OK\"}"), 1);
  EXPECT_EQ(samples.at("ladder_sessions{state=\"active\"}"), 3);
  EXPECT_EQ(samples.at("ladder_runs{state=\"done\"}"), 1);
  EXPECT_EQ(samples.count("ladder_units{state=\"queued\"}"), 0u);  // no open run
  // The agents' spool backlog, from their heartbeats: a count, never negative.
  EXPECT_GE(samples.at("ladder_agent_spool_records"), 0);
  EXPECT_GE(samples.at("ladder_agent_spool_records"), samples.at("ladder_agent_spool_records_max"));
  EXPECT_EQ(samples.at("ladder_rpc_duration_seconds_count{method=\"Lease\"}"),
            samples.at("ladder_rpcs_total{method=\"Lease\",code=\"OK\"}"));

  // And it parses as Prometheus' own parser reads it (Debian's python3-prometheus-client).
  WriteFile(dir.File("metrics.txt"), metrics->body);
  auto parsed = RunCommand(
      {"/usr/bin/python3", "-c",
       "import sys\nfrom prometheus_client.parser import text_string_to_metric_families\n"
       "families = list(text_string_to_metric_families(open(sys.argv[1]).read()))\n"
       "print(int(sum(s.value for f in families for s in f.samples\n"
       "              if s.name == 'ladder_records_stored_total'\n"
       "              and s.labels.get('kind') == 'measurement')))",
       dir.File("metrics.txt")});
  if (parsed.err.find("No module named 'prometheus_client'") != std::string::npos) {
    GTEST_SKIP() << "python3-prometheus-client not installed (scripts/setup-debian.sh)";
  }
  ASSERT_EQ(parsed.exit_code, 0) << parsed.err;
  EXPECT_EQ(LastLine(parsed.out), std::to_string(QueryInt(db, "SELECT COUNT(*) FROM measurements")))
      << parsed.out;
}

TEST(Web, BeyondLoopbackThePagesNeedTlsAndAnAdminToken) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  // Plaintext beyond loopback is refused before anything serves.
  auto refused = RunCommand({LadderBinary(), "coordinator", "--db", db, "--listen", "127.0.0.1:0",
                             "--http", "0.0.0.0:0"});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("--tls-cert"), std::string::npos) << refused.err;

  auto openssl =
      RunCommand({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                  dir.File("key.pem"), "-out", dir.File("cert.pem"), "-days", "1", "-subj",
                  "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"});
  ASSERT_EQ(openssl.exit_code, 0) << openssl.err;
  const std::string admin = MakeToken(dir, db, "admin", "admin.token");
  const std::string agent = MakeToken(dir, db, "agent", "agent.token");
  int port = 0;
  auto coordinator =
      StartCoordinator(dir, db, &port,
                       {"--tls-cert", dir.File("cert.pem"), "--tls-key", dir.File("key.pem"),
                        "--http", "0.0.0.0:0", "--require-tokens"});
  ASSERT_GT(port, 0) << coordinator->Log();
  std::string url = PrintedUrl(*coordinator, "web pages");
  ASSERT_EQ(url.rfind("https://", 0), 0u) << url;
  httplib::SSLClient web("127.0.0.1", std::stoi(url.substr(url.rfind(':') + 1)));
  web.set_ca_cert_path(dir.File("cert.pem").c_str());
  web.enable_server_certificate_verification(true);

  for (const char* path : {"/", "/api/runs", "/metrics", "/runs/1/report", "/matrices/m"}) {
    auto res = web.Get(path);
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 401) << path << ": " << res->body;
  }
  auto wrong = web.Get("/api/runs", {{"Authorization", "Bearer " + agent}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 403) << wrong->body;
  auto garbage = web.Get("/api/runs", {{"Authorization", "Bearer not-a-token"}});
  ASSERT_TRUE(garbage);
  EXPECT_EQ(garbage->status, 401) << garbage->body;
  auto bearer = web.Get("/api/runs", {{"Authorization", "Bearer " + admin}});
  ASSERT_TRUE(bearer);
  EXPECT_EQ(bearer->status, 200) << bearer->body;
  // ?token= sets an HttpOnly, Secure cookie and sends the browser back without it in the URL.
  auto login = web.Get("/fleet?token=" + admin);
  ASSERT_TRUE(login);
  EXPECT_EQ(login->status, 302);
  EXPECT_EQ(login->get_header_value("Location"), "/fleet");
  const std::string cookie = login->get_header_value("Set-Cookie");
  EXPECT_NE(cookie.find("HttpOnly"), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("Secure"), std::string::npos) << cookie;
  auto with_cookie = web.Get("/fleet", {{"Cookie", cookie.substr(0, cookie.find(';'))}});
  ASSERT_TRUE(with_cookie);
  EXPECT_EQ(with_cookie->status, 200);
  auto bad_login = web.Get("/fleet?token=" + agent);
  ASSERT_TRUE(bad_login);
  EXPECT_EQ(bad_login->status, 403);
  EXPECT_TRUE(bad_login->get_header_value("Set-Cookie").empty());
}

}  // namespace
}  // namespace ladder::testing
