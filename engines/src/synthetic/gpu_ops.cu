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

// Programmatic dependent launch (sm_90; no-ops elsewhere): a kernel launched with programmatic
// stream serialization may start before the kernel ahead of it ends, and must wait for it
// before reading what it wrote; a kernel that allows it lets its dependent be scheduled early.
__device__ inline void WaitForPriorGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ inline void AllowDependentLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launches `kernel` as a programmatic dependent of the kernel ahead of it in the stream: its
// launch overlaps that kernel's tail (a few us per launch, ~600 launches per decode step). Every
// kernel launched so calls WaitForPriorGrid before it reads global memory, so the chain stays
// in stream order. Errors surface at the caller's cudaGetLastError, as for <<<>>> launches.
template <class... Params, class... Args>
void LaunchDependent(void (*kernel)(Params...), dim3 grid, dim3 block, void* stream, Args... args) {
  cudaLaunchAttribute pdl{};
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = S(stream);
  cfg.attrs = &pdl;
  cfg.numAttrs = 1;
  (void)cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}

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

// One block of kNormThreads per row: each thread's share of the sum of squares, then warp
// butterflies and one warp over the warps' sums (a fixed order: bit-identical repeats). A block
// of 256 threads with a shared-memory tree took 7 us per row at hidden 5376 (H200, ncu), ~5 % of
// a batch-1 decode step over 121 calls.
constexpr int kNormThreads = 1024;
__global__ void __launch_bounds__(kNormThreads)
    RmsNormKernel(const float* x, int hidden, uint16_t* out) {
  __shared__ float warp_sums[kNormThreads / 32];
  WaitForPriorGrid();
  AllowDependentLaunch();  // the projection after it streams its weights meanwhile
  const float* row = x + static_cast<size_t>(blockIdx.x) * hidden;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) ss += row[i] * row[i];
  for (int m = 16; m > 0; m /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, m);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = warp_sums[threadIdx.x % 32];
  for (int m = 16; m > 0; m /= 2) total += __shfl_xor_sync(0xffffffffu, total, m);
  const float inv = rsqrtf(total / static_cast<float>(hidden) + 1e-6f);
  uint16_t* o = out + static_cast<size_t>(blockIdx.x) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) o[i] = FloatToBf16(row[i] * inv);
}

// Thread (blockIdx.x, threadIdx.x) of row blockIdx.y copies one element of the row's Q, K or V.
// (One block per row took 15 us at 16 384 elements, H200 ncu: a strided copy by 256 threads.)
__global__ void ScatterQkvKernel(const uint16_t* qkv, int q_dim, int kv_dim, int position,
                                 const int32_t* table, int block_size, uint16_t* q,
                                 uint16_t* k_cache, uint16_t* v_cache) {
  WaitForPriorGrid();
  AllowDependentLaunch();
  const int r = blockIdx.y;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int width = q_dim + 2 * kv_dim;
  if (i >= width) return;
  const uint16_t e = qkv[static_cast<size_t>(r) * width + i];
  if (i < q_dim) {
    q[static_cast<size_t>(r) * q_dim + i] = e;
    return;
  }
  const int pos = position + r;
  const size_t slot = static_cast<size_t>(table[pos / block_size]) * block_size + pos % block_size;
  const int j = i - q_dim;
  if (j < kv_dim) {
    k_cache[slot * kv_dim + j] = e;
  } else {
    v_cache[slot * kv_dim + (j - kv_dim)] = e;
  }
}

__global__ void GeluMulKernel(const float* gate_up, int rows, int inter, uint16_t* act) {
  WaitForPriorGrid();
  AllowDependentLaunch();  // the projection after it streams its weights meanwhile
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

// Reduces each thread's (value, index) over the block: the greatest value, and among equal
// values the lowest index, so the result does not depend on the order threads finish in.
// Thread 0 returns it.
__device__ void BlockBest(float bv, int bi, float* out_v, int* out_i) {
  __shared__ float best_v[kThreads];
  __shared__ int best_i[kThreads];
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
  if (threadIdx.x == 0) {
    *out_v = best_v[0];
    *out_i = best_i[0];
  }
}

// Stage 1: block (part, row) takes the part-th of kArgmaxParts contiguous slices of the row.
// (One block per row took 221 us over the 262 144 logits of gemma-4's vocabulary, H200 ncu.)
__global__ void ArgmaxPartsKernel(const float* logits, int vocab, float* part_v, int* part_i) {
  const int row = blockIdx.y, part = blockIdx.x;
  const int slice = (vocab + kArgmaxParts - 1) / kArgmaxParts;
  const int begin = min(vocab, part * slice), end = min(vocab, begin + slice);
  const float* values = logits + static_cast<size_t>(row) * vocab;
  float bv = -FLT_MAX;
  int bi = begin;
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (values[i] > bv) {  // strictly greater: keeps this thread's lowest index among ties
      bv = values[i];
      bi = i;
    }
  }
  const size_t at = static_cast<size_t>(row) * kArgmaxParts + part;
  BlockBest(bv, bi, &part_v[at], &part_i[at]);
}

