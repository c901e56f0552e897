// Head-512 attention for GPUs with >= 210 KB of shared memory per work group (Hopper: H100,
// H200), with two barriers per 16-key chunk among four warps instead of three per tile among
// all. Same contract and KernelParams as UnifiedAttentionKernel (attention_kernel.h), which it
// replaces for head 512 where it fits (docs/kernels.md: the generic kernel spent ~1 us of fixed
// latency per tile on its barriers and all-thread softmax, one work group per SM).
//
// One work group handles (sequence, query block, KV head, segment), like the generic kernel,
// with eight warps in two teams of four (two warps per SM sub-partition, so each may hold 255
// registers).
//   - Team t (t = 0, 1) takes chunks t, t + 2, t + 4, ... (16 keys each) of the segment, with
//     its own online softmax state and output accumulator; the teams are merged once, at the end.
//   - Each team copies its chunks of K and V (paged, 1 KB rows) into its own ring of
//     kTeamStages shared-memory stages with 16-byte cp.async from all its threads: two chunks in
//     flight per team while one is computed. By column (16 columns, where two warps per team do
//     not score) one of the non-scoring warps issues the chunk as 32 bulk copies of 1 KB onto
//     the stage's mbarrier instead, and the scorers issue nothing (kBulk; H200, 2 rows at 32K:
//     -2.7 us). Where every warp scores, the copying warp was the slowest: bulk copies by dims
//     lost below ~10K keys and won by at most 2.8 % above (kernels-ab-bulk, kernels-locate-bulk)
//     and were deleted, as were those of the split kernels.
//   - Scores are computed transposed, S^T = K Q^T (keys are the 16 MMA rows, the kN = 8 * NT
//     score columns are query rows x q heads of the KV head): one query row of a GQA-8 model
//     fills an 8-wide MMA tile exactly, instead of half of a 16-row one.
//   - By dims (variant 6, and every 8-column call): warp w of a team owns dims
//     [128 w, 128 w + 128): it computes their share of S^T (its K columns and Q in registers)
//     and writes it to shared memory; after a second team barrier every warp sums the four
//     shares in warp order (the same bits in every warp), runs the online softmax itself, and
//     accumulates O^T = V^T P^T over its dims. K and V are each read from shared memory once
//     per chunk, but the softmax is done four times.
//   - By column (TeamScoring::kByColumn, variant 7, 16 and 32 columns): warp w computes n-tile w %
//   NT of S^T
//     over all 512 dims (K read by every warp), runs that n-tile's softmax alone and publishes
//     its P^T fragments and rescale factors; after the second team barrier each warp
//     accumulates O^T over its 128 dims for every n-tile. No partial scores, no repeated softmax
//     at 32 columns (H200, 4 rows at 32K: 107 us against 211 by dims, whose 32-column
//     softmax spilled).
//   - Split scores (TeamScoring::kSplit, variant 8, 16 and 32 columns): S^T by dims as above (K
//   read
//     once, every n-tile's share in each warp), the softmax by column as by column: warp w
//     sums the four shares of n-tile w in warp order, runs its softmax and publishes its P^T
//     fragments. Three team barriers per chunk instead of two, but a quarter of the K reads
//     from shared memory at 32 columns (each ldmatrix feeds four MMAs instead of one).
//   - Split scores with wgmma (TeamScoring::kSplitWgmma, variant 9, 32 columns, only where
//     built for sm_90a, else as kSplit; the 4-row default on compute capability 9.0): V is
//     copied into 128-byte-swizzled 64-dim panels, wgmma's MN-major A operand, and the softmax
//     writes P^T to shared memory as its K-major B operand; each team's O^T is eight m64n32k16
//     warpgroup MMAs per P^T half, waited for after the next chunk's scores. Each team's part
//     is compiled once per team, so the descriptors stay in uniform registers.
//   - P is split into hi + lo 16-bit halves (two MMAs), as in the generic kernel, so 2D and 3D
//     differ by fp32 reassociation only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gpu/attention_kernel.h"
#include "gpu/portability.h"

