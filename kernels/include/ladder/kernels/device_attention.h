// Device-resident unified attention: the same operation, policy and path report as
// RunAttention (attention.h), for callers whose tensors already live on the GPU (an engine's
// KV cache, its projections' outputs). Nothing is copied between host and device, nothing is
// allocated, and nothing waits for the device: a call only enqueues kernels on the caller's
// stream.
//
// Two steps, so that the caller can size and own the workspace:
//   1. PlanDeviceAttention: the path policy (host only: it reads no device memory, so the
//      host-side facts it needs -- rows and KV length -- are passed as values).
//   2. LaunchDeviceAttention: enqueues the plan on `stream` with a caller-owned workspace of at
//      least plan.workspace_bytes (MaxDeviceWorkspaceBytes bounds it for allocation up front).
//
// Thread safety: both may be called concurrently (the device facts are cached once, under a
// lock); calls on one stream run in the order they were enqueued.
#pragma once

#include <cstddef>

#include "ladder/kernels/attention.h"
#include "ladder/kernels/result.h"

namespace ladder::kernels {

// Borrowed device pointers of one call; layouts as at the top of attention.h.
struct DeviceAttentionArgs {
  AttentionShape shape;  // bf16 or f16 (f32 is CPU-only)
  int num_seqs = 0;
  int num_tokens = 0;                // query rows of all sequences (= query_start[num_seqs])
  int max_query_len = 0;             // largest query_start[s+1] - query_start[s]
  int max_kv_len = 0;                // largest seq_lens[s]
  int max_blocks_per_seq = 0;        // row pitch of block_table
  const int* query_start = nullptr;  // device, [num_seqs + 1]
  const int* seq_lens = nullptr;     // device, [num_seqs]
  const int* block_table = nullptr;  // device, [num_seqs, max_blocks_per_seq]
  const void* q = nullptr;           // device, [num_tokens, q_heads, head_dim]
  const void* k_cache = nullptr;     // device, [num_blocks, block_size, kv_heads, head_dim]
  const void* v_cache = nullptr;     // device, same layout as k_cache
  void* out = nullptr;               // device, [num_tokens, q_heads, head_dim]
};

struct DeviceAttentionPlan {
  RunInfo info;                // path, segments, grid and the policy's reason (as RunAttention)
  size_t workspace_bytes = 0;  // the 3D segment buffer; 0 for 2D
  TuningConfig tuning;         // RunOptions::tuning of the plan: the launch runs the same kernel
};

// InvalidArgument for inconsistent arguments or tuning, Unavailable when `backend` is the CPU,
// not compiled in, or has no device; Unsupported when the dispatch table has no kernel for the
// shape under options.tuning (tuning.h).
Result<DeviceAttentionPlan> PlanDeviceAttention(Backend backend, const DeviceAttentionArgs& args,
                                                const RunOptions& options);

// Enqueues `plan` on `stream` (a cudaStream_t or hipStream_t; nullptr: the default stream).
// `workspace` is device memory of at least plan.workspace_bytes, 128-byte aligned (as every
// cudaMalloc / hipMalloc allocation is), owned by the caller and not used by anything else
// until the enqueued kernels have run; its contents afterwards are undefined. Errors from
// enqueueing are returned here; errors of the kernels themselves surface at the caller's next
// synchronization.
Status LaunchDeviceAttention(Backend backend, const DeviceAttentionArgs& args,
                             const DeviceAttentionPlan& plan, void* stream, void* workspace,
                             size_t workspace_bytes);

// An upper bound of plan.workspace_bytes over all calls with at most `max_tokens` query rows
// of this shape under `config` (segments are capped by config.max_segments or
// config.force_segments).
size_t MaxDeviceWorkspaceBytes(const AttentionShape& shape, int max_tokens,
                               const PolicyConfig& config);

}  // namespace ladder::kernels
