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
#include <tuple>

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

// Drops terminal control sequences (ESC [ ... letter): nvidia-smi underlines its topology header
// with them even when its output is a pipe.
std::string WithoutEscapes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !absl::ascii_isalpha(static_cast<unsigned char>(text[i]))) ++i;
      continue;
    }
    out.push_back(text[i]);
  }
  return out;
}

std::vector<std::string> Words(const std::string& line) {
  return absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
}

// "GPU3" -> 3; -1 for anything else.
int GpuLabel(const std::string& word) {
  int index = -1;
  if (word.rfind("GPU", 0) != 0 || !absl::SimpleAtoi(word.substr(3), &index)) return -1;
  return index;
}

// A link kind as the tools print it: a short word of letters and digits ("NV18", "XGMI").
bool IsLinkKind(const std::string& word) {
  return !word.empty() && word.size() <= 16 &&
         std::all_of(word.begin(), word.end(), [](char c) { return absl::ascii_isalnum(c); });
}

// Reads a GPU x GPU matrix whose header line is `lines[header]` (GPU0 GPU1 ... then anything)
// and whose rows follow, each "GPUi v0 v1 ...", until a line that is not a GPU row. Cells on
// the diagonal are skipped; each pair is read from the upper triangle and checked against the
// lower one.
GpuTopologyResult ParseMatrix(const std::vector<std::string>& lines, size_t header,
                              const std::string& tool) {
  GpuTopologyResult result;
  const std::vector<std::string> columns = Words(lines[header]);
  int n = 0;
  while (n < static_cast<int>(columns.size()) && GpuLabel(columns[static_cast<size_t>(n)]) == n)
    ++n;
  std::map<std::pair<int, int>, std::string> cells;
  for (size_t i = header + 1; i < lines.size(); ++i) {
    const std::vector<std::string> words = Words(lines[i]);
    const int row = words.empty() ? -1 : GpuLabel(words[0]);
    if (row < 0) break;
    if (row >= n || static_cast<int>(words.size()) < n + 1) {
      result.problems.push_back(absl::StrCat(tool, ": row ", words[0], " does not fit the ", n,
                                             " GPU columns: ", Trimmed(lines[i])));
      continue;
    }
    for (int column = 0; column < n; ++column) {
      if (column != row) cells[{row, column}] = words[static_cast<size_t>(column) + 1];
    }
  }
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      auto upper = cells.find({a, b});
      if (upper == cells.end()) {
        result.problems.push_back(absl::StrCat(tool, ": no row for GPU", a));
        break;
      }
      auto lower = cells.find({b, a});
      if (lower != cells.end() && lower->second != upper->second) {
        result.problems.push_back(absl::StrCat(tool, ": GPU", a, "-GPU", b, " is ", upper->second,
                                               " but GPU", b, "-GPU", a, " is ", lower->second));
      }
      if (!IsLinkKind(upper->second)) {
        result.problems.push_back(
            absl::StrCat(tool, ": GPU", a, "-GPU", b, ": not a link type: ", upper->second));
        continue;
      }
      result.links.push_back(GpuLink{a, b, upper->second});
    }
  }
  return result;
}

std::vector<std::string> Lines(std::string_view output) {
  return absl::StrSplit(WithoutEscapes(output), '\n');
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

std::vector<std::string> NvidiaTopologyCommand() { return {"nvidia-smi", "topo", "-m"}; }

GpuTopologyResult ParseNvidiaTopology(std::string_view output) {
  const std::vector<std::string> lines = Lines(output);
  for (size_t i = 0; i < lines.size(); ++i) {
    // The header is "GPU0 GPU1 ... CPU Affinity ..."; GPU0's row is "GPU0 X NV18 ...".
    const std::vector<std::string> words = Words(lines[i]);
    if (!words.empty() && words[0] == "GPU0" && (words.size() == 1 || words[1] != "X")) {
      return ParseMatrix(lines, i, "nvidia-smi topo -m");
    }
  }
  GpuTopologyResult result;
  if (!Trimmed(output).empty()) {
    result.problems.push_back(
        absl::StrCat("nvidia-smi topo -m printed no GPU matrix: ", Trimmed(output.substr(0, 200))));
  }
  return result;
}

std::vector<std::string> RocmTopologyCommand() { return {"rocm-smi", "--showtopo"}; }

GpuTopologyResult ParseRocmTopology(std::string_view output) {
  const std::vector<std::string> lines = Lines(output);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (absl::AsciiStrToLower(lines[i]).find("link type between two gpus") == std::string::npos) {
      continue;
    }
    for (size_t h = i + 1; h < lines.size(); ++h) {
      const std::vector<std::string> words = Words(lines[h]);
      if (words.empty()) continue;
      if (GpuLabel(words[0]) == 0 && (words.size() == 1 || GpuLabel(words[1]) == 1)) {
        return ParseMatrix(lines, h, "rocm-smi --showtopo");
      }
      break;
    }
  }
  GpuTopologyResult result;
  if (!Trimmed(output).empty()) {
    result.problems.push_back(
        "rocm-smi --showtopo printed no \"Link Type between two GPUs\" matrix");
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

GpuTopologyResult QueryTopology(const CommandRunner& run, const std::vector<GpuInfo>& gpus) {
  GpuTopologyResult all;
  int offset = 0;  // QueryGpus lists NVIDIA's GPUs first
  for (const auto& [vendor, command, parse] :
       {std::tuple{std::string("nvidia"), NvidiaTopologyCommand(), &ParseNvidiaTopology},
        std::tuple{std::string("amd"), RocmTopologyCommand(), &ParseRocmTopology}}) {
    // A named copy: clang before 16 cannot capture a structured binding in a lambda.
    const std::string& this_vendor = vendor;
    const int count = static_cast<int>(std::count_if(
        gpus.begin(), gpus.end(), [&](const GpuInfo& g) { return g.vendor == this_vendor; }));
    if (count >= 2) {
      std::optional<std::string> output = run(command);
      if (output) {
        GpuTopologyResult one = parse(*output);
        for (const auto& link : one.links) {
          if (link.b >= count) {
            all.problems.push_back(absl::StrCat(command[0], " reports a link to GPU", link.b,
                                                " but lists ", count, " GPUs"));
            continue;
          }
          all.links.push_back(GpuLink{link.a + offset, link.b + offset, link.kind});
        }
        for (auto& problem : one.problems) all.problems.push_back(std::move(problem));
      }
    }
    offset += count;
  }
  return all;
}

}  // namespace ladder::agent
