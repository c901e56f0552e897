#include "ladder/agent/inventory.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "gpu_query.h"
#include "ladder/build_info.h"
#include "ladder/kernels/attention.h"

namespace ladder::agent {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

}  // namespace

HostInventory DetectInventory() {
  HostInventory inv;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  inv.hostname = host;
  inv.machine_id = ReadFirstLine("/etc/machine-id");
  inv.boot_id = ReadFirstLine("/proc/sys/kernel/random/boot_id");
  // Cloud instance id: cloud-init's record when present, else the DMI product UUID.
  inv.cloud_instance_id = ReadFirstLine("/var/lib/cloud/data/instance-id");
  if (inv.cloud_instance_id.empty()) {
    inv.cloud_instance_id = ReadFirstLine("/sys/class/dmi/id/product_uuid");
  }
  {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
      if (absl::StartsWith(line, "model name")) {
        inv.cpu_model = std::string(absl::StripAsciiWhitespace(line.substr(line.find(':') + 1)));
        break;
      }
    }
  }
  inv.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
  {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    int64_t kib = 0;
    if (meminfo >> key >> kib) inv.memory_mib = kib / 1024;
  }
  GpuQueryResult gpus = QueryGpus(SystemCommandRunner());
  for (const auto& problem : gpus.problems) spdlog::warn("inventory: {}", problem);
  inv.gpus = std::move(gpus.gpus);
  for (const auto& gpu : inv.gpus) {
    if (gpu.vendor == "nvidia" && !gpu.driver.empty()) {
      inv.software["nvidia_driver"] = gpu.driver;
      break;
    }
  }
  // The build that measures (what `ladder --version` prints), so a report can tell builds
  // apart: well within the coordinator's limits (keys <= 64, values <= 256 bytes).
  inv.software["ladder"] = build::kVersion;
  inv.software["ladder_commit"] = build::kCommit;
  inv.software["ladder_backends"] = build::kBackends;
  inv.features = {"kernel", "cpu"};
  if (kernels::BackendAvailable(kernels::Backend::kCuda)) inv.features.push_back("cuda");
  if (kernels::BackendAvailable(kernels::Backend::kHip)) inv.features.push_back("hip");
  return inv;
}

}  // namespace ladder::agent
