// The GPU backend: device memory, the dispatch table of attention kernels, timing and the copy
// ceiling. Compiled by nvcc (LADDER_CUDA) or hipcc (LADDER_HIP) from this one source.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "geometry.h"
#include "gpu/attention_kernel.h"
#include "gpu/portability.h"
#if !defined(LADDER_KERNELS_HIP)
#include "gpu/team_attention_kernel.h"
#endif
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

// Kernel configurations per head dim: KV tile (keys), threads, K/V stages for BM 16 and BM 32,
// work groups per SM asked of the register allocator (launch bounds). Each head dim has a
// default variant per BM (kDefault*); LADDER_KERNELS_D512 / LADDER_KERNELS_D256 = "<v>" or
// "<v for BM 16>,<v for BM 32>" pick others for tuning runs. The policy's segment count follows
// the chosen kernel's occupancy.
template <int D, int V>
struct Cfg {  // head 64 / 128
  static constexpr int kTile = 64, kThreads = 128, kStages16 = 2, kStages32 = 2, kMinBlocks = 1;
};
template <>
struct Cfg<512, 0> {  // 16 warps, 4 tiles in flight, one work group per SM
  static constexpr int kTile = 16, kThreads = 512, kStages16 = 5, kStages32 = 5, kMinBlocks = 1;
};
template <>
struct Cfg<512, 1> {  // v3's shape: 8 warps, 2 stages, two work groups per SM
  static constexpr int kTile = 16, kThreads = 256, kStages16 = 2, kStages32 = 2, kMinBlocks = 2;
};
template <>
struct Cfg<512, 2> {  // 8 warps, 4 tiles in flight, one work group per SM
  static constexpr int kTile = 16, kThreads = 256, kStages16 = 5, kStages32 = 5, kMinBlocks = 1;
};
template <>
struct Cfg<512, 3> {  // 32-key tiles (half the barriers per byte), 8 warps
  static constexpr int kTile = 32, kThreads = 256, kStages16 = 3, kStages32 = 2, kMinBlocks = 1;
};
template <>
struct Cfg<512, 4> {  // 32-key tiles, 16 warps
  static constexpr int kTile = 32, kThreads = 512, kStages16 = 3, kStages32 = 2, kMinBlocks = 1;
};
template <>
struct Cfg<512, 5> {  // 4 warps, 2 stages, two work groups per SM
  static constexpr int kTile = 16, kThreads = 128, kStages16 = 2, kStages32 = 2, kMinBlocks = 2;
};
template <>
struct Cfg<256, 0> {  // v3's shape: 4 warps, 2 stages
  static constexpr int kTile = 32, kThreads = 128, kStages16 = 2, kStages32 = 2, kMinBlocks = 1;
};
template <>
struct Cfg<256, 1> {  // 8 warps, 3 tiles in flight
  static constexpr int kTile = 32, kThreads = 256, kStages16 = 4, kStages32 = 4, kMinBlocks = 1;
};
// Head-512 variants 6 to 9 are TeamAttention512Kernel (team_attention_kernel.h), one per way of
// scoring (TeamScoring): CUDA, where a work group may have its ~220 KB of shared memory
// (Hopper), the default there; elsewhere the default is variant 3.
constexpr int kTeamVariant512 = 6;
constexpr int kTeamColumnVariant512 = 7;  // the same kernel scoring by column
constexpr int kTeamSplitVariant512 = 8;   // ... with the scores by dims and the softmax by column
constexpr int kTeamWgmmaVariant512 = 9;   // ... and O^T by warpgroup MMA at 32 columns (sm_90a)
constexpr bool IsTeamVariant512(int v) { return v >= kTeamVariant512 && v <= kTeamWgmmaVariant512; }
#if defined(LADDER_KERNELS_HIP)
constexpr int kVariants512 = 6;
#else
constexpr int kVariants512 = 10;
#endif
constexpr int VariantsFor(int d) { return d == 512 ? kVariants512 : d == 256 ? 2 : 1; }
constexpr int kDefault256[2] = {0, 0};

bool TeamKernelFits() {
#if defined(LADDER_KERNELS_HIP)
  return false;
#else
  static const bool yes = [] {
    int dev = 0, major = 0, optin = 0;
    return rt::GetDevice(&dev) == rt::kSuccess && rt::ComputeMajor(&major, dev) == rt::kSuccess && major >= 8 &&
           cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess &&
           static_cast<size_t>(optin) >= TeamShape<4>::kSmemBytes;
  }();
  return yes;
#endif
}

// Whether this build's sm_90a machine code is what runs here (a compute capability 9.0 device):
// only there do the wgmma kernels exist.
bool WgmmaRuns() {
#if defined(LADDER_KERNELS_HIP) || !defined(LADDER_KERNELS_SM90A)
  return false;
#else
  static const bool yes = [] {
    int dev = 0;
    rt::DeviceProp prop{};
    return rt::GetDevice(&dev) == rt::kSuccess && rt::Props(&prop, dev) == rt::kSuccess && prop.major == 9 &&
           prop.minor == 0;
  }();
  return yes;
#endif
}