namespace ladder::kernels::gpu {

// How a team's four warps share a chunk's scores (the header comment above).
// kSplitWgmma: split scores whose O^T = V^T P^T is one warpgroup MMA per 64 dims (sm_90a; at
// 32 columns, elsewhere as kSplit).
enum class TeamScoring { kByDims, kByColumn, kSplit, kSplitWgmma };

template <int NT>
struct TeamShape {
  static constexpr int kD = 512;
  static constexpr int kChunk = 16;   // keys per stage
  static constexpr int kN = 8 * NT;   // score columns
  static constexpr int kLd = kD + 8;  // 16-bit row pitch of K, V (conflict-free ldmatrix)
  static constexpr int kTeams = 2, kTeamWarps = 4, kTeamStages = 3;
  static constexpr int kStages = kTeams * kTeamStages;
  static constexpr int kThreads = kTeams * kTeamWarps * 32;
  static constexpr int kDimsPerWarp = kD / kTeamWarps;
  static constexpr int kMTiles = kDimsPerWarp / 16;
  static constexpr int kObLd = kD + 4;  // fp32 pitch of the team-merge buffers (conflict-free)
  static constexpr size_t kStageBytes = size_t{2} * kChunk * kLd * 2;
  // Partial S^T fragments, [team][warp][nt][element][lane] fp32: each warp's share of the dims.
  static constexpr size_t kSPartBytes = size_t{kTeams} * kTeamWarps * NT * 4 * 32 * 4;
  // max, sum per team; merged max, sum; the teams' weights; the output rows; where each
  // column's output (or partial) row starts.
  static constexpr size_t kStateBytes = size_t{4} * 9 * 32 + size_t{8} * 32;
  // Block-table entries of each team's next kPageRing chunks, refilled kPageRing / 2 at a time.
  static constexpr int kPageRing = 64;
  static constexpr size_t kPageBytes = size_t{4} * kTeams * kPageRing;
  static constexpr size_t kOffSPart = kStages * kStageBytes;
  // Exchanged P^T fragments (hi, lo) and rescale factors, [team][nt][lane] uint4 then float2.
  static constexpr size_t kXchgBytes = size_t{kTeams} * NT * 32 * 24;
  static constexpr size_t kOffXchg = kOffSPart + kSPartBytes;
  // (kSplitWgmma, 32 columns) each team's P^T as wgmma's B operand: hi then lo, 1 KB each.
  static constexpr size_t kPTBytes = NT == 4 ? size_t{kTeams} * 2 * 1024 : 0;
  static constexpr size_t kOffPT = kOffXchg + kXchgBytes;
  static constexpr size_t kOffState = kOffPT + kPTBytes;
  static constexpr size_t kOffPages = kOffState + kStateBytes;
  static constexpr size_t kOffBars = kOffPages + kPageBytes;  // (kBulk) one mbarrier per stage
  static constexpr size_t kSmemBytes = kOffBars + size_t{8} * kStages;
  // Units of the merge inside the kernel per work group, at most (MergeGroupedUnits): two at 8
  // and 16 columns (2 rows: 64 units for 33 work groups per KV head on 132 SMs; H200 -0.5 to
  // -0.7 us against the merge kernel), one at 32: 4 rows keep the merge kernel (128 units per KV
  // head). Since the merge kernel fits the SMs in one wave (63 registers, four work groups per
  // SM) it is 1.2 us faster there than four units inside the kernel (H200; see docs/kernels.md).
  static constexpr int kMergeUnits = NT == 4 ? 1 : 2;

