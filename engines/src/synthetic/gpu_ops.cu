// Device kernels of the CUDA synthetic model (contracts in gpu_ops.h). They move a few MB per
// step against the ~60 GB of weights the projections read, so they are written for clarity,
// not speed.
#include <cuda_runtime.h>

#include <cfloat>

#include "gpu_ops.h"

namespace ladder::engines::synthetic::gpu {
namespace {

constexpr int kThreads = 256;

__device__ inline float Bf16ToFloat(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}
__device__ inline uint16_t FloatToBf16(float f) {  // round to nearest even
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

__device__ inline uint64_t SplitMix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

cudaStream_t S(void* stream) { return static_cast<cudaStream_t>(stream); }

int GridFor(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

__global__ void FillKernel(uint16_t* dst, size_t n, uint64_t seed, float scale) {
  const uint64_t base = SplitMix(seed);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = SplitMix(base ^ i);
    const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    dst[i] = FloatToBf16((u * 2.0f - 1.0f) * scale);
  }
}

__global__ void EmbedKernel(const uint16_t* embed, int vocab, int hidden, const int32_t* tokens,
                            float* x) {
  int t = tokens[blockIdx.x];
  t = t < 0 ? 0 : (t >= vocab ? vocab - 1 : t);
  const uint16_t* row = embed + static_cast<size_t>(t) * hidden;
  float* out = x + static_cast<size_t>(blockIdx.x) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[i] = Bf16ToFloat(row[i]);
}

// One block per row: sum of squares by a block reduction in shared memory.
__global__ void RmsNormKernel(const float* x, int hidden, uint16_t* out) {
  __shared__ float partial[kThreads];
  const float* row = x + static_cast<size_t>(blockIdx.x) * hidden;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) ss += row[i] * row[i];
  partial[threadIdx.x] = ss;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) partial[threadIdx.x] += partial[threadIdx.x + w];
    __syncthreads();
  }
  const float inv = rsqrtf(partial[0] / static_cast<float>(hidden) + 1e-6f);
  uint16_t* o = out + static_cast<size_t>(blockIdx.x) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) o[i] = FloatToBf16(row[i] * inv);
}

// Block (row): copies Q, then K and V of that row into their pages.
__global__ void ScatterQkvKernel(const uint16_t* qkv, int q_dim, int kv_dim, int position,
                                 const int32_t* table, int block_size, uint16_t* q,
                                 uint16_t* k_cache, uint16_t* v_cache) {
  const int r = blockIdx.x;
  const uint16_t* src = qkv + static_cast<size_t>(r) * (q_dim + 2 * kv_dim);
  for (int i = threadIdx.x; i < q_dim; i += blockDim.x)
    q[static_cast<size_t>(r) * q_dim + i] = src[i];
  const int pos = position + r;
  const size_t slot = static_cast<size_t>(table[pos / block_size]) * block_size + pos % block_size;
  for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    k_cache[slot * kv_dim + i] = src[q_dim + i];
    v_cache[slot * kv_dim + i] = src[q_dim + kv_dim + i];
  }
}

__global__ void GeluMulKernel(const float* gate_up, int rows, int inter, uint16_t* act) {
  const size_t n = static_cast<size_t>(rows) * inter;
  for (size_t j = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = j / inter, i = j % inter;
    const float g = gate_up[r * 2 * inter + i];
    const float u = gate_up[r * 2 * inter + inter + i];
    const float gelu = 0.5f * g * (1.0f + tanhf(0.7978845608f * (g + 0.044715f * g * g * g)));
    act[j] = FloatToBf16(gelu * u);
  }
}

// One block per row; ties go to the lowest index, so the result does not depend on the order
// threads finish in.
__global__ void ArgmaxKernel(const float* logits, int vocab, int32_t* next) {
  __shared__ float best_v[kThreads];
  __shared__ int best_i[kThreads];
  const float* row = logits + static_cast<size_t>(blockIdx.x) * vocab;
  float bv = -FLT_MAX;
  int bi = 0;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = row[i];
    if (v > bv) {  // strictly greater: keeps this thread's lowest index among ties
      bv = v;
      bi = i;
    }
  }
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) {
      const float ov = best_v[threadIdx.x + w];
      const int oi = best_i[threadIdx.x + w];
      if (ov > best_v[threadIdx.x] || (ov == best_v[threadIdx.x] && oi < best_i[threadIdx.x])) {
        best_v[threadIdx.x] = ov;
        best_i[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) next[blockIdx.x] = best_i[0];
}

}  // namespace

void FillUniformBf16(uint16_t* dst, size_t n, uint64_t seed, float scale, void* stream) {
  if (n == 0) return;
  FillKernel<<<GridFor(n), kThreads, 0, S(stream)>>>(dst, n, seed, scale);
}

void EmbedRows(const uint16_t* embed, int vocab, int hidden, const int32_t* tokens, int rows,
               float* x, void* stream) {
  EmbedKernel<<<rows, kThreads, 0, S(stream)>>>(embed, vocab, hidden, tokens, x);
}

void RmsNormToBf16(const float* x, int rows, int hidden, uint16_t* out, void* stream) {
  RmsNormKernel<<<rows, kThreads, 0, S(stream)>>>(x, hidden, out);
}

void ScatterQkv(const uint16_t* qkv, int rows, int q_dim, int kv_dim, int position,
                const int32_t* block_table, int block_size, uint16_t* q, uint16_t* k_cache,
                uint16_t* v_cache, void* stream) {
  ScatterQkvKernel<<<rows, kThreads, 0, S(stream)>>>(qkv, q_dim, kv_dim, position, block_table,
                                                     block_size, q, k_cache, v_cache);
}

void GeluMul(const float* gate_up, int rows, int inter, uint16_t* act, void* stream) {
  GeluMulKernel<<<GridFor(static_cast<size_t>(rows) * inter), kThreads, 0, S(stream)>>>(
      gate_up, rows, inter, act);
}

void ArgmaxRows(const float* logits, int rows, int vocab, int32_t* next, void* stream) {
  ArgmaxKernel<<<rows, kThreads, 0, S(stream)>>>(logits, vocab, next);
}

}  // namespace ladder::engines::synthetic::gpu
