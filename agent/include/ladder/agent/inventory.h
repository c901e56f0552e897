// What this host is: identity (hostname, machine-id, boot-id, cloud instance id), CPU, memory,
// GPUs and software. Detection never fails: what cannot be read is left empty.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ladder::agent {

struct GpuInfo {
  std::string vendor;  // "nvidia" | "amd"
  std::string name;
  std::string arch;  // "sm_90", "gfx90a"
  std::string uuid;
  int64_t memory_mib = 0;
  std::string driver;
};

struct HostInventory {
  std::string hostname, machine_id, boot_id, cloud_instance_id, cpu_model;
  int cpu_cores = 0;
  int64_t memory_mib = 0;
  std::vector<GpuInfo> gpus;
  // Runtimes and engines ("nvidia_driver", ...) and this build of ladder: "ladder" (version),
  // "ladder_commit" (git commit or "unknown"), "ladder_backends" (as `ladder --version`).
  std::map<std::string, std::string> software;
  std::vector<std::string> features;  // runners and backends this agent can run
};

// Reads /etc/machine-id, /proc/sys/kernel/random/boot_id, /proc/cpuinfo, /proc/meminfo, DMI
// and cloud-init instance data, and asks nvidia-smi / rocm-smi for GPUs when they exist.
HostInventory DetectInventory();

}  // namespace ladder::agent
