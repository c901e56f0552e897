#include "gpu_query.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace ladder::agent {
namespace {

// Debian's absl::string_view is not std::string_view: convert through std::string.
std::string Trimmed(std::string_view s) {
  return std::string(absl::StripAsciiWhitespace(std::string(s)));
}

// nvidia-smi and rocm-smi print these for a value the device or driver does not report.
bool IsNotAvailable(const std::string& value) {
  return value.empty() || value == "N/A" || value == "[N/A]" || value == "[Not Supported]";
}

// "9.0" -> "sm_90"; "" when `cap` is not MAJOR.MINOR digits.
std::string ArchFromComputeCap(const std::string& cap) {
  std::vector<std::string> parts = absl::StrSplit(cap, '.');
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) return "";
  for (const auto& part : parts) {
    if (!std::all_of(part.begin(), part.end(), absl::ascii_isdigit)) return "";
  }
  return absl::StrCat("sm_", parts[0], parts[1]);
}

// rocm-smi's key names change capitalisation between releases.
const nlohmann::json* FindKey(const nlohmann::json& card, std::string_view key) {
  const std::string wanted = absl::AsciiStrToLower(std::string(key));
  for (const auto& [name, value] : card.items()) {
    if (absl::AsciiStrToLower(name) == wanted) return &value;
  }
  return nullptr;
}

std::string StringAt(const nlohmann::json& card, std::string_view key) {
  const nlohmann::json* value = FindKey(card, key);
  if (value == nullptr) return "";
  std::string text = value->is_string() ? value->get<std::string>() : value->dump();
  text = Trimmed(text);
  return IsNotAvailable(text) ? "" : text;
}

}  // namespace

std::vector<std::string> NvidiaSmiCommand() {
  return {"nvidia-smi", "--query-gpu=name,uuid,memory.total,driver_version,compute_cap",
          "--format=csv,noheader,nounits"};
}

GpuQueryResult ParseNvidiaSmi(std::string_view output) {
  GpuQueryResult result;
  int line_number = 0;
  const std::string text(output);
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    const std::string line = Trimmed(std::string(raw));
    if (line.empty()) continue;
    std::vector<std::string> fields = absl::StrSplit(line, ',');
    if (fields.size() != 5) {
      result.problems.push_back(absl::StrCat("nvidia-smi line ", line_number,
                                             ": expected 5 fields (",
                                             "name, uuid, memory.total, driver_version, ",
                                             "compute_cap), got ", fields.size(), ": ", line));
      continue;
    }
    for (auto& field : fields) field = Trimmed(field);
    GpuInfo gpu;
    gpu.vendor = "nvidia";
    gpu.name = fields[0];
    gpu.uuid = IsNotAvailable(fields[1]) ? "" : fields[1];
    gpu.driver = IsNotAvailable(fields[3]) ? "" : fields[3];
    if (!absl::SimpleAtoi(fields[2], &gpu.memory_mib) || gpu.memory_mib < 0) {
      gpu.memory_mib = 0;
      result.problems.push_back(
          absl::StrCat("nvidia-smi line ", line_number, " (", gpu.name,
                       "): memory.total is not a number of MiB: ", fields[2]));
    }
    gpu.arch = ArchFromComputeCap(fields[4]);
    if (gpu.arch.empty()) {
      result.problems.push_back(absl::StrCat("nvidia-smi line ", line_number, " (", gpu.name,
                                             "): compute_cap is not MAJOR.MINOR: ", fields[4]));
    }
    result.gpus.push_back(std::move(gpu));
  }
  return result;
}

std::vector<std::string> RocmSmiCommand() {
  return {"rocm-smi", "--showproductname", "--showuniqueid", "--showmeminfo", "vram", "--json"};
}

