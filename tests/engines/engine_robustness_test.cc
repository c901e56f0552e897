// Whatever bytes an engine sends, the engine client and runner answer with a result or a
// status, and every string they pass on is valid UTF-8; the process lives. A stand-in server
// (cpp-httplib, port 0, in this process) replays what a real llama-server b10309 sent
// (tests/engines/fixtures/llama.cpp-b10309-cuda/) and the bad cases around it: a text that is
// not UTF-8, the server's own error event mid-stream, malformed JSON, a stream cut short, a
// 20 MiB event, an impossible usage count, an error body that is not UTF-8. CI runs this program
// under AddressSanitizer+UBSan (scripts/sanitize.sh, SUBSET=ci).
#include <httplib.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "fixture_files.h"
#include "ladder/common/utf8.h"
#include "ladder/engines/client.h"
#include "ladder/engines/engine_runner.h"
#include "ladder/engines/engine_version.h"

namespace ladder::engines {
namespace {

using ::testing::HasSubstr;

std::string Recorded(const std::string& name) { return ReadFixture("llama.cpp-b10309-cuda", name); }

// The recorded stream's events ("data: {...}" without the blank line), in order.
std::vector<std::string> RecordedEvents(const std::string& name) {
  std::vector<std::string> events;
  for (absl::string_view e : absl::StrSplit(Recorded(name), "\n\n", absl::SkipEmpty())) {
    events.emplace_back(e);
  }
  return events;
}

// A llama-server stand-in: /health, /metrics (recorded), /v1/completions as `mode` says.
class StandIn {
 public:
  // `props`: a recorded GET /props reply to serve (fixtures/<recording>/<name>), else the
  // abridged one below.
  explicit StandIn(std::string mode, std::string props = "") : mode_(std::move(mode)) {
    ok_ = RecordedEvents("plain-fa-on-stream-seed1.sse");     // 64 text events, final, [DONE]
    error_ = RecordedEvents("plain-fa-on-stream-seed2.sse");  // ends in the server's error event
    // GET /props as tools/server/README.md at 82bb48500 (b10309) documents it, abridged to the
    // keys the runner reads: one slot of 1024 tokens.
    std::string recorded_props;
    if (!props.empty()) {
      const size_t slash = props.find('/');
      recorded_props = ReadFixture(props.substr(0, slash), props.substr(slash + 1));
    }
    server_.Get("/props", [recorded_props](const httplib::Request&, httplib::Response& res) {
      if (!recorded_props.empty()) {
        res.set_content(recorded_props, "application/json");
        return;
      }
      res.set_content(
          R"json({"default_generation_settings":{"id":0,"id_task":-1,"n_ctx":1024,)json"
          R"json("speculative":false,"is_processing":false},"total_slots":1,)json"
          R"json("build_info":"b(build number)-(build commit hash)","is_sleeping":false})json",
          "application/json");
    });
    // SGLang's GET /get_server_info in "sglang_info": the fields the configuration check reads,
    // each key and value as https://docs.sglang.io/basic_usage/native_api.html prints them
    // ("Get Server Info"; the rest left out): attention_backend "fa3", the radix cache on.
    server_.Get("/get_server_info", [this](const httplib::Request&, httplib::Response& res) {
      if (mode_ != "sglang_info") {
        res.status = 404;
        return;
      }
      res.set_content(
          R"json({"model_path":"qwen/qwen2.5-0.5b-instruct","context_length":null,)json"
          R"json("mem_fraction_static":0.907,"tp_size":1,"random_seed":334135249,)json"
          R"json("attention_backend":"fa3","speculative_algorithm":null,)json"
          R"json("disable_radix_cache":false,"status":"ready","max_req_input_len":20474})json",
          "application/json");
    });
    server_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      if (mode_ == "drafts" || mode_ == "no_drafts") {
        // vLLM's counter names (the external recipe reads them): 4 drafted and 3 accepted
        // tokens per request in "drafts", none in "no_drafts".
        const int n = mode_ == "drafts" ? requests_.load() : 0;
        res.set_content(
            "# TYPE vllm:spec_decode_num_drafts counter\n"
            "vllm:spec_decode_num_drafts_total{engine=\"0\"} " +
                std::to_string(n) + "\nvllm:spec_decode_num_draft_tokens_total{engine=\"0\"} " +
                std::to_string(4 * n) +
                "\nvllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} " +
                std::to_string(3 * n) + "\n",
            "text/plain");
        return;
      }
      if (mode_ == "sglang_steps") {
        // SGLang's counters (sglang#25689): every token after a request's first, one per verify
        // step (nothing accepted: a mean acceptance length of exactly 1).
        res.set_content(
            "# TYPE sglang:spec_verify_calls_total counter\n"
            "sglang:spec_verify_calls_total{model_name=\"m\"} " +
                std::to_string(steps_.load()) +
                "\n# TYPE sglang:generation_tokens_total counter\n"
                "sglang:generation_tokens_total{model_name=\"m\"} " +
                std::to_string(tokens_.load()) + "\n",
            "text/plain");
        return;
      }
      res.set_content(Recorded("plain-fa-on-metrics-after.txt"), "text/plain");
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Serve(res, requests_++, nlohmann::json::parse(req.body).value("max_tokens", 64));
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // Wait for the event, not a time: the server answers once it is running.
    while (!server_.is_running()) std::this_thread::yield();
  }
  ~StandIn() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_; }

