// The thin portability layer: one kernel source for CUDA (nvcc) and HIP (hipcc).
//
// Host side: `rt::` wraps the handful of runtime calls the backend uses.
// Device side: cp.async / ldmatrix / mma.sync where the target has them (NVIDIA sm_80+),
// plain loads and scalar FMA elsewhere. Nothing here assumes a warp size: the scalar path uses
// no warp-level operation at all, and the matrix path exists only on NVIDIA targets, where a
// warp is 32 lanes by definition (kMmaWarp). The host reads warpSize from the device.
#pragma once

#include <cstdint>

#if defined(LADDER_KERNELS_HIP)
#include <hip/hip_runtime.h>
#else
#include <cuda_runtime.h>
#endif

namespace ladder::kernels::gpu::rt {

#if defined(LADDER_KERNELS_HIP)
using Error = hipError_t;
using Event = hipEvent_t;
using Stream = hipStream_t;
using DeviceProp = hipDeviceProp_t;
constexpr Error kSuccess = hipSuccess;
inline const char* ErrorString(Error e) { return hipGetErrorString(e); }
inline Error GetLastError() { return hipGetLastError(); }
inline Error Malloc(void** p, size_t n) { return hipMalloc(p, n); }
inline Error Free(void* p) { return hipFree(p); }
inline Error CopyH2D(void* d, const void* s, size_t n) {
  return hipMemcpy(d, s, n, hipMemcpyHostToDevice);
}
inline Error CopyD2H(void* d, const void* s, size_t n) {
  return hipMemcpy(d, s, n, hipMemcpyDeviceToHost);
}
inline Error CopyD2DAsync(void* d, const void* s, size_t n) {
  return hipMemcpyAsync(d, s, n, hipMemcpyDeviceToDevice, 0);
}
inline Error MemsetAsync(void* d, int v, size_t n) { return hipMemsetAsync(d, v, n, 0); }
inline Error Sync() { return hipDeviceSynchronize(); }
inline Error DeviceCount(int* n) { return hipGetDeviceCount(n); }
inline Error GetDevice(int* d) { return hipGetDevice(d); }
inline Error ComputeMajor(int* major, int dev) {
  return hipDeviceGetAttribute(major, hipDeviceAttributeComputeCapabilityMajor, dev);
}
inline Error Props(DeviceProp* p, int dev) { return hipGetDeviceProperties(p, dev); }
inline Error EventCreate(Event* e) { return hipEventCreate(e); }
inline Error EventDestroy(Event e) { return hipEventDestroy(e); }
inline Error EventRecord(Event e) { return hipEventRecord(e, 0); }
inline Error EventSync(Event e) { return hipEventSynchronize(e); }
inline Error EventMs(float* ms, Event a, Event b) { return hipEventElapsedTime(ms, a, b); }
// Streams and graphs (the bench's graph timing).
using Graph = hipGraph_t;
using GraphExec = hipGraphExec_t;
inline Error StreamCreate(Stream* s) { return hipStreamCreateWithFlags(s, hipStreamNonBlocking); }
inline Error StreamDestroy(Stream s) { return hipStreamDestroy(s); }
inline Error StreamSync(Stream s) { return hipStreamSynchronize(s); }
inline Error EventRecordOn(Event e, Stream s) { return hipEventRecord(e, s); }
inline Error BeginCapture(Stream s) {
  return hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal);
}
inline Error EndCapture(Stream s, Graph* g) { return hipStreamEndCapture(s, g); }
inline Error GraphInstantiate(GraphExec* e, Graph g) {
  return hipGraphInstantiate(e, g, nullptr, nullptr, 0);
}
inline Error GraphLaunch(GraphExec e, Stream s) { return hipGraphLaunch(e, s); }
inline Error GraphDestroy(Graph g) { return hipGraphDestroy(g); }
inline Error GraphExecDestroy(GraphExec e) { return hipGraphExecDestroy(e); }
template <typename F>
inline Error SetMaxDynamicSmem(F* kernel, int bytes) {
  return hipFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                             hipFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
template <typename F>
inline Error Occupancy(int* blocks, F* kernel, int threads, size_t smem) {
  return hipOccupancyMaxActiveBlocksPerMultiprocessor(blocks, reinterpret_cast<const void*>(kernel),
                                                      threads, smem);
}
#else
using Error = cudaError_t;
using Event = cudaEvent_t;
using Stream = cudaStream_t;
using DeviceProp = cudaDeviceProp;
constexpr Error kSuccess = cudaSuccess;
inline const char* ErrorString(Error e) { return cudaGetErrorString(e); }
inline Error GetLastError() { return cudaGetLastError(); }
inline Error Malloc(void** p, size_t n) { return cudaMalloc(p, n); }
inline Error Free(void* p) { return cudaFree(p); }
inline Error CopyH2D(void* d, const void* s, size_t n) {
  return cudaMemcpy(d, s, n, cudaMemcpyHostToDevice);
}
inline Error CopyD2H(void* d, const void* s, size_t n) {
  return cudaMemcpy(d, s, n, cudaMemcpyDeviceToHost);
}
inline Error CopyD2DAsync(void* d, const void* s, size_t n) {
  return cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, 0);
}
inline Error MemsetAsync(void* d, int v, size_t n) { return cudaMemsetAsync(d, v, n, 0); }
inline Error Sync() { return cudaDeviceSynchronize(); }
inline Error DeviceCount(int* n) { return cudaGetDeviceCount(n); }
inline Error GetDevice(int* d) { return cudaGetDevice(d); }
inline Error ComputeMajor(int* major, int dev) {
  return cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, dev);
}
inline Error Props(DeviceProp* p, int dev) { return cudaGetDeviceProperties(p, dev); }
inline Error EventCreate(Event* e) { return cudaEventCreate(e); }
inline Error EventDestroy(Event e) { return cudaEventDestroy(e); }
inline Error EventRecord(Event e) { return cudaEventRecord(e, 0); }
inline Error EventSync(Event e) { return cudaEventSynchronize(e); }
inline Error EventMs(float* ms, Event a, Event b) { return cudaEventElapsedTime(ms, a, b); }
// Streams and graphs (the bench's graph timing).
using Graph = cudaGraph_t;
using GraphExec = cudaGraphExec_t;
inline Error StreamCreate(Stream* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }
inline Error StreamDestroy(Stream s) { return cudaStreamDestroy(s); }
inline Error StreamSync(Stream s) { return cudaStreamSynchronize(s); }
inline Error EventRecordOn(Event e, Stream s) { return cudaEventRecord(e, s); }
inline Error BeginCapture(Stream s) {
  return cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
}
inline Error EndCapture(Stream s, Graph* g) { return cudaStreamEndCapture(s, g); }
inline Error GraphInstantiate(GraphExec* e, Graph g) { return cudaGraphInstantiate(e, g, 0); }
inline Error GraphLaunch(GraphExec e, Stream s) { return cudaGraphLaunch(e, s); }
inline Error GraphDestroy(Graph g) { return cudaGraphDestroy(g); }
inline Error GraphExecDestroy(GraphExec e) { return cudaGraphExecDestroy(e); }
template <typename F>
inline Error SetMaxDynamicSmem(F* kernel, int bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
template <typename F>
inline Error Occupancy(int* blocks, F* kernel, int threads, size_t smem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, threads, smem);
}
#endif

}  // namespace ladder::kernels::gpu::rt