// score_cols: query rows x q heads of one KV head in the largest work item (<= bm).
int VariantFor(int d, int bm, int score_cols) {
  // "<v>" or "<v16>,<v32>"; anything out of range keeps the default (-1 here).
  auto from_env = [](const char* name, int n, int which) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == 0) return -1;
    const char* comma = std::strchr(v, ',');
    const int i = std::atoi(which == 1 && comma != nullptr ? comma + 1 : v);
    return i >= 0 && i < n ? i : -1;
  };
  const int which = bm == 32 ? 1 : 0;
  if (d == 512) {
    static const int v[2] = {from_env("LADDER_KERNELS_D512", VariantsFor(512), 0),
                             from_env("LADDER_KERNELS_D512", VariantsFor(512), 1)};
    if (v[which] >= 0) return v[which];
    // The team kernel where it fits: by dims for 8 score columns (one query row of GQA 8), by
    // column for 16 (H200, 32K: 88 against variant 3's 91 us when chosen), split scores for 32
    // (85 against 95.5 by column in the same run; at 16 columns split was 81 against 79.5), and
    // at 32 with O^T by wgmma where the sm_90a machine code runs (H200, 4 rows: 79.9-80.4
    // against 83.3-83.6 us).
    if (!TeamKernelFits()) return 3;
    if (score_cols <= 8) return kTeamVariant512;
    if (score_cols <= 16) return kTeamColumnVariant512;
    return WgmmaRuns() ? kTeamWgmmaVariant512 : kTeamSplitVariant512;
  }
  if (d == 256) {
    static const int v[2] = {from_env("LADDER_KERNELS_D256", VariantsFor(256), 0),
                             from_env("LADDER_KERNELS_D256", VariantsFor(256), 1)};
    return v[which] >= 0 ? v[which] : kDefault256[which];
  }
  return 0;
}

// One instantiated attention kernel, as the host sees it (every instantiation has the same
// function type).
struct KernelEntry {
  void (*fn)(KernelParams) = nullptr;
  const char* name = "unified";  // in the plan's grid description
  int threads = 0, stages = 0, tile = 0;
  size_t smem = 0;
  rt::Error attr = rt::kSuccess;  // setting its dynamic shared-memory limit
  bool merges_in_kernel = false;  // can merge its 3D partials itself (KernelParams::merge_in_kernel)
  int merge_units = 0;            // ... taking at most this many (column, 128 dims) units per work group
  int resident_per_sm = 0;        // (merges_in_kernel) work groups per SM at once, asked once
};

template <class E, int D, int BM, int V>
const KernelEntry& EntryOf() {
  using C = Cfg<D, V>;
  constexpr int TN = C::kTile;
  constexpr int ST = BM == 16 ? C::kStages16 : C::kStages32;
  using Sh = KernelShape<D, BM, TN, C::kThreads, ST>;
  static const KernelEntry e = [] {
    KernelEntry k;
    k.fn = &UnifiedAttentionKernel<E, D, BM, TN, C::kThreads, ST, C::kMinBlocks>;
    k.threads = C::kThreads;
    k.stages = ST;
    k.tile = TN;
    k.smem = Sh::kSmemBytes;
    k.attr = rt::SetMaxDynamicSmem(k.fn, static_cast<int>(Sh::kSmemBytes));
    return k;
  }();
  return e;
}

#if !defined(LADDER_KERNELS_HIP)
template <class E, int NT, TeamScoring kScoring, bool kBulk>
const KernelEntry& EntryOfTeam() {
  using Sh = TeamShape<NT>;
  static const KernelEntry e = [] {
    KernelEntry k;
    k.fn = &TeamAttention512Kernel<E, NT, kScoring, kBulk>;
    static constexpr const char* kNames[2][4] = {
        {"team512", "team512 by column", "team512 split scores", "team512 split scores, wgmma"},
        {"team512, bulk copies", "team512 by column, bulk copies", "team512 split scores, bulk copies",
         "team512 split scores, wgmma, bulk copies"}};
    k.name = kNames[kBulk ? 1 : 0][static_cast<int>(kScoring)];
    k.merges_in_kernel = true;
    k.merge_units = Sh::kMergeUnits;
    k.threads = Sh::kThreads;
    k.stages = Sh::kStages;
    k.tile = Sh::kChunk;
    k.smem = Sh::kSmemBytes;
    k.attr = rt::SetMaxDynamicSmem(k.fn, static_cast<int>(Sh::kSmemBytes));
    // Once per process: the device entry plans every launch (engines launch hundreds per step).
    if (k.attr == rt::kSuccess && rt::Occupancy(&k.resident_per_sm, k.fn, k.threads, k.smem) != rt::kSuccess)
      k.resident_per_sm = 0;
    return k;
  }();
  return e;
}
#endif

