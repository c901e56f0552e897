#include "ladder/engines/engine_version.h"

#include <cctype>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "ladder/common/utf8.h"
#include "ladder/engines/process.h"
#include "ladder/status_macros.h"
#include "message.h"

namespace ladder::engines {

using internal::Cat;

namespace {

bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// The first dotted number with at least two components ("0.15.1", "0.5.4.post1") at the start
// of a whitespace-separated word, with its suffix up to the next space.
std::optional<std::string> FirstDottedVersion(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    bool word_start =
        i == 0 || std::isspace(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == 'v';
    if (!word_start || !IsDigit(text[i])) continue;
    size_t j = i;
    while (j < text.size() && IsDigit(text[j])) ++j;
    if (j + 1 >= text.size() || text[j] != '.' || !IsDigit(text[j + 1])) continue;
    size_t end = j;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
    return std::string(text.substr(i, end - i));
  }
  return std::nullopt;
}

std::optional<int> LeadingInt(std::string_view text) {
  size_t n = 0;
  while (n < text.size() && IsDigit(text[n])) ++n;
  if (n == 0 || n > 9) return std::nullopt;
  return std::stoi(std::string(text.substr(0, n)));
}

// The start of a command's output, for a message: one line, valid UTF-8 (it becomes the
// `engine_version_detected` evidence; found by ladder-fuzz-engine).
std::string Start(std::string_view output) {
  std::string s = ToValidUtf8(output.substr(0, 120));
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

}  // namespace

std::optional<int> LlamaCppBuild(std::string_view version) {
  if (!version.empty() && (version[0] == 'b' || version[0] == 'B')) version.remove_prefix(1);
  auto build = LeadingInt(version);
  if (!build.has_value() || static_cast<size_t>(std::to_string(*build).size()) != version.size()) {
    return std::nullopt;
  }
  return build;
}

std::optional<int> KnownLlamaCppBuild(std::string_view version) {
  std::optional<int> build = LlamaCppBuild(version);
  if (build.has_value() && *build <= 1) return std::nullopt;
  return build;
}

absl::StatusOr<std::string> ParseEngineVersion(std::string_view engine, std::string_view output) {
  if (engine == "llama.cpp") {
    // "version: 7100 (c49daff5b)" or, in later builds, "version: 0.1.2-dev (build 10513, ...)".
    size_t at = output.find("version: ");
    if (at != std::string_view::npos) {
      std::string_view rest = output.substr(at + 9);
      size_t build_at = rest.find("(build ");
      size_t line_end = rest.find('\n');
      if (build_at != std::string_view::npos && build_at < line_end) {
        if (auto build = LeadingInt(rest.substr(build_at + 7))) return Cat("b", *build);
      }
      if (auto build = LeadingInt(rest)) {
        // A bare build number has no dot after it ("7100 (hash)").
        size_t digits = std::to_string(*build).size();
        if (digits >= rest.size() || rest[digits] != '.') return Cat("b", *build);
      }
    }
    return absl::NotFoundError(Cat(
        "llama.cpp: no \"version: BUILD\" in the output of --version: \"", Start(output), "\""));
  }
  if (engine == "vllm" || engine == "sglang") {
    if (auto v = FirstDottedVersion(output)) return *v;
    return absl::NotFoundError(Cat(
        engine, ": no version number in the version command's output: \"", Start(output), "\""));
  }
  return absl::NotFoundError(Cat(engine, ": the version of this engine is not probed"));
}

std::optional<LaunchSpec> VersionCommand(std::string_view engine, const RecipeContext& context) {
  LaunchSpec spec;
  if (engine == "vllm") {
    spec.argv = {context.vllm_executable, "--version"};
  } else if (engine == "llama.cpp") {
    spec.argv = {context.llama_server_executable, "--version"};
  } else if (engine == "sglang") {
    // SGLang's server has no --version; the package says it without starting a model.
    spec.argv = {context.python_executable, "-c", "import sglang; print(sglang.__version__)"};
  } else {
    return std::nullopt;
  }
  return spec;
}

namespace {

// Runs `spec` to its end and returns its output (stdout and stderr, lines joined by '\n') and
// how it ended. Unavailable when it cannot start or outlives `timeout`.
struct CommandOutput {
  std::string text;
  std::string how;
};
absl::StatusOr<CommandOutput> RunToEnd(std::string_view engine, const LaunchSpec& spec_in,
                                       std::string_view what, std::chrono::milliseconds timeout,
                                       size_t max_lines) {
  const LaunchSpec* spec = &spec_in;
  ProcessOptions options;
  options.probe_patterns.clear();
  options.kill_grace = std::chrono::milliseconds(500);
  options.tail_lines = max_lines;
  auto process = EngineProcess::Start(*spec, options);
  if (!process.ok()) {
    return absl::UnavailableError(Cat(engine, ": cannot run ", spec->argv[0], " for its ", what,
                                      ": ", process.status().message()));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<ExitInfo> exit;
  while (!(exit = (*process)->Poll()).has_value()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      (*process)->Kill();
      return absl::UnavailableError(Cat(engine, ": ", absl::StrJoin(spec->argv, " "),
                                        " did not exit within ",
                                        std::chrono::duration<double>(timeout).count(), " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // DescribeExit first: it waits until the reader has taken the last lines.
  CommandOutput out;
  out.how = (*process)->DescribeExit(*exit);
  out.text = absl::StrJoin((*process)->LogTail(), "\n");
  return out;
}

}  // namespace

absl::StatusOr<std::string> DetectEngineVersion(std::string_view engine,
                                                const RecipeContext& context,
                                                std::chrono::milliseconds timeout) {
  std::optional<LaunchSpec> spec = VersionCommand(engine, context);
  if (!spec.has_value()) return ParseEngineVersion(engine, "");
  ASSIGN_OR_RETURN(CommandOutput output, RunToEnd(engine, *spec, "version", timeout, 200));
  auto version = ParseEngineVersion(engine, output.text);
  if (!version.ok()) {
    return absl::UnavailableError(Cat(version.status().message(), " (", output.how, ")"));
  }
  return version;
}

std::optional<LaunchSpec> HelpCommand(std::string_view engine, const RecipeContext& context) {
  LaunchSpec spec;
  if (engine == "llama.cpp") {
    spec.argv = {context.llama_server_executable, "--help"};
  } else if (engine == "vllm") {
    // Newer vLLM prints only its option groups for a plain --help and every option for
    // --help=all (vllm/entrypoints/utils.py, VLLM_SUBCMD_PARSER_EPILOG: "For full list:
    // vllm {subcmd} --help=all"); an older one refuses "=all" and DetectCapabilities falls back
    // to a plain --help.
    spec.argv = {context.vllm_executable, "serve", "--help=all"};
  } else if (engine == "sglang") {
    spec.argv = {context.python_executable, "-m", "sglang.launch_server", "--help"};
  } else {
    return std::nullopt;
  }
  return spec;
}

namespace {

absl::StatusOr<EngineCapabilities> ParseHelpOf(std::string_view engine, const LaunchSpec& spec,
                                               const std::string& text) {
  if (engine == "llama.cpp") return ParseLlamaServerHelp(text);
  std::vector<std::string> words(spec.argv.begin(), spec.argv.end());
  if (!words.empty()) {
    const size_t slash = words[0].rfind('/');
    if (slash != std::string::npos) words[0] = words[0].substr(slash + 1);
  }
  return ParseArgparseHelp(text, absl::StrJoin(words, " "));
}

}  // namespace

absl::StatusOr<EngineCapabilities> DetectCapabilities(std::string_view engine,
                                                      const RecipeContext& context,
                                                      std::chrono::milliseconds timeout) {
  std::optional<LaunchSpec> spec = HelpCommand(engine, context);
  if (!spec.has_value()) {
    return absl::NotFoundError(Cat(engine, ": its --help is not read"));
  }
  // b10309's --help is 600 lines, vLLM's --help=all about 1500; keep far more.
  ASSIGN_OR_RETURN(CommandOutput output, RunToEnd(engine, *spec, "--help", timeout, 20000));
  auto caps = ParseHelpOf(engine, *spec, output.text);
  if (!caps.ok() && engine == "vllm") {
    // A vLLM from before --help=all: argparse says "ignored explicit argument 'all'".
    LaunchSpec plain = *spec;
    plain.argv.back() = "--help";
    ASSIGN_OR_RETURN(CommandOutput again, RunToEnd(engine, plain, "--help", timeout, 20000));
    auto plain_caps = ParseHelpOf(engine, plain, again.text);
    if (plain_caps.ok()) return plain_caps;
  }
  if (!caps.ok()) {
    return absl::UnavailableError(Cat(caps.status().message(), " (", output.how, ")"));
  }
  return caps;
}

}  // namespace ladder::engines
