// The synthetic engine served in-process on a free port: completions, streaming, metrics,
// attention path logging and speculation counters.
#include <httplib.h>

#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "captured_log.h"
#include "ladder/engines/client.h"
#include "ladder/engines/synthetic_engine.h"

namespace ladder::engines {
namespace {

using ::testing::HasSubstr;

struct Served {
  std::unique_ptr<SyntheticEngine> engine;
  std::unique_ptr<EngineClient> client;
};

Served Serve(SyntheticEngineOptions options, CapturedLog& log) {
  auto engine = SyntheticEngine::Start(options, log.Fn(), [](int) { FAIL() << "fatal fault"; });
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  EngineEndpoints endpoints;
  endpoints.base_url = "http://127.0.0.1:" + std::to_string((*engine)->port());
  endpoints.model = options.preset;
  endpoints.version_path = "/version";
  Served s;
  s.engine = std::move(*engine);
  s.client = std::make_unique<EngineClient>(endpoints);
  return s;
}

SpecMetricNames VllmNames() {
  return {"vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
          "vllm:spec_decode_num_accepted_tokens"};
}

TEST(SyntheticEngine, AnswersDepth1024With64Tokens) {
  CapturedLog log;
  Served s = Serve({}, log);
  ASSERT_NE(s.engine, nullptr);
  EXPECT_GT(s.engine->port(), 0);
  EXPECT_TRUE(s.client->Health(std::chrono::seconds(2)).ok());
  auto version = s.client->Version();
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_THAT(*version, HasSubstr("ladder-synthetic"));
  EXPECT_EQ(log.Count("Using LADDER_UNIFIED_ATTN backend"), 1);

  std::vector<int32_t> prompt = MakePrompt(1024, 1, 0, 1024);
  auto result = s.client->Generate(prompt, 64);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->completion_tokens, 64);
  EXPECT_TRUE(result->usage_reported);
  EXPECT_EQ(result->reported_prompt_tokens, 1024);
  EXPECT_EQ(result->gaps_ms.size(), 63u);  // one token per chunk without speculation
  EXPECT_GT(result->ttft_ms, 0);
  // Speed is the bench's to measure, not a unit test's to assert (sanitizer builds and busy
  // machines vary 10x); the time is printed for the log.
  std::cout << "tiny, depth 1024, 64 tokens: " << result->total_ms << " ms\n";

  auto models = s.client->Get("/v1/models", std::chrono::seconds(2));
  ASSERT_TRUE(models.ok());
  EXPECT_THAT(*models, HasSubstr("\"id\":\"tiny\""));
  s.engine->Stop();
  s.engine->Stop();  // idempotent
  EXPECT_FALSE(s.client->Health(std::chrono::milliseconds(500)).ok());
}

TEST(SyntheticEngine, CountsAcceptedDraftsLikeVllm) {
  CapturedLog log;
  SyntheticEngineOptions options;
  options.spec_k = 2;
  options.acceptance = "1.0";
  Served s = Serve(options, log);
  ASSERT_NE(s.engine, nullptr);
  auto before = s.client->ReadSpecCounters(VllmNames());
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->num_drafts, 0);
  auto result = s.client->Generate(MakePrompt(128, 2, 0, 1024), 31);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->completion_tokens, 31);
  auto after = s.client->ReadSpecCounters(VllmNames());
  ASSERT_TRUE(after.ok());
  // First token from the prefill step, then 30 tokens in steps of k + 1 = 3.
  EXPECT_EQ(after->num_drafts, 10);
  EXPECT_EQ(after->num_draft_tokens, 20);
  EXPECT_EQ(after->num_accepted_tokens, 20);
  EXPECT_EQ(result->gaps_ms.size(), 10u);
}

TEST(SyntheticEngine, ZeroAcceptanceAcceptsNothing) {
  CapturedLog log;
  SyntheticEngineOptions options;
  options.spec_k = 1;
  options.acceptance = "0";
  Served s = Serve(options, log);
  ASSERT_NE(s.engine, nullptr);
  ASSERT_TRUE(s.client->Generate(MakePrompt(64, 3, 0, 1024), 9).ok());
  auto after = s.client->ReadSpecCounters(VllmNames());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->num_drafts, 8);
  EXPECT_EQ(after->num_accepted_tokens, 0);
}