// ---------------------------------------------------------------------------------------------
// Device side

// Matrix instructions (mma.sync m16n8k16, ldmatrix, cp.async): NVIDIA sm_80 and newer.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(LADDER_KERNELS_HIP)
#define LADDER_DEVICE_HAS_MMA 1
#else
#define LADDER_DEVICE_HAS_MMA 0
#endif

namespace ladder::kernels::gpu::dev {

// Lanes of an NVIDIA warp: used only inside LADDER_DEVICE_HAS_MMA code, whose fragment layouts
// are defined for exactly 32 lanes.
constexpr int kMmaWarp = 32;

struct alignas(16) Vec16 {
  uint32_t x, y, z, w;
};

// Copies 16 bytes global -> shared, or writes 16 zero bytes when !pred (then src is not read).
__device__ inline void CopyAsync16(void* smem, const void* gmem, bool pred) {
#if LADDER_DEVICE_HAS_MMA
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
#else
  Vec16 v{0, 0, 0, 0};
  if (pred) v = *static_cast<const Vec16*>(gmem);
  *static_cast<Vec16*>(smem) = v;
#endif
}
// The L2 policy of a K/V stream's copies: evict first (a stream read once, larger than L2, so
// that what else the call writes stays), or leave the lines' priority as it is (no hint).
__device__ inline unsigned long long L2StreamPolicy(bool evict_first) {
#if LADDER_DEVICE_HAS_MMA
  unsigned long long policy;
  if (evict_first)
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  else
    asm volatile("createpolicy.fractional.L2::evict_unchanged.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
#else
  (void)evict_first;
  return 0;
#endif
}
// CopyAsync16 under an L2 cache policy (L2StreamPolicy).
__device__ inline void CopyAsync16Hinted(void* smem, const void* gmem, bool pred,
                                         unsigned long long policy) {
#if LADDER_DEVICE_HAS_MMA
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(s),
               "l"(gmem), "r"(n), "l"(policy));
#else
  (void)policy;
  CopyAsync16(smem, gmem, pred);
#endif
}
// 4-byte variant (block-table entries): cp.async.ca, the only form that takes 4 bytes.
__device__ inline void CopyAsync4(void* smem, const void* gmem) {
#if LADDER_DEVICE_HAS_MMA
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem));
#else
  *static_cast<int*>(smem) = *static_cast<const int*>(gmem);
