// The CUDA synthetic model: what a decode step of the real model costs on a GPU.
//
// Weights are bf16 on the device, one set per layer (Gemma 4 31B: ~62 GB), random from a seed.
// A step of r rows (1, or k + 1 when verifying k drafts) reads every weight matrix once:
//   x = embed[tokens]                                    (fp32 residual stream)
//   per layer: qkv = W_qkv · rmsnorm(x)                   (cuBLAS, bf16 in, fp32 accumulate)
//              Q -> q buffer, K/V -> the layer's paged cache at the step's positions
//              attn = unified attention (kernels' device entry, the engine's path policy)
//              x += W_o · attn;  x += W_down · (gelu(W_gate · n) * (W_up · n)), n = rmsnorm(x)
//   logits = embed · rmsnorm(x) (tied head), next = argmax
// All on one stream; the host waits once per step, for the r next tokens (an engine must
// know them before it can continue). A batched step (continuous batching) stacks the rows of
// several sequences: the GEMMs read each weight once for all of them, and K/V scatter and
// attention run per sequence over its own cache. Q/K/V and gate/up are fused into one matrix each,
// which reads the same bytes as separate ones in fewer launches.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "../message.h"
#include "absl/base/thread_annotations.h"
#include "gpu_ops.h"
#include "ladder/common/mutex.h"
#include "ladder/common/random.h"
#include "ladder/kernels/device_attention.h"
#include "ladder/status_macros.h"
#include "model.h"

