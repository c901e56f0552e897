// Paged-read probe (issue 18): the copy structure of the generic attention kernel with no
// arithmetic, so the share of the copy ceiling it reaches is what the kernel's loads alone allow
// on a given K/V layout. Each work group (KV heads hg * hpb ..+hpb, segment) streams the K and V
// rows of its keys in tiles of 32 KB per K+V through a ring of shared-memory stages by 16-byte
// cp.async, one commit group per tile, ST - 1 tiles in flight, and a barrier per tile: the
// generic kernel's loop with the scores and the P V left out.
// Layouts: "paged" is ladder's (and vLLM's) cache: [page][16 slots][kv heads][head dim], pages
// in a shuffled order; "per-head" is the contiguous [kv heads][keys][head dim] that PyTorch's
// SDPA backends read in kernels/tools/torch_sdpa.py.
//   nvcc -O3 -std=c++17 -arch=sm_90 -o paged_read paged_read.cu && ./paged_read
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

constexpr int kThreads = 128, kPage = 16, kTileBytes = 16384;  // K (or V) bytes of one tile

struct Geometry {
  int kv_heads, row_bytes, heads_per_group, keys, segments, stages;
  bool paged;
};

__device__ inline void CopyAsync16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}

// Keys [lo, hi) of this segment, tiles of kTileBytes / (hpb * row_bytes) keys.
__global__ void __launch_bounds__(kThreads)
    StreamTiles(const char* k, const char* v, const int* page_of, Geometry g) {
  extern __shared__ __align__(16) char smem[];
  const int hg = blockIdx.x % (g.kv_heads / g.heads_per_group);
  const int seg = blockIdx.x / (g.kv_heads / g.heads_per_group);
  const int group_bytes = g.heads_per_group * g.row_bytes;  // contiguous in the paged layout
  const int tile_keys = kTileBytes / group_bytes;
  const int tiles = g.keys / tile_keys, per = (tiles + g.segments - 1) / g.segments;
  const int tb = min(tiles, seg * per), te = min(tiles, tb + per);
  const int chunks_per_key = group_bytes / 16;
  auto load = [&](int t, int stage) {
    char* ks = smem + static_cast<size_t>(stage) * 2 * kTileBytes;
    char* vs = ks + kTileBytes;
    for (int c = threadIdx.x; c < kTileBytes / 16; c += kThreads) {
      const int key = t * tile_keys + c / chunks_per_key, byte = (c % chunks_per_key) * 16;
      size_t off;
      if (g.paged) {
        off = ((static_cast<size_t>(page_of[key / kPage]) * kPage + key % kPage) * g.kv_heads +
               hg * g.heads_per_group) *
                  g.row_bytes +
              byte;
      } else {  // per head: the group's heads one after another, each [keys][row]
        const int h = hg * g.heads_per_group + byte / g.row_bytes;
        off = (static_cast<size_t>(h) * g.keys + key) * g.row_bytes + byte % g.row_bytes;
      }
      CopyAsync16(ks + c * 16, k + off);
      CopyAsync16(vs + c * 16, v + off);
    }
  };
  for (int s = 0; s < g.stages - 1; ++s) {
    if (tb + s < te) load(tb + s, s);
    asm volatile("cp.async.commit_group;\n");
  }
  int stage = g.stages - 1;
  for (int t = tb; t < te; ++t) {
    // wait_group takes an immediate: the stage counts this probe sweeps
    if (g.stages == 2)
      asm volatile("cp.async.wait_group 0;\n");
    else if (g.stages == 3)
      asm volatile("cp.async.wait_group 1;\n");
    else
      asm volatile("cp.async.wait_group 2;\n");
    __syncthreads();
    if (t + g.stages - 1 < te) load(t + g.stages - 1, stage);
    asm volatile("cp.async.commit_group;\n");
    stage = stage + 1 == g.stages ? 0 : stage + 1;
  }
}

int main() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  auto time_us = [&](auto&& launch) {
    for (int i = 0; i < 100; ++i) launch();
    std::vector<float> t;
    for (int i = 0; i < 30; ++i) {
      cudaEventRecord(a);
      for (int r = 0; r < 10; ++r) launch();
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      t.push_back(ms * 100);  // per launch, us
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const size_t copy_bytes = size_t{512} << 20;
  void *src = nullptr, *dst = nullptr;
  CK(cudaMalloc(&src, copy_bytes));
  CK(cudaMalloc(&dst, copy_bytes));
  const float copy_us =
      time_us([&] { cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice); });
  const double ceiling = 2.0 * copy_bytes / copy_us / 1e3;  // GB/s
  std::printf("copy ceiling %.0f GB/s (read + write), %d SMs\n", ceiling, sms);
  std::printf("%-22s %-8s %3s %5s %6s %4s %4s %9s %7s\n", "shape", "layout", "hpb", "keys",
              "groups", "segs", "ST", "us", "%copy");
  struct Shape {
    const char* name;
    int kv_heads, row_bytes;
  };
  const Shape shapes[] = {{"llama-70b (8 x 128)", 8, 256},
                          {"dense-256 (16 x 256)", 16, 512},
                          {"global-tp2 (2 x 512)", 2, 1024}};
  const int max_keys = 65536;
  const size_t max_bytes = size_t{max_keys} * 16 * 512;  // the largest cache: 16 heads x 512 B
  char *k = nullptr, *v = nullptr;
  int* page_of = nullptr;
  CK(cudaMalloc(&k, max_bytes));
  CK(cudaMalloc(&v, max_bytes));
  CK(cudaMemset(k, 1, max_bytes));
  CK(cudaMemset(v, 2, max_bytes));
  std::vector<int> perm(max_keys / kPage);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
  CK(cudaMalloc(&page_of, perm.size() * sizeof(int)));
  CK(cudaMemcpy(page_of, perm.data(), perm.size() * sizeof(int), cudaMemcpyHostToDevice));
  for (const Shape& s : shapes)
    for (int keys : {8192, 32768, 65536})
      for (int paged = 1; paged >= 0; --paged)
        for (int hpb : {1, 2})
          for (int stages : {2, 3, 4}) {
            if (hpb > s.kv_heads || (!paged && hpb > 1)) continue;
            Geometry g{s.kv_heads, s.row_bytes, hpb, keys, 0, stages, paged == 1};
            const int groups = s.kv_heads / hpb;
            // The work groups per SM the generic kernel runs (two of ~85 KB): stages beyond two
            // take one per SM unless they fit twice.
            const size_t smem = std::max<size_t>(size_t{2} * stages * kTileBytes, 86 * 1024);
            CK(cudaFuncSetAttribute(StreamTiles, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
            int per_sm = 0;
            CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, StreamTiles, kThreads, smem));
            g.segments = std::max(1, per_sm * sms / groups);
            const float us = time_us(
                [&] { StreamTiles<<<groups * g.segments, kThreads, smem>>>(k, v, page_of, g); });
            const double moved = 2.0 * keys * s.kv_heads * s.row_bytes;
            std::printf("%-22s %-8s %3d %5d %6d %4d %4d %9.2f %6.1f%%\n", s.name,
                        paged ? "paged" : "per-head", hpb, keys, groups, g.segments, stages, us,
                        100.0 * moved / us / 1e3 / ceiling);
          }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  return 0;
}
