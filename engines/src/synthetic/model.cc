// The synthetic model's arithmetic. Projections are fp32 matrix-vector products (one pass over
// each weight matrix per step, whatever the number of query rows, as on a GPU where decode is
// bound by weight reads); attention goes through ladder::kernels.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../message.h"
#include "ladder/status_macros.h"
#include "model.h"

namespace ladder::engines::synthetic {
namespace {

using internal::Cat;

constexpr int kBlockSize = 16;

struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL) {}
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
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
kernels::HostProblem MakeLayerCache(const LayerSpec& layer, int capacity, int max_rows,
                                    Rng& rng, int filled) {
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
  CpuModel(Preset preset, kernels::RunOptions attention) : Model(std::move(preset), attention) {}

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

  absl::StatusOr<std::vector<int32_t>> Forward(bool drafter, Sequence::Caches& caches,
                                               int position, const std::vector<int32_t>& tokens,
                                               const AttentionObserver& observer) const override;

 private:
  std::unique_ptr<CpuWeights> target_;
  std::unique_ptr<CpuWeights> drafter_;
};

Model::~Model() = default;

absl::StatusOr<std::unique_ptr<Model>> Model::Build(const Preset& preset, uint64_t seed,
                                                    kernels::RunOptions attention,
                                                    ModelDevice device) {
  if (device == ModelDevice::kCuda) return BuildCudaModel(preset, seed, attention);
  auto model = std::make_unique<CpuModel>(preset, attention);
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
  if (tokens.empty() || static_cast<int>(tokens.size()) > MaxRows()) {
    return absl::InvalidArgumentError(Cat("synthetic engine: a step carries 1..", MaxRows(),
                                          " rows, got ", tokens.size()));
  }
  ASSIGN_OR_RETURN(std::vector<int32_t> out,
                   Forward(false, *seq.caches_, seq.length_, tokens, observer));
  seq.length_ += static_cast<int>(tokens.size());
  return out;
}

absl::StatusOr<int32_t> Model::DrafterStep(Sequence& seq, int32_t token, int position,
                                           const AttentionObserver& observer) const {
  ASSIGN_OR_RETURN(std::vector<int32_t> out, Forward(true, *seq.caches_, position, {token}, observer));
  return out[0];
}

absl::StatusOr<ModelDevice> ResolveModelDevice(std::string_view name) {
  if (name == "cpu") return ModelDevice::kCpu;
  if (name == "cuda" || name == "auto") {
    const bool available = CudaModelCompiled() && kernels::BackendAvailable(kernels::Backend::kCuda);
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

std::string_view ToString(ModelDevice device) {
  return device == ModelDevice::kCuda ? "cuda" : "cpu";
}

absl::StatusOr<std::vector<int32_t>> CpuModel::Forward(bool drafter, Sequence::Caches& caches,
                                                       int position,
                                                       const std::vector<int32_t>& tokens,
                                                       const AttentionObserver& observer) const {
  const ModelSpec& spec = drafter ? preset_.drafter : preset_.target;
  const CpuWeights& w = drafter ? *drafter_ : *target_;
  CpuCaches& all = static_cast<CpuCaches&>(caches);
  std::vector<kernels::HostProblem>& layers = drafter ? all.drafter : all.target;
  const int rows = static_cast<int>(tokens.size());
  const int h = spec.hidden;
  std::vector<float> x(static_cast<size_t>(rows) * h), normed(x.size());
  for (int r = 0; r < rows; ++r) {
    int32_t t = std::clamp<int32_t>(tokens[static_cast<size_t>(r)], 0, spec.vocab - 1);
    std::memcpy(x.data() + static_cast<size_t>(r) * h,
                w.embed.data() + static_cast<size_t>(t) * h, sizeof(float) * h);
  }
  std::vector<float> q, k, v, attn, proj, gate, up;
  kernels::HostTensor out;
  for (size_t li = 0; li < spec.layers.size(); ++li) {
    const LayerSpec& l = spec.layers[li];
    const LayerWeights& lw = w.For(l.kind);
    kernels::HostProblem& cache = layers[li];
    const int qd = l.q_heads * l.head_dim;
    const int kvd = l.kv_heads * l.head_dim;
    if (Pages(position + rows) > cache.max_blocks_per_seq) {
      return absl::OutOfRangeError(Cat("synthetic engine: sequence exceeds its KV capacity (",
                                       cache.max_blocks_per_seq * kBlockSize, " positions)"));
    }
    for (int r = 0; r < rows; ++r) {
      RmsNorm(x.data() + static_cast<size_t>(r) * h, h, normed.data() + static_cast<size_t>(r) * h);
    }
    q.resize(static_cast<size_t>(rows) * qd);
    k.resize(static_cast<size_t>(rows) * kvd);
    v.resize(static_cast<size_t>(rows) * kvd);
    MatVec(lw.wq, qd, h, normed.data(), rows, q.data());
    MatVec(lw.wk, kvd, h, normed.data(), rows, k.data());
    MatVec(lw.wv, kvd, h, normed.data(), rows, v.data());
    for (int r = 0; r < rows; ++r) {
      WriteKv(cache, position + r, k.data() + static_cast<size_t>(r) * kvd,
              v.data() + static_cast<size_t>(r) * kvd);
    }
    if (cache.q.numel() != q.size()) cache.q = kernels::HostTensor(kernels::DType::kF32, q.size());
    std::memcpy(cache.q.data(), q.data(), q.size() * sizeof(float));
    cache.query_start = {0, rows};
    cache.seq_lens = {position + rows};
    ASSIGN_OR_RETURN(kernels::RunInfo info, RunKernelAttention(cache, attention_, &out));
    if (observer) {
      observer(AttentionEvent{drafter, static_cast<int>(li), l.kind, rows, position + rows, info});
    }
    proj.resize(static_cast<size_t>(rows) * h);
    MatVec(lw.wo, h, qd, static_cast<const float*>(out.data()), rows, proj.data());
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
  std::vector<int32_t> next(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    const float* lr = logits.data() + static_cast<size_t>(r) * spec.vocab;
    next[static_cast<size_t>(r)] = static_cast<int32_t>(std::max_element(lr, lr + spec.vocab) - lr);
  }
  return next;
}

}  // namespace ladder::engines::synthetic
