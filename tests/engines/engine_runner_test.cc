// The EngineRunner against the synthetic engine run as a child process (synthetic_engine_main),
// and its failure paths: crash mid-cell, out of memory, never healthy, malformed JSON, port
// taken, bad parameters, cancellation; plus an external server.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ladder/engines/engine_runner.h"
#include "ladder/engines/synthetic_engine.h"
#include "runner_harness.h"

namespace ladder::engines {
namespace {

using harness::Cell;
using harness::FakeSink;
using harness::Options;
using harness::Unit;
using runner::CellWork;
using runner::Evidence;
using runner::Measurement;
using runner::UnitWork;
using ::testing::Contains;
using ::testing::HasSubstr;

TEST(EngineRunner, MeasuresPairedArmsOnTheSyntheticEngine) {
  // spec off vs k=1 under the spec-aware policy, at two depths, two rounds.
  std::vector<CellWork> cells;
  int64_t id = 1;
  for (const char* spec : {"off", "mtp:1"}) {
    for (int depth : {256, 512}) {
      cells.push_back(Cell(id++, {{"spec", spec},
                                  {"depth", depth},
                                  {"policy", "spec-aware"},
                                  {"acceptance", 0.5},
                                  {"attention_backend", "LADDER_UNIFIED_ATTN"},
                                  {"short_tokens", 4},
                                  {"long_tokens", 96}}));
    }
  }
  FakeSink sink;
  EngineRunner runner(Options());
  EXPECT_EQ(runner.name(), "engine");
  absl::Status s = runner.Run(Unit(cells, 1, 2), sink);
  ASSERT_TRUE(s.ok()) << s;
  for (int64_t cell = 1; cell <= 4; ++cell) {
    std::vector<double> rates = sink.Values(cell, "decode_tok_s");
    ASSERT_EQ(rates.size(), 2u) << "cell " << cell;
    for (double r : rates) EXPECT_GT(r, 0);
    EXPECT_EQ(sink.Values(cell, "ttft_ms").size(), 2u);
    EXPECT_EQ(sink.Values(cell, "itl_ms_p50").size(), 2u);
    const bool spec = cell > 2;
    EXPECT_EQ(sink.Values(cell, "mean_acceptance_length").size(), spec ? 2u : 0u);
    if (spec) {
      for (double v : sink.Values(cell, "acceptance_rate")) EXPECT_TRUE(v >= 0 && v <= 1);
      for (double v : sink.Values(cell, "mean_acceptance_length")) EXPECT_TRUE(v >= 1 && v <= 2);
    } else {
      EXPECT_EQ(sink.Values(cell, "spec_drafts"), (std::vector<double>{0, 0}));
    }
    const Evidence* backend = sink.Find(cell, "engine_backend");
    ASSERT_NE(backend, nullptr);
    EXPECT_EQ(backend->value["backends"], nlohmann::json({"LADDER_UNIFIED_ATTN"}));
    const Evidence* mismatch = sink.Find(cell, "backend_mismatch");
    ASSERT_NE(mismatch, nullptr);
    EXPECT_EQ(mismatch->value, false);
    const Evidence* probes = sink.Find(cell, "probe_counts");
    ASSERT_NE(probes, nullptr);
    if (spec) {
      EXPECT_GT(probes->value["PROBE_3D_SPEC_ACTIVE"].get<int>(), 0);
    } else {
      EXPECT_EQ(probes->value["PROBE_3D_SPEC_ACTIVE"].get<int>(), 0);
    }
    const Evidence* version = sink.Find(cell, "engine_version");
    ASSERT_NE(version, nullptr);
    EXPECT_THAT(version->value.get<std::string>(), HasSubstr("ladder-synthetic"));
    const Evidence* restartable = sink.Find(cell, "restartable");
    ASSERT_NE(restartable, nullptr);
    EXPECT_EQ(restartable->value, true);
  }
  // Both depths of one arm were served by one engine process.
  EXPECT_EQ(sink.Find(1, "engine_process")->value["pid"],
            sink.Find(2, "engine_process")->value["pid"]);
  EXPECT_NE(sink.Find(1, "engine_process")->value["pid"],
            sink.Find(3, "engine_process")->value["pid"]);
}

TEST(EngineRunner, FlagsABackendMismatch) {
  FakeSink sink;
  EngineRunner runner(Options());
  absl::Status s = runner.Run(Unit({Cell(7, {{"depth", 64},
                                             {"attention_backend", "FLASHINFER"},
                                             {"force_backend", "TRITON_ATTN"},
                                             {"short_tokens", 2},
                                             {"long_tokens", 6}})}),
                              sink);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_NE(sink.Find(7, "backend_mismatch"), nullptr);
  EXPECT_EQ(sink.Find(7, "backend_mismatch")->value, true);
  EXPECT_EQ(sink.Find(7, "engine_backend")->value["forced"], nlohmann::json({"TRITON_ATTN"}));
}

TEST(EngineRunner, EngineExitingMidCellFailsWithItsLog) {
  FakeSink sink;
  EngineRunner runner(Options());
  absl::Status s = runner.Run(Unit({Cell(1, {{"depth", 64},
                                             {"fault_crash_after_requests", 1},
                                             {"short_tokens", 2},
                                             {"long_tokens", 16}})}),
                              sink);
  std::cout << "status: " << s << "\n";
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("exited with status 3 mid-cell"));
  EXPECT_THAT(s.message(), HasSubstr("crashing on purpose"));
  const Evidence* tail = sink.Find(1, "log_tail");
  ASSERT_NE(tail, nullptr);
  EXPECT_THAT(tail->value.dump(), HasSubstr("crashing on purpose"));
}

TEST(EngineRunner, OutOfMemoryIsNamed) {
  FakeSink sink;
  EngineRunner runner(Options());
  absl::Status s = runner.Run(Unit({Cell(1, {{"depth", 64},
                                             {"fault_oom_after_requests", 0},
                                             {"short_tokens", 2},
                                             {"long_tokens", 6}})}),
                              sink);
  std::cout << "status: " << s << "\n";
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("after reporting out of memory"));
}

