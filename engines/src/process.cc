#include "ladder/engines/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "ladder/common/mutex.h"
#include "ladder/common/utf8.h"
#include "message.h"

extern char** environ;

namespace ladder::engines {

using internal::Cat;
using internal::ToStd;
namespace {

constexpr size_t kMaxLineBytes = 4096;

std::string ErrnoText(int err) { return std::strerror(err); }

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

// The identifier that ends just before `end` in `line` (letters, digits, '_', '.'), or "".
std::string_view TokenBefore(std::string_view line, size_t end) {
  size_t begin = end;
  while (begin > 0 && IsNameChar(line[begin - 1])) --begin;
  return line.substr(begin, end - begin);
}

// The identifier that starts at `begin` in `line`.
std::string_view TokenAt(std::string_view line, size_t begin) {
  size_t end = begin;
  while (end < line.size() && IsNameChar(line[end])) ++end;
  return line.substr(begin, end - begin);
}

// "AttentionBackendEnum.TRITON_ATTN" reads TRITON_ATTN.
std::string LastDotted(std::string_view name) {
  size_t dot = name.rfind('.');
  if (dot != std::string_view::npos) name.remove_prefix(dot + 1);
  return std::string(name);
}

// The spellings older vLLM builds log for a backend, by the enum name a matrix uses (vLLM's
// pre-0.11 selector: "Using Flash Attention backend on V1 engine.", "Using FlashInfer
// backend.", "Using Triton MLA backend.", ...).
std::string FromLegacyName(std::string_view words) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"Flash Attention", "FLASH_ATTN"},
      {"FlashAttention", "FLASH_ATTN"},
      {"FlashInfer", "FLASHINFER"},
      {"Triton", "TRITON_ATTN"},
      {"TritonAttention", "TRITON_ATTN"},
      {"XFormers", "XFORMERS"},
      {"Triton MLA", "TRITON_MLA"},
      {"FlashMLA", "FLASHMLA"},
      {"FlashInfer MLA", "FLASHINFER_MLA"},
      {"Torch SDPA", "TORCH_SDPA"},
      {"ROCmFlashAttention", "ROCM_FLASH"},
      {"ROCm Flash Attention", "ROCM_FLASH"},
      // vLLM's ROCm selector before vllm#35246 (vllm/platforms/rocm.py, get_attn_backend_cls):
      // "Using Rocm Attention backend[ on V1 engine].", "Using Aiter Flash Attention
      // backend[ on V1 engine].", "Using Triton Attention backend on V1 engine.", ...
      {"Rocm Attention", "ROCM_ATTN"},
      {"ROCm Attention", "ROCM_ATTN"},
      {"Aiter Flash Attention", "ROCM_AITER_FA"},
      {"Aiter Unified Attention", "ROCM_AITER_UNIFIED_ATTN"},
      {"Triton Attention", "TRITON_ATTN"},
      {"FlexAttention", "FLEX_ATTENTION"},
      {"AITER MLA", "ROCM_AITER_MLA"},
      {"AITER TRITON MLA", "ROCM_AITER_TRITON_MLA"},
  };
  for (const auto& [legacy, name] : kNames) {
    if (words == legacy) return std::string(name);
  }
  return "";
}