 private:
  void Stream(httplib::Response& res, std::vector<std::string> events, bool cut = false) {
    res.set_chunked_content_provider("text/event-stream",
                                     [events, cut](size_t, httplib::DataSink& sink) {
                                       for (const auto& e : events) {
                                         std::string chunk = e + "\n\n";
                                         if (!sink.write(chunk.data(), chunk.size())) return false;
                                       }
                                       if (cut) return false;  // the connection drops: no [DONE]
                                       sink.done();
                                       return true;
                                     });
  }

  // The recorded 64-token stream cut to `tokens` text events, its final event's usage saying so.
  std::vector<std::string> OkStream(int tokens) const {
    std::vector<std::string> events(ok_.begin(), ok_.begin() + tokens);
    std::string final_event = ok_[ok_.size() - 2];
    final_event.replace(final_event.find("\"completion_tokens\":64"), 22,
                        "\"completion_tokens\":" + std::to_string(tokens));
    events.push_back(final_event);
    events.push_back(ok_.back());  // data: [DONE]
    return events;
  }

  void Serve(httplib::Response& res, int n, int max_tokens) {
    std::vector<std::string> events = OkStream(std::min(max_tokens, 64));
    if (mode_ == "sglang_steps") {
      const int tokens = std::min(max_tokens, 64);
      tokens_ += tokens;
      steps_ += tokens - 1;
    }
    if (mode_ == "ok" || mode_ == "drafts" || mode_ == "no_drafts" || mode_ == "sglang_steps" ||
        mode_ == "sglang_info") {
      return Stream(res, events);
    }
    if (mode_ == "error_event_first_two") return Stream(res, n < 2 ? error_ : events);
    if (mode_ == "error_event_always") return Stream(res, error_);
    if (mode_ == "invalid_utf8_text") {
      // A text event as the real server sends it, with a byte no UTF-8 text can hold.
      std::string& e = events[3];
      e.insert(e.find("\"text\":\"") + 8, "\x90\xC3");
      return Stream(res, events);
    }
    events = OkStream(64);  // the bad cases below: 64 tokens asked for
    if (mode_ == "malformed") {
      events[2] = "data: {\"choices\":[{\"text\": ";
      return Stream(res, events);
    }
    if (mode_ == "truncated") {
      events.resize(10);
      return Stream(res, events, /*cut=*/true);
    }
    if (mode_ == "huge_event") {
      events.insert(events.begin() + 1,
                    "data: {\"choices\":[{\"text\":\"" + std::string(20u << 20, 'x'));
      return Stream(res, events);
    }
    if (mode_ == "bad_usage") {
      std::string& final_event = events[events.size() - 2];
      final_event.replace(final_event.find("\"completion_tokens\":64"), 22,
                          "\"completion_tokens\":-5");
      return Stream(res, events);
    }
    if (mode_ == "error_body_invalid_utf8") {
      res.status = 500;
      res.set_content(std::string("{\"error\":\"\xff\x90 broken\"}"), "application/json");
      return;
    }
  }

