// The synthetic engine's CUDA model (tiny preset) served in-process: it generates, logs where it
// runs, and its attention follows the policy through the kernels' device-resident entry point.
// Labelled `gpu`; skips where the binary has no CUDA or the machine no GPU.
#include <mutex>

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

// Starts a CUDA engine; an empty Served (and a skip) where there is no GPU.
Served ServeOnGpu(SyntheticEngineOptions options, CapturedLog& log) {
  options.device = "cuda";
  auto engine =
      SyntheticEngine::Start(options, log.Fn(), [](int) { ADD_FAILURE() << "fatal fault"; });
  if (!engine.ok()) {
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kUnavailable) << engine.status();
    return {};
  }
  EngineEndpoints endpoints;
  endpoints.base_url = "http://127.0.0.1:" + std::to_string((*engine)->port());
  endpoints.model = options.preset;
  Served s;
  s.engine = std::move(*engine);
  s.client = std::make_unique<EngineClient>(endpoints);
  return s;
}

TEST(SyntheticEngineGpu, GeneratesOnTheDeviceWithoutSpeculation) {
  CapturedLog log;
  Served s = ServeOnGpu({}, log);
  if (s.engine == nullptr) GTEST_SKIP() << "no CUDA device";
  EXPECT_EQ(log.Count("model on device cuda"), 1);
  auto result = s.client->Generate(MakePrompt(1500, 1, 0, 1024), 32);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->completion_tokens, 32);
  // One row per step: both policies take 3D; the sliding layers' window is 128 at depth 1500.
  EXPECT_GT(log.Count("path=3d q_rows=1"), 0);
  EXPECT_EQ(log.Count("q_rows=2"), 0);
}

TEST(SyntheticEngineGpu, LegacyPolicySendsVerificationTo2D) {
  CapturedLog log;
  SyntheticEngineOptions options;
  options.spec_k = 1;
  options.policy = "legacy";
  Served s = ServeOnGpu(options, log);
  if (s.engine == nullptr) GTEST_SKIP() << "no CUDA device";
  auto result = s.client->Generate(MakePrompt(700, 2, 0, 1024), 16);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->completion_tokens, 16);
  EXPECT_EQ(log.Count("PROBE_3D_SPEC_ACTIVE"), 0);
  EXPECT_GT(log.Count("path=2d q_rows=2"), 0);
  auto metrics = s.client->Get("/metrics", std::chrono::seconds(2));
  ASSERT_TRUE(metrics.ok());
  EXPECT_THAT(*metrics, HasSubstr("model=\"target\",layer=\"global\",path=\"2d\",q_rows=\"2\""));
  EXPECT_THAT(*metrics, HasSubstr("model=\"drafter\",layer=\"global\",path=\"3d\",q_rows=\"1\""));
}

TEST(SyntheticEngineGpu, SpecAwarePolicyKeepsVerificationIn3D) {
  CapturedLog log;
  SyntheticEngineOptions options;
  options.spec_k = 2;
  options.policy = "spec-aware";
  Served s = ServeOnGpu(options, log);
  if (s.engine == nullptr) GTEST_SKIP() << "no CUDA device";
  auto result = s.client->Generate(MakePrompt(700, 3, 0, 1024), 16);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->completion_tokens, 16);
  EXPECT_GT(log.Count("PROBE_3D_SPEC_ACTIVE"), 0);
  EXPECT_GT(log.Count("path=3d q_rows=3"), 0);
  EXPECT_EQ(log.Count("path=2d q_rows=3"), 0);
}

}  // namespace
}  // namespace ladder::engines
