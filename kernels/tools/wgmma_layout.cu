// Probe (issue 3): checks the shared-memory layouts a wgmma-based PV step of the head-512 team
// kernel would use, on one warpgroup: O^T[64 dims x 32 columns] = V^T[64 x 16 keys] P^T[16 x 32].
//   A = V^T, MN-major (dims contiguous), no swizzle: core matrix (dims 8c.., keys 8b..) at
//       (2c + b) * 128 B, key rows of 16 B inside: LBO (along K) 128, SBO (along M) 256.
//   A = V^T, MN-major, 128-byte swizzle (what a V stage stored as 64-dim panels would be: key
//       row k of a panel at k * 128 B, its 16-byte piece c at (c ^ k % 8) * 16; panels 1024-byte
//       aligned): tried with several LBO / SBO pairs, one line each; then a panel 256 bytes past
//       a 1024-byte boundary (where a padded K tile would leave it), the pieces swizzled by the
//       key row's absolute address bits 7-9 or by the key alone, with descriptor base offset
//       (bits 49-51) 0 or (address >> 7) & 7.
//   B = P^T, K-major (keys contiguous per column), no swizzle: core matrix (columns 8n..,
//       keys 8b..) at (2n + b) * 128 B, column rows of 16 B inside: LBO 128, SBO 256.
// Prints the largest error against a double reference, twice accumulated (scale-d 0 then 1).
// Build: nvcc -O2 -gencode arch=compute_90a,code=sm_90a -o wgmma_layout
// kernels/tools/wgmma_layout.cu
#include <cuda_bf16.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

// swizzle: 0 none, 1 = 128-byte (descriptor bits 62-63).
__device__ uint64_t Desc(const void* smem, uint32_t lbo, uint32_t sbo, uint64_t swizzle = 0,
                         uint64_t base = 0) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return (uint64_t{(a & 0x3FFFF) >> 4}) | (uint64_t{lbo >> 4} << 16) | (uint64_t{sbo >> 4} << 32) |
         (base << 49) | (swizzle << 62);
}

__device__ void Wgmma(float (&d)[16], uint64_t da, uint64_t db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db), "r"(accumulate));
}

// a_swizzled: A in the 128-byte-swizzled panel layout, described with a_lbo / a_sbo, at 2048
// bytes into its buffer (panel 1 of a stage; a_mode 0), or at 2048 + 256 bytes with the pieces
// swizzled by absolute address (a_mode 1) or by key (a_mode 2), descriptor base offset a_base;
// otherwise the no-swizzle layout, LBO 128 / SBO 256.
__global__ void Probe(const __nv_bfloat16* v, const __nv_bfloat16* p, float* out, int a_swizzled,
                      uint32_t a_lbo, uint32_t a_sbo, int a_mode,
                      uint32_t a_base) {  // v [16][64], p [16][32]
  __shared__ __align__(1024) __nv_bfloat16 sa[3 * 64 * 16], sb[32 * 16];
  const int t = threadIdx.x;
  __nv_bfloat16* a_tile = a_swizzled ? sa + 1024 + (a_mode > 0 ? 128 : 0) : sa;
  const uint32_t tile_addr = static_cast<uint32_t>(__cvta_generic_to_shared(a_tile));
  for (int i = t; i < 16 * 64; i += 128) {
    const int key = i / 64, dim = i % 64;
    const int phase = a_mode == 1 ? static_cast<int>(((tile_addr + key * 128u) >> 7) & 7) : key % 8;
    const int at = a_swizzled ? key * 64 + ((dim / 8) ^ phase) * 8 + dim % 8
                              : ((dim / 8 * 2 + key / 8) * 8 + key % 8) * 8 + dim % 8;
    a_tile[at] = v[i];
  }
  for (int i = t; i < 16 * 32; i += 128) {
    const int key = i / 32, col = i % 32;
    sb[((col / 8 * 2 + key / 8) * 8 + col % 8) * 8 + key % 8] = p[i];
  }
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  const uint64_t da = a_swizzled ? Desc(a_tile, a_lbo, a_sbo, 1, a_base) : Desc(a_tile, 128, 256);
  float d[16];
  for (float& x : d) x = 0.0f;
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  Wgmma(d, da, Desc(sb, 128, 256), 0);
  Wgmma(d, da, Desc(sb, 128, 256), 1);
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  const int w = t / 32, l = t % 32, g8 = l / 4, t4 = l % 4;
  for (int j = 0; j < 4; ++j)
    for (int x = 0; x < 4; ++x) {
      const int dim = 16 * w + g8 + (x >= 2 ? 8 : 0), col = 8 * j + 2 * t4 + (x & 1);
      out[dim * 32 + col] = d[4 * j + x];
    }
}