#endif
}
// Nanosecond clock shared by all SMs (the bench's stream hold).
__device__ inline unsigned long long GlobalTimerNs() {
#if defined(LADDER_KERNELS_HIP)
  return static_cast<unsigned long long>(
      __clock64());  // cycles, not ns (unused: HIP times without a hold)
#else
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}
// The multiprocessor this thread runs on, and its cycle counter (not synchronised between
// multiprocessors): where a timeline record was taken, and its durations at cycle resolution.
__device__ inline unsigned SmId() {
#if defined(LADDER_KERNELS_HIP)
  return static_cast<unsigned>(__smid());
#else
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
#endif
}
__device__ inline unsigned long long SmCycles() {
#if defined(LADDER_KERNELS_HIP)
  return static_cast<unsigned long long>(__clock64());
#else
  return static_cast<unsigned long long>(clock64());
#endif
}
// Loads through L2, past this SM's L1 (data another SM wrote during this kernel).
template <class T>
__device__ inline T LoadL2(const T* p) {
#if defined(LADDER_KERNELS_HIP)
  return *p;
#else
  return __ldcg(p);
#endif
}
// Drops a 128-byte line from L2 without writing it back (its contents become undefined): for
// scratch that has been read for the last time. A no-op where PTX's discard does not exist.
__device__ inline void DiscardL2Line(const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(LADDER_KERNELS_HIP)
  asm volatile("discard.global.L2 [%0], 128;\n" ::"l"(p) : "memory");
#else
  (void)p;
#endif
}
// Programmatic dependent launch (sm_90): a kernel launched with programmatic stream
// serialization may start before the kernel ahead of it in the stream has finished; it must call
// WaitForPriorGrid before reading that kernel's output. A no-op everywhere else (and for a
// normally launched kernel).
__device__ inline void WaitForPriorGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(LADDER_KERNELS_HIP)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
// Lets the dependent grid be scheduled as soon as SMs free up (before this grid ends).
__device__ inline void AllowDependentLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(LADDER_KERNELS_HIP)
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// Thread block clusters (sm_90): a barrier over every thread of the cluster (all must reach it,
// whole warps at once) that publishes each work group's shared-memory writes to the others, and
// loads from another work group's shared memory (distributed shared memory). Elsewhere the
// kernels that use them are never launched, and these trap.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(LADDER_KERNELS_HIP)
#define LADDER_DEVICE_HAS_CLUSTER 1
#else
#define LADDER_DEVICE_HAS_CLUSTER 0
#endif
// Where a kernel that needs a feature is compiled without it: never launched there.
#if defined(LADDER_KERNELS_HIP)
#define LADDER_DEVICE_TRAP() __builtin_trap()
#else
#define LADDER_DEVICE_TRAP() __trap()
#endif
__device__ inline void ClusterSync() {
#if LADDER_DEVICE_HAS_CLUSTER
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
#else
  LADDER_DEVICE_TRAP();
#endif
}
// The cluster barrier without the release: it orders no memory, so it costs no fence. For the
// last barrier of a cluster merge, which only keeps each work group's shared memory alive until
// every other has read it: a thread arrives after its loads' values are in registers, and its
// global stores need not have landed. (The release of ClusterSync compiles to MEMBAR.ALL.GPU,
// which waits for them: ptxas 13.0, sm_90a.)
__device__ inline void ClusterSyncRelaxed() {
#if LADDER_DEVICE_HAS_CLUSTER
  asm volatile(
      "barrier.cluster.arrive.relaxed.aligned;\n"
      "barrier.cluster.wait.aligned;\n" ::
          : "memory");
#else
  LADDER_DEVICE_TRAP();
#endif
}
// The address of `p` (this work group's shared memory) in the work group of cluster rank `rank`.
__device__ inline uint32_t ClusterSharedAddress(const void* p, unsigned rank) {
#if LADDER_DEVICE_HAS_CLUSTER
  const uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
#else
  (void)p, (void)rank;
  return 0;
#endif
}
__device__ inline float LoadClusterShared(uint32_t addr) {
  float v = 0.0f;
#if LADDER_DEVICE_HAS_CLUSTER
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr) : "memory");
#else
  (void)addr;