  std::string mode_;
  std::vector<std::string> ok_, error_;
  std::atomic<int> requests_{0};
  std::atomic<int> tokens_{0};  // "sglang_steps": tokens served and verify steps taken
  std::atomic<int> steps_{0};
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

absl::StatusOr<GenerationResult> GenerateFrom(const StandIn& server) {
  EngineEndpoints endpoints;
  endpoints.base_url = server.url();
  EngineClient client(endpoints);
  std::vector<int32_t> prompt(1024, 1000);
  return client.Generate(prompt, 64);
}

TEST(EngineRobustness, RecordedStreamIsReadAsTheServerSentIt) {
  StandIn server("ok");
  auto g = GenerateFrom(server);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->completion_tokens, 64);
  EXPECT_EQ(g->gaps_ms.size(), 63u);
  EXPECT_TRUE(g->engine_decode_tok_s.has_value());
  EXPECT_TRUE(StreamDecodeRate(*g).has_value());
}

// What ladder-fuzz-engine found: a version command's output that is not UTF-8 went verbatim into
// the error message, and from there into `engine_version_detected` evidence.
TEST(EngineRobustness, AVersionOutputThatIsNotUtf8GivesAValidMessage) {
  for (const char* engine : {"vllm", "sglang", "llama.cpp"}) {
    auto version = ParseEngineVersion(engine, "no version here \x90\xff");
    ASSERT_FALSE(version.ok()) << engine;
    EXPECT_TRUE(IsValidUtf8(std::string(version.status().message()))) << engine;
  }
}

TEST(EngineRobustness, BadBytesGiveAResultOrAStatusInValidUtf8) {
  struct Case {
    std::string mode;
    bool ok;
    absl::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"invalid_utf8_text", true, absl::StatusCode::kOk, ""},
      {"error_event_always", false, absl::StatusCode::kInternal, "Content-only format"},
      {"malformed", false, absl::StatusCode::kDataLoss, "malformed JSON"},
      {"truncated", false, absl::StatusCode::kUnavailable, "broke off"},
      {"huge_event", false, absl::StatusCode::kDataLoss, "larger than 16 MiB"},
      {"bad_usage", false, absl::StatusCode::kDataLoss, "usage.completion_tokens -5"},
      {"error_body_invalid_utf8", false, absl::StatusCode::kInternal, "HTTP 500"},
  };
  for (const Case& c : cases) {
    StandIn server(c.mode);
    auto g = GenerateFrom(server);
    EXPECT_EQ(g.ok(), c.ok) << c.mode << ": " << g.status();
    if (g.ok()) {
      EXPECT_EQ(g->invalid_utf8_events, 1) << c.mode;
      EXPECT_EQ(g->completion_tokens, 64) << c.mode;
      continue;
    }
    EXPECT_EQ(g.status().code(), c.code) << c.mode << ": " << g.status();
    const std::string message(g.status().message());
    EXPECT_THAT(message, HasSubstr(c.says)) << c.mode;
    EXPECT_THAT(message, HasSubstr(server.url())) << c.mode;
    EXPECT_TRUE(IsValidUtf8(message)) << c.mode;
    EXPECT_LT(message.size(), 2000u) << c.mode << ": a message is a snippet, not the body";
  }
}

// The runner against the stand-in: requests the server fails are sent again (evidence), text
// that is not UTF-8 is evidence, and every evidence value survives the strict dump the agent's
// spool once died in.
class StrictSink final : public runner::MeasurementSink {
 public:
  absl::Status Record(const runner::Measurement& m) override {
    std::lock_guard<std::mutex> lock(mu_);
    measurements.push_back(m);
    return absl::OkStatus();
  }
  absl::Status RecordEvidence(const runner::Evidence& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    (void)e.value.dump();  // throws on invalid UTF-8, failing the test
    evidence.push_back(e);
    return absl::OkStatus();
  }
  bool Cancelled() const override { return false; }
  int Count(const std::string& kind) {
    int n = 0;
    for (const auto& e : evidence) n += e.kind == kind;
    return n;
  }
  std::mutex mu_;
  std::vector<runner::Measurement> measurements;
  std::vector<runner::Evidence> evidence;
};

absl::Status RunAgainst(const StandIn& server, StrictSink& sink, int retries,
                        const std::string& spec = "off") {
  runner::UnitWork unit;
  unit.attempt_id = 1;
  unit.unit_id = 1;
  unit.runner = "engine";
  unit.processes = 1;
  unit.rounds = 2;
  unit.seed = 7;
  unit.cells.push_back(runner::CellWork{1,
                                        "depth=1024",
                                        {{"engine", "external"},
                                         {"url", server.url()},
                                         {"depth", 1024},
                                         {"short_tokens", 8},
                                         {"long_tokens", 64},
                                         {"request_retries", retries},
                                         {"spec", spec},
                                         {"warmup", "none"}}});
  EngineRunnerOptions options;
  options.version_detection = VersionDetection::kOff;
  options.health_poll_interval = std::chrono::milliseconds(20);
  EngineRunner runner(options);
  return runner.Run(unit, sink);
}

