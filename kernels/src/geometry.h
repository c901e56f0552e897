// Launch geometry shared by the policy (host, no GPU compiler) and the GPU launchers, so the
// work-unit count the policy sees is the grid the kernel gets.
#pragma once

#include <algorithm>

namespace ladder::kernels::internal {

// KV tokens per tile; segments are whole tiles, so 2D and 3D walk identical tiles. (The GPU
// kernels' tiles are per kernel variant: gpu/gpu_backend.cu, Cfg.)
constexpr int kCpuTile = 32;

// Rows of the GPU work item's score tile: (query rows x q heads of one KV head), 16 or 32.
constexpr int GpuBlockM(int group, int max_query_len) {
  return group * max_query_len <= 16 ? 16 : 32;
}
constexpr int GpuRowsPerQBlock(int group, int max_query_len) {
  return std::max(1, GpuBlockM(group, max_query_len) / group);
}
constexpr int GpuQBlocks(int group, int max_query_len) {
  const int r = GpuRowsPerQBlock(group, max_query_len);
  return (max_query_len + r - 1) / r;
}

}  // namespace ladder::kernels::internal