TEST(SyntheticEngine, LegacyPolicyDropsVerificationTo2D) {
  CapturedLog log;
  SyntheticEngineOptions options;
  options.spec_k = 1;
  options.policy = "legacy";
  Served s = Serve(options, log);
  ASSERT_NE(s.engine, nullptr);
  ASSERT_TRUE(s.client->Generate(MakePrompt(512, 4, 0, 1024), 8).ok());
  EXPECT_EQ(log.Count("PROBE_3D_SPEC_ACTIVE"), 0);
  EXPECT_GT(log.Count("path=2d q_rows=2"), 0);
  auto metrics = s.client->Get("/metrics", std::chrono::seconds(2));
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(*metrics, HasSubstr("layer=\"global\",path=\"2d\",q_rows=\"2\""));
}

TEST(SyntheticEngine, SpecAwarePolicyKeeps3DAndFiresTheProbe) {
  CapturedLog log;
  SyntheticEngineOptions options;
  options.spec_k = 1;
  options.policy = "spec-aware";
  options.attention_backend = "TRITON_ATTN";
  Served s = Serve(options, log);
  ASSERT_NE(s.engine, nullptr);
  ASSERT_TRUE(s.client->Generate(MakePrompt(512, 5, 0, 1024), 8).ok());
  EXPECT_GT(log.Count("PROBE_3D_SPEC_ACTIVE"), 0);
  EXPECT_EQ(log.Count("path=2d q_rows=2"), 0);
  EXPECT_EQ(log.Count("Using TRITON_ATTN backend"), 1);
}

TEST(SyntheticEngine, RejectsBadRequestsWithHttp400) {
  CapturedLog log;
  Served s = Serve({}, log);
  ASSERT_NE(s.engine, nullptr);
  auto result = s.client->Generate({}, 8);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(result.status().message(), HasSubstr("HTTP 400"));
  auto too_long = s.client->Generate(MakePrompt(32768, 1, 0, 10), 8);
  EXPECT_THAT(too_long.status().message(), HasSubstr("max_model_len"));
}

TEST(SyntheticEngine, FailsCleanlyOnATakenPortOrBadOptions) {
  CapturedLog log;
  Served s = Serve({}, log);
  ASSERT_NE(s.engine, nullptr);
  SyntheticEngineOptions same_port;
  same_port.port = s.engine->port();
  auto second = SyntheticEngine::Start(same_port, log.Fn());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("already in use"));

  SyntheticEngineOptions bad;
  bad.preset = "gpt-5";
  EXPECT_THAT(bad.Validate().message(), HasSubstr("known: gemma4-31b, tiny"));
  bad = {};
  bad.acceptance = "1024:0.5,oops";
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
  bad = {};
  bad.policy = "fast";
  EXPECT_THAT(bad.Validate().message(), HasSubstr("legacy or spec-aware"));
}

TEST(SyntheticEngine, DeviceOptionIsValidatedAndCpuAlwaysWorks) {
  SyntheticEngineOptions bad;
  bad.device = "tpu";
  EXPECT_THAT(bad.Validate().message(), HasSubstr("expected cpu, cuda or auto"));

  CapturedLog log;
  SyntheticEngineOptions cpu;
  cpu.device = "cpu";
  Served s = Serve(cpu, log);
  ASSERT_NE(s.engine, nullptr);
  EXPECT_EQ(log.Count("model on device cpu"), 1);
  auto result = s.client->Generate(MakePrompt(64, 2, 0, 1024), 4);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->completion_tokens, 4);
}

TEST(SyntheticEngine, CudaDeviceFailsClearlyWhereThereIsNone) {
  SyntheticEngineOptions options;
  options.device = "cuda";
  CapturedLog log;
  auto engine = SyntheticEngine::Start(options, log.Fn());
  if (engine.ok()) GTEST_SKIP() << "this binary has CUDA and a GPU (engines_gpu_tests cover it)";
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(engine.status().message(), HasSubstr("--device cuda"));
}