int main() {
  std::vector<__nv_bfloat16> v(16 * 64), p(16 * 32);
  std::vector<double> vf(v.size()), pf(p.size());
  uint32_t s = 12345;
  auto rnd = [&] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>((s >> 8) % 2001) / 1000.0f - 1.0f;
  };
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = __float2bfloat16(rnd()), vf[i] = __bfloat162float(v[i]);
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = __float2bfloat16(rnd()), pf[i] = __bfloat162float(p[i]);
  __nv_bfloat16 *dv, *dp;
  float* dout;
  cudaMalloc(&dv, v.size() * 2), cudaMalloc(&dp, p.size() * 2), cudaMalloc(&dout, 64 * 32 * 4);
  cudaMemcpy(dv, v.data(), v.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dp, p.data(), p.size() * 2, cudaMemcpyHostToDevice);
  auto run = [&](int swizzled, uint32_t lbo, uint32_t sbo, int mode = 0,
                 uint32_t base = 0) -> double {
    cudaMemset(dout, 0, 64 * 32 * 4);
    Probe<<<1, 128>>>(dv, dp, dout, swizzled, lbo, sbo, mode, base);
    std::vector<float> out(64 * 32);
    const cudaError_t e = cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return std::printf("cuda error: %s\n", cudaGetErrorString(e)), 1e30;
    double worst = 0.0;
    for (int dim = 0; dim < 64; ++dim)
      for (int col = 0; col < 32; ++col) {
        double ref = 0.0;
        for (int key = 0; key < 16; ++key) ref += vf[key * 64 + dim] * pf[key * 32 + col];
        worst = std::fmax(worst, std::fabs(2.0 * ref - out[dim * 32 + col]));
      }
    return worst;
  };
  const double plain = run(0, 128, 256);
  std::printf("wgmma m64n32k16 layout probe, no swizzle: max |error| %.3g (%s)\n", plain,
              plain < 1e-3 ? "layouts right" : "WRONG");
  bool swizzle_found = false;
  for (const auto [lbo, sbo] : {std::pair<uint32_t, uint32_t>{16, 1024},
                                {1024, 16},
                                {1024, 1024},
                                {2048, 1024},
                                {1024, 2048},
                                {128, 1024},
                                {1024, 128}}) {
    const double err = run(1, lbo, sbo);
    std::printf("  128-byte swizzle, LBO %4u SBO %4u: max |error| %.3g%s\n", lbo, sbo, err,
                err < 1e-3 ? "  right" : "");
    swizzle_found |= err < 1e-3;
  }
  for (int mode = 1; mode <= 2; ++mode)
    for (uint32_t base : {0u, 2u}) {
      const double err = run(1, 16, 1024, mode, base);
      std::printf(
          "  128-byte swizzle 256 B past 1024, pieces by %s, base offset %u: max |error| %.3g%s\n",
          mode == 1 ? "address" : "key", base, err, err < 1e-3 ? "  right" : "");
    }
  return plain < 1e-3 && swizzle_found ? 0 : 1;
}