template <class E, int D, int BM>
const KernelEntry& EntryOfVariant(int v) {
  if constexpr (D == 512) {
    if (v == 1) return EntryOf<E, D, BM, 1>();
    if (v == 2) return EntryOf<E, D, BM, 2>();
    if (v == 3) return EntryOf<E, D, BM, 3>();
    if (v == 4) return EntryOf<E, D, BM, 4>();
    if (v == 5) return EntryOf<E, D, BM, 5>();
  } else if constexpr (D == 256) {
    if (v == 1) return EntryOf<E, D, BM, 1>();
  }
  return EntryOf<E, D, BM, 0>();
}

// The dispatch table: every instantiation, one place.
template <class E>
const KernelEntry* EntryForDim(int d, int bm, int score_cols) {
  const int v = VariantFor(d, bm, score_cols);
#if !defined(LADDER_KERNELS_HIP)
  if (d == 512 && IsTeamVariant512(v)) {
    // Bulk copies (one warp issues each chunk's 1 KB rows) where a warp has nothing else to
    // do: 16 columns by column, whose two non-scoring warps per team wait anyway (H200, 2 rows
    // at 32K: 80.3-81.5 us against 82.9-85.1 with every warp issuing cp.async). Where every
    // warp scores, the copying warp became the slowest (1 row +0.7 us, 4 rows +2 us).
    // LADDER_KERNELS_BULK=0 / 1: bulk copies nowhere / in every team kernel (A/B runs).
    static const int bulk = [] {
      const char* b = std::getenv("LADDER_KERNELS_BULK");
      return b == nullptr || *b == 0 ? -1 : std::atoi(b) != 0 ? 1 : 0;
    }();
    constexpr TeamScoring kDims = TeamScoring::kByDims, kCols = TeamScoring::kByColumn, kSplit = TeamScoring::kSplit;
    if (score_cols <= 8)
      return bulk == 1 ? &EntryOfTeam<E, 1, kDims, true>() : &EntryOfTeam<E, 1, kDims, false>();
    if (v == kTeamColumnVariant512 && score_cols <= 16)
      return bulk != 0 ? &EntryOfTeam<E, 2, kCols, true>() : &EntryOfTeam<E, 2, kCols, false>();
    if (v == kTeamColumnVariant512)
      return bulk == 1 ? &EntryOfTeam<E, 4, kCols, true>() : &EntryOfTeam<E, 4, kCols, false>();
    if (v == kTeamSplitVariant512 && score_cols <= 16)
      return bulk == 1 ? &EntryOfTeam<E, 2, kSplit, true>() : &EntryOfTeam<E, 2, kSplit, false>();
    if (v == kTeamSplitVariant512)
      return bulk == 1 ? &EntryOfTeam<E, 4, kSplit, true>() : &EntryOfTeam<E, 4, kSplit, false>();
    if (v == kTeamWgmmaVariant512 && score_cols > 16) return &EntryOfTeam<E, 4, TeamScoring::kSplitWgmma, false>();
    if (v == kTeamWgmmaVariant512) return bulk != 0 ? &EntryOfTeam<E, 2, kCols, true>() : &EntryOfTeam<E, 2, kCols, false>();
    return score_cols <= 16 ? &EntryOfTeam<E, 2, kDims, false>() : &EntryOfTeam<E, 4, kDims, false>();
  }
#endif
  switch (d * 100 + bm) {
    case 6416: return &EntryOfVariant<E, 64, 16>(v);
    case 6432: return &EntryOfVariant<E, 64, 32>(v);
    case 12816: return &EntryOfVariant<E, 128, 16>(v);
    case 12832: return &EntryOfVariant<E, 128, 32>(v);
    case 25616: return &EntryOfVariant<E, 256, 16>(v);
    case 25632: return &EntryOfVariant<E, 256, 32>(v);
    case 51216: return &EntryOfVariant<E, 512, 16>(v);
    case 51232: return &EntryOfVariant<E, 512, 32>(v);
    default: return nullptr;
  }
}

// score_cols: query rows x q heads of one KV head in the largest work item (<= block_m).
Result<const KernelEntry*> FindKernel(const AttentionShape& shape, int block_m, int score_cols) {
  const int v512 = shape.head_dim == 512 ? VariantFor(512, block_m, score_cols) : -1;
  if (IsTeamVariant512(v512) && !TeamKernelFits())
    return Error(ErrorCode::kUnsupported, "head-512 variants 6 to 9 need ~210 KB of shared memory per work group (Hopper)");
  const KernelEntry* e = nullptr;
  if (shape.dtype == DType::kBF16) e = EntryForDim<dev::Bf16>(shape.head_dim, block_m, score_cols);
  else if (shape.dtype == DType::kF16) e = EntryForDim<dev::F16>(shape.head_dim, block_m, score_cols);
  else return Error(ErrorCode::kUnsupported, "GPU backends take bf16 or f16 (f32 is CPU-only)");
  if (e == nullptr)
    return Error(ErrorCode::kUnsupported, "no kernel for head_dim " + std::to_string(shape.head_dim) + " block_m " +
                                              std::to_string(block_m));
  LADDER_GPU_CALL(e->attr);
  return e;
}

