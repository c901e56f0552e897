// Test support: child processes, temporary folders, polling. Shared by the integration and
// fault tests, which run the real `ladder` binary.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ladder::testing {

// A child process with stdout+stderr redirected to a log file. Killed (SIGKILL) and reaped on
// destruction if still running.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, std::string log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signal);
  // Waits for exit; returns the exit code (128+signal when killed), nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  bool Running();
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  std::optional<int> exit_code_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs a command to completion (with a timeout, after which it is killed).
CommandResult RunCommand(const std::vector<std::string>& argv,
                         std::chrono::seconds timeout = std::chrono::seconds(120));

class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll = std::chrono::milliseconds(50));

std::string ReadFile(const std::string& path);

// The last line of a command's output, trailing newlines dropped (what a CLI prints last:
// a run id, a verdict).
std::string LastLine(std::string text);
void WriteFile(const std::string& path, const std::string& content);

// The ladder binary under test (set by CMake).
std::string LadderBinary();

// Starts `ladder coordinator` on 127.0.0.1 (port 0, or `port` when non-zero) and waits until it
// serves; returns its port through *port.
std::unique_ptr<ChildProcess> StartCoordinator(const TempDir& dir, const std::string& db, int* port,
                                               const std::vector<std::string>& extra,
                                               int fixed_port = 0,
                                               const std::string& log_name = "coordinator.log");

}  // namespace ladder::testing
