// What this host is: identity (hostname, machine-id, boot-id, cloud instance id), CPU, memory,
// GPUs, how they are connected, and software. Detection never fails on what it cannot read (that
// is left empty); it fails only when asked for GPUs the host does not have (`--gpus`).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ladder::agent {

struct GpuInfo {
  std::string vendor;  // "nvidia" | "amd"
  std::string name;
  std::string arch;  // "sm_90", "gfx90a"
  std::string uuid;
  int64_t memory_mib = 0;
  std::string driver;
};

// How two of an inventory's GPUs are connected, as the vendor's tool names it: `nvidia-smi topo
// -m` prints "NV18" (a bonded set of 18 NVLinks), "PIX", "PXB", "PHB", "NODE" or "SYS" (PCIe
// paths, nearest first); `rocm-smi --showtopo` prints "XGMI" or "PCIE".
struct GpuLink {
  int a = 0, b = 0;  // positions in HostInventory::gpus, a < b
  std::string kind;
};

struct HostInventory {
  std::string hostname, machine_id, boot_id, cloud_instance_id, cpu_model;
  int cpu_cores = 0;
  int64_t memory_mib = 0;
  std::vector<GpuInfo> gpus;       // those this agent uses (all, or --gpus), in device order
  std::vector<GpuLink> gpu_links;  // every pair of `gpus` the tools reported a link for
  // Runtimes and engines ("nvidia_driver", ...) and this build of ladder: "ladder" (version),
  // "ladder_commit" (git commit or "unknown"), "ladder_backends" (as `ladder --version`).
  std::map<std::string, std::string> software;
  std::vector<std::string> features;  // runners and backends this agent can run
};

struct InventoryOptions {
  // Host device indices this agent uses (`ladder agent --gpus 0,1`), as nvidia-smi and rocm-smi
  // number them; empty: every GPU of the host.
  std::vector<int> gpus;
  // Tests: these GPUs instead of asking nvidia-smi / rocm-smi (no links then).
  std::optional<std::vector<GpuInfo>> fake_gpus;
};

// Reads /etc/machine-id, /proc/sys/kernel/random/boot_id, /proc/cpuinfo, /proc/meminfo, DMI
// and cloud-init instance data, and asks nvidia-smi / rocm-smi for GPUs and their topology.
//
// Side effect, by design: sets this process's environment variables that every GPU runtime and
// child process reads (runner/environment.h): always NCCL_NVLS_ENABLE=0, and with
// `options.gpus` the variables that pin the process to those devices, before anything here
// initializes a GPU runtime (the backend check below does). Call it before other threads start
// and before this process has touched a GPU; an inventory with `gpus` lists only those devices
// and records them as software["pinned_gpus"] ("0,1").
//
// Errors: InvalidArgument when `options.gpus` names a device the host does not have, or the
// host has GPUs of both vendors (their indices would be ambiguous).
absl::StatusOr<HostInventory> DetectInventory(const InventoryOptions& options = {});

// "0,1" -> {0, 1}. InvalidArgument, naming the flag, for anything but distinct non-negative
// integers separated by commas.
absl::StatusOr<std::vector<int>> ParseGpuList(const std::string& text);

}  // namespace ladder::agent
