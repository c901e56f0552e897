// The synthetic model's arithmetic. Projections are fp32 matrix-vector products (one pass over
// each weight matrix per step, whatever the number of query rows, as on a GPU where decode is
// bound by weight reads); attention goes through ladder::kernels.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../message.h"
#include "ladder/common/random.h"
#include "ladder/status_macros.h"
#include "model.h"

namespace ladder::engines::synthetic {
namespace {

using internal::Cat;

constexpr int kBlockSize = 16;

struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL) {}
  uint64_t Next() { return SplitMix64Next(state); }
  // Uniform in [-a, a).
  float Uniform(float a) {
    return (static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * a;
  }
};

void FillUniform(float* data, size_t n, float a, Rng& rng) {
  for (size_t i = 0; i < n; ++i) data[i] = rng.Uniform(a);
}

// out[r * out_dim + o] = sum_i w[o * in_dim + i] * x[r * in_dim + i]
void MatVec(const std::vector<float>& w, int out_dim, int in_dim, const float* x, int rows,
            float* out) {
  for (int o = 0; o < out_dim; ++o) {
    const float* wo = w.data() + static_cast<size_t>(o) * in_dim;
    for (int r = 0; r < rows; ++r) {
      const float* xr = x + static_cast<size_t>(r) * in_dim;
      float acc = 0.0f;
      for (int i = 0; i < in_dim; ++i) acc += wo[i] * xr[i];
      out[static_cast<size_t>(r) * out_dim + o] = acc;
    }
  }
}

void RmsNorm(const float* x, int n, float* out) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  float inv = 1.0f / std::sqrt(static_cast<float>(ss / n) + 1e-6f);
  for (int i = 0; i < n; ++i) out[i] = x[i] * inv;
}

float Gelu(float x) {
  return 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
}

int Pages(int positions) { return (positions + kBlockSize - 1) / kBlockSize; }

}  // namespace

struct LayerWeights {
  std::vector<float> wq, wk, wv, wo, wg, wu, wd;
};

// Weights of one model: one set per layer kind, shared by the layers of that kind.
struct CpuWeights {
  std::vector<float> embed;  // [vocab, hidden], tied with the LM head
  LayerWeights sliding, global;
  const LayerWeights& For(LayerKind kind) const {
    return kind == LayerKind::kGlobal ? global : sliding;
  }
};

namespace {

absl::StatusOr<std::unique_ptr<CpuWeights>> MakeWeights(const ModelSpec& spec, Rng& rng) {
  auto w = std::make_unique<CpuWeights>();
  const int h = spec.hidden;
  w->embed.resize(static_cast<size_t>(spec.vocab) * h);
  FillUniform(w->embed.data(), w->embed.size(), 1.0f, rng);
  for (LayerKind kind : {LayerKind::kSliding, LayerKind::kGlobal}) {
    auto it = std::find_if(spec.layers.begin(), spec.layers.end(),
                           [&](const LayerSpec& l) { return l.kind == kind; });
    if (it == spec.layers.end()) continue;
    LayerWeights& lw = kind == LayerKind::kGlobal ? w->global : w->sliding;
    const size_t qd = static_cast<size_t>(it->q_heads) * it->head_dim;
    const size_t kvd = static_cast<size_t>(it->kv_heads) * it->head_dim;
    const size_t inter = static_cast<size_t>(spec.intermediate);
    auto init = [&](std::vector<float>& m, size_t out_dim, size_t in_dim) {
      m.resize(out_dim * in_dim);
      FillUniform(m.data(), m.size(), 1.0f / std::sqrt(static_cast<float>(in_dim)), rng);
    };
    init(lw.wq, qd, h);
    init(lw.wk, kvd, h);
    init(lw.wv, kvd, h);
    init(lw.wo, h, qd);
    init(lw.wg, inter, h);
    init(lw.wu, inter, h);
    init(lw.wd, h, inter);
  }
  return w;
}

// One layer's cache as a kernels problem for a single sequence. Sliding layers keep a ring of
// pages just large enough for the window plus the widest verification step.
kernels::HostProblem MakeLayerCache(const LayerSpec& layer, int capacity, int max_rows, Rng& rng,
                                    int filled) {
  kernels::HostProblem p;
  p.shape.q_heads = layer.q_heads;
  p.shape.kv_heads = layer.kv_heads;
  p.shape.head_dim = layer.head_dim;
  p.shape.block_size = kBlockSize;
  p.shape.window = layer.window;
  p.shape.dtype = kernels::DType::kF32;
  p.max_blocks_per_seq = Pages(capacity);
  int pages = p.max_blocks_per_seq;
  if (layer.window > 0) pages = std::min(pages, Pages(layer.window + max_rows) + 2);
  p.num_blocks = pages;
  p.block_table.resize(static_cast<size_t>(p.max_blocks_per_seq));
  for (int i = 0; i < p.max_blocks_per_seq; ++i) p.block_table[static_cast<size_t>(i)] = i % pages;
  const size_t elems = static_cast<size_t>(pages) * kBlockSize * layer.kv_heads * layer.head_dim;
  p.k_cache = kernels::HostTensor(kernels::DType::kF32, elems);
  p.v_cache = kernels::HostTensor(kernels::DType::kF32, elems);
  // Only the filled positions need values (the rest is written before it is read).
  const size_t row = static_cast<size_t>(layer.kv_heads) * layer.head_dim;
  const size_t fill = std::min(elems, static_cast<size_t>(filled) * row + row);
  FillUniform(static_cast<float*>(p.k_cache.data()), fill, 1.0f, rng);
  FillUniform(static_cast<float*>(p.v_cache.data()), fill, 1.0f, rng);
  p.query_start = {0, 1};
  p.seq_lens = {1};
  return p;
}

void WriteKv(kernels::HostProblem& p, int position, const float* k, const float* v) {
  const int page = p.block_table[static_cast<size_t>(position / kBlockSize)];
  const size_t row = static_cast<size_t>(p.shape.kv_heads) * p.shape.head_dim;
  const size_t offset = (static_cast<size_t>(page) * kBlockSize + position % kBlockSize) * row;
  std::memcpy(static_cast<float*>(p.k_cache.data()) + offset, k, row * sizeof(float));
  std::memcpy(static_cast<float*>(p.v_cache.data()) + offset, v, row * sizeof(float));
}

}  // namespace

