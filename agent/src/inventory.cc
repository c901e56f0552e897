#include "ladder/agent/inventory.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
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

// Runs a fixed command (no shell interpolation of untrusted input) and returns its stdout.
std::string RunCommand(const char* command) {
  std::string out;
  FILE* pipe = popen(command, "r");
  if (!pipe) return out;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), n);
  pclose(pipe);
  return out;
}

void DetectNvidia(HostInventory& inv) {
  if (access("/usr/bin/nvidia-smi", X_OK) != 0 && access("/usr/local/bin/nvidia-smi", X_OK) != 0) {
    return;
  }
  std::string out = RunCommand(
      "nvidia-smi --query-gpu=name,uuid,memory.total,driver_version,compute_cap "
      "--format=csv,noheader,nounits 2>/dev/null");
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ',');
    if (f.size() < 5) continue;
    for (auto& s : f) s = std::string(absl::StripAsciiWhitespace(s));
    GpuInfo gpu;
    gpu.vendor = "nvidia";
    gpu.name = f[0];
    gpu.uuid = f[1];
    (void)absl::SimpleAtoi(f[2], &gpu.memory_mib);
    gpu.driver = f[3];
    std::string cap = f[4];
    cap.erase(std::remove(cap.begin(), cap.end(), '.'), cap.end());
    gpu.arch = "sm_" + cap;
    inv.gpus.push_back(gpu);
  }
  if (!inv.gpus.empty()) inv.software["nvidia_driver"] = inv.gpus.front().driver;
}

void DetectAmd(HostInventory& inv) {
  if (access("/usr/bin/rocm-smi", X_OK) != 0 && access("/opt/rocm/bin/rocm-smi", X_OK) != 0) {
    return;
  }
  std::string out = RunCommand("rocm-smi --showproductname --showuniqueid --showmeminfo vram "
                               "--csv 2>/dev/null");
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  if (lines.size() < 2) return;
  std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> f = absl::StrSplit(lines[i], ',');
    if (f.size() != header.size()) continue;
    GpuInfo gpu;
    gpu.vendor = "amd";
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string h = absl::AsciiStrToLower(header[c]);
      if (h.find("card series") != std::string::npos || h.find("card model") != std::string::npos) {
        if (gpu.name.empty()) gpu.name = f[c];
      } else if (h.find("unique id") != std::string::npos) {
        gpu.uuid = f[c];
      } else if (h.find("gfx version") != std::string::npos) {
        gpu.arch = f[c];
      } else if (h.find("vram total memory") != std::string::npos) {
        int64_t bytes = 0;
        if (absl::SimpleAtoi(f[c], &bytes)) gpu.memory_mib = bytes >> 20;
      }
    }
    inv.gpus.push_back(gpu);
  }
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
  DetectNvidia(inv);
  DetectAmd(inv);
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