bool TimelineOn() {
  static const bool on = [] {
    const char* v = std::getenv("LADDER_KERNELS_TIMELINE");
    return v != nullptr && *v != 0 && std::strcmp(v, "0") != 0;
  }();
  return on;
}
constexpr size_t kTimelineItems = 1 << 16;
Result<unsigned long long*> TimelineBuffer() {
  static DeviceBuffer buf;
  if (buf.get() == nullptr) {
    LADDER_K_ASSIGN_OR_RETURN(buf, DeviceBuffer::Alloc(kTimelineItems * kTimelineFields * sizeof(unsigned long long)));
    LADDER_GPU_CALL(rt::MemsetAsync(buf.get(), 0, buf.size()));
  }
  return static_cast<unsigned long long*>(buf.get());
}

// Whether kernel `e` merges its partials itself: only where all `items` work groups fit on the
// device at once (the merge inside the kernel waits for other work groups, so they must all be
// resident: it is launched cooperatively), and only where each work group then merges at most
// its merge_units (column, 128 dims) units, all at once (the merge starts when the group's last
// work group arrives). H200, gemma4-31b-global 32K, against the merge kernel: -1.1 us at 1 row
// (32 units, 33 work groups), -0.5 to -0.7 us at 2 rows (64 units, two each); at 4 rows four
// units each were +1 us one after another and +1.2 us at once, so 32 columns take one.
// LADDER_KERNELS_FUSED=0 keeps the merge kernel, =1 merges in the kernel wherever it is
// resident and the units allow (tests, A/B runs); LADDER_KERNELS_MERGE_UNITS=1 allows one.
bool MergesInKernel(const KernelEntry& e, long long items, long long units, int segments) {
#if defined(LADDER_KERNELS_HIP)
  (void)e, (void)items, (void)units, (void)segments;
  return false;
#else
  static const int mode = [] {
    const char* v = std::getenv("LADDER_KERNELS_FUSED");
    return v == nullptr || *v == 0 ? -1 : std::atoi(v) != 0 ? 1 : 0;
  }();
  // LADDER_KERNELS_MERGE_UNITS=1: at most one unit per work group (A/B runs).
  static const int merge_units_max = [] {
    const char* v = std::getenv("LADDER_KERNELS_MERGE_UNITS");
    return v == nullptr || *v == 0 ? 1 << 30 : std::max(1, std::atoi(v));
  }();
  if (!e.merges_in_kernel || mode == 0 || units > static_cast<long long>(e.merge_units) * segments ||
      (mode < 0 && units > static_cast<long long>(merge_units_max) * segments))
    return false;
  static const int sms = [] {
    int dev = 0, n = 0, coop = 0;
    if (rt::GetDevice(&dev) != rt::kSuccess) return 0;
    if (cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess || !coop) return 0;
    return cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess ? n : 0;
  }();
  return sms > 0 && items <= static_cast<long long>(e.resident_per_sm) * sms;
#endif
}

// The merge keeps a weight and a sum per segment in (default-sized) shared memory.
constexpr int kMaxSegments = 4096;

struct Geometry {
  int block_m, rows_per_qblock, qblocks, score_cols;
};
Geometry GeometryOf(const AttentionShape& shape, int max_query_len) {
  const int group = shape.q_heads / shape.kv_heads;
  const int rows = internal::GpuRowsPerQBlock(group, max_query_len);
  return {internal::GpuBlockM(group, max_query_len), rows, internal::GpuQBlocks(group, max_query_len),
          std::min(rows, max_query_len) * group};
}
Geometry GeometryOf(const DeviceProblem& p) { return GeometryOf(p.shape, p.max_query_len); }

#if !defined(LADDER_KERNELS_HIP)
// cudaLaunchKernelEx with one launch attribute (cooperative, programmatic serialization).
template <class... Params, class... Args>
cudaError_t LaunchWithAttribute(cudaLaunchAttribute attr, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                void (*kernel)(Params...), Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// The merge is launched with programmatic dependent launch on sm_90 and newer: its launch
// overlaps the attention kernel's tail (H200, 32K: 1-3 us, 1-1.7 %, of a 3D call; see
// docs/kernels.md). LADDER_KERNELS_PDL=0 launches it plainly (for A/B runs).
bool MergeLaunchOverlaps() {
  static const bool on = [] {
    const char* v = std::getenv("LADDER_KERNELS_PDL");
    if (v != nullptr && std::strcmp(v, "0") == 0) return false;
    int dev = 0, major = 0;
    return rt::GetDevice(&dev) == rt::kSuccess && rt::ComputeMajor(&major, dev) == rt::kSuccess && major >= 9;
  }();
  return on;
}
#endif

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
  char bus[32];
  std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", static_cast<unsigned>(prop.pciDomainID),
                static_cast<unsigned>(prop.pciBusID), static_cast<unsigned>(prop.pciDeviceID));
  info.pci_bus_id = bus;
  return info;
}

