// The CUDA model's small device kernels (gpu_ops.cu): everything of a decode step that is not a
// projection (cuBLAS) or attention (ladder::kernels). No CUDA type appears here, so host code
// that includes it needs no GPU compiler. Every function only enqueues on `stream`
// (a cudaStream_t); errors are read by the caller with cudaGetLastError. bf16 tensors are raw
// 16-bit words; row-major throughout.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ladder::engines::synthetic::gpu {

// dst[i] = uniform in [-scale, scale), from a hash of (seed, i): the same values whatever the
// launch shape.
void FillUniformBf16(uint16_t* dst, size_t n, uint64_t seed, float scale, void* stream);

// x[r, :] = float(embed[clamp(tokens[r]), :]) for r < rows; tokens on the device.
void EmbedRows(const uint16_t* embed, int vocab, int hidden, const int32_t* tokens, int rows,
               float* x, void* stream);

// out[r, :] = bf16(x[r, :] / rms(x[r, :])) (RMSNorm without a learned scale).
void RmsNormToBf16(const float* x, int rows, int hidden, uint16_t* out, void* stream);

// Splits the fused QKV projection qkv[rows, q_dim + 2 * kv_dim] (bf16): Q rows into q[rows,
// q_dim] and K/V rows into the paged caches at positions position..position+rows-1, through
// block_table (device, one entry per page of block_size positions). Cache layout
// [pages, block_size, kv_dim] as ladder::kernels expects.
void ScatterQkv(const uint16_t* qkv, int rows, int q_dim, int kv_dim, int position,
                const int32_t* block_table, int block_size, uint16_t* q, uint16_t* k_cache,
                uint16_t* v_cache, void* stream);

// act[r, i] = bf16(gelu(gate_up[r, i]) * gate_up[r, inter + i]), gate_up fp32 [rows, 2*inter].
void GeluMul(const float* gate_up, int rows, int inter, uint16_t* act, void* stream);

// The matrix-vector product of a step with few rows: y[r, o] = x[r, :] · w[o, :] for r < rows,
// o < out_dim, added to y (accumulate) or stored; y fp32, or bf16 when y_is_bf16 (then stored).
// Each output is one warp's fp32 sum over in_dim in a fixed order (bit-identical repeats);
// w streams through once in 16-byte loads that bypass L1, so the step reads its weights at close
// to the copy bandwidth, where cuBLAS's GEMM is built for wide steps. Requires GemvFits.
inline constexpr int kGemvMaxRows = 4;
bool GemvFits(int rows, int in_dim, const void* w, const void* x);
void GemvBf16(const uint16_t* w, int out_dim, int in_dim, const uint16_t* x, int rows, void* y,
              bool y_is_bf16, bool accumulate, void* stream);

// next[r] = argmax over logits[r, 0..vocab) (the lowest index among equal maxima), in two
// launches: kArgmaxParts blocks per row over contiguous slices into part_v/part_i (rows x
// kArgmaxParts each, scratch), then one block per row over those.
inline constexpr int kArgmaxParts = 128;
void ArgmaxRows(const float* logits, int rows, int vocab, float* part_v, int32_t* part_i,
                int32_t* next, void* stream);

}  // namespace ladder::engines::synthetic::gpu
