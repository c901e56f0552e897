// The llama.cpp recipe, the capability reader (capabilities.h) and the configuration check
// (engine_config.h) against every real llama-server recorded in fixtures/llama.cpp-b*-cpu/ (each
// folder's README says how): b4900, b8000 and b10587, three points of llama.cpp's history, and
// b10587's source built without its build number (version: build 0). Each folder holds
// what its server printed and served, byte for byte; every expectation below is read from those
// files (the build number from `--version`, the options from `--help`, the command line the
// server ran, the context `/props` reported), never from the recipe's own tables.
//
// A folder takes part when it has `help.txt`, `version.txt` and a `plain-server.log` whose first
// line is the command the server was started with (`$ llama-server ARGS`): the argv ladder
// rendered for kPlainCell on that build, and `plain-props.json`. Besides: a draft server
// (`draft-*`: DraftCell as rendered, or where the recipe refuses it, the same model given by hand,
// with `draft-cache-prompt-*` requested with cache_prompt: true), and `ctx-capped-*`
// (CappedCell: a context beyond the model's training context).
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "fixture_files.h"
#include "ladder/engines/capabilities.h"
#include "ladder/engines/client.h"
#include "ladder/engines/engine_config.h"
#include "ladder/engines/engine_version.h"
#include "ladder/engines/prometheus.h"
#include "ladder/engines/recipe.h"

namespace ladder::engines {
namespace {

using ::testing::HasSubstr;

// The cells of the CPU runs (docs/engines.md, "Three llama.cpp builds"): flash attention on with
// speculation off, the same with a draft model (k = 4), and a context larger than the tiny
// model's training context (65536).
const nlohmann::json kPlainCell = {{"engine", "llama.cpp"},
                                   {"depth", 512},
                                   {"model", "models/tiny.gguf"},
                                   {"gpu_layers", 99},
                                   {"flash_attn", "on"},
                                   {"max_model_len", 4096},
                                   {"spec", "off"},
                                   {"spec_model", "models/draft-tiny.gguf"}};
nlohmann::json DraftCell() {
  nlohmann::json cell = kPlainCell;
  cell["spec"] = "draft:4";
  cell["gpu_layers_draft"] = 99;
  return cell;
}
nlohmann::json CappedCell() {
  nlohmann::json cell = kPlainCell;
  cell["max_model_len"] = 131072;
  return cell;
}

std::string FixtureDir() { return LADDER_ENGINE_FIXTURES; }

bool HasFixture(const std::string& folder, const std::string& name) {
  return std::filesystem::exists(FixtureDir() + "/" + folder + "/" + name);
}

// The recorded llama-server folders that take part (see the file comment).
std::vector<std::string> RecordedBuilds() {
  std::vector<std::string> folders;
  for (const auto& entry : std::filesystem::directory_iterator(FixtureDir())) {
    const std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, "llama.cpp-b") || !absl::EndsWith(name, "-cpu")) continue;
    if (HasFixture(name, "help.txt") && HasFixture(name, "version.txt") &&
        HasFixture(name, "plain-server.log") && HasFixture(name, "plain-props.json")) {
      folders.push_back(name);
    }
  }
  std::sort(folders.begin(), folders.end());
  return folders;
}

// The build number the binary printed: "version: 4900 (891c63956)" or "version: 0.2.0-dev
// (build 10587, commit 3f545becc)".
int PrintedBuild(const std::string& version_txt) {
  std::smatch m;
  static const std::regex kNew(R"(version: \S+ \(build ([0-9]+),)");
  static const std::regex kOld(R"(version: ([0-9]+) \()");
  if (std::regex_search(version_txt, m, kNew) || std::regex_search(version_txt, m, kOld)) {
    return std::stoi(m[1].str());
  }
  ADD_FAILURE() << "no build number in: " << version_txt;
  return -1;
}

