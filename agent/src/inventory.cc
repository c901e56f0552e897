#include "ladder/agent/inventory.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gpu_pin.h"
#include "gpu_query.h"
#include "ladder/build_info.h"
#include "ladder/kernels/attention.h"
#include "ladder/status_macros.h"

namespace ladder::agent {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

}  // namespace

absl::StatusOr<HostInventory> DetectInventory(const InventoryOptions& options) {
  // GPUs first, through the vendors' tools (they start no GPU runtime in this process), so the
  // pinning variables are set before the backend check below initializes CUDA or HIP here.
  std::vector<GpuInfo> gpus;
  std::vector<GpuLink> links;
  if (options.fake_gpus) {
    gpus = *options.fake_gpus;
  } else {
    const CommandRunner run = SystemCommandRunner();
    GpuQueryResult queried = QueryGpus(run);
    for (const auto& problem : queried.problems) spdlog::warn("inventory: {}", problem);
    gpus = std::move(queried.gpus);
    GpuTopologyResult topology = QueryTopology(run, gpus);
    for (const auto& problem : topology.problems) spdlog::warn("inventory: {}", problem);
    links = std::move(topology.links);
  }
  Environment environment = BaseEnvironment();
  std::string pinned_gpus;
  if (!options.gpus.empty()) {
    ASSIGN_OR_RETURN(PinnedGpus pinned, PinGpus(gpus, links, options.gpus));
    gpus = std::move(pinned.gpus);
    links = std::move(pinned.links);
    environment.insert(environment.end(), pinned.environment.begin(), pinned.environment.end());
    pinned_gpus = absl::StrJoin(options.gpus, ",");
  } else {
    // nvidia-smi and rocm-smi list every GPU of the host whatever these say, so the inventory
    // would claim devices the runtimes here cannot see.
    for (const char* name :
         {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}) {
      if (const char* value = std::getenv(name); value != nullptr && gpus.size() > 0) {
        spdlog::warn(
            "inventory: {}={} is set but the inventory lists all {} GPUs of the host; pin the "
            "agent with --gpus instead",
            name, value, gpus.size());
      }
    }
  }
  for (const auto& [name, value] : environment) {
    // Only when it changes: `ladder local` creates several agents in one process, and setenv
    // must not race the first agent's threads reading the environment.
    const char* current = std::getenv(name.c_str());
    if (current == nullptr || value != current) setenv(name.c_str(), value.c_str(), 1);
  }

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
  inv.gpus = std::move(gpus);
  inv.gpu_links = std::move(links);
  if (!pinned_gpus.empty()) inv.software["pinned_gpus"] = pinned_gpus;
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
