// Unified attention kernels (2D and 3D share one body) and the 3D merge, for CUDA and HIP.
//
// One work group handles (sequence, query block, KV head, segment):
//   rows of its score tile: M = query rows of the block x q heads of the KV head (<= BM)
//   it walks KV tiles of TN tokens of its segment: K,V tiles are staged in shared memory (ST
//   stages, cp.async where available, ST - 1 tiles in flight while one is computed), S = Q K^T,
//   an online-softmax update, O += P V. Three barriers per tile.
// 2D is the same body with one segment that normalises and writes the output; 3D writes the
// unnormalised accumulator, max and sum per (query token, q head, segment).
//
// Matrix path (NVIDIA sm_80+): S and P V by mma.sync m16n8k16 with fp32 accumulators. P is
// split into hi + lo 16-bit parts (two MMAs) so P V keeps ~16 bits of P: 2D and 3D then
// differ by fp32 reassociation only, as on the CPU.
// Scalar path (everything else, e.g. HIP): the same tiles with fp32 FMAs.
#pragma once

#include <cstdint>

#include "gpu/portability.h"

namespace ladder::kernels::gpu {

struct KernelParams {
  const uint16_t* q;
  const uint16_t* k;
  const uint16_t* v;
  uint16_t* out;
  float* seg_acc;  // [tokens, q_heads, segments, D]       (3D)
  float* seg_max;  // [tokens, q_heads, segments]          (3D)
  float* seg_sum;  // [tokens, q_heads, segments]          (3D)
  const int* query_start;
  const int* seq_lens;
  const int* block_table;
  int q_heads, kv_heads, group;
  int block_size_shift;  // log2(block_size)
  int max_blocks_per_seq;
  int window;
  float scale, softcap;
  int rows_per_qblock, num_qblocks;
  int segments;
  int write_partial;  // 1: 3D partials; 0: final output (2D)
  // K/V copies under an L2 evict-first policy: the stream is read once, and the 3D partials
  // written near the end stay in L2 for the merge (TuningConfig::evict_first).
  int evict_first;
  // merge_in_kernel (3D, team kernel, cooperative launch): each work group publishes
  // merge_flags[group][segment] = epoch once its partials are written, waits for its group's
  // other segments, then merges a share of the group's outputs. epoch grows with every such
  // launch in the process, so flags left by earlier launches never match.
  int merge_in_kernel;
  unsigned long long* merge_flags;  // [seq x qblock x kv head][segments]
  unsigned long long epoch;
  // The work-group timeline (`ladder kernels timeline`): nullptr, or kTimelineWords per work
  // group in grid order, where each kernel stamps the marks it passes (MarkTimeline).
  unsigned long long* timeline;
};

// A work group's timeline record: word 0 its multiprocessor, then per mark the global timer
// (ns, shared by all multiprocessors) and the multiprocessor's cycle counter. A mark the work
// group never passed stays 0 (the host zeroes the buffer).
enum TimelineMark : int {
  kMarkEntry,      // the work group started (before waiting for the kernel ahead of it)
  kMarkReady,      // the kernel ahead of it is complete: the work group's own work begins
  kMarkFirstTile,  // its first K/V tile has landed (kernels whose loop has that point)
  kMarkLoopEnd,    // its last tile is computed
  kMarkExit,       // every thread is done (after a barrier)
  kTimelineMarks
};
constexpr int kTimelineWords = 1 + 2 * kTimelineMarks;

// Whether the kernels carry the marks: only in a build configured with
// -DLADDER_KERNELS_TIMELINE=ON. Compiled in, their branches on the kernel parameter cost 1-6 %
// of a 1K call even with the timeline off (H200, graph replays: llama-70b at one row 6.50 ->
// 6.90 us, dense-256 9.79 -> 10.07), so the default build has none and its kernels are the
// ones without them.
#if defined(LADDER_KERNELS_TIMELINE)
constexpr bool kTimelineCompiled = true;
#else
constexpr bool kTimelineCompiled = false;
#endif

// Thread 0 stamps `mark` in this work group's record; nothing when the timeline is off (one
// uniform branch on a kernel parameter: the stamps are stored at once, no register holds them).
__device__ inline void MarkTimeline(unsigned long long* timeline, TimelineMark mark) {
  if (!kTimelineCompiled || timeline == nullptr || threadIdx.x != 0) return;
  const size_t wg =
      (static_cast<size_t>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  unsigned long long* r = timeline + wg * kTimelineWords;
  if (mark == kMarkEntry) r[0] = dev::SmId();
  r[1 + 2 * mark] = dev::GlobalTimerNs();
  r[2 + 2 * mark] = dev::SmCycles();
}
// kMarkFirstTile, called by every thread before the key loop, whose first iteration waits for the
// same copies: only with the timeline on does the wait happen here (out of the loop, where a
// stamp would keep registers busy in every iteration).
template <int ST>
__device__ inline void MarkFirstTile(unsigned long long* timeline, bool any_tile) {
  if (!kTimelineCompiled || timeline == nullptr || !any_tile) return;
  dev::CopyAsyncWait<ST - 2>();
  __syncthreads();
  MarkTimeline(timeline, kMarkFirstTile);
}
// kMarkExit, called by every thread of the work group: the barrier makes it the last thread's.
__device__ inline void MarkTimelineExit(unsigned long long* timeline) {
  if (!kTimelineCompiled || timeline == nullptr) return;
  __syncthreads();
  MarkTimeline(timeline, kMarkExit);
}

// What one work group covers: (sequence, query block, KV head, segment) from the grid, and the
// key range [lo, hi) its query rows may see. Shared by every attention kernel.
struct WorkItem {
  int seq, kvh, seg;
  int q_start, row0;  // first query token of the sequence; first query row of this block
  int rows, m_rows;   // query rows of this block; score rows (rows x q heads of the KV head)
  int first_pos;      // position of query row row0 in the sequence
  int lo, hi;         // keys the block may see: [lo, hi)
  bool empty;         // the query block lies past the sequence's query rows
};
__device__ inline WorkItem WorkItemOf(const KernelParams& p) {
  WorkItem w{};
  w.seq = blockIdx.x / p.num_qblocks;
  w.kvh = blockIdx.y;
  w.seg = blockIdx.z;
  w.q_start = p.query_start[w.seq];
  const int q_len = p.query_start[w.seq + 1] - w.q_start;
  w.row0 = (blockIdx.x % p.num_qblocks) * p.rows_per_qblock;
  w.empty = w.row0 >= q_len;
  w.rows = min(p.rows_per_qblock, q_len - w.row0);
  w.m_rows = w.rows * p.group;
  w.first_pos = p.seq_lens[w.seq] - q_len + w.row0;
  w.hi = w.first_pos + w.rows;
  w.lo = p.window > 0 ? max(0, w.first_pos - p.window + 1) : 0;
  return w;
}

// The K/V tiles of a work item as the kernels that copy them with cp.async walk them: the
// segment's whole TN-key tiles [tb, te) from key0 (segments are whole tiles, so 2D and 3D walk
// the same ones), and tile t copied into one stage (rows of LD 16-bit elements) by NT threads,
// 16 bytes each: thread tid copies chunk ld_col of rows ld_n0 + i * kRowsPerPass. The physical
// pages of those rows are read one tile ahead (FetchPages), so the block table's latency is off
// the critical path.
//
// Tile 0 starts at the first key the work item's first row sees where that saves a tile, and at
// the multiple of TN below it otherwise (FirstKey). A window of 1024 keys is then 32 tiles of 32
// wherever it starts, where tiles aligned to TN spanned 33 at 31 of every 32 positions (H200,
// gemma4-31b-sliding, one row, through ladder: 9.6-9.7 us at depths 8100 and 32700, 0.84-0.86x
// the aligned walk's 11.1-11.4 us there and the time at 8192, whose window starts on a tile).
// Where both walks take as many tiles the aligned one is kept: walking from the first key there
// was 1.4-3 % slower (TP=2, two rows). Rows see keys by position (the masks), so any start is
// correct, and the tile count is ceil((hi - lo) / TN) either way, as the policy counts it.
template <int D, int TN, int NT, int LD>
struct PagedTiles {
  static constexpr int kChunks = D / 8;  // 16-byte chunks per K/V row
  static constexpr int kRowsPerPass = NT / kChunks;
  static constexpr int kPasses = TN / kRowsPerPass;  // cp.async per thread per tile, per K and V
  static_assert(NT % kChunks == 0 && TN % kRowsPerPass == 0, "K/V tile loads divide evenly");

  int key0, tb, te;
  __device__ PagedTiles(const KernelParams& p, const WorkItem& w, int tid)
      : key0(FirstKey(w.lo, w.hi)),
        k_(p.k),
        v_(p.v),
        btab_(p.block_table + static_cast<size_t>(w.seq) * p.max_blocks_per_seq),
        shift_(p.block_size_shift),
        kv_heads_(p.kv_heads),
        bs_mask_((1 << p.block_size_shift) - 1),
        hi_(w.hi),
        kvh_(w.kvh),
        ld_n0_(tid / kChunks),
        ld_col_((tid % kChunks) * 8),
        l2_policy_(dev::L2StreamPolicy(p.evict_first != 0)) {
    const int tiles = (w.hi - key0 + TN - 1) / TN;
    const int per_seg = (tiles + p.segments - 1) / p.segments;
    tb = min(tiles, w.seg * per_seg);
    te = min(tiles, tb + per_seg);
  }
  static __device__ int FirstKey(int lo, int hi) {
    const int aligned = lo - lo % TN;  // lo >= 0
    return (hi - aligned + TN - 1) / TN > (hi - lo + TN - 1) / TN ? lo : aligned;
  }
  __device__ void FetchPages(int t) {
    const int j0 = key0 + t * TN;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int j = j0 + ld_n0_ + i * kRowsPerPass;
      pages_[i] = (t < te && j < hi_) ? btab_[j >> shift_] : 0;
    }
  }
  // Tile t (its pages fetched) into the stage whose K rows start at ks and V rows at vs.
  __device__ void Load(int t, uint16_t* ks, uint16_t* vs) const {
    const int j0 = key0 + t * TN;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int n = ld_n0_ + i * kRowsPerPass;
      const int j = j0 + n;
      const bool pred = j < hi_;
      size_t off = 0;
      if (pred) {
        off = ((static_cast<size_t>(pages_[i]) << shift_) + (j & bs_mask_)) * kv_heads_ + kvh_;
        off = off * D + ld_col_;
      }
      dev::CopyAsync16Hinted(ks + n * LD + ld_col_, k_ + off, pred, l2_policy_);
      dev::CopyAsync16Hinted(vs + n * LD + ld_col_, v_ + off, pred, l2_policy_);
    }
  }