// The command a recorded server ran: the words of its log's first line after "$ ".
std::vector<std::string> RecordedArgv(const std::string& log) {
  const std::string first = log.substr(0, log.find('\n'));
  EXPECT_TRUE(absl::StartsWith(first, "$ ")) << first;
  std::vector<std::string> argv;
  for (absl::string_view w : absl::StrSplit(first.substr(2), ' ', absl::SkipEmpty())) {
    argv.emplace_back(w);
  }
  return argv;
}

// The port a recorded command line listened on.
int RecordedPort(const std::vector<std::string>& argv) {
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "--port") return std::stoi(argv[i + 1]);
  }
  ADD_FAILURE() << "no --port";
  return 0;
}

class LlamaServerBuild : public ::testing::TestWithParam<std::string> {
 protected:
  std::string File(const std::string& name) const { return ReadFixture(GetParam(), name); }
  bool Has(const std::string& name) const { return HasFixture(GetParam(), name); }

  EngineCapabilities Help() const {
    auto caps = ParseLlamaServerHelp(File("help.txt"));
    EXPECT_TRUE(caps.ok()) << caps.status();
    return caps.ok() ? *caps : EngineCapabilities{};
  }

  // What the engine runner would render on this build: its --help and its --version, on the
  // port the recorded server listened on.
  absl::StatusOr<RenderedEngine> Render(const nlohmann::json& cell) const {
    RecipeContext c;
    c.port = RecordedPort(RecordedArgv(File("plain-server.log")));
    c.capabilities["llama.cpp"] = Help();
    auto version = ParseEngineVersion("llama.cpp", File("version.txt"));
    EXPECT_TRUE(version.ok()) << version.status();
    if (version.ok()) c.engine_versions["llama.cpp"] = *version;
    return (*FindBuiltinRecipe("llama.cpp"))->Render(cell, c);
  }

  nlohmann::json Props(const std::string& name) const {
    return nlohmann::json::parse(File(name), nullptr, /*allow_exceptions=*/false);
  }
};

TEST_P(LlamaServerBuild, ItsVersionIsTheBuildItPrinted) {
  const std::string printed = File("version.txt");
  const int build = PrintedBuild(printed);
  auto version = ParseEngineVersion("llama.cpp", printed);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, "b" + std::to_string(build));
  EXPECT_EQ(LlamaCppBuild(*version), build);
  // /props says the same build.
  nlohmann::json reported = ReportedConfig("llama.cpp", Props("plain-props.json"));
  ASSERT_TRUE(reported.contains("build_info")) << reported.dump();
  EXPECT_TRUE(absl::StartsWith(reported["build_info"].get<std::string>(),
                               "b" + std::to_string(build) + "-"))
      << reported.dump();
}

// Every option line of the --help (a line starting with '-', not a "-----" section header) is
// one option of the reader's, and each spelling the line names is found.
TEST_P(LlamaServerBuild, TheReaderTakesEveryOptionLine) {
  const std::string help = File("help.txt");
  EngineCapabilities caps = Help();
  size_t lines = 0;
  static const std::regex kSpelling(R"(^(--?[a-zA-Z][a-zA-Z0-9-]*),? )");
  for (absl::string_view raw : absl::StrSplit(help, '\n')) {
    std::string line(raw);
    if (line.empty() || line[0] != '-' || absl::StartsWith(line, "-----")) continue;
    ++lines;
    std::smatch m;
    if (std::regex_search(line, m, kSpelling)) {
      EXPECT_NE(caps.Find(m[1].str()), nullptr) << line;
    }
  }
  EXPECT_GT(lines, 50u);
  EXPECT_EQ(caps.options.size(), lines);
}

// The recipe, given only this build's --help and --version, renders the command line the
// recorded server ran (and answered /props for); with a draft model too, where it renders one.
TEST_P(LlamaServerBuild, TheRecipeRendersTheCommandTheServerRan) {
  auto plain = Render(kPlainCell);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->launch->argv, RecordedArgv(File("plain-server.log")));
  EXPECT_EQ(plain->rendered_from, "llama-server --help");
  auto draft = Render(DraftCell());
  if (draft.ok()) {
    EXPECT_EQ(draft->launch->argv, RecordedArgv(File("draft-server.log")));
  }
}

