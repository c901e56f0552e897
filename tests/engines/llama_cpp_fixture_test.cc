// The llama.cpp recipe, the Prometheus reader, the stream parser and the acceptance and
// evidence code against what a real llama-server (b10309) printed and served, recorded verbatim
// in fixtures/llama.cpp-b10309-cpu/ (its README says how). A changed flag, metric name or reply
// shape in a fixture fails these tests; the recipe's own constants are never the expectation.
#include <chrono>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "fixture_files.h"
#include "ladder/engines/client.h"
#include "ladder/engines/engine_version.h"
#include "ladder/engines/process.h"
#include "ladder/engines/prometheus.h"
#include "ladder/engines/recipe.h"

namespace ladder::engines {
namespace {

using ::testing::HasSubstr;

std::string Fixture(const std::string& name) { return ReadFixture("llama.cpp-b10309-cpu", name); }

// Every option the real server's --help lists ("-fa, --flash-attn [on|off|auto]" gives -fa and
// --flash-attn), with the text of its line.
std::map<std::string, std::string> HelpOptions() {
  std::map<std::string, std::string> options;
  static const std::regex kOption(R"(--?[a-zA-Z][a-zA-Z0-9-]*)");
  static const std::regex kPlaceholder(R"([A-Z0-9_|]+|[\[<{].*)");
  for (absl::string_view line : absl::StrSplit(Fixture("help.txt"), '\n')) {
    // The option column: options and their placeholders ("-c,    --ctx-size N"), up to the
    // first word of the description.
    for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      std::string token(word);
      if (!token.empty() && token.back() == ',') token.pop_back();
      if (std::regex_match(token, kOption)) {
        options[token] = std::string(line);
      } else if (!std::regex_match(token, kPlaceholder)) {
        break;
      }
    }
  }
  return options;
}

RecipeContext Build10309() {
  RecipeContext c;
  c.port = 8123;
  c.engine_versions["llama.cpp"] = "b10309";
  return c;
}

RenderedEngine Render(const nlohmann::json& params) {
  auto recipe = FindBuiltinRecipe("llama.cpp");
  EXPECT_TRUE(recipe.ok());
  auto rendered = (*recipe)->Render(params, Build10309());
  EXPECT_TRUE(rendered.ok()) << rendered.status();
  return rendered.ok() ? *rendered : RenderedEngine{};
}

// Each flag of an argv, and the value after it where the flag takes one.
std::vector<std::string> Flags(const std::vector<std::string>& argv) {
  std::vector<std::string> flags;
  for (const auto& a : argv) {
    if (a.size() > 1 && a[0] == '-' && !std::isdigit(static_cast<unsigned char>(a[1]))) {
      flags.push_back(a);
    }
  }
  return flags;
}

TEST(LlamaCppFixture, VersionIsParsedAsTheBuildItPrinted) {
  const std::string printed = Fixture("version.txt");
  ASSERT_THAT(printed, HasSubstr("version: 10309 (82bb48500)"));
  auto version = ParseEngineVersion("llama.cpp", printed);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, "b10309");
  EXPECT_EQ(LlamaCppBuild(*version), 10309);
}

