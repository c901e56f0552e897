// `ladder agent --gpus`: which devices an agent keeps, how their links renumber, and the
// environment that pins it and its children, for NVIDIA and AMD hosts; and the refusals.
#include "gpu_pin.h"

#include <cstdlib>
#include <map>

#include <gtest/gtest.h>

#include "ladder/runner/environment.h"

namespace ladder::agent {
namespace {

std::vector<GpuInfo> Gpus(const std::string& vendor, int n) {
  std::vector<GpuInfo> gpus;
  for (int i = 0; i < n; ++i) {
    gpus.push_back(GpuInfo{vendor, vendor == "nvidia" ? "NVIDIA H200" : "AMD Instinct MI250",
                           vendor == "nvidia" ? "sm_90" : "gfx90a", "uuid-" + std::to_string(i),
                           65536, "1.0"});
  }
  return gpus;
}

std::map<std::string, std::string> AsMap(const Environment& env) {
  return std::map<std::string, std::string>(env.begin(), env.end());
}

TEST(GpuPin, ParsesDistinctIndicesAndRefusesTheRest) {
  EXPECT_EQ(*ParseGpuList("0"), (std::vector<int>{0}));
  EXPECT_EQ(*ParseGpuList("3,1"), (std::vector<int>{3, 1}));
  for (const char* bad : {"", "a", "-1", "0,", ",0", "0;1", "1.5", "0, 1x", "99999"}) {
    auto parsed = ParseGpuList(bad);
    ASSERT_FALSE(parsed.ok()) << "'" << bad << "'";
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("--gpus"), std::string::npos) << parsed.status();
  }
  auto twice = ParseGpuList("1,1");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("device 1 is named twice"), std::string::npos);
}

TEST(GpuPin, OneNvidiaGpuOfEight) {
  const std::vector<GpuLink> links = {{0, 1, "NV18"}, {1, 5, "NV18"}, {4, 5, "NV18"}};
  auto pinned = PinGpus(Gpus("nvidia", 8), links, {5});
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  ASSERT_EQ(pinned->gpus.size(), 1u);
  EXPECT_EQ(pinned->gpus[0].uuid, "uuid-5");
  EXPECT_TRUE(pinned->links.empty()) << "a single GPU has no links of its own";
  EXPECT_EQ(AsMap(pinned->environment),
            (std::map<std::string, std::string>{{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
                                                {"CUDA_VISIBLE_DEVICES", "5"}}));
}

TEST(GpuPin, TwoGpusKeepTheOrderGivenAndTheirLinkRenumbered) {
  const std::vector<GpuLink> links = {{0, 1, "NV4"}, {1, 3, "SYS"}, {0, 3, "PIX"}};
  auto pinned = PinGpus(Gpus("nvidia", 4), links, {3, 1});
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  ASSERT_EQ(pinned->gpus.size(), 2u);
  // CUDA_VISIBLE_DEVICES=3,1 makes device 0 the host's 3: the inventory lists them so.
  EXPECT_EQ(pinned->gpus[0].uuid, "uuid-3");
  EXPECT_EQ(pinned->gpus[1].uuid, "uuid-1");
  ASSERT_EQ(pinned->links.size(), 1u);
  EXPECT_EQ(pinned->links[0].a, 0);
  EXPECT_EQ(pinned->links[0].b, 1);
  EXPECT_EQ(pinned->links[0].kind, "SYS");
  EXPECT_EQ(AsMap(pinned->environment).at("CUDA_VISIBLE_DEVICES"), "3,1");
}

TEST(GpuPin, AmdSelectsAtRocrAndRenumbersHip) {
  auto pinned = PinGpus(Gpus("amd", 4), {{2, 3, "XGMI"}}, {2, 3});
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(AsMap(pinned->environment),
            (std::map<std::string, std::string>{{"ROCR_VISIBLE_DEVICES", "2,3"},
                                                {"HIP_VISIBLE_DEVICES", "0,1"},
                                                {"CUDA_VISIBLE_DEVICES", "0,1"}}))
      << "HIP applies its variables to what ROCr leaves: 2,3 again would select nothing";
  ASSERT_EQ(pinned->links.size(), 1u);
  EXPECT_EQ(pinned->links[0].kind, "XGMI");
}

TEST(GpuPin, EveryVariableSetIsOneTheAgentOwns) {
  Environment all = BaseEnvironment();
  for (const char* vendor : {"nvidia", "amd"}) {
    auto pinned = PinGpus(Gpus(vendor, 2), {}, {1});
    ASSERT_TRUE(pinned.ok());
    all.insert(all.end(), pinned->environment.begin(), pinned->environment.end());
  }
  for (const auto& [name, value] : all) {
    EXPECT_TRUE(runner::IsAgentOwnedEnvironment(name))
        << name << " must be listed in runner/environment.h so that a cell cannot override it";
  }
  EXPECT_EQ(AsMap(BaseEnvironment()).at("NCCL_NVLS_ENABLE"), "0");
}

TEST(GpuPin, RefusesDevicesTheHostDoesNotHave) {
  auto beyond = PinGpus(Gpus("nvidia", 2), {}, {0, 2});
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(beyond.status().message(), "--gpus 0,2: this host has 2 GPUs (devices 0-1)");

  auto one = PinGpus(Gpus("nvidia", 1), {}, {1});
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().message(), "--gpus 1: this host has 1 GPU (device 0)");

  auto none = PinGpus({}, {}, {0});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no GPU"), std::string::npos) << none.status();

  std::vector<GpuInfo> mixed = Gpus("nvidia", 1);
  mixed.push_back(Gpus("amd", 1)[0]);
  auto both = PinGpus(mixed, {}, {0});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("several vendors"), std::string::npos) << both.status();
}

// The public entry point with fake GPUs: the inventory lists the pinned device only and says
// which it is, and this process's environment pins it (what the engines it starts inherit).
TEST(GpuPin, DetectInventoryPinsThisProcess) {
  InventoryOptions options;
  options.fake_gpus = Gpus("nvidia", 2);
  options.gpus = {1};
  auto inventory = DetectInventory(options);
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  ASSERT_EQ(inventory->gpus.size(), 1u);
  EXPECT_EQ(inventory->gpus[0].uuid, "uuid-1");
  EXPECT_EQ(inventory->software.at("pinned_gpus"), "1");
  ASSERT_NE(std::getenv("CUDA_VISIBLE_DEVICES"), nullptr);
  EXPECT_STREQ(std::getenv("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_STREQ(std::getenv("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");

  options.gpus = {2};
  auto refused = DetectInventory(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ladder::agent
