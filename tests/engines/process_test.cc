// The process supervisor, with /bin/sh children: output capture, evidence scanning, exit and
// kill of the whole process group.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ladder/engines/process.h"

namespace ladder::engines {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::optional<ExitInfo> WaitExit(EngineProcess& p, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto e = p.Poll()) return e;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

TEST(EngineProcess, CapturesOutputAndEvidence) {
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "echo \"INFO Using AttentionBackendEnum.TRITON_ATTN backend.\"; "
               "echo 'Gemma 4: Forcing TRITON_ATTN because of heterogeneous head dims' 1>&2; "
               "echo PROBE_3D_SPEC_ACTIVE rows=2; echo PROBE_3D_SPEC_ACTIVE rows=2; "
               "echo \"value=$LADDER_TEST_VAR\"; echo \"unset=${HOME:-gone}\"; exit 3"};
  spec.env = {{"LADDER_TEST_VAR", "42"}};
  spec.env_unset = {"HOME"};
  ProcessOptions options;
  options.probe_patterns = {"PROBE_3D_SPEC_ACTIVE", "NEVER_SEEN"};
  auto process = EngineProcess::Start(spec, options);
  ASSERT_TRUE(process.ok()) << process.status();
  auto exit = WaitExit(**process, std::chrono::seconds(5));
  ASSERT_TRUE(exit.has_value());
  EXPECT_FALSE(exit->signaled);
  EXPECT_EQ(exit->code, 3);
  EXPECT_EQ((*process)->DescribeExit(*exit), "exited with status 3");
  LogEvidence ev = (*process)->Evidence();
  EXPECT_THAT(ev.backends, ElementsAre("TRITON_ATTN"));
  EXPECT_THAT(ev.forced, ElementsAre("TRITON_ATTN"));
  EXPECT_EQ(ev.probe_counts.at("PROBE_3D_SPEC_ACTIVE"), 2);
  EXPECT_EQ(ev.probe_counts.at("NEVER_SEEN"), 0);
  EXPECT_FALSE(ev.out_of_memory);
  std::vector<std::string> tail = (*process)->LogTail();
  EXPECT_THAT(tail, ::testing::Contains("value=42"));
  EXPECT_THAT(tail, ::testing::Contains("unset=gone"));
}

// A pinned agent sets its GPU variables in its own environment (agent/src/inventory.cc); the
// engine it starts inherits them, on top of which only the recipe's own variables are added.
TEST(EngineProcess, InheritsTheAgentsEnvironment) {
  ASSERT_EQ(setenv("CUDA_VISIBLE_DEVICES", "3", 1), 0);
  ASSERT_EQ(setenv("NCCL_NVLS_ENABLE", "0", 1), 0);
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo \"pinned=$CUDA_VISIBLE_DEVICES nvls=$NCCL_NVLS_ENABLE\""};
  auto process = EngineProcess::Start(spec, ProcessOptions{});
  ASSERT_TRUE(process.ok()) << process.status();
  auto exit = WaitExit(**process, std::chrono::seconds(5));
  ASSERT_TRUE(exit.has_value());
  // The exit can be seen before the reader has taken the last line: DescribeExit drains it.
  EXPECT_EQ((*process)->DescribeExit(*exit), "exited with status 0");
  EXPECT_THAT((*process)->LogTail(), ::testing::Contains("pinned=3 nvls=0"));
  unsetenv("CUDA_VISIBLE_DEVICES");
  unsetenv("NCCL_NVLS_ENABLE");
}