// /metrics counters of a recorded server, after minus before.
double Delta(const std::string& before, const std::string& after, const std::string& name) {
  auto b = ParsePrometheusText(before);
  auto a = ParsePrometheusText(after);
  EXPECT_TRUE(b.ok() && a.ok()) << name;
  if (!b.ok() || !a.ok()) return -1;
  return SumCounter(*a, name).value_or(-1) - SumCounter(*b, name).value_or(-1);
}

// The draft arm either drafts on this build (its stream's timings say draft_n > 0) or is refused
// before a server starts, and then the recording shows why: with ladder's request
// (cache_prompt: false) the draft server decoded the target once per generated token (the
// target alone), with cache_prompt: true it took fewer decodes (it drafted).
TEST_P(LlamaServerBuild, TheDraftArmDraftsOrIsRefusedForWhatTheServerDid) {
  auto draft = Render(DraftCell());
  if (draft.ok()) {
    const std::string sse = File("draft-stream.sse");
    ASSERT_THAT(sse, HasSubstr("\"draft_n\":")) << "this build's stream says nothing of drafting";
    CompletionStreamParser parser("http://recorded", 8);
    parser.Feed(sse, 1);
    auto g = parser.Finish(2);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(g->draft_tokens.has_value());
    EXPECT_GT(*g->draft_tokens, 0);
    EXPECT_EQ(draft->spec_k, 4);
    return;
  }
  EXPECT_THAT(std::string(draft.status().message()), HasSubstr("cache_prompt"));
  auto delta = [&](const std::string& name, const std::string& counter) {
    return Delta(File(name + "-metrics-before.txt"), File(name + "-metrics-after.txt"), counter);
  };
  const double predicted = delta("draft", "llamacpp:tokens_predicted");
  EXPECT_GT(predicted, 0);
  EXPECT_EQ(delta("draft", "llamacpp:n_decode"), predicted) << "cache_prompt: false drafted";
  EXPECT_LT(delta("draft-cache-prompt", "llamacpp:n_decode"),
            delta("draft-cache-prompt", "llamacpp:tokens_predicted"))
      << "cache_prompt: true did not draft either: the refusal's reason does not hold";
}

// Every value-taking flag the recipe renders, in every arm the CPU runs used, is one the
// --help lists (not removed), with a value among those its hint enumerates.
TEST_P(LlamaServerBuild, EveryRenderedFlagIsOffered) {
  EngineCapabilities caps = Help();
  std::vector<nlohmann::json> cells;
  for (const char* fa : {"on", "off", "auto"}) {
    nlohmann::json off = kPlainCell;
    off["flash_attn"] = fa;
    cells.push_back(off);
    nlohmann::json draft = DraftCell();
    draft["flash_attn"] = fa;
    cells.push_back(draft);
  }
  int rendered = 0;
  for (const auto& cell : cells) {
    auto r = Render(cell);
    if (!r.ok()) {
      // A refusal names what the binary lacks.
      EXPECT_THAT(std::string(r.status().message()), HasSubstr("llama-server")) << r.status();
      continue;
    }
    ++rendered;
    const auto& argv = r->launch->argv;
    for (size_t i = 1; i < argv.size(); ++i) {
      if (argv[i].size() < 2 || argv[i][0] != '-' || std::isdigit(argv[i][1])) continue;
      ASSERT_TRUE(caps.Has(argv[i])) << argv[i] << " (" << cell.dump() << ")";
      const std::vector<std::string> values = caps.Values(argv[i]);
      if (!values.empty() && i + 1 < argv.size() && argv[i + 1][0] != '-') {
        EXPECT_THAT(values, ::testing::Contains(argv[i + 1])) << argv[i];
      }
    }
  }
  EXPECT_GT(rendered, 0);
}