// Every flag the recipe renders for this build, in every arm a study uses (flash attention on
// and off, speculation off and with a draft model, load cells), is an option the real server
// lists; a value-taking flag gets a value its help text names.
TEST(LlamaCppFixture, EveryRenderedFlagIsOneTheServerHas) {
  const auto options = HelpOptions();
  ASSERT_GT(options.size(), 100u) << "help.txt did not parse";
  const nlohmann::json base = {{"engine", "llama.cpp"},     {"depth", 1024},
                               {"model", "/m/target.gguf"}, {"gpu_layers", 99},
                               {"max_model_len", 34816},    {"seed", 1}};
  std::vector<nlohmann::json> cells;
  for (const char* fa : {"on", "off", "auto"}) {
    nlohmann::json off = base;
    off["flash_attn"] = fa;
    off["spec"] = "off";
    off["spec_model"] = "/m/draft.gguf";  // given in `fixed`, ignored by the off arm
    cells.push_back(off);
    nlohmann::json draft = base;
    draft["flash_attn"] = fa;
    draft.update({{"spec", "draft:4"},
                  {"spec_model", "/m/draft.gguf"},
                  {"spec_k_min", 1},
                  {"spec_p_min", 0.5},
                  {"gpu_layers_draft", 99}});
    cells.push_back(draft);
  }
  nlohmann::json load = base;
  load.update({{"concurrency", 8}, {"prefix_caching", true}});
  cells.push_back(load);
  for (const auto& cell : cells) {
    RenderedEngine r = Render(cell);
    ASSERT_TRUE(r.launch.has_value());
    for (const std::string& flag : Flags(r.launch->argv)) {
      EXPECT_TRUE(options.count(flag))
          << flag << " is not an option of llama-server b10309 (" << cell.dump() << ")";
    }
  }
  // The values: --flash-attn on|off|auto and the --spec-type names the help lists.
  EXPECT_THAT(options.at("--flash-attn"), HasSubstr("on|off|auto"));
  const std::string spec_type = options.at("--spec-type");
  for (const char* type : {"none", "draft-simple", "draft-mtp", "draft-eagle3"}) {
    EXPECT_THAT(spec_type, HasSubstr(type)) << "--spec-type has no " << type;
  }
  EXPECT_THAT(options.at("--cache-ram"), HasSubstr("--cache-ram"));
}

// The off arm pins speculation off and passes no draft model; the draft arm asks for drafting.
TEST(LlamaCppFixture, SpecOffArmIgnoresTheDraftModelAndPinsItOff) {
  RenderedEngine off = Render({{"engine", "llama.cpp"},
                               {"depth", 1},
                               {"model", "/m/t.gguf"},
                               {"spec", "off"},
                               {"spec_model", "/m/d.gguf"}});
  EXPECT_THAT(off.launch->argv, ::testing::Not(::testing::Contains("/m/d.gguf")));
  auto it = std::find(off.launch->argv.begin(), off.launch->argv.end(), "--spec-type");
  ASSERT_NE(it, off.launch->argv.end());
  EXPECT_EQ(*(it + 1), "none");
  EXPECT_EQ(off.ignored_spec_model, "/m/d.gguf");
  EXPECT_TRUE(off.spec_off_pinned);
  EXPECT_EQ(off.spec_k, 0);
  // spec_k: 0 with a method is an off arm too; a method with no spec_k at all is refused.
  RenderedEngine k0 = Render({{"engine", "llama.cpp"},
                              {"depth", 1},
                              {"model", "/m/t.gguf"},
                              {"spec_method", "draft"},
                              {"spec_k", 0},
                              {"spec_model", "/m/d.gguf"}});
  EXPECT_EQ(k0.spec_k, 0);
  auto recipe = FindBuiltinRecipe("llama.cpp");
  auto forgot = (*recipe)->Render({{"engine", "llama.cpp"},
                                   {"depth", 1},
                                   {"model", "/m/t.gguf"},
                                   {"spec_method", "draft"},
                                   {"spec_model", "/m/d.gguf"}},
                                  Build10309());
  EXPECT_EQ(forgot.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(forgot.status().message(), HasSubstr("spec_k"));
}

// The counters the recipe reads are the ones the real server exports (with `_total`), and their
// values come out as the text says; without a draft model the server exports none of them.
TEST(LlamaCppFixture, SpeculationCountersAsTheServerExportsThem) {
  RenderedEngine r = Render({{"engine", "llama.cpp"},
                             {"depth", 1},
                             {"model", "/m/t.gguf"},
                             {"spec", "draft:4"},
                             {"spec_model", "/m/d.gguf"}});
  const std::string text = Fixture("draft-metrics-after.txt");
  auto samples = ParsePrometheusText(text);
  ASSERT_TRUE(samples.ok()) << samples.status();
  auto expect_counter = [&](const std::string& name) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex("\n" + name + "_total ([0-9.e+]+)")))
        << name << "_total is not in the recorded /metrics";
    EXPECT_EQ(SumCounter(*samples, name), std::stod(m[1].str())) << name;
  };
  expect_counter(r.spec_metrics.num_drafts);
  expect_counter(r.spec_metrics.num_draft_tokens);
  expect_counter(r.spec_metrics.num_accepted_tokens);
  auto plain = ParsePrometheusText(Fixture("plain-metrics-after.txt"));
  ASSERT_TRUE(plain.ok());
  // Without a draft model the server still exports them, at 0: a spec-off arm reads 0 drafted.
  EXPECT_EQ(SumCounter(*plain, r.spec_metrics.num_drafts), 0);
  EXPECT_TRUE(SumCounter(*plain, "llamacpp:tokens_predicted").has_value());
}

