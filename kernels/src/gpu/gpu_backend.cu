// The GPU backend: device memory, the dispatch table of attention kernels, timing and the copy
// ceiling. Compiled by nvcc (LADDER_CUDA) or hipcc (LADDER_HIP) from this one source.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "geometry.h"
#include "gpu/attention_kernel.h"
#include "gpu/portability.h"
#include "gpu_api.h"
#include "numeric.h"

namespace ladder::kernels::gpu {
namespace {

KernelError DeviceError(rt::Error e, const char* call, const char* file, int line) {
  return Error(ErrorCode::kDeviceError,
               std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + rt::ErrorString(e));
}

// Turns a runtime error into a KernelError once, here, with the call and file:line.
#define LADDER_GPU_CALL(expr)                                                        \
  do {                                                                               \
    const ::ladder::kernels::gpu::rt::Error ladder_gpu_e_ = (expr);                  \
    if (ladder_gpu_e_ != ::ladder::kernels::gpu::rt::kSuccess)                       \
      return DeviceError(ladder_gpu_e_, #expr, __FILE__, __LINE__);                  \
  } while (0)

template <class E>
__global__ void FillKernel(uint16_t* dst, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = E::FromFloat(internal::HashToValue(seed, i) * scale);
}

constexpr int TileNFor(int d) { return internal::GpuTileN(d); }
constexpr int ThreadsFor(int d) { return d == 512 ? 256 : 128; }

struct Geometry {
  int block_m, rows_per_qblock, qblocks;
};
Geometry GeometryOf(const DeviceProblem& p) {
  const int group = p.shape.q_heads / p.shape.kv_heads;
  return {internal::GpuBlockM(group, p.max_query_len), internal::GpuRowsPerQBlock(group, p.max_query_len),
          internal::GpuQBlocks(group, p.max_query_len)};
}

template <class E, int D, int BM>
Status LaunchTyped(const KernelParams& kp, dim3 grid, int num_tokens) {
  constexpr int TN = TileNFor(D), NT = ThreadsFor(D);
  static_assert(TN == internal::GpuTileN(D), "policy and kernels agree on the tile");
  using Sh = KernelShape<D, BM, TN, NT>;
  auto* kernel = &UnifiedAttentionKernel<E, D, BM, TN, NT>;
  static const rt::Error attr = rt::SetMaxDynamicSmem(kernel, static_cast<int>(Sh::kSmemBytes));
  LADDER_GPU_CALL(attr);
  kernel<<<grid, NT, Sh::kSmemBytes>>>(kp);
  LADDER_GPU_CALL(rt::GetLastError());
  if (kp.write_partial) {
    MergeSegmentsKernel<E><<<dim3(num_tokens, kp.q_heads), 128>>>(kp.seg_acc, kp.seg_max, kp.seg_sum, kp.out,
                                                                  kp.q_heads, kp.segments, D);
    LADDER_GPU_CALL(rt::GetLastError());
  }
  return OkStatus();
}

// The dispatch table: every instantiation, one place.
template <class E>
Status DispatchDim(int d, int bm, const KernelParams& kp, dim3 grid, int num_tokens) {
  switch (d * 100 + bm) {
    case 6416: return LaunchTyped<E, 64, 16>(kp, grid, num_tokens);
    case 6432: return LaunchTyped<E, 64, 32>(kp, grid, num_tokens);
    case 12816: return LaunchTyped<E, 128, 16>(kp, grid, num_tokens);
    case 12832: return LaunchTyped<E, 128, 32>(kp, grid, num_tokens);
    case 25616: return LaunchTyped<E, 256, 16>(kp, grid, num_tokens);
    case 25632: return LaunchTyped<E, 256, 32>(kp, grid, num_tokens);
    case 51216: return LaunchTyped<E, 512, 16>(kp, grid, num_tokens);
    case 51232: return LaunchTyped<E, 512, 32>(kp, grid, num_tokens);
    default:
      return Error(ErrorCode::kUnsupported, "no kernel for head_dim " + std::to_string(d) + " block_m " +
                                                std::to_string(bm));
  }
}

}  // namespace

Backend CompiledBackend() {
#if defined(LADDER_KERNELS_HIP)
  return Backend::kHip;
#else
  return Backend::kCuda;
#endif
}

Result<DeviceInfo> QueryDevice() {
  int n = 0;
  const rt::Error e = rt::DeviceCount(&n);
  if (e != rt::kSuccess || n == 0) {
    (void)rt::GetLastError();  // clear the sticky "no device" error
    return Error(ErrorCode::kUnavailable,
                 std::string("no GPU device present") + (e != rt::kSuccess ? std::string(" (") + rt::ErrorString(e) + ")" : ""));
  }
  rt::DeviceProp prop{};
  LADDER_GPU_CALL(rt::Props(&prop, 0));
  DeviceInfo info;
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.warp_size = prop.warpSize;
  info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  return info;
}

Result<DeviceBuffer> DeviceBuffer::Alloc(size_t bytes) {
  DeviceBuffer b;
  LADDER_GPU_CALL(rt::Malloc(&b.p_, std::max<size_t>(bytes, 1)));
  b.n_ = bytes;
  return Result<DeviceBuffer>(std::move(b));
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_ != nullptr) (void)rt::Free(p_);
    p_ = std::exchange(o.p_, nullptr);
    n_ = std::exchange(o.n_, 0);
  }
  return *this;
}
DeviceBuffer::~DeviceBuffer() {
  if (p_ != nullptr) (void)rt::Free(p_);
}