TEST(EngineRobustness, RunnerRetriesTheServersOwnErrors) {
  StandIn server("error_event_first_two");
  StrictSink sink;
  absl::Status s = RunAgainst(server, sink, 3);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(sink.Count("request_retried"), 2);
  EXPECT_EQ(server.requests(), 2 + 4);  // two refused, then 2 rounds x (short, long)
  int ttft = 0;
  for (const auto& m : sink.measurements) ttft += m.metric == "ttft_ms";
  EXPECT_EQ(ttft, 2);
}

TEST(EngineRobustness, RunnerGivesUpAfterItsRetriesWithTheServersReason) {
  StandIn server("error_event_always");
  StrictSink sink;
  absl::Status s = RunAgainst(server, sink, 2);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("Content-only format"));
  EXPECT_EQ(server.requests(), 3);
  EXPECT_EQ(sink.Count("request_retried"), 2);
  EXPECT_EQ(sink.Count("failure"), 1);
}

TEST(EngineRobustness, RunnerRecordsTextThatIsNotUtf8AsEvidence) {
  StandIn server("invalid_utf8_text");
  StrictSink sink;
  absl::Status s = RunAgainst(server, sink, 0);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(sink.Count("engine_invalid_utf8"), 2);  // one per round
}

// Speculation state is evidence both ways, from the counters around each cell-round.
TEST(EngineRobustness, AcceptanceFromCountersAndSpeculationCheckedBothWays) {
  {
    StandIn server("drafts");
    StrictSink sink;
    absl::Status s = RunAgainst(server, sink, 0, "eagle3:4");
    ASSERT_TRUE(s.ok()) << s;
    std::vector<double> rate, length;
    for (const auto& m : sink.measurements) {
      if (m.metric == "acceptance_rate") rate.push_back(m.value);
      if (m.metric == "mean_acceptance_length") length.push_back(m.value);
    }
    EXPECT_EQ(rate, std::vector<double>(2, 0.75));             // 2 x 3 accepted / 2 x 4 drafted
    EXPECT_EQ(length, std::vector<double>(2, 1.0 + 6.0 / 2));  // 1 + accepted / drafts
    EXPECT_EQ(sink.Count("speculation_not_engaged"), 0);
    EXPECT_EQ(sink.Count("acceptance_source"), 1);
  }
  {
    StandIn server("no_drafts");
    StrictSink sink;
    ASSERT_TRUE(RunAgainst(server, sink, 0, "eagle3:4").ok());
    EXPECT_EQ(sink.Count("speculation_not_engaged"), 2);  // a round each
  }
  {
    StandIn server("drafts");
    StrictSink sink;
    absl::Status s = RunAgainst(server, sink, 0, "off");
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr("speculation is off but the engine drafted 8 tokens"));
    EXPECT_EQ(sink.Count("speculation_while_off"), 1);
  }
}

// The llama.cpp recipe's rendering for a running server (the stand-in): what it expects /props
// to report, without a process to start.
class RunningLlamaCpp final : public Recipe {
 public:
  explicit RunningLlamaCpp(std::string url) : url_(std::move(url)) {}
  std::string_view name() const override { return "llama-standin"; }
  const std::vector<ParamSpec>& parameters() const override {
    return (*FindBuiltinRecipe("llama.cpp"))->parameters();
  }
  absl::StatusOr<RenderedEngine> Render(const nlohmann::json& params,
                                        const RecipeContext& context) const override {
    nlohmann::json cell = params;
    cell["engine"] = "llama.cpp";
    auto r = (*FindBuiltinRecipe("llama.cpp"))->Render(cell, context);
    if (!r.ok()) return r;
    r->launch.reset();
    r->restartability = Restartability::kExternal;
    r->endpoints.base_url = url_;
    return r;
  }

 private:
  std::string url_;
};

