// Head-512 attention at 33-40 score columns (five query rows of GQA 8: MTP with four draft
// tokens) in one pass over K and V, for GPUs with ~215 KB of shared memory per work group
// (Hopper). Same contract and KernelParams as UnifiedAttentionKernel (attention_kernel.h).
//
// Why a kernel of its own: the team kernel (team_attention_kernel.h) takes at most 32 columns,
// so five rows ran as two query blocks, and each read all of K and V: 37-50 % of the copy ceiling
// where four rows reach 86-92 % (H200). Its two teams take alternate chunks with every column
// each, and five n-tiles of Q^T and O^T do not fit a warp's registers that way. Here the teams
// split the columns instead and both take every chunk:
//   - Team 0 (warps 0-3) owns n-tiles 0-2 (columns 0-23), team 1 (warps 4-7) n-tiles 3-4
//     (columns 24-39). Warp w of a team owns dims [128 w, 128 w + 128) of its team's O^T and its
//     share of S^T, as the team kernel's split scoring: scores by dims, summed in warp order,
//     the softmax by column (warp w of the team runs n-tile w of the team), P^T exchanged.
//   - One ring of six 16-key stages serves both teams: team 0 copies each chunk's K rows, team 1
//     its V rows (cp.async, eight 16-byte pieces per thread), so K and V are read once, four
//     chunks ahead. A block-wide barrier per chunk makes a chunk's copies visible and frees the
//     stage the next copies refill; two team barriers order the shares and the fragments.
//   - Where built for sm_90a, each team's O^T is warpgroup MMAs (m64n24k16 / m64n16k16, eight
//     64-dim tiles, P^T hi then lo) on V in 128-byte-swizzled 64-dim panels, as the team
//     kernel's kSplitWgmma, waited for after the next chunk's scores; elsewhere mma.sync.
//   - The teams hold different columns, so nothing is merged between them at the end: each
//     column's row comes from its team, as in the other kernels' write-out.
//   - P is split into hi + lo 16-bit halves (two MMAs), as in the other kernels, so 2D and 3D
//     differ by fp32 reassociation only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/attention_kernel.h"
#include "gpu/portability.h"

namespace ladder::kernels::gpu {

struct ColumnTeamsShape {
  static constexpr int kD = 512;
  static constexpr int kChunk = 16;  // keys per stage
  static constexpr int kNT = 5;      // n-tiles of 8 score columns
  static constexpr int kN = 8 * kNT;
  static constexpr int kTeam0Tiles = 3;  // team 0: n-tiles [0, 3), team 1: [3, 5)
  static constexpr int kLd = kD + 8;     // 16-bit row pitch of K, V (conflict-free ldmatrix)
  static constexpr int kTeams = 2, kTeamWarps = 4, kStages = 6;
  // Chunks in flight ahead of the one computed: a stage is refilled two chunks after it was
  // computed, so the warpgroup MMAs still reading the last one's V never race the copies.
  static constexpr int kAhead = kStages - 2;
  static constexpr int kThreads = kTeams * kTeamWarps * 32;
  static constexpr int kDimsPerWarp = kD / kTeamWarps;
  static constexpr int kMTiles = kDimsPerWarp / 16;
  static constexpr int kObLd = kD + 4;  // fp32 pitch of the write-out buffer (conflict-free)
  static constexpr size_t kStageBytes = size_t{2} * kChunk * kLd * 2;
  // Partial S^T, [warp of the team][n-tile][lane] float4: both teams' warps w share a row.
  static constexpr size_t kSPartBytes = size_t{kTeamWarps} * kNT * 32 * 16;
  // Exchanged P^T fragments (hi, lo) [n-tile][lane] uint4, then rescale factors float2.
  static constexpr size_t kXchgBytes = size_t{kNT} * 32 * (16 + 8);
  // Per column: the running max and sum (log2 units), the output row, its offset.
  static constexpr size_t kStateBytes = size_t{kN} * (4 + 4 + 4 + 8);
  static constexpr int kPageRing = 64;  // block-table entries of the next chunks
  static constexpr size_t kOffSPart = kStages * kStageBytes;
  static constexpr size_t kOffXchg = kOffSPart + kSPartBytes;
  // (wgmma) each team's P^T as the K-major B operand: hi then lo, its columns x 16 keys each.
  static constexpr size_t kPTBytes = size_t{2} * kN * kChunk * 2;
  static constexpr size_t kOffPT = kOffXchg + kXchgBytes;
  static constexpr size_t kOffState = kOffPT + kPTBytes;
  static constexpr size_t kOffPages = kOffState + kStateBytes;
  static constexpr size_t kSmemBytes = kOffPages + size_t{4} * kPageRing;