 private:
  // (Scalars by value: a reference into the kernel's parameters can cost a local copy of them.)
  const uint16_t* k_;
  const uint16_t* v_;
  const int* btab_;
  int shift_, kv_heads_, bs_mask_, hi_, kvh_, ld_n0_, ld_col_;
  unsigned long long l2_policy_;
  int pages_[kPasses];
};

template <int D, int BM, int TN, int NT, int ST>
struct KernelShape {
  static constexpr int kQLd = D + 8;   // shared row pitch of Q, K, V (16-bit elements)
  static constexpr int kSLd = TN + 4;  // fp32 score rows
  static constexpr int kPLd = TN + 8;  // 16-bit P rows (matrix path)
  static constexpr int kWarps = NT / 32;
  static constexpr int kMTiles = BM / 16;
  static constexpr int kNTiles = TN / 8;
  static constexpr int kQkTiles = kMTiles * kNTiles;
  static constexpr int kKSplit = kWarps > kQkTiles ? kWarps / kQkTiles : 1;
  static constexpr int kDimsPerWarp = D / kWarps;
  static constexpr int kDn = kDimsPerWarp / 8;
  static constexpr int kScalarAcc = BM * D / NT;
  static constexpr int kSmT = NT < BM * TN ? NT : BM * TN;  // threads of the softmax step
  static constexpr int kTpr = kSmT / BM;                    // softmax threads per score row
  static constexpr int kCpt = TN / kTpr;                    // score columns per softmax thread
  static constexpr size_t kQBytes = size_t{2} * BM * kQLd;
  static constexpr size_t kKvTileBytes = size_t{2} * TN * kQLd;  // K or V of one stage
  static constexpr size_t kSBytes = size_t{4} * kKSplit * BM * kSLd;
  static constexpr size_t kPBytes =
      (4 * BM * kSLd > 2 * 2 * BM * kPLd) ? 4 * BM * kSLd : 2 * 2 * BM * kPLd;
  static constexpr size_t kRowBytes = size_t{4} * 3 * BM;
  static constexpr size_t kSmemBytes =
      kQBytes + 2 * ST * kKvTileBytes + kSBytes + kPBytes + kRowBytes;

