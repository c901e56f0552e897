// Read-bandwidth probe for issue 3: how fast can the H200 read 256 MiB (a) contiguously and
// (b) in the head-512 paged KV pattern of gemma4-31b-global (1 KB rows of one KV head at a 4 KB
// stride, 64 KB pages in a random order), with plain 16-byte loads and many in flight?
// The cudaMemcpy device-to-device ceiling (read + write bytes) is measured beside them.
//   nvcc -O3 -arch=sm_90 -o read_ceiling read_ceiling.cu && ./read_ceiling
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#define CK(x)                                             \
  do {                                                    \
    cudaError_t e = (x);                                  \
    if (e != cudaSuccess) {                               \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e)); \
      return 1;                                           \
    }                                                     \
  } while (0)

// Each block streams `rows_per_block` 1 KB rows; row r of block b is at row_off[b * rows_per_block
// + r].
__global__ void ReadRows(const uint4* base, const long long* row_off, int rows_per_block,
                         unsigned* sink) {
  unsigned acc = 0;
  const long long* my = row_off + static_cast<long long>(blockIdx.x) * rows_per_block;
  // 64 uint4 per 1 KB row; a 512-thread block covers 8 rows per step, 4 steps unrolled in flight.
  const int lane_row = threadIdx.x / 64, piece = threadIdx.x % 64;
  for (int r0 = 0; r0 < rows_per_block; r0 += 32) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldg(base + (my[r0 + u * 8 + lane_row] >> 4) + piece);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) sink[0] = acc;
}

int main() {
  const size_t bytes = size_t{256} << 20;
  const int rows = static_cast<int>(bytes / 1024);
  void *buf = nullptr, *dst = nullptr;
  unsigned* sink = nullptr;
  CK(cudaMalloc(&buf, bytes * 4));  // the whole cache of 4 heads (only one head is read in (b))
  CK(cudaMalloc(&dst, bytes));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(buf, 1, bytes * 4));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto time_us = [&](auto&& launch) {
    for (int i = 0; i < 50; ++i) launch();
    std::vector<float> t;
    for (int i = 0; i < 30; ++i) {
      cudaEventRecord(a);
      launch();
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const float copy_us =
      time_us([&] { cudaMemcpyAsync(dst, buf, bytes, cudaMemcpyDeviceToDevice); });
  std::printf("copy ceiling      %8.1f us  %7.1f GB/s (read+write)\n", copy_us,
              2.0 * bytes / copy_us / 1e3);
  // (a) contiguous rows; (b) the paged pattern: page p (16 tokens) of head h at page_perm[p] * 64
  // KB
  // + slot * 4 KB + h * 1 KB; 4 heads' blocks read their own head.
  std::vector<long long> contiguous(rows), paged(rows);
  for (int r = 0; r < rows; ++r) contiguous[r] = static_cast<long long>(r) * 1024;
  const int pages = rows / 16 / 4 * 4;  // rows of all 4 heads = rows; 16 slots per page
  std::vector<int> perm(rows / 16);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
  (void)pages;
  // rows are (head, token): the token range of each head is rows / 4 tokens.
  const int tokens = rows / 4;
  int i = 0;
  for (int h = 0; h < 4; ++h)
    for (int t = 0; t < tokens; ++t)
      paged[i++] = static_cast<long long>(perm[t / 16]) * 65536 + (t % 16) * 4096 + h * 1024;
  long long* d_off = nullptr;
  CK(cudaMalloc(&d_off, rows * sizeof(long long)));
  for (int blocks : {132, 264, 528, 1056}) {
    const int per = rows / blocks / 32 * 32;
    for (int which = 0; which < 2; ++which) {
      CK(cudaMemcpy(d_off, which ? paged.data() : contiguous.data(), rows * sizeof(long long),
                    cudaMemcpyHostToDevice));
      const float us = time_us(
          [&] { ReadRows<<<blocks, 512>>>(static_cast<const uint4*>(buf), d_off, per, sink); });
      const double moved = double(per) * blocks * 1024;
      std::printf("%-10s %5d blocks %8.1f us  %7.1f GB/s read  (%.1f%% of the copy ceiling)\n",
                  which ? "paged" : "contiguous", blocks, us, moved / us / 1e3,
                  100.0 * (moved / us) / (2.0 * bytes / copy_us));
    }
  }
  CK(cudaGetLastError());
  return 0;
}