#endif
  return v;
}
__device__ inline float4 LoadClusterShared4(uint32_t addr) {
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#if LADDER_DEVICE_HAS_CLUSTER
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
#else
  (void)addr;
#endif
  return v;
}
// Bulk copies global -> shared that complete on a shared-memory mbarrier (sm_90; elsewhere
// the kernels that use them are never launched, and these trap). A barrier with one expected
// arrival: the issuing thread arrives with the byte count, the copies count the bytes down,
// and waiters test the phase's parity.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(LADDER_KERNELS_HIP)
#define LADDER_DEVICE_HAS_BULK 1
#else
#define LADDER_DEVICE_HAS_BULK 0
#endif
__device__ inline void MbarrierInit(unsigned long long* bar, unsigned count) {
#if LADDER_DEVICE_HAS_BULK
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(b), "r"(count) : "memory");
#else
  (void)bar, (void)count;
  LADDER_DEVICE_TRAP();
#endif
}
// After the initialisations, before any thread or copy uses the barriers (with a barrier).
__device__ inline void MbarrierInitFence() {
#if LADDER_DEVICE_HAS_BULK
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ inline void MbarrierArriveExpectTx(unsigned long long* bar, unsigned bytes) {
#if LADDER_DEVICE_HAS_BULK
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes)
               : "memory");
#else
  (void)bar, (void)bytes;
  LADDER_DEVICE_TRAP();