Status CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes) LADDER_GPU_CALL(rt::CopyH2D(dst, src, bytes));
  return OkStatus();
}
Status CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes) LADDER_GPU_CALL(rt::CopyD2H(dst, src, bytes));
  return OkStatus();
}

Status FillRandom(void* dst, size_t numel, DType dtype, uint64_t seed, float scale) {
  const int blocks = static_cast<int>(std::min<size_t>((numel + 255) / 256, 65536));
  if (dtype == DType::kBF16)
    FillKernel<dev::Bf16><<<blocks, 256>>>(static_cast<uint16_t*>(dst), numel, seed, scale);
  else if (dtype == DType::kF16)
    FillKernel<dev::F16><<<blocks, 256>>>(static_cast<uint16_t*>(dst), numel, seed, scale);
  else
    return Error(ErrorCode::kUnsupported, "GPU backends take bf16 or f16");
  LADDER_GPU_CALL(rt::GetLastError());
  return OkStatus();
}

Result<LaunchPlan> MakePlan(const DeviceProblem& p, Path path, int segments) {
  LADDER_K_TRY(p.shape.Validate());
  if (p.shape.dtype == DType::kF32)
    return Error(ErrorCode::kUnsupported, "GPU backends take bf16 or f16 (f32 is CPU-only)");
  const int group = p.shape.q_heads / p.shape.kv_heads;
  if (group > 32) return Error(ErrorCode::kUnsupported, "GQA group > 32 q heads per KV head");
  const Geometry g = GeometryOf(p);
  LaunchPlan plan;
  plan.path = path;
  plan.segments = path == Path::k3D ? std::max(1, segments) : 1;
  const int d = p.shape.head_dim;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s grid %dx%dx%d (%d thr, BM %d, tile %d)%s", path == Path::k3D ? "3D" : "2D",
                p.num_seqs * g.qblocks, p.shape.kv_heads, plan.segments, ThreadsFor(d), g.block_m, TileNFor(d),
                path == Path::k3D ? (" + merge " + std::to_string(p.num_tokens) + "x" + std::to_string(p.shape.q_heads)).c_str() : "");
  plan.grid = buf;
  return plan;
}

size_t WorkspaceBytes(const DeviceProblem& p, const LaunchPlan& plan) {
  if (plan.path != Path::k3D) return 0;
  const size_t slots = static_cast<size_t>(p.num_tokens) * p.shape.q_heads * plan.segments;
  return slots * p.shape.head_dim * 4 + 2 * slots * 4;
}