// What the running server reported in /props is what the cell asked: the configuration check
// passes with nothing left unverifiable.
TEST_P(LlamaServerBuild, ItsPropsMatchTheCell) {
  auto plain = Render(kPlainCell);
  ASSERT_TRUE(plain.ok()) << plain.status();
  nlohmann::json reported = ReportedConfig("llama.cpp", Props("plain-props.json"));
  ConfigCheck check = CheckConfig(plain->expected_config, reported);
  EXPECT_TRUE(check.ok()) << check.mismatches.dump();
  EXPECT_TRUE(check.not_verifiable.empty()) << ::testing::PrintToString(check.not_verifiable);
  auto draft = Render(DraftCell());
  if (draft.ok()) {
    ConfigCheck d =
        CheckConfig(draft->expected_config, ReportedConfig("llama.cpp", Props("draft-props.json")));
    EXPECT_TRUE(d.ok()) << d.mismatches.dump();
    EXPECT_TRUE(d.not_verifiable.empty());
  }
}

// The streamed completions as the server sent them: eight tokens each; no drafting without a
// draft model.
TEST_P(LlamaServerBuild, ItsStreamsParse) {
  for (const char* name :
       {"plain-stream.sse", "draft-stream.sse", "draft-cache-prompt-stream.sse"}) {
    if (!Has(name)) continue;
    CompletionStreamParser parser("http://recorded", 8);
    parser.Feed(File(name), 1);
    auto g = parser.Finish(2);
    ASSERT_TRUE(g.ok()) << name << ": " << g.status();
    EXPECT_EQ(g->completion_tokens, 8) << name;
    EXPECT_TRUE(g->usage_reported) << name;
    EXPECT_EQ(g->reported_prompt_tokens, 32) << name;
    if (std::string(name) == "plain-stream.sse") {
      EXPECT_FALSE(g->draft_tokens.has_value() && *g->draft_tokens > 0);
    }
  }
}

// A context beyond the model's training context (asked 131072 of a model trained for 65536):
// a build that caps its slot there (its log says so) reports the capped context in /props and
// the configuration check fails the cell naming both values; a build that does not cap runs
// and reports what was asked.
TEST_P(LlamaServerBuild, AContextBeyondTrainingIsCheckedAsTheServerRanIt) {
  if (!Has("ctx-capped-props.json")) GTEST_SKIP() << "no such server recorded for this build";
  auto r = Render(CappedCell());
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string log = File("ctx-capped-server.log");
  EXPECT_EQ(RecordedArgv(log), r->launch->argv);
  const nlohmann::json reported = ReportedConfig("llama.cpp", Props("ctx-capped-props.json"));
  const ConfigCheck check = CheckConfig(r->expected_config, reported);
  std::smatch m;
  static const std::regex kCapped(
      R"(the slot context \(([0-9]+)\) exceeds the training context of the model \(([0-9]+)\) - capping)");
  if (!std::regex_search(log, m, kCapped)) {
    EXPECT_TRUE(check.ok()) << check.mismatches.dump();
    return;
  }
  const int asked = std::stoi(m[1].str());
  const int capped = std::stoi(m[2].str());
  EXPECT_EQ(reported["n_ctx"], capped);
  EXPECT_FALSE(check.ok());
  EXPECT_EQ(check.mismatches,
            nlohmann::json::array({{{"name", "n_ctx"},
                                    {"expected", {{"min", asked}, {"max", asked}}},
                                    {"reported", capped}}}));
}

