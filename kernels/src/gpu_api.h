// Internal interface between the host code (.cc, any C++ compiler) and the GPU backend
// (gpu/gpu_backend.cu, compiled by nvcc or hipcc; gpu_stub.cc when neither is enabled).
// No GPU runtime type appears here. Device errors become KernelErrors inside the backend,
// once, naming the failing call and file:line.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "ladder/kernels/attention.h"
#include "ladder/kernels/result.h"
#include "ladder/kernels/tuning.h"

namespace ladder::kernels::gpu {

// Which GPU backend this binary was built with (kCpu when none).
Backend CompiledBackend();
// Device 0 of the compiled backend; kUnavailable when none is present.
Result<DeviceInfo> QueryDevice();
// What the policy needs to know of the attention kernel that `shape`, `max_query_len` and
// `tuning` select: its work groups that fit on one multiprocessor at once (the runtime's
// occupancy calculator: PolicyConfig::ctas_per_sm) and the keys of its K/V tile
// (PolicyConfig::tile_keys).
struct KernelFacts {
  int ctas_per_sm = 1;
  int tile_keys = 16;
  int rows_per_qblock = 1;  // query rows per work item (the policy counts its work items by it)
};
// `column_work`: internal::ColumnTeamsHaveWork of the call (its sequences and keys).
Result<KernelFacts> FactsOfKernel(const AttentionShape& shape, int max_query_len,
                                  const TuningConfig& tuning, bool column_work);

// Move-only owner of one device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> Alloc(size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

Status CopyToDevice(void* dst, const void* src, size_t bytes);
Status CopyToHost(void* dst, const void* src, size_t bytes);
// Fills `numel` elements of `dtype` with internal::HashToValue(seed, i) * scale.
Status FillRandom(void* dst, size_t numel, DType dtype, uint64_t seed, float scale);

// A problem whose arrays live on the device (borrowed pointers).
struct DeviceProblem {
  AttentionShape shape;
  int num_seqs = 0;
  int num_tokens = 0;
  int max_query_len = 0;
  int max_kv_len = 0;  // largest seq_lens[s], a host value (0: unknown; only the plan reads it)
  int max_blocks_per_seq = 0;
  const int* query_start = nullptr;
  const int* seq_lens = nullptr;
  const int* block_table = nullptr;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
};

// Every decision of a launch, made once by MakePlan: Launch only executes it.
struct LaunchPlan {
  Path path = Path::k2D;
  int segments = 1;
  std::string grid;
  // The row of the dispatch table that runs (an entry owned by the backend, valid for the
  // process); nullptr: not made by MakePlan.
  const void* kernel = nullptr;
  int rows_per_qblock = 1, qblocks = 1;  // query rows per block, blocks per sequence
  // 3D with the head-512 team kernel where all its work groups fit on the device at once: the
  // work groups merge the partials themselves (a cooperative launch), no merge kernel.
  bool merge_in_kernel = false;
  bool merge_overlap = false;  // 3D: the merge kernel by programmatic dependent launch
  // 3D with the generic kernel: each (query block, KV head)'s segments run as one cluster and
  // merge in it (TuningConfig::merge_in_cluster), no merge kernel.
  bool merge_in_cluster = false;
  // The attention kernel by programmatic dependent launch (not the cooperative one).
  bool attention_overlap = false;
  // 3D: where the merge kernel lets the next kernel launch (TuningConfig::release_next): not
  // before its end, after its wait for the attention grid, or as it starts. The values are the
  // merge kernel's codes (MergeSegmentsGroupedKernel's release_next).
  enum class Release { kAtEnd = 0, kAfterWait = 1, kAtStart = 2 } release_next = Release::kAtEnd;
  bool evict_first = false;  // K/V copies under an L2 evict-first policy
};

// Finds the kernel in the dispatch table (kUnsupported naming the combination when the table
// has none: see TuningConfig) and decides everything else the launch needs.
Result<LaunchPlan> MakePlan(const DeviceProblem& p, Path path, int segments,
                            const TuningConfig& tuning);
// Bytes of caller-owned workspace the 3D path needs (0 for 2D): per query token x q head x
// segment, a head_dim fp32 accumulator plus max and sum.
size_t WorkspaceBytes(const DeviceProblem& p, const LaunchPlan& plan);
// Enqueues the kernels on `stream` (a cudaStream_t / hipStream_t; nullptr: the default
// stream); never allocates, copies or synchronizes. `timeline` (RecordTimeline's buffer, else
// nullptr): the kernels stamp their work groups' records there.
Status Launch(const DeviceProblem& p, const LaunchPlan& plan, void* workspace,
              size_t workspace_bytes, void* stream = nullptr,
              unsigned long long* timeline = nullptr);
Status Synchronize();

// Times `repeats` launches with device events after `warmup` untimed ones; when flush is
// non-null, writes `flush_bytes` there before every call (outside the timed region). Each timed
// call is queued behind a kernel that spins on the device for HoldNs() (see there). Returns
// one time per call, in µs.
Result<std::vector<double>> TimeLaunches(const DeviceProblem& p, const LaunchPlan& plan,
                                         void* workspace, size_t workspace_bytes, int warmup,
                                         int repeats, void* flush, size_t flush_bytes);
// Times calls the way engines run them: `warmup` plain launches on a stream of its own, then
// `graph_calls` launches captured into one graph (CUDA / HIP graph), one untimed replay, then
// `repeats` replays, each behind the same device spin as TimeLaunches and between two events.
// Returns, per replay, its time divided by graph_calls: µs per call. In a graph, a plan that
// merges inside the kernel (LaunchPlan::merge_in_kernel) runs the merge kernel instead (see
// Launch).
Result<std::vector<double>> TimeGraphReplays(const DeviceProblem& p, const LaunchPlan& plan,
                                             void* workspace, size_t workspace_bytes, int warmup,
                                             int repeats, int graph_calls);
// The device spin ahead of each timed call or replay, in ns: it holds the stream so that the
// host has queued the start event, the call and the end event before the GPU reaches them, and
// the events time the GPU's work rather than the host's launch calls. 0 where there is none
// (HIP).
unsigned long long HoldNs();
// One work group of one call, as its kernel stamped it (attention_kernel.h, TimelineMark): per
// mark the global timer in ns and the multiprocessor's cycle counter, both 0 where the work
// group did not pass the mark.
constexpr int kTimelineMarkCount = 5;  // entry, ready, first tile, loop end, exit
struct TimelineStamp {
  int call = 0;
  int kernel = 0;      // 0: attention, 1: merge
  int work_group = 0;  // in grid order, x fastest
  int sm = 0;
  unsigned long long ns[kTimelineMarkCount] = {};
  unsigned long long cycles[kTimelineMarkCount] = {};
};
// `warmup` plain launches, then `calls` calls whose work groups stamp their records: captured
// into one graph and replayed (after one unrecorded replay), or launched back to back on the
// stream (graph false), in both cases behind the device spin of the timed methods. Work groups
// that stamped nothing (an empty query block; a merge kernel that did not run) are left out.
Result<std::vector<TimelineStamp>> RecordTimeline(const DeviceProblem& p, const LaunchPlan& plan,
                                                  void* workspace, size_t workspace_bytes,
                                                  int warmup, int calls, bool graph);
// Device-to-device copy of `bytes`, median of `repeats`; returns (read + written) bytes/s.
Result<double> MeasureCopyBytesPerS(size_t bytes, int repeats);

}  // namespace ladder::kernels::gpu
