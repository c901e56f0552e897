// The environment variables the agent owns: it sets them in its own process, so that the kernels
// it runs and every process it starts (engines, their workers, the GPU tools) inherit them. They
// pin processes to the agent's GPUs (`ladder agent --gpus`) and keep NCCL's NVLink multicast off.
// A cell cannot set them (the engine recipes refuse them in `extra_env`): a matrix must not be
// able to move an engine onto another agent's GPU.
#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace ladder::runner {

inline constexpr std::array<std::string_view, 5> kAgentOwnedEnvironment = {
    "CUDA_VISIBLE_DEVICES",  // NVIDIA's devices; HIP reads it too, as HIP_VISIBLE_DEVICES
    "CUDA_DEVICE_ORDER",     // PCI_BUS_ID: CUDA numbers devices as nvidia-smi does
    "HIP_VISIBLE_DEVICES",   // HIP's devices, among those ROCR_VISIBLE_DEVICES leaves
    "ROCR_VISIBLE_DEVICES",  // AMD's devices at the ROCm runtime, below HIP
    "NCCL_NVLS_ENABLE",      // 0: NVLink SHARP multicast off (see docs/deploy.md)
};

inline bool IsAgentOwnedEnvironment(std::string_view name) {
  return std::find(kAgentOwnedEnvironment.begin(), kAgentOwnedEnvironment.end(), name) !=
         kAgentOwnedEnvironment.end();
}

}  // namespace ladder::runner
