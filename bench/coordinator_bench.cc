// ladder-bench-coordinator: how far one coordinator with one SQLite file goes.
//
// For each agent count N (default 10, 100, 1000) it starts a real Coordinator on 127.0.0.1:0
// with a fresh results.db in a temp folder, submits a matrix of many one-cell units (runner
// kernel) over the AdminService, and runs N simulated agents in this process. Each agent has its
// own session id and its own gRPC channel (its own TCP connection) and speaks the AgentService
// like a real agent: Register, then Lease (long poll) -> Heartbeat (when due) -> Report (K fake
// measurements per cell and the unit's finish, one RPC; --separate-finish: a Finish RPC
// after it), again and again. Agents do no work between lease and
// report, so the coordinator is the only thing being measured.
//
// Agents are driven by gRPC's callback API: no thread per agent; completions run on gRPC's own
// small thread pool and each callback issues the agent's next call.
//
// Every scale point is bounded: it stops after --seconds (or when the matrix is done), lets the
// agents finish the unit in hand, then checks that every acknowledged measurement is in the
// database exactly once. Exit status 0 when every check passed, 1 otherwise.
#include <fcntl.h>
#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmath>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/synchronization/mutex.h"
#include "ladder/coordinator/coordinator.h"
#include "ladder/db/sqlite.h"
#include "ladder/v1/admin.grpc.pb.h"
#include "ladder/v1/agent.grpc.pb.h"
#include "ladder/web/web.h"

namespace ladder::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Config {
  std::vector<int> agents = {10, 100, 1000};
  int per_cell = 4;          // measurements reported per cell
  double seconds = 8;        // measuring window per scale point
  int64_t cells = 40000;     // matrix size (one cell per unit)
  int lease_wait_ms = 1000;  // agents' long poll
  int heartbeat_ms = 2000;   // told to agents at registration
  int lease_ms = 30000;
  int work_ms = 0;               // simulated unit duration (mean; uniform 0.5x..1.5x); 0: none
  double session_rate = 0;       // coordinator's per-session call limit; 0: off (see --help)
  bool separate_finish = false;  // Finish as its own RPC (agents before the finish rode along)
  bool json = false;
  std::string keep_dir;            // keep the databases here instead of a temp folder
  bool deadlock_detection = true;  // abseil's mutex deadlock detection (on in Debian's build)
  bool poll_web = false;  // serve the web pages and poll a run's page and /metrics every second
  bool poll_web_report = false;  // and its results page (the report, rebuilt at most every 10 s)
};

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

int64_t RssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return 0;
}

// The coordinator under test runs in a process of its own (this binary with --serve), so its
// CPU time and memory are the coordinator's alone, not the simulated agents' as well.
class CoordinatorProcess {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorProcess>> Start(const Config& config,
                                                                   const std::string& db_path) {
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) {
      return absl::InternalError("pipe failed");
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
    const std::vector<std::string> args = {"ladder-bench-coordinator",
                                           "--serve",
                                           db_path,
                                           std::to_string(config.heartbeat_ms),
                                           std::to_string(config.lease_ms),
                                           std::to_string(std::max(config.lease_wait_ms, 1000)),
                                           fmt::format("{}", config.session_rate),
                                           config.deadlock_detection ? "1" : "0",
                                           config.poll_web ? "1" : "0"};
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    auto process = std::unique_ptr<CoordinatorProcess>(new CoordinatorProcess);
    const int rc =
        posix_spawn(&process->pid_, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(to_child[0]);
    close(from_child[1]);
    process->stdin_ = to_child[1];
    if (rc != 0) {
      close(from_child[0]);
      return absl::InternalError(fmt::format("cannot start the coordinator: {}", strerror(rc)));
    }
    // The child prints its port once it listens.
    std::string line;
    pollfd pfd{from_child[0], POLLIN, 0};
    char c;
    while (line.find('\n') == std::string::npos && poll(&pfd, 1, 60000) > 0 &&
           read(from_child[0], &c, 1) == 1) {
      line += c;
    }
    close(from_child[0]);
    if (line.empty() || line.find('\n') == std::string::npos) {
      return absl::InternalError("the coordinator process did not report its port");
    }
    // "PORT" or "PORT WEB_PORT".
    line = line.substr(0, line.find('\n'));
    process->address_ = "127.0.0.1:" + line.substr(0, line.find(' '));
    if (line.find(' ') != std::string::npos)
      process->web_port_ = std::stoi(line.substr(line.find(' ') + 1));
    return process;
  }

  ~CoordinatorProcess() { (void)Stop(); }

  const std::string& address() const { return address_; }
  int web_port() const { return web_port_; }  // 0: no web pages

  double CpuSeconds() const {
    std::ifstream in(fmt::format("/proc/{}/stat", pid_));
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    double ticks = 0;
    // After the command: state is field 3; utime and stime are fields 14 and 15.
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i >= 14) ticks += std::stod(field);
    }
    return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