// A cell that asks a 4096-token context of a llama-server whose /props reports 1024 (a --fit
// that shrank it, a LLAMA_ARG_CTX_SIZE): the cell fails before a request is measured, with both
// values, and the evidence holds what the engine reported.
TEST(EngineRobustness, ConfigurationOtherThanTheCellsFailsWithBothValues) {
  StandIn server("ok");
  StrictSink sink;
  runner::UnitWork unit;
  unit.attempt_id = 1;
  unit.unit_id = 1;
  unit.runner = "engine";
  unit.processes = 1;
  unit.rounds = 1;
  unit.seed = 7;
  unit.cells.push_back(runner::CellWork{1,
                                        "depth=512",
                                        {{"engine", "llama-standin"},
                                         {"model", "/m.gguf"},
                                         {"engine_version", "b10309"},
                                         {"max_model_len", 4096},
                                         {"depth", 512},
                                         {"warmup", "none"}}});
  EngineRunnerOptions options;
  options.version_detection = VersionDetection::kOff;
  options.health_poll_interval = std::chrono::milliseconds(20);
  options.extra_recipes.push_back(std::make_shared<RunningLlamaCpp>(server.url()));
  EngineRunner runner(options);
  absl::Status s = runner.Run(unit, sink);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("n_ctx: the cell asked 4096, the engine reports 1024"));
  EXPECT_EQ(server.requests(), 0);
  EXPECT_EQ(sink.Count("engine_config_mismatch"), 1);
  EXPECT_EQ(sink.Count("failure"), 1);
  // With the context it asked matching, the same server serves the cell.
  unit.cells[0].params["max_model_len"] = 1000;  // padded to 1024 by llama.cpp
  StrictSink ok_sink;
  absl::Status ok = runner.Run(unit, ok_sink);
  ASSERT_TRUE(ok.ok()) << ok;
  EXPECT_EQ(ok_sink.Count("engine_config"), 1);
}

// What a real llama-server b10587 answered when started for a 131072-token context with a model
// trained for 65536 (fixtures/llama.cpp-b10587-cpu/ctx-capped-*: its log says "the slot context
// (131072) exceeds the training context of the model (65536) - capping"): the cell fails before
// a request, with both values and the likely cause.
TEST(EngineRobustness, ARealServersCappedContextFailsTheCellWithBothValues) {
  StandIn server("ok", "llama.cpp-b10587-cpu/ctx-capped-props.json");
  StrictSink sink;
  runner::UnitWork unit;
  unit.attempt_id = 1;
  unit.unit_id = 1;
  unit.runner = "engine";
  unit.processes = 1;
  unit.rounds = 1;
  unit.seed = 7;
  unit.cells.push_back(runner::CellWork{1,
                                        "max_model_len=131072",
                                        {{"engine", "llama-standin"},
                                         {"model", "models/tiny.gguf"},
                                         {"engine_version", "b10587"},
                                         {"max_model_len", 131072},
                                         {"depth", 512},
                                         {"warmup", "none"}}});
  EngineRunnerOptions options;
  options.version_detection = VersionDetection::kOff;
  options.health_poll_interval = std::chrono::milliseconds(20);
  options.extra_recipes.push_back(std::make_shared<RunningLlamaCpp>(server.url()));
  EngineRunner runner(options);
  absl::Status s = runner.Run(unit, sink);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("n_ctx: the cell asked 131072, the engine reports 65536"));
  EXPECT_THAT(s.message(), HasSubstr("the model's training context"));
  EXPECT_EQ(server.requests(), 0);
  EXPECT_EQ(sink.Count("engine_config_mismatch"), 1);
}

// SGLang's recipe for a running server (the stand-in): its counters, without a process.
class RunningSglang final : public Recipe {
 public:
  explicit RunningSglang(std::string url) : url_(std::move(url)) {}
  std::string_view name() const override { return "sglang-standin"; }
  const std::vector<ParamSpec>& parameters() const override {
    return (*FindBuiltinRecipe("sglang"))->parameters();
  }
  absl::StatusOr<RenderedEngine> Render(const nlohmann::json& params,
                                        const RecipeContext& context) const override {
    nlohmann::json cell = params;
    cell["engine"] = "sglang";
    auto r = (*FindBuiltinRecipe("sglang"))->Render(cell, context);
    if (!r.ok()) return r;
    r->launch.reset();
    r->restartability = Restartability::kExternal;
    r->endpoints.base_url = url_;
    return r;
  }