  static_assert(BM == 16 || BM == 32, "BM is 16 or 32");
  static_assert(ST >= 2, "at least two K/V stages");
  static_assert(TN % 16 == 0 && D % 64 == 0, "tile shapes");
  static_assert(NT % 64 == 0, "work group size must be a multiple of 64 (wave64)");
  static_assert(kWarps % kQkTiles == 0 || kQkTiles % kWarps == 0,
                "QK tiles must divide among warps");
  static_assert(D % (kKSplit * 32) == 0,
                "k-split must divide head_dim into pairs of 16-wide steps");
  static_assert(kDn % 2 == 0, "each warp owns an even number of 8-wide output tiles");
  static_assert((BM * D) % NT == 0, "scalar accumulators divide evenly");
  static_assert(kSmT % 64 == 0, "softmax threads are whole warps/waves");
  static_assert(kTpr <= 32 && (kTpr & (kTpr - 1)) == 0 && kCpt >= 1 && kTpr * kCpt == TN,
                "softmax lane groups must fit in any warp/wave (32 or 64 lanes)");
};

// The merge in one L2 round trip: work group (query token, q head, 128 output dims), thread
// (segment group g, float4 column x). Thread (g, x) loads the partials of segments g, g + G,
// g + 2 G, ... (kGroupedMergePer of them at once: all 33 segments of a 132-SM head-512 call in
// one round of loads), combines them online, and the G group results are combined in group
// order through shared memory. Deterministic (fixed order). The per-head merge it replaces walked
// the segments 16 at a time from 128 threads per head: three dependent rounds for 33 segments,
// 32 work groups for one query row (H200: 3.6-5.7 us after the attention kernel).
// kGroupedMergePer partials per group at once (one round for 64 segments; the merge inside the
// team kernel), or kGroupedMergePerLean: 64 registers instead of 100, four work groups per SM
// instead of two, for merge grids larger than two per SM (4 rows of head 512: 512 work groups
// in one wave instead of two, 83.8-83.9 us against 86.2-86.5; 40 segments still take one round).
// Where two per SM suffice the lean kernel lost 0.5 us (1 row of gemma4-31b-sliding: its work
// groups then sat beside the attention kernel's from its start, launched by PDL). H200.
constexpr int kGroupedMergeLanes = 32;  // float4 columns: 128 dims per work group
constexpr int kGroupedMergeGroups = 8;
constexpr int kGroupedMergePer = 8;
constexpr int kGroupedMergePerLean = 5;
constexpr int kGroupedMergeThreads = kGroupedMergeLanes * kGroupedMergeGroups;

struct OnlineSum {  // running max (log2 units), exp-sum and unnormalised float4 accumulator
  float m = -INFINITY, den = 0.0f;
  float4 num = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  // Adds n partials (maxima ms, sums ls, accumulators a); an empty one (max -inf) adds nothing.
  template <int N>
  __device__ void Add(const float (&ms)[N], const float (&ls)[N], const float4 (&a)[N]) {
    float bm = -INFINITY;
#pragma unroll
    for (int u = 0; u < N; ++u) bm = fmaxf(bm, ms[u]);
    const float m_new = fmaxf(m, bm);
    if (m_new == -INFINITY) return;
    const float r = m == -INFINITY ? 0.0f : exp2f(m - m_new);
    den *= r, num.x *= r, num.y *= r, num.z *= r, num.w *= r;
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const float w = ms[u] == -INFINITY ? 0.0f : exp2f(ms[u] - m_new);
      den = fmaf(w, ls[u], den);
      num.x = fmaf(w, a[u].x, num.x), num.y = fmaf(w, a[u].y, num.y);
      num.z = fmaf(w, a[u].z, num.z), num.w = fmaf(w, a[u].w, num.w);
    }
    m = m_new;
  }
  // The four outputs num / den as 16-bit values of E, packed (0 where nothing was added): the one
  // place a merge turns its sum into output bits, so that every merge gives the same ones.
  template <class E>
  __device__ uint2 Packed() const {
    const float inv = den > 0.0f ? 1.0f / den : 0.0f;
    const uint32_t dims01 =
        E::FromFloat(num.x * inv) | (static_cast<uint32_t>(E::FromFloat(num.y * inv)) << 16);
    const uint32_t dims23 =
        E::FromFloat(num.z * inv) | (static_cast<uint32_t>(E::FromFloat(num.w * inv)) << 16);
    return make_uint2(dims01, dims23);
  }
};

// The segments of a cluster merge in the grouped merge's order (MergeGroupedUnits: segment s
// in group s % kGroupedMergeGroups, the groups combined in order), so the bits are the merge
// kernel's: at most this many segments, two per group.
constexpr int kClusterMergeMaxSegments = 16;
constexpr int kClusterMergePerGroup = kClusterMergeMaxSegments / kGroupedMergeGroups;