// Log lines as the engines print them (vLLM, SGLang, the synthetic engine), and lines that look
// alike but name something else.
TEST(BackendLines, ReadTheAttentionBackendOnly) {
  auto backend = [](std::string_view line) { return ParseBackendLine(line).backend; };
  EXPECT_EQ(backend("(EngineCore pid=163) INFO 03-20 10:08:32 [cuda.py:317] Using FLASH_ATTN "
                    "attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER']."),
            "FLASH_ATTN");
  EXPECT_EQ(backend("INFO [cuda.py:334] Using FLASHINFER attention backend out of potential "
                    "backends: ['FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION']."),
            "FLASHINFER");
  EXPECT_EQ(backend("Log shows: Using AttentionBackendEnum.FLASH_ATTN backend."), "FLASH_ATTN");
  EXPECT_EQ(backend("INFO 02-03 [cuda.py:157] Using Flash Attention backend on V1 engine."),
            "FLASH_ATTN");
  EXPECT_EQ(backend("INFO Using FlashInfer backend."), "FLASHINFER");
  EXPECT_EQ(backend("INFO Using Triton MLA backend."), "TRITON_MLA");
  EXPECT_EQ(backend("[2025-11-11] WARNING server_args.py:1183: Attention backend not explicitly "
                    "specified. Use flashinfer backend by default."),
            "flashinfer");
  EXPECT_EQ(backend("INFO ladder-synthetic: Using TRITON_ATTN backend."), "TRITON_ATTN");
  EXPECT_EQ(backend("INFO Using 'VLLM_CUTLASS' NvFp4 MoE backend out of potential backends: "
                    "['FLASHINFER_TRTLLM', 'VLLM_CUTLASS']."),
            "");
  EXPECT_EQ(backend("INFO Using FLASH_ATTN MLA prefill backend."), "");
  EXPECT_EQ(backend("INFO Using AttentionBackendEnum.TORCH_SDPA for MMEncoderAttention."), "");
  EXPECT_EQ(backend("INFO Using FlashAttention version 2"), "");
  EXPECT_EQ(ParseBackendLine("Forcing kv cache block size to 64 for FlashMLA backend.").forced, "");
}

TEST(EngineProcess, KeepsOnlyTheLastLines) {
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c", "i=0; while [ $i -lt 500 ]; do echo line$i; i=$((i+1)); done"};
  auto process = EngineProcess::Start(spec, ProcessOptions{});
  ASSERT_TRUE(process.ok());
  ASSERT_TRUE(WaitExit(**process, std::chrono::seconds(5)).has_value());
  (*process)->DescribeExit(ExitInfo{});  // drains the reader
  std::vector<std::string> tail = (*process)->LogTail();
  ASSERT_EQ(tail.size(), 200u);
  EXPECT_EQ(tail.front(), "line300");
  EXPECT_EQ(tail.back(), "line499");
}

TEST(EngineProcess, ReportsOutOfMemory) {
  LaunchSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB'; "
               "exit 1"};
  auto process = EngineProcess::Start(spec, ProcessOptions{});
  ASSERT_TRUE(process.ok());
  auto exit = WaitExit(**process, std::chrono::seconds(5));
  ASSERT_TRUE(exit.has_value());
  EXPECT_THAT((*process)->DescribeExit(*exit), HasSubstr("after reporting out of memory"));
}

TEST(EngineProcess, KillTakesTheWholeGroupAndIsIdempotent) {
  LaunchSpec spec;
  // The shell ignores SIGTERM and has a child that would outlive it.
  spec.argv = {"/bin/sh", "-c", "trap '' TERM; sleep 60 & echo started; wait"};
  ProcessOptions options;
  options.kill_grace = std::chrono::milliseconds(300);
  auto process = EngineProcess::Start(spec, options);
  ASSERT_TRUE(process.ok());
  int pgid = (*process)->pid();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE((*process)->Poll().has_value());
  auto start = std::chrono::steady_clock::now();
  (*process)->Kill();
  (*process)->Kill();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  auto exit = (*process)->Poll();
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->signaled);
  EXPECT_EQ(exit->code, SIGKILL);
  EXPECT_NE(kill(-pgid, 0), 0);  // nobody left in the group
}

TEST(EngineProcess, MissingExecutableIsNotFound) {
  LaunchSpec spec;
  spec.argv = {"/nonexistent/engine-binary", "--port", "1"};
  auto process = EngineProcess::Start(spec, ProcessOptions{});
  EXPECT_EQ(process.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(process.status().message(), HasSubstr("No such file or directory"));
}

TEST(Ports, DetectsATakenPort) {
  auto port = PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok());
  EXPECT_TRUE(CheckPortFree("127.0.0.1", *port).ok());
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  absl::Status s = CheckPortFree("127.0.0.1", *port);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("already in use"));
  close(fd);
}

}  // namespace
}  // namespace ladder::engines
