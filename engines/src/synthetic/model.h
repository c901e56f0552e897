// The synthetic model: shapes, random weights, per-request KV caches and the decode step.
// Internal to ladder_synthetic_engine.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/kernels/attention.h"

namespace ladder::engines::synthetic {

enum class LayerKind { kSliding, kGlobal };

struct LayerSpec {
  LayerKind kind = LayerKind::kSliding;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int window = 0;  // 0: full attention
};

struct ModelSpec {
  std::string name;
  int hidden = 0;
  int intermediate = 0;
  int vocab = 0;
  std::vector<LayerSpec> layers;
};

struct Preset {
  std::string name;
  ModelSpec target;
  ModelSpec drafter;
  int max_model_len = 0;
};

absl::StatusOr<Preset> FindPreset(std::string_view name);
std::vector<std::string> PresetNames();

// Piecewise-linear acceptance probability as a function of depth.
class AcceptanceCurve {
 public:
  static absl::StatusOr<AcceptanceCurve> Parse(std::string_view text);
  double At(int depth) const;

 private:
  std::vector<std::pair<int, double>> points_;
};

// What an attention call did, for the path log and metrics.
struct AttentionEvent {
  bool drafter = false;
  int layer = 0;
  LayerKind kind = LayerKind::kSliding;
  int q_rows = 1;
  int kv_len = 0;
  kernels::RunInfo info;
};
using AttentionObserver = std::function<void(const AttentionEvent&)>;

// Attention through ladder::kernels (attention.cc): converts the kernels error type once.
absl::StatusOr<kernels::RunInfo> RunKernelAttention(const kernels::HostProblem& problem,
                                                    const kernels::RunOptions& options,
                                                    kernels::HostTensor* out);

// Where the model's weights, caches and arithmetic live.
// How the CUDA model computes the projections of a step with few rows (batch-1 decode and
// verification): cuBLAS's GEMM, or the model's own matrix-vector kernel (gpu_ops.h GemvBf16),
// which streams each weight once with wide loads. Wider steps always use cuBLAS.
enum class Projection { kCublas, kGemv };
absl::StatusOr<Projection> ParseProjection(std::string_view name);

enum class ModelDevice {
  kCpu,   // fp32 on the host, attention through the kernels' CPU backend (model.cc)
  kCuda,  // bf16 on the GPU, cuBLAS projections, device-resident attention (gpu_model.cc)
};
// "cpu" | "cuda" | "auto" (cuda when this binary has it and a GPU is present, else cpu).
absl::StatusOr<ModelDevice> ResolveModelDevice(std::string_view name);
std::string_view ToString(ModelDevice device);

class Model;

// One sequence's KV caches (target and drafter), in the memory of the model that made it.
class Sequence {
 public:
  // What a model keeps per sequence; each model defines its own.
  class Caches {
   public:
    virtual ~Caches() = default;
  };
  int length() const { return length_; }

 private:
  friend class Model;
  std::unique_ptr<Caches> caches_;
  int length_ = 0;  // positions whose K/V are in the cache
};

// Random-weight model (see docs/engines.md for what each device keeps per layer).
// Thread safety: the CPU model's const methods may run concurrently on distinct Sequences; the
// CUDA model serializes its steps (one stream, shared scratch buffers). A batched step and the
// sequences in it belong to one caller for its duration.
class Model {
 public:
  // `max_batch`: the most sequences one batched step carries (the CUDA model sizes its
  // scratch buffers for max_batch * MaxRows() rows).
  static absl::StatusOr<std::unique_ptr<Model>> Build(const Preset& preset, uint64_t seed,
                                                      kernels::RunOptions attention,
                                                      ModelDevice device = ModelDevice::kCpu,
                                                      int max_batch = 1,
                                                      Projection projection = Projection::kGemv);
  virtual ~Model();

  const Preset& preset() const { return preset_; }
  virtual ModelDevice device() const = 0;
  // One line for the start-up log: where the weights are and how large they are.
  virtual std::string Describe() const = 0;

  // A sequence whose caches hold `depth` random positions (the approximated prefill) and
  // room for `capacity` positions.
  absl::StatusOr<Sequence> Prefill(int depth, int capacity, uint64_t seed) const;

  // Runs the target over `tokens` at positions length..length+rows-1 and returns the greedy
  // next token of every row. Appends the rows' K/V (the caller may Rewind rejected ones).
  absl::StatusOr<std::vector<int32_t>> TargetStep(Sequence& seq, const std::vector<int32_t>& tokens,
                                                  const AttentionObserver& observer) const;
  // One drafter step (one row) at `position` of the drafter's cache.
  absl::StatusOr<int32_t> DrafterStep(Sequence& seq, int32_t token, int position,
                                      const AttentionObserver& observer) const;

  // One step of several sequences at once (continuous batching): sequence i runs tokens[i]
  // (1..MaxRows() rows) at its own positions. Every weight matrix is read once for all the
  // rows of all the sequences; attention runs per sequence over its own cache. Returns each
  // sequence's greedy next tokens, one per row. The target variant appends the rows to each
  // sequence (as TargetStep); the drafter variant writes sequence i's row at positions[i].
  absl::StatusOr<std::vector<std::vector<int32_t>>> TargetStepBatch(
      const std::vector<Sequence*>& seqs, const std::vector<std::vector<int32_t>>& tokens,
      const AttentionObserver& observer) const;
  absl::StatusOr<std::vector<int32_t>> DrafterStepBatch(const std::vector<Sequence*>& seqs,
                                                        const std::vector<int32_t>& tokens,
                                                        const std::vector<int>& positions,
                                                        const AttentionObserver& observer) const;
  // Most sequences one batched step may carry.
  int max_batch() const { return max_batch_; }
  // Sets the sequence length (drops rejected positions; they are overwritten later).
  void Rewind(Sequence& seq, int length) const { seq.length_ = length; }

 protected:
  Model(Preset preset, kernels::RunOptions attention, int max_batch)
      : preset_(std::move(preset)), attention_(attention), max_batch_(std::max(1, max_batch)) {}
  // Caches for one sequence, `depth` positions filled with random K/V.
  virtual absl::StatusOr<std::unique_ptr<Sequence::Caches>> NewCaches(int depth, int capacity,
                                                                      uint64_t seed) const = 0;
  // One sequence's part of a step: its rows run at positions position..position+rows-1 and
  // their K/V are appended to its caches.
  struct Segment {
    Sequence::Caches* caches = nullptr;
    int position = 0;
    std::vector<int32_t> tokens;
  };
  // Runs the target (or the drafter) over every segment's tokens in one pass over the weights;
  // returns each segment's rows' greedy next tokens.
  virtual absl::StatusOr<std::vector<std::vector<int32_t>>> Forward(
      bool drafter, const std::vector<Segment>& segments,
      const AttentionObserver& observer) const = 0;
  // Largest number of rows one step may carry (the widest verification, k + 1).
  int MaxRows() const { return std::max(1, attention_.config.decode_query_len) + 1; }

  const Preset preset_;
  const kernels::RunOptions attention_;
  const int max_batch_;
};

// The CUDA model (gpu_model.cc); Unavailable in a build without LADDER_CUDA.
absl::StatusOr<std::unique_ptr<Model>> BuildCudaModel(const Preset& preset, uint64_t seed,
                                                      kernels::RunOptions attention, int max_batch,
                                                      Projection projection);
bool CudaModelCompiled();

}  // namespace ladder::engines::synthetic