// kClusterMerge (3D, CUDA sm_90, launched with cluster dimensions (1, 1, segments)): the
// cluster's work groups, one per segment, leave their partials in shared memory and merge them
// over distributed shared memory, each work group a share of the outputs (see
// TuningConfig::merge_in_cluster).
template <class E, int D, int BM, int TN, int NT, int ST, int MINB, bool kClusterMerge = false>
__global__ void __launch_bounds__(NT, MINB) UnifiedAttentionKernel(KernelParams p) {
  using S = KernelShape<D, BM, TN, NT, ST>;
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* qs = reinterpret_cast<uint16_t*>(smem);
  uint16_t* kvs = reinterpret_cast<uint16_t*>(smem + S::kQBytes);  // [stage][K|V][TN][kQLd]
  float* ss = reinterpret_cast<float*>(smem + S::kQBytes + 2 * ST * S::kKvTileBytes);
  unsigned char* pbase = smem + S::kQBytes + 2 * ST * S::kKvTileBytes + S::kSBytes;
  float* row_alpha = reinterpret_cast<float*>(pbase + S::kPBytes);
  float* row_max = row_alpha + BM;
  float* row_sum = row_max + BM;

  // Launched by programmatic dependent launch (attention_overlap), this kernel may start while
  // the one ahead of it runs: nothing is read (or written: the previous call's merge may still
  // read the workspace) before that kernel is complete.
  MarkTimeline(p.timeline, kMarkEntry);
  dev::WaitForPriorGrid();
  MarkTimeline(p.timeline, kMarkReady);
  const int tid = threadIdx.x;
  const WorkItem w = WorkItemOf(p);
  if (w.empty) return;
  const int kvh = w.kvh, seg = w.seg, q_start = w.q_start, row0 = w.row0;
  const int m_rows = w.m_rows, first_pos = w.first_pos;
  PagedTiles<D, TN, NT, S::kQLd> kv(p, w, tid);
  const int key0 = kv.key0, tb = kv.tb, te = kv.te;
  auto fetch_pages = [&](int t) { kv.FetchPages(t); };
  auto load_tile = [&](int t, int stage) {
    uint16_t* ks = kvs + static_cast<size_t>(stage) * 2 * TN * S::kQLd;
    kv.Load(t, ks, ks + TN * S::kQLd);
  };

  // Prologue: tiles tb .. tb + ST - 2 in flight (one commit group each, empty ones too, so
  // that "tile t landed" is always wait_group<ST - 2>).
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    fetch_pages(tb + s);
    if (tb + s < te) load_tile(tb + s, s);
    dev::CopyAsyncCommit();
  }
  fetch_pages(tb + ST - 1);
  // The merge (launched with programmatic serialization) may be scheduled as SMs free up; it
  // waits for this whole grid before it reads the partials.
  dev::AllowDependentLaunch();

  // Q tile: row m = r * group + g; rows past m_rows are zero.
  for (int c = tid; c < BM * (D / 8); c += NT) {
    const int m = c / (D / 8), col = (c % (D / 8)) * 8;
    dev::Vec16 val{0, 0, 0, 0};
    if (m < m_rows) {
      const int r = m / p.group, g = m % p.group;
      const size_t off =
          (static_cast<size_t>(q_start + row0 + r) * p.q_heads + kvh * p.group + g) * D + col;
      val = *reinterpret_cast<const dev::Vec16*>(p.q + off);
    }
    *reinterpret_cast<dev::Vec16*>(qs + m * S::kQLd + col) = val;
  }

#if LADDER_DEVICE_HAS_MMA
  const int lane = tid % dev::kMmaWarp, warp = tid / dev::kMmaWarp;
  const int g8 = lane >> 2, t4 = lane & 3;
  float acc[S::kMTiles][S::kDn][4];
#pragma unroll
  for (int a = 0; a < S::kMTiles; ++a)
