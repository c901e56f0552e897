#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

namespace ladder::testing {
namespace {

pid_t SpawnWithFiles(const std::vector<std::string>& argv, const std::string& out_path,
                     const std::string& err_path) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int err =
        err_path == out_path ? out : open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    int null = open("/dev/null", O_RDONLY);
    dup2(null, STDIN_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

ChildProcess::ChildProcess(std::vector<std::string> argv, std::string log_path)
    : log_path_(std::move(log_path)) {
  pid_ = SpawnWithFiles(argv, log_path_, log_path_);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_code_) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

void ChildProcess::Signal(int signal) {
  if (pid_ > 0 && !exit_code_) kill(pid_, signal);
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (exit_code_) return exit_code_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = DecodeStatus(status);
      return exit_code_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool ChildProcess::Running() { return !Wait(std::chrono::milliseconds(0)).has_value(); }

std::string ChildProcess::Log() const { return ReadFile(log_path_); }

CommandResult RunCommand(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  TempDir dir;
  const std::string out = dir.File("out"), err = dir.File("err");
  pid_t pid = SpawnWithFiles(argv, out, err);
  CommandResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      result.exit_code = DecodeStatus(status);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.exit_code = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  result.out = ReadFile(out);
  result.err = ReadFile(err);
  return result;
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "ladder-test-XXXXXX").string();
  char* made = mkdtemp(pattern.data());
  path_ = made ? made : "/tmp";
}

TempDir::~TempDir() {
  if (std::getenv("LADDER_KEEP_TEST_DIRS")) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(poll);
  }
  return condition();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path) << content;
}

std::string LadderBinary() { return LADDER_BINARY; }

std::unique_ptr<ChildProcess> StartCoordinator(const TempDir& dir, const std::string& db, int* port,
                                               const std::vector<std::string>& extra,
                                               int fixed_port, const std::string& log_name) {
  const std::string port_file = dir.File("port-" + log_name);
  std::filesystem::remove(port_file);
  std::vector<std::string> argv = {LadderBinary(), "coordinator",
                                   "--listen",     "127.0.0.1:" + std::to_string(fixed_port),
                                   "--db",         db,
                                   "--port-file",  port_file};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto child = std::make_unique<ChildProcess>(argv, dir.File(log_name));
  const bool up =
      WaitFor([&] { return std::filesystem::exists(port_file); }, std::chrono::seconds(30));
  *port = up ? std::atoi(ReadFile(port_file).c_str()) : 0;
  return child;
}

std::string LastLine(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const size_t nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

}  // namespace ladder::testing