bool IsUpperIdentifier(std::string_view name) {
  if (name.size() < 2 || !std::isupper(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isupper(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

void AddDistinct(std::vector<std::string>& names, std::string name) {
  if (name.empty()) return;
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
}

}  // namespace

// Lines that name a backend of something other than the decoder's attention: MoE kernels
// ("Using TRITON backend for Unquantized MoE", "Using TRITON Unquantized MoE backend out of
// potential backends: [...]", "Using 'MARLIN' NvFp4 MoE backend ..."), LoRA, and the vision
// encoder ("Using Flash Attention backend for ViT model.", "Using backend
// AttentionBackendEnum.FLASH_ATTN for vit attention", "Using AttentionBackendEnum.TORCH_SDPA for
// MMEncoderAttention."). Quoted with their sources in docs/engines.md.
bool IsNotDecoderAttention(std::string_view line) {
  for (std::string_view marker :
       {" MoE", "LoRA", "ViT", "vit attention", "MMEncoderAttention", "MLA prefill backend"}) {
    if (line.find(marker) != std::string_view::npos) return true;
  }
  return false;
}

BackendLine ParseBackendLine(std::string_view line) {
  BackendLine out;
  if (IsNotDecoderAttention(line)) return out;
  // vLLM >= 0.11 on CUDA when it chooses: "Using FLASH_ATTN attention backend out of potential
  // backends: [...]". Only the token right before " attention backend" is a name: "Using
  // FLASH_ATTN MLA prefill backend" is not about the attention backend a cell asks for.
  if (size_t at = line.find(" attention backend"); at != std::string_view::npos) {
    std::string_view token = TokenBefore(line, at);
    if (!token.empty() && at >= token.size() + 6 &&
        line.substr(at - token.size() - 6, 6) == "Using ") {
      out.backend = LastDotted(token);
    }
  }
  // vLLM on ROCm from vllm#35246 on: "Using ROCM_ATTN backend out of potential backends: [...]",
  // "Using ROCM_ATTN backend (selected via --attention-backend).", and "Found incompatible
  // backend(s) [...] with AttentionType.DECODER. Overriding with TRITON_ATTN out of potential
  // backends: [...]" (the backend it runs).
  if (out.backend.empty()) {
    if (size_t at = line.find("Overriding with "); at != std::string_view::npos) {
      std::string_view token = TokenAt(line, at + 16);
      if (IsUpperIdentifier(LastDotted(token))) out.backend = LastDotted(token);
    }
  }
  // vLLM when a backend was requested ("Using AttentionBackendEnum.TRITON_ATTN backend."), the
  // synthetic engine ("Using TRITON_ATTN backend."), pre-0.11 vLLM's human names ("Using
  // Flash Attention backend on V1 engine.") and ROCm's names ("Using Rocm Attention backend.").
  if (out.backend.empty()) {
    for (size_t pos = line.find("Using "); pos != std::string_view::npos;
         pos = line.find("Using ", pos + 6)) {
      size_t start = pos + 6;
      size_t end = line.find(" backend", start);
      if (end == std::string_view::npos || end - start > 64) continue;
      std::string_view words = line.substr(start, end - start);
      if (TokenAt(line, start).size() == words.size()) {
        std::string name = LastDotted(words);
        std::string legacy = FromLegacyName(name);
        if (!legacy.empty()) {
          out.backend = legacy;
        } else if (IsUpperIdentifier(name)) {
          out.backend = name;
        }
      } else {
        out.backend = FromLegacyName(words);
      }
      if (!out.backend.empty()) break;
    }
  }
  // SGLang's model runner for an MLA model (model_executor/model_runner.py): "MLA optimization
  // is turned on. Use triton backend." in 2024 releases, which then set attention_backend =
  // "triton" whatever the server was asked ("Use flashinfer mla backend." with
  // --enable-flashinfer-mla: flashinfer_mla); later f"MLA optimization is turned on. Use
  // {server_args.attention_backend} backend." names the one it kept.
  if (out.backend.empty()) {
    constexpr std::string_view kMla = "MLA optimization is turned on. Use ";
    if (size_t at = line.find(kMla); at != std::string_view::npos) {
      const size_t start = at + kMla.size();
      const size_t end = line.find(" backend", start);
      if (end != std::string_view::npos && end > start && end - start <= 32) {
        std::string name(line.substr(start, end - start));
        std::replace(name.begin(), name.end(), ' ', '_');
        out.backend = name;
      }
    }
  }
  // SGLang when no backend was given: "Attention backend not explicitly specified. Use
  // flashinfer backend by default."
  if (out.backend.empty()) {
    if (size_t at = line.find(" backend by default"); at != std::string_view::npos) {
      std::string_view token = TokenBefore(line, at);
      if (!token.empty() && at >= token.size() + 4 &&
          line.substr(at - token.size() - 4, 4) == "Use ") {
        out.backend = std::string(token);
      }
    }
  }
  // A model that overrides the request: vLLM's Gemma 4 ("... Forcing TRITON_ATTN backend to
  // prevent mixed-backend numerical divergence." in 0.19; "... FA4 not available, forcing
  // TRITON_ATTN backend." from about 0.25). Only an upper-case backend name counts: "Forcing kv
  // cache block size to 64 for FlashMLA backend." forces a block size, not a backend.
  // The name may end the sentence ("... FA4 not available, forcing TRITON_ATTN." in a user's
  // log of vLLM 0.2x): its full stop is no part of it.
  auto without_stop = [](std::string_view token) {
    while (!token.empty() && (token.back() == '.' || token.back() == ',' || token.back() == ';' ||
                              token.back() == ':')) {
      token.remove_suffix(1);
    }
    return token;
  };
  for (std::string_view word : {"Forcing ", "forcing "}) {
    if (size_t at = line.find(word); at != std::string_view::npos) {
      std::string_view token = without_stop(TokenAt(line, at + word.size()));
      if (IsUpperIdentifier(token)) {
        out.forced = std::string(token);
        break;
      }
    }
  }
  // SGLang replacing a requested backend (python/sglang/srt/server_args.py at 469c63e5):
  // "FlashAttention3 only supports fp8_e4m3 if using FP8; Setting attention backend to
  // triton.", "The current platform does not support Intel AMX, will fallback to torch_native
  // backend." Its names are lower case.
  if (out.forced.empty()) {
    for (std::string_view word : {"Setting attention backend to ", "will fallback to "}) {
      if (size_t at = line.find(word); at != std::string_view::npos) {
        std::string_view token = without_stop(TokenAt(line, at + word.size()));
        const bool names_backend =
            word[0] == 'S' ||
            line.substr(at + word.size() + token.size()).rfind(" backend", 0) == 0;
        if (!token.empty() && names_backend) {
          out.forced = std::string(token);
          break;
        }
      }
    }
  }
  return out;
}

std::vector<std::string> ChildEnvironment(const LaunchSpec& spec, const char* const* parent) {
  std::vector<std::string> out;
  std::set<std::string> removed(spec.env_unset.begin(), spec.env_unset.end());
  for (const auto& [key, value] : spec.env) removed.insert(key);
  for (const char* const* e = parent; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view key = entry.substr(0, entry.find('='));
    if (removed.count(std::string(key)) != 0) continue;
    const bool by_prefix =
        std::any_of(spec.env_unset_prefixes.begin(), spec.env_unset_prefixes.end(),
                    [&](const std::string& prefix) { return key.rfind(prefix, 0) == 0; });
    if (!by_prefix) out.emplace_back(entry);
  }
  for (const auto& [key, value] : spec.env) out.push_back(Cat(key, "=", value));
  return out;
}

std::string ExitInfo::Describe() const {
  if (signaled) {
    const char* name = strsignal(code);
    return Cat("killed by signal ", code, " (", name ? name : "?", ")");
  }
  return Cat("exited with status ", code);
}

class EngineProcess::Impl {
 public:
  Impl(pid_t pid, int out_fd, ProcessOptions options)
      : pid_(pid), out_fd_(out_fd), options_(std::move(options)) {
    for (const auto& p : options_.probe_patterns) evidence_.probe_counts[p] = 0;
    if (!options_.log_file.empty()) log_.open(options_.log_file, std::ios::trunc);
    reader_ = std::thread([this] { ReadLoop(); });
  }

  ~Impl() {
    Kill();
    stop_reader_ = true;
    if (reader_.joinable()) reader_.join();
    close(out_fd_);
  }

  pid_t pid() const { return pid_; }

  std::optional<ExitInfo> Poll() {
    MutexLock lock(&wait_mu_);
    return PollLocked(/*block=*/false);
  }

  void Kill() noexcept {
    MutexLock kill_lock(&kill_mu_);
    if (killed_) return;
    killed_ = true;
    killed_by_us_ = true;
    ::kill(-pid_, SIGTERM);
    ::kill(pid_, SIGTERM);  // in case the child had not yet moved into its own group
    auto deadline = std::chrono::steady_clock::now() + options_.kill_grace;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        MutexLock lock(&wait_mu_);
        if (PollLocked(false).has_value() && ::kill(-pid_, 0) != 0) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(-pid_, SIGKILL);
    {
      MutexLock lock(&wait_mu_);
      if (!exit_.has_value()) ::kill(pid_, SIGKILL);
      PollLocked(/*block=*/true);
    }
    // Wait (bounded) until every member of the group is gone: their GPU memory is released only
    // then.
    auto group_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (::kill(-pid_, 0) == 0 && std::chrono::steady_clock::now() < group_deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // Let the reader drain what the group wrote before dying, then stop it.
    stop_reader_ = true;
  }

  LogEvidence Evidence() const {
    MutexLock lock(&log_mu_);
    return evidence_;
  }

  std::vector<std::string> LogTail() const {
    MutexLock lock(&log_mu_);
    return {tail_.begin(), tail_.end()};
  }

  bool killed_by_us() const {
    MutexLock lock(&kill_mu_);
    return killed_by_us_;
  }

  // Waits (bounded) until the reader has consumed everything written so far; used before
  // reading evidence of a dead process.
  void DrainAfterExit(std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!reader_done_ && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

 private:
  std::optional<ExitInfo> PollLocked(bool block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(wait_mu_) {
    if (exit_.has_value()) return exit_;
    int status = 0;
    pid_t r;
    do {
      r = waitpid(pid_, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == pid_) {
      ExitInfo info;
      if (WIFSIGNALED(status)) {
        info.signaled = true;
        info.code = WTERMSIG(status);
      } else {
        info.code = WEXITSTATUS(status);
      }
      exit_ = info;
    } else if (r < 0 && errno == ECHILD) {
      exit_ = ExitInfo{false, -1};
    }
    return exit_;
  }

  void ReadLoop() {
    std::string pending;
    char buf[8192];
    while (true) {
      pollfd pfd{out_fd_, POLLIN, 0};
      int r = ::poll(&pfd, 1, stop_reader_ ? 0 : 100);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) {
        if (stop_reader_) break;
        continue;
      }
      ssize_t n = ::read(out_fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      pending.append(buf, static_cast<size_t>(n));
      size_t start = 0;
      while (true) {
        size_t nl = pending.find('\n', start);
        if (nl == std::string::npos) break;
        HandleLine(pending.substr(start, nl - start));
        start = nl + 1;
      }
      pending.erase(0, start);
      if (pending.size() > kMaxLineBytes) {
        HandleLine(pending);
        pending.clear();
      }
    }
    if (!pending.empty()) HandleLine(pending);
    reader_done_ = true;
  }

  void HandleLine(std::string line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.size() > kMaxLineBytes) line.resize(kMaxLineBytes);
    BackendLine parsed = ParseBackendLine(line);
    std::string backend = std::move(parsed.backend);
    std::string forced = std::move(parsed.forced);
    std::string lower = absl::AsciiStrToLower(line);
    bool oom = lower.find("out of memory") != std::string::npos ||
               lower.find("outofmemoryerror") != std::string::npos;
    MutexLock lock(&log_mu_);
    if (log_.is_open()) log_ << line << '\n';
    AddDistinct(evidence_.backends, std::move(backend));
    AddDistinct(evidence_.forced, std::move(forced));
    for (auto& [pattern, count] : evidence_.probe_counts) {
      if (line.find(pattern) != std::string::npos) ++count;
    }
    evidence_.out_of_memory = evidence_.out_of_memory || oom;
    if (evidence_.non_default_args_line.empty() &&
        line.find("non-default args: {") != std::string::npos) {
      evidence_.non_default_args_line = ToValidUtf8(line);
    }
    ++evidence_.lines;
    // The log file keeps the engine's bytes; the tail becomes evidence (JSON), so it is UTF-8.
    tail_.push_back(ToValidUtf8(line));
    while (tail_.size() > options_.tail_lines) tail_.pop_front();
  }

  const pid_t pid_;
  const int out_fd_;
  const ProcessOptions options_;

  mutable Mutex wait_mu_;
  std::optional<ExitInfo> exit_ ABSL_GUARDED_BY(wait_mu_);
  mutable Mutex kill_mu_;
  bool killed_ ABSL_GUARDED_BY(kill_mu_) = false;
  bool killed_by_us_ ABSL_GUARDED_BY(kill_mu_) = false;
  mutable Mutex log_mu_;
  std::deque<std::string> tail_ ABSL_GUARDED_BY(log_mu_);
  LogEvidence evidence_ ABSL_GUARDED_BY(log_mu_);
  std::ofstream log_ ABSL_GUARDED_BY(log_mu_);
  std::atomic<bool> stop_reader_{false};
  std::atomic<bool> reader_done_{false};
  std::thread reader_;  // reads out_fd_; joined in the destructor
};

EngineProcess::EngineProcess(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EngineProcess::~EngineProcess() = default;

absl::StatusOr<std::unique_ptr<EngineProcess>> EngineProcess::Start(const LaunchSpec& spec,
                                                                    const ProcessOptions& options) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return absl::InvalidArgumentError("engine launch: empty argv");
  }
  // Everything the child needs is prepared before fork: after fork only async-signal-safe calls.
  std::vector<std::string> env_strings = ChildEnvironment(spec, environ);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  long max_fd = std::min<long>(sysconf(_SC_OPEN_MAX), 65536);

  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(Cat("engine launch: pipe: ", ErrnoText(errno)));
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    close(out_pipe[0]);
    close(out_pipe[1]);
    return absl::InternalError(Cat("engine launch: pipe: ", ErrnoText(err)));
  }
  int stdout_fd = -1;
  if (!options.stdout_file.empty()) {
    stdout_fd = open(options.stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (stdout_fd < 0) {
      int err = errno;
      for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
      return absl::InternalError(
          Cat("engine launch: cannot create ", options.stdout_file, ": ", ErrnoText(err)));
    }
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], stdout_fd}) {
      if (fd >= 0) close(fd);
    }
    return absl::InternalError(Cat("engine launch: fork: ", ErrnoText(err)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    signal(SIGPIPE, SIG_DFL);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(stdout_fd >= 0 ? stdout_fd : out_pipe[1], 1);
    dup2(out_pipe[1], 2);
    for (long fd = 3; fd < max_fd; ++fd) {
      if (fd != err_pipe[1]) close(static_cast<int>(fd));
    }
    execvpe(argv[0], argv.data(), envp.data());
    int err = errno;
    ssize_t ignored = write(err_pipe[1], &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so a kill right after Start reaches the group
  if (stdout_fd >= 0) close(stdout_fd);
  close(out_pipe[1]);
  close(err_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(err_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    int status = 0;
    waitpid(pid, &status, 0);
    close(out_pipe[0]);
    std::string message =
        Cat("engine launch: cannot execute \"", spec.argv[0], "\": ", ErrnoText(child_errno));
    if (child_errno == ENOENT) return absl::NotFoundError(message);
    return absl::FailedPreconditionError(message);
  }
  return std::unique_ptr<EngineProcess>(
      new EngineProcess(std::make_unique<Impl>(pid, out_pipe[0], options)));
}

int EngineProcess::pid() const { return impl_->pid(); }
std::optional<ExitInfo> EngineProcess::Poll() { return impl_->Poll(); }
void EngineProcess::Kill() noexcept { impl_->Kill(); }
LogEvidence EngineProcess::Evidence() const { return impl_->Evidence(); }
std::vector<std::string> EngineProcess::LogTail() const { return impl_->LogTail(); }

std::string EngineProcess::DescribeExit(const ExitInfo& info) const {
  impl_->DrainAfterExit(std::chrono::milliseconds(500));
  std::string out = info.Describe();
  LogEvidence evidence = impl_->Evidence();
  if (evidence.out_of_memory) {
    out += " after reporting out of memory";
  } else if (info.signaled && info.code == SIGKILL && !impl_->killed_by_us()) {
    out += " (SIGKILL not sent by ladder: possibly the kernel's OOM killer)";
  }
  return out;
}

namespace {
absl::StatusOr<sockaddr_in> Ipv4Address(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, h.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(Cat("engine host \"", host, "\" is not an IPv4 address"));
  }
  return addr;
}
}  // namespace

absl::StatusOr<int> PickFreePort(const std::string& host) {
  auto addr = Ipv4Address(host, 0);
  if (!addr.ok()) return addr.status();
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(Cat("socket: ", ErrnoText(errno)));
  if (bind(fd, reinterpret_cast<sockaddr*>(&*addr), sizeof *addr) != 0) {
    int err = errno;
    close(fd);
    return absl::InternalError(Cat("bind ", host, ":0: ", ErrnoText(err)));
  }
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  close(fd);
  return static_cast<int>(ntohs(bound.sin_port));
}

absl::Status CheckPortFree(const std::string& host, int port) {
  auto addr = Ipv4Address(host, port);
  if (!addr.ok()) return addr.status();
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(Cat("socket: ", ErrnoText(errno)));
  int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // TIME_WAIT is not "taken"
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&*addr), sizeof *addr);
  int err = errno;
  close(fd);
  if (rc != 0) {
    return absl::FailedPreconditionError(
        Cat("port ", port, " on ", host, " is already in use (", ErrnoText(err), ")"));
  }
  return absl::OkStatus();
}

}  // namespace ladder::engines