// The host model: fp32 weights shared per layer kind, caches as kernels::HostProblems.
class CpuModel final : public Model {
 public:
  CpuModel(Preset preset, kernels::RunOptions attention, int max_batch)
      : Model(std::move(preset), attention, max_batch) {}

  absl::Status Init(uint64_t seed) {
    Rng rng(seed ^ 0x5eed);
    ASSIGN_OR_RETURN(target_, MakeWeights(preset_.target, rng));
    ASSIGN_OR_RETURN(drafter_, MakeWeights(preset_.drafter, rng));
    return absl::OkStatus();
  }

  ModelDevice device() const override { return ModelDevice::kCpu; }
  std::string Describe() const override {
    return "device cpu: fp32 weights on the host, one set per layer kind";
  }

 protected:
  struct CpuCaches final : Sequence::Caches {
    std::vector<kernels::HostProblem> target, drafter;
  };

  absl::StatusOr<std::unique_ptr<Sequence::Caches>> NewCaches(int depth, int capacity,
                                                              uint64_t seed) const override {
    auto caches = std::make_unique<CpuCaches>();
    Rng rng(seed);
    for (const LayerSpec& l : preset_.target.layers) {
      caches->target.push_back(MakeLayerCache(l, capacity, MaxRows(), rng, depth));
    }
    for (const LayerSpec& l : preset_.drafter.layers) {
      caches->drafter.push_back(MakeLayerCache(l, capacity, MaxRows(), rng, depth));
    }
    return caches;
  }

  absl::StatusOr<std::vector<std::vector<int32_t>>> Forward(
      bool drafter, const std::vector<Segment>& segments,
      const AttentionObserver& observer) const override;

 private:
  std::unique_ptr<CpuWeights> target_;
  std::unique_ptr<CpuWeights> drafter_;
};

Model::~Model() = default;

absl::StatusOr<std::unique_ptr<Model>> Model::Build(const Preset& preset, uint64_t seed,
                                                    kernels::RunOptions attention,
                                                    ModelDevice device, int max_batch,
                                                    Projection projection) {
  if (device == ModelDevice::kCuda) {
    return BuildCudaModel(preset, seed, attention, max_batch, projection);
  }
  auto model = std::make_unique<CpuModel>(preset, attention, max_batch);
  RETURN_IF_ERROR(model->Init(seed));
  return std::unique_ptr<Model>(std::move(model));
}

absl::StatusOr<Sequence> Model::Prefill(int depth, int capacity, uint64_t seed) const {
  if (depth < 1) return absl::InvalidArgumentError("prompt must have at least one token");
  Sequence seq;
  ASSIGN_OR_RETURN(seq.caches_, NewCaches(depth, capacity, seed));
  seq.length_ = depth - 1;  // the last prompt token is run by the first step
  return seq;
}

absl::StatusOr<std::vector<int32_t>> Model::TargetStep(Sequence& seq,
                                                       const std::vector<int32_t>& tokens,
                                                       const AttentionObserver& observer) const {
  ASSIGN_OR_RETURN(auto out, TargetStepBatch({&seq}, {tokens}, observer));
  return std::move(out[0]);
}