TEST(SyntheticEngine, MalformedFaultBreaksTheClientClearly) {
  CapturedLog log;
  SyntheticEngineOptions options;
  options.malformed = true;
  Served s = Serve(options, log);
  ASSERT_NE(s.engine, nullptr);
  auto result = s.client->Generate(MakePrompt(16, 1, 0, 1024), 8);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(result.status().message(), HasSubstr("malformed"));
}

// The text of a non-streamed greedy completion of `prompt`.
std::string Complete(int port, const std::vector<int32_t>& prompt, int max_tokens) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(60));
  nlohmann::json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  auto reply = client.Post("/v1/completions", body.dump(), "application/json");
  if (!reply || reply->status != 200) return "<failed>";
  return nlohmann::json::parse(reply->body)["choices"][0]["text"].get<std::string>();
}

double MetricValue(EngineClient& client, const std::string& name) {
  auto samples = client.Metrics();
  EXPECT_TRUE(samples.ok());
  return samples.ok() ? SumCounter(*samples, name).value_or(-1) : -1;
}

// Continuous batching: concurrent requests share steps, and each one's tokens are exactly what
// it gets alone (its rows are computed as if alone; only the weight reads are shared).
TEST(SyntheticEngine, BatchesConcurrentRequestsWithoutChangingTheirTokens) {
  for (int k : {0, 2}) {
    CapturedLog log;
    SyntheticEngineOptions options;
    options.spec_k = k;
    options.acceptance = "0.6";
    options.max_batch = 4;
    Served s = Serve(options, log);
    ASSERT_NE(s.engine, nullptr);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 4; ++i) prompts.push_back(MakePrompt(200 + 50 * i, 10 + i, 0, 1024));
    std::vector<std::string> alone;
    for (const auto& p : prompts) alone.push_back(Complete(s.engine->port(), p, 24));
    const double steps_alone = MetricValue(*s.client, "ladder:batch_steps_total");
    EXPECT_EQ(steps_alone, MetricValue(*s.client, "ladder:batch_sequences_total"));

    std::vector<std::string> together(4);
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back([&, i] { together[i] = Complete(s.engine->port(), prompts[i], 24); });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < 4; ++i) {
      EXPECT_NE(alone[i], "<failed>");
      EXPECT_EQ(together[i], alone[i]) << "k=" << k << " request " << i;
    }
    const double steps = MetricValue(*s.client, "ladder:batch_steps_total") - steps_alone;
    const double sequences = MetricValue(*s.client, "ladder:batch_sequences_total") - steps_alone;
    // The same sequence-steps as alone, in fewer steps: more than one sequence per step.
    EXPECT_EQ(sequences, steps_alone) << "k=" << k;
    EXPECT_LT(steps, 0.75 * steps_alone) << "k=" << k;
  }
}

TEST(SyntheticEngine, MaxBatchOneServesOneRequestAtATime) {
  CapturedLog log;
  SyntheticEngineOptions options;
  options.max_batch = 1;
  Served s = Serve(options, log);
  ASSERT_NE(s.engine, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] { Complete(s.engine->port(), MakePrompt(64, i, 0, 1024), 8); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(MetricValue(*s.client, "ladder:batch_steps_total"), 24);
  EXPECT_EQ(MetricValue(*s.client, "ladder:batch_sequences_total"), 24);
}

// The planted slowdown (fault_slow_steps_percent) changes how long a step takes, never what it
// computes: the same prompt gives the same text. Its size is measured, not asserted here
// (docs/statistics.md, "Two runs on one host"); out-of-range values are refused.
TEST(SyntheticEngine, PlantedSlowdownKeepsTheTokensAndIsValidated) {
  std::vector<std::string> texts;
  for (int percent : {0, 50}) {
    CapturedLog log;
    SyntheticEngineOptions options;
    options.slow_steps_percent = percent;
    Served s = Serve(options, log);
    ASSERT_NE(s.engine, nullptr);
    texts.push_back(Complete(s.engine->port(), MakePrompt(256, 1, 0, 1024), 16));
    s.engine->Stop();
  }
  EXPECT_NE(texts[0], "<failed>");
  EXPECT_EQ(texts[0], texts[1]);
  SyntheticEngineOptions bad;
  bad.slow_steps_percent = 1001;
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.Validate().message(), HasSubstr("--slow-steps-percent"));
  bad.slow_steps_percent = -1;
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ladder::engines