  static_assert(kOffState % 8 == 0, "the state's 8-byte offsets");
  static_assert(kPageRing / 2 >= kStages, "a refilled half of the page ring is visible in time");
  static_assert(size_t{4} * kN * kObLd <= kStages * kStageBytes,
                "the write-out buffer reuses the stages");
  static_assert(kSmemBytes <= 232448, "fits one work group's shared memory on Hopper");
  static_assert(kTeamWarps * 32 == 8 * kChunk, "eight threads per key of a chunk");
  static_assert(kD == 4 * (kThreads / 2), "the write-out: 128 threads per column, four dims each");
};

template <class E>
__global__ void __launch_bounds__(ColumnTeamsShape::kThreads, 1)
    ColumnTeamsAttention512Kernel(KernelParams p) {
#if LADDER_DEVICE_HAS_MMA
  using S = ColumnTeamsShape;
  constexpr int D = S::kD, CK = S::kChunk, LD = S::kLd, NS = S::kStages, PR = S::kPageRing;
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* stages = reinterpret_cast<uint16_t*>(smem);  // [stage][K|V][CK][LD]
  float4* spart = reinterpret_cast<float4*>(smem + S::kOffSPart);
  uint4* p_xchg = reinterpret_cast<uint4*>(smem + S::kOffXchg);
  float2* a_xchg = reinterpret_cast<float2*>(smem + S::kOffXchg + size_t{S::kNT} * 32 * 16);
  float* fin_max = reinterpret_cast<float*>(smem + S::kOffState);  // [kN]
  float* fin_sum = fin_max + S::kN;                                // [kN]
  int* fin_head = reinterpret_cast<int*>(fin_sum + S::kN);         // [kN]
  size_t* fin_off = reinterpret_cast<size_t*>(fin_head + S::kN);   // [kN]
  int* page_ring = reinterpret_cast<int*>(smem + S::kOffPages);

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
  // Segments differ by at most one chunk, as in the team kernel.
  const int cb = static_cast<int>(static_cast<long long>(chunks) * seg / p.segments);
  const int n_chunks =
      static_cast<int>(static_cast<long long>(chunks) * (seg + 1) / p.segments) - cb;

  dev::AllowDependentLaunch();

  const int warp = tid / 32, lane = tid % 32;
  const int team = warp / S::kTeamWarps, tw = warp % S::kTeamWarps;
  const int tt = tid % (S::kTeamWarps * 32);
  const int g8 = lane >> 2, t4 = lane & 3;
  const int lrow = lane & 7, lmat = lane >> 3;
  const int dim0 = tw * S::kDimsPerWarp;
  constexpr int kAllBarrier = 3;  // (1 and 2: the teams')
  constexpr bool kWg = LADDER_DEVICE_HAS_WGMMA;
  constexpr int kAhead = S::kAhead;

  // ---- loads: team 0 copies chunk k's K rows, team 1 its V rows, into stage k % NS; thread tt
  // key tt / 8, pieces tt % 8 + 8 i. One cp.async group per chunk (empty ones too), so "chunk k
  // landed" is always wait_group<kAhead - 1>.
  const int ld_row = tt / 8, ld_piece = tt % 8;
  const int* btab = p.block_table + static_cast<size_t>(seq) * p.max_blocks_per_seq;
  const int bs_mask = (1 << p.block_size_shift) - 1;
  const bool one_page = p.block_size_shift >= 4;  // each 16-key chunk in one page
  auto chunk_key0 = [&](int k) { return lo_al + (cb + k) * CK; };
  if (one_page && tid < PR)
    page_ring[tid] = tid < n_chunks ? btab[chunk_key0(tid) >> p.block_size_shift] : 0;
  auto refill_pages = [&](int k) {  // chunks [k + PR / 2, k + PR) into the half left behind
    const int c = k + PR / 2 + tid;
    if (one_page && tid < PR / 2 && c < n_chunks)
      dev::CopyAsync4(page_ring + c % PR, btab + (chunk_key0(c) >> p.block_size_shift));
  };
  const unsigned long long l2_policy = dev::L2StreamPolicy(p.evict_first != 0);
  const uint16_t* src_base = team == 0 ? p.k : p.v;
  // K as [key][LD]; V the same, or (wgmma) as wgmma's MN-major A operand with the 128-byte
  // swizzle, as in the team kernel: 64-dim panels 2 KB apart, key row r of a panel at r * 128
  // bytes, its 16-byte piece c at (c ^ the row's address bits 7-9) * 16 (bits that differ from
  // stage to stage: a stage is 260 x 128 bytes).
  constexpr int kStep = kWg ? 1024 : 64;  // (V) pieces 8 apart
  auto issue = [&](int k) {
    if (k < n_chunks) {
      uint16_t* st = stages + static_cast<size_t>(k % NS) * 2 * CK * LD;
      uint16_t* dst = st + team * CK * LD + ld_row * LD + ld_piece * 8;
      int step = 64;
      if (kWg && team == 1) {
        uint16_t* row = st + CK * LD + ld_row * 64;
        const unsigned phase = (dev::SharedAddress(row) >> 7) & 7u;
        dst = row + (ld_piece ^ static_cast<int>(phase)) * 8;
        step = kStep;
      }
      // Keys outside [lo, hi) re-read a visible row (their scores are masked, and P = 0 times
      // finite data adds nothing), so no stage ever holds uninitialised bits.
      const int j = max(lo, min(chunk_key0(k) + ld_row, hi - 1));
      const int pg = one_page ? page_ring[k % PR] : btab[j >> p.block_size_shift];
      const size_t grow =
          ((static_cast<size_t>(pg) << p.block_size_shift) + (j & bs_mask)) * p.kv_heads + kvh;
      const uint16_t* src = src_base + grow * D + ld_piece * 8;
#pragma unroll
      for (int i = 0; i < D / 64; ++i)
        dev::CopyAsync16Hinted(dst + step * i, src + 64 * i, true, l2_policy);
    }
    dev::CopyAsyncCommit();
  };
  __syncthreads();  // the ring's first entries are visible
#pragma unroll
  for (int k = 0; k < kAhead; ++k) issue(k);

  // One team's whole key loop, with its n-tiles a compile-time count (team a constant in each
  // copy, so its arrays stay in registers and its descriptors in uniform registers).
  auto run_team = [&](auto nt0_c, auto ntt_c) {
    constexpr int NT0 = decltype(nt0_c)::value;  // the team's first n-tile
    constexpr int NTT = decltype(ntt_c)::value;  // its n-tiles
    constexpr int kAcc = NTT <= 2 ? 2 : 1;       // independent S^T accumulators per n-tile
    constexpr int kQSteps = S::kDimsPerWarp / 16;
    constexpr float kLog2e = 1.4426950408889634f;
    constexpr float kLazyLog2 = 8.0f;  // the running maximum's slack (team kernel)
    const bool softmaxer = tw < NTT;
    const int my_nt = NT0 + (softmaxer ? tw : 0);  // the n-tile whose softmax this warp runs
    int last_key[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int m = my_nt * 8 + 2 * t4 + e;
      last_key[e] = m < m_rows ? first_pos + m / p.group : -1;
    }
    float acc[S::kMTiles][NTT][4];
#pragma unroll
    for (int a = 0; a < S::kMTiles; ++a)
#pragma unroll
      for (int b = 0; b < NTT; ++b)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // log2 units

    // Q^T as the B operand of S^T: column g8 of each of the team's n-tiles, dims 2 t4 (+1) and
    // 8 + 2 t4 (+1) of each 16-dim k-step of this warp's dims; zero past m_rows.
    uint32_t qf[NTT][kQSteps][2];
#pragma unroll
    for (int q = 0; q < NTT; ++q) {
      const int m = (NT0 + q) * 8 + g8;
      const uint16_t* qrow = nullptr;
      if (m < m_rows) {
        const int r = m / p.group, g = m % p.group;
        qrow = p.q + (static_cast<size_t>(q_start + row0 + r) * p.q_heads + kvh * p.group + g) * D +
               dim0 + 2 * t4;
      }
#pragma unroll
      for (int ks = 0; ks < kQSteps; ++ks) {
        qf[q][ks][0] = qrow ? *reinterpret_cast<const uint32_t*>(qrow + 16 * ks) : 0u;
        qf[q][ks][1] = qrow ? *reinterpret_cast<const uint32_t*>(qrow + 16 * ks + 8) : 0u;
      }
    }
    const int k_off = (lrow + (lmat & 1) * 8) * LD + dim0 + (lmat >> 1) * 8;
    [[maybe_unused]] const int v_off = (lrow + (lmat >> 1) * 8) * LD + dim0 + (lmat & 1) * 8;
    float4* my_part = spart + (tw * S::kNT + NT0) * 32 + lane;
    // (wgmma) the team's P^T, [hi | lo], and the descriptors: stage s's V tile mt starts
    // (s * kStageBytes + mt * 2048) / 16 further.
    uint16_t* team_pt =
        reinterpret_cast<uint16_t*>(smem + S::kOffPT) + 2 * (NT0 * 8) * CK;  // (column 8 NT0 on)
    [[maybe_unused]] const unsigned long long desc_v0 =
        dev::WgmmaDesc(stages + CK * LD, 16, 1024) | (1ull << 62);  // 128-byte swizzle
    [[maybe_unused]] const unsigned long long desc_p_hi = dev::WgmmaDesc(team_pt, 128, 256),
                                              desc_p_lo =
                                                  dev::WgmmaDesc(team_pt + NTT * 8 * CK, 128, 256);

    for (int k = 0; k < n_chunks; ++k) {
      dev::CopyAsyncWait<kAhead - 1>();  // this thread's copies of chunk k have landed
      if constexpr (kWg) dev::FenceProxyAsyncShared();  // ... and are visible to wgmma
      // Everyone's copies of chunk k are visible, and both teams have left chunk k - 1 (its
      // shares and fragments) and waited for chunk k - 2's MMAs (its stage, which the next
      // copies refill). (A barrier for the whole work group that the two teams reach from their
      // own copies of the loop.)
      dev::NamedBarrierAnyPc(kAllBarrier, S::kThreads);
      // Refilled entries travel in chunk k + kAhead's copy group: visible from iteration
      // k + kAhead on, long before chunk k + PR / 2 is issued.
      if (k % (PR / 2) == 0 && k > 0) refill_pages(k);
      const int stage = k % NS;
      const uint16_t* ks = stages + static_cast<size_t>(stage) * 2 * CK * LD;
      [[maybe_unused]] const uint16_t* vs = ks + CK * LD;
      const int j0 = lo_al + (cb + k) * CK;

      // ---- S^T = K Q^T, this warp's share (its 128 dims) of the team's n-tiles
      {
        float c[NTT][kAcc][4];
#pragma unroll
        for (int q = 0; q < NTT; ++q)
#pragma unroll
          for (int u = 0; u < kAcc; ++u)
#pragma unroll
            for (int x = 0; x < 4; ++x) c[q][u][x] = 0.0f;
#pragma unroll
        for (int s = 0; s < kQSteps; ++s) {
          uint32_t a[4];
          dev::LdMatrixX4(a[0], a[1], a[2], a[3], ks + k_off + 16 * s);
#pragma unroll
          for (int q = 0; q < NTT; ++q)
            dev::Mma16816<E::kIsBf16>(c[q][s % kAcc], a, qf[q][s][0], qf[q][s][1]);
        }
#pragma unroll
        for (int q = 0; q < NTT; ++q) {
          float v[4];
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            v[x] = c[q][0][x];
#pragma unroll
            for (int u = 1; u < kAcc; ++u) v[x] += c[q][u][x];
          }
          my_part[q * 32] = make_float4(v[0], v[1], v[2], v[3]);
        }
      }
      // The next copies after the scores, so that the copies' address registers are read while
      // the MMAs run (issued before them, the scores' first ldmatrix waited for those registers:
      // H200 ncu, 6 % of the warps' stall samples).
      issue(k + kAhead);
      if constexpr (kWg) dev::WgmmaWaitAll();  // chunk k - 1's O^T (and its reads of V, P^T)
      dev::NamedBarrier(1 + team, S::kTeamWarps * 32);  // every share is written
      if (softmaxer) {
        // The n-tile's scores: the four warps' shares summed in warp order.
        float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int w4 = 0; w4 < S::kTeamWarps; ++w4) {
          const float4 v = spart[(w4 * S::kNT + my_nt) * 32 + lane];
          sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
        }
        const float sr[4] = {sum.x, sum.y, sum.z, sum.w};
        // sc[x]: key g8 (x < 2) or g8 + 8, column 2 t4 + (x & 1) of the n-tile.
        float sc[4];
#pragma unroll
        for (int x = 0; x < 4; ++x) {
          float v = sr[x] * p.scale;
          if (p.softcap > 0.0f) v = p.softcap * tanhf(v / p.softcap);
          v *= kLog2e;
          const int e = x & 1;
          const int j = j0 + g8 + (x >= 2 ? 8 : 0);
          const bool visible = j <= last_key[e] && (p.window <= 0 || last_key[e] - j < p.window);
          sc[x] = visible ? v : -INFINITY;
        }
        // Online softmax over the chunk's 16 keys per column, the running maximum moving only
        // by more than kLazyLog2 (as in the team kernel).
        float ps[4], m_new[2], alpha[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float mx = dev::XorMax<4, 16>(fmaxf(sc[e], sc[e + 2]));
          const bool grow = mx > m_run[e] + kLazyLog2;
          m_new[e] = grow ? mx : m_run[e];
          alpha[e] = !grow ? 1.0f : (m_run[e] == -INFINITY ? 0.0f : exp2f(m_run[e] - mx));
        }
#pragma unroll
        for (int x = 0; x < 4; ++x) ps[x] = sc[x] == -INFINITY ? 0.0f : exp2f(sc[x] - m_new[x & 1]);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          l_run[e] = l_run[e] * alpha[e] + (ps[e] + ps[e + 2]);
          if (m_new[e] != -INFINITY) m_run[e] = m_new[e];
        }
        uint32_t fh[2], fl[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {  // key rows g8 and g8 + 8
          const uint32_t h = dev::PackRn2<E::kIsBf16>(ps[2 * r], ps[2 * r + 1]);
          float h0, h1;
          dev::Unpack2<E::kIsBf16>(h, h0, h1);
          const uint32_t l = dev::PackRn2<E::kIsBf16>(ps[2 * r] - h0, ps[2 * r + 1] - h1);
          fh[r] = dev::MovMatrixTrans(h);
          fl[r] = dev::MovMatrixTrans(l);
        }
        if constexpr (kWg) {
          // P^T as wgmma's K-major B operand: the core matrix of the team's columns 8 n.. and
          // keys 8 b.. at (2 n + b) * 128 bytes, column rows of 16 bytes (lane: column g8, keys
          // 2 t4, +1).
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int at = (((my_nt - NT0) * 2 + r) * 8 + g8) * 8 + 2 * t4;
            *reinterpret_cast<uint32_t*>(team_pt + at) = fh[r];
            *reinterpret_cast<uint32_t*>(team_pt + NTT * 8 * CK + at) = fl[r];
          }
        } else {
          p_xchg[my_nt * 32 + lane] = make_uint4(fh[0], fh[1], fl[0], fl[1]);
        }
        a_xchg[my_nt * 32 + lane] = make_float2(alpha[0], alpha[1]);
      }
      if constexpr (kWg) dev::FenceProxyAsyncShared();  // this thread's P^T, before wgmma reads
      dev::NamedBarrier(1 + team, S::kTeamWarps * 32);  // the team's fragments are published
      [[maybe_unused]] uint32_t bh[NTT][2], bl[NTT][2];
      float al[NTT][2];
      bool rescale = false;
#pragma unroll
      for (int q = 0; q < NTT; ++q) {
        if constexpr (!kWg) {
          const uint4 f = p_xchg[(NT0 + q) * 32 + lane];
          bh[q][0] = f.x, bh[q][1] = f.y, bl[q][0] = f.z, bl[q][1] = f.w;
        }
        const float2 a = a_xchg[(NT0 + q) * 32 + lane];
        al[q][0] = a.x, al[q][1] = a.y;
        rescale |= a.x != 1.0f || a.y != 1.0f;
      }
      // ---- O^T = alpha O^T + V^T P^T (rescaling by exactly 1 changes no bits: skipped when no
      // running maximum moved, most chunks)
      if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
        for (int mt = 0; mt < S::kMTiles; ++mt)
#pragma unroll
          for (int q = 0; q < NTT; ++q) {
            acc[mt][q][0] *= al[q][0];
            acc[mt][q][1] *= al[q][1];
            acc[mt][q][2] *= al[q][0];
            acc[mt][q][3] *= al[q][1];
          }
      }
      if constexpr (kWg) {
        // The team's O^T [512 x 8 NTT] as eight 64-dim tiles, P^T hi then lo; warp w holds dims
        // 64 mt + 16 w (+8) + g8 of tile mt. Waited for after the next chunk's scores.
        // (The start address is the descriptor's low 14 bits, so the stage's and tile's offsets
        // go into its low word without a carry: a 32-bit add instead of a 64-bit one per MMA;
        // with the copies after the scores, 5 rows at 32K took 104.6 against 110.9 us, H200.)
        const uint32_t v_lo =
            static_cast<uint32_t>(desc_v0) +
            static_cast<uint32_t>(stage) * static_cast<uint32_t>(S::kStageBytes >> 4);
        const unsigned long long v_hi = desc_v0 & 0xFFFFFFFF00000000ull;
        dev::WgmmaFence();
#pragma unroll
        for (int mt = 0; mt < S::kMTiles; ++mt) {
          const unsigned long long da = v_hi | (v_lo + static_cast<uint32_t>(mt * (2048 >> 4)));
          float(&d)[NTT * 4] = reinterpret_cast<float(&)[NTT * 4]>(acc[mt]);
          if constexpr (NTT == 3) {
            dev::Wgmma64x24<E::kIsBf16>(d, da, desc_p_hi, 1);
            dev::Wgmma64x24<E::kIsBf16>(d, da, desc_p_lo, 1);
          } else {
            static_assert(NTT == 2, "24 or 16 columns per team");
            dev::Wgmma64x16<E::kIsBf16>(d, da, desc_p_hi, 1);
            dev::Wgmma64x16<E::kIsBf16>(d, da, desc_p_lo, 1);
          }
        }
        dev::WgmmaCommit();
      } else {
#pragma unroll
        for (int mt = 0; mt < S::kMTiles; ++mt) {
          uint32_t a[4];
          dev::LdMatrixX4Trans(a[0], a[1], a[2], a[3], vs + v_off + mt * 16);
#pragma unroll
          for (int q = 0; q < NTT; ++q) {
            dev::Mma16816<E::kIsBf16>(acc[mt][q], a, bh[q][0], bh[q][1]);
            dev::Mma16816<E::kIsBf16>(acc[mt][q], a, bl[q][0], bl[q][1]);
          }
        }
      }
    }
    if constexpr (kWg) dev::WgmmaWaitAll();
    MarkTimeline(p.timeline, kMarkLoopEnd);  // (team 0's: thread 0 is in it)
    dev::CopyAsyncWait<0>();  // (only empty groups and page entries past the end are left)