absl::StatusOr<int32_t> Model::DrafterStep(Sequence& seq, int32_t token, int position,
                                           const AttentionObserver& observer) const {
  ASSIGN_OR_RETURN(std::vector<int32_t> out,
                   DrafterStepBatch({&seq}, {token}, {position}, observer));
  return out[0];
}

absl::StatusOr<std::vector<std::vector<int32_t>>> Model::TargetStepBatch(
    const std::vector<Sequence*>& seqs, const std::vector<std::vector<int32_t>>& tokens,
    const AttentionObserver& observer) const {
  if (seqs.empty() || seqs.size() != tokens.size() || static_cast<int>(seqs.size()) > max_batch_) {
    return absl::InvalidArgumentError(Cat("synthetic engine: a batched step carries 1..",
                                          max_batch_, " sequences, got ", seqs.size()));
  }
  std::vector<Segment> segments(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (tokens[i].empty() || static_cast<int>(tokens[i].size()) > MaxRows()) {
      return absl::InvalidArgumentError(
          Cat("synthetic engine: a step carries 1..", MaxRows(), " rows, got ", tokens[i].size()));
    }
    segments[i] = Segment{seqs[i]->caches_.get(), seqs[i]->length_, tokens[i]};
  }
  ASSIGN_OR_RETURN(auto out, Forward(false, segments, observer));
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i]->length_ += static_cast<int>(tokens[i].size());
  return out;
}

absl::StatusOr<std::vector<int32_t>> Model::DrafterStepBatch(
    const std::vector<Sequence*>& seqs, const std::vector<int32_t>& tokens,
    const std::vector<int>& positions, const AttentionObserver& observer) const {
  if (seqs.empty() || seqs.size() != tokens.size() || seqs.size() != positions.size() ||
      static_cast<int>(seqs.size()) > max_batch_) {
    return absl::InvalidArgumentError(Cat("synthetic engine: a batched drafter step carries 1..",
                                          max_batch_, " sequences, got ", seqs.size()));
  }
  std::vector<Segment> segments(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    segments[i] = Segment{seqs[i]->caches_.get(), positions[i], {tokens[i]}};
  }
  ASSIGN_OR_RETURN(auto out, Forward(true, segments, observer));
  std::vector<int32_t> next(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) next[i] = out[i][0];
  return next;
}

absl::StatusOr<ModelDevice> ResolveModelDevice(std::string_view name) {
  if (name == "cpu") return ModelDevice::kCpu;
  if (name == "cuda" || name == "auto") {
    const bool available =
        CudaModelCompiled() && kernels::BackendAvailable(kernels::Backend::kCuda);
    if (available) return ModelDevice::kCuda;
    if (name == "auto") return ModelDevice::kCpu;
    return absl::UnavailableError(
        CudaModelCompiled() ? "synthetic engine: --device cuda: no CUDA device is present"
                            : "synthetic engine: --device cuda: this binary was built without "
                              "LADDER_CUDA");
  }
  return absl::InvalidArgumentError(
      Cat("synthetic engine: --device: expected cpu, cuda or auto, got \"", name, "\""));
}

absl::StatusOr<Projection> ParseProjection(std::string_view name) {
  if (name == "gemv") return Projection::kGemv;
  if (name == "cublas") return Projection::kCublas;
  return absl::InvalidArgumentError(
      Cat("synthetic engine: --projection: expected gemv or cublas, got \"", name, "\""));
}

std::string_view ToString(ModelDevice device) {
  return device == ModelDevice::kCuda ? "cuda" : "cpu";
}

