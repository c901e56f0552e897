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
// CUDA model serializes its steps (one stream, shared scratch buffers).
class Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Build(const Preset& preset, uint64_t seed,
                                                      kernels::RunOptions attention,
                                                      ModelDevice device = ModelDevice::kCpu);
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
  // Sets the sequence length (drops rejected positions; they are overwritten later).
  void Rewind(Sequence& seq, int length) const { seq.length_ = length; }

 protected:
  Model(Preset preset, kernels::RunOptions attention)
      : preset_(std::move(preset)), attention_(attention) {}
  // Caches for one sequence, `depth` positions filled with random K/V.
  virtual absl::StatusOr<std::unique_ptr<Sequence::Caches>> NewCaches(int depth, int capacity,
                                                                      uint64_t seed) const = 0;
  // Runs the target (or the drafter) over `tokens` at positions position..position+rows-1,
  // appending their K/V to `caches`; returns each row's greedy next token.
  virtual absl::StatusOr<std::vector<int32_t>> Forward(bool drafter, Sequence::Caches& caches,
                                                       int position,
                                                       const std::vector<int32_t>& tokens,
                                                       const AttentionObserver& observer) const = 0;
  // Largest number of rows one step may carry (the widest verification, k + 1).
  int MaxRows() const { return std::max(1, attention_.config.decode_query_len) + 1; }

  const Preset preset_;
  const kernels::RunOptions attention_;
};

// The CUDA model (gpu_model.cc); Unavailable in a build without LADDER_CUDA.
absl::StatusOr<std::unique_ptr<Model>> BuildCudaModel(const Preset& preset, uint64_t seed,
                                                      kernels::RunOptions attention);
bool CudaModelCompiled();

}  // namespace ladder::engines::synthetic
