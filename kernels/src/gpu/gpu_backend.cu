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
#include "gpu/column_teams_kernel.h"
#include "gpu/split_keys_kernel.h"
#include "gpu/team_attention_kernel.h"
#endif
#include "gpu_api.h"
#include "numeric.h"

namespace ladder::kernels::gpu {
namespace {

KernelError DeviceError(rt::Error e, const char* call, const char* file, int line) {
  return Error(ErrorCode::kDeviceError, std::string(call) + " failed at " + file + ":" +
                                            std::to_string(line) + ": " + rt::ErrorString(e));
}

// Turns a runtime error into a KernelError once, here, with the call and file:line.
#define LADDER_GPU_CALL(expr)                                       \
  do {                                                              \
    const ::ladder::kernels::gpu::rt::Error ladder_gpu_e_ = (expr); \
    if (ladder_gpu_e_ != ::ladder::kernels::gpu::rt::kSuccess)      \
      return DeviceError(ladder_gpu_e_, #expr, __FILE__, __LINE__); \
  } while (0)

template <class E>
__global__ void FillKernel(uint16_t* dst, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = E::FromFloat(internal::HashToValue(seed, i) * scale);
}

// Facts of device 0 the dispatch and the launches need, asked once per process (an engine
// plans hundreds of calls per decode step).
struct GpuFacts {
  int sms = 0;
  int cc_major = 0, cc_minor = 0;
  long long l2_bytes = 0;
  size_t smem_optin = 0;     // shared memory a work group may opt in to
  bool cooperative = false;  // cooperative launches supported
};
Result<GpuFacts> QueryFacts() {
  int dev = 0;
  LADDER_GPU_CALL(rt::GetDevice(&dev));
  rt::DeviceProp prop{};
  LADDER_GPU_CALL(rt::Props(&prop, dev));
  GpuFacts f;
  f.sms = prop.multiProcessorCount;
  f.cc_major = prop.major;
  f.cc_minor = prop.minor;
  f.l2_bytes = prop.l2CacheSize;
#if !defined(LADDER_KERNELS_HIP)
  int optin = 0, coop = 0;
  LADDER_GPU_CALL(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  LADDER_GPU_CALL(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
  f.smem_optin = static_cast<size_t>(optin);
  f.cooperative = coop != 0;
#endif
  return f;
}
Result<GpuFacts> Facts() {
  static const Result<GpuFacts> facts = QueryFacts();
  return facts;
}

// Tile shape of the generic kernel per head dim: KV tile (keys), threads, K/V stages for BM 16
// and BM 32, work groups per SM asked of the register allocator (launch bounds). Each is the
// shape that won its head dim's sweep on the H200 (docs/kernels.md); the losers were deleted.
// kWideThreads: the work group of the wide kernel (TuningConfig::wide_work_groups), 0 where there
// is none.
template <int D>
struct Cfg {  // head 64 / 128
  static constexpr int kTile = 64, kThreads = 128, kStages16 = 2, kStages32 = 2, kMinBlocks = 1;
  static constexpr int kWideThreads = D == 128 ? 256 : 0;
};
template <>
struct Cfg<256> {  // 4 warps, 2 stages
  static constexpr int kTile = 32, kThreads = 128, kStages16 = 2, kStages32 = 2, kMinBlocks = 1;
  static constexpr int kWideThreads = 256;
};
template <>
struct Cfg<512> {  // 32-key tiles (half the barriers per byte of 16-key ones), 8 warps
  static constexpr int kTile = 32, kThreads = 256, kStages16 = 3, kStages32 = 2, kMinBlocks = 1;
  static constexpr int kWideThreads = 0;
};

// One instantiated attention kernel, as the host sees it (every instantiation has the same
// function type).
struct KernelEntry {
  void (*fn)(KernelParams) = nullptr;
  const char* name = "unified";  // in the plan's grid description
  int threads = 0, stages = 0, tile = 0;
  size_t smem = 0;
  rt::Error attr = rt::kSuccess;  // setting its dynamic shared-memory limit
  int ctas_per_sm = 0;   // (generic) its work groups resident on one SM at once; 0 if not asked
  bool generic = false;  // the generic kernel (UnifiedAttentionKernel), whose width may change
  bool merges_in_kernel =
      false;                // can merge its 3D partials itself (KernelParams::merge_in_kernel)
  int merge_units = 0;      // ... taking at most this many (column, 128 dims) units per work group
  int resident_per_sm = 0;  // (merges_in_kernel) work groups per SM at once, asked once
  rt::Error occupancy = rt::kSuccess;  // asking resident_per_sm
  // The generic kernel whose segments merge in their cluster (CUDA, sm_90 machine code), and
  // for each cluster size 2..kClusterMergeMaxSegments how many such clusters the device runs at
  // once (asked once: a cluster's work groups must be resident in one GPC together, so GPCs
  // with SMs left over hold fewer than SMs x work groups per SM / size).
  void (*cluster_fn)(KernelParams) = nullptr;
  int clusters_at_once[kClusterMergeMaxSegments + 1] = {};
};

#if !defined(LADDER_KERNELS_HIP)
// The launch attributes of a cluster of `size` work groups along z (a query block's segments),
// its work groups spread over the GPC's SMs. (Against the default placement: the same times
// within 1 %, H200. Both lose where clusters pack onto some GPCs while others idle, it seems:
// gemma4-dense-256 at 8K, 16 clusters of 8, 66 against 54 us for the same split without.)
void ClusterAttributes(int size, cudaLaunchAttribute (&attrs)[2]) {
  attrs[0] = cudaLaunchAttribute{};
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = 1;
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = static_cast<unsigned>(size);
  attrs[1] = cudaLaunchAttribute{};
  attrs[1].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
  attrs[1].val.clusterSchedulingPolicyPreference = cudaClusterSchedulingPolicySpread;
}

// How many clusters of `size` work groups of `fn` this device runs at once, once its attributes
// are set; 0 on any refusal (a device without clusters among them), which the plan then answers
// with the merge kernel.
int ClustersAtOnce(void (*fn)(KernelParams), int threads, size_t smem, int size) {
  cudaLaunchAttribute attrs[2];
  ClusterAttributes(size, attrs);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(1, 1, static_cast<unsigned>(size));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.attrs = attrs;
  cfg.numAttrs = 2;
  int clusters = 0;
  const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, fn, &cfg);
  if (e != cudaSuccess) (void)cudaGetLastError();  // the refusal is an answer, not an error
  return e == cudaSuccess ? clusters : 0;
}
#endif

// Sets k->ctas_per_sm once, where its shared-memory limit was set (MakePlan compares the two
// generic widths'; the policy splits for it): a refusal leaves 0, which never matches.
void AskResidency(KernelEntry* k) {
  if (k->attr == rt::kSuccess &&
      rt::Occupancy(&k->ctas_per_sm, k->fn, k->threads, k->smem) != rt::kSuccess) {
    k->ctas_per_sm = 0;
    (void)rt::GetLastError();
  }
}

template <class E, int D, int BM, bool kWide>
const KernelEntry& GenericEntry() {
  using C = Cfg<D>;
  constexpr int TN = C::kTile;
  constexpr int ST = BM == 16 ? C::kStages16 : C::kStages32;
  constexpr int NT = kWide ? C::kWideThreads : C::kThreads;
  static_assert(NT > 0, "no wide kernel at this head dim");
  using Sh = KernelShape<D, BM, TN, NT, ST>;
  static const KernelEntry e = [] {
    KernelEntry k;
    k.fn = &UnifiedAttentionKernel<E, D, BM, TN, NT, ST, C::kMinBlocks>;
    k.generic = true;
    k.threads = NT;
    k.stages = ST;
    k.tile = TN;
    k.smem = Sh::kSmemBytes;
    k.attr = rt::SetMaxDynamicSmem(k.fn, static_cast<int>(Sh::kSmemBytes));
    AskResidency(&k);
#if !defined(LADDER_KERNELS_HIP) && defined(LADDER_KERNELS_SM90A)
    // Once per process, like the team kernels' occupancy; only the sm_90a machine code has the
    // cluster merge (elsewhere it traps), so only a compute capability 9.0 device asks.
    int major = 0, minor = 0, dev = 0;
    if (k.attr == rt::kSuccess && cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
        major == 9 && minor == 0) {
      auto* fn = &UnifiedAttentionKernel<E, D, BM, TN, NT, ST, C::kMinBlocks, true>;
      if (rt::SetMaxDynamicSmem(fn, static_cast<int>(Sh::kSmemBytes)) == rt::kSuccess &&
          cudaFuncSetAttribute(fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
              cudaSuccess) {
        k.cluster_fn = fn;
        for (int size = 2; size <= kClusterMergeMaxSegments; ++size)
          k.clusters_at_once[size] = ClustersAtOnce(fn, k.threads, k.smem, size);
      }
      (void)cudaGetLastError();  // a refused attribute leaves the merge kernel, not an error
    }
#endif
    return k;
  }();
  return e;
}

#if !defined(LADDER_KERNELS_HIP)
template <class E, int NT, TeamScoring kScoring>
const KernelEntry& TeamEntry() {
  using Sh = TeamShape<NT>;
  static const KernelEntry e = [] {
    KernelEntry k;
    k.fn = &TeamAttention512Kernel<E, NT, kScoring>;
    static constexpr const char* kNames[4] = {"team512", "team512 by column, bulk copies",
                                              "team512 split scores",
                                              "team512 split scores, wgmma"};
    k.name = kNames[static_cast<int>(kScoring)];
    k.merges_in_kernel = true;
    k.merge_units = Sh::kMergeUnits;
    k.threads = Sh::kThreads;
    k.stages = Sh::kStages;
    k.tile = Sh::kChunk;
    k.smem = Sh::kSmemBytes;
    k.attr = rt::SetMaxDynamicSmem(k.fn, static_cast<int>(Sh::kSmemBytes));
    // Once per process: the device entry plans every launch (engines launch hundreds per step).
    // The result is checked where it is used (MergesInKernel).
    if (k.attr == rt::kSuccess)
      k.occupancy = rt::Occupancy(&k.resident_per_sm, k.fn, k.threads, k.smem);
    return k;
  }();
  return e;
}
#endif

#if !defined(LADDER_KERNELS_HIP)
template <class E>
const KernelEntry& ColumnTeamsEntry() {
  using Sh = ColumnTeamsShape;
  static const KernelEntry e = [] {
    KernelEntry k;
    k.fn = &ColumnTeamsAttention512Kernel<E>;
    k.name = "team512 column teams";
    k.threads = Sh::kThreads;
    k.stages = Sh::kStages;
    k.tile = Sh::kChunk;
    k.smem = Sh::kSmemBytes;
    k.attr = rt::SetMaxDynamicSmem(k.fn, static_cast<int>(Sh::kSmemBytes));
    return k;
  }();
  return e;
}

template <class E, int D>
const KernelEntry& SplitKeysEntry() {
  using Sh = SplitKeysShape<D>;
  static const KernelEntry e = [] {
    KernelEntry k;
    k.fn = &SplitKeysAttentionKernel<E, D>;
    k.name = "split keys";
    k.threads = Sh::kThreads;
    k.stages = Sh::kStages;
    k.tile = Sh::kTile;
    k.smem = Sh::kSmemBytes;
    k.attr = rt::SetMaxDynamicSmem(k.fn, static_cast<int>(Sh::kSmemBytes));
    AskResidency(&k);
    return k;
  }();
  return e;
}
#endif

// What a row of the table needs of the device beyond the build.
enum class Needs {
  kNothing,
  kMmaSync,           // mma.sync and ldmatrix (compute capability >= 8.0)
  kTeamSharedMemory,  // ~210 KB of shared memory per work group (Hopper)
  kSm90a,             // ... and this build's sm_90a machine code running (compute capability 9.0)
};

// One row of the dispatch table. Score columns = query rows x q heads per KV head of the
// largest work item; the generic kernels are chosen by block rows (BM) instead.
struct VariantRow {
  int head_dim;
  int block_m;             // generic: 16 or 32; team kernels: 0 (any)
  int min_cols, max_cols;  // team kernels: the score columns they take
  Head512Kernel kernel;    // kGeneric for the generic kernel of every head dim
  Needs needs;
  const KernelEntry& (*bf16)();
  const KernelEntry& (*f16)();
  bool wide = false;        // generic: the wide work group (TuningConfig::wide_work_groups)
  bool split_keys = false;  // the split-keys kernel, by score columns (TuningConfig::split_keys)
};

template <int D, int BM, bool kWide = false>
constexpr VariantRow Generic() {
  return {D,
          BM,
          0,
          32,
          Head512Kernel::kGeneric,
          Needs::kNothing,
          &GenericEntry<dev::Bf16, D, BM, kWide>,
          &GenericEntry<dev::F16, D, BM, kWide>,
          kWide};
}
#if !defined(LADDER_KERNELS_HIP)
template <int D>
constexpr VariantRow SplitKeys() {
  return {D,
          16,
          1,
          SplitKeysShape<D>::kCols,
          Head512Kernel::kGeneric,
          Needs::kMmaSync,
          &SplitKeysEntry<dev::Bf16, D>,
          &SplitKeysEntry<dev::F16, D>,
          false,
          true};
}
template <int NT, TeamScoring kScoring>
constexpr VariantRow Team(Head512Kernel kernel, int min_cols, int max_cols, Needs needs) {
  return {512,
          0,
          min_cols,
          max_cols,
          kernel,
          needs,
          &TeamEntry<dev::Bf16, NT, kScoring>,
          &TeamEntry<dev::F16, NT, kScoring>};
}
constexpr VariantRow ColumnTeams() {
  return {512,
          0,
          33,
          40,
          Head512Kernel::kTeamColumns,
          Needs::kTeamSharedMemory,
          &ColumnTeamsEntry<dev::Bf16>,
          &ColumnTeamsEntry<dev::F16>};
}
#endif

// The dispatch table: every instantiated attention kernel, one place. A (head dim, BM or score
// columns, tuning) the table has no row for is refused by name (FindKernel).
constexpr VariantRow kVariantTable[] = {
    Generic<64, 16>(),
    Generic<64, 32>(),
    Generic<128, 16>(),
    Generic<128, 32>(),
    Generic<128, 16, true>(),
    Generic<128, 32, true>(),
    Generic<256, 16>(),
    Generic<256, 32>(),
    Generic<256, 16, true>(),
    Generic<256, 32, true>(),
    Generic<512, 16>(),
    Generic<512, 32>(),
#if !defined(LADDER_KERNELS_HIP)
    // The split-keys decode kernel (split_keys_kernel.h): one 8-column n-tile. (Two n-tiles, 9-16
    // columns, lost to the generic kernel, 0.85-0.99 at llama-70b's two rows: deleted.)
    SplitKeys<128>(),
    SplitKeys<256>(),
    // Head 512 on Hopper (team_attention_kernel.h). By dims at one query row of GQA 8, copies by
    // cp.async (by bulk copy it lost 4-6 % below ~10K keys and won at most 2.8 % above, TP=2 not
    // monotone: kernels-ab-bulk, kernels-locate-bulk; deleted).
    Team<1, TeamScoring::kByDims>(Head512Kernel::kTeamByDims, 1, 8, Needs::kTeamSharedMemory),
    // By column at 16 columns, with bulk copies: one warp per team issues them while the two
    // non-scoring warps wait anyway (H200, 2 rows at 32K: 80.3-81.5 us against 82.9-85.1).
    Team<2, TeamScoring::kByColumn>(Head512Kernel::kTeamByColumn, 9, 16, Needs::kTeamSharedMemory),
    // Split scores at 32 columns (85 against 95.5 us by column); with O^T by wgmma where the
    // sm_90a machine code runs (H200, 4 rows: kernels-ab-wgmma, 1.039-1.059x without).
    Team<4, TeamScoring::kSplit>(Head512Kernel::kTeamSplit, 17, 32, Needs::kTeamSharedMemory),
    Team<4, TeamScoring::kSplitWgmma>(Head512Kernel::kTeamSplitWgmma, 17, 32, Needs::kSm90a),
    // 33-40 columns (five rows of GQA 8) in one query block: K and V read once
    // (column_teams_kernel.h), where two 32-column query blocks read them twice.
    ColumnTeams(),
#endif
};

Result<bool> TeamKernelFits() {
#if defined(LADDER_KERNELS_HIP)
  return false;
#else
  LADDER_K_ASSIGN_OR_RETURN(const GpuFacts f, Facts());
  return f.cc_major >= 8 && f.smem_optin >= TeamShape<4>::kSmemBytes;
#endif
}

// Whether this build's sm_90a machine code is what runs here (a compute capability 9.0 device):
// only there do the wgmma kernels exist.
Result<bool> WgmmaRuns() {
#if defined(LADDER_KERNELS_HIP) || !defined(LADDER_KERNELS_SM90A)
  return false;
#else
  LADDER_K_ASSIGN_OR_RETURN(const GpuFacts f, Facts());
  return f.cc_major == 9 && f.cc_minor == 0;
#endif
}

// The head-512 kernel kAuto means on this device at `score_cols` columns.
Result<Head512Kernel> DefaultHead512(int score_cols) {
  LADDER_K_ASSIGN_OR_RETURN(const bool team, TeamKernelFits());
  if (!team) return Head512Kernel::kGeneric;
  if (score_cols <= 8) return Head512Kernel::kTeamByDims;
  if (score_cols <= 16) return Head512Kernel::kTeamByColumn;
  if (score_cols > 32) return Head512Kernel::kTeamColumns;
  LADDER_K_ASSIGN_OR_RETURN(const bool wgmma, WgmmaRuns());
  return wgmma ? Head512Kernel::kTeamSplitWgmma : Head512Kernel::kTeamSplit;
}

// Whether the generic kernel that the policy's split is made for has the wide work group
// (TuningConfig::wide_work_groups). Under auto only the head dim decides here; head 256 may
// widen once the split is made (WidensAfterSplit).
bool WideWorkGroups(const AttentionShape& shape, const TuningConfig& tuning) {
  if (tuning.wide_work_groups != Switch::kAuto) return tuning.wide_work_groups == Switch::kOn;
#if defined(LADDER_KERNELS_HIP)
  (void)shape;
  return false;  // never run on an AMD GPU: the narrow work group stays until measured there
#else
  return shape.head_dim == 128;
#endif
}

// Whether split_keys=auto takes the split-keys kernel, where mma.sync runs, unless
// wide_work_groups=on asks for the generic kernel: at head 128 up to 8 score columns (one decode
// row of GQA 8), at head 256 up to 4 (two of GQA 2). H200, default / split keys through ladder
// (two runs each): llama-70b at one row 1.16-1.17 at 8K, 1.07 at 32K, 1.08-1.09 at 64K, 0.995
// at 1K, at 16 columns 0.85-0.99; head 256 at 2 columns 1.08-1.09 (sliding window), 1.18-1.19
// (its TP=2 preset), 1.08 / 1.00-1.015 (dense, 1K / from 8K), at 4 columns 1.00-1.11, at 8 columns
// 0.90-0.98 (docs/kernel-experiments.md).
Result<bool> SplitKeysByDefault(const AttentionShape& shape, int score_cols,
                                const TuningConfig& tuning) {
#if defined(LADDER_KERNELS_HIP)
  (void)shape, (void)score_cols, (void)tuning;
  return false;  // (no split-keys kernel in HIP builds)
#else
  if (tuning.split_keys != Switch::kAuto || tuning.wide_work_groups == Switch::kOn) return false;
  if (!(shape.head_dim == 128 && score_cols <= 8) && !(shape.head_dim == 256 && score_cols <= 4))
    return false;
  LADDER_K_ASSIGN_OR_RETURN(const GpuFacts f, Facts());
  return f.cc_major >= 8;
#endif
}

// The row of the table that (shape, BM, score columns, tuning) selects, or why there is none;
// `wide` picks the generic kernel's work group (WideWorkGroups, unless MakePlan widens).
Result<const VariantRow*> FindRow(const AttentionShape& shape, int block_m, int score_cols,
                                  const TuningConfig& tuning, bool wide_generic) {
  Head512Kernel kernel = Head512Kernel::kGeneric;
  if (shape.head_dim == 512) {
    kernel = tuning.head512;
    if (kernel == Head512Kernel::kAuto) {
      LADDER_K_ASSIGN_OR_RETURN(kernel, DefaultHead512(score_cols));
    }
  }
  const bool generic = kernel == Head512Kernel::kGeneric;
  LADDER_K_ASSIGN_OR_RETURN(const bool split_keys_auto,
                            SplitKeysByDefault(shape, score_cols, tuning));
  const bool split_keys = generic && (tuning.split_keys == Switch::kOn || split_keys_auto);
  const bool wide = generic && !split_keys && wide_generic;
  const VariantRow* found = nullptr;
  for (const VariantRow& row : kVariantTable) {
    if (row.head_dim != shape.head_dim || row.kernel != kernel || row.split_keys != split_keys)
      continue;
    if (generic && !split_keys ? row.block_m != block_m || row.wide != wide
                               : score_cols < row.min_cols || score_cols > row.max_cols)
      continue;
    found = &row;
    break;
  }
  if (found == nullptr) {
    std::string what = "no attention kernel for head_dim " + std::to_string(shape.head_dim);
    if (split_keys) {
      what += " at " + std::to_string(score_cols) +
              " score columns with split_keys=on (split-keys kernels: head 128 and 256, at most 8 "
              "score columns, CUDA)";
    } else if (generic) {
      what += " at BM " + std::to_string(block_m);
      if (wide) what += " with wide_work_groups=on (wide kernels: head 128 and 256)";
    } else {
      what += " as " + std::string(ToString(kernel)) + " at " + std::to_string(score_cols) +
              " score columns (query rows x q heads per KV head)";
#if defined(LADDER_KERNELS_HIP)
      what += "; HIP builds have the generic kernels only";
#endif
    }
    return Error(ErrorCode::kUnsupported, what);
  }
  if (found->needs == Needs::kMmaSync) {
    LADDER_K_ASSIGN_OR_RETURN(const GpuFacts f, Facts());
    if (f.cc_major < 8)
      return Error(ErrorCode::kUnsupported,
                   "the split-keys kernel needs mma.sync (compute capability 8.0 or newer)");
  }
  if (found->needs == Needs::kTeamSharedMemory || found->needs == Needs::kSm90a) {
    LADDER_K_ASSIGN_OR_RETURN(const bool fits, TeamKernelFits());
    if (!fits)
      return Error(ErrorCode::kUnsupported,
                   std::string(ToString(kernel)) +
                       " needs ~210 KB of shared memory per work group (Hopper)");
  }
  if (found->needs == Needs::kSm90a) {
    LADDER_K_ASSIGN_OR_RETURN(const bool wgmma, WgmmaRuns());
    if (!wgmma)
      return Error(ErrorCode::kUnsupported,
                   std::string(ToString(kernel)) +
                       " needs this build's sm_90a machine code on a compute capability 9.0 "
                       "device (configure with CMAKE_CUDA_ARCHITECTURES containing 90a-real)");
  }
  return found;
}

Result<const KernelEntry*> FindKernel(const AttentionShape& shape, int block_m, int score_cols,
                                      const TuningConfig& tuning, bool wide_generic) {
  if (shape.dtype != DType::kBF16 && shape.dtype != DType::kF16)
    return Error(ErrorCode::kUnsupported, "GPU backends take bf16 or f16 (f32 is CPU-only)");
  LADDER_K_TRY(tuning.Validate());
  LADDER_K_ASSIGN_OR_RETURN(const VariantRow* row,
                            FindRow(shape, block_m, score_cols, tuning, wide_generic));
  const KernelEntry& e = shape.dtype == DType::kBF16 ? row->bf16() : row->f16();
  LADDER_GPU_CALL(e.attr);
  return &e;
}

// Whether kernel `e` merges its partials itself: only where all `items` work groups fit on the
// device at once (the merge inside the kernel waits for other work groups, so they must all be
// resident: it is launched cooperatively), and only where each work group then merges at most
// its merge_units (column, 128 dims) units, all at once (the merge starts when the group's last
// work group arrives). H200, gemma4-31b-global 32K, against the merge kernel: -1.1 us at 1 row
// (32 units, 33 work groups), -0.5 to -0.7 us at 2 rows (64 units, two each); at 4 rows four
// units each were +1 us one after another and +1.2 us at once, so 32 columns take one.
Result<bool> MergesInKernel(const KernelEntry& e, long long items, long long units, int segments,
                            const TuningConfig& tuning) {
#if defined(LADDER_KERNELS_HIP)
  (void)e, (void)items, (void)units, (void)segments, (void)tuning;
  return false;
#else
  if (!e.merges_in_kernel || tuning.merge_in_kernel == Switch::kOff ||
      units > static_cast<long long>(e.merge_units) * segments)
    return false;
  LADDER_GPU_CALL(e.occupancy);
  LADDER_K_ASSIGN_OR_RETURN(const GpuFacts f, Facts());
  return f.cooperative && items <= static_cast<long long>(e.resident_per_sm) * f.sms;
#endif
}

// Whether a call asks for the cluster merge: merge_in_cluster=on, or auto for a sliding-window
// layer. A window bounds the keys every call reads, so at any depth the call is as short as at
// the window's and its time is fixed cost, of which the merge kernel's launch and grid
// completion are a part the cluster merge saves (H200, gemma4-31b-sliding at 2-5 query rows from
// 8K: 11 segments merged in their clusters, 7-15 % less time than through the merge kernel,
// docs/kernel-experiments.md). Without a window the cluster's wins and losses followed no rule.
bool WantsClusterMerge(const AttentionShape& shape, const TuningConfig& tuning) {
  return tuning.merge_in_cluster == Switch::kOn ||
         (tuning.merge_in_cluster == Switch::kAuto && shape.window > 0);
}

// Whether the generic kernel `e`'s `clusters` clusters of `segments` work groups merge in their
// cluster (WantsClusterMerge): 2-16 segments, the machine code has it, and all the clusters run
// at once. A second wave of clusters nearly doubles the call: H200, gemma4-dense-256 (16
// clusters of 16, 14 at once), 1.4-1.6x the merge kernel's time at every depth and row count.
bool MergesInCluster(const KernelEntry& e, const AttentionShape& shape, int segments,
                     long long clusters, const TuningConfig& tuning) {
  if (!WantsClusterMerge(shape, tuning) || e.cluster_fn == nullptr) return false;
  return segments >= 2 && segments <= kClusterMergeMaxSegments &&
         clusters <= e.clusters_at_once[segments];
}

// Whether a 3D call of the narrow generic kernel at head 256 takes the wide one instead (auto;
// MakePlan then checks the occupancy and the merge): where each query block sees at most 16K
// keys. H200, wide / narrow at the narrow kernel's split, through ladder (two runs):
// gemma4-dense-256 0.90-0.92 at 1K, 0.97-0.98 at 8K, 1.005-1.09 from 32K; the sliding window
// 0.90-0.93 where the merge kernel runs, 1.01-1.10 where it merges in clusters; TP=2's sliding
// layers 0.87-0.93 (docs/kernel-experiments.md).
bool WidensAfterSplit(const DeviceProblem& p, const TuningConfig& tuning) {
#if defined(LADDER_KERNELS_HIP)
  (void)p, (void)tuning;
  return false;  // (as WideWorkGroups)
#else
  constexpr int kMaxKeysSeen = 16384;
  return tuning.wide_work_groups == Switch::kAuto && p.shape.head_dim == 256 && p.max_kv_len > 0 &&
         KeysSeen(p.shape, p.max_kv_len, p.max_query_len) <= kMaxKeysSeen;
#endif
}

// Programmatic dependent launch on sm_90 and newer, unless `overlap` is off. The merge: its
// launch overlaps the attention kernel's tail (H200, 32K: 1-3 us, 1-1.7 %, of a 3D call; see
// docs/kernels.md). The attention kernel: its launch overlaps the end of the kernel ahead of it.
Result<bool> LaunchOverlaps(Switch overlap) {
#if defined(LADDER_KERNELS_HIP)
  (void)overlap;
  return false;
#else
  if (overlap == Switch::kOff) return false;
  LADDER_K_ASSIGN_OR_RETURN(const GpuFacts f, Facts());
  return f.cc_major >= 9;
#endif
}

// The merge kernel's grid: (query token, q head, 128 dims) per work group.
dim3 MergeGrid(const DeviceProblem& p) {
  constexpr int per_block = 4 * kGroupedMergeLanes;
  return dim3(p.num_tokens, p.shape.q_heads, (p.shape.head_dim + per_block - 1) / per_block);
}
long long MergeWorkGroups(const DeviceProblem& p) {
  const dim3 g = MergeGrid(p);
  return static_cast<long long>(g.x) * g.y * g.z;
}

// Where the merge lets the next call's attention kernel launch (release_next: auto, on). That
// kernel's work groups are placed on the SMs free when it launches. Where the merge holds more
// than one work group per SM, SMs free up as they exit, and a small attention grid lands packed
// (H200 timeline, graph replays): at TP=2 1K, 4 rows, its 64 work groups took both SMs of 31
// pairs of SM ids 2k, 2k + 1 (TPCs, presumably), where launched on an idle GPU they took both of
// 4 pairs (key loop 6.67 against 6.08 µs); at llama-70b 1K, 4 rows (a kernel that fits two to an
// SM) six SMs got two of its 128. There it launches at the merge's end. Else as the merge starts
// where twice the grid fits on the SMs: the next call's work groups take SMs this call leaves idle;
// elsewhere after the merge's wait, once the attention grid is complete, since a release from the
// start placed the next call's work groups beside this call's (llama-70b 1K, 2 rows: 1.09x the time
// without an early release; 0.97x after the wait). docs/kernel-experiments.md has the A/Bs.
LaunchPlan::Release ReleasePointOf(long long attention_groups, int ctas_per_sm,
                                   long long merge_groups, int sms) {
  const bool packs = merge_groups > sms &&
                     (2 * attention_groups <= sms || (ctas_per_sm > 1 && attention_groups <= sms));
  if (packs) return LaunchPlan::Release::kAtEnd;
  return 2 * attention_groups <= sms ? LaunchPlan::Release::kAtStart
                                     : LaunchPlan::Release::kAfterWait;
}

// What the grid says of the release where it is not the usual one (after the merge's wait).
const char* ReleaseNote(LaunchPlan::Release r, Switch asked) {
  if (r == LaunchPlan::Release::kAtStart) return ", releases the next at start";
  if (r == LaunchPlan::Release::kAtEnd && asked != Switch::kOff)
    return ", releases the next at its end";
  return "";
}

// A bound on the split: every segment costs a partial per query token and q head.
constexpr int kMaxSegments = 4096;

struct Geometry {
  int block_m, rows_per_qblock, qblocks, score_cols;
};
// Whether a call's query rows go to the column-teams kernel as one query block: head 512 at
// 33-40 score columns, where the tuning asks for it, or leaves it to auto on a device where the
// team kernels fit and the call has the work for it (internal::ColumnTeamsHaveWork). (Elsewhere
// 32-row blocks: two query blocks, each reading all of K and V.)
Result<bool> TakesColumnTeams(const AttentionShape& shape, int max_query_len,
                              const TuningConfig& tuning, bool column_work) {
  const int cols = shape.q_heads / shape.kv_heads * max_query_len;
  if (shape.head_dim != 512 || cols <= 32 || cols > 40) return false;
  if (tuning.head512 == Head512Kernel::kTeamColumns) return true;  // (FindRow says where it fails)
  if (tuning.head512 != Head512Kernel::kAuto || !column_work) return false;
  return TeamKernelFits();
}
Result<Geometry> GeometryOf(const AttentionShape& shape, int max_query_len,
                            const TuningConfig& tuning, bool column_work) {
  const int group = shape.q_heads / shape.kv_heads;
  LADDER_K_ASSIGN_OR_RETURN(const bool columns,
                            TakesColumnTeams(shape, max_query_len, tuning, column_work));
  if (columns) return Geometry{32, max_query_len, 1, group * max_query_len};
  const int rows = internal::GpuRowsPerQBlock(group, max_query_len);
  return Geometry{internal::GpuBlockM(group, max_query_len), rows,
                  internal::GpuQBlocks(group, max_query_len),
                  std::min(rows, max_query_len) * group};
}

// Whether a call's K/V copies go under an L2 evict-first policy: where the K/V it reads (at
// most: every sequence at its block table's length, or its window) is larger than L2, so the
// stream would evict the 3D partials before the merge reads them. H200 32K, against no hint in
// the same run: gemma4-31b-global -1.9 / -2.5 / -1 us at 1 / 2 / 4 rows, llama-70b -1.4 us,
// gemma4-dense-256 unchanged; gemma4-31b-sliding (16 MB: window 1024) +0.7 us, as back-to-back
// calls no longer find their K/V in L2.
Result<bool> StreamEvictsFirst(const DeviceProblem& p, const TuningConfig& tuning) {
#if defined(LADDER_KERNELS_HIP)
  (void)p, (void)tuning;
  return false;  // (the hinted copies are CUDA's)
#else
  if (tuning.evict_first != Switch::kAuto) return tuning.evict_first == Switch::kOn;
  LADDER_K_ASSIGN_OR_RETURN(const GpuFacts f, Facts());
  long long keys = static_cast<long long>(p.max_blocks_per_seq) * p.shape.block_size;
  if (p.shape.window > 0) keys = std::min<long long>(keys, p.shape.window + p.max_query_len);
  const long long kv_bytes = 2LL * p.num_seqs * keys * p.shape.kv_heads * p.shape.head_dim * 2;
  return f.l2_bytes > 0 && kv_bytes > f.l2_bytes;
#endif
}

#if !defined(LADDER_KERNELS_HIP)
// cudaLaunchKernelEx with one launch attribute (cooperative, programmatic serialization).
template <class... Params, class... Args>
cudaError_t LaunchWithAttribute(cudaLaunchAttribute attr, dim3 grid, dim3 block, size_t smem,
                                cudaStream_t stream, void (*kernel)(Params...), Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// The launch attribute of programmatic dependent launch: the kernel may start before the one
// ahead of it in the stream ends, and waits for it with griddepcontrol.wait.
cudaLaunchAttribute ProgrammaticSerialization() {
  cudaLaunchAttribute pdl{};
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  return pdl;
}

// The attention kernels' shared-memory split for the kernels around them too, so that no SM
// reconfigures its L1 / shared memory between a hold or merge kernel and an attention kernel.
template <class F>
rt::Error PreferMaxSharedCarveout(F* kernel) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                              cudaSharedmemCarveoutMaxShared);
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
                 std::string("no GPU device present") +
                     (e != rt::kSuccess ? std::string(" (") + rt::ErrorString(e) + ")" : ""));
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

Result<KernelFacts> FactsOfKernel(const AttentionShape& shape, int max_query_len,
                                  const TuningConfig& tuning, bool column_work) {
  LADDER_K_TRY(shape.Validate());
  LADDER_K_ASSIGN_OR_RETURN(const Geometry g,
                            GeometryOf(shape, max_query_len, tuning, column_work));
  LADDER_K_ASSIGN_OR_RETURN(const KernelEntry* e, FindKernel(shape, g.block_m, g.score_cols, tuning,
                                                             WideWorkGroups(shape, tuning)));
  int n = 0;
  LADDER_GPU_CALL(rt::Occupancy(&n, e->fn, e->threads, e->smem));
  if (n < 1)
    return Error(ErrorCode::kUnsupported,
                 "attention kernel does not fit on this device's multiprocessor");
  KernelFacts facts;
  facts.ctas_per_sm = n;
  facts.tile_keys = e->tile;
  facts.rows_per_qblock = g.rows_per_qblock;
  return facts;
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

Result<LaunchPlan> MakePlan(const DeviceProblem& p, Path path, int segments,
                            const TuningConfig& tuning) {
  LADDER_K_TRY(p.shape.Validate());
  const int group = p.shape.q_heads / p.shape.kv_heads;
  if (group > 32) return Error(ErrorCode::kUnsupported, "GQA group > 32 q heads per KV head");
  const bool column_work = internal::ColumnTeamsHaveWork(
      p.num_seqs, p.shape.kv_heads, KeysSeen(p.shape, p.max_kv_len, p.max_query_len));
  LADDER_K_ASSIGN_OR_RETURN(const Geometry g,
                            GeometryOf(p.shape, p.max_query_len, tuning, column_work));
  LADDER_K_ASSIGN_OR_RETURN(
      const KernelEntry* e,
      FindKernel(p.shape, g.block_m, g.score_cols, tuning, WideWorkGroups(p.shape, tuning)));
  LaunchPlan plan;
  plan.path = path;
  plan.segments = path == Path::k3D ? std::max(1, segments) : 1;
  if (plan.segments > kMaxSegments)
    return Error(ErrorCode::kInvalidArgument,
                 "more than " + std::to_string(kMaxSegments) + " segments");
  plan.kernel = e;
  plan.rows_per_qblock = g.rows_per_qblock;
  plan.qblocks = g.qblocks;
  const long long items =
      static_cast<long long>(p.num_seqs) * g.qblocks * p.shape.kv_heads * plan.segments;
  const long long units = static_cast<long long>(g.score_cols) * ((p.shape.head_dim + 127) / 128);
  if (path == Path::k3D) {
    LADDER_K_ASSIGN_OR_RETURN(plan.merge_in_kernel,
                              MergesInKernel(*e, items, units, plan.segments, tuning));
    plan.merge_in_cluster = !plan.merge_in_kernel && MergesInCluster(*e, p.shape, plan.segments,
                                                                     items / plan.segments, tuning);
    if (e->generic && !plan.merge_in_cluster && WidensAfterSplit(p, tuning)) {
      LADDER_K_ASSIGN_OR_RETURN(const KernelEntry* wide,
                                FindKernel(p.shape, g.block_m, g.score_cols, tuning, true));
      if (wide->ctas_per_sm > 0 && wide->ctas_per_sm == e->ctas_per_sm &&
          !MergesInCluster(*wide, p.shape, plan.segments, items / plan.segments, tuning)) {
        e = wide;
        plan.kernel = e;
      }
    }
    LADDER_K_ASSIGN_OR_RETURN(plan.merge_overlap, LaunchOverlaps(tuning.merge_overlap));
    if (tuning.release_next != Switch::kOff) {
      LADDER_K_ASSIGN_OR_RETURN(const GpuFacts f, Facts());
      plan.release_next = ReleasePointOf(items, e->ctas_per_sm, MergeWorkGroups(p), f.sms);
    }
  }
  LADDER_K_ASSIGN_OR_RETURN(plan.attention_overlap, LaunchOverlaps(tuning.attention_overlap));
  LADDER_K_ASSIGN_OR_RETURN(plan.evict_first, StreamEvictsFirst(p, tuning));
  std::string merge;
  if (path == Path::k3D) {
    // Where the cluster merge is asked for (on; auto with a window, on a device that has it),
    // the grid says why a call fell back to the merge kernel: an asked-for form that silently
    // does not run would mislead an A/B.
    std::string cluster_note;
    if (!plan.merge_in_kernel && WantsClusterMerge(p.shape, tuning) &&
        (tuning.merge_in_cluster == Switch::kOn || e->cluster_fn != nullptr)) {
      const long long clusters = items / plan.segments;
      if (e->cluster_fn == nullptr)
        cluster_note = " (no cluster merge here: compute capability 9.0 and sm_90a code only)";
      else if (plan.segments < 2 || plan.segments > kClusterMergeMaxSegments)
        cluster_note = " (no cluster merge at " + std::to_string(plan.segments) +
                       " segments: clusters take 2-" + std::to_string(kClusterMergeMaxSegments) +
                       ")";
      else
        cluster_note = " (" + std::to_string(clusters) + " clusters of " +
                       std::to_string(plan.segments) + ", " +
                       std::to_string(e->clusters_at_once[plan.segments]) + " at once)";
    }
    if (plan.merge_in_kernel)
      merge = " + merge in kernel";
    else if (plan.merge_in_cluster)
      merge = " + merge in cluster" + cluster_note;
    else
      merge = " + merge " + std::to_string(p.num_tokens) + "x" + std::to_string(p.shape.q_heads) +
              cluster_note + ReleaseNote(plan.release_next, tuning.release_next);
  }
  char buf[320];
  std::snprintf(buf, sizeof(buf), "%s grid %dx%dx%d %s (%d thr, BM %d, tile %d, %d stages)%s",
                path == Path::k3D ? "3D" : "2D", p.num_seqs * g.qblocks, p.shape.kv_heads,
                plan.segments, e->name, e->threads, g.block_m, e->tile, e->stages, merge.c_str());
  plan.grid = buf;
  return plan;
}

// Bytes of the 3D partials; the merge flags (8-byte aligned: head_dim is even) follow them.
size_t PartialBytes(const DeviceProblem& p, const LaunchPlan& plan) {
  const size_t slots = static_cast<size_t>(p.num_tokens) * p.shape.q_heads * plan.segments;
  return slots * p.shape.head_dim * 4 + 2 * slots * 4;
}
size_t MergeFlagBytes(const DeviceProblem& p, const LaunchPlan& plan) {
  if (!plan.merge_in_kernel) return 0;
  return sizeof(unsigned long long) * p.num_seqs * plan.qblocks * p.shape.kv_heads * plan.segments;
}

size_t WorkspaceBytes(const DeviceProblem& p, const LaunchPlan& plan) {
  if (plan.path != Path::k3D) return 0;
  return PartialBytes(p, plan) + MergeFlagBytes(p, plan);
}

namespace {
// The merge kernels' preferred carve-out, set once per process; the result is checked at every
// launch that relies on it.
rt::Error MergeCarveouts() {
#if defined(LADDER_KERNELS_HIP)
  return rt::kSuccess;
#else
  static const rt::Error e = [] {
    for (auto* k : {&MergeSegmentsGroupedKernel<dev::Bf16, kGroupedMergePer>,
                    &MergeSegmentsGroupedKernel<dev::F16, kGroupedMergePer>,
                    &MergeSegmentsGroupedKernel<dev::Bf16, kGroupedMergePerLean>,
                    &MergeSegmentsGroupedKernel<dev::F16, kGroupedMergePerLean>}) {
      if (const rt::Error r = PreferMaxSharedCarveout(k); r != rt::kSuccess) return r;
    }
    return rt::kSuccess;
  }();
  return e;
#endif
}
}  // namespace

Status Launch(const DeviceProblem& p, const LaunchPlan& plan, void* workspace,
              size_t workspace_bytes, void* stream, unsigned long long* timeline) {
  if (plan.kernel == nullptr)
    return Error(ErrorCode::kInvalidArgument, "launch of a plan MakePlan did not make");
  if (workspace_bytes < WorkspaceBytes(p, plan))
    return Error(ErrorCode::kInvalidArgument, "workspace too small for the 3D segment buffer");
  // (The merge drops the partials' 128-byte L2 lines once read: they must not share a line.)
  if (plan.path == Path::k3D && reinterpret_cast<uintptr_t>(workspace) % 128 != 0)
    return Error(ErrorCode::kInvalidArgument,
                 "the 3D workspace must be 128-byte aligned (as cudaMalloc's is)");
  const KernelEntry* e = static_cast<const KernelEntry*>(plan.kernel);
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
  kp.rows_per_qblock = plan.rows_per_qblock;
  kp.num_qblocks = plan.qblocks;
  kp.segments = plan.segments;
  kp.write_partial = plan.path == Path::k3D ? 1 : 0;
  kp.evict_first = plan.evict_first ? 1 : 0;

  if (kp.write_partial) {
    const size_t slots = static_cast<size_t>(p.num_tokens) * p.shape.q_heads * plan.segments;
    kp.seg_acc = static_cast<float*>(workspace);
    kp.seg_max = kp.seg_acc + slots * p.shape.head_dim;
    kp.seg_sum = kp.seg_max + slots;
  }
  const dim3 grid(p.num_seqs * plan.qblocks, p.shape.kv_heads, plan.segments);
  kp.timeline = timeline;
  unsigned long long* merge_timeline =
      timeline ? timeline + static_cast<size_t>(grid.x) * grid.y * grid.z * kTimelineWords
               : nullptr;
  const rt::Stream st = static_cast<rt::Stream>(stream);
  kp.merge_in_kernel = 0;
  kp.merge_flags = nullptr;
  kp.epoch = 0;
#if !defined(LADDER_KERNELS_HIP)
  // Not while the stream is being captured into a graph: a replay would reuse the captured
  // epoch, and the work groups would find their flags already set by the previous replay.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (plan.merge_in_kernel) LADDER_GPU_CALL(cudaStreamIsCapturing(st, &capture));
  if (plan.merge_in_kernel && kp.write_partial && capture == cudaStreamCaptureStatusNone) {
    static std::atomic<unsigned long long> epochs{0};
    kp.merge_in_kernel = 1;
    kp.merge_flags = reinterpret_cast<unsigned long long*>(static_cast<char*>(workspace) +
                                                           PartialBytes(p, plan));
    kp.epoch = ++epochs;
    cudaLaunchAttribute cooperative{};
    cooperative.id = cudaLaunchAttributeCooperative;
    cooperative.val.cooperative = 1;
    const cudaError_t err =
        LaunchWithAttribute(cooperative, grid, dim3(e->threads), e->smem, st, e->fn, kp);
    if (err == cudaSuccess) return OkStatus();
    // Another client holds part of the device: fall back to the merge kernel.
    if (err != cudaErrorCooperativeLaunchTooLarge) LADDER_GPU_CALL(err);
    (void)cudaGetLastError();  // clears the refusal just handled
    kp.merge_in_kernel = 0;
  }
  if (plan.merge_in_cluster && kp.write_partial) {
    // One cluster per (query block, KV head): its segments merge among themselves; nothing
    // follows.
    cudaLaunchAttribute cluster[2];
    ClusterAttributes(plan.segments, cluster);
    cudaLaunchAttribute attrs[3] = {cluster[0], cluster[1], ProgrammaticSerialization()};
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(e->threads);
    cfg.dynamicSmemBytes = e->smem;
    cfg.stream = st;
    cfg.attrs = attrs;
    cfg.numAttrs = plan.attention_overlap ? 3 : 2;
    LADDER_GPU_CALL(cudaLaunchKernelEx(&cfg, e->cluster_fn, kp));
    return OkStatus();
  }
  if (plan.attention_overlap) {
    LADDER_GPU_CALL(LaunchWithAttribute(ProgrammaticSerialization(), grid, dim3(e->threads),
                                        e->smem, st, e->fn, kp));
  } else {
    e->fn<<<grid, e->threads, e->smem, st>>>(kp);
  }
#else
  e->fn<<<grid, e->threads, e->smem, st>>>(kp);
#endif
  LADDER_GPU_CALL(rt::GetLastError());
  if (!kp.write_partial) return OkStatus();

  LADDER_GPU_CALL(MergeCarveouts());
  const dim3 mgrid = MergeGrid(p);
  // The lean grouped merge where its grid is more than two work groups per SM (see
  // kGroupedMergePerLean); the same choice for the same shape and device every call. Not where
  // the plan merges inside the kernel and only a graph capture or a refused cooperative launch
  // brought the merge kernel here: it must give the in-kernel merge's bits.
  LADDER_K_ASSIGN_OR_RETURN(const GpuFacts f, Facts());
  const bool lean =
      !plan.merge_in_kernel && static_cast<long long>(mgrid.x) * mgrid.y * mgrid.z > 2LL * f.sms;
  const bool bf16 = p.shape.dtype == DType::kBF16;
  const int release_next = static_cast<int>(plan.release_next);  // (the merge kernel's codes)
  auto* merge = lean ? (bf16 ? &MergeSegmentsGroupedKernel<dev::Bf16, kGroupedMergePerLean>
                             : &MergeSegmentsGroupedKernel<dev::F16, kGroupedMergePerLean>)
                     : (bf16 ? &MergeSegmentsGroupedKernel<dev::Bf16, kGroupedMergePer>
                             : &MergeSegmentsGroupedKernel<dev::F16, kGroupedMergePer>);
#if !defined(LADDER_KERNELS_HIP)
  if (plan.merge_overlap) {
    // Programmatic dependent launch: the merge's launch overlaps the attention kernel's tail;
    // the merge waits (griddepcontrol.wait) for it before reading the partials.
    LADDER_GPU_CALL(LaunchWithAttribute(
        ProgrammaticSerialization(), mgrid, dim3(kGroupedMergeThreads), 0, st, merge,
        static_cast<const float*>(kp.seg_acc), static_cast<const float*>(kp.seg_max),
        static_cast<const float*>(kp.seg_sum), kp.out, kp.q_heads, kp.segments, p.shape.head_dim,
        kp.evict_first, release_next, merge_timeline));
    return OkStatus();
  }
#endif
  merge<<<mgrid, kGroupedMergeThreads, 0, st>>>(kp.seg_acc, kp.seg_max, kp.seg_sum, kp.out,
                                                kp.q_heads, kp.segments, p.shape.head_dim,
                                                kp.evict_first, release_next, merge_timeline);
  LADDER_GPU_CALL(rt::GetLastError());
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

// Each timed call starts behind a kernel that holds the stream for kHoldNs, so that the host has
// queued the start event, the call's kernels and the end event before the GPU reaches them: the
// events then time the GPU's work, not the host's launch calls between them (the idea of
// nvbench's blocking kernel). The copy ceiling is timed the same way. CUDA only: HIP times
// plainly.
constexpr unsigned long long kHoldNs = 100000;
__global__ void HoldStreamKernel(unsigned long long ns) {
  const unsigned long long t0 = dev::GlobalTimerNs();
  while (dev::GlobalTimerNs() - t0 < ns) {
  }
}
// On `st` (nullptr: the default stream).
Status HoldStream(rt::Stream st = nullptr) {
#if !defined(LADDER_KERNELS_HIP)
  static const rt::Error carveout = PreferMaxSharedCarveout(HoldStreamKernel);
  LADDER_GPU_CALL(carveout);
  HoldStreamKernel<<<1, 1, 0, st>>>(kHoldNs);
  LADDER_GPU_CALL(rt::GetLastError());
#else
  (void)st;
#endif
  return OkStatus();
}
}  // namespace

Result<std::vector<double>> TimeLaunches(const DeviceProblem& p, const LaunchPlan& plan,
                                         void* workspace, size_t workspace_bytes, int warmup,
                                         int repeats, void* flush, size_t flush_bytes) {
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
  return us;
}

unsigned long long HoldNs() {
#if defined(LADDER_KERNELS_HIP)
  return 0;
#else
  return kHoldNs;
#endif
}

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

// Captures launch(0) .. launch(n - 1) on `st` into `graph`, instantiates it and replays it once,
// which uploads it; a launch that fails ends the capture and drops what was captured.
template <class LaunchFn>
Status CaptureAndUpload(rt::Stream st, int n, OwnedGraph* graph, LaunchFn launch) {
  LADDER_GPU_CALL(rt::BeginCapture(st));
  for (int i = 0; i < n; ++i) {
    const Status launched = launch(i);
    if (!launched.ok()) {
      rt::Graph partial = nullptr;
      if (rt::EndCapture(st, &partial) == rt::kSuccess && partial != nullptr)
        (void)rt::GraphDestroy(partial);
      (void)rt::GetLastError();
      return launched.error();
    }
  }
  LADDER_GPU_CALL(rt::EndCapture(st, &graph->g));
  LADDER_GPU_CALL(rt::GraphInstantiate(&graph->e, graph->g));
  LADDER_GPU_CALL(rt::GraphLaunch(graph->e, st));
  LADDER_GPU_CALL(rt::StreamSync(st));
  return OkStatus();
}
}  // namespace

Result<std::vector<double>> TimeGraphReplays(const DeviceProblem& p, const LaunchPlan& plan,
                                             void* workspace, size_t workspace_bytes, int warmup,
                                             int repeats, int graph_calls) {
  if (graph_calls < 1 || repeats < 1 || warmup < 0)
    return Error(ErrorCode::kInvalidArgument,
                 "graph timing needs graph_calls >= 1, repeats >= 1, warmup >= 0");
  EventPair ev;
  LADDER_K_TRY(ev.Init());
  OwnedStream stream;
  LADDER_GPU_CALL(rt::StreamCreate(&stream.s));
  // The warm-up as plain launches: every kernel's attributes are set and its code loaded before
  // the capture, which admits no such calls.
  for (int i = 0; i < warmup; ++i)
    LADDER_K_TRY(Launch(p, plan, workspace, workspace_bytes, stream.s));
  LADDER_GPU_CALL(rt::StreamSync(stream.s));
  OwnedGraph graph;
  LADDER_K_TRY(CaptureAndUpload(stream.s, graph_calls, &graph, [&](int) {
    return Launch(p, plan, workspace, workspace_bytes, stream.s);
  }));  // (the upload replay is untimed)
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

Result<std::vector<TimelineStamp>> RecordTimeline(const DeviceProblem& p, const LaunchPlan& plan,
                                                  void* workspace, size_t workspace_bytes,
                                                  int warmup, int calls, bool graph) {
  static_assert(kTimelineMarks == kTimelineMarkCount, "gpu_api.h names every mark");
  if (!kTimelineCompiled)
    return Error(ErrorCode::kUnsupported,
                 "this build's kernels have no work-group marks: configure with "
                 "-DLADDER_KERNELS_TIMELINE=ON (cmake --preset cuda-timeline). The default build "
                 "leaves them out: their branches cost 1-6 % of a 1K call (docs/kernels.md)");
  if (calls < 1 || warmup < 0)
    return Error(ErrorCode::kInvalidArgument, "a timeline needs calls >= 1 and warmup >= 0");
  const size_t attention_groups =
      static_cast<size_t>(p.num_seqs) * plan.qblocks * p.shape.kv_heads * plan.segments;
  // Room for the merge kernel's grid wherever one may run (Launch: the 3D path without the
  // cluster merge); a merge that ran inside the attention kernel leaves its records empty.
  const size_t merge_groups =
      plan.path == Path::k3D && !plan.merge_in_cluster
          ? static_cast<size_t>(p.num_tokens) * p.shape.q_heads *
                ((p.shape.head_dim + 4 * kGroupedMergeLanes - 1) / (4 * kGroupedMergeLanes))
          : 0;
  const size_t per_call = (attention_groups + merge_groups) * kTimelineWords;
  const size_t bytes = per_call * calls * sizeof(unsigned long long);
  LADDER_K_ASSIGN_OR_RETURN(DeviceBuffer stamps, DeviceBuffer::Alloc(bytes));
  auto* base = static_cast<unsigned long long*>(stamps.get());
  OwnedStream stream;
  LADDER_GPU_CALL(rt::StreamCreate(&stream.s));
  for (int i = 0; i < warmup; ++i)
    LADDER_K_TRY(Launch(p, plan, workspace, workspace_bytes, stream.s));
  LADDER_GPU_CALL(rt::StreamSync(stream.s));
  OwnedGraph owned;
  if (graph) {
    LADDER_K_TRY(CaptureAndUpload(stream.s, calls, &owned, [&](int c) {
      return Launch(p, plan, workspace, workspace_bytes, stream.s, base + c * per_call);
    }));  // (the upload replay is not recorded: the stamps are zeroed after it)
  }
  LADDER_GPU_CALL(rt::MemsetAsync(base, 0, bytes));
  LADDER_GPU_CALL(rt::Sync());
  LADDER_K_TRY(HoldStream(stream.s));
  if (graph) {
    LADDER_GPU_CALL(rt::GraphLaunch(owned.e, stream.s));
  } else {
    for (int c = 0; c < calls; ++c)
      LADDER_K_TRY(Launch(p, plan, workspace, workspace_bytes, stream.s, base + c * per_call));
  }
  LADDER_GPU_CALL(rt::StreamSync(stream.s));
  std::vector<unsigned long long> host(per_call * calls);
  LADDER_K_TRY(CopyToHost(host.data(), base, bytes));
  std::vector<TimelineStamp> out;
  for (int c = 0; c < calls; ++c) {
    for (size_t i = 0; i < attention_groups + merge_groups; ++i) {
      const unsigned long long* r = host.data() + c * per_call + i * kTimelineWords;
      TimelineStamp t;
      t.call = c;
      t.kernel = i < attention_groups ? 0 : 1;
      t.work_group = static_cast<int>(i < attention_groups ? i : i - attention_groups);
      t.sm = static_cast<int>(r[0]);
      bool any = false;
      for (int m = 0; m < kTimelineMarks; ++m) {
        t.ns[m] = r[1 + 2 * m];
        t.cycles[m] = r[2 + 2 * m];
        any = any || t.ns[m] != 0;
      }
      if (any) out.push_back(t);
    }
  }
  return out;
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
