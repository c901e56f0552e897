// The synthetic model: shapes, random weights, per-request KV caches and the decode step.
// Internal to ladder_synthetic_engine.
#pragma once

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

class Model;

// One sequence's KV caches (target and drafter), sized for `capacity` positions.
class Sequence {
 public:
  int length() const { return length_; }

 private:
  friend class Model;
  std::vector<kernels::HostProblem> target_layers_;
  std::vector<kernels::HostProblem> drafter_layers_;
  int length_ = 0;  // positions whose K/V are in the cache
};

// Random-weight model. Weights are shared by all layers of one kind (sliding / global): the
// compute per layer is the real model's, the memory is not (see docs/engines.md).
// Thread safety: const methods may run concurrently on distinct Sequences.
class Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Build(const Preset& preset, uint64_t seed,
                                                      kernels::RunOptions attention);
  ~Model();

  const Preset& preset() const { return preset_; }

  // A sequence whose caches hold `depth` random positions (the approximated prefill).
  absl::StatusOr<Sequence> Prefill(int depth, int capacity, uint64_t seed) const;

  // Runs the target over `tokens` at positions length..length+rows-1 and returns the greedy
  // next token of every row. Appends the rows' K/V (the caller may Rewind rejected ones).
  absl::StatusOr<std::vector<int32_t>> TargetStep(Sequence& seq, const std::vector<int32_t>& tokens,
                                                  const AttentionObserver& observer) const;
  // One drafter step (one row) at the sequence's drafter position.
  absl::StatusOr<int32_t> DrafterStep(Sequence& seq, int32_t token, int position,
                                      const AttentionObserver& observer) const;
  // Sets the sequence length (drops rejected positions; they are overwritten later).
  void Rewind(Sequence& seq, int length) const { seq.length_ = length; }

  struct Weights;

 private:
  Model() = default;
  absl::StatusOr<std::vector<int32_t>> Forward(const ModelSpec& spec, const Weights& w,
                                               std::vector<kernels::HostProblem>& layers,
                                               int position, const std::vector<int32_t>& tokens,
                                               bool drafter,
                                               const AttentionObserver& observer) const;
  Preset preset_;
  kernels::RunOptions attention_;
  std::unique_ptr<Weights> target_;
  std::unique_ptr<Weights> drafter_;
};

}  // namespace ladder::engines::synthetic
