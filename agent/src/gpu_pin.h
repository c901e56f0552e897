// Pinning an agent to some of its host's GPUs (`ladder agent --gpus 0,1`): which devices it
// keeps, how their links renumber, and the environment that makes every GPU runtime in the agent
// and in the processes it starts see only those devices. Kept apart from setting the environment
// so that it is tested without changing the test's own. Private to agent/.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/agent/inventory.h"

namespace ladder::agent {

using Environment = std::vector<std::pair<std::string, std::string>>;

struct PinnedGpus {
  std::vector<GpuInfo> gpus;   // the selected devices, in the order --gpus names them
  std::vector<GpuLink> links;  // links among them, renumbered to positions in `gpus`
  Environment environment;     // variables to set (runner/environment.h names them all)
};

// `host_gpus` in device order (as QueryGpus returns them: a device's index is its position among
// its vendor's GPUs), `devices` from ParseGpuList.
//
// NVIDIA: CUDA_DEVICE_ORDER=PCI_BUS_ID, so that CUDA numbers devices as nvidia-smi does (its
// default puts the fastest first), and CUDA_VISIBLE_DEVICES=devices.
// AMD: ROCR_VISIBLE_DEVICES=devices selects them at the ROCm runtime; HIP numbers what ROCr
// leaves from 0 and applies HIP_VISIBLE_DEVICES (and CUDA_VISIBLE_DEVICES, its alias) on top,
// so those two are set to 0..n-1: the same indices again would select a second time (`--gpus 1`
// would leave no device), and a value inherited from the shell would select another device.
//
// InvalidArgument: no GPU at all, an index the host does not have, GPUs of both vendors (their
// indices overlap), or a GPU of neither vendor.
absl::StatusOr<PinnedGpus> PinGpus(const std::vector<GpuInfo>& host_gpus,
                                   const std::vector<GpuLink>& host_links,
                                   const std::vector<int>& devices);

// What every agent process sets, pinned or not: NCCL_NVLS_ENABLE=0.
Environment BaseEnvironment();

}  // namespace ladder::agent
