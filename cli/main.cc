// The `ladder` binary: one executable, many subcommands (coordinator, agent, local, submit, ...).
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/synchronization/mutex.h"
#include "commands.h"
#include "exit_codes.h"
#include "ladder/build_info.h"

namespace ladder::cli {

void ExitWith(ExitCode exit_code) { throw CLI::RuntimeError(static_cast<int>(exit_code)); }

void Fail(const absl::Status& status, ExitCode exit_code) {
  std::cerr << "error: " << status.message() << "\n";
  ExitWith(exit_code);
}

void Fail(const std::string& message, ExitCode exit_code) {
  std::cerr << "error: " << message << "\n";
  ExitWith(exit_code);
}

std::string DefaultCoordinator() {
  if (const char* env = std::getenv("LADDER_COORDINATOR"); env && *env) return env;
  return "127.0.0.1:7400";
}

struct SignalWatcher::Impl {
  std::thread thread;
  std::atomic<bool> done{false};
};

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal) : impl_(new Impl) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  impl_->thread = std::thread([this, set, on_signal = std::move(on_signal)] {
    while (true) {
      int signal = 0;
      if (sigwait(&set, &signal) != 0) continue;
      if (impl_->done.load()) return;
      if (signal == SIGUSR2) continue;
      on_signal(signal);
    }
  });
}

SignalWatcher::~SignalWatcher() {
  impl_->done = true;
  pthread_kill(impl_->thread.native_handle(), SIGUSR2);
  impl_->thread.join();
  delete impl_;
}

}  // namespace ladder::cli

int main(int argc, char** argv) {
  // abseil's debug deadlock detector (on in Debian's build) costs ~9 % of a busy coordinator's
  // CPU inside gRPC; ladder's own locks are std::mutex with annotations.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{
      "ladder runs GPU benchmark matrices (attention backend x context depth x speculation arm "
      "x ...) across a fleet of agents and keeps every measurement, with the VM session it came "
      "from, in one SQLite database.\n\n"
      "Start here:\n"
      "  ladder local                       run the built-in demo matrix on this machine\n"
      "  ladder validate m.yaml             check a matrix without running it\n"
      "  ladder coordinator --db r.db       serve a fleet; then on each GPU host:\n"
      "  ladder agent --coordinator H:7400  join it\n"
      "  ladder submit m.yaml --wait        run a matrix on the fleet\n"
      "  ladder query RUN --by depth        read the results (also offline with --db FILE)\n",
      "ladder"};
  app.require_subcommand(1);
  // Version, commit and backends: what an agent also reports in its inventory.
  app.set_version_flag("--version", std::string("ladder ") + ladder::build::kVersion + "\ncommit " +
                                        ladder::build::kCommit + "\nbackends " +
                                        ladder::build::kBackends);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.parse_complete_callback([&] { spdlog::set_level(spdlog::level::from_str(log_level)); });
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(spdlog::stderr_color_mt("ladder"));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");

  ladder::cli::AddServerCommands(app);
  ladder::cli::AddClientCommands(app);
  ladder::cli::AddKernelsCommand(app);
  ladder::cli::AddEngineCommand(app);
  ladder::cli::AddAnalysisCommands(app);
  ladder::cli::AddTokenCommands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return app.exit(e);  // a command's own ExitWith: its code is already ladder's
  } catch (const CLI::ParseError& e) {
    // --help and --version end here with 0. Every other parse error (an unknown flag, a value
    // that does not convert or is out of range, a missing argument) is bad input: the README's
    // exit code 2, not CLI11's own 1xx codes, so that scripts can branch on one number.
    const int cli11_code = app.exit(e);
    return cli11_code == 0 ? 0 : static_cast<int>(ladder::cli::ExitCode::kBadInput);
  }
  return 0;
}
