// Several GPUs on one host, end to end on loopback with fake devices: agents pinned to one GPU
// each (`ladder agent --gpus 0`, `--gpus 1`) are sessions of their own on one host, list only
// their device, share a 1-GPU run between them, and never get a cell that needs two GPUs; an
// agent holding both devices gets it once they have left. A --gpus the host cannot satisfy is
// bad input.
#include <gtest/gtest.h>
#include <signal.h>

#include <tuple>

#include <nlohmann/json.hpp>

#include "fleet.h"
#include "process.h"

namespace ladder::testing {
namespace {

// Two H200s as nvidia-smi would list them; the agents pin to them as if they were real.
const std::string kTwoGpus = nlohmann::json::array({
                                                       {{"vendor", "nvidia"},
                                                        {"name", "NVIDIA H200"},
                                                        {"arch", "sm_90"},
                                                        {"uuid", "GPU-fake-0"},
                                                        {"memory_mib", 143771}},
                                                       {{"vendor", "nvidia"},
                                                        {"name", "NVIDIA H200"},
                                                        {"arch", "sm_90"},
                                                        {"uuid", "GPU-fake-1"},
                                                        {"memory_mib", 143771}},
                                                   })
                                 .dump();

std::string Matrix(const std::string& name, int gpu_count, int sessions) {
  return "name: " + name +
         "\nrunner: kernel\naxes: {depth: [64, 128]}\n"
         "fixed: {backend: cpu, preset: tiny, dtype: f32, repeats: 2, warmup: 1}\n"
         "replicates: {sessions: " +
         std::to_string(sessions) +
         ", processes: 1, rounds: 2}\n"
         "requires: {gpu_vendor: nvidia, gpu_count: " +
         std::to_string(gpu_count) + "}\n";
}

TEST(Gpus, PinnedAgentsAreSessionsOfTheirOwnAndNeverGetATwoGpuCell) {
  TempDir dir;
  const std::string db = dir.File("results.db");
  int port = 0;
  auto coordinator =
      StartCoordinator(dir, db, &port, {"--heartbeat-ms", "300", "--lease-ms", "5000"});
  ASSERT_GT(port, 0) << coordinator->Log();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  auto gpu0 = StartAgent(dir, port, "gpu0", {"--fake-gpus", kTwoGpus, "--gpus", "0"});
  auto gpu1 = StartAgent(dir, port, "gpu1", {"--fake-gpus", kTwoGpus, "--gpus", "1"});
  ASSERT_TRUE(
      WaitFor([&] { return !SessionOf(db, "gpu0").empty() && !SessionOf(db, "gpu1").empty(); },
              std::chrono::seconds(30)))
      << gpu0->Log() << gpu1->Log();
  const std::string s0 = SessionOf(db, "gpu0");
  const std::string s1 = SessionOf(db, "gpu1");
  EXPECT_NE(s0, s1);
  // One host, two sessions, each listing only its own device.
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(DISTINCT machine_id || boot_id) FROM sessions"), 1);
  for (const auto& [session, uuid, index] :
       {std::tuple{s0, "GPU-fake-0", "0"}, std::tuple{s1, "GPU-fake-1", "1"}}) {
    EXPECT_EQ(
        QueryInt(db, "SELECT COUNT(*) FROM session_gpus WHERE session_id = '" + session + "'"), 1);
    EXPECT_EQ(QueryText(db, "SELECT uuid FROM session_gpus WHERE session_id = '" + session + "'"),
              uuid);
    EXPECT_EQ(QueryText(db,
                        "SELECT json_extract(software, '$.pinned_gpus') FROM sessions "
                        "WHERE id = '" +
                            session + "'"),
              index);
  }

  // A 2-GPU matrix waits, saying why; nothing is leased.
  WriteFile(dir.File("two.yaml"), Matrix("two-gpus", 2, 1));
  auto submit_two =
      RunCommand({LadderBinary(), "submit", dir.File("two.yaml"), "--coordinator", address});
  ASSERT_EQ(submit_two.exit_code, 0) << submit_two.err;
  EXPECT_NE(submit_two.err.find("gpu_count>=2"), std::string::npos) << submit_two.err;
  const std::string two_run = LastLine(submit_two.out);

  // A 1-GPU matrix with two sessions per cell runs on the two pinned agents: the GPU-to-GPU
  // level of one host. The 2-GPU run stays queued meanwhile.
  WriteFile(dir.File("one.yaml"), Matrix("one-gpu", 1, 2));
  auto one = RunCommand(
      {LadderBinary(), "submit", dir.File("one.yaml"), "--wait", "--coordinator", address},
      std::chrono::seconds(120));
  ASSERT_EQ(one.exit_code, 0) << one.err << gpu0->Log() << gpu1->Log();
  const std::string one_run = LastLine(one.out);
  ExpectExactlyOnce(db, std::stoll(one_run), 4);
  EXPECT_EQ(
      QueryInt(db, "SELECT COUNT(DISTINCT session_id) FROM valid_measurements WHERE run_id = " +
                       one_run),
      2);

  auto status = RunCommand({LadderBinary(), "status", two_run, "--coordinator", address});
  EXPECT_NE(status.out.find("WAITING:"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("gpu_count>=2"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("1 matching GPU, 2 needed"), std::string::npos) << status.out;
  EXPECT_EQ(QueryInt(db,
                     "SELECT COUNT(*) FROM attempts a JOIN units u ON u.id = a.unit_id "
                     "WHERE u.run_id = " +
                         two_run),
            0)
      << "an agent holding one GPU was leased a 2-GPU cell";

  // The pinned agents leave; one agent holding both devices takes the 2-GPU run.
  gpu0->Signal(SIGTERM);
  gpu1->Signal(SIGTERM);
  EXPECT_EQ(gpu0->Wait(std::chrono::seconds(20)), 0) << gpu0->Log();
  EXPECT_EQ(gpu1->Wait(std::chrono::seconds(20)), 0) << gpu1->Log();
  auto both = StartAgent(dir, port, "both", {"--fake-gpus", kTwoGpus, "--gpus", "0,1"});
  auto wait = RunCommand({LadderBinary(), "watch", two_run, "--coordinator", address},
                         std::chrono::seconds(120));
  EXPECT_EQ(wait.exit_code, 0) << wait.err << both->Log();
  ExpectExactlyOnce(db, std::stoll(two_run), 2);
  const std::string sb = SessionOf(db, "both");
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM session_gpus WHERE session_id = '" + sb + "'"), 2);
  EXPECT_EQ(QueryInt(db,
                     "SELECT COUNT(*) FROM attempts a JOIN units u ON u.id = a.unit_id "
                     "WHERE u.run_id = " +
                         two_run + " AND a.session_id != '" + sb + "'"),
            0);
  both->Signal(SIGTERM);
  EXPECT_EQ(both->Wait(std::chrono::seconds(20)), 0) << both->Log();
  coordinator->Signal(SIGTERM);
  EXPECT_EQ(coordinator->Wait(std::chrono::seconds(20)), 0) << coordinator->Log();
}

TEST(Gpus, AGpuListTheHostCannotSatisfyIsBadInput) {
  TempDir dir;
  // No coordinator is needed: the agent checks its devices before it connects.
  for (const auto& [gpus, message] :
       {std::pair{std::string("2"), std::string("--gpus 2: this host has 2 GPUs (devices 0-1)")},
        std::pair{std::string("0,0"), std::string("--gpus: device 0 is named twice")},
        std::pair{std::string("one"), std::string("--gpus: expected device indices")}}) {
    auto result = RunCommand({LadderBinary(), "agent", "--coordinator", "127.0.0.1:1", "--spool",
                              dir.File("spool.db"), "--fake-gpus", kTwoGpus, "--gpus", gpus},
                             std::chrono::seconds(30));
    EXPECT_EQ(result.exit_code, 2) << gpus << ": " << result.err;
    EXPECT_NE(result.err.find(message), std::string::npos) << result.err;
  }
}

}  // namespace
}  // namespace ladder::testing