// Feeds a recorded stream to the parser in pieces of every size from 1 byte: the same result.
absl::StatusOr<GenerationResult> ParseRecorded(const std::string& sse, int max_tokens,
                                               size_t piece) {
  CompletionStreamParser parser("http://recorded", max_tokens);
  double t = 0;
  for (size_t i = 0; i < sse.size(); i += piece) {
    t += 1;
    if (!parser.Feed(std::string_view(sse).substr(i, piece), t)) break;
  }
  return parser.Finish(t + 1);
}

TEST(LlamaCppFixture, StreamedCompletionAsTheServerSentIt) {
  const std::string sse = Fixture("plain-stream.sse");
  // What the recording holds, counted from its text.
  const int text_events = [&] {
    int n = 0;
    for (absl::string_view line : absl::StrSplit(sse, '\n')) {
      if (absl::StrContains(line, "\"text\":\"") && !absl::StrContains(line, "\"text\":\"\"")) ++n;
    }
    return n;
  }();
  std::smatch last;
  std::string::const_iterator from = sse.begin();
  std::string per_second;
  while (std::regex_search(from, sse.end(), last,
                           std::regex(R"("predicted_per_second":([0-9.e+]+))"))) {
    per_second = last[1].str();
    from = last.suffix().first;
  }
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, sse.size()}) {
    auto g = ParseRecorded(sse, 16, piece);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_TRUE(g->usage_reported);
    EXPECT_EQ(g->completion_tokens, 16);
    EXPECT_EQ(g->reported_prompt_tokens, 512);
    EXPECT_EQ(static_cast<int>(g->gaps_ms.size()) + 1, text_events) << piece;
    ASSERT_TRUE(g->engine_decode_tok_s.has_value());
    EXPECT_DOUBLE_EQ(*g->engine_decode_tok_s, std::stod(per_second));
    EXPECT_FALSE(g->draft_tokens.has_value()) << "no draft model: the server omits draft_n";
    EXPECT_EQ(g->invalid_utf8_events, 0);
  }
}

TEST(LlamaCppFixture, TheServersUtf8ErrorFailsTheRequestWithItsMessage) {
  auto g = ParseRecorded(Fixture("plain-stream-utf8-error.sse"), 16, 64);
  ASSERT_FALSE(g.ok());
  // Internal: an error of the engine's own, which the runner retries with a fresh prompt.
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(g.status().message(), HasSubstr("does not match the expected Content-only format"));
}

TEST(LlamaCppFixture, DraftTimingsAsTheServerSentThem) {
  const std::string sse = Fixture("draft-stream.sse");
  std::smatch m;
  std::string::const_iterator from = sse.begin();
  std::string drafted, accepted;
  static const std::regex kDraft(R"("draft_n":([0-9]+),"draft_n_accepted":([0-9]+))");
  while (std::regex_search(from, sse.end(), m, kDraft)) {
    drafted = m[1].str();
    accepted = m[2].str();
    from = m.suffix().first;
  }
  ASSERT_FALSE(drafted.empty()) << "the recorded draft stream has no draft_n";
  auto g = ParseRecorded(sse, 16, 100);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(g->draft_tokens.has_value());
  EXPECT_EQ(*g->draft_tokens, std::stod(drafted));
  EXPECT_EQ(*g->accepted_tokens, std::stod(accepted));
}

// The server's log names no attention backend: nothing in it may be read as one (a false
// backend_mismatch), and the out-of-memory scan stays quiet.
TEST(LlamaCppFixture, ItsLogNamesNoBackend) {
  for (const char* name : {"plain-server.log", "draft-server.log"}) {
    for (absl::string_view line : absl::StrSplit(Fixture(name), '\n')) {
      BackendLine parsed = ParseBackendLine(std::string(line));
      EXPECT_EQ(parsed.backend, "") << line;
      EXPECT_EQ(parsed.forced, "") << line;
    }
  }
}

}  // namespace
}  // namespace ladder::engines

