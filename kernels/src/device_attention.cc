// Device-resident attention: the policy on host-side facts, then the GPU backend's launcher on
// the caller's stream and workspace. RunAttention's GPU branch goes through here too, so the
// case table tests this path on every GPU run.
#include "ladder/kernels/device_attention.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "device_policy.h"
#include "geometry.h"
#include "gpu_api.h"

namespace ladder::kernels {
namespace {

// cudaGetDeviceProperties and the occupancy calculator cost microseconds to milliseconds; an
// engine plans hundreds of calls per decode step, so both are asked once per process.
class DeviceFacts {
 public:
  static DeviceFacts& Get() {
    static DeviceFacts facts;
    return facts;
  }

  Result<DeviceInfo> Device() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!device_) {
      Result<DeviceInfo> info = gpu::QueryDevice();
      if (!info.ok()) return info.error();  // not cached: a later call may find the device
      device_ = *info;
    }
    return *device_;
  }

  // Occupancy and tile of the kernel that (shape, rows, the call's work) selects; nullopt when
  // they cannot be asked.
  std::optional<gpu::KernelFacts> KernelFacts(const AttentionShape& shape, int max_query_len,
                                              const TuningConfig& tuning, bool column_work) {
    // The kernel and its query rows per block follow from (head dim, GQA group, longest query),
    // the tuning's kernel choices (head512, wide_work_groups, split_keys) and, for
    // five rows of head 512, whether the call has the work for column teams. Past 40 rows the
    // longest query changes none of them (blocks of 32 score rows), so the cache stays bounded
    // however many prefill lengths an engine sends.
    const auto key = std::make_tuple(
        static_cast<int>(shape.dtype), shape.head_dim,
        (shape.q_heads / shape.kv_heads) * 100 + std::min(max_query_len, 41),
        static_cast<int>(tuning.split_keys) * 1000 + static_cast<int>(tuning.head512) * 100 +
            static_cast<int>(tuning.wide_work_groups),
        column_work);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kernels_.find(key);
    if (it == kernels_.end()) {
      const Result<gpu::KernelFacts> kf =
          gpu::FactsOfKernel(shape, max_query_len, tuning, column_work);
      it = kernels_.emplace(key, kf.ok() ? std::optional<gpu::KernelFacts>(*kf) : std::nullopt)
               .first;
    }
    return it->second;
  }

 private:
  std::mutex mu_;
  std::optional<DeviceInfo> device_;  // guarded by mu_
  std::map<std::tuple<int, int, int, int, bool>, std::optional<gpu::KernelFacts>>
      kernels_;  // guarded by mu_
};

Status ValidateArgs(const DeviceAttentionArgs& a) {
  LADDER_K_TRY(a.shape.Validate());
  auto bad = [](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument, "device attention: " + why);
  };
  if (a.num_seqs < 1) return bad("num_seqs must be >= 1");
  if (a.num_tokens < a.num_seqs)
    return bad("num_tokens must be >= num_seqs (every sequence has a query row)");
  if (a.max_query_len < 1 || a.max_query_len > a.num_tokens)
    return bad("max_query_len must be in 1..num_tokens");
  if (a.max_kv_len < a.max_query_len) return bad("max_kv_len must be >= max_query_len");
  if (static_cast<long long>(a.max_blocks_per_seq) * a.shape.block_size < a.max_kv_len)
    return bad("max_blocks_per_seq * block_size is below max_kv_len");
  if (!a.query_start || !a.seq_lens || !a.block_table || !a.q || !a.k_cache || !a.v_cache || !a.out)
    return bad("a device pointer is null");
  return OkStatus();
}

gpu::DeviceProblem ToDeviceProblem(const DeviceAttentionArgs& a) {
  gpu::DeviceProblem dp;
  dp.shape = a.shape;
  dp.num_seqs = a.num_seqs;
  dp.num_tokens = a.num_tokens;
  dp.max_query_len = a.max_query_len;
  dp.max_kv_len = a.max_kv_len;
  dp.max_blocks_per_seq = a.max_blocks_per_seq;
  dp.query_start = a.query_start;
  dp.seq_lens = a.seq_lens;
  dp.block_table = a.block_table;
  dp.q = a.q;
  dp.k = a.k_cache;
  dp.v = a.v_cache;
  dp.out = a.out;
  return dp;
}

Status CheckBackend(Backend backend) {
  if (backend == Backend::kCpu)
    return Error(ErrorCode::kUnavailable,
                 "device attention needs a GPU backend (use RunAttention on the CPU)");
  if (gpu::CompiledBackend() != backend)
    return Error(ErrorCode::kUnavailable,
                 "backend " + std::string(ToString(backend)) + " is not compiled into this binary");
  return OkStatus();
}

}  // namespace