#pragma unroll
    for (int b = 0; b < S::kDn; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;
  uint16_t* p_hi = reinterpret_cast<uint16_t*>(pbase);
  uint16_t* p_lo = p_hi + BM * S::kPLd;
#else
  float acc[S::kScalarAcc];
#pragma unroll
  for (int i = 0; i < S::kScalarAcc; ++i) acc[i] = 0.0f;
  float* pf = reinterpret_cast<float*>(pbase);
#endif

  // Running state (log2 units) of score row tid / kTpr (tid < kSmT), held identically by its
  // kTpr threads.
  float my_max = -INFINITY, my_sum = 0.0f;
  constexpr float kLog2e = 1.4426950408889634f;

  MarkFirstTile<ST>(p.timeline, tb < te);
  int cstage = 0, lstage = ST - 1;  // stage computed now, stage the next load fills
  for (int t = tb; t < te; ++t) {
    dev::CopyAsyncWait<ST - 2>();  // this thread's copies of tile t have landed
    // Everyone's copies of tile t are visible, and everyone is done with tile t - 1, whose
    // stage (lstage) the next load overwrites; S, P and row_alpha are free again as well.
    __syncthreads();
    if (t + ST - 1 < te) load_tile(t + ST - 1, lstage);
    dev::CopyAsyncCommit();
    fetch_pages(t + ST);
    const uint16_t* ks = kvs + static_cast<size_t>(cstage) * 2 * TN * S::kQLd;
    const uint16_t* vs = ks + TN * S::kQLd;
    cstage = cstage + 1 == ST ? 0 : cstage + 1;
    lstage = lstage + 1 == ST ? 0 : lstage + 1;
    const int j0 = key0 + t * TN;

    // ---- S = Q K^T ----------------------------------------------------------------------
#if LADDER_DEVICE_HAS_MMA
    {
      constexpr int kTilesPerWarp = S::kQkTiles >= S::kWarps ? S::kQkTiles / S::kWarps : 1;
      const int ks_idx = S::kKSplit > 1 ? warp / S::kQkTiles : 0;
      constexpr int kDPart = D / S::kKSplit;
#pragma unroll
      for (int i = 0; i < kTilesPerWarp; ++i) {
        const int tile = S::kKSplit > 1 ? warp % S::kQkTiles : warp + i * S::kWarps;
        const int mt = tile / S::kNTiles, nt = tile % S::kNTiles;
        // Two accumulators (even / odd 16-wide steps) halve the dependent MMA chain.
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        // Fragments by ldmatrix (three per 32 dims instead of twelve 32-bit loads): lane l gives
        // the row address of 8x8 matrix l / 8. A (Q): matrices (rows 0-7 | 8-15) x (dims +0 |
        // +8); B (K): key rows nt * 8 .. + 7 at dims +0, +8, +16, +24.
        const int lrow = lane & 7, lmat = lane >> 3;
        const uint16_t* qa = qs + (mt * 16 + (lmat & 1) * 8 + lrow) * S::kQLd + (lmat >> 1) * 8;
        const uint16_t* kb = ks + (nt * 8 + lrow) * S::kQLd + lmat * 8;
#pragma unroll 8
        for (int kk = ks_idx * kDPart; kk < (ks_idx + 1) * kDPart; kk += 32) {
          uint32_t a[4], a2[4], b0, b1, b2, b3;
          dev::LdMatrixX4(a[0], a[1], a[2], a[3], qa + kk);
          dev::LdMatrixX4(a2[0], a2[1], a2[2], a2[3], qa + kk + 16);
          dev::LdMatrixX4(b0, b1, b2, b3, kb + kk);
          dev::Mma16816<E::kIsBf16>(c, a, b0, b1);
          dev::Mma16816<E::kIsBf16>(c2, a2, b2, b3);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) c[e] += c2[e];
        float* so = ss + static_cast<size_t>(ks_idx) * BM * S::kSLd;
        *reinterpret_cast<float2*>(so + (mt * 16 + g8) * S::kSLd + nt * 8 + 2 * t4) =
            make_float2(c[0], c[1]);
        *reinterpret_cast<float2*>(so + (mt * 16 + g8 + 8) * S::kSLd + nt * 8 + 2 * t4) =
            make_float2(c[2], c[3]);
      }
    }
#else
    for (int idx = tid; idx < BM * TN; idx += NT) {
      const int m = idx / TN, n = idx % TN;
      float dot = 0.0f;
      if (m < m_rows) {
        const uint16_t* qm = qs + m * S::kQLd;
        const uint16_t* kn = ks + n * S::kQLd;
        for (int d = 0; d < D; ++d) dot += E::ToFloat(qm[d]) * E::ToFloat(kn[d]);
      }
      ss[m * S::kSLd + n] = dot;
    }
#endif
    __syncthreads();

    // ---- online softmax: kTpr consecutive threads per score row, scores in log2 units ----
    // (threads tid >= kSmT, whole warps/waves, have no score cell and skip it)
    if (tid < S::kSmT) {
      constexpr int kTpr = S::kTpr, kCpt = S::kCpt;
      const int m = tid / kTpr, n0 = (tid % kTpr) * kCpt;
      const bool row_ok = m < m_rows;
      const int pos = first_pos + m / p.group;
      // Every key of the tile visible to this row (all tiles but the last, and the first of a
      // window): no per-key mask.
      const bool whole = row_ok && j0 + TN - 1 <= pos && (p.window <= 0 || pos - j0 < p.window);
      float sc[kCpt];
#pragma unroll
      for (int kx = 0; kx < S::kKSplit; ++kx) {
        const float* srow = ss + static_cast<size_t>(kx) * BM * S::kSLd + m * S::kSLd + n0;
        if constexpr (kCpt % 4 == 0) {
#pragma unroll
          for (int k = 0; k < kCpt; k += 4) {
            const float4 v = *reinterpret_cast<const float4*>(srow + k);
            sc[k] = kx ? sc[k] + v.x : v.x, sc[k + 1] = kx ? sc[k + 1] + v.y : v.y;
            sc[k + 2] = kx ? sc[k + 2] + v.z : v.z, sc[k + 3] = kx ? sc[k + 3] + v.w : v.w;
          }
        } else {
#pragma unroll
          for (int k = 0; k < kCpt; ++k) sc[k] = kx ? sc[k] + srow[k] : srow[k];
        }
      }
      const float scale_log2 = p.scale * kLog2e;
      float tile_max = -INFINITY;
#pragma unroll
      for (int k = 0; k < kCpt; ++k) {
        float s = sc[k];
        if (p.softcap > 0.0f)
          s = p.softcap * tanhf(s * p.scale / p.softcap) * kLog2e;
        else
          s *= scale_log2;
        if (!whole) {
          const int j = j0 + n0 + k;
          const bool visible = row_ok && j <= pos && (p.window <= 0 || pos - j < p.window);
          s = visible ? s : -INFINITY;
        }
        sc[k] = s;
        tile_max = fmaxf(tile_max, s);
      }
      tile_max = dev::GroupMax<kTpr>(tile_max);
      const float m_new = fmaxf(my_max, tile_max);
      float alpha = 1.0f, psum = 0.0f;
      if (m_new != -INFINITY) {
        alpha = my_max == -INFINITY ? 0.0f : exp2f(my_max - m_new);
#pragma unroll
        for (int k = 0; k < kCpt; ++k) {
          sc[k] = sc[k] == -INFINITY ? 0.0f : exp2f(sc[k] - m_new);
          psum += sc[k];
        }
        my_max = m_new;
      } else {
#pragma unroll
        for (int k = 0; k < kCpt; ++k) sc[k] = 0.0f;
      }
      psum = dev::GroupSum<kTpr>(psum);
      my_sum = my_sum * alpha + psum;
#if LADDER_DEVICE_HAS_MMA
      // hi = P rounded to 16 bits, lo = the rest rounded: two elements per cvt (PackRn2 gives
      // E::FromFloat's bits), stored four (or two) at a time.
      static_assert(kCpt % 2 == 0, "P is packed in pairs");
      uint32_t hi2[kCpt / 2], lo2[kCpt / 2];
#pragma unroll
      for (int k = 0; k < kCpt; k += 2) {
        hi2[k / 2] = dev::PackRn2<E::kIsBf16>(sc[k], sc[k + 1]);
        float h0, h1;
        dev::Unpack2<E::kIsBf16>(hi2[k / 2], h0, h1);
        lo2[k / 2] = dev::PackRn2<E::kIsBf16>(sc[k] - h0, sc[k + 1] - h1);
      }
      uint16_t* ph = p_hi + m * S::kPLd + n0;
      uint16_t* pl = p_lo + m * S::kPLd + n0;
      if constexpr (kCpt % 4 == 0) {
#pragma unroll
        for (int k = 0; k < kCpt / 2; k += 2) {
          *reinterpret_cast<uint2*>(ph + 2 * k) = make_uint2(hi2[k], hi2[k + 1]);
          *reinterpret_cast<uint2*>(pl + 2 * k) = make_uint2(lo2[k], lo2[k + 1]);
        }
      } else {
#pragma unroll
        for (int k = 0; k < kCpt / 2; ++k) {
          *reinterpret_cast<uint32_t*>(ph + 2 * k) = hi2[k];
          *reinterpret_cast<uint32_t*>(pl + 2 * k) = lo2[k];
        }
      }
#else
#pragma unroll
      for (int k = 0; k < kCpt; ++k) pf[m * S::kSLd + n0 + k] = sc[k];
#endif
      if (tid % kTpr == 0) row_alpha[m] = alpha;
    }
    __syncthreads();

    // ---- O = alpha O + P V ---------------------------------------------------------------
#if LADDER_DEVICE_HAS_MMA
    {
#pragma unroll
      for (int mt = 0; mt < S::kMTiles; ++mt) {
        const float a_lo = row_alpha[mt * 16 + g8], a_hi = row_alpha[mt * 16 + g8 + 8];
#pragma unroll
        for (int dn = 0; dn < S::kDn; ++dn) {
          acc[mt][dn][0] *= a_lo;
          acc[mt][dn][1] *= a_lo;
          acc[mt][dn][2] *= a_hi;
          acc[mt][dn][3] *= a_hi;
        }
      }
      const int dim0 = warp * S::kDimsPerWarp;
      const int mat = lane >> 3, mrow = lane & 7;
#pragma unroll
      for (int kk = 0; kk < TN; kk += 16) {
        uint32_t ah[S::kMTiles][4], al[S::kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < S::kMTiles; ++mt) {  // A fragments of P, as Q's in S = Q K^T
          const size_t off = (mt * 16 + (mat & 1) * 8 + mrow) * S::kPLd + kk + (mat >> 1) * 8;
          dev::LdMatrixX4(ah[mt][0], ah[mt][1], ah[mt][2], ah[mt][3], p_hi + off);
          dev::LdMatrixX4(al[mt][0], al[mt][1], al[mt][2], al[mt][3], p_lo + off);
        }
#pragma unroll
        for (int dn = 0; dn < S::kDn; dn += 2) {
          uint32_t b0, b1, b2, b3;
          const uint16_t* vaddr = vs + (kk + mrow + ((mat & 1) ? 8 : 0)) * S::kQLd + dim0 + dn * 8 +
                                  ((mat & 2) ? 8 : 0);
          dev::LdMatrixX4Trans(b0, b1, b2, b3, vaddr);
#pragma unroll
          for (int mt = 0; mt < S::kMTiles; ++mt) {
            dev::Mma16816<E::kIsBf16>(acc[mt][dn], ah[mt], b0, b1);
            dev::Mma16816<E::kIsBf16>(acc[mt][dn], al[mt], b0, b1);
            dev::Mma16816<E::kIsBf16>(acc[mt][dn + 1], ah[mt], b2, b3);
            dev::Mma16816<E::kIsBf16>(acc[mt][dn + 1], al[mt], b2, b3);
          }
        }
      }
    }
#else
#pragma unroll
    for (int i = 0; i < S::kScalarAcc; ++i) {
      const int idx = tid + i * NT;
      const int m = idx / D, d = idx % D;
      float a = acc[i] * row_alpha[m];
      for (int n = 0; n < TN; ++n) a += pf[m * S::kSLd + n] * E::ToFloat(vs[n * S::kQLd + d]);
      acc[i] = a;
    }
#endif
  }

  // ---- write out --------------------------------------------------------------------------
  MarkTimeline(p.timeline, kMarkLoopEnd);
  if (tid < S::kSmT && tid % S::kTpr == 0) {
    row_max[tid / S::kTpr] = my_max;
    row_sum[tid / S::kTpr] = my_sum;
  }
  __syncthreads();
  if constexpr (kClusterMerge) {
#if LADDER_DEVICE_HAS_CLUSTER
    // This work group's partial: [BM][kPartLd] fp32 in the K/V stages, which no copy fills any
    // more (the loop loads no tile past te) and no warp reads (the barrier above).
    constexpr int kPartLd = D + 4;  // 16-byte rows, banks staggered
    static_assert(size_t{4} * BM * kPartLd <= 2 * ST * S::kKvTileBytes,
                  "the partial fits in the K/V stages");
    float* part = reinterpret_cast<float*>(kvs);
    {
      const int dim0 = warp * S::kDimsPerWarp;
#pragma unroll
      for (int mt = 0; mt < S::kMTiles; ++mt)
#pragma unroll
        for (int dn = 0; dn < S::kDn; ++dn) {
          const int d = dim0 + dn * 8 + 2 * t4, m = mt * 16 + g8;
          *reinterpret_cast<float2*>(part + m * kPartLd + d) =
              make_float2(acc[mt][dn][0], acc[mt][dn][1]);
          *reinterpret_cast<float2*>(part + (m + 8) * kPartLd + d) =
              make_float2(acc[mt][dn][2], acc[mt][dn][3]);
        }
    }
    dev::ClusterSync();  // every segment's partial, max and sum are written and visible
    // Output (score row m, 4 dims) k of m_rows x D / 4; segment s's partial sits in the work
    // group of cluster rank s. Each work group takes an equal run of consecutive outputs, so
    // that every multiprocessor of the cluster loads a share over distributed shared memory.
    // (Outputs by thread k mod (segments x NT) left 7 of 11 work groups idle at 4 rows of head
    // 256; spreading them took the last loop end to exit from 2.88 to 2.82 us: H200,
    // docs/kernel-experiments.md.)
    constexpr int G = kGroupedMergeGroups, N = kClusterMergePerGroup;
    const int outputs = m_rows * (D / 4);
    const int share = (outputs + p.segments - 1) / p.segments;
    const int k_end = min(outputs, (seg + 1) * share);
    for (int k = seg * share + tid; k < k_end; k += NT) {
      const int m = k / (D / 4), d = k % (D / 4) * 4;
      float ms[G][N], ls[G][N];
      float4 a[G][N];
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int u = 0; u < N; ++u) {
          const int s = g + u * G;
          const bool in = s < p.segments;
          ms[g][u] =
              in ? dev::LoadClusterShared(dev::ClusterSharedAddress(row_max + m, s)) : -INFINITY;
          ls[g][u] = in ? dev::LoadClusterShared(dev::ClusterSharedAddress(row_sum + m, s)) : 0.0f;
          a[g][u] =
              in ? dev::LoadClusterShared4(dev::ClusterSharedAddress(part + m * kPartLd + d, s))
                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
      float gm[G], gl[G];
      float4 ga[G];
#pragma unroll
      for (int g = 0; g < G; ++g) {
        OnlineSum one;
        one.Add(ms[g], ls[g], a[g]);
        gm[g] = one.m, gl[g] = one.den, ga[g] = one.num;
      }
      OnlineSum all;
      all.Add(gm, gl, ga);
      const int r = m / p.group, qh = m % p.group;
      const size_t head = static_cast<size_t>(q_start + row0 + r) * p.q_heads + kvh * p.group + qh;
      *reinterpret_cast<uint2*>(p.out + head * D + d) = all.Packed<E>();
    }
    // No work group leaves while another may still read its shared memory. Every load above has
    // returned (its value was stored), so the barrier need not order memory.
    dev::ClusterSyncRelaxed();
    MarkTimelineExit(p.timeline);
#else
    LADDER_DEVICE_TRAP();
#endif
    return;
  }
#if LADDER_DEVICE_HAS_MMA
  // Two adjacent output elements (d even) at once.
  auto emit2 = [&](int m, int d, float v0, float v1) {
    if (m >= m_rows) return;
    const int r = m / p.group, g = m % p.group;
    const size_t tok = static_cast<size_t>(q_start + row0 + r);
    const size_t head = tok * p.q_heads + kvh * p.group + g;
    if (p.write_partial) {
      *reinterpret_cast<float2*>(p.seg_acc + (head * p.segments + seg) * D + d) =
          make_float2(v0, v1);
    } else {
      const float l = row_sum[m];
      const uint32_t lo16 = E::FromFloat(l > 0.0f ? v0 / l : 0.0f),
                     hi16 = E::FromFloat(l > 0.0f ? v1 / l : 0.0f);
      *reinterpret_cast<uint32_t*>(p.out + head * D + d) = lo16 | (hi16 << 16);
    }
  };
  {
    const int dim0 = warp * S::kDimsPerWarp;
#pragma unroll
    for (int mt = 0; mt < S::kMTiles; ++mt)
#pragma unroll
      for (int dn = 0; dn < S::kDn; ++dn) {
        const int d = dim0 + dn * 8 + 2 * t4;
        emit2(mt * 16 + g8, d, acc[mt][dn][0], acc[mt][dn][1]);
        emit2(mt * 16 + g8 + 8, d, acc[mt][dn][2], acc[mt][dn][3]);
      }
  }
#else
  auto emit = [&](int m, int d, float v) {
    if (m >= m_rows) return;
    const int r = m / p.group, g = m % p.group;
    const size_t tok = static_cast<size_t>(q_start + row0 + r);
    const size_t head = tok * p.q_heads + kvh * p.group + g;
    if (p.write_partial) {
      p.seg_acc[(head * p.segments + seg) * D + d] = v;
    } else {
      const float l = row_sum[m];
      p.out[head * D + d] = E::FromFloat(l > 0.0f ? v / l : 0.0f);
    }
  };
#pragma unroll
  for (int i = 0; i < S::kScalarAcc; ++i) {
    const int idx = tid + i * NT;
    emit(idx / D, idx % D, acc[i]);
  }
#endif
  if (p.write_partial && tid < m_rows) {
    const int r = tid / p.group, g = tid % p.group;
    const size_t head = static_cast<size_t>(q_start + row0 + r) * p.q_heads + kvh * p.group + g;
    p.seg_max[head * p.segments + seg] = row_max[tid];
    p.seg_sum[head * p.segments + seg] = row_sum[tid];
  }
  MarkTimelineExit(p.timeline);
}

