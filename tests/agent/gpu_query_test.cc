// The inventory's GPU parsing against what nvidia-smi and rocm-smi print on real machines,
// recorded in testdata/ (an 8 x H200 node, a 2 x A100 VM, an MI250 seen as its two GCDs, a
// Radeon RX 6800 XT under ROCm 5.7 and 5.2, and the outputs of broken or missing drivers).
#include "gpu_query.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace ladder::agent {
namespace {

std::string Recording(const std::string& name) {
  const std::string path = std::string(LADDER_AGENT_TESTDATA) + "/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing recording " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool Mentions(const std::vector<std::string>& problems, const std::string& needle) {
  for (const auto& p : problems) {
    if (p.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(GpuQuery, NvidiaSmiIsAskedForExactlyTheFieldsTheParserReads) {
  const std::vector<std::string> command = NvidiaSmiCommand();
  ASSERT_EQ(command.size(), 3u);
  EXPECT_EQ(command[0], "nvidia-smi");
  EXPECT_EQ(command[1], "--query-gpu=name,uuid,memory.total,driver_version,compute_cap");
  EXPECT_EQ(command[2], "--format=csv,noheader,nounits");
}

TEST(GpuQuery, ParsesAnEightGpuH200Node) {
  const std::string output = Recording("nvidia-smi-h200x8.csv");
  GpuQueryResult result = ParseNvidiaSmi(output);
  EXPECT_TRUE(result.problems.empty()) << result.problems.front();
  ASSERT_EQ(result.gpus.size(), 8u);
  std::set<std::string> uuids;
  for (const GpuInfo& gpu : result.gpus) {
    EXPECT_EQ(gpu.vendor, "nvidia");
    EXPECT_EQ(gpu.name, "NVIDIA H200");
    EXPECT_EQ(gpu.arch, "sm_90");
    EXPECT_EQ(gpu.memory_mib, 143771);
    EXPECT_EQ(gpu.driver, "570.124.06");
    EXPECT_EQ(gpu.uuid.rfind("GPU-", 0), 0u) << gpu.uuid;
    uuids.insert(gpu.uuid);
  }
  EXPECT_EQ(uuids.size(), 8u) << "each GPU keeps its own UUID";
  EXPECT_EQ(result.gpus.front().uuid, "GPU-6f1a2c3e-8b47-4d2e-9c51-0a7e3f9b2d14");
  EXPECT_EQ(result.gpus.back().uuid, "GPU-48f2b7c0-d91a-4e65-8b3f-6a0c2e9d5f71");
}

TEST(GpuQuery, ParsesATwoGpuA100Box) {
  GpuQueryResult result = ParseNvidiaSmi(Recording("nvidia-smi-a100x2.csv"));
  EXPECT_TRUE(result.problems.empty());
  ASSERT_EQ(result.gpus.size(), 2u);
  EXPECT_EQ(result.gpus[0].name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(result.gpus[0].arch, "sm_80");
  EXPECT_EQ(result.gpus[0].memory_mib, 81920);
  EXPECT_EQ(result.gpus[0].driver, "535.183.01");
  EXPECT_EQ(result.gpus[1].uuid, "GPU-e5a13c8d-7f2b-0946-d1c3-a8e6b4f2079c");
}

TEST(GpuQuery, NvidiaSmiWithoutItsDriverGivesNoGpuAndSaysWhy) {
  GpuQueryResult result = ParseNvidiaSmi(Recording("nvidia-smi-no-driver.txt"));
  EXPECT_TRUE(result.gpus.empty());
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_NE(result.problems[0].find("couldn't communicate with the NVIDIA driver"),
            std::string::npos)
      << result.problems[0];
}

TEST(GpuQuery, ADriverThatDoesNotKnowComputeCapIsReported) {
  GpuQueryResult result = ParseNvidiaSmi(Recording("nvidia-smi-old-driver.txt"));
  EXPECT_TRUE(result.gpus.empty());
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_NE(result.problems[0].find("line 1"), std::string::npos) << result.problems[0];
  EXPECT_NE(result.problems[0].find("\"compute_cap\" is not a valid field"), std::string::npos)
      << result.problems[0];
}

TEST(GpuQuery, UnreadableFieldsAreLeftEmptyAndCutLinesSkippedWithTheirLineNumbers) {
  GpuQueryResult result = ParseNvidiaSmi(Recording("nvidia-smi-partly-malformed.csv"));
  ASSERT_EQ(result.gpus.size(), 2u);
  EXPECT_EQ(result.gpus[0].memory_mib, 81559);
  // [N/A] memory: the GPU is still reported, with its memory unknown.
  EXPECT_EQ(result.gpus[1].memory_mib, 0);
  EXPECT_EQ(result.gpus[1].arch, "sm_90");
  ASSERT_EQ(result.problems.size(), 2u);
  EXPECT_NE(result.problems[0].find("line 2"), std::string::npos) << result.problems[0];
  EXPECT_NE(result.problems[0].find("[N/A]"), std::string::npos) << result.problems[0];
  EXPECT_NE(result.problems[1].find("line 3"), std::string::npos) << result.problems[1];
  EXPECT_NE(result.problems[1].find("got 2"), std::string::npos) << result.problems[1];
}

TEST(GpuQuery, EmptyOutputsMeanNoGpusAndNoProblems) {
  for (const char* name : {"nvidia-smi-empty.txt", "rocm-smi-empty.txt"}) {
    const std::string output = Recording(name);
    GpuQueryResult nvidia = ParseNvidiaSmi(output);
    GpuQueryResult amd = ParseRocmSmi(output);
    EXPECT_TRUE(nvidia.gpus.empty() && nvidia.problems.empty()) << name;
    EXPECT_TRUE(amd.gpus.empty() && amd.problems.empty()) << name;
  }
}

TEST(GpuQuery, ParsesAnMi250AsItsTwoGcds) {
  GpuQueryResult result = ParseRocmSmi(Recording("rocm-smi-mi250.json"));
  EXPECT_TRUE(result.problems.empty()) << result.problems.front();
  ASSERT_EQ(result.gpus.size(), 2u);
  for (const GpuInfo& gpu : result.gpus) {
    EXPECT_EQ(gpu.vendor, "amd");
    EXPECT_EQ(gpu.name, "AMD Instinct MI250X/MI250");
    EXPECT_EQ(gpu.arch, "gfx90a");
    EXPECT_EQ(gpu.memory_mib, 65520);  // 68702699520 B
  }
  EXPECT_EQ(result.gpus[0].uuid, "0x8a2f6c1d3e5b7094");
  EXPECT_EQ(result.gpus[1].uuid, "0x3c71e9a0b2d4f568");
}

TEST(GpuQuery, ParsesARadeonAfterAWarningLineWithRocm5KeyNames) {
  GpuQueryResult result = ParseRocmSmi(Recording("rocm-smi-rx6800xt.json"));
  EXPECT_TRUE(result.problems.empty()) << result.problems.front();
  ASSERT_EQ(result.gpus.size(), 1u);
  const GpuInfo& gpu = result.gpus[0];
  EXPECT_EQ(gpu.name, "Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]");
  EXPECT_EQ(gpu.arch, "gfx1030");
  EXPECT_EQ(gpu.memory_mib, 16368);  // 17163091968 B
  EXPECT_EQ(gpu.uuid, "") << "a consumer card reports its unique id as N/A";
}

TEST(GpuQuery, AnOldRocmSmiWithoutGfxVersionLeavesTheArchEmptyAndSaysSo) {
  GpuQueryResult result = ParseRocmSmi(Recording("rocm-smi-rocm52-rx6800xt.json"));
  ASSERT_EQ(result.gpus.size(), 1u);
  EXPECT_EQ(result.gpus[0].arch, "");
  EXPECT_EQ(result.gpus[0].memory_mib, 16368);
  EXPECT_TRUE(Mentions(result.problems, "card0: no GFX Version"));
}

TEST(GpuQuery, TruncatedRocmSmiJsonGivesNoGpuAndSaysWhy) {
  GpuQueryResult result = ParseRocmSmi(Recording("rocm-smi-truncated.json"));
  EXPECT_TRUE(result.gpus.empty());
  EXPECT_TRUE(Mentions(result.problems, "malformed JSON"));
}

TEST(GpuQuery, RocmSmiCardsAreInDeviceOrderPastTen) {
  std::string json = "{";
  for (int i = 0; i < 12; ++i) {
    json += "\"card" + std::to_string(i) + "\": {\"Card Series\": \"gpu" + std::to_string(i) +
            "\", \"VRAM Total Memory (B)\": \"1048576\", \"GFX Version\": \"gfx90a\"},";
  }
  json += "\"system\": {\"Driver version\": \"6.7.0\"}}";
  GpuQueryResult result = ParseRocmSmi(json);
  ASSERT_EQ(result.gpus.size(), 12u);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(result.gpus[static_cast<size_t>(i)].name, "gpu" + std::to_string(i));
}

// The command runner is injected, so detection is tested without either tool installed.
TEST(GpuQuery, QueryGpusAsksBothToolsAndSkipsOneThatIsMissing) {
  std::vector<std::string> asked;
  const std::map<std::string, std::string> installed = {
      {"nvidia-smi", Recording("nvidia-smi-a100x2.csv")},
      {"rocm-smi", Recording("rocm-smi-mi250.json")}};
  for (const std::string& missing : {std::string("none"), std::string("rocm-smi")}) {
    asked.clear();
    GpuQueryResult result =
        QueryGpus([&](const std::vector<std::string>& argv) -> std::optional<std::string> {
          asked.push_back(argv[0]);
          if (argv[0] == missing) return std::nullopt;
          return installed.at(argv[0]);
        });
    EXPECT_EQ(asked, (std::vector<std::string>{"nvidia-smi", "rocm-smi"}));
    const size_t expected = missing == "rocm-smi" ? 2u : 4u;
    ASSERT_EQ(result.gpus.size(), expected) << "missing " << missing;
    EXPECT_EQ(result.gpus[0].vendor, "nvidia");
    EXPECT_EQ(result.gpus[expected - 1].vendor, missing == "rocm-smi" ? "nvidia" : "amd");
  }
}

TEST(GpuQuery, TheSystemRunnerReturnsNothingForAProgramThatIsNotInstalled) {
  CommandRunner run = SystemCommandRunner();
  EXPECT_FALSE(run({"ladder-no-such-program-7f3a"}).has_value());
  std::optional<std::string> echoed = run({"/bin/echo", "H200, $(reboot)"});
  ASSERT_TRUE(echoed.has_value());
  EXPECT_EQ(*echoed, "H200, $(reboot)\n") << "arguments are passed as argv, never to a shell";
  EXPECT_FALSE(run({"/bin/false"}).has_value());
}

// Topology: `nvidia-smi topo -m` and `rocm-smi --showtopo`. The 1 x H200 output is a real
// capture; the others are hand-written in the same format (testdata/README.md).
std::vector<std::string> LinkStrings(const std::vector<GpuLink>& links) {
  std::vector<std::string> out;
  for (const auto& l : links) {
    out.push_back(std::to_string(l.a) + "-" + std::to_string(l.b) + " " + l.kind);
  }
  return out;
}

TEST(GpuTopology, ARealOneGpuCaptureHasNoLinksAndNoProblems) {
  GpuTopologyResult result = ParseNvidiaTopology(Recording("nvidia-smi-topo-h200x1.txt"));
  EXPECT_TRUE(result.problems.empty()) << result.problems.front();
  EXPECT_TRUE(result.links.empty());
}

TEST(GpuTopology, ParsesAnEightGpuNvLinkNodeWithNicColumns) {
  GpuTopologyResult result = ParseNvidiaTopology(Recording("nvidia-smi-topo-h200x8.txt"));
  EXPECT_TRUE(result.problems.empty()) << result.problems.front();
  ASSERT_EQ(result.links.size(), 28u) << "every pair of 8 GPUs once";
  for (const auto& link : result.links) {
    EXPECT_LT(link.a, link.b);
    EXPECT_LT(link.b, 8);
    EXPECT_EQ(link.kind, "NV18") << "NIC columns must not be read as GPUs";
  }
  EXPECT_EQ(LinkStrings(result.links).front(), "0-1 NV18");
  EXPECT_EQ(LinkStrings(result.links).back(), "6-7 NV18");
}

TEST(GpuTopology, ParsesTwoPcieGpusOnAnOlderDriver) {
  GpuTopologyResult result = ParseNvidiaTopology(Recording("nvidia-smi-topo-a100x2-pcie.txt"));
  EXPECT_TRUE(result.problems.empty()) << result.problems.front();
  EXPECT_EQ(LinkStrings(result.links), (std::vector<std::string>{"0-1 SYS"}));
}

TEST(GpuTopology, AMatrixThatDisagreesWithItselfOrIsCutShortIsReported) {
  GpuTopologyResult result = ParseNvidiaTopology(Recording("nvidia-smi-topo-malformed.txt"));
  EXPECT_TRUE(Mentions(result.problems, "GPU0-GPU2 is NV4 but GPU2-GPU0 is NV2"));
  EXPECT_TRUE(Mentions(result.problems, "row GPU3 does not fit"));
  // What could be read is kept: the upper triangle of rows 0..2.
  EXPECT_EQ(LinkStrings(result.links), (std::vector<std::string>{"0-1 NV4", "0-2 NV4", "0-3 SYS",
                                                                 "1-2 NV4", "1-3 SYS", "2-3 SYS"}));
}

TEST(GpuTopology, ParsesRocmSmiLinkTypes) {
  GpuTopologyResult mi250 = ParseRocmTopology(Recording("rocm-smi-topo-mi250.txt"));
  EXPECT_TRUE(mi250.problems.empty()) << mi250.problems.front();
  EXPECT_EQ(LinkStrings(mi250.links), (std::vector<std::string>{"0-1 XGMI"}))
      << "the link type section, not the weights or hops before it";
  GpuTopologyResult radeons = ParseRocmTopology(Recording("rocm-smi-topo-radeon-x2-pcie.txt"));
  EXPECT_TRUE(radeons.problems.empty()) << radeons.problems.front();
  EXPECT_EQ(LinkStrings(radeons.links), (std::vector<std::string>{"0-1 PCIE"}));
}

TEST(GpuTopology, OutputWithoutAMatrixIsAProblemAndNoOutputIsNot) {
  EXPECT_TRUE(ParseNvidiaTopology("").problems.empty());
  EXPECT_TRUE(ParseRocmTopology("").problems.empty());
  EXPECT_TRUE(Mentions(ParseNvidiaTopology("NVIDIA-SMI has failed because it couldn't "
                                           "communicate with the NVIDIA driver.\n")
                           .problems,
                       "no GPU matrix"));
  EXPECT_TRUE(Mentions(ParseRocmTopology(Recording("rocm-smi-mi250.json")).problems,
                       "Link Type between two GPUs"));
}

TEST(GpuTopology, IsAskedOnlyWithTwoGpusOfAVendorAndNumberedInTheInventory) {
  // Two A100s (NVIDIA first in the inventory) and an MI250's two GCDs.
  std::vector<GpuInfo> gpus = ParseNvidiaSmi(Recording("nvidia-smi-a100x2.csv")).gpus;
  for (auto& gpu : ParseRocmSmi(Recording("rocm-smi-mi250.json")).gpus) gpus.push_back(gpu);
  ASSERT_EQ(gpus.size(), 4u);
  std::vector<std::string> asked;
  auto run = [&](const std::vector<std::string>& argv) -> std::optional<std::string> {
    asked.push_back(argv[0] + " " + argv[1]);
    return Recording(argv[0] == "nvidia-smi" ? "nvidia-smi-topo-a100x2-pcie.txt"
                                             : "rocm-smi-topo-mi250.txt");
  };
  GpuTopologyResult result = QueryTopology(run, gpus);
  EXPECT_EQ(asked, (std::vector<std::string>{"nvidia-smi topo", "rocm-smi --showtopo"}));
  EXPECT_EQ(LinkStrings(result.links), (std::vector<std::string>{"0-1 SYS", "2-3 XGMI"}));

  asked.clear();
  result = QueryTopology(run, {gpus[0], gpus[2]});
  EXPECT_TRUE(asked.empty()) << "one GPU of a vendor has no links to ask about";
  EXPECT_TRUE(result.links.empty());

  // The tool reports more GPUs than the inventory has: those links are dropped, said so.
  result = QueryTopology(
      [&](const std::vector<std::string>&) -> std::optional<std::string> {
        return Recording("nvidia-smi-topo-h200x8.txt");
      },
      {gpus[0], gpus[1]});
  EXPECT_EQ(LinkStrings(result.links), (std::vector<std::string>{"0-1 NV18"}));
  EXPECT_TRUE(Mentions(result.problems, "lists 2 GPUs"));
}

}  // namespace
}  // namespace ladder::agent