namespace internal {
PathDecision ChooseDevicePath(const AttentionShape& shape, int num_seqs, int max_query_len,
                              int max_kv_len, const RunOptions& options, int sm_count) {
  const int group = shape.q_heads / shape.kv_heads;
  int rows_per_qblock = GpuRowsPerQBlock(group, max_query_len);
  PolicyConfig config = options.config;
  const int keys_seen = KeysSeen(shape, max_kv_len, max_query_len);
  if (const std::optional<gpu::KernelFacts> kf = DeviceFacts::Get().KernelFacts(
          shape, max_query_len, options.tuning,
          ColumnTeamsHaveWork(num_seqs, shape.kv_heads, keys_seen))) {
    if (config.ctas_from_occupancy) config.ctas_per_sm = kf->ctas_per_sm;
    config.tile_keys = kf->tile_keys;
    rows_per_qblock = kf->rows_per_qblock;  // (the kernel's: five rows of head 512 are one)
  }
  const int units =
      num_seqs * shape.kv_heads * ((max_query_len + rows_per_qblock - 1) / rows_per_qblock);
  return ChoosePath(options.policy, config, num_seqs, max_query_len, keys_seen, shape.kv_heads,
                    units, sm_count);
}
}  // namespace internal

Result<DeviceAttentionPlan> PlanDeviceAttention(Backend backend, const DeviceAttentionArgs& args,
                                                const RunOptions& options) {
  LADDER_K_TRY(CheckBackend(backend));
  LADDER_K_TRY(ValidateArgs(args));
  LADDER_K_ASSIGN_OR_RETURN(DeviceInfo device, DeviceFacts::Get().Device());
  const PathDecision dec = internal::ChooseDevicePath(args.shape, args.num_seqs, args.max_query_len,
                                                      args.max_kv_len, options, device.sm_count);
  const gpu::DeviceProblem dp = ToDeviceProblem(args);
  LADDER_K_ASSIGN_OR_RETURN(gpu::LaunchPlan launch,
                            gpu::MakePlan(dp, dec.path, dec.segments, options.tuning));
  DeviceAttentionPlan plan;
  plan.info = RunInfo{launch.path, launch.segments, launch.grid, dec.reason};
  plan.workspace_bytes = gpu::WorkspaceBytes(dp, launch);
  plan.tuning = options.tuning;
  return plan;
}

Status LaunchDeviceAttention(Backend backend, const DeviceAttentionArgs& args,
                             const DeviceAttentionPlan& plan, void* stream, void* workspace,
                             size_t workspace_bytes) {
  LADDER_K_TRY(CheckBackend(backend));
  LADDER_K_TRY(ValidateArgs(args));
  if (workspace_bytes < plan.workspace_bytes || (plan.workspace_bytes > 0 && workspace == nullptr))
    return Error(ErrorCode::kInvalidArgument,
                 "device attention: workspace of " + std::to_string(workspace_bytes) +
                     " bytes, plan needs " + std::to_string(plan.workspace_bytes));
  // The same launch as planned (merge inside the kernel included), rebuilt from the plan's path
  // and segments: host-only work.
  const gpu::DeviceProblem dp = ToDeviceProblem(args);
  LADDER_K_ASSIGN_OR_RETURN(const gpu::LaunchPlan launch,
                            gpu::MakePlan(dp, plan.info.path, plan.info.segments, plan.tuning));
  return gpu::Launch(dp, launch, workspace, workspace_bytes, stream);
}

size_t MaxDeviceWorkspaceBytes(const AttentionShape& shape, int max_tokens,
                               const PolicyConfig& config) {
  const size_t segments =
      config.force_segments > 0 ? config.force_segments : std::max(1, config.max_segments);
  const size_t tokens = std::max(0, max_tokens);
  // Bounds gpu::WorkspaceBytes: a head_dim fp32 accumulator plus max and sum per slot, then the
  // merge flags of the merge inside the kernel, 8 bytes per work group (at most one
  // (sequence, query block) per query row).
  const size_t slots = tokens * std::max(0, shape.q_heads) * segments;
  const size_t work_groups = tokens * std::max(0, shape.kv_heads) * segments;
  return slots * static_cast<size_t>(std::max(0, shape.head_dim)) * 4 + 2 * slots * 4 +
         8 * work_groups;
}

}  // namespace ladder::kernels