  static_assert(NT == 1 || NT == 2 || NT == 4, "8, 16 or 32 score columns");
  static_assert(kStageBytes % 16 == 0 && kOffSPart % 16 == 0,
                "alignment of the stages and partial scores");
  static_assert(kPageRing / 2 >= kTeamStages,
                "a refilled half of the page ring is visible before it is read");
  static_assert(size_t{2} * 4 * kN * kObLd <= kStages * kStageBytes,
                "the team-merge buffers reuse the stages");
  static_assert(kSmemBytes <= 232448, "fits one work group's shared memory on Hopper");
  static_assert(kTeamWarps * kDimsPerWarp == kD && kD == 2 * kThreads,
                "the write-out gives each thread two dims");
};

// By column (kBulk) the chunks come by bulk copy (cp.async.bulk, one 1 KB row per lane of one
// non-scoring warp of the team, completion on the stage's mbarrier), so the other three warps
// issue no copies; the other scorings copy by cp.async from every thread.
template <class E, int NT, TeamScoring kScoring>
__global__ void __launch_bounds__(TeamShape<NT>::kThreads, 1)
    TeamAttention512Kernel(KernelParams p) {
#if LADDER_DEVICE_HAS_MMA
  using S = TeamShape<NT>;
  constexpr int D = S::kD, CK = S::kChunk, LD = S::kLd, TS = S::kTeamStages;
  constexpr bool kBulk = kScoring == TeamScoring::kByColumn;
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* stages = reinterpret_cast<uint16_t*>(smem);  // [stage][K|V][CK][LD]
  float* spart = reinterpret_cast<float*>(smem + S::kOffSPart);
  float* team_max = reinterpret_cast<float*>(smem + S::kOffState);  // [team][32]
  float* team_sum = team_max + 64;                                  // [team][32]
  float* fin_max = team_sum + 64;                                   // [32]
  float* fin_sum = fin_max + 32;                                    // [32]
  float2* fin_w = reinterpret_cast<float2*>(fin_sum + 32);          // [32] the teams' weights
  int* fin_head = reinterpret_cast<int*>(fin_w + 32);               // [32] output rows
  size_t* fin_off = reinterpret_cast<size_t*>(fin_head + 32);  // [32] output (partial) row offsets

  MarkTimeline(p.timeline, kMarkEntry);
  dev::WaitForPriorGrid();  // (attention_overlap: as in UnifiedAttentionKernel)
  MarkTimeline(p.timeline, kMarkReady);
  const int tid = threadIdx.x;
  const WorkItem w = WorkItemOf(p);
  if (w.empty) return;
  const int seq = w.seq, kvh = w.kvh, seg = w.seg, q_start = w.q_start, row0 = w.row0;
  const int m_rows = w.m_rows, first_pos = w.first_pos, hi = w.hi, lo = w.lo;
  const int lo_al = lo / CK * CK;
  const int chunks = (hi - lo_al + CK - 1) / CK;
  // Segments differ by at most one chunk (2048 chunks in 33 segments: 62 or 63 each, not 63 and a
  // last one of 32): the call lasts as long as its slowest work group.
  const int cb = static_cast<int>(static_cast<long long>(chunks) * seg / p.segments);
  const int n_chunks =
      static_cast<int>(static_cast<long long>(chunks) * (seg + 1) / p.segments) - cb;

  dev::AllowDependentLaunch();

  const int warp = tid / 32, lane = tid % 32;
  const int team = warp / S::kTeamWarps, tw = warp % S::kTeamWarps;
  constexpr bool kWg = kScoring == TeamScoring::kSplitWgmma && NT == 4 && LADDER_DEVICE_HAS_WGMMA;
  // ---- attention ------------------------------------------------------------------------------
  // By column: warp w computes the scores of n-tile w % NT over all 512 dims and runs its
  // softmax alone; the warps swap P^T fragments instead of partial scores. By dims: warp w
  // computes all n-tiles over its 128 dims and every warp sums the four shares and runs the
  // whole softmax (4 x the softmax work, but no fourfold reads of K). Split: the scores by
  // dims, the softmax by column.
  constexpr bool kCols = kScoring == TeamScoring::kByColumn && NT >= 2;
  constexpr bool kSplit =
      (kScoring == TeamScoring::kSplit || kScoring == TeamScoring::kSplitWgmma) && NT >= 2;
  constexpr bool kXchg = kCols || kSplit;                      // P^T fragments are exchanged
  constexpr int kQTiles = kCols ? 1 : NT;                      // n-tiles of S^T this warp computes
  constexpr int kSTiles = kXchg ? 1 : NT;                      // n-tiles whose softmax it runs
  constexpr int kQSteps = (kCols ? D : S::kDimsPerWarp) / 16;  // 16-dim k-steps of S^T
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr float kLazyLog2 = 8.0f;  // (log2 units) the running maximum's slack, below
  constexpr int kAcc = kCols ? 4 : NT <= 2 ? 2 : 1;  // independent S^T accumulators per n-tile
  const int g8 = lane >> 2, t4 = lane & 3;
  const int lrow = lane & 7, lmat = lane >> 3;
  const int dim0 = tw * S::kDimsPerWarp;  // this warp's dims of O^T (and of S^T, by dims)
  // (By column, split) this warp's n-tile of the softmax (by column: also of S^T).
  const int my_nt = kCols ? tw % NT : kSplit ? tw : 0;
  // (By column) the warps that score: all four at NT = 4; at NT = 2 warps 0-1 of team 0 and 2-3
  // of team 1, so each SM sub-partition scores for one team and the other two warps only wait.
  const bool scorer = !kCols || NT == 4 || tw / 2 == team;
  const bool softmaxer = kSplit ? tw < NT : scorer;        // (split at NT = 2: warps 0-1)
  auto nt_of = [&](int q) { return kCols ? my_nt : q; };   // n-tile of S^T tile q
  auto snt_of = [&](int q) { return kXchg ? my_nt : q; };  // n-tile of softmax tile q
  // This lane's two score columns 8 nt + 2 t4 (+1) of each n-tile of its softmax: the last key
  // each may see (its query row's position; -1 for columns past m_rows).
  int last_key[kSTiles][2];
#pragma unroll
  for (int q = 0; q < kSTiles; ++q)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int m = snt_of(q) * 8 + 2 * t4 + e;
      last_key[q][e] = m < m_rows ? first_pos + m / p.group : -1;
    }
  float acc[S::kMTiles][NT][4];
#pragma unroll
  for (int a = 0; a < S::kMTiles; ++a)
#pragma unroll
    for (int b = 0; b < NT; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;
  float m_run[kSTiles][2], l_run[kSTiles][2];  // log2 units
#pragma unroll
  for (int q = 0; q < kSTiles; ++q)
    m_run[q][0] = m_run[q][1] = -INFINITY, l_run[q][0] = l_run[q][1] = 0.0f;

  // Everything from here to the key loop's end is per team. With wgmma it is compiled once per
  // team (team a constant in each copy), so the shared-memory descriptors and the loop bounds
  // are warp-uniform and the compiler keeps them in uniform registers instead of moving each
  // descriptor into one before every warpgroup MMA. (The body keeps the kernel's indentation.)
  auto run_team = [&](auto team_c) {
    const int team = team_c;
    const int team_chunks = n_chunks > team ? (n_chunks - team + 1) / 2 : 0;  // chunks team + 2 k
    uint16_t* team_stages = stages + static_cast<size_t>(team) * TS * 2 * CK * LD;

    // ---- loads: the team's 128 threads copy each of its chunks with 16-byte cp.async, thread t
    // key t / 8 of the chunk, pieces t % 8 + 8 i of its K and V rows (each warp-wide copy is four
    // 128-byte runs): one row address per thread and chunk, the rest immediate offsets. (Thread t
    // had piece t % 64 of rows t / 64 + 2 i: 8 row addresses, ~165 instructions per warp and
    // chunk of the 32-column kernel's ~620; H200 ncu.) One cp.async group per chunk (empty ones
    // too), so "chunk k landed" is always wait_group<TS - 2>.
    const int tt = tid % (S::kTeamWarps * 32);
    const int ld_row = tt / 8, ld_piece = tt % 8;
    static_assert(S::kTeamWarps * 32 == 8 * CK, "eight threads per key of a chunk");
    const int* btab = p.block_table + static_cast<size_t>(seq) * p.max_blocks_per_seq;
    const int bs_mask = (1 << p.block_size_shift) - 1;
    // Chunks start at multiples of 16 keys: with pages of >= 16 tokens each chunk is in one page.
    const bool one_page = p.block_size_shift >= 4;
    auto chunk_key0 = [&](int k) { return lo_al + (cb + 2 * k + team) * CK; };
    // The page of each chunk comes from a shared-memory ring that cp.async fills half a ring
    // ahead: a block-table load issued behind two chunks of copies returns only after them (the
    // load queue is in order), and waiting on it stalled the loop (H200, ncu: 9 % of warp samples
    // at one query row).
    constexpr int PR = S::kPageRing;
    int* page_ring = reinterpret_cast<int*>(smem + S::kOffPages) + team * PR;
    if (one_page && tt < PR)
      page_ring[tt] = tt < team_chunks ? btab[chunk_key0(tt) >> p.block_size_shift] : 0;
    auto refill_pages = [&](int k) {  // chunks [k + PR / 2, k + PR) into the half left behind
      const int c = k + PR / 2 + tt;
      if (one_page && tt < PR / 2 && c < team_chunks)
        dev::CopyAsync4(page_ring + c % PR, btab + (chunk_key0(c) >> p.block_size_shift));
      if (kBulk) dev::CopyAsyncCommit();  // (waited for in the next iteration)
    };
    const unsigned long long l2_policy = dev::L2StreamPolicy(p.evict_first != 0);
    unsigned long long* bars =
        reinterpret_cast<unsigned long long*>(smem + S::kOffBars) + team * TS;
    if (kBulk && tt < TS) dev::MbarrierInit(bars + tt, 1);
    if (kBulk) dev::MbarrierInitFence();
    auto issue = [&](int k) {  // the team's k-th chunk into its stage k % TS
      if constexpr (kBulk) {
        // One warp copies, lane r row r (0-15 K, 16-31 V), the two teams' copying warps on
        // different SM sub-partitions (warp w issues on sub-partition w % 4), each one that does
        // not score (warp 2 of team 0, 0 of team 1).
        static_assert(NT == 2, "bulk copies by column at 16 columns only");
        constexpr int kCopyWarp0 = 2, kCopyWarp1 = 0;
        if (k < team_chunks && tw == (team == 0 ? kCopyWarp0 : kCopyWarp1)) {
          unsigned long long* bar = bars + k % TS;
          if (lane == 0) dev::MbarrierArriveExpectTx(bar, 2 * CK * D * 2);
          __syncwarp();
          uint16_t* st = team_stages + static_cast<size_t>(k % TS) * 2 * CK * LD;
          // Keys outside [lo, hi) re-read a visible row of the chunk (as below: same page).
          const int j = max(lo, min(chunk_key0(k) + (lane & (CK - 1)), hi - 1));
          const int pg = one_page ? page_ring[k % PR] : btab[j >> p.block_size_shift];
          const size_t grow =
              ((static_cast<size_t>(pg) << p.block_size_shift) + (j & bs_mask)) * p.kv_heads + kvh;
          dev::BulkCopyToShared(st + lane * LD, (lane < CK ? p.k : p.v) + grow * D, D * 2, bar,
                                l2_policy);
        }
        return;
      }
      if (k < team_chunks) {
        uint16_t* st = team_stages + static_cast<size_t>(k % TS) * 2 * CK * LD;
        // K as [key][LD]; V the same, or (wgmma) as wgmma's MN-major A operand with the 128-byte
        // swizzle: 64-dim panels 2 KB apart, key row r of a panel at r * 128 bytes, its 16-byte
        // piece c at (c ^ the row's address bits 7-9) * 16 (descriptor base offset 0: checked on
        // the H200 by kernels/tools/wgmma_layout.cu, also for panels off 1024-byte boundaries).
        uint16_t* sk = st + ld_row * LD + ld_piece * 8;
        uint16_t* sv = sk + CK * LD;
        if constexpr (kWg) {
          uint16_t* row = st + CK * LD + ld_row * 64;
          const unsigned phase = (dev::SharedAddress(row) >> 7) & 7u;
          sv = row + (ld_piece ^ static_cast<int>(phase)) * 8;
        }
        constexpr int kVStep = kWg ? 1024 : 64;  // pieces 8 apart
        // Keys outside [lo, hi) re-read a visible row (their scores are masked, and P = 0 times
        // finite data adds nothing), so no stage ever holds uninitialised bits.
        const int j = max(lo, min(chunk_key0(k) + ld_row, hi - 1));
        const int pg = one_page ? page_ring[k % PR] : btab[j >> p.block_size_shift];
        const size_t grow =
            ((static_cast<size_t>(pg) << p.block_size_shift) + (j & bs_mask)) * p.kv_heads + kvh;
        const uint16_t* kr = p.k + grow * D + ld_piece * 8;
        const uint16_t* vr = p.v + grow * D + ld_piece * 8;
#pragma unroll
        for (int i = 0; i < D / 64; ++i) {
          dev::CopyAsync16Hinted(sk + 64 * i, kr + 64 * i, true, l2_policy);
          dev::CopyAsync16Hinted(sv + kVStep * i, vr + 64 * i, true, l2_policy);
        }
      }
      dev::CopyAsyncCommit();
    };
    dev::NamedBarrier(
        1 + team, S::kTeamWarps * 32);  // the ring's first entries (and the mbarriers) are visible
#pragma unroll
    for (int k = 0; k < TS - 1; ++k) issue(k);

    // Q^T as the B operand of S^T: column g8 of the n-tile, dims 2 t4 (+1) and 8 + 2 t4 (+1) of
    // each 16-dim k-step; zero for columns past m_rows.
    uint32_t qf[kQTiles][kQSteps][2];
#pragma unroll
    for (int q = 0; q < kQTiles; ++q) {
      const int m = nt_of(q) * 8 + g8;
      const uint16_t* qrow = nullptr;
      if (m < m_rows) {
        const int r = m / p.group, g = m % p.group;
        qrow = p.q + (static_cast<size_t>(q_start + row0 + r) * p.q_heads + kvh * p.group + g) * D +
               (kCols ? 0 : dim0) + 2 * t4;
      }
#pragma unroll
      for (int ks = 0; ks < kQSteps; ++ks) {
        qf[q][ks][0] = qrow ? *reinterpret_cast<const uint32_t*>(qrow + 16 * ks) : 0u;
        qf[q][ks][1] = qrow ? *reinterpret_cast<const uint32_t*>(qrow + 16 * ks + 8) : 0u;
      }
    }
    // ldmatrix lane addresses: K as the A operand of S^T (key, dim), V transposed as the A operand
    // of O^T (key, dim).
    const int k_off = (lrow + (lmat & 1) * 8) * LD + (kCols ? 0 : dim0) + (lmat >> 1) * 8;
    [[maybe_unused]] const int v_off = (lrow + (lmat >> 1) * 8) * LD + dim0 + (lmat & 1) * 8;
    // By dims: partial S^T, [team][warp][nt][lane] float4. By column: P^T fragments (hi, lo) as
    // [team][nt][lane] uint4, then the rescale factors as [team][nt][lane] float2.
    [[maybe_unused]] float4* my_part =
        reinterpret_cast<float4*>(spart) + ((team * S::kTeamWarps + tw) * NT) * 32 + lane;
    [[maybe_unused]] const float4* team_part =
        reinterpret_cast<const float4*>(spart) + team * S::kTeamWarps * NT * 32 + lane;
    unsigned char* xbase = smem + S::kOffXchg + static_cast<size_t>(team) * NT * 32 * 24;
    [[maybe_unused]] uint4* p_xchg = reinterpret_cast<uint4*>(xbase) + lane;
    [[maybe_unused]] float2* a_xchg = reinterpret_cast<float2*>(xbase + NT * 32 * 16) + lane;
    uint16_t* team_pt =
        reinterpret_cast<uint16_t*>(smem + S::kOffPT) + team * 1024;  // (wgmma) [hi | lo]
    // (wgmma) descriptors, computed once: stage s's V tile mt starts (s * kStageBytes + mt * 2048)
    // / 16 further.
    const unsigned long long desc_v0 =
        dev::WgmmaDesc(team_stages + CK * LD, 16, 1024) | (1ull << 62);  // 128-byte swizzle
    const unsigned long long desc_p_hi = dev::WgmmaDesc(team_pt, 128, 256),
                             desc_p_lo = dev::WgmmaDesc(team_pt + 512, 128, 256);

    for (int k = 0; k < team_chunks; ++k) {
      const int s = k % TS;
      if constexpr (kBulk) {
        dev::MbarrierWait(bars + s, (k / TS) & 1);  // chunk k has landed
        dev::CopyAsyncWait<0>();                    // this thread's page-ring refills, if any
      } else {
        dev::CopyAsyncWait<TS - 2>();  // this thread's copies of chunk k have landed
      }
      // Everyone's copies of chunk k are visible, and everyone has left chunk k - 1 (its stage,
      // which the next copies refill, and the exchanged scores or fragments).
      dev::NamedBarrier(1 + team, S::kTeamWarps * 32);
      // Refilled entries travel in chunk k + TS - 1's copy group: visible from iteration
      // k + TS - 1 on, long before chunk k + PR / 2 is issued.
      if (k % (PR / 2) == 0 && k > 0) refill_pages(k);
      // Split at 32 columns issues the next copies after the scores instead, so the copies'
      // address registers are free again by the time they are reused (H200 ncu: the first
      // instruction after the copies waited for them; 4 rows 88.8 against 90.0 us; 1 row by dims
      // was 0.4 us slower so). Later still was slower: before the P^T barrier 90.1 against 84.9
      // us, after the chunk's O^T 85.7.
      // (With wgmma they come after this warp has waited for the previous chunk's MMAs, which read
      // the stage they refill: one warpgroup operation, complete for every warp of the team.)
      constexpr bool kIssueLate = !kBulk && kSplit && NT == 4;
      if (!kIssueLate) issue(k + TS - 1);
      const int i = 2 * k + team;  // chunk of the segment
      const uint16_t* ks = team_stages + static_cast<size_t>(s) * 2 * CK * LD;
      [[maybe_unused]] const uint16_t* vs = ks + CK * LD;
      const int j0 = lo_al + (cb + i) * CK;

      uint32_t bh[NT][2], bl[NT][2];
      float alpha[NT][2];
      float raw[kQTiles][4];  // S^T of the n-tiles this warp computes (by dims, split: its share)
      if (scorer) {
        // ---- S^T = K Q^T
        // -------------------------------------------------------------------------
        {
          float c[kQTiles][kAcc][4];
#pragma unroll
          for (int q = 0; q < kQTiles; ++q)
#pragma unroll
            for (int u = 0; u < kAcc; ++u)
#pragma unroll
              for (int x = 0; x < 4; ++x) c[q][u][x] = 0.0f;
#pragma unroll
          for (int ks_i = 0; ks_i < kQSteps; ++ks_i) {
            uint32_t a[4];
            dev::LdMatrixX4(a[0], a[1], a[2], a[3], ks + k_off + 16 * ks_i);
#pragma unroll
            for (int q = 0; q < kQTiles; ++q)
              dev::Mma16816<E::kIsBf16>(c[q][ks_i % kAcc], a, qf[q][ks_i][0], qf[q][ks_i][1]);
          }
#pragma unroll
          for (int q = 0; q < kQTiles; ++q)
#pragma unroll
            for (int x = 0; x < 4; ++x) {
              float v = c[q][0][x];
#pragma unroll
              for (int u = 1; u < kAcc; ++u) v += c[q][u][x];
              raw[q][x] = v;
            }
        }
        if constexpr (!kCols) {
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
            my_part[nt * 32] = make_float4(raw[nt][0], raw[nt][1], raw[nt][2], raw[nt][3]);
        }
      }                                        // scorer
      if constexpr (kWg) dev::WgmmaWaitAll();  // the previous chunk's O^T (and its reads of V, P^T)
      if (kIssueLate) issue(k + TS - 1);
      if constexpr (!kCols)
        dev::NamedBarrier(1 + team, S::kTeamWarps * 32);  // every share is written
      if (softmaxer) {
        // The scores of the softmax's n-tiles: by dims and split the four warps' shares summed in
        // warp order (every warp that sums an n-tile holds the same bits).
        float sr[kSTiles][4];
#pragma unroll
        for (int q = 0; q < kSTiles; ++q) {
          if constexpr (kCols) {
#pragma unroll
            for (int x = 0; x < 4; ++x) sr[q][x] = raw[q][x];
          } else {
            float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int w = 0; w < S::kTeamWarps; ++w) {
              const float4 v = team_part[(w * NT + snt_of(q)) * 32];
              sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
            }
            sr[q][0] = sum.x, sr[q][1] = sum.y, sr[q][2] = sum.z, sr[q][3] = sum.w;
          }
        }

#pragma unroll
        for (int q = 0; q < kSTiles; ++q) {
          const int nt = kXchg ? 0 : q;  // where this n-tile's fragments go (exchanged below)
          // sc[x]: key g8 (x < 2) or g8 + 8, column 2 t4 + (x & 1) of the n-tile.
          float sc[4];
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            float v = sr[q][x] * p.scale;
            if (p.softcap > 0.0f) v = p.softcap * tanhf(v / p.softcap);
            v *= kLog2e;
            const int e = x & 1;
            const int j = j0 + g8 + (x >= 2 ? 8 : 0);
            const bool visible =
                j <= last_key[q][e] && (p.window <= 0 || last_key[q][e] - j < p.window);
            sc[x] = visible ? v : -INFINITY;
          }
          // ---- online softmax over the chunk's 16 keys, per score column ----------------------
          // The running maximum moves only when a chunk's exceeds it by more than kLazyLog2 (P then
          // stays below 2^kLazyLog2, far from fp32's range): after the first chunks the outputs are
          // hardly ever rescaled. Every 32-column chunk rescaled before (H200 ncu, 4 rows: 132 FMUL
          // of ~760 instructions per warp and chunk), since one of 32 columns found a new maximum.
          float ps[4], m_new[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float mx = dev::XorMax<4, 16>(fmaxf(sc[e], sc[e + 2]));
            const bool grow =
                mx > m_run[q][e] + kLazyLog2;  // (-inf + k is -inf: the first visible key grows)
            m_new[e] = grow ? mx : m_run[q][e];
            alpha[nt][e] =
                !grow ? 1.0f : (m_run[q][e] == -INFINITY ? 0.0f : exp2f(m_run[q][e] - mx));
          }
#pragma unroll
          for (int x = 0; x < 4; ++x)
            ps[x] = sc[x] == -INFINITY ? 0.0f : exp2f(sc[x] - m_new[x & 1]);
            // Each lane keeps its own part of the exp-sum (alpha is the same in all eight lanes of
            // a column); the parts are summed once, after the last chunk.
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            l_run[q][e] = l_run[q][e] * alpha[nt][e] + (ps[e] + ps[e + 2]);
            if (m_new[e] != -INFINITY) m_run[q][e] = m_new[e];
          }
          // ---- P^T as the B operand of O^T: pack (key row, two columns), transpose in registers
          // --
#pragma unroll
          for (int r = 0; r < 2; ++r) {  // key rows g8 and g8 + 8
            const uint32_t h = dev::PackRn2<E::kIsBf16>(ps[2 * r], ps[2 * r + 1]);
            float h0, h1;
            dev::Unpack2<E::kIsBf16>(h, h0, h1);
            const uint32_t l = dev::PackRn2<E::kIsBf16>(ps[2 * r] - h0, ps[2 * r + 1] - h1);
            bh[nt][r] = dev::MovMatrixTrans(h);
            bl[nt][r] = dev::MovMatrixTrans(l);
          }
        }
        if constexpr (kWg) {
          // P^T as wgmma's K-major B operand: the core matrix of columns 8 n.. and keys 8 b.. at
          // (2 n + b) * 128 bytes, column rows of 16 bytes (lane: column g8, keys 2 t4, +1).
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int at = ((my_nt * 2 + r) * 8 + g8) * 8 + 2 * t4;
            *reinterpret_cast<uint32_t*>(team_pt + at) = bh[0][r];
            *reinterpret_cast<uint32_t*>(team_pt + 512 + at) = bl[0][r];
          }
          a_xchg[my_nt * 32] = make_float2(alpha[0][0], alpha[0][1]);
        } else if constexpr (kXchg) {
          p_xchg[my_nt * 32] = make_uint4(bh[0][0], bh[0][1], bl[0][0], bl[0][1]);
          a_xchg[my_nt * 32] = make_float2(alpha[0][0], alpha[0][1]);
        }
      }  // softmaxer
      if constexpr (kXchg) {
        // (wgmma) this thread's P^T stores and landed copies, before the async proxy reads them
        if constexpr (kWg) dev::FenceProxyAsyncShared();
        dev::NamedBarrier(1 + team, S::kTeamWarps * 32);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          if constexpr (!kWg) {
            const uint4 f = p_xchg[nt * 32];
            bh[nt][0] = f.x, bh[nt][1] = f.y, bl[nt][0] = f.z, bl[nt][1] = f.w;
          }
          const float2 al = a_xchg[nt * 32];
          alpha[nt][0] = al.x, alpha[nt][1] = al.y;
        }
      }
      // ---- O^T = alpha O^T + V^T P^T over this warp's 128 dims -------------------------------
      // Rescaling by exactly 1 changes no bits: skip it when no running maximum moved (most
      // chunks).
      bool rescale = false;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) rescale |= alpha[nt][0] != 1.0f || alpha[nt][1] != 1.0f;
      if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
        for (int mt = 0; mt < S::kMTiles; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            acc[mt][nt][0] *= alpha[nt][0];
            acc[mt][nt][1] *= alpha[nt][1];
            acc[mt][nt][2] *= alpha[nt][0];
            acc[mt][nt][3] *= alpha[nt][1];
          }
      }
      if constexpr (kWg) {
        // The team's O^T [512 x 32] as eight 64-dim tiles, P^T hi then lo; warp w holds dims
        // 64 mt + 16 w (+8) + g8 of tile mt. Waited for after the next chunk's scores.
        dev::WgmmaFence();
#pragma unroll
        for (int mt = 0; mt < S::kMTiles; ++mt) {
          const unsigned long long da =
              desc_v0 + static_cast<unsigned>((s * S::kStageBytes + mt * 2048) >> 4);
          float(&d)[16] = reinterpret_cast<float(&)[16]>(acc[mt]);
          dev::Wgmma64x32<E::kIsBf16>(d, da, desc_p_hi, 1);
          dev::Wgmma64x32<E::kIsBf16>(d, da, desc_p_lo, 1);
        }
        dev::WgmmaCommit();
      } else {
#pragma unroll
        for (int mt = 0; mt < S::kMTiles; ++mt) {
          uint32_t a[4];
          dev::LdMatrixX4Trans(a[0], a[1], a[2], a[3], vs + v_off + mt * 16);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            dev::Mma16816<E::kIsBf16>(acc[mt][nt], a, bh[nt][0], bh[nt][1]);
            dev::Mma16816<E::kIsBf16>(acc[mt][nt], a, bl[nt][0], bl[nt][1]);
          }
        }
      }
    }
    if (team_chunks < (n_chunks + 1) / 2) {
      // Team 1 has one chunk fewer (an odd count): it passes its named barrier as often as
      // team 0 passes its own. The hardware keeps the two barriers apart either way, but
      // compute-sanitizer's racecheck paired the block-wide barrier below wrongly across teams
      // whose counts differed and reported thousands of hazards there (docs/kernel-experiments.md);
      // with equal counts it reports none.
      constexpr int kChunkBarriers = 1 + (kCols ? 0 : 1) + (kXchg ? 1 : 0);
#pragma unroll
      for (int b = 0; b < kChunkBarriers; ++b) dev::NamedBarrier(1 + team, S::kTeamWarps * 32);
    }
    if constexpr (kWg) dev::WgmmaWaitAll();
  };  // run_team
  if constexpr (kWg) {
    if (team == 0)
      run_team(std::integral_constant<int, 0>{});
    else
      run_team(std::integral_constant<int, 1>{});
  } else {
    run_team(team);
  }
  MarkTimeline(p.timeline, kMarkLoopEnd);  // (team 0's: thread 0 is in it)
  dev::CopyAsyncWait<0>();  // (only empty groups and page entries past the end are left)