  int64_t RssKiB() const {
    std::ifstream in(fmt::format("/proc/{}/status", pid_));
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
    }
    return 0;
  }

  // Closing its stdin asks it to shut down; it is killed if it has not within 30 s.
  absl::Status Stop() {
    if (pid_ <= 0) return absl::OkStatus();
    close(stdin_);
    int status = 0;
    for (int i = 0; i < 300; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0
                   ? absl::OkStatus()
                   : absl::InternalError("the coordinator process failed");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return absl::DeadlineExceededError("the coordinator process did not stop; killed");
  }

 private:
  CoordinatorProcess() = default;
  pid_t pid_ = 0;
  int stdin_ = -1;
  std::string address_;
  int web_port_ = 0;
};

// --serve DB HEARTBEAT_MS LEASE_MS MAX_WAIT_MS SESSION_RATE DEADLOCK_DETECTION WEB: the child
// side.
int Serve(char** argv) {
  spdlog::set_level(spdlog::level::warn);
  if (std::string(argv[7]) == "0") {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  coordinator::CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = argv[2];
  options.heartbeat_interval_ms = std::stoi(argv[3]);
  options.scheduler.lease_ms = std::stoi(argv[4]);
  options.max_lease_wait_ms = std::stoi(argv[5]);
  options.session_calls_per_second = std::stod(argv[6]);
  auto started = coordinator::Coordinator::Start(options);
  if (!started.ok()) {
    std::cerr << "coordinator: " << started.status() << "\n";
    return 1;
  }
  std::unique_ptr<web::WebServer> pages;
  if (std::string(argv[8]) == "1") {
    web::WebOptions web_options;
    web_options.listen = "127.0.0.1:0";
    auto served = web::WebServer::Start(web_options, started->get());
    if (!served.ok()) {
      std::cerr << "web: " << served.status() << "\n";
      return 1;
    }
    pages = std::move(*served);
    std::printf("%d %d\n", (*started)->port(), pages->port());
  } else {
    std::printf("%d\n", (*started)->port());
  }
  std::fflush(stdout);
  // The parent stops reading after the port: the coordinator's own log (stdout) must not hit
  // a closed pipe (SIGPIPE) when it warns, e.g. that no agent is connected yet at submission.
  if (std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
  char buffer[64];
  while (read(STDIN_FILENO, buffer, sizeof buffer) > 0) {
  }
  pages.reset();
  (*started)->Shutdown();
  return 0;
}

std::string NewUuid(std::mt19937_64& rng) {
  const uint64_t a = rng(), b = rng();
  return fmt::format("{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xfff,
                     (b >> 48 & 0x3fff) | 0x8000, b & 0xffffffffffffULL);
}

// The kernel runner's required metrics: a simulated agent fills every slot of the design, as a
// real one does, so each unit is accepted as done.
constexpr const char* kMetrics[] = {"time_us", "time_us_min", "bytes_per_s", "segments"};
constexpr const char* kUnits[] = {"us", "us", "B/s", "1"};
constexpr int kMetricsPerRound = 4;

std::string MatrixYaml(int64_t cells, int per_cell) {
  // Two integer axes whose product is exactly `cells`; no pairing, one session per cell, so
  // every unit is one cell.
  int64_t a = 1;
  for (int64_t d = 1; d * d <= cells; ++d) {
    if (cells % d == 0) a = d;
  }
  const int64_t b = cells / a;
  std::string yaml = "name: bench\nrunner: kernel\naxes:\n  depth: [";
  for (int64_t i = 1; i <= a; ++i) yaml += fmt::format("{}{}", i == 1 ? "" : ", ", i * 16);
  yaml += "]\n  query_rows: [";
  for (int64_t i = 1; i <= b; ++i) yaml += fmt::format("{}{}", i == 1 ? "" : ", ", i);
  yaml += fmt::format(
      "]\nfixed: {{backend: cpu, preset: tiny}}\n"
      "replicates: {{sessions: 1, processes: 1, rounds: {}}}\nmetric: time_us\n",
      std::max(1, per_cell / kMetricsPerRound));
  return yaml;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// Shared by all agents of one scale point.
struct Shared {
  const Config* config = nullptr;
  int64_t units_total = 0;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> acked{0};
  std::atomic<int64_t> units_done{0};
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> empty_polls{0};
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;  // agents not yet stopped
  int registered = 0;
  std::vector<double> lease_ms;  // latency of lease calls that returned work
  std::vector<std::string> first_errors;

  void Error(const std::string& what) {
    errors++;
    std::lock_guard lock(mu);
    if (first_errors.size() < 5) first_errors.push_back(what);
  }
};

class SimAgent {
 public:
  SimAgent(Shared* shared, std::shared_ptr<grpc::Channel> channel, int index, uint64_t seed)
      : shared_(shared), stub_(v1::AgentService::NewStub(channel)), index_(index), rng_(seed) {
    session_ = NewUuid(rng_);
  }

  void Start() {
    auto* inv = register_req_.mutable_inventory();
    register_req_.set_session_id(session_);
    inv->set_hostname(fmt::format("bench-host-{}", index_));
    inv->set_machine_id(fmt::format("bench-machine-{}", index_));
    inv->set_boot_id(NewUuid(rng_));
    inv->set_cpu_model("simulated");
    inv->set_cpu_cores(2);
    inv->set_memory_mib(4096);
    inv->add_features("kernel");
    inv->add_features("cpu");
    inv->set_agent_version("bench");
    inv->set_labels_json(R"({"bench":"1"})");
    (*inv->mutable_software())["ladder"] = "bench";
    NewContext(10000);
    stub_->async()->Register(ctx_.get(), &register_req_, &register_resp_,
                             [this](grpc::Status s) { OnRegister(s); });
  }

  const std::vector<std::string>& uuids() const { return uuids_; }

 private:
  void NewContext(int timeout_ms) {
    ctx_ = std::make_unique<grpc::ClientContext>();
    ctx_->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  }

  void OnRegister(const grpc::Status& s) {
    if (!s.ok()) {
      shared_->Error("register: " + s.error_message());
      Stop();
      return;
    }
    heartbeat_ms_ = std::max(100, register_resp_.heartbeat_interval_ms());
    last_heartbeat_ = Clock::now();
    {
      std::lock_guard lock(shared_->mu);
      shared_->registered++;
    }
    shared_->cv.notify_all();
    Lease();
  }

  void Lease() {
    if (shared_->stop.load()) {
      Stop();
      return;
    }
    lease_req_.set_session_id(session_);
    lease_req_.set_wait_ms(shared_->config->lease_wait_ms);
    NewContext(shared_->config->lease_wait_ms + 10000);
    lease_start_ = Clock::now();
    stub_->async()->Lease(ctx_.get(), &lease_req_, &lease_resp_,
                          [this](grpc::Status s) { OnLease(s); });
  }

  void OnLease(const grpc::Status& s) {
    if (!s.ok()) {
      shared_->Error("lease: " + s.error_message());
      Stop();
      return;
    }
    if (!lease_resp_.has_work()) {
      shared_->empty_polls++;
      Lease();
      return;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - lease_start_).count();
    {
      std::lock_guard lock(shared_->mu);
      shared_->lease_ms.push_back(ms);
    }
    attempt_id_ = lease_resp_.attempt_id();
    if (const int work = shared_->config->work_ms; work > 0) {
      std::uniform_int_distribution<int> jitter(work / 2, work + work / 2);
      // The previous alarm fired long ago (its callback led here); replace it.
      alarm_ = std::make_unique<grpc::Alarm>();
      alarm_->Set(std::chrono::system_clock::now() + std::chrono::milliseconds(jitter(rng_)),
                  [this](bool) { AfterWork(); });
      return;
    }
    AfterWork();
  }

  void AfterWork() {
    if (Clock::now() - last_heartbeat_ >= std::chrono::milliseconds(heartbeat_ms_)) {
      last_heartbeat_ = Clock::now();
      heartbeat_req_.Clear();
      heartbeat_req_.set_session_id(session_);
      heartbeat_req_.add_attempt_ids(attempt_id_);
      NewContext(30000);
      stub_->async()->Heartbeat(ctx_.get(), &heartbeat_req_, &heartbeat_resp_,
                                [this](grpc::Status s) {
                                  if (!s.ok()) shared_->Error("heartbeat: " + s.error_message());
                                  Report();
                                });
      return;
    }
    Report();
  }

  void Report() {
    report_req_.Clear();
    report_req_.set_session_id(session_);
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    std::uniform_real_distribution<double> value(10.0, 20.0);
    for (const auto& cell : lease_resp_.cells()) {
      for (int k = 0; k < shared_->config->per_cell; ++k) {
        auto* m = report_req_.add_measurements();
        m->set_uuid(NewUuid(rng_));
        m->set_attempt_id(attempt_id_);
        m->set_cell_id(cell.cell_id());
        m->set_process(0);
        m->set_round(k / kMetricsPerRound);
        m->set_metric(kMetrics[k % kMetricsPerRound]);
        // segments is a count: a whole number >= 1 (the store refuses anything else).
        const double v = value(rng_);
        m->set_value(k % kMetricsPerRound == 3 ? std::floor(v) : v);
        m->set_unit(kUnits[k % kMetricsPerRound]);
        m->set_measured_at_ms(now_ms);
      }
    }
    sent_ = report_req_.measurements_size();
    if (!shared_->config->separate_finish) {
      auto* finish = report_req_.add_finishes();
      finish->set_attempt_id(attempt_id_);
      finish->set_ok(true);
      finish->set_measurement_count(sent_);
    }
    NewContext(30000);
    stub_->async()->Report(ctx_.get(), &report_req_, &report_resp_,
                           [this](grpc::Status s) { OnReport(s); });
  }

  void OnReport(const grpc::Status& s) {
    if (!s.ok()) {
      shared_->Error("report: " + s.error_message());
      Stop();
      return;
    }
    if (report_resp_.acknowledged_uuids_size() != sent_ || report_resp_.stale_uuids_size() != 0) {
      shared_->Error(fmt::format("report: {} of {} acknowledged, {} stale",
                                 report_resp_.acknowledged_uuids_size(), sent_,
                                 report_resp_.stale_uuids_size()));
    }
    for (const auto& u : report_resp_.acknowledged_uuids()) uuids_.push_back(u);
    shared_->acked += report_resp_.acknowledged_uuids_size();
    if (!shared_->config->separate_finish) {
      if (report_resp_.finished_size() != 1 || !report_resp_.finished(0).accepted()) {
        shared_->Error("finish in report: " + (report_resp_.finished_size() == 1
                                                   ? report_resp_.finished(0).detail()
                                                   : std::string("no outcome")));
        Stop();
        return;
      }
      if (++shared_->units_done >= shared_->units_total) shared_->stop = true;
      Lease();
      return;
    }
    finish_req_.Clear();
    finish_req_.set_session_id(session_);
    finish_req_.set_attempt_id(attempt_id_);
    finish_req_.set_ok(true);
    finish_req_.set_measurement_count(sent_);
    NewContext(30000);
    stub_->async()->Finish(ctx_.get(), &finish_req_, &finish_resp_,
                           [this](grpc::Status s) { OnFinish(s); });
  }

  void OnFinish(const grpc::Status& s) {
    if (!s.ok() || !finish_resp_.accepted()) {
      shared_->Error("finish: " + (s.ok() ? finish_resp_.detail() : s.error_message()));
      Stop();
      return;
    }
    if (++shared_->units_done >= shared_->units_total) shared_->stop = true;
    Lease();
  }

  void Stop() {
    {
      std::lock_guard lock(shared_->mu);
      shared_->running--;
    }
    shared_->cv.notify_all();
  }

  Shared* shared_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  int index_;
  std::mt19937_64 rng_;
  std::string session_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::Alarm> alarm_;
  int heartbeat_ms_ = 5000;
  Clock::time_point last_heartbeat_;
  Clock::time_point lease_start_;
  int64_t attempt_id_ = 0;
  int sent_ = 0;
  std::vector<std::string> uuids_;
  v1::RegisterRequest register_req_;
  v1::RegisterResponse register_resp_;
  v1::LeaseRequest lease_req_;
  v1::LeaseResponse lease_resp_;
  v1::HeartbeatRequest heartbeat_req_;
  v1::HeartbeatResponse heartbeat_resp_;
  v1::ReportRequest report_req_;
  v1::ReportResponse report_resp_;
  v1::FinishRequest finish_req_;
  v1::FinishResponse finish_resp_;
};

struct PointResult {
  int agents = 0;
  int64_t units_done = 0;
  int64_t measurements_acked = 0;
  double window_s = 0;
  double cpu_s = 0;        // this process's CPU (user + system) in the window: the agents
  double coord_cpu_s = 0;  // the coordinator process's CPU in the window
  int64_t coord_rss_before_kib = 0, coord_rss_registered_kib = 0, coord_rss_after_kib = 0;
  double ingest_per_s = 0;
  double lease_p50_ms = 0, lease_p99_ms = 0, lease_max_ms = 0;
  int64_t leases = 0;
  int64_t empty_polls = 0;
  double register_s = 0;
  double submit_s = 0;
  int64_t rss_before_kib = 0, rss_registered_kib = 0, rss_after_kib = 0;
  int64_t db_rows = 0, db_distinct = 0;
  int64_t errors = 0;
  int64_t web_polls = 0, web_poll_failures = 0;  // --poll-web: rounds of three GETs
  bool exact = false;  // every acknowledged uuid is in the DB exactly once and nothing else is
  std::vector<std::string> first_errors;
};

absl::StatusOr<PointResult> RunPoint(const Config& config, int n_agents, const std::string& dir) {
  PointResult result;
  result.agents = n_agents;
  result.rss_before_kib = RssKiB();

  const std::string db_path = fmt::format("{}/bench-{}.db", dir, n_agents);
  std::filesystem::remove(db_path);
  auto started = CoordinatorProcess::Start(config, db_path);
  if (!started.ok()) return started.status();
  std::unique_ptr<CoordinatorProcess> coord = std::move(*started);
  const std::string address = coord->address();

  Shared shared;
  shared.config = &config;

  // Submit through the admin API, as `ladder submit` does.
  {
    auto admin =
        v1::AdminService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    v1::SubmitRequest request;
    request.set_yaml(MatrixYaml(config.cells, config.per_cell));
    request.set_filename("bench.yaml");
    request.set_max_cells(config.cells * 2);
    v1::SubmitResponse response;
    grpc::ClientContext ctx;
    const auto t0 = Clock::now();
    grpc::Status s = admin->Submit(&ctx, request, &response);
    result.submit_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!s.ok()) return absl::InternalError("submit: " + s.error_message());
    shared.units_total = response.unit_count();
  }
  result.coord_rss_before_kib = coord->RssKiB();

  std::vector<std::unique_ptr<SimAgent>> agents;
  agents.reserve(static_cast<size_t>(n_agents));
  for (int i = 0; i < n_agents; ++i) {
    grpc::ChannelArguments args;
    // A channel (TCP connection) of its own per agent, as separate hosts would have.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("ladder.bench.agent", i);
    auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    agents.push_back(
        std::make_unique<SimAgent>(&shared, channel, i, 0x5eed0000ULL + static_cast<uint64_t>(i)));
  }
  shared.running = n_agents;
  const auto reg_start = Clock::now();
  // Registration and the first leases start at once; the window opens when all registered.
  int64_t acked_at_open = 0;
  int64_t units_at_open = 0;
  for (auto& a : agents) a->Start();
  {
    std::unique_lock lock(shared.mu);
    shared.cv.wait_for(lock, std::chrono::seconds(60),
                       [&] { return shared.registered + (n_agents - shared.running) >= n_agents; });
    acked_at_open = shared.acked.load();
    result.cpu_s = -CpuSeconds();
    result.coord_cpu_s = -coord->CpuSeconds();
    units_at_open = shared.units_done.load();
    shared.lease_ms.clear();
  }
  const auto window_start = Clock::now();
  // What a browser on the run's page and a Prometheus scraper add, once a second each.
  std::thread poller;
  if (coord->web_port() > 0) {
    poller = std::thread(
        [&result, &shared, port = coord->web_port(), with_report = config.poll_web_report] {
          httplib::Client web("127.0.0.1", port);
          auto next = Clock::now();
          while (!shared.stop.load()) {
            std::vector<std::string> paths = {"/runs/1", "/api/runs/1", "/metrics"};
            if (with_report) paths.push_back("/runs/1/report");
            for (const std::string& path : paths) {
              auto res = web.Get(path);
              if (!res || res->status != 200) ++result.web_poll_failures;
            }
            ++result.web_polls;
            next += std::chrono::seconds(1);
            std::unique_lock lock(shared.mu);
            shared.cv.wait_until(lock, next, [&] { return shared.stop.load(); });
          }
        });
  }
  result.register_s = std::chrono::duration<double>(window_start - reg_start).count();
  result.rss_registered_kib = RssKiB();
  result.coord_rss_registered_kib = coord->RssKiB();

  // Measuring window: until the time is up or the matrix is done.
  {
    std::unique_lock lock(shared.mu);
    shared.cv.wait_until(lock, window_start + std::chrono::duration<double>(config.seconds),
                         [&] { return shared.stop.load() || shared.running == 0; });
    shared.stop = true;
  }
  const auto window_end = Clock::now();
  shared.cv.notify_all();
  if (poller.joinable()) poller.join();
  result.cpu_s += CpuSeconds();
  result.coord_cpu_s += coord->CpuSeconds();
  result.coord_rss_after_kib = coord->RssKiB();
  const int64_t acked_at_close = shared.acked.load();
  const int64_t units_at_close = shared.units_done.load();
  std::vector<double> latencies;
  {
    std::lock_guard lock(shared.mu);
    latencies = shared.lease_ms;
  }
  result.rss_after_kib = RssKiB();
  // Drain: agents finish the unit in hand; a long poll returns within lease_wait_ms.
  {
    std::unique_lock lock(shared.mu);
    if (!shared.cv.wait_for(
            lock, std::chrono::milliseconds(config.lease_wait_ms + 30000 + config.work_ms * 3 / 2),
            [&] { return shared.running == 0; })) {
      shared.first_errors.push_back("agents did not stop within the drain time");
      shared.errors++;
      // Calls may still be in flight into these objects: leak them rather than free them.
      for (auto& a : agents) (void)a.release();
    }
  }
  if (auto stopped = coord->Stop(); !stopped.ok()) {
    shared.first_errors.push_back(std::string(stopped.message()));
    shared.errors++;
  }
  coord.reset();

  result.window_s = std::chrono::duration<double>(window_end - window_start).count();
  result.measurements_acked = shared.acked.load();
  result.units_done = shared.units_done.load();
  result.ingest_per_s =
      static_cast<double>(acked_at_close - acked_at_open) / std::max(1e-9, result.window_s);
  (void)units_at_open;
  (void)units_at_close;
  result.leases = static_cast<int64_t>(latencies.size());
  result.lease_p50_ms = Percentile(latencies, 0.50);
  result.lease_p99_ms = Percentile(latencies, 0.99);
  result.lease_max_ms =
      latencies.empty() ? 0 : *std::max_element(latencies.begin(), latencies.end());
  result.empty_polls = shared.empty_polls.load();
  result.errors = shared.errors.load();
  result.first_errors = shared.first_errors;

  // Exactly once: the database holds exactly the acknowledged uuids.
  auto db = db::Database::Open(db_path, db::OpenMode::kReadOnly);
  if (!db.ok()) return db.status();
  auto stmt = (*db)->Prepare("SELECT uuid FROM measurements");
  if (!stmt.ok()) return stmt.status();
  std::unordered_set<std::string> in_db;
  while (true) {
    auto row = stmt->Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    result.db_rows++;
    in_db.insert(stmt->Text(0));
  }
  result.db_distinct = static_cast<int64_t>(in_db.size());
  bool exact = result.db_rows == result.measurements_acked && result.db_distinct == result.db_rows;
  for (const auto& a : agents) {
    for (const auto& u : a->uuids()) {
      if (!in_db.count(u)) exact = false;
    }
  }
  result.exact = exact;
  agents.clear();
  if (config.keep_dir.empty()) {
    std::filesystem::remove(db_path);
    std::filesystem::remove(db_path + "-wal");
    std::filesystem::remove(db_path + "-shm");
  }
  return result;
}

nlohmann::json ToJson(const PointResult& r) {
  return {{"agents", r.agents},
          {"window_s", r.window_s},
          {"cpu_s", r.cpu_s},
          {"agents_cpu_us_per_measurement",
           r.cpu_s * 1e6 / std::max<double>(1.0, r.ingest_per_s * r.window_s)},
          {"coordinator_cpu_s", r.coord_cpu_s},
          {"coordinator_cpu_us_per_measurement",
           r.coord_cpu_s * 1e6 / std::max<double>(1.0, r.ingest_per_s * r.window_s)},
          {"coordinator_rss_before_kib", r.coord_rss_before_kib},
          {"coordinator_rss_registered_kib", r.coord_rss_registered_kib},
          {"coordinator_rss_after_kib", r.coord_rss_after_kib},
          {"coordinator_rss_per_agent_kib",
           static_cast<double>(r.coord_rss_registered_kib - r.coord_rss_before_kib) / r.agents},
          {"units_done", r.units_done},
          {"measurements_acked", r.measurements_acked},
          {"ingest_per_s", r.ingest_per_s},
          {"web_polls", r.web_polls},
          {"web_poll_failures", r.web_poll_failures},
          {"leases", r.leases},
          {"lease_p50_ms", r.lease_p50_ms},
          {"lease_p99_ms", r.lease_p99_ms},
          {"lease_max_ms", r.lease_max_ms},
          {"empty_polls", r.empty_polls},
          {"submit_s", r.submit_s},
          {"register_s", r.register_s},
          {"rss_before_kib", r.rss_before_kib},
          {"rss_registered_kib", r.rss_registered_kib},
          {"rss_after_kib", r.rss_after_kib},
          {"rss_per_agent_kib",
           static_cast<double>(r.rss_registered_kib - r.rss_before_kib) / r.agents},
          {"db_rows", r.db_rows},
          {"db_distinct", r.db_distinct},
          {"exactly_once", r.exact},
          {"errors", r.errors},
          {"first_errors", r.first_errors}};
}

void PrintTable(const std::vector<PointResult>& results, const Config& config) {
  std::printf(
      "ladder-bench-coordinator: %d measurements per one-cell unit, %.0f s window, "
      "unit work %d ms, long poll %d ms, %u cores\n",
      config.per_cell, config.seconds, config.work_ms, config.lease_wait_ms,
      std::thread::hardware_concurrency());
  std::printf("(coordinator: a process of its own; agents: this process)\n");
  std::printf("%7s %9s %11s %10s %9s %9s %9s %9s %9s %9s %10s %6s %6s\n", "agents", "units",
              "measured", "ingest/s", "lease p50", "lease p99", "lease max", "coord us/m",
              "agent us/m", "coord MiB", "KiB/agent", "exact", "errors");
  for (const auto& r : results) {
    const double measured = std::max<double>(1.0, r.ingest_per_s * r.window_s);
    std::printf(
        "%7d %9lld %11lld %10.0f %8.2fms %8.2fms %8.1fms %9.1f %9.1f %9.1f %10.1f %6s "
        "%6lld\n",
        r.agents, static_cast<long long>(r.units_done),
        static_cast<long long>(r.measurements_acked), r.ingest_per_s, r.lease_p50_ms,
        r.lease_p99_ms, r.lease_max_ms, r.coord_cpu_s * 1e6 / measured, r.cpu_s * 1e6 / measured,
        static_cast<double>(r.coord_rss_after_kib) / 1024.0,
        static_cast<double>(r.coord_rss_registered_kib - r.coord_rss_before_kib) / r.agents,
        r.exact ? "yes" : "NO", static_cast<long long>(r.errors));
    for (const auto& e : r.first_errors) std::printf("        error: %s\n", e.c_str());
  }
}

int Main(int argc, char** argv) {
  Config config;
  CLI::App app{
      "Benchmarks one ladder coordinator (real gRPC on loopback, real SQLite file) against N "
      "simulated agents in this process. Reports measurements ingested per second, lease "
      "latency p50/p99 and memory for each N."};
  app.add_option("--agents", config.agents, "agent counts to run, e.g. --agents 10,100,1000")
      ->delimiter(',');
  app.add_option("--per-cell", config.per_cell,
                 "measurements reported per cell: a multiple of 4 (the kernel runner's four "
                 "required metrics per round)")
      ->check(CLI::Range(4, 1000))
      ->check([](const std::string& v) {
        return std::stoi(v) % kMetricsPerRound == 0 ? "" : "must be a multiple of 4";
      });
  app.add_option("--seconds", config.seconds, "measuring window per agent count")
      ->check(CLI::Range(0.5, 600.0));
  app.add_option("--cells", config.cells, "cells in the submitted matrix (one unit each)")
      ->check(CLI::Range(int64_t{10}, int64_t{1000000}));
  app.add_option("--lease-wait-ms", config.lease_wait_ms, "agents' long-poll wait")
      ->check(CLI::Range(0, 20000));
  app.add_option("--work-ms", config.work_ms,
                 "simulated time each unit takes on an agent (0: report at once, which "
                 "measures the coordinator saturated)")
      ->check(CLI::Range(0, 600000));
  app.add_option("--session-rate", config.session_rate,
                 "the coordinator's per-session call limit (calls/s; 0: off). Off by default: "
                 "an agent with no work time makes hundreds of calls per second, which a real "
                 "agent never does, and the limit would be measured instead of the coordinator")
      ->check(CLI::Range(0.0, 1e6));
  app.add_flag("--separate-finish", config.separate_finish,
               "end each unit with its own Finish RPC instead of attaching it to the report "
               "(how agents worked before; compares the two protocols)");
  app.add_option("--heartbeat-ms", config.heartbeat_ms, "heartbeat interval told to agents")
      ->check(CLI::Range(100, 60000));
  app.add_option("--keep-dir", config.keep_dir, "write the databases here and keep them");
  app.add_flag(
      "--poll-web", config.poll_web,
      "serve the coordinator's web pages and, during the window, fetch the run's page, "
      "its JSON and /metrics once a second, as a browser on the run's page and a Prometheus "
      "scraper do (the cost of watching)");
  app.add_flag("--poll-web-report", config.poll_web_report,
               "with --poll-web: also fetch the run's results page (the report library's, "
               "rebuilt at most every 10 s) every second");
  app.add_flag("--json", config.json, "print JSON instead of a table");
  app.add_flag("!--no-deadlock-detection", config.deadlock_detection,
               "turn off abseil's mutex deadlock detection (gRPC's mutexes are abseil's; "
               "Debian's abseil checks every lock)");
  CLI11_PARSE(app, argc, argv);
  for (int n : config.agents) {
    if (n < 1 || n > 5000) {
      std::cerr << "--agents: each count must be in 1..5000\n";
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::warn);
  if (!config.deadlock_detection) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }

  std::string dir = config.keep_dir;
  std::string temp;
  if (dir.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "ladder-bench-XXXXXX").string();
    if (!mkdtemp(pattern.data())) {
      std::perror("mkdtemp");
      return 1;
    }
    temp = dir = pattern;
  } else {
    std::filesystem::create_directories(dir);
  }

  std::vector<PointResult> results;
  bool ok = true;
  for (int n : config.agents) {
    auto r = RunPoint(config, n, dir);
    if (!r.ok()) {
      std::cerr << "agents=" << n << ": " << r.status() << "\n";
      ok = false;
      break;
    }
    if (!r->exact || r->errors > 0) ok = false;
    results.push_back(std::move(*r));
    if (!config.json) {
      std::fprintf(stderr, "agents=%d: %.0f measurements/s, lease p99 %.2f ms\n", n,
                   results.back().ingest_per_s, results.back().lease_p99_ms);
    }
  }
  if (!temp.empty()) std::filesystem::remove_all(temp);
  if (config.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : results) out.push_back(ToJson(r));
    std::cout << out.dump(2) << "\n";
  } else {
    PrintTable(results, config);
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace ladder::bench

int main(int argc, char** argv) {
  if (argc == 9 && std::string(argv[1]) == "--serve") return ladder::bench::Serve(argv);
  return ladder::bench::Main(argc, argv);
}