namespace ladder::engines::synthetic {
namespace {

using internal::Cat;

constexpr int kBlockSize = 16;

absl::Status CudaError(cudaError_t e, const char* call, const char* file, int line) {
  const std::string message =
      Cat("synthetic engine: ", call, " failed at ", file, ":", line, ": ", cudaGetErrorString(e));
  return e == cudaErrorMemoryAllocation ? absl::ResourceExhaustedError(message)
                                        : absl::InternalError(message);
}
absl::Status CublasError(cublasStatus_t s, const char* call, const char* file, int line) {
  return absl::InternalError(Cat("synthetic engine: ", call, " failed at ", file, ":", line,
                                 ": cuBLAS status ", static_cast<int>(s)));
}

// Device and cuBLAS errors become statuses here, once, with the call and file:line.
#define SYN_CUDA(expr)                                                              \
  do {                                                                              \
    const cudaError_t syn_e_ = (expr);                                              \
    if (syn_e_ != cudaSuccess) return CudaError(syn_e_, #expr, __FILE__, __LINE__); \
  } while (0)
#define SYN_CUBLAS(expr)                                                                        \
  do {                                                                                          \
    const cublasStatus_t syn_s_ = (expr);                                                       \
    if (syn_s_ != CUBLAS_STATUS_SUCCESS) return CublasError(syn_s_, #expr, __FILE__, __LINE__); \
  } while (0)

// Move-only owner of one device allocation.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  static absl::StatusOr<DeviceMemory> Alloc(size_t bytes) {
    DeviceMemory m;
    SYN_CUDA(cudaMalloc(&m.p_, std::max<size_t>(bytes, 1)));
    m.n_ = bytes;
    return m;
  }
  DeviceMemory(DeviceMemory&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    if (this != &o) {
      Release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() { Release(); }
  char* get() const { return static_cast<char*>(p_); }
  size_t size() const { return n_; }

 private:
  void Release() {
    if (p_ != nullptr) (void)cudaFree(p_);
    p_ = nullptr;
  }
  void* p_ = nullptr;
  size_t n_ = 0;
};

// Hands out 256-byte aligned pieces of one allocation: first counting (base == nullptr), then
// for real with the same sequence of requests.
class Carver {
 public:
  explicit Carver(char* base) : base_(base) {}
  template <typename T>
  T* Take(size_t count) {
    const size_t at = used_;
    used_ += (count * sizeof(T) + 255) / 256 * 256;
    return base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + at);
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

int Pages(int positions) { return (positions + kBlockSize - 1) / kBlockSize; }

int QDim(const LayerSpec& l) { return l.q_heads * l.head_dim; }
int KvDim(const LayerSpec& l) { return l.kv_heads * l.head_dim; }

struct GpuLayerWeights {
  uint16_t* qkv = nullptr;      // [q_dim + 2 kv_dim, hidden]
  uint16_t* o = nullptr;        // [hidden, q_dim]
  uint16_t* gate_up = nullptr;  // [2 intermediate, hidden]
  uint16_t* down = nullptr;     // [hidden, intermediate]
};

// One model's weights: one set per layer, in one allocation.
struct GpuWeights {
  DeviceMemory memory;
  uint16_t* embed = nullptr;  // [vocab, hidden], tied with the LM head
  std::vector<GpuLayerWeights> layers;
};

// Requests every matrix of `spec` from `carver`, in a fixed order.
void CarveWeights(const ModelSpec& spec, Carver& carver, GpuWeights& w) {
  const size_t h = static_cast<size_t>(spec.hidden), inter = static_cast<size_t>(spec.intermediate);
  w.embed = carver.Take<uint16_t>(static_cast<size_t>(spec.vocab) * h);
  w.layers.clear();
  for (const LayerSpec& l : spec.layers) {
    GpuLayerWeights lw;
    lw.qkv = carver.Take<uint16_t>((QDim(l) + 2 * static_cast<size_t>(KvDim(l))) * h);
    lw.o = carver.Take<uint16_t>(h * QDim(l));
    lw.gate_up = carver.Take<uint16_t>(2 * inter * h);
    lw.down = carver.Take<uint16_t>(h * inter);
    w.layers.push_back(lw);
  }
}

size_t WeightBytes(const ModelSpec& spec) {
  Carver counter(nullptr);
  GpuWeights unused;
  CarveWeights(spec, counter, unused);
  return counter.used();
}

// One layer's paged K/V for one sequence.
struct GpuLayerCache {
  uint16_t* k = nullptr;
  uint16_t* v = nullptr;
  int32_t* block_table = nullptr;  // [max_blocks]
  int max_blocks = 0;              // logical pages the sequence may use
  int pages = 0;                   // physical pages (sliding layers: a ring over the window)
};

struct GpuCaches final : Sequence::Caches {
  DeviceMemory memory;
  std::vector<GpuLayerCache> target, drafter;
};

class CudaModel final : public Model {
 public:
  CudaModel(Preset preset, kernels::RunOptions attention, int max_batch, Projection projection)
      : Model(std::move(preset), attention, max_batch), projection_(projection) {}

  ~CudaModel() override {
    if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  absl::Status Init(uint64_t seed) {
    cudaDeviceProp prop{};
    SYN_CUDA(cudaGetDeviceProperties(&prop, 0));
    device_name_ = prop.name;
    target_bytes_ = WeightBytes(preset_.target);
    drafter_bytes_ = WeightBytes(preset_.drafter);
    size_t free_bytes = 0, total_bytes = 0;
    SYN_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (target_bytes_ + drafter_bytes_ > free_bytes) {
      return absl::ResourceExhaustedError(
          Cat("synthetic engine: preset ", preset_.name, " needs ",
              (target_bytes_ + drafter_bytes_) >> 20, " MiB of bf16 weights; ", device_name_,
              " has ", free_bytes >> 20, " MiB free of ", total_bytes >> 20));
    }
    SYN_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SYN_CUBLAS(cublasCreate(&cublas_));
    SYN_CUBLAS(cublasSetStream(cublas_, stream_));
    RETURN_IF_ERROR(MakeWeights(preset_.target, MixSeeds(seed, 1), target_));
    RETURN_IF_ERROR(MakeWeights(preset_.drafter, MixSeeds(seed, 2), drafter_));
    RETURN_IF_ERROR(MakeScratch());
    SYN_CUDA(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  ModelDevice device() const override { return ModelDevice::kCuda; }
  std::string Describe() const override {
    return Cat(
        "device cuda (", device_name_, "): bf16 weights on the GPU, one set per layer (target ",
        target_bytes_ >> 20, " MiB, drafter ", drafter_bytes_ >> 20, " MiB); ",
        projection_ == Projection::kGemv ? "matrix-vector kernel for steps of up to 4 rows, " : "",
        "cuBLAS projections; device-resident attention");
  }

 protected:
  absl::StatusOr<std::unique_ptr<Sequence::Caches>> NewCaches(int depth, int capacity,
                                                              uint64_t seed) const override {
    MutexLock lock(&mu_);
    auto caches = std::make_unique<GpuCaches>();
    // Count, allocate once, then carve: one cudaMalloc per request.
    for (int pass = 0; pass < 2; ++pass) {
      Carver carver(pass == 0 ? nullptr : caches->memory.get());
      caches->target = CarveCaches(preset_.target, capacity, carver);
      caches->drafter = CarveCaches(preset_.drafter, capacity, carver);
      if (pass == 0) {
        ASSIGN_OR_RETURN(caches->memory, DeviceMemory::Alloc(carver.used()));
      }
    }
    uint64_t fill_seed = MixSeeds(seed, 0xcac4e);
    for (auto* layers : {&caches->target, &caches->drafter}) {
      const ModelSpec& spec = layers == &caches->target ? preset_.target : preset_.drafter;
      for (size_t i = 0; i < layers->size(); ++i) {
        GpuLayerCache& c = (*layers)[i];
        const LayerSpec& l = spec.layers[i];
        // The ring of a sliding layer cycles over its pages; a full layer's pages are in order.
        std::vector<int32_t> table(static_cast<size_t>(c.max_blocks));
        for (int b = 0; b < c.max_blocks; ++b) table[static_cast<size_t>(b)] = b % c.pages;
        SYN_CUDA(cudaMemcpyAsync(c.block_table, table.data(), table.size() * sizeof(int32_t),
                                 cudaMemcpyHostToDevice, stream_));
        // Positions below `depth` stand for the prompt; the rest is written before it is read.
        const size_t filled = std::min<size_t>(static_cast<size_t>(c.pages) * kBlockSize,
                                               static_cast<size_t>(depth)) *
                              KvDim(l);
        gpu::FillUniformBf16(c.k, filled, fill_seed = MixSeeds(fill_seed, 1), 1.0f, stream_);
        gpu::FillUniformBf16(c.v, filled, fill_seed = MixSeeds(fill_seed, 2), 1.0f, stream_);
      }
    }
    SYN_CUDA(cudaGetLastError());
    // The host table vectors are pageable: wait before they go out of scope is not needed
    // (pageable copies are staged before cudaMemcpyAsync returns), but surface errors now.
    SYN_CUDA(cudaStreamSynchronize(stream_));
    return std::unique_ptr<Sequence::Caches>(std::move(caches));
  }

  absl::StatusOr<std::vector<std::vector<int32_t>>> Forward(
      bool drafter, const std::vector<Segment>& segments,
      const AttentionObserver& observer) const override {
    MutexLock lock(&mu_);
    const ModelSpec& spec = drafter ? preset_.drafter : preset_.target;
    const GpuWeights& w = drafter ? drafter_ : target_;
    const int max_rows = MaxStepRows();
    if (segments.empty() || static_cast<int>(segments.size()) > max_batch_) {
      return absl::InvalidArgumentError(
          Cat("synthetic engine: a batched step carries 1..", max_batch_, " sequences"));
    }
    // Segment s's rows are rows first[s] .. first[s] + n - 1 of the step's buffers.
    std::vector<int> first(segments.size());
    int rows = 0;
    for (size_t s = 0; s < segments.size(); ++s) {
      const int n = static_cast<int>(segments[s].tokens.size());
      if (n < 1 || n > MaxRows()) {
        return absl::InvalidArgumentError(
            Cat("synthetic engine: a step carries 1..", MaxRows(), " rows"));
      }
      first[s] = rows;
      rows += n;
    }
    const int h = spec.hidden;
    // Step metadata in one upload: tokens [max_rows], then per segment query_start {0, n} and
    // seq_lens {position + n}.
    std::vector<int32_t> meta(static_cast<size_t>(max_rows) + 3 * segments.size(), 0);
    for (size_t s = 0; s < segments.size(); ++s) {
      const int n = static_cast<int>(segments[s].tokens.size());
      std::copy(segments[s].tokens.begin(), segments[s].tokens.end(), meta.begin() + first[s]);
      meta[static_cast<size_t>(max_rows) + 3 * s + 1] = n;
      meta[static_cast<size_t>(max_rows) + 3 * s + 2] = segments[s].position + n;
    }
    SYN_CUDA(cudaMemcpyAsync(meta_, meta.data(), meta.size() * sizeof(int32_t),
                             cudaMemcpyHostToDevice, stream_));
    gpu::EmbedRows(w.embed, spec.vocab, h, meta_, rows, x_, stream_);

    for (size_t li = 0; li < spec.layers.size(); ++li) {
      const LayerSpec& l = spec.layers[li];
      const GpuLayerWeights& lw = w.layers[li];
      const int qd = QDim(l), kvd = KvDim(l);
      gpu::RmsNormToBf16(x_, rows, h, normed_, stream_);
      // One pass over W_qkv for every row of every sequence.
      RETURN_IF_ERROR(Gemm(lw.qkv, qd + 2 * kvd, h, normed_, rows, qkv_, CUDA_R_16BF, 0.0f));
      for (size_t s = 0; s < segments.size(); ++s) {
        GpuCaches& all = static_cast<GpuCaches&>(*segments[s].caches);
        const GpuLayerCache& cache = (drafter ? all.drafter : all.target)[li];
        const int n = static_cast<int>(segments[s].tokens.size());
        const int position = segments[s].position;
        if (Pages(position + n) > cache.max_blocks) {
          return absl::OutOfRangeError(Cat("synthetic engine: sequence exceeds its KV capacity (",
                                           cache.max_blocks * kBlockSize, " positions)"));
        }
        const size_t row0 = static_cast<size_t>(first[s]);
        gpu::ScatterQkv(qkv_ + row0 * (qd + 2 * kvd), n, qd, kvd, position, cache.block_table,
                        kBlockSize, q_ + row0 * qd, cache.k, cache.v, stream_);
        kernels::DeviceAttentionArgs args;
        args.shape.q_heads = l.q_heads;
        args.shape.kv_heads = l.kv_heads;
        args.shape.head_dim = l.head_dim;
        args.shape.block_size = kBlockSize;
        args.shape.window = l.window;
        args.shape.dtype = kernels::DType::kBF16;
        args.num_seqs = 1;
        args.num_tokens = n;
        args.max_query_len = n;
        args.max_kv_len = position + n;
        args.max_blocks_per_seq = cache.max_blocks;
        args.query_start = meta_ + max_rows + 3 * s;
        args.seq_lens = meta_ + max_rows + 3 * s + 2;
        args.block_table = cache.block_table;
        args.q = q_ + row0 * qd;
        args.k_cache = cache.k;
        args.v_cache = cache.v;
        args.out = attn_ + row0 * qd;
        kernels::Result<kernels::DeviceAttentionPlan> plan =
            kernels::PlanDeviceAttention(kernels::Backend::kCuda, args, attention_);
        if (!plan.ok()) return AttentionError(plan.error());
        // One stream: consecutive launches reuse the workspace safely.
        kernels::Status launched = kernels::LaunchDeviceAttention(
            kernels::Backend::kCuda, args, *plan, stream_, workspace_.get(), workspace_.size());
        if (!launched.ok()) return AttentionError(launched.error());
        if (observer) {
          observer(
              AttentionEvent{drafter, static_cast<int>(li), l.kind, n, position + n, plan->info});
        }
      }
      RETURN_IF_ERROR(Gemm(lw.o, h, qd, attn_, rows, x_, CUDA_R_32F, 1.0f));  // x += W_o attn
      gpu::RmsNormToBf16(x_, rows, h, normed_, stream_);
      RETURN_IF_ERROR(
          Gemm(lw.gate_up, 2 * spec.intermediate, h, normed_, rows, gate_up_, CUDA_R_32F, 0.0f));
      gpu::GeluMul(gate_up_, rows, spec.intermediate, act_, stream_);
      RETURN_IF_ERROR(Gemm(lw.down, h, spec.intermediate, act_, rows, x_, CUDA_R_32F, 1.0f));
    }
    gpu::RmsNormToBf16(x_, rows, h, normed_, stream_);
    RETURN_IF_ERROR(Gemm(w.embed, spec.vocab, h, normed_, rows, logits_, CUDA_R_32F, 0.0f));
    gpu::ArgmaxRows(logits_, rows, spec.vocab, argmax_v_, argmax_i_, next_, stream_);
    SYN_CUDA(cudaGetLastError());
    std::vector<int32_t> flat(static_cast<size_t>(rows));
    SYN_CUDA(cudaMemcpyAsync(flat.data(), next_, flat.size() * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, stream_));
    SYN_CUDA(cudaStreamSynchronize(stream_));
    std::vector<std::vector<int32_t>> next(segments.size());
    for (size_t s = 0; s < segments.size(); ++s) {
      next[s].assign(flat.begin() + first[s], flat.begin() + first[s] + segments[s].tokens.size());
    }
    return next;
  }

 private:
  static absl::Status AttentionError(const kernels::KernelError& e) {
    return absl::InternalError(Cat("synthetic engine: attention failed: ", e.ToString()));
  }

  absl::Status MakeWeights(const ModelSpec& spec, uint64_t seed, GpuWeights& w) {
    Carver counter(nullptr);
    CarveWeights(spec, counter, w);
    ASSIGN_OR_RETURN(w.memory, DeviceMemory::Alloc(counter.used()));
    Carver carver(w.memory.get());
    CarveWeights(spec, carver, w);
    const size_t h = static_cast<size_t>(spec.hidden),
                 inter = static_cast<size_t>(spec.intermediate);
    auto fill = [&](uint16_t* m, size_t out_dim, size_t in_dim) {
      seed = MixSeeds(seed, out_dim * 31 + in_dim);
      gpu::FillUniformBf16(m, out_dim * in_dim, seed, 1.0f / std::sqrt(static_cast<float>(in_dim)),
                           stream_);
    };
    seed = MixSeeds(seed, 0xe3bed);
    gpu::FillUniformBf16(w.embed, static_cast<size_t>(spec.vocab) * h, seed, 1.0f, stream_);
    for (size_t i = 0; i < spec.layers.size(); ++i) {
      const LayerSpec& l = spec.layers[i];
      const GpuLayerWeights& lw = w.layers[i];
      fill(lw.qkv, QDim(l) + 2 * static_cast<size_t>(KvDim(l)), h);
      fill(lw.o, h, QDim(l));
      fill(lw.gate_up, 2 * inter, h);
      fill(lw.down, h, inter);
    }
    SYN_CUDA(cudaGetLastError());
    return absl::OkStatus();
  }

  // Scratch for the widest step of either model, and the attention workspace.
  // The widest step: every sequence of a full batch verifying.
  int MaxStepRows() const { return max_batch_ * MaxRows(); }

  absl::Status MakeScratch() {
    const size_t r = static_cast<size_t>(MaxStepRows());
    size_t hidden = 0, qkv = 0, qd = 0, inter = 0, vocab = 0, ws = 0;
    for (const ModelSpec* spec : {&preset_.target, &preset_.drafter}) {
      hidden = std::max<size_t>(hidden, spec->hidden);
      inter = std::max<size_t>(inter, spec->intermediate);
      vocab = std::max<size_t>(vocab, spec->vocab);
      for (const LayerSpec& l : spec->layers) {
        qkv = std::max<size_t>(qkv, QDim(l) + 2 * static_cast<size_t>(KvDim(l)));
        qd = std::max<size_t>(qd, QDim(l));
        kernels::AttentionShape shape;
        shape.q_heads = l.q_heads;
        shape.kv_heads = l.kv_heads;
        shape.head_dim = l.head_dim;
        // Attention runs per sequence: its workspace is for one sequence's rows.
        ws = std::max(ws, kernels::MaxDeviceWorkspaceBytes(shape, MaxRows(), attention_.config));
      }
    }
    for (int pass = 0; pass < 2; ++pass) {
      Carver carver(pass == 0 ? nullptr : scratch_.get());
      x_ = carver.Take<float>(r * hidden);
      normed_ = carver.Take<uint16_t>(r * std::max(hidden, inter));
      qkv_ = carver.Take<uint16_t>(r * qkv);
      q_ = carver.Take<uint16_t>(r * qd);
      attn_ = carver.Take<uint16_t>(r * qd);
      gate_up_ = carver.Take<float>(r * 2 * inter);
      act_ = carver.Take<uint16_t>(r * inter);
      logits_ = carver.Take<float>(r * vocab);
      next_ = carver.Take<int32_t>(r);
      argmax_v_ = carver.Take<float>(r * gpu::kArgmaxParts);
      argmax_i_ = carver.Take<int32_t>(r * gpu::kArgmaxParts);
      meta_ = carver.Take<int32_t>(r + 3 * static_cast<size_t>(max_batch_));
      if (pass == 0) {
        ASSIGN_OR_RETURN(scratch_, DeviceMemory::Alloc(carver.used()));
      }
    }
    ASSIGN_OR_RETURN(workspace_, DeviceMemory::Alloc(ws));
    return absl::OkStatus();
  }

  std::vector<GpuLayerCache> CarveCaches(const ModelSpec& spec, int capacity,
                                         Carver& carver) const {
    std::vector<GpuLayerCache> out;
    for (const LayerSpec& l : spec.layers) {
      GpuLayerCache c;
      c.max_blocks = Pages(capacity);
      c.pages = c.max_blocks;
      // A sliding layer keeps a ring just large enough for the window plus the widest step.
      if (l.window > 0) c.pages = std::min(c.pages, Pages(l.window + MaxRows()) + 2);
      const size_t elems = static_cast<size_t>(c.pages) * kBlockSize * KvDim(l);
      c.k = carver.Take<uint16_t>(elems);
      c.v = carver.Take<uint16_t>(elems);
      c.block_table = carver.Take<int32_t>(static_cast<size_t>(c.max_blocks));
      out.push_back(c);
    }
    return out;
  }

  // y[rows, out_dim] (= or +=) x[rows, in_dim] · W[out_dim, in_dim]^T, W and x bf16 row-major,
  // fp32 accumulation. In cuBLAS's column-major terms: y^T = W^T(stored) ^T · x^T.
  // A step of few rows takes the matrix-vector kernel (Projection::kGemv).
  absl::Status Gemm(const uint16_t* w, int out_dim, int in_dim, const uint16_t* x, int rows,
                    void* y, cudaDataType_t y_type, float beta) const {
    if (projection_ == Projection::kGemv && gpu::GemvFits(rows, in_dim, w, x)) {
      gpu::GemvBf16(w, out_dim, in_dim, x, rows, y, y_type == CUDA_R_16BF, beta != 0.0f, stream_);
      return absl::OkStatus();
    }
    const float alpha = 1.0f;
    SYN_CUBLAS(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, out_dim, rows, in_dim, &alpha, w,
                            CUDA_R_16BF, in_dim, x, CUDA_R_16BF, in_dim, &beta, y, y_type, out_dim,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return absl::OkStatus();
  }

  const Projection projection_;
  std::string device_name_;
  size_t target_bytes_ = 0, drafter_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  GpuWeights target_, drafter_;

  // Steps are serialized: scratch buffers, the stream and the cuBLAS handle are shared.
  mutable Mutex mu_;
  DeviceMemory scratch_, workspace_;
  float* x_ = nullptr;          // residual stream [rows, hidden]
  uint16_t* normed_ = nullptr;  // rmsnorm(x) (also the MLP activation's width)
  uint16_t* qkv_ = nullptr;
  uint16_t* q_ = nullptr;
  uint16_t* attn_ = nullptr;
  float* gate_up_ = nullptr;
  uint16_t* act_ = nullptr;
  float* logits_ = nullptr;
  int32_t* next_ = nullptr;
  float* argmax_v_ = nullptr;  // the argmax's per-slice winners [rows, kArgmaxParts]
  int32_t* argmax_i_ = nullptr;
  int32_t* meta_ =
      nullptr;  // tokens [MaxStepRows], then per sequence query_start [2], seq_lens [1]
};

}  // namespace

bool CudaModelCompiled() { return true; }

absl::StatusOr<std::unique_ptr<Model>> BuildCudaModel(const Preset& preset, uint64_t seed,
                                                      kernels::RunOptions attention, int max_batch,
                                                      Projection projection) {
  if (!kernels::BackendAvailable(kernels::Backend::kCuda)) {
    return absl::UnavailableError("synthetic engine: --device cuda: no CUDA device is present");
  }
  auto model = std::make_unique<CudaModel>(preset, attention, max_batch, projection);
  RETURN_IF_ERROR(model->Init(seed));
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace ladder::engines::synthetic