// Stage 2: one block per row, thread p over part p's winner. (An empty slice, at the end of a
// small vocabulary, reports -FLT_MAX at index vocab: any real slice ties or beats it with a
// lower index.)
__global__ void ArgmaxMergeKernel(const float* part_v, const int* part_i, int32_t* next) {
  const size_t at = static_cast<size_t>(blockIdx.x) * kArgmaxParts + threadIdx.x;
  float best;
  int index;
  BlockBest(part_v[at], part_i[at], &best, &index);
  if (threadIdx.x == 0) next[blockIdx.x] = index;
}

// Warp o computes output o for every row: lanes stride over w's row in 16-byte pieces; x's rows (a
// few KB, shared by every warp) come through L1. The lane sums meet in a fixed butterfly.
template <int R>
__device__ inline void Dot8(uint4 wv, const uint16_t* x, int in_dim, int v, float (&acc)[R]) {
  const uint32_t wp[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const uint4 xv = __ldg(reinterpret_cast<const uint4*>(x + static_cast<size_t>(r) * in_dim) + v);
    const uint32_t xp[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      acc[r] = fmaf(__uint_as_float(wp[k] << 16), __uint_as_float(xp[k] << 16), acc[r]);
      acc[r] =
          fmaf(__uint_as_float(wp[k] & 0xffff0000u), __uint_as_float(xp[k] & 0xffff0000u), acc[r]);
    }
  }
}

__device__ inline uint4 LoadStreaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <int R>
__global__ void __launch_bounds__(kThreads)
    GemvKernel(const uint16_t* __restrict__ w, int out_dim, int in_dim,
               const uint16_t* __restrict__ x, void* y, bool y_is_bf16, bool accumulate) {
  const int o = static_cast<int>((blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x) / 32);
  const int lane = threadIdx.x % 32;
  // The norm, activation or scatter after this projection may be scheduled once every block of
  // it has started; each waits for it to end.
  AllowDependentLaunch();
  if (o >= out_dim) return;
  const uint4* row = reinterpret_cast<const uint4*>(w + static_cast<size_t>(o) * in_dim);
  const int vecs = in_dim / 8;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  // Four 16-byte loads in flight per lane before any arithmetic. The first four are issued
  // before waiting for the kernel that writes x: launched as a programmatic dependent (sm_90),
  // this kernel starts while that one still runs and its weight stream is already under way
  // when x is ready. (Eight in flight, with the last batch predicated, was slower: 56 against
  // 44 us for the 5376-row projections, H200 ncu.)
  int v = lane;
  const bool first_full = v + 96 < vecs;
  uint4 p0 = {}, p1 = {}, p2 = {}, p3 = {};
  if (first_full) {
    p0 = LoadStreaming(row + v);
    p1 = LoadStreaming(row + v + 32);
    p2 = LoadStreaming(row + v + 64);
    p3 = LoadStreaming(row + v + 96);
  }
  WaitForPriorGrid();
  if (first_full) {
    Dot8<R>(p0, x, in_dim, v, acc);
    Dot8<R>(p1, x, in_dim, v + 32, acc);
    Dot8<R>(p2, x, in_dim, v + 64, acc);
    Dot8<R>(p3, x, in_dim, v + 96, acc);
    v += 128;
  }
  for (; v + 96 < vecs; v += 128) {
    const uint4 w0 = LoadStreaming(row + v), w1 = LoadStreaming(row + v + 32),
                w2 = LoadStreaming(row + v + 64), w3 = LoadStreaming(row + v + 96);
    Dot8<R>(w0, x, in_dim, v, acc);
    Dot8<R>(w1, x, in_dim, v + 32, acc);
    Dot8<R>(w2, x, in_dim, v + 64, acc);
    Dot8<R>(w3, x, in_dim, v + 96, acc);
  }
  for (; v < vecs; v += 32) Dot8<R>(LoadStreaming(row + v), x, in_dim, v, acc);
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 16; m > 0; m /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], m);
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const size_t at = static_cast<size_t>(r) * out_dim + o;
      if (y_is_bf16) {
        static_cast<uint16_t*>(y)[at] = FloatToBf16(acc[r]);
      } else {
        float* yf = static_cast<float*>(y);
        yf[at] = accumulate ? yf[at] + acc[r] : acc[r];
      }
    }
  }
}

}  // namespace

