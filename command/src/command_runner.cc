#include "ladder/command/command_runner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fmt/format.h"
#include "ladder/command/output.h"
#include "ladder/common/utf8.h"
#include "ladder/engines/process.h"
#include "ladder/engines/recipe.h"
#include "ladder/matrices/matrix.h"
#include "ladder/runner/environment.h"
#include "ladder/runner/schema.h"
#include "ladder/status_macros.h"

namespace ladder::command {
namespace {

namespace fs = std::filesystem;

// What one start may leave behind to be read: more is cut (and said so), not parsed.
constexpr size_t kMaxOutputBytes = 64 << 20;
// Evidence objects a program prints are kept up to this size each (the store takes 64 KiB).
constexpr size_t kMaxProgramEvidenceBytes = 32 << 10;

std::string Trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return std::string(s);
}

// Reads at most kMaxOutputBytes of `path`; "" when it does not exist.
std::string ReadCapped(const fs::path& path, bool* cut) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string text(kMaxOutputBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  *cut = text.size() > kMaxOutputBytes;
  if (*cut) text.resize(kMaxOutputBytes);
  return text;
}

std::vector<std::string> LastLines(std::string_view text, size_t count) {
  std::vector<std::string> lines;
  size_t end = text.size();
  while (end > 0 && lines.size() < count) {
    size_t start = text.rfind('\n', end - 1);
    start = start == std::string_view::npos ? 0 : start + 1;
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    if (line.size() > 4096) line = line.substr(0, 4096);
    lines.push_back(ToValidUtf8(line));
    if (start == 0) break;
    end = start - 1;
  }
  std::reverse(lines.begin(), lines.end());
  return lines;
}

int64_t CountOccurrenceLines(std::string_view text, const std::string& pattern) {
  int64_t count = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (text.substr(start, end - start).find(pattern) != std::string_view::npos) ++count;
    start = end + 1;
  }
  return count;
}

// A scratch folder for one start, removed when it goes out of scope.
class ScratchDir {
 public:
  static absl::StatusOr<ScratchDir> Create(const std::string& parent) {
    std::string base = parent;
    if (base.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    std::string pattern = (fs::path(base) / "ladder-command-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create a scratch folder under ", base, ": ",
                                              std::generic_category().message(errno)));
    }
    return ScratchDir(pattern);
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir() {
    if (path_.empty()) return;
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  explicit ScratchDir(fs::path path) : path_(std::move(path)) {}
  fs::path path_;
};

class CommandRunner final : public runner::Runner {
 public:
  explicit CommandRunner(CommandRunnerOptions options) : options_(std::move(options)) {}

  std::string_view name() const override { return "command"; }