absl::StatusOr<std::vector<std::vector<int32_t>>> CpuModel::Forward(
    bool drafter, const std::vector<Segment>& segments, const AttentionObserver& observer) const {
  const ModelSpec& spec = drafter ? preset_.drafter : preset_.target;
  const CpuWeights& w = drafter ? *drafter_ : *target_;
  // Segment i's rows are rows first[i] .. first[i] + tokens.size() - 1 of the step.
  std::vector<int> first(segments.size());
  int rows = 0;
  for (size_t s = 0; s < segments.size(); ++s) {
    first[s] = rows;
    rows += static_cast<int>(segments[s].tokens.size());
  }
  const int h = spec.hidden;
  std::vector<float> x(static_cast<size_t>(rows) * h), normed(x.size());
  for (size_t s = 0; s < segments.size(); ++s) {
    for (size_t r = 0; r < segments[s].tokens.size(); ++r) {
      int32_t t = std::clamp<int32_t>(segments[s].tokens[r], 0, spec.vocab - 1);
      std::memcpy(x.data() + static_cast<size_t>(first[s] + static_cast<int>(r)) * h,
                  w.embed.data() + static_cast<size_t>(t) * h, sizeof(float) * h);
    }
  }
  std::vector<float> q, k, v, attn, proj, gate, up;
  kernels::HostTensor out;
  for (size_t li = 0; li < spec.layers.size(); ++li) {
    const LayerSpec& l = spec.layers[li];
    const LayerWeights& lw = w.For(l.kind);
    const int qd = l.q_heads * l.head_dim;
    const int kvd = l.kv_heads * l.head_dim;
    for (int r = 0; r < rows; ++r) {
      RmsNorm(x.data() + static_cast<size_t>(r) * h, h, normed.data() + static_cast<size_t>(r) * h);
    }
    // One pass over each projection matrix for every row of every sequence.
    q.resize(static_cast<size_t>(rows) * qd);
    k.resize(static_cast<size_t>(rows) * kvd);
    v.resize(static_cast<size_t>(rows) * kvd);
    MatVec(lw.wq, qd, h, normed.data(), rows, q.data());
    MatVec(lw.wk, kvd, h, normed.data(), rows, k.data());
    MatVec(lw.wv, kvd, h, normed.data(), rows, v.data());
    attn.resize(static_cast<size_t>(rows) * qd);
    // Attention per sequence, over its own cache.
    for (size_t s = 0; s < segments.size(); ++s) {
      CpuCaches& all = static_cast<CpuCaches&>(*segments[s].caches);
      kernels::HostProblem& cache = (drafter ? all.drafter : all.target)[li];
      const int n = static_cast<int>(segments[s].tokens.size());
      const int position = segments[s].position;
      if (Pages(position + n) > cache.max_blocks_per_seq) {
        return absl::OutOfRangeError(Cat("synthetic engine: sequence exceeds its KV capacity (",
                                         cache.max_blocks_per_seq * kBlockSize, " positions)"));
      }
      for (int r = 0; r < n; ++r) {
        const size_t row = static_cast<size_t>(first[s] + r);
        WriteKv(cache, position + r, k.data() + row * kvd, v.data() + row * kvd);
      }
      const size_t q_elems = static_cast<size_t>(n) * qd;
      if (cache.q.numel() != q_elems) cache.q = kernels::HostTensor(kernels::DType::kF32, q_elems);
      std::memcpy(cache.q.data(), q.data() + static_cast<size_t>(first[s]) * qd,
                  q_elems * sizeof(float));
      cache.query_start = {0, n};
      cache.seq_lens = {position + n};
      ASSIGN_OR_RETURN(kernels::RunInfo info, RunKernelAttention(cache, attention_, &out));
      if (observer) {
        observer(AttentionEvent{drafter, static_cast<int>(li), l.kind, n, position + n, info});
      }
      std::memcpy(attn.data() + static_cast<size_t>(first[s]) * qd, out.data(),
                  q_elems * sizeof(float));
    }
    proj.resize(static_cast<size_t>(rows) * h);
    MatVec(lw.wo, h, qd, attn.data(), rows, proj.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
    for (int r = 0; r < rows; ++r) {
      RmsNorm(x.data() + static_cast<size_t>(r) * h, h, normed.data() + static_cast<size_t>(r) * h);
    }
    const int inter = spec.intermediate;
    gate.resize(static_cast<size_t>(rows) * inter);
    up.resize(gate.size());
    MatVec(lw.wg, inter, h, normed.data(), rows, gate.data());
    MatVec(lw.wu, inter, h, normed.data(), rows, up.data());
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = Gelu(gate[i]) * up[i];
    MatVec(lw.wd, h, inter, gate.data(), rows, proj.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
  }
  // Tied LM head and greedy argmax.
  std::vector<float> logits(static_cast<size_t>(rows) * spec.vocab);
  for (int r = 0; r < rows; ++r) {
    RmsNorm(x.data() + static_cast<size_t>(r) * h, h, normed.data() + static_cast<size_t>(r) * h);
  }
  MatVec(w.embed, spec.vocab, h, normed.data(), rows, logits.data());
  std::vector<std::vector<int32_t>> next(segments.size());
  for (size_t s = 0; s < segments.size(); ++s) {
    for (size_t r = 0; r < segments[s].tokens.size(); ++r) {
      const float* lr =
          logits.data() + static_cast<size_t>(first[s] + static_cast<int>(r)) * spec.vocab;
      next[s].push_back(static_cast<int32_t>(std::max_element(lr, lr + spec.vocab) - lr));
    }
  }
  return next;
}

}  // namespace ladder::engines::synthetic