#pragma unroll
  for (int q = 0; q < kSTiles; ++q)
#pragma unroll
    for (int e = 0; e < 2; ++e) l_run[q][e] = dev::XorSum<4, 16>(l_run[q][e]);

  // ---- merge the two teams while writing out (all 256 threads) --------------------------------
  // Both teams park their accumulators in the (free) stages at once; 32 threads weigh the two
  // teams per column and look up each column's output row; then every thread writes four dims
  // of a column at a time, weighing the teams on the way. (The teams used to merge in place, one
  // after the other, and every thread divided by the GQA group per column: at 32 columns ~7 us from
  // the end of a work group's key loop to its end, H200.)
  if ((kXchg ? softmaxer : tw == 0) && g8 == 0) {
#pragma unroll
    for (int q = 0; q < kSTiles; ++q)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        team_max[team * 32 + snt_of(q) * 8 + 2 * t4 + e] = m_run[q][e];
        team_sum[team * 32 + snt_of(q) * 8 + 2 * t4 + e] = l_run[q][e];
      }
  }
  __syncthreads();  // both teams are done with the stages: they become the merge buffers
  float* ob = reinterpret_cast<float*>(smem) +
              static_cast<size_t>(team) * S::kN * S::kObLd;  // [column][kObLd]
#pragma unroll
  for (int mt = 0; mt < S::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int x = 0; x < 4; ++x)
        ob[(nt * 8 + 2 * t4 + (x & 1)) * S::kObLd + (kWg ? 64 * mt + 16 * tw : dim0 + 16 * mt) +
           g8 + (x >= 2 ? 8 : 0)] = acc[mt][nt][x];
  if (tid < S::kN) {
    const float ma = team_max[tid], mb = team_max[32 + tid], mm = fmaxf(ma, mb);
    const float wa = ma == -INFINITY ? 0.0f : exp2f(ma - mm),
                wb = mb == -INFINITY ? 0.0f : exp2f(mb - mm);
    fin_max[tid] = mm;
    fin_sum[tid] = team_sum[tid] * wa + team_sum[32 + tid] * wb;
    fin_w[tid] = make_float2(wa, wb);
    const int r = tid / p.group, g = tid % p.group;
    const int head =
        (q_start + row0 + r) * p.q_heads + kvh * p.group + g;  // (< 2^31: tokens x q heads)
    fin_head[tid] = head;
    fin_off[tid] = (p.write_partial ? static_cast<size_t>(head) * p.segments + seg
                                    : static_cast<size_t>(head)) *
                   D;
  }
  __syncthreads();
  // Thread t writes dims 4 (t % 128) .. + 3 of columns t / 128, + 2, ...: per column one
  // offset, one weight pair and two 16-byte reads from shared memory, one 16-byte store (8-byte
  // for the output). (Two dims of every column per thread, with each column's row offset
  // computed in 64 bits per thread, took ~80 instructions per column and ~3.5 us at 4 rows
  // after the key loop; H200 ncu.)
  const float* ob0 = reinterpret_cast<const float*>(smem);
  const float* ob1 = ob0 + S::kN * S::kObLd;
  constexpr int kColThreads = D / 4;  // threads per column
  static_assert(S::kThreads % kColThreads == 0 && (S::kObLd * 4) % 16 == 0,
                "whole columns, 16-byte reads");
  const int d = 4 * (tid % kColThreads);
  auto column = [&](int m) {
    const float2 w = fin_w[m];
    const float4 a = *reinterpret_cast<const float4*>(ob0 + m * S::kObLd + d);
    const float4 b = *reinterpret_cast<const float4*>(ob1 + m * S::kObLd + d);
    return make_float4(a.x * w.x + b.x * w.y, a.y * w.x + b.y * w.y, a.z * w.x + b.z * w.y,
                       a.w * w.x + b.w * w.y);
  };
  if (p.write_partial) {
#pragma unroll 4
    for (int m = tid / kColThreads; m < m_rows; m += S::kThreads / kColThreads)
      *reinterpret_cast<float4*>(p.seg_acc + fin_off[m] + d) = column(m);
  } else {
#pragma unroll 4
    for (int m = tid / kColThreads; m < m_rows; m += S::kThreads / kColThreads) {
      const float4 v = column(m);
      const float l = fin_sum[m];
      const uint32_t lo = E::FromFloat(l > 0.0f ? v.x / l : 0.0f) |
                          (static_cast<uint32_t>(E::FromFloat(l > 0.0f ? v.y / l : 0.0f)) << 16);
      const uint32_t hi = E::FromFloat(l > 0.0f ? v.z / l : 0.0f) |
                          (static_cast<uint32_t>(E::FromFloat(l > 0.0f ? v.w / l : 0.0f)) << 16);
      *reinterpret_cast<uint2*>(p.out + fin_off[m] + d) = make_uint2(lo, hi);
    }
  }
  if (p.write_partial && tid < m_rows) {
    const size_t head = static_cast<size_t>(fin_head[tid]);
    p.seg_max[head * p.segments + seg] = fin_max[tid];
    p.seg_sum[head * p.segments + seg] = fin_sum[tid];
  }
  if (p.write_partial && p.merge_in_kernel) {
    // ---- the merge, inside the kernel: every work group of the grid is resident (cooperative
    // launch), so waiting for the group's other segments cannot deadlock -------------------
    __threadfence();  // this work group's partials, before its flag
    __syncthreads();
    unsigned long long* flags =
        p.merge_flags + (static_cast<size_t>(blockIdx.x) * gridDim.y + blockIdx.y) * p.segments;
    if (tid == 0) dev::StoreRelease(flags + seg, p.epoch);
    for (int s = tid; s < p.segments; s += S::kThreads)
      while (dev::LoadAcquire(flags + s) != p.epoch) __nanosleep(64);
    __syncthreads();
    // Units (score column m, 128 dims) seg, seg + segments, ... (at most S::kMergeUnits: the
    // host merges in the kernel only then), all merged at once.
    static_assert(S::kThreads == kGroupedMergeThreads, "the merge units take the whole work group");
    static_assert(S::kMergeUnits == 1 || S::kMergeUnits == 2, "one instantiation per unit count");
    static_assert(size_t{S::kMergeUnits} * sizeof(GroupedMergeScratch) <= S::kOffSPart,
                  "the scratch reuses the stages");
    auto* scratch = reinterpret_cast<GroupedMergeScratch*>(smem);
    constexpr int kDimBlocks = D / (4 * kGroupedMergeLanes);
    const int units = m_rows * kDimBlocks;
    // (Scalars by value: a reference into the kernel's parameters cost the 32-column kernel
    // a local copy of them, and spills.)
    auto unit_at = [segs = p.segments, group = p.group, q_heads = p.q_heads,
                    token0 = q_start + row0, kvh](int u) {
      return [=](int k, size_t* head,
                 int* dim_block) {  // unit u + k segs as MergeGroupedUnits' unit_of
        const int uk = u + k * segs, m = uk / kDimBlocks;
        *head = static_cast<size_t>(token0 + m / group) * q_heads + kvh * group + m % group;
        *dim_block = uk % kDimBlocks;
      };
    };
    const int mine = seg < units ? (units - seg + p.segments - 1) / p.segments : 0;
    if (mine == 1)
      MergeGroupedUnits<E, 1, kGroupedMergePer>(p.seg_acc, p.seg_max, p.seg_sum, p.out, 1,
                                                unit_at(seg), p.segments, D, scratch,
                                                p.evict_first != 0);
    if constexpr (S::kMergeUnits >= 2)
      if (mine == 2)
        MergeGroupedUnits<E, 2, kGroupedMergePer>(p.seg_acc, p.seg_max, p.seg_sum, p.out, 2,
                                                  unit_at(seg), p.segments, D, scratch,
                                                  p.evict_first != 0);
  }
  MarkTimelineExit(p.timeline);
#endif
}

}  // namespace ladder::kernels::gpu
