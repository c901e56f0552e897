// Unified attention over a paged KV cache (vLLM style), on the CPU, CUDA or HIP.
//
// The operation (identical contract on every backend):
//   q        [num_tokens, q_heads, head_dim]      queries of all sequences, packed
//   k_cache  [num_blocks, block_size, kv_heads, head_dim]
//   v_cache  [num_blocks, block_size, kv_heads, head_dim]
//   out      [num_tokens, q_heads, head_dim]      same dtype as q
//   query_start[num_seqs + 1]  cumulative query offsets (query_start[0] == 0)
//   seq_lens[num_seqs]         KV length of each sequence, *including* its query rows: query
//                              row r of a sequence with q_len rows sits at absolute position
//                              seq_len - q_len + r and attends to KV positions j <= that
//                              position (causal among the query rows), and, with a sliding
//                              window W > 0, only to j > position - W.
//   block_table[num_seqs, max_blocks_per_seq]  physical page of each logical page.
// GQA: q head h reads KV head h / (q_heads / kv_heads). Scores are scale * q.k, then, with
// softcap C > 0, C * tanh(score / C). Accumulation is fp32; the output is rounded once to the
// input dtype.
//
// Two algorithms:
//   Path::k2D  one work item per (sequence, query block, KV head) walks the whole KV range.
//   Path::k3D  the KV range is split into `segments`; each writes an unnormalised partial
//              (accumulator, running max, exp-sum) to a buffer indexed per *query token*
//              (not per sequence: that is the geometry bug the study traces), and a merge
//              combines them. A segment that sees no unmasked key merges as empty
//              (max -inf, sum 0).
// Both walk the same KV tiles in the same order inside a segment, so they differ only by
// float reassociation: at most one ULP of a bf16 output.
//
// Thread safety: every function here may be called concurrently with distinct outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ladder/kernels/result.h"
#include "ladder/kernels/tuning.h"

namespace ladder::kernels {

enum class Backend { kCpu, kCuda, kHip };
enum class Path { k2D, k3D };
// kForce2D / kForce3D bypass the decision; kLegacy reproduces vLLM's gate (3D only when every
// sequence has exactly one query row); kSpecAware also takes 3D when every sequence has at most
// decode_query_len rows (speculative verification) while prefill stays 2D; kAuto = kSpecAware.
enum class Policy { kForce2D, kForce3D, kLegacy, kSpecAware, kAuto };
enum class DType { kF32, kF16, kBF16 };

std::string_view ToString(Backend b);
std::string_view ToString(Path p);
std::string_view ToString(Policy p);
std::string_view ToString(DType d);
Result<Backend> ParseBackend(std::string_view s);  // "cpu" | "cuda" | "hip"
Result<Policy> ParsePolicy(std::string_view s);    // "2d" | "3d" | "legacy" | "spec-aware" | "auto"
Result<DType> ParseDType(std::string_view s);      // "f32" | "f16" | "bf16"
size_t DTypeBytes(DType d);

// True when the backend is compiled into this binary *and* a device is present (checked at
// run time: a CUDA build still runs the CPU backend on a machine without a GPU).
bool BackendAvailable(Backend b);

// What the policy needs to know about the device. For the CPU, sm_count is the number of
// worker threads.
struct DeviceInfo {
  std::string name;
  int sm_count = 1;
  int warp_size = 1;
  size_t l2_bytes = 0;
  int cc_major = 0, cc_minor = 0;  // CUDA compute capability / HIP gfx major, minor
  std::string pci_bus_id;          // "domain:bus:device.0" (hex); empty for the CPU
};
Result<DeviceInfo> QueryDevice(Backend b);

// Knobs of the path policy. Defaults follow vLLM's Triton backend where it has one.
struct PolicyConfig {
  // Legacy and spec-aware take 3D only while num_seqs <= this; 0 = 128 / kv_heads (vLLM).
  int seq_threshold_3d = 0;
  // Spec-aware: 3D while every sequence has at most this many query rows (k drafts + 1). Eight
  // covers MTP with 4 drafts and EAGLE with up to 7: on the 2D path such a call has one work
  // group per KV head and row tile, and at 5 rows the 3D path took 0.04-0.29x its time on the
  // H200 (kernels/ab/kernels-ab-decode-rows.yaml, docs/kernel-experiments.md).
  int decode_query_len = 8;
  // Segment count: aim for ctas_per_sm * sm_count work items, but give each segment at least
  // min_tokens_per_segment keys, and never more than max_segments.
  // GPU backends replace ctas_per_sm with the kernel's occupancy (work groups that fit on one
  // multiprocessor) unless ctas_from_occupancy is false.
  // 32 keys: at short depths the call's time is its fixed cost and the split's parallelism pays
  // for it (H200, 1K, graph replays: head 512 1 row 9.0 us at 32 segments against 12.1 at 128
  // keys' 8; TP=2 7.8 against 11.8; dense-256 11.9 at its occupancy's 16 against 12.8; see
  // docs/kernels.md). From 8K up the occupancy target decides, as before.
  int ctas_per_sm = 2;
  bool ctas_from_occupancy = true;
  int min_tokens_per_segment = 32;
  int max_segments = 128;
  // Keys per K/V tile of the kernel that runs: the split gives each segment whole tiles, and
  // launches only the segments that get any (ceil(tiles / ceil(tiles / segments))). GPU
  // backends set the kernel's tile (32 or 64 keys for the generic kernel, 16 for the head-512
  // team kernel's chunks); 16, the smallest, otherwise.
  int tile_keys = 16;
  // > 0 forces this segment count for the 3D path (tests use it to create empty segments).
  int force_segments = 0;
};

struct PathDecision {
  Path path = Path::k2D;
  int segments = 1;    // 1 for 2D
  std::string reason;  // one line: which clause decided
};

// Pure decision function (no device access): exposed for tests and for the agent's evidence.
// work_units = num_seqs * kv_heads * query blocks per sequence; max_kv_len = the most keys one
// query block sees (KeysSeen).
PathDecision ChoosePath(Policy policy, const PolicyConfig& config, int num_seqs, int max_query_len,
                        int max_kv_len, int kv_heads, int work_units, int sm_count);
int ChooseSegments(const PolicyConfig& config, int work_units, int max_kv_len, int sm_count);

// A host tensor of one dtype. Values are stored in their dtype (bf16/f16 as raw 16-bit words).
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, size_t numel);
  DType dtype() const { return dtype_; }
  size_t numel() const { return numel_; }
  size_t bytes() const { return bytes_.size(); }
  const void* data() const { return bytes_.data(); }
  void* data() { return bytes_.data(); }
  float Get(size_t i) const;
  void Set(size_t i, float v);    // rounds to nearest even
  uint32_t Bits(size_t i) const;  // raw bits (16 or 32 of them)

 private:
  DType dtype_ = DType::kF32;
  size_t numel_ = 0;
  std::vector<unsigned char> bytes_;
};