GpuQueryResult ParseRocmSmi(std::string_view output) {
  GpuQueryResult result;
  if (Trimmed(output).empty()) return result;
  // Some ROCm releases print a warning line (a GPU in a low-power state) before the JSON.
  const size_t start = output.find('{');
  if (start == std::string_view::npos) {
    result.problems.push_back(
        absl::StrCat("rocm-smi printed no JSON: ", Trimmed(output.substr(0, 200))));
    return result;
  }
  nlohmann::json doc = nlohmann::json::parse(output.substr(start), nullptr,
                                             /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    result.problems.push_back(
        absl::StrCat("rocm-smi printed malformed JSON: ", Trimmed(output.substr(start, 200))));
    return result;
  }
  // "card10" sorts before "card2" as text; the agent reports GPUs in device order.
  std::map<int, const nlohmann::json*> cards;
  for (const auto& [key, card] : doc.items()) {
    int index = -1;
    if (key.rfind("card", 0) != 0 || !absl::SimpleAtoi(key.substr(4), &index) || index < 0) {
      continue;  // "system" holds driver-wide values, not a GPU
    }
    if (!card.is_object()) {
      result.problems.push_back(absl::StrCat("rocm-smi ", key, ": expected an object"));
      continue;
    }
    cards[index] = &card;
  }
  for (const auto& [index, card] : cards) {
    GpuInfo gpu;
    gpu.vendor = "amd";
    gpu.name = StringAt(*card, "Card Series");
    if (gpu.name.empty()) gpu.name = StringAt(*card, "Card Model");
    gpu.uuid = StringAt(*card, "Unique ID");
    gpu.arch = StringAt(*card, "GFX Version");
    const std::string vram = StringAt(*card, "VRAM Total Memory (B)");
    int64_t bytes = 0;
    if (absl::SimpleAtoi(vram, &bytes) && bytes >= 0) {
      gpu.memory_mib = bytes >> 20;
    } else {
      result.problems.push_back(absl::StrCat(
          "rocm-smi card", index,
          ": VRAM Total Memory (B) is not a number of bytes: ", vram.empty() ? "(missing)" : vram));
    }
    if (gpu.arch.empty()) {
      result.problems.push_back(
          absl::StrCat("rocm-smi card", index, ": no GFX Version (rocm-smi older than ROCm 5.7?)"));
    }
    result.gpus.push_back(std::move(gpu));
  }
  return result;
}

CommandRunner SystemCommandRunner() {
  return [](const std::vector<std::string>& argv) -> std::optional<std::string> {
    if (argv.empty()) return std::nullopt;
    std::string program = argv[0];
    if (program.find('/') == std::string::npos) {
      std::vector<std::string> folders;
      if (const char* path = std::getenv("PATH"))
        folders = absl::StrSplit(path, ':', absl::SkipEmpty());
      for (const char* extra : {"/usr/bin", "/usr/local/bin", "/opt/rocm/bin"}) {
        folders.emplace_back(extra);
      }
      std::string found;
      for (const auto& folder : folders) {
        const std::string candidate = absl::StrCat(folder, "/", program);
        if (access(candidate.c_str(), X_OK) == 0) {
          found = candidate;
          break;
        }
      }
      if (found.empty()) return std::nullopt;
      program = found;
    }
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return std::nullopt;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    const int spawned = posix_spawn(&pid, program.c_str(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[1]);
    if (spawned != 0) {
      close(pipe_fds[0]);
      return std::nullopt;
    }
    std::string out;
    std::array<char, 4096> buffer;
    while (true) {
      const ssize_t n = read(pipe_fds[0], buffer.data(), buffer.size());
      if (n > 0) {
        out.append(buffer.data(), static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        break;
      }
    }
    close(pipe_fds[0]);
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) return std::nullopt;
    return out;
  };
}

GpuQueryResult QueryGpus(const CommandRunner& run) {
  GpuQueryResult all;
  for (const auto& [command, parse] : {std::pair{NvidiaSmiCommand(), &ParseNvidiaSmi},
                                       std::pair{RocmSmiCommand(), &ParseRocmSmi}}) {
    std::optional<std::string> output = run(command);
    if (!output) continue;  // not installed, or no driver: no GPUs of that vendor
    GpuQueryResult one = parse(*output);
    for (auto& gpu : one.gpus) all.gpus.push_back(std::move(gpu));
    for (auto& problem : one.problems) all.problems.push_back(std::move(problem));
  }
  return all;
}

}  // namespace ladder::agent