bool GemvFits(int rows, int in_dim, const void* w, const void* x) {
  return rows >= 1 && rows <= kGemvMaxRows && in_dim > 0 && in_dim % 8 == 0 &&
         reinterpret_cast<uintptr_t>(w) % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

void GemvBf16(const uint16_t* w, int out_dim, int in_dim, const uint16_t* x, int rows, void* y,
              bool y_is_bf16, bool accumulate, void* stream) {
  constexpr int kWarps = kThreads / 32;
  const dim3 grid((out_dim + kWarps - 1) / kWarps), block(kThreads);
  switch (rows) {
    case 1:
      LaunchDependent(GemvKernel<1>, grid, block, stream, w, out_dim, in_dim, x, y, y_is_bf16,
                      accumulate);
      break;
    case 2:
      LaunchDependent(GemvKernel<2>, grid, block, stream, w, out_dim, in_dim, x, y, y_is_bf16,
                      accumulate);
      break;
    case 3:
      LaunchDependent(GemvKernel<3>, grid, block, stream, w, out_dim, in_dim, x, y, y_is_bf16,
                      accumulate);
      break;
    default:
      LaunchDependent(GemvKernel<4>, grid, block, stream, w, out_dim, in_dim, x, y, y_is_bf16,
                      accumulate);
      break;
  }
}

void FillUniformBf16(uint16_t* dst, size_t n, uint64_t seed, float scale, void* stream) {
  if (n == 0) return;
  FillKernel<<<GridFor(n), kThreads, 0, S(stream)>>>(dst, n, seed, scale);
}

void EmbedRows(const uint16_t* embed, int vocab, int hidden, const int32_t* tokens, int rows,
               float* x, void* stream) {
  EmbedKernel<<<rows, kThreads, 0, S(stream)>>>(embed, vocab, hidden, tokens, x);
}

void RmsNormToBf16(const float* x, int rows, int hidden, uint16_t* out, void* stream) {
  LaunchDependent(RmsNormKernel, dim3(rows), dim3(kNormThreads), stream, x, hidden, out);
}

void ScatterQkv(const uint16_t* qkv, int rows, int q_dim, int kv_dim, int position,
                const int32_t* block_table, int block_size, uint16_t* q, uint16_t* k_cache,
                uint16_t* v_cache, void* stream) {
  const dim3 grid((q_dim + 2 * kv_dim + kThreads - 1) / kThreads, rows);
  LaunchDependent(ScatterQkvKernel, grid, dim3(kThreads), stream, qkv, q_dim, kv_dim, position,
                  block_table, block_size, q, k_cache, v_cache);
}

void GeluMul(const float* gate_up, int rows, int inter, uint16_t* act, void* stream) {
  LaunchDependent(GeluMulKernel, dim3(GridFor(static_cast<size_t>(rows) * inter)), dim3(kThreads),
                  stream, gate_up, rows, inter, act);
}

void ArgmaxRows(const float* logits, int rows, int vocab, float* part_v, int32_t* part_i,
                int32_t* next, void* stream) {
  ArgmaxPartsKernel<<<dim3(kArgmaxParts, rows), kThreads, 0, S(stream)>>>(logits, vocab, part_v,
                                                                          part_i);
  static_assert(kArgmaxParts <= kThreads, "one thread per part");
  ArgmaxMergeKernel<<<rows, kArgmaxParts, 0, S(stream)>>>(part_v, part_i, next);
}

}  // namespace ladder::engines::synthetic::gpu
