// The synthetic CUDA model's kernels (engines/src/synthetic/gpu_ops.h) against host references:
// the matrix-vector product (every row count it takes, widths that fill, underfill and overfill
// its batches of loads, fp32 and bf16 outputs, accumulation, bit-identical repeats), the
// two-stage argmax (ties, vocabularies that leave slices empty or short), RMSNorm and the Q/K/V
// scatter into paged caches. Labelled `gpu`; skips without a device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "synthetic/gpu_ops.h"

namespace ladder::engines::synthetic::gpu {
namespace {

uint16_t ToBf16(float f) {  // round to nearest even, as the device does
  uint32_t x;
  std::memcpy(&x, &f, 4);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
float FromBf16(uint16_t h) {
  const uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

bool HaveDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

template <typename T>
T* Upload(const std::vector<T>& host) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return d;
}
template <typename T>
std::vector<T> Download(const T* d, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

void CheckGemv(int out_dim, int in_dim) {
  SCOPED_TRACE(testing::Message() << "out_dim " << out_dim << " in_dim " << in_dim);
  // A stream of its own, as the model's (the kernel is launched as a programmatic dependent);
  // a blocking stream, so the synchronous copies on the legacy stream wait for it.
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> w(static_cast<size_t>(out_dim) * in_dim);
  std::vector<uint16_t> x(static_cast<size_t>(kGemvMaxRows) * in_dim);
  for (auto& e : w) e = ToBf16(u(rng));
  for (auto& e : x) e = ToBf16(u(rng));
  std::vector<float> y0(static_cast<size_t>(kGemvMaxRows) * out_dim);
  for (auto& e : y0) e = u(rng);
  uint16_t* dw = Upload(w);
  uint16_t* dx = Upload(x);
  float* dy = Upload(y0);
  uint16_t* dyh = Upload(std::vector<uint16_t>(y0.size(), 0));
  for (int rows = 1; rows <= kGemvMaxRows; ++rows) {
    ASSERT_TRUE(GemvFits(rows, in_dim, dw, dx));
    for (bool accumulate : {false, true}) {
      ASSERT_EQ(cudaMemcpy(dy, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
      GemvBf16(dw, out_dim, in_dim, dx, rows, dy, false, accumulate, stream);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> got = Download(dy, y0.size());
      for (int r = 0; r < rows; ++r)
        for (int o = 0; o < out_dim; ++o) {
          double ref = accumulate ? y0[static_cast<size_t>(r) * out_dim + o] : 0.0;
          for (int i = 0; i < in_dim; ++i)
            ref += static_cast<double>(FromBf16(w[static_cast<size_t>(o) * in_dim + i])) *
                   FromBf16(x[static_cast<size_t>(r) * in_dim + i]);
          ASSERT_NEAR(got[static_cast<size_t>(r) * out_dim + o], ref, 1e-3)
              << "rows " << rows << " row " << r << " output " << o << " accumulate " << accumulate;
        }
      // Rows past `rows` are untouched.
      for (size_t at = static_cast<size_t>(rows) * out_dim; at < y0.size(); ++at)
        ASSERT_EQ(got[at], y0[at]);
    }
    // bf16 output: the reference rounded once.
    GemvBf16(dw, out_dim, in_dim, dx, rows, dyh, true, false, stream);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint16_t> got = Download(dyh, y0.size());
    GemvBf16(dw, out_dim, in_dim, dx, rows, dy, false, false, stream);
    const std::vector<float> exact = Download(dy, y0.size());
    for (size_t at = 0; at < static_cast<size_t>(rows) * out_dim; ++at)
      ASSERT_EQ(got[at], ToBf16(exact[at])) << at;
  }
  // Repeats are bit-identical (a fixed summation order).
  GemvBf16(dw, out_dim, in_dim, dx, 3, dy, false, false, stream);
  const std::vector<float> first = Download(dy, y0.size());
  for (int k = 0; k < 5; ++k) {
    GemvBf16(dw, out_dim, in_dim, dx, 3, dy, false, false, stream);
    ASSERT_EQ(Download(dy, y0.size()), first);
  }
  EXPECT_FALSE(GemvFits(kGemvMaxRows + 1, in_dim, dw, dx));
  EXPECT_FALSE(GemvFits(0, in_dim, dw, dx));
  EXPECT_FALSE(GemvFits(1, in_dim + 4, dw, dx));
  EXPECT_FALSE(GemvFits(1, in_dim, dw + 1, dx));
  for (void* p : {static_cast<void*>(dw), static_cast<void*>(dx), static_cast<void*>(dy),
                  static_cast<void*>(dyh)})
    cudaFree(p);
  cudaStreamDestroy(stream);
}

TEST(SyntheticOpsGpu, GemvMatchesAHostReferenceForEveryRowCountAndOutput) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  // Pieces of 8 per output row: 1 (one lane), 137 (one partial batch of 8 x 32), 256 (exactly
  // one batch), 600 (two full batches and a partial one).
  for (int in_dim : {8, 1096, 2048, 4800}) CheckGemv(203, in_dim);
}

TEST(SyntheticOpsGpu, ArgmaxTakesTheLowestIndexAmongEqualMaxima) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  // 100: slices of one logit and 28 empty ones; 262144: gemma-4's vocabulary; 1000: slices of 8
  // with a short last one.
  for (int vocab : {100, 1000, 262144}) {
    SCOPED_TRACE(vocab);
    const int rows = 3;
    std::mt19937 rng(vocab);
    std::uniform_real_distribution<float> u(-5.0f, 5.0f);
    std::vector<float> logits(static_cast<size_t>(rows) * vocab);
    for (auto& e : logits) e = u(rng);
    // Row 0: a single maximum near the end. Row 1: the maximum three times, in different
    // slices. Row 2: every logit equal.
    logits[static_cast<size_t>(vocab) - 2] = 9.0f;
    for (int at : {vocab / 2, vocab / 3, vocab - 1}) logits[static_cast<size_t>(vocab) + at] = 7.5f;
    std::fill(logits.begin() + 2 * static_cast<ptrdiff_t>(vocab), logits.end(), 1.0f);
    float* dl = Upload(logits);
    float* dv = Upload(std::vector<float>(static_cast<size_t>(rows) * kArgmaxParts));
    int32_t* di = Upload(std::vector<int32_t>(static_cast<size_t>(rows) * kArgmaxParts));
    int32_t* dn = Upload(std::vector<int32_t>(rows, -1));
    ArgmaxRows(dl, rows, vocab, dv, di, dn, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(Download(dn, rows), (std::vector<int32_t>{vocab - 2, vocab / 3, 0}));
    for (void* p : {static_cast<void*>(dl), static_cast<void*>(dv), static_cast<void*>(di),
                    static_cast<void*>(dn)})
      cudaFree(p);
  }
}

TEST(SyntheticOpsGpu, RmsNormAndScatterMatchTheirDefinitions) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device";
  const int rows = 2, hidden = 5376;
  cudaStream_t stream = nullptr;  // (launched as programmatic dependents, as in the model)
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(rows) * hidden);
  for (auto& e : x) e = u(rng);
  float* dx = Upload(x);
  uint16_t* dn = Upload(std::vector<uint16_t>(x.size()));
  RmsNormToBf16(dx, rows, hidden, dn, stream);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> normed = Download(dn, x.size());
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < hidden; ++i)
      ss += static_cast<double>(x[r * hidden + i]) * x[r * hidden + i];
    const double inv = 1.0 / std::sqrt(ss / hidden + 1e-6);
    for (int i = 0; i < hidden; ++i)
      ASSERT_NEAR(FromBf16(normed[r * hidden + i]), x[r * hidden + i] * inv,
                  std::abs(x[r * hidden + i] * inv) / 128 + 1e-6)
          << r << " " << i;
  }
  // Scatter: rows 0-1 of a step at position 37 into pages of 16 through a shuffled table.
  const int q_dim = 96, kv_dim = 40, block_size = 16, position = 37, pages = 4;
  const std::vector<int32_t> table = {3, 0, 2, 1};
  std::vector<uint16_t> qkv(static_cast<size_t>(rows) * (q_dim + 2 * kv_dim));
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<uint16_t>(i + 1);
  uint16_t* dqkv = Upload(qkv);
  int32_t* dt = Upload(table);
  uint16_t* dq = Upload(std::vector<uint16_t>(static_cast<size_t>(rows) * q_dim));
  const size_t cache = static_cast<size_t>(pages) * block_size * kv_dim;
  uint16_t* dk = Upload(std::vector<uint16_t>(cache));
  uint16_t* dv = Upload(std::vector<uint16_t>(cache));
  ScatterQkv(dqkv, rows, q_dim, kv_dim, position, dt, block_size, dq, dk, dv, stream);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto q = Download(dq, static_cast<size_t>(rows) * q_dim);
  const auto k = Download(dk, cache), v = Download(dv, cache);
  size_t written = 0;
  for (int r = 0; r < rows; ++r) {
    const uint16_t* src = qkv.data() + static_cast<size_t>(r) * (q_dim + 2 * kv_dim);
    for (int i = 0; i < q_dim; ++i) ASSERT_EQ(q[r * q_dim + i], src[i]);
    const int pos = position + r;
    const size_t slot =
        static_cast<size_t>(table[pos / block_size]) * block_size + pos % block_size;
    for (int i = 0; i < kv_dim; ++i) {
      ASSERT_EQ(k[slot * kv_dim + i], src[q_dim + i]);
      ASSERT_EQ(v[slot * kv_dim + i], src[q_dim + kv_dim + i]);
    }
    written += kv_dim;
  }
  // Nothing else in the caches was touched.
  size_t nonzero = 0;
  for (size_t i = 0; i < cache; ++i) nonzero += (k[i] != 0) + (v[i] != 0);
  EXPECT_EQ(nonzero, 2 * written);
  for (void* p : {static_cast<void*>(dx), static_cast<void*>(dn), static_cast<void*>(dqkv),
                  static_cast<void*>(dt), static_cast<void*>(dq), static_cast<void*>(dk),
                  static_cast<void*>(dv)})
    cudaFree(p);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace ladder::engines::synthetic::gpu