// A server that drafted says so in its responses' timings (draft_n) only from some build on:
// where the recorded stream of a server that drafted carries no draft_n, the recipe must not
// read absence as zero drafted (no per-request source); where it does, the recipe reads them.
TEST_P(LlamaServerBuild, AbsentDraftCountsAreZeroOnlyWhereTheServerWritesThem) {
  // The stream of a request that drafted: with cache_prompt: true where the recipe refuses
  // drafting with ladder's requests, else the draft arm's.
  const std::string name = Has("draft-cache-prompt-stream.sse") ? "draft-cache-prompt" : "draft";
  if (name == "draft-cache-prompt") {
    // That it drafted: fewer target decodes than generated tokens.
    EXPECT_LT(Delta(File(name + "-metrics-before.txt"), File(name + "-metrics-after.txt"),
                    "llamacpp:n_decode"),
              Delta(File(name + "-metrics-before.txt"), File(name + "-metrics-after.txt"),
                    "llamacpp:tokens_predicted"));
  }
  const bool writes_draft_n = absl::StrContains(File(name + "-stream.sse"), "\"draft_n\":");
  for (const nlohmann::json& cell : {kPlainCell, DraftCell()}) {
    auto r = Render(cell);
    if (!r.ok()) continue;
    EXPECT_EQ(r->draft_timings,
              writes_draft_n ? DraftTimings::kLlamaCppTimings : DraftTimings::kNone)
        << cell.dump();
    if (!writes_draft_n) {
      EXPECT_THAT(r->render_notes, ::testing::Contains(HasSubstr("no draft_n")));
    }
  }
}

// /metrics, where the server serves it, parses; a server without a draft model counts no
// drafts.
TEST_P(LlamaServerBuild, ItsMetricsParse) {
  for (const char* name : {"plain-metrics-before.txt", "plain-metrics-after.txt"}) {
    if (!Has(name)) continue;
    auto samples = ParsePrometheusText(File(name));
    ASSERT_TRUE(samples.ok()) << name << ": " << samples.status();
    EXPECT_TRUE(SumCounter(*samples, "llamacpp:tokens_predicted").has_value()) << name;
    EXPECT_EQ(SumCounter(*samples, "llamacpp:spec_decode_num_draft_tokens").value_or(0), 0);
  }
}

std::string BuildName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name;
  for (char c : info.param) {
    if (std::isalnum(static_cast<unsigned char>(c))) name.push_back(c);
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Recorded, LlamaServerBuild, ::testing::ValuesIn(RecordedBuilds()),
                         BuildName);

// The issue asks for three points of llama.cpp's history: before b4984, between b6723 and
// b9021, and a newest snapshot.
TEST(LlamaServerBuilds, ThreePointsOfHistoryAreRecorded) {
  std::vector<int> builds;
  for (const std::string& folder : RecordedBuilds()) {
    builds.push_back(PrintedBuild(ReadFixture(folder, "version.txt")));
  }
  auto any = [&](auto pred) { return std::any_of(builds.begin(), builds.end(), pred); };
  EXPECT_TRUE(any([](int b) { return b > 1 && b < 4984; })) << ::testing::PrintToString(builds);
  EXPECT_TRUE(any([](int b) { return b >= 6723 && b <= 9021; }));
  EXPECT_TRUE(any([](int b) { return b >= 10500; }));
}

// A llama-server that says build 0 (built without its git history) renders from its --help
// alone: the same command lines as the numbered build of the same source, which its server ran.
TEST(LlamaServerBuilds, BuildZeroRunsFromItsHelpAlone) {
  int zero = 0;
  for (const std::string& folder : RecordedBuilds()) {
    if (PrintedBuild(ReadFixture(folder, "version.txt")) != 0) continue;
    ++zero;
    const std::string numbered = absl::StrReplaceAll(folder, {{"-build0", ""}});
    ASSERT_NE(numbered, folder);
    EXPECT_EQ(RecordedArgv(ReadFixture(folder, "plain-server.log")),
              RecordedArgv(ReadFixture(numbered, "plain-server.log")));
    EXPECT_EQ(RecordedArgv(ReadFixture(folder, "draft-server.log")),
              RecordedArgv(ReadFixture(numbered, "draft-server.log")));
    EXPECT_EQ(ReadFixture(folder, "help.txt"), ReadFixture(numbered, "help.txt"));
  }
  EXPECT_GT(zero, 0) << "no llama-server with build number 0 is recorded";
}

}  // namespace
}  // namespace ladder::engines
