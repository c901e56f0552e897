// `ladder coordinator`, `ladder agent` and `ladder local`.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "client.h"
#include "commands.h"
#include "exit_codes.h"
#include "format.h"
#include "ladder/agent/agent.h"
#include "ladder/agent/cell_check.h"
#include "ladder/common/time.h"
#include "ladder/coordinator/coordinator.h"
#include "ladder/matrices/matrix.h"
#include "ladder/web/web.h"

namespace ladder::cli {
namespace {

struct CoordinatorFlags {
  coordinator::CoordinatorOptions options;
  std::string port_file;
  std::string http;     // web pages and /metrics
  std::string metrics;  // /metrics alone
};

// The web pages (or /metrics alone) beside a started coordinator, with its TLS certificate.
std::unique_ptr<web::WebServer> StartWeb(const std::string& listen, bool metrics_only,
                                         const coordinator::CoordinatorOptions& options,
                                         coordinator::Coordinator* server) {
  web::WebOptions web_options;
  web_options.listen = listen;
  web_options.metrics_only = metrics_only;
  web_options.tls_cert_file = options.tls_cert_file;
  web_options.tls_key_file = options.tls_key_file;
  web_options.insecure = options.insecure;
  auto started = web::WebServer::Start(web_options, server);
  if (!started.ok()) {
    Fail(started.status(), started.status().code() == absl::StatusCode::kInvalidArgument
                               ? ExitCode::kBadInput
                               : ExitCode::kError);
  }
  return std::move(*started);
}

void RunCoordinator(const CoordinatorFlags& flags) {
  std::unique_ptr<coordinator::Coordinator> server;
  std::atomic<bool> stop_requested{false};
  SignalWatcher signals([&](int signal) {
    spdlog::info("signal {}: shutting down", signal);
    stop_requested = true;
    if (server) server->Shutdown();
  });
  coordinator::CoordinatorOptions options = flags.options;
  // Submit refuses exactly what `ladder validate` refuses.
  options.scheduler.runners = &agent::RunnerSchemasWithChecks();
  auto started = coordinator::Coordinator::Start(options);
  if (!started.ok()) Fail(started.status());
  server = std::move(*started);
  std::unique_ptr<web::WebServer> pages, metrics;
  if (!flags.http.empty()) {
    pages = StartWeb(flags.http, false, options, server.get());
    std::cerr << "web pages: " << pages->url() << "\n";
  }
  if (!flags.metrics.empty()) {
    metrics = StartWeb(flags.metrics, true, options, server.get());
    std::cerr << "metrics: " << metrics->url() << "metrics\n";
  }
  if (!flags.port_file.empty()) {
    // Written atomically (rename), so a reader never sees a partial number.
    const std::string tmp = flags.port_file + ".tmp";
    std::ofstream(tmp) << server->port() << "\n";
    std::filesystem::rename(tmp, flags.port_file);
  }
  if (stop_requested) server->Shutdown();
  server->Wait();
}

struct AgentFlags {
  agent::AgentOptions options;
  std::vector<std::string> labels;
  std::string grace = "release";
  bool spool_status = false;
  bool json = false;
};

void RunAgent(AgentFlags flags) {
  if (flags.spool_status) {
    auto text = agent::DescribeSpool(
        flags.options.spool_path.empty() ? "ladder-spool.db" : flags.options.spool_path,
        flags.json);
    if (!text.ok()) Fail(text.status(), ExitCode::kBadInput);
    std::cout << *text;
    return;
  }
  for (const auto& label : flags.labels) {
    auto eq = label.find('=');
    if (eq == std::string::npos || eq == 0) {
      Fail("--label: expected KEY=VALUE, got '" + label + "'", ExitCode::kBadInput);
    }
    flags.options.labels[label.substr(0, eq)] = label.substr(eq + 1);
  }
  std::unique_ptr<agent::Agent> instance;
  std::atomic<int> signals_seen{0};
  SignalWatcher signals([&](int signal) {
    const int count = ++signals_seen;
    const bool finish = flags.grace == "finish" && count == 1;
    spdlog::info("signal {}: {}", signal,
                 finish ? "finishing the current unit, then leaving (signal again to release it)"
                        : "releasing the current unit and leaving");
    if (instance) {
      instance->Stop(finish ? agent::StopMode::kFinishUnit : agent::StopMode::kRelease);
    }
  });
  auto created = agent::Agent::Create(flags.options);
  if (!created.ok()) {
    // A bad flag (--gpus naming a device this host lacks) is the caller's to fix: exit 2.
    Fail(created.status(), created.status().code() == absl::StatusCode::kInvalidArgument
                               ? ExitCode::kBadInput
                               : ExitCode::kError);
  }
  instance = std::move(*created);
  if (signals_seen > 0) instance->Stop(agent::StopMode::kRelease);
  if (auto status = instance->Run(); !status.ok()) {
    const bool refused = status.code() == absl::StatusCode::kUnauthenticated ||
                         status.code() == absl::StatusCode::kPermissionDenied;
    Fail(status, refused ? ExitCode::kRefused : ExitCode::kError);
  }
}

struct LocalFlags {
  std::string matrix_path;
  int agents = 0;  // 0: as many sessions as the matrix may use, at least 2
  std::string db = "ladder.db";
  std::string by;
  std::string metric;
  bool json = false;
  int64_t max_cells = 0;
  std::string engine_logs;  // each engine's full log goes here (one file per engine process)
  std::string http;         // serve the web pages here while the run goes
  std::vector<std::string> benches;      // --bench NAME=PATH, for every agent
  std::vector<std::string> bench_files;  // --bench-file FILE
  TagFlags tags;                         // --tag KEY=VALUE, --note TEXT
};

std::string ReadFileOrFail(const std::string& path) {
  std::ifstream in(path);
  if (!in) Fail("cannot read " + path + ": " + std::strerror(errno), ExitCode::kBadInput);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Returns once `count` sessions that began after `since_ms` are active on the coordinator, less
// the agents whose loop has already ended (one that failed to register never will), or when
// interrupted.
void WaitForLocalAgents(AdminClient& client, int count, int64_t since_ms,
                        const std::atomic<int>& ended, const std::atomic<bool>& interrupted) {
  while (!interrupted.load()) {
    auto sessions = client.ListSessions();
    if (!sessions.ok()) return;  // Submit will say what is wrong with the coordinator
    int active = 0;
    for (const auto& s : sessions->sessions()) {
      if (s.state() == "active" && s.started_at_ms() >= since_ms) ++active;
    }
    if (active >= count - ended.load()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void RunLocal(LocalFlags flags) {
  const db::RunTags tags = flags.tags.Parse();  // refused before anything starts
  const std::string yaml =
      flags.matrix_path.empty() ? EmbeddedDemoMatrix() : ReadFileOrFail(flags.matrix_path);
  const std::string filename =
      flags.matrix_path.empty() ? "demo-cpu.yaml (built in)" : flags.matrix_path;
  std::vector<std::string> benches_needed;  // runner: command: the programs every agent must have
  {
    matrices::ParseOptions parse_options;
    if (flags.max_cells > 0) parse_options.max_cells = flags.max_cells;
    auto matrix = matrices::ParseMatrix(yaml, filename, parse_options);
    if (!matrix.ok()) Fail(matrix.status(), ExitCode::kBadInput);
    if (matrix->command) {
      auto names = matrices::BenchNames(*matrix);
      if (!names.ok()) Fail(names.status(), ExitCode::kBadInput);
      benches_needed = *names;
    }
    // A session runs a cell group once, so `precision` can only add sessions up to its budget
    // when that many agents exist.
    if (flags.agents == 0) {
      flags.agents = std::max(2, matrix->replicates.sessions);
      if (matrix->precision) flags.agents = std::max(flags.agents, matrix->precision->max_sessions);
    }
    if (matrix->replicates.sessions > flags.agents) {
      Fail("matrix asks for " + std::to_string(matrix->replicates.sessions) +
               " distinct sessions per cell but --agents is " + std::to_string(flags.agents) +
               "; raise --agents",
           ExitCode::kBadInput);
    }
  }
  if (flags.agents < 1 || flags.agents > 64)
    Fail("--agents: expected 1 to 64", ExitCode::kBadInput);
  if (!flags.engine_logs.empty()) {
    std::error_code error;
    std::filesystem::create_directories(flags.engine_logs, error);
    if (error) {
      Fail("--engine-logs: cannot create " + flags.engine_logs + ": " + error.message(),
           ExitCode::kBadInput);
    }
  }
  // The progress bar says what the logs would; keep only warnings unless asked otherwise.
  if (spdlog::get_level() == spdlog::level::info) spdlog::set_level(spdlog::level::warn);

  coordinator::CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = flags.db;
  options.heartbeat_interval_ms = 1000;
  options.scheduler.lease_ms = 30000;
  options.scheduler.runners = &agent::RunnerSchemasWithChecks();
  std::atomic<bool> interrupted{false};
  std::vector<std::unique_ptr<agent::Agent>> agents;
  std::unique_ptr<coordinator::Coordinator> server;
  std::mutex mu;
  SignalWatcher signals([&](int) {
    interrupted = true;
    std::lock_guard lock(mu);
    for (auto& a : agents) a->Stop(agent::StopMode::kRelease);
  });
  auto started = coordinator::Coordinator::Start(options);
  if (!started.ok()) Fail(started.status());
  server = std::move(*started);
  const std::string address = server->address();
  if (!flags.json) std::cerr << "coordinator on " << address << ", results in " << flags.db << "\n";
  std::unique_ptr<web::WebServer> pages;
  if (!flags.http.empty()) {
    pages = StartWeb(flags.http, false, options, server.get());
    std::cerr << "watch it at " << pages->url() << "\n";
  }

  const std::filesystem::path spool_dir =
      std::filesystem::temp_directory_path() / ("ladder-local-" + std::to_string(getpid()));
  std::filesystem::create_directories(spool_dir);
  std::vector<std::thread> agent_threads;
  std::atomic<int> agents_ended{0};
  const int64_t agents_started_ms = UnixNowMs();
  {
    std::lock_guard lock(mu);
    for (int i = 0; i < flags.agents; ++i) {
      agent::AgentOptions agent_options;
      agent_options.coordinator = address;
      agent_options.spool_path = (spool_dir / ("agent-" + std::to_string(i) + ".db")).string();
      agent_options.lease_wait_ms = 1000;
      agent_options.labels["local_agent"] = std::to_string(i);
      agent_options.engine_log_dir = flags.engine_logs;
      agent_options.benches = flags.benches;
      agent_options.bench_files = flags.bench_files;
      auto created = agent::Agent::Create(agent_options);
      if (!created.ok()) {
        Fail(created.status(), created.status().code() == absl::StatusCode::kInvalidArgument
                                   ? ExitCode::kBadInput
                                   : ExitCode::kError);
      }
      agents.push_back(std::move(*created));
    }
    for (const std::string& bench_needed : benches_needed) {
      const auto names = agents.front()->bench_names();
      if (std::find(names.begin(), names.end(), bench_needed) == names.end()) {
        std::string known;
        for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
        Fail("the matrix runs bench \"" + bench_needed + "\" but its agents have no bench \"" +
                 bench_needed + "\" (registered: " + (known.empty() ? "none" : known) +
                 "); give --bench " + bench_needed + "=PATH",
             ExitCode::kBadInput);
      }
    }
    for (auto& a : agents) {
      agent_threads.emplace_back([raw = a.get(), &agents_ended] {
        if (auto s = raw->Run(); !s.ok()) spdlog::error("agent: {}", std::string(s.message()));
        ++agents_ended;
      });
    }
  }

  AdminClient client(address);
  // Submitted before its own agents have registered, the run would be told "0 agents connected,
  // none match" about agents a moment away.
  WaitForLocalAgents(client, flags.agents, agents_started_ms, agents_ended, interrupted);
  auto submitted = client.Submit(yaml, filename, flags.max_cells, tags);
  ExitCode exit_code = ExitCode::kOk;
  if (!submitted.ok()) {
    std::cerr << "error: " << submitted.status().message() << "\n";
    exit_code = ExitCode::kBadInput;
  } else {
    const int64_t run_id = submitted->run_id();
    if (!flags.json) {
      std::cerr << "run " << run_id << ": " << submitted->cell_count() << " cells in "
                << submitted->unit_count() << " units on " << flags.agents << " agents\n";
    }
    auto final_summary = WatchUntilDone(client, run_id, /*quiet=*/flags.json, &interrupted);
    if (!final_summary.ok()) {
      std::cerr << "error: " << final_summary.status().message() << "\n";
      exit_code = ExitCode::kError;
    } else {
      std::vector<std::string> by;
      if (!flags.by.empty()) by = SplitCsv(flags.by);
      auto result = client.Query(run_id, by, flags.metric);
      if (!result.ok()) {
        std::cerr << "error: " << result.status().message() << "\n";
        exit_code = ExitCode::kError;
      } else if (flags.json) {
        std::cout << result->dump(2) << "\n";
      } else {
        std::cout << RenderQueryTable(*result);
        std::cout << "\nrun " << run_id << " " << final_summary->state() << ": "
                  << final_summary->cells_done() << " of " << final_summary->cells_total()
                  << " cells done, " << final_summary->cells_failed() << " failed, "
                  << final_summary->measurements() << " measurements in " << flags.db << "\n";
        std::cout << "next: ladder query " << run_id << " --db " << flags.db
                  << " --by <axes>   |   sqlite3 " << flags.db
                  << " 'SELECT * FROM valid_measurements LIMIT 5'\n";
      }
      if (final_summary->cells_failed() > 0) exit_code = ExitCode::kCellsFailed;
    }
  }
  if (pages && submitted.ok() && !interrupted) {
    // The reason to pass --http: the finished run's pages stay up to be read.
    std::cerr << "the pages stay up at " << pages->url() << " until Ctrl-C\n";
    while (!interrupted) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    interrupted = false;  // the run itself finished: exit with its status
  }
  {
    std::lock_guard lock(mu);
    for (auto& a : agents) a->Stop(agent::StopMode::kRelease);
  }
  for (auto& t : agent_threads) t.join();
  pages.reset();
  server->Shutdown();
  std::error_code ignored;
  std::filesystem::remove_all(spool_dir, ignored);
  if (interrupted) exit_code = ExitCode::kInterrupted;
  if (exit_code != ExitCode::kOk) ExitWith(exit_code);
}

}  // namespace

void AddServerCommands(CLI::App& app) {
  {
    auto flags = std::make_shared<CoordinatorFlags>();
    auto* cmd = app.add_subcommand(
        "coordinator",
        "Serve the fleet: schedule matrix cells onto agents and store every result.\n"
        "The coordinator is the only writer of the results database. Kill it at any time and "
        "start it again on the same --db: runs resume and no measurement is lost or "
        "duplicated.");
    cmd->add_option("--listen", flags->options.listen, "HOST:PORT to serve gRPC on")
        ->capture_default_str();
    cmd->add_option("--db", flags->options.db_path, "results database (SQLite, created if absent)")
        ->capture_default_str();
    cmd->add_option("--lease-ms", flags->options.scheduler.lease_ms,
                    "a unit returns to the queue when its agent is silent this long")
        ->capture_default_str();
    cmd->add_option("--heartbeat-ms", flags->options.heartbeat_interval_ms,
                    "how often agents check in")
        ->capture_default_str();
    cmd->add_option("--max-cells", flags->options.scheduler.max_cells,
                    "default cap on cells per submitted matrix")
        ->capture_default_str();
    cmd->add_option("--tls-cert", flags->options.tls_cert_file, "PEM server certificate chain");
    cmd->add_option("--tls-key", flags->options.tls_key_file, "PEM private key");
    cmd->add_option("--tls-client-ca", flags->options.tls_client_ca_file,
                    "PEM CA: require client certificates signed by it (mutual TLS)");
    cmd->add_flag("--insecure", flags->options.insecure,
                  "allow plaintext on a non-loopback address (only behind a VPN or tunnel)");
    cmd->add_flag("--require-tokens", flags->options.require_tokens,
                  "require tokens on loopback too (always on beyond loopback); create the first "
                  "admin token with `ladder token create --role admin --db FILE`");
    cmd->add_option("--session-rate", flags->options.session_calls_per_second,
                    "per-session calls per second before RESOURCE_EXHAUSTED (0: unlimited)")
        ->capture_default_str();
    cmd->add_option("--fault-db-growth-pages", flags->options.fault_db_growth_pages,
                    "testing only: behave as if the disk fills after this many more pages")
        ->group("");
    cmd->add_option("--port-file", flags->port_file,
                    "write the bound port to this file once serving (with --listen HOST:0)");
    cmd->add_option("--http", flags->http,
                    "serve the web pages (runs, results, fleet) and /metrics on HOST:PORT, or "
                    "PORT for 127.0.0.1:PORT; beyond loopback with --tls-cert and an admin "
                    "token (open URL?token=TOKEN once)");
    cmd->add_option("--metrics", flags->metrics,
                    "serve Prometheus' /metrics alone on HOST:PORT or PORT (same rules as --http)");
    cmd->callback([flags] { RunCoordinator(*flags); });
  }
  {
    auto flags = std::make_shared<AgentFlags>();
    flags->options.coordinator = DefaultCoordinator();
    auto* cmd = app.add_subcommand(
        "agent",
        "Join a coordinator and run the units it leases (one agent per host).\n"
        "Every result is written to the local spool before it is reported and stays there "
        "until the coordinator acknowledges it, so an unreachable coordinator costs nothing: "
        "the agent reports later. SIGTERM releases the current unit (--grace finish: finishes "
        "it first).");
    cmd->add_option("--coordinator", flags->options.coordinator,
                    "coordinator HOST:PORT (default: $LADDER_COORDINATOR or 127.0.0.1:7400)")
        ->capture_default_str();
    cmd->add_option("--spool", flags->options.spool_path,
                    "spool database (default ./ladder-spool.db); keep it on a disk that "
                    "survives an agent restart");
    cmd->add_option("--label", flags->labels, "KEY=VALUE stored with this session (repeatable)");
    cmd->add_option("--grace", flags->grace, "on SIGTERM: release the unit, or finish it first")
        ->check(CLI::IsMember({"release", "finish"}))
        ->capture_default_str();
    cmd->add_option("--grace-seconds", flags->options.grace_seconds,
                    "with --grace finish: seconds from the signal to finish the unit and have "
                    "everything it produced acknowledged before leaving (a preempted VM's notice: "
                    "GCP 30, AWS 120); what is not delivered by then stays in the spool")
        ->check(CLI::Range(1, 3600))
        ->capture_default_str();
    cmd->add_option("--max-units", flags->options.units_limit, "exit after this many units");
    cmd->add_option("--token-file", flags->options.token_file,
                    "file holding the join token (`ladder token create --role agent`)");
    cmd->add_flag("--tls", flags->options.tls, "connect with TLS using the system's CA roots");
    cmd->add_option("--tls-ca", flags->options.tls_ca_file,
                    "PEM CA to verify the coordinator with (implies --tls)");
    cmd->add_option("--tls-cert", flags->options.tls_cert_file, "client certificate (mutual TLS)");
    cmd->add_option("--tls-key", flags->options.tls_key_file, "client key (mutual TLS)");
    cmd->add_option("--engine-logs", flags->options.engine_log_dir,
                    "keep each engine process's full log in this folder");
    cmd->add_option("--bench", flags->options.benches,
                    "NAME=PATH: a program `runner: command` cells may run under NAME "
                    "(repeatable). Only registered programs run; a matrix names one and gives its "
                    "arguments (docs/command-runner.md). Advertised as feature bench:NAME");
    cmd->add_option("--bench-file", flags->options.bench_files,
                    "a file of NAME=PATH lines (# comments), as --bench");
    cmd->add_option("--gpus", flags->options.gpus,
                    "use only these GPUs of the host, by nvidia-smi / rocm-smi index (0 or 0,1): "
                    "the agent and every process it starts see only them, its inventory lists "
                    "only them, and it is a session of its own; start one agent per GPU to "
                    "measure GPU-to-GPU variance on one host (default: all GPUs)");
    cmd->add_option("--fake-gpus", flags->options.fake_gpus_json,
                    "testing only: a JSON array of GPUs to advertise instead of detecting");
    cmd->add_flag("--spool-status", flags->spool_status,
                  "print what the spool holds per session (results not yet acknowledged) "
                  "and exit; needs no coordinator");
    cmd->add_flag("--json", flags->json, "with --spool-status: print JSON");
    cmd->callback([flags] { RunAgent(*flags); });
  }
  {
    auto flags = std::make_shared<LocalFlags>();
    auto* cmd = app.add_subcommand(
        "local",
        "Run a matrix on this machine: a coordinator and N agents in one process over loopback "
        "gRPC, results in --db, then print the result table.\n"
        "With no MATRIX, runs the built-in CPU demo (matrices/examples/demo-cpu.yaml).");
    cmd->add_option("matrix", flags->matrix_path, "matrix YAML file (default: built-in demo)");
    cmd->add_option("--agents", flags->agents,
                    "agents to start (default: the sessions the matrix may use, at least 2)");
    cmd->add_option("--db", flags->db, "results database")->capture_default_str();
    cmd->add_option("--http", flags->http,
                    "watch the run in a browser: serve the web pages on PORT (127.0.0.1) or "
                    "HOST:PORT while it goes");
    cmd->add_option("--by", flags->by, "axes to group the table by, comma-separated");
    cmd->add_option("--metric", flags->metric, "metric to show (default: the matrix's)");
    cmd->add_option("--max-cells", flags->max_cells, "raise the cell cap");
    cmd->add_option("--engine-logs", flags->engine_logs,
                    "keep each engine's full log in this folder (as `ladder agent "
                    "--engine-logs`): attempt<A>-unit<U>-arm<I>-proc<P>.log");
    cmd->add_option(
        "--bench", flags->benches,
        "NAME=PATH: a program `runner: command` cells may run (repeatable; as "
        "`ladder agent --bench`), e.g. --bench example=build/command/ladder-example-bench");
    cmd->add_option("--bench-file", flags->bench_files, "a file of NAME=PATH lines, as --bench");
    AddTagFlags(cmd, flags->tags);
    cmd->add_flag("--json", flags->json, "print the result as JSON");
    cmd->callback([flags] { RunLocal(*flags); });
  }
}

}  // namespace ladder::cli