#pragma unroll
    for (int e = 0; e < 2; ++e) l_run[e] = dev::XorSum<4, 16>(l_run[e]);
    if (softmaxer && g8 == 0) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        fin_max[my_nt * 8 + 2 * t4 + e] = m_run[e];
        fin_sum[my_nt * 8 + 2 * t4 + e] = l_run[e];
      }
    }
    // Both teams are done with the stages: they become the write-out buffer.
    dev::NamedBarrierAnyPc(kAllBarrier, S::kThreads);
    float* ob = reinterpret_cast<float*>(smem);  // [column][kObLd]
#pragma unroll
    for (int mt = 0; mt < S::kMTiles; ++mt)
#pragma unroll
      for (int q = 0; q < NTT; ++q)
#pragma unroll
        for (int x = 0; x < 4; ++x)
          ob[((NT0 + q) * 8 + 2 * t4 + (x & 1)) * S::kObLd +
             (kWg ? 64 * mt + 16 * tw : dim0 + 16 * mt) + g8 + (x >= 2 ? 8 : 0)] = acc[mt][q][x];
  };
  if (team == 0)
    run_team(std::integral_constant<int, 0>{}, std::integral_constant<int, S::kTeam0Tiles>{});
  else
    run_team(std::integral_constant<int, S::kTeam0Tiles>{},
             std::integral_constant<int, S::kNT - S::kTeam0Tiles>{});

  if (tid < S::kN) {
    const int r = tid / p.group, g = tid % p.group;
    const int head = (q_start + row0 + r) * p.q_heads + kvh * p.group + g;  // (< 2^31)
    fin_head[tid] = head;
    fin_off[tid] = (p.write_partial ? static_cast<size_t>(head) * p.segments + seg
                                    : static_cast<size_t>(head)) *
                   D;
  }
  __syncthreads();
  // Thread t writes dims 4 (t % 128) .. + 3 of columns t / 128, + 2, ... (as the team kernel).
  const float* ob = reinterpret_cast<const float*>(smem);
  constexpr int kColThreads = D / 4;
  const int d = 4 * (tid % kColThreads);
  if (p.write_partial) {
#pragma unroll 4
    for (int m = tid / kColThreads; m < m_rows; m += S::kThreads / kColThreads)
      *reinterpret_cast<float4*>(p.seg_acc + fin_off[m] + d) =
          *reinterpret_cast<const float4*>(ob + m * S::kObLd + d);
  } else {
#pragma unroll 4
    for (int m = tid / kColThreads; m < m_rows; m += S::kThreads / kColThreads) {
      const float4 v = *reinterpret_cast<const float4*>(ob + m * S::kObLd + d);
      const float l = fin_sum[m];
      const uint32_t lo2 = E::FromFloat(l > 0.0f ? v.x / l : 0.0f) |
                           (static_cast<uint32_t>(E::FromFloat(l > 0.0f ? v.y / l : 0.0f)) << 16);
      const uint32_t hi2 = E::FromFloat(l > 0.0f ? v.z / l : 0.0f) |
                           (static_cast<uint32_t>(E::FromFloat(l > 0.0f ? v.w / l : 0.0f)) << 16);
      *reinterpret_cast<uint2*>(p.out + fin_off[m] + d) = make_uint2(lo2, hi2);
    }
  }
  if (p.write_partial && tid < m_rows) {
    const size_t head = static_cast<size_t>(fin_head[tid]);
    p.seg_max[head * p.segments + seg] = fin_max[tid];
    p.seg_sum[head * p.segments + seg] = fin_sum[tid];
  }
  MarkTimelineExit(p.timeline);
#endif
}

}  // namespace ladder::kernels::gpu