namespace ladder::engines {
namespace {

std::string Cuda(const std::string& name) { return ReadFixture("llama.cpp-b10309-cuda", name); }

double Counter(const std::string& metrics, const std::string& name) {
  auto samples = ParsePrometheusText(metrics);
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? SumCounter(*samples, name).value_or(-1) : -1;
}

// Acceptance from the /metrics counters agrees with the responses' own timings: the counters'
// deltas over a session equal the sums of draft_n / draft_n_accepted over its requests that
// completed, and a request the server failed mid-stream drafted at least what it had reported.
TEST(LlamaCppCudaFixture, CountersAgreeWithTheResponsesTimings) {
  const std::string drafts = "llamacpp:spec_decode_num_draft_tokens";
  const std::string accepted = "llamacpp:spec_decode_num_accepted_tokens";
  struct Session {
    std::string tag;
    std::vector<int> seeds;
  };
  for (const Session& session :
       {Session{"smalldraft-k4", {1}}, Session{"selfdraft-k4", {1, 2, 3}}}) {
    const double counted_drafts = Counter(Cuda(session.tag + "-metrics-after.txt"), drafts) -
                                  Counter(Cuda(session.tag + "-metrics-before.txt"), drafts);
    const double counted_accepted = Counter(Cuda(session.tag + "-metrics-after.txt"), accepted) -
                                    Counter(Cuda(session.tag + "-metrics-before.txt"), accepted);
    double timed_drafts = 0, timed_accepted = 0;
    bool all_completed = true;
    for (int seed : session.seeds) {
      CompletionStreamParser parser("http://recorded", 64);
      parser.Feed(Cuda(session.tag + "-stream-seed" + std::to_string(seed) + ".sse"), 1);
      auto g = parser.Finish(2);
      if (!g.ok()) {
        EXPECT_THAT(g.status().message(), HasSubstr("Content-only format")) << seed;
        all_completed = false;
        continue;
      }
      ASSERT_TRUE(g->draft_tokens.has_value()) << session.tag << " seed " << seed;
      timed_drafts += *g->draft_tokens;
      timed_accepted += *g->accepted_tokens;
    }
    if (all_completed) {
      EXPECT_EQ(counted_drafts, timed_drafts) << session.tag;
      EXPECT_EQ(counted_accepted, timed_accepted) << session.tag;
    } else {
      EXPECT_GT(counted_drafts, timed_drafts) << session.tag;
    }
  }
  // The self-draft accepts nearly all it drafts; the small draft nothing.
  EXPECT_GT(Counter(Cuda("selfdraft-k4-metrics-after.txt"), accepted) /
                Counter(Cuda("selfdraft-k4-metrics-after.txt"), drafts),
            0.9);
  EXPECT_EQ(Counter(Cuda("smalldraft-k4-metrics-after.txt"), accepted), 0);
}

// The real server's log holds bytes that are not UTF-8; the log tail the runner keeps as
// evidence (JSON) is valid UTF-8 with the server's text otherwise intact.
TEST(LlamaCppCudaFixture, ItsLogsInvalidBytesBecomeValidEvidence) {
  const std::string log = Cuda("plain-fa-on-server.log");
  ASSERT_NE(log.find("unparsed Content-only output"), std::string::npos);
  LaunchSpec spec;
  spec.argv = {"/bin/cat", std::string(LADDER_ENGINE_FIXTURES) +
                               "/llama.cpp-b10309-cuda/plain-fa-on-server.log"};
  auto process = EngineProcess::Start(spec, ProcessOptions{});
  ASSERT_TRUE(process.ok()) << process.status();
  for (int i = 0; i < 500 && !(*process)->Poll().has_value(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  (*process)->DescribeExit(ExitInfo{});  // drains the reader
  nlohmann::json tail = (*process)->LogTail();
  std::string dumped;
  ASSERT_NO_THROW(dumped = tail.dump());  // the strict dump the agent's evidence once died in
  EXPECT_THAT(dumped, HasSubstr("unparsed Content-only output"));
  EXPECT_THAT(dumped, HasSubstr("\xEF\xBF\xBD"));  // U+FFFD where the bytes were not UTF-8
}

}  // namespace
}  // namespace ladder::engines