#endif
}
// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to this work group's
// shared memory under an L2 cache policy (L2StreamPolicy), counted down on `bar`.
__device__ inline void BulkCopyToShared(void* smem, const void* gmem, unsigned bytes,
                                        unsigned long long* bar, unsigned long long policy) {
#if LADDER_DEVICE_HAS_BULK
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], "
      "[%1], %2, [%3], %4;\n" ::"r"(s),
      "l"(gmem), "r"(bytes), "r"(b), "l"(policy)
      : "memory");
#else
  (void)smem, (void)gmem, (void)bytes, (void)bar, (void)policy;
  LADDER_DEVICE_TRAP();
#endif
}
// Waits until the barrier's phase with this parity has completed.
__device__ inline void MbarrierWait(unsigned long long* bar, unsigned parity) {
#if LADDER_DEVICE_HAS_BULK
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n .reg .pred done;\n LADDER_MBAR_WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra LADDER_MBAR_WAIT;\n}\n" ::"r"(b),
      "r"(parity)
      : "memory");
#else
  (void)bar, (void)parity;
  LADDER_DEVICE_TRAP();
#endif
}
__device__ inline void CopyAsyncCommit() {
#if LADDER_DEVICE_HAS_MMA
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ inline void CopyAsyncWait() {
#if LADDER_DEVICE_HAS_MMA
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Butterfly reductions over groups of kWidth consecutive lanes (kWidth a power of two that
// divides the warp/wave size: true for kWidth <= 32 on 32- and 64-lane targets). Every lane
// of a group ends with the same bits (x+y == y+x exactly), so the result is deterministic.
__device__ inline float ShflXor(float v, int mask) {
#if defined(LADDER_KERNELS_HIP)
  return __shfl_xor(v, mask);
#else
  return __shfl_xor_sync(0xffffffffu, v, mask);
#endif
}
template <int kWidth>
__device__ inline float GroupMax(float v) {
#pragma unroll
  for (int o = kWidth / 2; o > 0; o /= 2) v = fmaxf(v, ShflXor(v, o));
  return v;
}
template <int kWidth>
__device__ inline float GroupSum(float v) {
#pragma unroll
  for (int o = kWidth / 2; o > 0; o /= 2) v += ShflXor(v, o);
  return v;
}

// Butterfly reductions over the lanes that differ in the bits kFirst .. kLast (powers of two):
// e.g. <4, 16> reduces across the 8 rows of an MMA fragment. Every lane ends with the same bits.
template <int kFirst, int kLast>
__device__ inline float XorMax(float v) {
#pragma unroll
  for (int o = kFirst; o <= kLast; o *= 2) v = fmaxf(v, ShflXor(v, o));
  return v;
}
template <int kFirst, int kLast>
__device__ inline float XorSum(float v) {
#pragma unroll
  for (int o = kFirst; o <= kLast; o *= 2) v += ShflXor(v, o);
  return v;
}

#if LADDER_DEVICE_HAS_MMA
__device__ inline void LdMatrixX4Trans(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                       const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(s));
}
// Non-transposed 8x8 b16 matrices: lane l supplies the row address of matrix l / 8, row l % 8.
__device__ inline void LdMatrixX4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                  const void* smem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(s));
}
// Two floats rounded to nearest-even into one 32-bit pair of 16-bit values (lo in the low half),
// one instruction (the same bits as E::FromFloat on each), and back.
template <bool kBf16>
__device__ inline uint32_t PackRn2(float lo, float hi) {
  uint32_t d;
  if constexpr (kBf16) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
  }
  return d;
}
template <bool kBf16>
__device__ inline void Unpack2(uint32_t v, float& lo, float& hi) {
  if constexpr (kBf16) {
    lo = __uint_as_float(v << 16);
    hi = __uint_as_float(v & 0xffff0000u);
  } else {
    const unsigned short l = static_cast<unsigned short>(v & 0xffffu),
                         h = static_cast<unsigned short>(v >> 16);
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(lo) : "h"(l));
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(hi) : "h"(h));
  }
}
// Transposes one 8x8 b16 matrix held as a fragment (lane l: row l / 4, columns 2 (l % 4) and +1).
__device__ inline uint32_t MovMatrixTrans(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}
// Warpgroup MMA (wgmma, sm_90a only: built where CMAKE_CUDA_ARCHITECTURES has 90a; elsewhere
// the kernels that would use it take their mma.sync path, and these trap). One shape:
// D[64 x 32] (+)= A[64 x 16] B[16 x 32], fp32 accumulators in mma.sync's C layout per 8-column
// block (thread t of the warpgroup: rows 16 (t / 32) + (t % 32) / 4 (+8), columns 2 (t % 4)
// (+1)), A MN-major and B K-major in shared memory without swizzle (core matrices of 8 x 16
// bytes, 128 bytes each; kernels/tools/wgmma_layout.cu checks the layouts).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && !defined(LADDER_KERNELS_HIP)
#define LADDER_DEVICE_HAS_WGMMA 1
#else
#define LADDER_DEVICE_HAS_WGMMA 0
#endif
// A shared-memory matrix descriptor without swizzle: lbo between core matrices along K, sbo
// along M or N (bytes, multiples of 16).
__device__ inline unsigned long long WgmmaDesc(const void* smem, unsigned lbo, unsigned sbo) {
#if LADDER_DEVICE_HAS_WGMMA
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  return static_cast<unsigned long long>((a & 0x3FFFFu) >> 4) |
         (static_cast<unsigned long long>(lbo >> 4) << 16) |
         (static_cast<unsigned long long>(sbo >> 4) << 32);
#else
  (void)smem, (void)lbo, (void)sbo;
  return 0;
#endif
}
// The shared-memory address of a pointer into shared memory (where a layout depends on address
// bits, as wgmma's swizzles do).
__device__ inline unsigned SharedAddress(const void* smem) {
#if LADDER_DEVICE_HAS_WGMMA
  return static_cast<unsigned>(__cvta_generic_to_shared(smem));
#else
  (void)smem;
  return 0;
#endif
}
// Orders this thread's generic-proxy shared-memory writes (stores, landed cp.async) before
// the async proxy's reads (wgmma operands).
__device__ inline void FenceProxyAsyncShared() {
#if LADDER_DEVICE_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
__device__ inline void WgmmaFence() {
#if LADDER_DEVICE_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ inline void WgmmaCommit() {
#if LADDER_DEVICE_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
__device__ inline void WgmmaWaitAll() {
#if LADDER_DEVICE_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
// d (+)= A B with A^T stored (MN-major: imm-trans-a 1), B K-major; accumulate = 0 overwrites d.
template <bool kBf16>
__device__ inline void Wgmma64x32(float (&d)[16], unsigned long long desc_a,
                                  unsigned long long desc_b, int accumulate) {
#if LADDER_DEVICE_HAS_WGMMA
#define LADDER_WGMMA_ASM(TYPE)                                                                  \
  asm volatile(                                                                                 \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                              \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE                               \
      " "                                                                                       \
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 1, 0;\n}\n"  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),     \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
        "+f"(d[14]), "+f"(d[15])                                                                \
      : "l"(desc_a), "l"(desc_b), "r"(accumulate))
  if constexpr (kBf16) {
    LADDER_WGMMA_ASM("bf16");
  } else {
    LADDER_WGMMA_ASM("f16");
  }
#undef LADDER_WGMMA_ASM
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
  LADDER_DEVICE_TRAP();
#endif
}
// m64n16k16 and m64n24k16 as Wgmma64x32 (the column-teams kernel's two teams: 16 and 24 score
// columns).
template <bool kBf16>
__device__ inline void Wgmma64x16(float (&d)[8], unsigned long long desc_a,
                                  unsigned long long desc_b, int accumulate) {
#if LADDER_DEVICE_HAS_WGMMA
#define LADDER_WGMMA_ASM(TYPE)                                                              \
  asm volatile(                                                                             \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"                                          \
      "wgmma.mma_async.sync.aligned.m64n16k16.f32." TYPE "." TYPE                           \
      " {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 1, 0;\n}\n"                             \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
        "+f"(d[7])                                                                          \
      : "l"(desc_a), "l"(desc_b), "r"(accumulate))
  if constexpr (kBf16) {
    LADDER_WGMMA_ASM("bf16");
  } else {
    LADDER_WGMMA_ASM("f16");
  }
#undef LADDER_WGMMA_ASM
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
  LADDER_DEVICE_TRAP();
#endif
}
template <bool kBf16>
__device__ inline void Wgmma64x24(float (&d)[12], unsigned long long desc_a,
                                  unsigned long long desc_b, int accumulate) {
#if LADDER_DEVICE_HAS_WGMMA
#define LADDER_WGMMA_ASM(TYPE)                                                              \
  asm volatile(                                                                             \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %14, 0;\n"                                          \
      "wgmma.mma_async.sync.aligned.m64n24k16.f32." TYPE "." TYPE                           \
      " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11}, %12, %13, p, 1, 1, 1, 0;\n}\n"             \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11])                        \
      : "l"(desc_a), "l"(desc_b), "r"(accumulate))
  if constexpr (kBf16) {
    LADDER_WGMMA_ASM("bf16");
  } else {
    LADDER_WGMMA_ASM("f16");
  }
#undef LADDER_WGMMA_ASM
#else
  (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
  LADDER_DEVICE_TRAP();
#endif
}
// Barrier `id` (1..15) among `threads` threads (a multiple of 32) of the work group.
__device__ inline void NamedBarrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// The same, for threads that reach it from different instructions (barrier.sync without
// .aligned; bar.sync is .aligned, and compute-sanitizer's synccheck rightly flags divergent
// arrivals at it): the two teams of the column-teams kernel, each in its own copy of the loop.
__device__ inline void NamedBarrierAnyPc(int id, int threads) {
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Device-scope release store and acquire load (flags between the work groups of one grid).
__device__ inline void StoreRelease(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}
__device__ inline unsigned long long LoadAcquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// c += a * b for one m16n8k16 tile; kBf16 picks bf16 or f16 operands, fp32 accumulators.
template <bool kBf16>
__device__ inline void Mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
#endif

// 16-bit element types, stored as raw bits (no vendor bf16/half types: they differ).
struct Bf16 {
  static constexpr bool kIsBf16 = true;
  __device__ static float ToFloat(uint16_t h) {
    return __uint_as_float(static_cast<uint32_t>(h) << 16);
  }
  __device__ static uint16_t FromFloat(float f) {
    uint32_t x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
  }
};
struct F16 {
  static constexpr bool kIsBf16 = false;
  __device__ static float ToFloat(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
      const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
      return sign ? -v : v;
    }
    if (e == 31) return __uint_as_float(sign | 0x7f800000u | (m << 13));
    return __uint_as_float(sign | ((e - 15 + 127) << 23) | (m << 13));
  }
  __device__ static uint16_t FromFloat(float f) {
    const uint32_t x = __float_as_uint(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u)
      return static_cast<uint16_t>(sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
    if (absx < 0x38800000u) {
      const auto m = static_cast<uint32_t>(rintf(__uint_as_float(absx) * 16777216.0f));
      return static_cast<uint16_t>(sign | m);
    }
    const uint32_t mant = absx & 0x7fffffu;
    const uint32_t exp = (absx >> 23) - 127 + 15;
    uint32_t hh = (exp << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (hh & 1u))) ++hh;
    return static_cast<uint16_t>(sign | hh);
  }
};

}  // namespace ladder::kernels::gpu::dev