struct AttentionShape {
  int q_heads = 8;
  int kv_heads = 2;
  int head_dim = 64;
  int block_size = 16;
  int window = 0;        // 0 = no sliding window
  float softcap = 0.0f;  // 0 = off
  float scale = 0.0f;    // 0 = 1/sqrt(head_dim)
  DType dtype = DType::kBF16;

  float EffectiveScale() const;
  Status Validate() const;
};

// The most keys one query block of at most max_query_len rows sees in a sequence of max_kv_len:
// all of them, or with a sliding window its window and the block's rows past the first: a
// sliding layer's split is the window's, whatever the depth.
int KeysSeen(const AttentionShape& shape, int max_kv_len, int max_query_len);

// A complete problem on the host (see the layout at the top of this file).
struct HostProblem {
  AttentionShape shape;
  std::vector<int> query_start;  // num_seqs + 1
  std::vector<int> seq_lens;     // num_seqs
  std::vector<int> block_table;  // num_seqs * max_blocks_per_seq
  int max_blocks_per_seq = 0;
  int num_blocks = 0;
  HostTensor q, k_cache, v_cache;

  int num_seqs() const { return static_cast<int>(seq_lens.size()); }
  int num_tokens() const { return query_start.empty() ? 0 : query_start.back(); }
  int max_query_len() const;
  int max_kv_len() const;
  Status Validate() const;
};

// One sequence of a generated problem: q_len query rows at the end of kv_len keys.
struct SeqSpec {
  int q_len = 1;
  int kv_len = 1;
};
// Deterministic random problem: values N(0,1)-ish rounded to the dtype (q scaled by
// q_scale), pages assigned in a seeded shuffled order.
Result<HostProblem> MakeProblem(const AttentionShape& shape, const std::vector<SeqSpec>& seqs,
                                uint64_t seed, float q_scale = 1.0f);

struct RunOptions {
  Policy policy = Policy::kAuto;
  PolicyConfig config;
  TuningConfig tuning;  // GPU backends: which kernel and launch options (tuning.h)
  int cpu_threads = 2;  // CPU backend: worker threads (sequence x KV head x segment items)
};

struct RunInfo {
  Path path = Path::k2D;
  int segments = 1;
  std::string grid;    // e.g. "2D grid 1x4x1 (256 thr)" or "3D grid 1x4x66 + merge 2x32"
  std::string reason;  // from the policy
};

// Runs the attention on `backend` with host inputs and outputs (GPU backends copy in and out;
// use the benchmark API for timing). `out` is resized to [num_tokens, q_heads, head_dim].
Result<RunInfo> RunAttention(Backend backend, const HostProblem& problem, const RunOptions& options,
                             HostTensor* out);

// Double-precision reference on the host (slow, exact up to double rounding); output in
// doubles, [num_tokens, q_heads, head_dim].
std::vector<double> ReferenceAttention(const HostProblem& problem);

// Distance in units in the last place between two values of a 16-bit dtype given as raw
// bits (+0 and -0 are equal); for f32, between the float bit patterns.
int64_t UlpDistance(DType dtype, uint32_t a, uint32_t b);

}  // namespace ladder::kernels