  absl::Status Run(const runner::UnitWork& unit, runner::MeasurementSink& sink) override {
    const nlohmann::json config_json =
        nlohmann::json::parse(unit.runner_config, nullptr, /*allow_exceptions=*/false);
    auto config = matrices::RunnerConfigFromJson(config_json);
    if (!config.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the lease carries no readable command configuration: ", config.status().message()));
    }
    const matrices::CommandSpec& command = config->command;
    // The program of each cell: `bench` names one, or is a template of the cell's parameters
    // ("{build}": two registered builds as the arms of a paired axis). Every cell's is found
    // before anything starts.
    std::vector<std::pair<std::string, std::string>> programs;  // per cell: name, path
    for (const runner::CellWork& cell : unit.cells) {
      auto name = matrices::RenderTemplate(command.bench, [&](std::string_view n) {
        return cell.params.is_object() && cell.params.contains(std::string(n))
                   ? std::optional<std::string>(
                         matrices::ValueToString(cell.params[std::string(n)]))
                   : std::nullopt;
      });
      if (!name.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("cell ", cell.key, ": bench ", command.bench,
                                                       ": ", name.status().message()));
      }
      auto program = options_.programs.find(*name);
      if (program == options_.programs.end()) {
        std::vector<std::string> names;
        for (const auto& [known, path] : options_.programs) names.push_back(known);
        return absl::FailedPreconditionError(absl::StrCat(
            "this agent has no bench \"", *name,
            "\" (it registered: ", names.empty() ? std::string("none") : absl::StrJoin(names, ", "),
            "); start it with --bench ", *name, "=PATH"));
      }
      programs.emplace_back(*name, program->second);
    }
    const std::optional<OutputFormat> format = FormatFromName(command.format);
    if (!format) {
      return absl::InvalidArgumentError(absl::StrCat("unknown output format ", command.format));
    }
    for (const auto& [name, value] : command.extra_env) {
      if (runner::IsAgentOwnedEnvironment(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, " is the agent's; a cell cannot set it"));
      }
    }
    Start start{unit, sink, *config, programs, *format, runner::CommandSchema(config->metrics)};
    const int cells = static_cast<int>(unit.cells.size());
    for (int p = 0; p < unit.processes; ++p) {
      if (command.start == matrices::CommandSpec::Start::kPerProcess) {
        for (int index : runner::InterleavedOrder(cells, unit.seed, p, 0)) {
          RETURN_IF_ERROR(RunStart(start, index, p, std::nullopt));
        }
        continue;
      }
      for (int r = 0; r < unit.rounds; ++r) {
        for (int index : runner::InterleavedOrder(cells, unit.seed, p, r)) {
          RETURN_IF_ERROR(RunStart(start, index, p, r));
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  struct Start {
    const runner::UnitWork& unit;
    runner::MeasurementSink& sink;
    const matrices::RunnerConfig& config;
    const std::vector<std::pair<std::string, std::string>>& programs;  // per cell: name, path
    OutputFormat format;
    runner::RunnerSchema schema;
  };

  // One start of the program for cell `cell_index` and process `p`; `round` set with start:
  // per_round.
  absl::Status RunStart(const Start& s, int cell_index, int p, std::optional<int> round) {
    if (s.sink.Cancelled()) return absl::CancelledError("cancelled");
    const runner::CellWork& cell = s.unit.cells[cell_index];
    const std::string& bench = s.programs[cell_index].first;
    const matrices::CommandSpec& command = s.config.command;
    const int rounds_here = round ? 1 : s.unit.rounds;
    ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::Create(options_.scratch_dir));
    const fs::path out_file = scratch.path() / "out";
    const fs::path stdout_file = scratch.path() / "stdout";
    auto lookup = [&](std::string_view name) -> std::optional<std::string> {
      if (name == "process") return std::to_string(p);
      if (name == "round")
        return round ? std::optional<std::string>(std::to_string(*round)) : std::nullopt;
      if (name == "rounds") return std::to_string(rounds_here);
      if (name == "seed") return std::to_string(s.unit.seed);
      if (name == "out") return out_file.string();
      if (cell.params.is_object() && cell.params.contains(std::string(name))) {
        return matrices::ValueToString(cell.params[std::string(name)]);
      }
      return std::nullopt;
    };
    const std::string where =
        round ? fmt::format("cell {}, process {}, round {}", cell.key, p, *round)
              : fmt::format("cell {}, process {}", cell.key, p);
    engines::LaunchSpec launch;
    launch.argv.push_back(s.programs[cell_index].second);
    for (const std::string& arg : command.args) {
      auto rendered = matrices::RenderTemplate(arg, lookup);
      if (!rendered.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", rendered.status().message()));
      }
      launch.argv.push_back(std::move(*rendered));
    }
    for (const auto& [name, value] : command.extra_env) {
      auto rendered = matrices::RenderTemplate(value, lookup);
      if (!rendered.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", rendered.status().message()));
      }
      launch.env.emplace_back(name, std::move(*rendered));
    }
    engines::ProcessOptions process_options;
    process_options.probe_patterns = command.probe_patterns;
    if (process_options.probe_patterns.empty()) {
      process_options.probe_patterns = {"PROBE_3D_SPEC_ACTIVE"};
    }
    process_options.tail_lines = options_.tail_lines;
    process_options.kill_grace = options_.kill_grace;
    process_options.stdout_file = stdout_file.string();

    std::unique_lock<std::mutex> turn;
    if (options_.device_turn != nullptr) {
      turn = std::unique_lock<std::mutex>(*options_.device_turn, std::defer_lock);
      while (!turn.try_lock()) {  // not lock(): a cancel must not wait for another agent's start
        if (s.sink.Cancelled()) return absl::CancelledError("cancelled");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    const auto began = std::chrono::steady_clock::now();
    auto process = engines::EngineProcess::Start(launch, process_options);
    if (!process.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": bench ", bench, ": ", process.status().message()));
    }
    const auto deadline =
        began + std::chrono::milliseconds(static_cast<int64_t>(command.timeout_s * 1000));
    std::optional<engines::ExitInfo> exit;
    bool timed_out = false;
    // The program runs alone; the agent only looks in every few milliseconds (the cost of being
    // run by ladder is measured in docs/command-runner.md).
    while (!(exit = (*process)->Poll())) {
      if (s.sink.Cancelled()) {
        (*process)->Kill();
        return absl::CancelledError("cancelled");
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        timed_out = true;
        (*process)->Kill();
        exit = (*process)->Poll();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    // DescribeExit first lets the stderr reader drain what the program wrote last (probes, the
    // tail); Kill then ends whatever the program left running in its group.
    const std::string exit_text = exit ? (*process)->DescribeExit(*exit) : std::string();
    (*process)->Kill();

    bool stdout_cut = false, out_cut = false;
    const std::string stdout_text = ReadCapped(stdout_file, &stdout_cut);
    const std::string out_text = ReadCapped(out_file, &out_cut);
    const bool from_out_file = !out_text.empty();
    const std::string& document = from_out_file ? out_text : stdout_text;

    engines::LogEvidence log = (*process)->Evidence();
    for (auto& [pattern, count] : log.probe_counts) {
      count += CountOccurrenceLines(stdout_text, pattern);
    }
    nlohmann::json start_evidence = {
        {"bench", bench},
        {"argv", launch.argv},
        {"seconds", seconds},
        {"stdout_bytes", stdout_text.size()},
        {"parsed", from_out_file ? "{out}" : "stdout"},
    };
    if (round) start_evidence["round"] = *round;
    if (exit) start_evidence["exit"] = exit_text;

    auto fail = [&](std::string reason) -> absl::Status {
      std::vector<std::string> tail = (*process)->LogTail();
      std::vector<std::string> out_tail = LastLines(stdout_text, options_.tail_lines);
      start_evidence["failure"] = reason;
      (void)s.sink.RecordEvidence(
          runner::Evidence{cell.cell_id, p, "command_start", start_evidence});
      (void)s.sink.RecordEvidence(runner::Evidence{
          cell.cell_id, p, "log_tail", nlohmann::json{{"stderr", tail}, {"stdout", out_tail}}});
      (void)s.sink.RecordEvidence(runner::Evidence{cell.cell_id, p, "failure", reason});
      return absl::AbortedError(absl::StrCat(where, ": ", reason));
    };

    if (timed_out) {
      return fail(fmt::format("bench {} ran past its timeout_s of {:g} s and was killed", bench,
                              command.timeout_s));
    }
    if (!exit) return fail(absl::StrCat("bench ", bench, " did not end"));
    if (exit->signaled || exit->code != 0) {
      return fail(absl::StrCat("bench ", bench, " ", exit_text));
    }
    if ((from_out_file ? out_cut : stdout_cut)) {
      return fail(
          fmt::format("bench {} wrote more than {} MiB of output; ladder reads at most that", bench,
                      kMaxOutputBytes >> 20));
    }
    auto parsed = ParseOutput(s.format, document);
    if (!parsed.ok()) {
      return fail(absl::StrCat(std::string(FormatName(s.format)), " output of bench ", bench, ": ",
                               parsed.status().message()));
    }
    start_evidence["ignored_lines"] = parsed->ignored_lines;

    // File every sample into its slot, checking it against the declarations, before recording
    // any: a start either counts whole or fails.
    std::map<std::string, const matrices::MetricDeclaration*> declared;
    for (const auto& d : s.config.metrics) declared[d.name] = &d;
    std::map<std::pair<std::string, int>, double> slots;  // (metric, round) -> value
    std::map<std::string, int> seen;                      // metric -> samples so far
    std::set<std::string> ignored;
    for (const Sample& sample : parsed->samples) {
      auto it = declared.find(sample.metric);
      if (it == declared.end()) {
        if (s.format != OutputFormat::kJsonLines) {
          // An adapter reports every number its format has; the matrix picks what it keeps.
          ignored.insert(sample.metric);
          continue;
        }
        std::vector<std::string> names;
        for (const auto& d : s.config.metrics) names.push_back(d.name);
        return fail(fmt::format(
            "bench {} printed metric \"{}\", which the matrix does not declare (declared: {}); "
            "declare it under `metrics` or stop printing it",
            bench, ToValidUtf8(sample.metric.substr(0, 64)), absl::StrJoin(names, ", ")));
      }
      const matrices::MetricDeclaration& d = *it->second;
      double value = sample.value;
      if (!sample.unit.empty() && sample.unit != d.unit) {
        std::optional<double> converted = ConvertTime(value, sample.unit, d.unit);
        if (!converted) {
          return fail(fmt::format("bench {} reports {} in {}; the matrix declares it in {}", bench,
                                  d.name, ToValidUtf8(sample.unit), d.unit));
        }
        value = *converted;
      }
      const int index = seen[d.name]++;
      int slot_round = 0;
      if (round) {
        if (index > 0) {
          return fail(fmt::format(
              "bench {} printed more than one value of {} in one start; with start: per_round "
              "each start reports one value per metric",
              bench, d.name));
        }
        slot_round = *round;
      } else {
        slot_round = sample.round.value_or(index);
        if (slot_round >= s.unit.rounds) {
          return fail(fmt::format(
              "bench {} printed round {} of {}; the design has {} round{} (0..{}): pass "
              "{{rounds}} to the program",
              bench, slot_round, d.name, s.unit.rounds, s.unit.rounds == 1 ? "" : "s",
              s.unit.rounds - 1));
        }
      }
      const runner::MetricSpec* spec = s.schema.FindMetric(d.name);
      if (std::string why = spec->range.Check(d.name, value, d.unit); !why.empty()) {
        return fail(absl::StrCat("bench ", bench, " printed ", why));
      }
      if (!slots.emplace(std::make_pair(d.name, slot_round), value).second) {
        return fail(
            fmt::format("bench {} printed round {} of {} twice", bench, slot_round, d.name));
      }
    }
    for (const auto& d : s.config.metrics) {
      if (!d.required) continue;
      std::vector<int> missing;
      for (int r = 0; r < rounds_here; ++r) {
        const int slot_round = round ? *round : r;
        if (slots.count({d.name, slot_round}) == 0) missing.push_back(slot_round);
      }
      if (missing.empty()) continue;
      if (static_cast<int>(missing.size()) == rounds_here) {
        return fail(fmt::format(
            "bench {} printed no value of {}, a required metric ({} line{} of output, {} "
            "ignored)",
            bench, d.name, std::count(document.begin(), document.end(), '\n'),
            std::count(document.begin(), document.end(), '\n') == 1 ? "" : "s",
            parsed->ignored_lines));
      }
      return fail(fmt::format("bench {} printed {} of {} rounds of {} (missing round {})", bench,
                              rounds_here - static_cast<int>(missing.size()), rounds_here, d.name,
                              missing.front()));
    }

    if (!ignored.empty()) start_evidence["metrics_not_declared"] = ignored;
    RETURN_IF_ERROR(
        s.sink.RecordEvidence(runner::Evidence{cell.cell_id, p, "command_start", start_evidence}));
    RETURN_IF_ERROR(
        s.sink.RecordEvidence(runner::Evidence{cell.cell_id, p, "probe_counts", log.probe_counts}));
    for (const EvidenceItem& item : parsed->evidence) {
      nlohmann::json value = item.value;
      const std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      if (text.size() > kMaxProgramEvidenceBytes) {
        value = {{"truncated", true}, {"bytes", text.size()}, {"start", text.substr(0, 1024)}};
      }
      RETURN_IF_ERROR(s.sink.RecordEvidence(runner::Evidence{cell.cell_id, p, item.kind, value}));
    }
    for (const auto& [slot, value] : slots) {
      const matrices::MetricDeclaration& d = *declared.at(slot.first);
      RETURN_IF_ERROR(
          s.sink.Record(runner::Measurement{cell.cell_id, p, slot.second, d.name, value, d.unit}));
    }
    return absl::OkStatus();
  }

  const CommandRunnerOptions options_;
};

}  // namespace

absl::Status BenchRegistry::Add(std::string_view name_equals_path) {
  const size_t eq = name_equals_path.find('=');
  if (eq == std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bench ", std::string(name_equals_path),
                     ": expected NAME=PATH, e.g. attn=/opt/bench/attn.py"));
  }
  const std::string name(name_equals_path.substr(0, eq));
  const std::string path(name_equals_path.substr(eq + 1));
  if (!matrices::IsBenchName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bench ", name,
                     "=...: a bench name matches [a-z0-9_.-]{1,57} (matrices name it in "
                     "bench)"));
  }
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--bench ", name, "=: the path is empty"));
  }
  std::error_code error;
  const fs::path absolute = fs::canonical(path, error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bench ", name, "=", path, ": ", error.message()));
  }
  struct stat info {};
  if (stat(absolute.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bench ", name, "=", path, ": not a regular file"));
  }
  if (access(absolute.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--bench ", name, "=", path, ": not executable (chmod +x it, or give a script a #! line)"));
  }
  auto [it, inserted] = programs_.emplace(name, absolute.string());
  if (!inserted && it->second != absolute.string()) {
    return absl::AlreadyExistsError(
        absl::StrCat("--bench ", name, ": already registered as ", it->second));
  }
  return absl::OkStatus();
}

absl::Status BenchRegistry::AddFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("--bench-file ", path, ": ", std::generic_category().message(errno)));
  }
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string text = Trimmed(line);
    if (text.empty() || text[0] == '#') continue;
    if (absl::Status s = Add(text); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(path, ":", number, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<runner::Runner> MakeCommandRunner(CommandRunnerOptions options) {
  return std::make_unique<CommandRunner>(std::move(options));
}

}  // namespace ladder::command