struct GroupedMergeScratch {
  float4 num[kGroupedMergeGroups][kGroupedMergeLanes];
  float m[kGroupedMergeGroups][kGroupedMergeLanes], den[kGroupedMergeGroups][kGroupedMergeLanes];
};

// U (q head row, 128 dims) outputs of the grouped merge at once, by kGroupedMergeThreads
// threads (all of them must call it: it synchronises the work group twice). Unit k (k <
// n_units, unit_of(k, &head, &dim_block)) takes threads [k T / U, (k + 1) T / U); each of them
// computes U of the unit's G segment groups, so the loads of all units are in flight together
// (the merge inside the head-512 kernel has up to two units per work group at 2 query rows;
// one after another they cost an L2 round trip each). Every group sums the same segments in
// the same order as with U = 1, N partials at a time: the bits depend on N, not on U. Partials are
// read through L2 (ld.cg): in the merge inside the attention kernel they were written by other SMs.
template <class E, int U, int N, class UnitOf>
__device__ void MergeGroupedUnits(const float* seg_acc, const float* seg_max, const float* seg_sum,
                                  uint16_t* out, int n_units, UnitOf unit_of, int segments,
                                  int head_dim, GroupedMergeScratch* sc, bool discard) {
  constexpr int G = kGroupedMergeGroups, L = kGroupedMergeLanes;
  static_assert(G % U == 0, "each thread takes U whole segment groups");
  constexpr int kPerUnit = kGroupedMergeThreads / U;
  // (U = 1: callers pass one unit, and the work group has kGroupedMergeThreads threads.)
  const int k = U == 1 ? 0 : threadIdx.x / kPerUnit, x = threadIdx.x % L;
  const int gg = U == 1 ? threadIdx.x / L : threadIdx.x % kPerUnit / L;
  const bool unit_live = U == 1 || k < n_units;
  size_t head = 0;
  int dim_block = 0;
  if (unit_live) unit_of(k, &head, &dim_block);
  const size_t slot0 = head * segments;
  const int d = (dim_block * L + x) * 4;
  const bool live = unit_live && d < head_dim;
  OnlineSum acc[U];  // groups gg U + j
  for (int s0 = gg * U; s0 < segments; s0 += G * N) {
    float ms[U][N], ls[U][N];
    float4 a[U][N];
#pragma unroll
    for (int j = 0; j < U; ++j)
#pragma unroll
      for (int u = 0; u < N; ++u) {
        const int s = s0 + j + u * G;
        const bool in = unit_live && s < segments;
        ms[j][u] = in ? dev::LoadL2(seg_max + slot0 + s) : -INFINITY;
        ls[j][u] = in ? dev::LoadL2(seg_sum + slot0 + s) : 0.0f;
        a[j][u] =
            in && live
                ? dev::LoadL2(reinterpret_cast<const float4*>(seg_acc + (slot0 + s) * head_dim + d))
                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
    for (int j = 0; j < U; ++j) acc[j].Add(ms[j], ls[j], a[j]);
#if LADDER_DEVICE_HAS_MMA
    // `discard`: these partials are read for the last time; drop their L2 lines unwritten, so
    // that their 2-8 MB (head 512, 1-4 rows, 32K) never go back to HBM while the next call
    // streams its K/V (H200, 4 rows: -0.7 to -1.4 us; 64K -1.8 us). Only where the K/V stream
    // is larger than L2 (evict-first): where it fits, the lines would stay, and the discards
    // cost gemma4-31b-sliding 0.2 us. A line is 128 bytes, the 16-byte reads of eight lanes of
    // this warp (head_dim a multiple of 32; the workspace 128-byte aligned).
    __syncwarp();
    if (discard && x % 8 == 0)
#pragma unroll
      for (int j = 0; j < U; ++j)
#pragma unroll
        for (int u = 0; u < N; ++u) {
          const int s = s0 + j + u * G;
          if (unit_live && live && s < segments)
            dev::DiscardL2Line(seg_acc + (slot0 + s) * head_dim + d);
        }
#endif
  }
  if (unit_live) {
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const int g = gg * U + j;
      sc[k].m[g][x] = acc[j].m, sc[k].den[g][x] = acc[j].den, sc[k].num[g][x] = acc[j].num;
    }
  }
  __syncthreads();
  if (gg == 0 && live) {
    float ms[G], ls[G];
    float4 a[G];
#pragma unroll
    for (int u = 0; u < G; ++u)
      ms[u] = sc[k].m[u][x], ls[u] = sc[k].den[u][x], a[u] = sc[k].num[u][x];
    OnlineSum all;
    all.Add(ms, ls, a);
    *reinterpret_cast<uint2*>(out + head * head_dim + d) = all.Packed<E>();
  }
  __syncthreads();  // the scratch may be reused
}

