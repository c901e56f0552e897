// Probe (issue 3): checks the shared-memory layouts a wgmma-based PV step of the head-512 team
// kernel would use, on one warpgroup: O^T[64 dims x 32 columns] = V^T[64 x 16 keys] P^T[16 x 32].
//   A = V^T, MN-major (dims contiguous), no swizzle: core matrix (dims 8c.., keys 8b..) at
//       (2c + b) * 128 B, key rows of 16 B inside: LBO (along K) 128, SBO (along M) 256.
//   B = P^T, K-major (keys contiguous per column), no swizzle: core matrix (columns 8n..,
//       keys 8b..) at (2n + b) * 128 B, column rows of 16 B inside: LBO 128, SBO 256.
// Prints the largest error against a double reference, twice accumulated (scale-d 0 then 1).
// Build: nvcc -O2 -arch=sm_90a -o wgmma_layout benchmarks/probes/wgmma_layout.cu
#include <cuda_bf16.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

__device__ uint64_t Desc(const void* smem, uint32_t lbo, uint32_t sbo) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return (uint64_t{(a & 0x3FFFF) >> 4}) | (uint64_t{lbo >> 4} << 16) | (uint64_t{sbo >> 4} << 32);
}

__device__ void Wgmma(float (&d)[16], uint64_t da, uint64_t db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(da), "l"(db), "r"(accumulate));
}

__global__ void Probe(const __nv_bfloat16* v, const __nv_bfloat16* p, float* out) {  // v [16][64], p [16][32]
  __shared__ __align__(128) __nv_bfloat16 sa[64 * 16], sb[32 * 16];
  const int t = threadIdx.x;
  for (int i = t; i < 16 * 64; i += 128) {
    const int key = i / 64, dim = i % 64;
    sa[((dim / 8 * 2 + key / 8) * 8 + key % 8) * 8 + dim % 8] = v[i];
  }
  for (int i = t; i < 16 * 32; i += 128) {
    const int key = i / 32, col = i % 32;
    sb[((col / 8 * 2 + key / 8) * 8 + col % 8) * 8 + key % 8] = p[i];
  }
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  float d[16];
  for (float& x : d) x = 0.0f;
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  Wgmma(d, Desc(sa, 128, 256), Desc(sb, 128, 256), 0);
  Wgmma(d, Desc(sa, 128, 256), Desc(sb, 128, 256), 1);
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
  auto rnd = [&] { s = s * 1664525u + 1013904223u; return static_cast<float>((s >> 8) % 2001) / 1000.0f - 1.0f; };
  for (size_t i = 0; i < v.size(); ++i) v[i] = __float2bfloat16(rnd()), vf[i] = __bfloat162float(v[i]);
  for (size_t i = 0; i < p.size(); ++i) p[i] = __float2bfloat16(rnd()), pf[i] = __bfloat162float(p[i]);
  __nv_bfloat16 *dv, *dp;
  float* dout;
  cudaMalloc(&dv, v.size() * 2), cudaMalloc(&dp, p.size() * 2), cudaMalloc(&dout, 64 * 32 * 4);
  cudaMemcpy(dv, v.data(), v.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dp, p.data(), p.size() * 2, cudaMemcpyHostToDevice);
  Probe<<<1, 128>>>(dv, dp, dout);
  std::vector<float> out(64 * 32);
  const cudaError_t e = cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return std::printf("cuda error: %s\n", cudaGetErrorString(e)), 1;
  double worst = 0.0;
  for (int dim = 0; dim < 64; ++dim)
    for (int col = 0; col < 32; ++col) {
      double ref = 0.0;
      for (int key = 0; key < 16; ++key) ref += vf[key * 64 + dim] * pf[key * 32 + col];
      worst = std::fmax(worst, std::fabs(2.0 * ref - out[dim * 32 + col]));
    }
  std::printf("wgmma m64n32k16 layout probe: max |error| %.3g (%s)\n", worst, worst < 1e-3 ? "layouts right" : "WRONG");
  return worst < 1e-3 ? 0 : 1;
}
