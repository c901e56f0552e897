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

// Whether a call has the work for the column-teams kernel (head 512, 33-40 score columns: five
// rows of GQA 8), which takes all the columns in one query block where two 32-column blocks each
// read all of K and V: it reads half the bytes on half the work groups. With fewer than four
// (sequence, KV head) pairs and fewer than 4K keys that grid is too small for it to pay. H200,
// five rows, graph replays, column teams over two blocks through ladder: TP=2's two KV heads
// 1.049 / 1.065 at 1K / 1.5K, 0.998 at 4K, 0.966 at 6K; four pairs (the global preset, or two
// sequences at TP=2) 0.93-0.94 at 1K and 2K (kernels-ab-column-teams-work,
// docs/kernel-experiments.md).
constexpr bool ColumnTeamsHaveWork(int num_seqs, int kv_heads, int keys_seen) {
  return static_cast<long long>(num_seqs) * kv_heads >= 4 || keys_seen >= 4096;
}

}  // namespace ladder::kernels::internal