template <class E, int N>
__global__ void __launch_bounds__(kGroupedMergeThreads)
    MergeSegmentsGroupedKernel(const float* seg_acc, const float* seg_max, const float* seg_sum,
                               uint16_t* out, int q_heads, int segments, int head_dim, int discard,
                               int release_next, unsigned long long* timeline) {
  __shared__ GroupedMergeScratch scratch;
  MarkTimeline(timeline, kMarkEntry);
  // (TuningConfig::release_next, LaunchPlan::Release: 0 at the end, 1 after the wait, 2 at the
  // start) The kernel after this one may launch: it waits for this whole grid before it reads
  // anything. This grid is launched early in the attention kernel's run, so a release from the
  // start lets the next call's work groups take SMs while that kernel still runs; the plan says
  // where that pays.
  if (release_next == 2) dev::AllowDependentLaunch();
  dev::WaitForPriorGrid();  // the attention kernel's partials are complete and visible
  if (release_next == 1) dev::AllowDependentLaunch();
  MarkTimeline(timeline, kMarkReady);
  auto unit = [&](int, size_t* head, int* dim_block) {
    *head = static_cast<size_t>(blockIdx.x) * q_heads + blockIdx.y;
    *dim_block = static_cast<int>(blockIdx.z);
  };
  MergeGroupedUnits<E, 1, N>(seg_acc, seg_max, seg_sum, out, 1, unit, segments, head_dim, &scratch,
                             discard != 0);
  MarkTimelineExit(timeline);
}

}  // namespace ladder::kernels::gpu