Result<int> CtasPerSm(const AttentionShape& shape, int max_query_len) {
  LADDER_K_TRY(shape.Validate());
  const Geometry g = GeometryOf(shape, max_query_len);
  LADDER_K_ASSIGN_OR_RETURN(const KernelEntry* e, FindKernel(shape, g.block_m, g.score_cols));
  int n = 0;
  LADDER_GPU_CALL(rt::Occupancy(&n, e->fn, e->threads, e->smem));
  if (n < 1) return Error(ErrorCode::kUnsupported, "attention kernel does not fit on this device's multiprocessor");
  return n;
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
  const int group = p.shape.q_heads / p.shape.kv_heads;
  if (group > 32) return Error(ErrorCode::kUnsupported, "GQA group > 32 q heads per KV head");
  const Geometry g = GeometryOf(p);
  LADDER_K_ASSIGN_OR_RETURN(const KernelEntry* e, FindKernel(p.shape, g.block_m, g.score_cols));
  LaunchPlan plan;
  plan.path = path;
  plan.segments = path == Path::k3D ? std::max(1, segments) : 1;
  if (plan.segments > kMaxSegments)
    return Error(ErrorCode::kInvalidArgument, "more than " + std::to_string(kMaxSegments) + " segments");
  const long long items = static_cast<long long>(p.num_seqs) * g.qblocks * p.shape.kv_heads * plan.segments;
  const long long units = static_cast<long long>(g.score_cols) * ((p.shape.head_dim + 127) / 128);
  plan.merge_in_kernel = path == Path::k3D && MergesInKernel(*e, items, units, plan.segments);
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s grid %dx%dx%d %s (%d thr, BM %d, tile %d, %d stages)%s",
                path == Path::k3D ? "3D" : "2D", p.num_seqs * g.qblocks, p.shape.kv_heads, plan.segments,
                e->name, e->threads, g.block_m, e->tile, e->stages,
                path != Path::k3D    ? ""
                : plan.merge_in_kernel ? " + merge in kernel"
                                       : (" + merge " + std::to_string(p.num_tokens) + "x" + std::to_string(p.shape.q_heads)).c_str());
  plan.grid = buf;
  // A timing diagnostic left set would make every result garbage: say so wherever the plan shows.
  if (const char* d = std::getenv("LADDER_KERNELS_DIAG"); d != nullptr && std::atoi(d) != 0)
    plan.grid += std::string(" [LADDER_KERNELS_DIAG=") + d + ": timing only, outputs invalid]";
  return plan;
}

// Whether a call's K/V copies go under an L2 evict-first policy: where the K/V it reads (at
// most: every sequence at its block table's length, or its window) is larger than L2, so the
// stream would evict the 3D partials before the merge reads them. H200 32K, against no hint in
// the same run: gemma4-31b-global -1.9 / -2.5 / -1 us at 1 / 2 / 4 rows, llama-70b -1.4 us,
// gemma4-dense-256 unchanged; gemma4-31b-sliding (16 MB: window 1024) +0.7 us, as back-to-back
// calls no longer find their K/V in L2. LADDER_KERNELS_EVICT_FIRST=0 / 1: never / always.
bool StreamEvictsFirst(const DeviceProblem& p) {
#if defined(LADDER_KERNELS_HIP)
  (void)p;
  return false;  // (the hinted copies are CUDA's)
#else
  static const int mode = [] {
    const char* v = std::getenv("LADDER_KERNELS_EVICT_FIRST");
    return v == nullptr || *v == 0 ? -1 : std::atoi(v) != 0 ? 1 : 0;
  }();
  if (mode >= 0) return mode == 1;
  static const long long l2 = [] {
    int dev = 0, bytes = 0;
    if (rt::GetDevice(&dev) != rt::kSuccess) return 0LL;
    return cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, dev) == cudaSuccess ? static_cast<long long>(bytes) : 0LL;
  }();
  long long keys = static_cast<long long>(p.max_blocks_per_seq) * p.shape.block_size;
  if (p.shape.window > 0) keys = std::min<long long>(keys, p.shape.window + p.max_query_len);
  const long long kv_bytes = 2LL * p.num_seqs * keys * p.shape.kv_heads * p.shape.head_dim * 2;
  return l2 > 0 && kv_bytes > l2;
#endif
}

// Bytes of the 3D partials; the merge flags (8-byte aligned: head_dim is even) follow them.
size_t PartialBytes(const DeviceProblem& p, const LaunchPlan& plan) {
  const size_t slots = static_cast<size_t>(p.num_tokens) * p.shape.q_heads * plan.segments;
  return slots * p.shape.head_dim * 4 + 2 * slots * 4;
}
size_t MergeFlagBytes(const DeviceProblem& p, const LaunchPlan& plan) {
  if (!plan.merge_in_kernel) return 0;
  const Geometry g = GeometryOf(p);
  return sizeof(unsigned long long) * p.num_seqs * g.qblocks * p.shape.kv_heads * plan.segments;
}

size_t WorkspaceBytes(const DeviceProblem& p, const LaunchPlan& plan) {
  if (plan.path != Path::k3D) return 0;
  return PartialBytes(p, plan) + MergeFlagBytes(p, plan);
}