Status Launch(const DeviceProblem& p, const LaunchPlan& plan, void* workspace, size_t workspace_bytes) {
  if (workspace_bytes < WorkspaceBytes(p, plan))
    return Error(ErrorCode::kInvalidArgument, "workspace too small for the 3D segment buffer");
  const Geometry g = GeometryOf(p);
  KernelParams kp{};
  kp.q = static_cast<const uint16_t*>(p.q);
  kp.k = static_cast<const uint16_t*>(p.k);
  kp.v = static_cast<const uint16_t*>(p.v);
  kp.out = static_cast<uint16_t*>(p.out);
  kp.query_start = p.query_start;
  kp.seq_lens = p.seq_lens;
  kp.block_table = p.block_table;
  kp.q_heads = p.shape.q_heads;
  kp.kv_heads = p.shape.kv_heads;
  kp.group = p.shape.q_heads / p.shape.kv_heads;
  int shift = 0;
  while ((1 << shift) < p.shape.block_size) ++shift;
  kp.block_size_shift = shift;
  kp.max_blocks_per_seq = p.max_blocks_per_seq;
  kp.window = p.shape.window;
  kp.scale = p.shape.EffectiveScale();
  kp.softcap = p.shape.softcap;
  kp.rows_per_qblock = g.rows_per_qblock;
  kp.num_qblocks = g.qblocks;
  kp.segments = plan.segments;
  kp.write_partial = plan.path == Path::k3D ? 1 : 0;
  if (kp.write_partial) {
    const size_t slots = static_cast<size_t>(p.num_tokens) * p.shape.q_heads * plan.segments;
    kp.seg_acc = static_cast<float*>(workspace);
    kp.seg_max = kp.seg_acc + slots * p.shape.head_dim;
    kp.seg_sum = kp.seg_max + slots;
  }
  const dim3 grid(p.num_seqs * g.qblocks, p.shape.kv_heads, plan.segments);
  if (p.shape.dtype == DType::kBF16) return DispatchDim<dev::Bf16>(p.shape.head_dim, g.block_m, kp, grid, p.num_tokens);
  if (p.shape.dtype == DType::kF16) return DispatchDim<dev::F16>(p.shape.head_dim, g.block_m, kp, grid, p.num_tokens);
  return Error(ErrorCode::kUnsupported, "GPU backends take bf16 or f16");
}

Status Synchronize() {
  LADDER_GPU_CALL(rt::Sync());
  return OkStatus();
}

namespace {
// Move-only owner of a pair of events.
struct EventPair {
  rt::Event a = nullptr, b = nullptr;
  EventPair() = default;
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    if (a) (void)rt::EventDestroy(a);
    if (b) (void)rt::EventDestroy(b);
  }
  Status Init() {
    LADDER_GPU_CALL(rt::EventCreate(&a));
    LADDER_GPU_CALL(rt::EventCreate(&b));
    return OkStatus();
  }
};
}  // namespace

Result<std::vector<double>> TimeLaunches(const DeviceProblem& p, const LaunchPlan& plan, void* workspace,
                                         size_t workspace_bytes, int warmup, int repeats, void* flush,
                                         size_t flush_bytes) {
  EventPair ev;
  LADDER_K_TRY(ev.Init());
  for (int i = 0; i < warmup; ++i) LADDER_K_TRY(Launch(p, plan, workspace, workspace_bytes));
  LADDER_GPU_CALL(rt::Sync());
  std::vector<double> us;
  for (int i = 0; i < repeats; ++i) {
    if (flush != nullptr) LADDER_GPU_CALL(rt::MemsetAsync(flush, i & 0xff, flush_bytes));
    LADDER_GPU_CALL(rt::EventRecord(ev.a));
    LADDER_K_TRY(Launch(p, plan, workspace, workspace_bytes));
    LADDER_GPU_CALL(rt::EventRecord(ev.b));
    LADDER_GPU_CALL(rt::EventSync(ev.b));
    float ms = 0;
    LADDER_GPU_CALL(rt::EventMs(&ms, ev.a, ev.b));
    us.push_back(ms * 1000.0);
  }
  return us;
}

Result<double> MeasureCopyBytesPerS(size_t bytes, int repeats) {
  LADDER_K_ASSIGN_OR_RETURN(DeviceBuffer src, DeviceBuffer::Alloc(bytes));
  LADDER_K_ASSIGN_OR_RETURN(DeviceBuffer dst, DeviceBuffer::Alloc(bytes));
  LADDER_GPU_CALL(rt::MemsetAsync(src.get(), 1, bytes));
  EventPair ev;
  LADDER_K_TRY(ev.Init());
  std::vector<double> t;
  for (int i = 0; i < repeats + 3; ++i) {
    LADDER_GPU_CALL(rt::EventRecord(ev.a));
    LADDER_GPU_CALL(rt::CopyD2DAsync(dst.get(), src.get(), bytes));
    LADDER_GPU_CALL(rt::EventRecord(ev.b));
    LADDER_GPU_CALL(rt::EventSync(ev.b));
    float ms = 0;
    LADDER_GPU_CALL(rt::EventMs(&ms, ev.a, ev.b));
    if (i >= 3) t.push_back(ms * 1e-3);
  }
  std::sort(t.begin(), t.end());
  return 2.0 * static_cast<double>(bytes) / t[t.size() / 2];
}

}  // namespace ladder::kernels::gpu