 private:
  std::string url_;
};

// The verify-step source: each request's first token is sampled at prefill, not by a verify
// step, so a cell-round of an 8- and a 64-token request that accepted nothing (70 steps, 72
// tokens) has a mean acceptance length of exactly 1, not 72 / 70.
TEST(EngineRobustness, SglangVerifyStepLengthLeavesOutEachRequestsFirstToken) {
  StandIn server("sglang_steps");
  StrictSink sink;
  runner::UnitWork unit;
  unit.attempt_id = 1;
  unit.unit_id = 1;
  unit.runner = "engine";
  unit.processes = 1;
  unit.rounds = 2;
  unit.seed = 7;
  unit.cells.push_back(runner::CellWork{1,
                                        "depth=512",
                                        {{"engine", "sglang-standin"},
                                         {"model", "m"},
                                         {"spec", "eagle:3"},
                                         {"depth", 512},
                                         {"warmup", "none"}}});
  EngineRunnerOptions options;
  options.version_detection = VersionDetection::kOff;
  options.health_poll_interval = std::chrono::milliseconds(20);
  options.extra_recipes.push_back(std::make_shared<RunningSglang>(server.url()));
  EngineRunner runner(options);
  absl::Status s = runner.Run(unit, sink);
  ASSERT_TRUE(s.ok()) << s;
  std::vector<double> length, drafts;
  for (const auto& m : sink.measurements) {
    if (m.metric == "mean_acceptance_length") length.push_back(m.value);
    if (m.metric == "spec_drafts") drafts.push_back(m.value);
  }
  EXPECT_EQ(length, std::vector<double>(2, 1.0));
  EXPECT_EQ(drafts, std::vector<double>(2, 70.0));
}

// SGLang's own report of its configuration (GET /get_server_info) against the cell: a cell that
// asked triton of a server that runs fa3 fails before a request, with both values; the cell
// that asked what it runs passes, and the backend the server reports settles backend_mismatch
// where no log line named one (an external server has no log here).
TEST(EngineRobustness, SglangServerInfoOtherThanTheCellFailsWithBothValues) {
  StandIn server("sglang_info");
  StrictSink sink;
  runner::UnitWork unit;
  unit.attempt_id = 1;
  unit.unit_id = 1;
  unit.runner = "engine";
  unit.processes = 1;
  unit.rounds = 1;
  unit.seed = 7;
  unit.cells.push_back(runner::CellWork{1,
                                        "depth=512",
                                        {{"engine", "sglang-standin"},
                                         {"model", "qwen/qwen2.5-0.5b-instruct"},
                                         {"attention_backend", "triton"},
                                         {"prefix_caching", true},
                                         {"depth", 512},
                                         {"warmup", "none"}}});
  EngineRunnerOptions options;
  options.version_detection = VersionDetection::kOff;
  options.health_poll_interval = std::chrono::milliseconds(20);
  options.extra_recipes.push_back(std::make_shared<RunningSglang>(server.url()));
  EngineRunner runner(options);
  absl::Status s = runner.Run(unit, sink);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      s.message(),
      HasSubstr("attention_backend: the cell asked \"TRITON\", the engine reports \"FA3\""));
  EXPECT_THAT(s.message(), HasSubstr("SGLang adjusts its arguments"));
  EXPECT_EQ(server.requests(), 0);
  EXPECT_EQ(sink.Count("engine_config_mismatch"), 1);
  unit.cells[0].params["attention_backend"] = "fa3";
  StrictSink ok_sink;
  absl::Status ok = runner.Run(unit, ok_sink);
  ASSERT_TRUE(ok.ok()) << ok;
  ASSERT_EQ(ok_sink.Count("engine_config"), 1);
  for (const auto& e : ok_sink.evidence) {
    if (e.kind == "engine_config") {
      EXPECT_EQ(e.value["path"], "/get_server_info");
      EXPECT_EQ(e.value["reported"]["attention_backend"], "FA3");
      EXPECT_EQ(e.value["reported"]["disable_radix_cache"], false);
    }
    if (e.kind == "backend_mismatch") EXPECT_EQ(e.value, false);
    if (e.kind == "engine_backend") EXPECT_EQ(e.value["configured"], "FA3");
  }
  EXPECT_EQ(ok_sink.Count("backend_mismatch"), 1);
}

}  // namespace
}  // namespace ladder::engines