TEST(EngineRunner, MalformedJsonFailsTheUnit) {
  FakeSink sink;
  EngineRunner runner(Options());
  absl::Status s =
      runner.Run(Unit({Cell(1, {{"depth", 64}, {"fault_malformed_json", true}})}), sink);
  std::cout << "status: " << s << "\n";
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("malformed JSON from engine"));
  EXPECT_NE(sink.Find(1, "log_tail"), nullptr);
}

// A recipe whose "engine" only sleeps: it never becomes healthy.
class SleeperRecipe final : public Recipe {
 public:
  std::string_view name() const override { return "sleeper"; }
  const std::vector<ParamSpec>& parameters() const override {
    static const std::vector<ParamSpec> kNone;
    return kNone;
  }
  absl::StatusOr<RenderedEngine> Render(const nlohmann::json& params,
                                        const RecipeContext& context) const override {
    RenderedEngine r;
    r.engine = "sleeper";
    r.launch = LaunchSpec{{"/bin/sleep", "30"}, {}, {}, {}};
    r.endpoints.base_url = "http://127.0.0.1:" + std::to_string(context.port);
    r.start_timeout = std::chrono::milliseconds(
        static_cast<int64_t>(params.value("start_timeout_s", 1.0) * 1000));
    return r;
  }
};

TEST(EngineRunner, NeverHealthyTimesOutAndKillsTheEngine) {
  EngineRunnerOptions options = Options();
  options.extra_recipes.push_back(std::make_shared<SleeperRecipe>());
  FakeSink sink;
  EngineRunner runner(options);
  auto start = std::chrono::steady_clock::now();
  absl::Status s = runner.Run(
      Unit({Cell(1, {{"engine", "sleeper"}, {"depth", 64}, {"start_timeout_s", 0.5}})}), sink);
  std::cout << "status: " << s << "\n";
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("did not become healthy within 0.5 s"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(EngineRunner, TakenPortIsReported) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int taken = ntohs(addr.sin_port);

  EngineRunnerOptions options = Options();
  options.pick_port = [taken](const std::string&) -> absl::StatusOr<int> { return taken; };
  FakeSink sink;
  EngineRunner runner(options);
  absl::Status s = runner.Run(Unit({Cell(1, {{"depth", 64}})}), sink);
  std::cout << "status: " << s << "\n";
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("port " + std::to_string(taken)));
  EXPECT_THAT(s.message(), HasSubstr("already in use"));
  close(fd);
}

TEST(EngineRunner, EngineDyingAtStartIsReportedWithItsLog) {
  FakeSink sink;
  EngineRunner runner(Options());
  absl::Status s = runner.Run(Unit({Cell(1, {{"depth", 64}, {"preset", "no-such-model"}})}), sink);
  std::cout << "status: " << s << "\n";
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("exited with status 1 before becoming healthy"));
  EXPECT_THAT(s.message(), HasSubstr("unknown preset"));
}

TEST(EngineRunner, RejectsBadParametersBeforeStartingAnything) {
  FakeSink sink;
  EngineRunner runner(Options());
  absl::Status s = runner.Run(Unit({Cell(1, {{"depth", 64}, {"polcy", "legacy"}})}), sink);
  std::cout << "status: " << s << "\n";
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("unknown parameter 'polcy'"));
  s = runner.Run(Unit({Cell(1, {{"depth", 64}, {"short_tokens", 8}, {"long_tokens", 8}})}), sink);
  EXPECT_THAT(s.message(), HasSubstr("must exceed short_tokens"));
  EXPECT_TRUE(sink.measurements.empty());
}

TEST(EngineRunner, CancelKillsTheEngine) {
  FakeSink sink;
  sink.cancel_after_records = 1;
  EngineRunner runner(Options());
  absl::Status s =
      runner.Run(Unit({Cell(1, {{"depth", 64}, {"short_tokens", 2}, {"long_tokens", 6}}),
                       Cell(2, {{"depth", 128}, {"short_tokens", 2}, {"long_tokens", 6}})},
                      1, 3),
                 sink);
  std::cout << "status: " << s << "\n";
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_LT(sink.Values(1, "decode_tok_s").size() + sink.Values(2, "decode_tok_s").size(), 6u);
}

TEST(EngineRunner, ExternalServerIsSharedAndNotRestartable) {
  auto engine = SyntheticEngine::Start(SyntheticEngineOptions{}, [](std::string_view) {});
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::string url = "http://127.0.0.1:" + std::to_string((*engine)->port());
  FakeSink sink;
  EngineRunner runner(Options());
  absl::Status s = runner.Run(Unit({Cell(5, {{"engine", "external"},
                                             {"url", url},
                                             {"model", "tiny"},
                                             {"depth", 128},
                                             {"short_tokens", 2},
                                             {"long_tokens", 32}})},
                                   2, 1),
                              sink);
  ASSERT_TRUE(s.ok()) << s;
  // One decode rate per process replicate (30 tokens apart, so timing noise cannot hide it).
  EXPECT_EQ(sink.Values(5, "decode_tok_s").size(), 2u);
  const Evidence* restartable = sink.Find(5, "restartable");
  ASSERT_NE(restartable, nullptr);
  EXPECT_EQ(restartable->value, false);
  EXPECT_THAT(sink.Find(5, "engine_process")->value["note"].get<std::string>(),
              HasSubstr("cannot restart"));
}

}  // namespace
}  // namespace ladder::engines