Status Launch(const DeviceProblem& p, const LaunchPlan& plan, void* workspace, size_t workspace_bytes,
              void* stream) {
  if (workspace_bytes < WorkspaceBytes(p, plan))
    return Error(ErrorCode::kInvalidArgument, "workspace too small for the 3D segment buffer");
  // (The merge drops the partials' 128-byte L2 lines once read: they must not share a line.)
  if (plan.path == Path::k3D && reinterpret_cast<uintptr_t>(workspace) % 128 != 0)
    return Error(ErrorCode::kInvalidArgument, "the 3D workspace must be 128-byte aligned (as cudaMalloc's is)");
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
  static const int diag = [] {
    const char* v = std::getenv("LADDER_KERNELS_DIAG");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  kp.diag = diag;
  kp.evict_first = StreamEvictsFirst(p) ? 1 : 0;
  kp.timeline = nullptr;
  if (TimelineOn()) {
    LADDER_K_ASSIGN_OR_RETURN(kp.timeline, TimelineBuffer());
    const size_t items = static_cast<size_t>(p.num_seqs) * g.qblocks * p.shape.kv_heads * plan.segments;
    if (items > kTimelineItems) kp.timeline = nullptr;
  }

  if (kp.write_partial) {
    const size_t slots = static_cast<size_t>(p.num_tokens) * p.shape.q_heads * plan.segments;
    kp.seg_acc = static_cast<float*>(workspace);
    kp.seg_max = kp.seg_acc + slots * p.shape.head_dim;
    kp.seg_sum = kp.seg_max + slots;
  }
  LADDER_K_ASSIGN_OR_RETURN(const KernelEntry* e, FindKernel(p.shape, g.block_m, g.score_cols));
  const dim3 grid(p.num_seqs * g.qblocks, p.shape.kv_heads, plan.segments);
  const rt::Stream st = static_cast<rt::Stream>(stream);
  kp.merge_in_kernel = 0;
  kp.merge_flags = nullptr;
  kp.epoch = 0;
#if !defined(LADDER_KERNELS_HIP)
  // Not while the stream is being captured into a graph: a replay would reuse the captured
  // epoch, and the work groups would find their flags already set by the previous replay.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (plan.merge_in_kernel && cudaStreamIsCapturing(st, &capture) != cudaSuccess) {
    (void)cudaGetLastError();
    capture = cudaStreamCaptureStatusActive;
  }
  if (plan.merge_in_kernel && kp.write_partial && diag != 3 && capture == cudaStreamCaptureStatusNone) {
    static std::atomic<unsigned long long> epochs{0};
    kp.merge_in_kernel = 1;
    kp.merge_flags = reinterpret_cast<unsigned long long*>(static_cast<char*>(workspace) + PartialBytes(p, plan));
    kp.epoch = ++epochs;
    cudaLaunchAttribute cooperative{};
    cooperative.id = cudaLaunchAttributeCooperative;
    cooperative.val.cooperative = 1;
    const cudaError_t err = LaunchWithAttribute(cooperative, grid, dim3(e->threads), e->smem, st, e->fn, kp);
    if (err == cudaSuccess) return OkStatus();
    // Another client holds part of the device: fall back to the merge kernel.
    if (err != cudaErrorCooperativeLaunchTooLarge) LADDER_GPU_CALL(err);
    (void)cudaGetLastError();
    kp.merge_in_kernel = 0;
  }
#endif
  e->fn<<<grid, e->threads, e->smem, st>>>(kp);
  LADDER_GPU_CALL(rt::GetLastError());
  if (kp.write_partial && diag != 3) {  // 3: no merge (what the merge costs a call)
    // LADDER_KERNELS_MERGE=0: the two-pass merge (A/B runs); default the grouped one-round merge.
    static const bool grouped = [] {
      const char* v = std::getenv("LADDER_KERNELS_MERGE");
      return v == nullptr || std::strcmp(v, "0") != 0;
    }();
    const int per_block = grouped ? 4 * kGroupedMergeLanes : kMergeThreads;
    const dim3 mgrid(p.num_tokens, kp.q_heads, (p.shape.head_dim + per_block - 1) / per_block);
    const int mthreads = grouped ? kGroupedMergeThreads : kMergeThreads;
    const size_t msmem = grouped ? 0 : 2 * sizeof(float) * static_cast<size_t>(kp.segments);
    // The lean grouped merge where its grid is more than two work groups per SM (see
    // kGroupedMergePerLean); the same choice for the same shape and device every call. Not
    // where the plan merges inside the kernel and only a graph capture or a refused cooperative
    // launch brought the merge kernel here: it must give the in-kernel merge's bits.
    static const long long sms = [] {
      int dev = 0;
      rt::DeviceProp prop{};
      return rt::GetDevice(&dev) == rt::kSuccess && rt::Props(&prop, dev) == rt::kSuccess ? prop.multiProcessorCount : 0;
    }();
    const bool lean = !plan.merge_in_kernel && static_cast<long long>(mgrid.x) * mgrid.y * mgrid.z > 2 * sms;
    const bool bf16 = p.shape.dtype == DType::kBF16;
    auto* merge = !grouped ? (bf16 ? &MergeSegmentsKernel<dev::Bf16> : &MergeSegmentsKernel<dev::F16>)
                  : lean   ? (bf16 ? &MergeSegmentsGroupedKernel<dev::Bf16, kGroupedMergePerLean>
                                   : &MergeSegmentsGroupedKernel<dev::F16, kGroupedMergePerLean>)
                           : (bf16 ? &MergeSegmentsGroupedKernel<dev::Bf16, kGroupedMergePer>
                                   : &MergeSegmentsGroupedKernel<dev::F16, kGroupedMergePer>);
#if !defined(LADDER_KERNELS_HIP)
    // The attention kernels' shared-memory split for the merges too (see HoldStream).
    static const bool carveouts = [] {
      for (auto* k : {&MergeSegmentsGroupedKernel<dev::Bf16, kGroupedMergePer>,
                      &MergeSegmentsGroupedKernel<dev::F16, kGroupedMergePer>,
                      &MergeSegmentsGroupedKernel<dev::Bf16, kGroupedMergePerLean>,
                      &MergeSegmentsGroupedKernel<dev::F16, kGroupedMergePerLean>, &MergeSegmentsKernel<dev::Bf16>,
                      &MergeSegmentsKernel<dev::F16>})
        (void)cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
      return true;
    }();
    (void)carveouts;
    if (MergeLaunchOverlaps()) {
      // Programmatic dependent launch: the merge's launch overlaps the attention kernel's tail;
      // the merge waits (griddepcontrol.wait) for it before reading the partials.
      cudaLaunchAttribute pdl{};
      pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      pdl.val.programmaticStreamSerializationAllowed = 1;
      LADDER_GPU_CALL(LaunchWithAttribute(pdl, mgrid, dim3(mthreads), msmem, st, merge,
                                          static_cast<const float*>(kp.seg_acc), static_cast<const float*>(kp.seg_max),
                                          static_cast<const float*>(kp.seg_sum), kp.out, kp.q_heads, kp.segments,
                                          p.shape.head_dim, kp.evict_first));
      return OkStatus();
    }
#endif
    merge<<<mgrid, mthreads, msmem, st>>>(kp.seg_acc, kp.seg_max, kp.seg_sum, kp.out, kp.q_heads, kp.segments,
                                               p.shape.head_dim, kp.evict_first);
    LADDER_GPU_CALL(rt::GetLastError());
  }
  return OkStatus();
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

// Each timed call starts behind a kernel that holds the stream for kHoldNs, so that the host has
// queued the start event, the call's kernels and the end event before the GPU reaches them: the
// events then time the GPU's work, not the host's launch calls between them (the idea of
// nvbench's blocking kernel). The copy ceiling is timed the same way. LADDER_KERNELS_HOLD=0
// times without it (CUDA only; HIP times plainly).
constexpr unsigned long long kHoldNs = 100000;
__global__ void HoldStreamKernel(unsigned long long ns) {
  const unsigned long long t0 = dev::GlobalTimerNs();
  while (dev::GlobalTimerNs() - t0 < ns) {
  }
}
bool HoldOn() {
#if defined(LADDER_KERNELS_HIP)
  return false;
#else
  static const bool on = [] {
    const char* v = std::getenv("LADDER_KERNELS_HOLD");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
#endif
}
// On `st` (nullptr: the default stream).
Status HoldStream(rt::Stream st = nullptr) {
#if !defined(LADDER_KERNELS_HIP)
  if (HoldOn()) {
    // With the attention kernels' shared-memory split, so that no SM reconfigures its L1 /
    // shared memory between the hold and the timed kernel.
    static const cudaError_t carveout = cudaFuncSetAttribute(
        HoldStreamKernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    (void)carveout;
    HoldStreamKernel<<<1, 1, 0, st>>>(kHoldNs);
    LADDER_GPU_CALL(rt::GetLastError());
  }
#else
  (void)st;
#endif
  return OkStatus();
}

// LADDER_KERNELS_TIMELINE=1: after timing a point, print when the team kernel's work groups of
// the last call started, left the key loop, had written their partials (merge in the kernel)
// and ended, relative to the first start (a diagnostic for tail effects: with one work group
// per SM, an SM whose group ends early idles until the last one ends).
void PrintTimeline(int items) {
  constexpr int F = kTimelineFields;
  std::vector<unsigned long long> t(static_cast<size_t>(items) * F);
  const Result<unsigned long long*> buf = TimelineBuffer();
  if (!buf.ok() || rt::CopyD2H(t.data(), *buf, t.size() * sizeof(t[0])) != rt::kSuccess) return;
  unsigned long long t0 = ~0ull;
  for (int i = 0; i < items; ++i)
    if (t[F * i] != 0) t0 = std::min(t0, t[F * i]);
  std::vector<double> at[4];  // start, loop end, partials written, end
  for (int i = 0; i < items; ++i)
    for (int f = 0; f < 4; ++f)
      if (t[F * i] != 0 && t[F * i + f] != 0) at[f].push_back((t[F * i + f] - t0) * 1e-3);
  if (at[0].empty()) return;
  for (auto& v : at) std::sort(v.begin(), v.end());
  auto q = [](const std::vector<double>& v, double f) { return v.empty() ? 0.0 : v[static_cast<size_t>(f * (v.size() - 1))]; };
  std::fprintf(stderr, "timeline (%zu groups, us): start p50 %.2f max %.2f | loop end p10 %.2f p50 %.2f max %.2f | "
               "written p50 %.2f max %.2f | end min %.2f p10 %.2f p50 %.2f p90 %.2f max %.2f\n",
               at[0].size(), q(at[0], 0.5), q(at[0], 1.0), q(at[1], 0.1), q(at[1], 0.5), q(at[1], 1.0), q(at[2], 0.5),
               q(at[2], 1.0), q(at[3], 0.0), q(at[3], 0.1), q(at[3], 0.5), q(at[3], 0.9), q(at[3], 1.0));
}

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
    LADDER_K_TRY(HoldStream());
    LADDER_GPU_CALL(rt::EventRecord(ev.a));
    LADDER_K_TRY(Launch(p, plan, workspace, workspace_bytes));
    LADDER_GPU_CALL(rt::EventRecord(ev.b));
    LADDER_GPU_CALL(rt::EventSync(ev.b));
    float ms = 0;
    LADDER_GPU_CALL(rt::EventMs(&ms, ev.a, ev.b));
    us.push_back(ms * 1000.0);
  }
  if (TimelineOn()) PrintTimeline(static_cast<int>(std::min<size_t>(kTimelineItems, static_cast<size_t>(p.num_seqs) *
                                                                          GeometryOf(p).qblocks * p.shape.kv_heads * plan.segments)));
  return us;
}

unsigned long long HoldNs() { return HoldOn() ? kHoldNs : 0; }

namespace {
// Move-only owners of a stream, and of a graph with its executable form.
struct OwnedStream {
  rt::Stream s = nullptr;
  OwnedStream() = default;
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  ~OwnedStream() {
    if (s) (void)rt::StreamDestroy(s);
  }
};
struct OwnedGraph {
  rt::Graph g = nullptr;
  rt::GraphExec e = nullptr;
  OwnedGraph() = default;
  OwnedGraph(const OwnedGraph&) = delete;
  OwnedGraph& operator=(const OwnedGraph&) = delete;
  ~OwnedGraph() {
    if (e) (void)rt::GraphExecDestroy(e);
    if (g) (void)rt::GraphDestroy(g);
  }
};
}  // namespace

Result<std::vector<double>> TimeGraphReplays(const DeviceProblem& p, const LaunchPlan& plan, void* workspace,
                                             size_t workspace_bytes, int warmup, int repeats, int graph_calls) {
  if (graph_calls < 1 || repeats < 1 || warmup < 0)
    return Error(ErrorCode::kInvalidArgument, "graph timing needs graph_calls >= 1, repeats >= 1, warmup >= 0");
  EventPair ev;
  LADDER_K_TRY(ev.Init());
  OwnedStream stream;
  LADDER_GPU_CALL(rt::StreamCreate(&stream.s));
  // The warm-up as plain launches: every kernel's attributes are set and its code loaded before
  // the capture, which admits no such calls.
  for (int i = 0; i < warmup; ++i) LADDER_K_TRY(Launch(p, plan, workspace, workspace_bytes, stream.s));
  LADDER_GPU_CALL(rt::StreamSync(stream.s));
  OwnedGraph graph;
  LADDER_GPU_CALL(rt::BeginCapture(stream.s));
  for (int i = 0; i < graph_calls; ++i) {
    const Status st = Launch(p, plan, workspace, workspace_bytes, stream.s);
    if (!st.ok()) {
      rt::Graph partial = nullptr;
      if (rt::EndCapture(stream.s, &partial) == rt::kSuccess && partial != nullptr) (void)rt::GraphDestroy(partial);
      (void)rt::GetLastError();
      return st.error();
    }
  }
  LADDER_GPU_CALL(rt::EndCapture(stream.s, &graph.g));
  LADDER_GPU_CALL(rt::GraphInstantiate(&graph.e, graph.g));
  LADDER_GPU_CALL(rt::GraphLaunch(graph.e, stream.s));  // the first replay uploads the graph: untimed
  LADDER_GPU_CALL(rt::StreamSync(stream.s));
  std::vector<double> us;
  for (int i = 0; i < repeats; ++i) {
    LADDER_K_TRY(HoldStream(stream.s));
    LADDER_GPU_CALL(rt::EventRecordOn(ev.a, stream.s));
    LADDER_GPU_CALL(rt::GraphLaunch(graph.e, stream.s));
    LADDER_GPU_CALL(rt::EventRecordOn(ev.b, stream.s));
    LADDER_GPU_CALL(rt::EventSync(ev.b));
    float ms = 0;
    LADDER_GPU_CALL(rt::EventMs(&ms, ev.a, ev.b));
    us.push_back(ms * 1000.0 / graph_calls);
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
    LADDER_K_TRY(HoldStream());
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
