// Decode attention whose warps split the keys of a tile instead of the dims of the output:
// the generic kernel's design turned around for calls of at most 8 score columns (query rows x
// q heads of a KV head: one decode row of GQA 8, two of GQA 4). Same contract and KernelParams
// as UnifiedAttentionKernel (attention_kernel.h); chosen by TuningConfig::split_keys. (A form
// with two 8-column n-tiles per warp, 9-16 columns, lost to the generic kernel at two decode
// rows of GQA 8, 0.85-0.99 (kernels-ab-split-keys), and was deleted: each warp's MMAs grow with
// the columns where the generic kernel's 16-row MMA covers them.)
//
// Why: in the generic kernel every K/V tile passes through three work-group barriers, the
// scores through shared memory to an all-thread softmax, and P back through shared memory to
// every warp (each warp owns a slice of the output's dims). At one decode row that chain of
// ~1000 instructions per warp per tile is the call's time (ncu, H200: issue-bound at 40 % of
// cycles while cuDNN's kernel, S and P in registers, issued on 16 % for the same bytes).
//
// Here the four warps form kKeyGroups groups of kDimSplit: group g takes keys [16 g, 16 g + 16)
// of each 16 x kKeyGroups-key tile (at head 128 four groups of one warp; at head 256 two groups
// of two, each warp of a group computing the group's scores and softmax, the same bits, and
// O^T for its half of the dims: three stages of 64 keys of head 256 would not fit twice per SM):
//   - Scores transposed, S^T = K Q^T (m16n8k16: 16 keys x 8 columns per MMA), Q^T's fragments
//     held in registers for the whole call, K's by ldmatrix from the shared stage.
//   - Each warp runs its own online softmax per column (a max and a sum over its 16 keys by
//     butterfly shuffles), and its P^T fragments become the B operand of O^T = V^T P^T by one
//     movmatrix transpose each, never touching shared memory. P is split into hi + lo 16-bit
//     halves (two MMAs), as in the generic kernel, so paths differ by fp32 reassociation only.
//   - Each key group keeps its own O^T (head_dim x columns, fp32) and running max and sum; the
//     groups are merged once, after the last tile, in group order (deterministic).
//   - One barrier per tile: the ring of kStages K/V stages, copied by every thread with 16-byte
//     cp.async as in the generic kernel (paged, the block table read one tile ahead).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/attention_kernel.h"
#include "gpu/portability.h"

namespace ladder::kernels::gpu {

template <int D>
struct SplitKeysShape {
  static constexpr int NN = 1;  // 8-column n-tiles of S^T per warp
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kDimSplit = D > 128 ? 2 : 1;  // warps per key group, each D / kDimSplit dims
  static constexpr int kKeyGroups = kWarps / kDimSplit;
  static constexpr int kTile = 16 * kKeyGroups;  // keys per stage: 16 per key group
  static constexpr int kStages = 3;
  static constexpr int kCols = 8 * NN;  // score columns
  static constexpr int kLd = D + 8;     // 16-bit row pitch of K and V (conflict-free ldmatrix)
  static constexpr int kMTiles = D / 16 / kDimSplit;  // 16-dim tiles of O^T per warp
  static constexpr size_t kStageBytes = size_t{2} * 2 * kTile * kLd;  // K and V
  // After the loop: each key group's O^T [kCols][D + 4] fp32 and its max and sum per column.
  static constexpr int kObLd = D + 4;
  static constexpr size_t kMergeBytes =
      size_t{4} * kKeyGroups * kCols * kObLd + size_t{4} * 2 * kKeyGroups * kCols;
  static constexpr size_t kSmemBytes =
      kStages * kStageBytes > kMergeBytes ? kStages* kStageBytes : kMergeBytes;

  static_assert(D % 32 == 0, "two 16-dim k-steps at a time");
  static_assert(kStages >= 2, "at least two K/V stages");
};

template <class E, int D>
__global__ void __launch_bounds__(SplitKeysShape<D>::kThreads, 2)
    SplitKeysAttentionKernel(KernelParams p) {
#if LADDER_DEVICE_HAS_MMA
  using S = SplitKeysShape<D>;
  constexpr int NN = S::NN;
  constexpr int TN = S::kTile, ST = S::kStages, LD = S::kLd, N = S::kCols;
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* kvs = reinterpret_cast<uint16_t*>(smem);  // [stage][K|V][TN][LD]

  MarkTimeline(p.timeline, kMarkEntry);
  dev::WaitForPriorGrid();  // (attention_overlap: as in UnifiedAttentionKernel)
  MarkTimeline(p.timeline, kMarkReady);
  const int tid = threadIdx.x;
  const WorkItem w = WorkItemOf(p);
  if (w.empty) return;
  const int kvh = w.kvh, seg = w.seg, q_start = w.q_start, row0 = w.row0;
  const int m_rows = w.m_rows, first_pos = w.first_pos, hi = w.hi;
  PagedTiles<D, TN, S::kThreads, LD> kv(p, w, tid);
  const int key0 = kv.key0, tb = kv.tb, te = kv.te;
  auto fetch_pages = [&](int t) { kv.FetchPages(t); };
  auto load_tile = [&](int t, int stage) {
    uint16_t* ks = kvs + static_cast<size_t>(stage) * 2 * TN * LD;
    kv.Load(t, ks, ks + TN * LD);
  };
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    fetch_pages(tb + s);
    if (tb + s < te) load_tile(tb + s, s);
    dev::CopyAsyncCommit();
  }
  fetch_pages(tb + ST - 1);
  dev::AllowDependentLaunch();

  const int lane = tid % 32, warp = tid / 32;
  const int kg = warp / S::kDimSplit, dh = warp % S::kDimSplit;  // key group, dim part
  const int dim0 = dh * (D / S::kDimSplit);                      // this warp's first O^T dim
  const int g8 = lane >> 2, t4 = lane & 3;
  const int lrow = lane & 7, lmat = lane >> 3;

  // Q^T as the B operand of S^T = K Q^T, for the whole call: column n = 8 nn + g8 is score row
  // m = r * group + g (zero past m_rows); k-step ks holds dims 16 ks + 2 t4 (+1) and + 8.
  uint32_t qb[D / 16][NN][2];
#pragma unroll
  for (int nn = 0; nn < NN; ++nn) {
    const int m = 8 * nn + g8;
    const uint16_t* qrow = nullptr;
    if (m < m_rows) {
      const int r = m / p.group, g = m % p.group;
      qrow = p.q + (static_cast<size_t>(q_start + row0 + r) * p.q_heads + kvh * p.group + g) * D;
    }
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      qb[ks][nn][0] = qrow ? *reinterpret_cast<const uint32_t*>(qrow + 16 * ks + 2 * t4) : 0u;
      qb[ks][nn][1] = qrow ? *reinterpret_cast<const uint32_t*>(qrow + 16 * ks + 8 + 2 * t4) : 0u;
    }
  }
  // This lane's two columns 8 nn + 2 t4 (+1) per n-tile: the last key each may see (its query
  // row's position; -1 past m_rows).
  int last_key[NN][2];
#pragma unroll
  for (int nn = 0; nn < NN; ++nn)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int m = 8 * nn + 2 * t4 + e;
      last_key[nn][e] = m < m_rows ? first_pos + m / p.group : -1;
    }

  // O^T [D][N] of this warp's keys: acc[mt][nn] is the C fragment of dims 16 mt .. + 15 and
  // columns 8 nn .. + 7 (lane: dims g8, g8 + 8; columns 2 t4, 2 t4 + 1).
  float acc[S::kMTiles][NN][4];
#pragma unroll
  for (int a = 0; a < S::kMTiles; ++a)
#pragma unroll
    for (int b = 0; b < NN; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;
  float m_run[NN][2], l_run[NN][2];  // log2 units, per column (same bits in the 8 lanes of t4)
#pragma unroll
  for (int nn = 0; nn < NN; ++nn)
    m_run[nn][0] = m_run[nn][1] = -INFINITY, l_run[nn][0] = l_run[nn][1] = 0.0f;
  constexpr float kLog2e = 1.4426950408889634f;
  const float scale_log2 = p.scale * kLog2e;

  MarkFirstTile<ST>(p.timeline, tb < te);
  int cstage = 0, lstage = ST - 1;
  for (int t = tb; t < te; ++t) {
    dev::CopyAsyncWait<ST - 2>();
    // Everyone's copies of tile t are visible, and everyone is done with tile t - 1, whose
    // stage the next load overwrites.
    __syncthreads();
    if (t + ST - 1 < te) load_tile(t + ST - 1, lstage);
    dev::CopyAsyncCommit();
    fetch_pages(t + ST);
    const uint16_t* ks = kvs + static_cast<size_t>(cstage) * 2 * TN * LD + kg * 16 * LD;
    const uint16_t* vs = ks + TN * LD;
    cstage = cstage + 1 == ST ? 0 : cstage + 1;
    lstage = lstage + 1 == ST ? 0 : lstage + 1;
    const int j0 = key0 + t * TN + kg * 16;  // this key group's first key

    // ---- S^T = K Q^T over this warp's 16 keys -----------------------------------------------
    float c[NN][4], c2[NN][4];
#pragma unroll
    for (int nn = 0; nn < NN; ++nn)
#pragma unroll
      for (int e = 0; e < 4; ++e) c[nn][e] = c2[nn][e] = 0.0f;
    // A (K): matrices (keys 0-7 | 8-15) x (dims +0 | +8).
    const uint16_t* ka = ks + ((lmat & 1) * 8 + lrow) * LD + (lmat >> 1) * 8;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk += 2) {
      uint32_t a[4], a2[4];
      dev::LdMatrixX4(a[0], a[1], a[2], a[3], ka + 16 * kk);
      dev::LdMatrixX4(a2[0], a2[1], a2[2], a2[3], ka + 16 * kk + 16);
#pragma unroll
      for (int nn = 0; nn < NN; ++nn) {
        dev::Mma16816<E::kIsBf16>(c[nn], a, qb[kk][nn][0], qb[kk][nn][1]);
        dev::Mma16816<E::kIsBf16>(c2[nn], a2, qb[kk + 1][nn][0], qb[kk + 1][nn][1]);
      }
    }

    // ---- online softmax per column over the warp's 16 keys (g8 and g8 + 8) -----------------
    const int key_lo = j0 + g8, key_hi = key_lo + 8;
    uint32_t bh[NN][2], bl[NN][2];  // P^T's B fragments (keys 0-7, 8-15), hi and lo halves
    bool rescale = false;
    float alpha[NN][2];
#pragma unroll
    for (int nn = 0; nn < NN; ++nn) {
      float s[2][2];  // [key lo / hi][column e]
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float v0 = c[nn][e] + c2[nn][e], v1 = c[nn][e + 2] + c2[nn][e + 2];
        if (p.softcap > 0.0f) {
          v0 = p.softcap * tanhf(v0 * p.scale / p.softcap) * kLog2e;
          v1 = p.softcap * tanhf(v1 * p.scale / p.softcap) * kLog2e;
        } else {
          v0 *= scale_log2;
          v1 *= scale_log2;
        }
        const int pos = last_key[nn][e];
        const bool vis0 =
            key_lo <= pos && key_lo < hi && (p.window <= 0 || pos - key_lo < p.window);
        const bool vis1 =
            key_hi <= pos && key_hi < hi && (p.window <= 0 || pos - key_hi < p.window);
        s[0][e] = vis0 ? v0 : -INFINITY;
        s[1][e] = vis1 ? v1 : -INFINITY;
        const float tile_max = dev::XorMax<4, 16>(fmaxf(s[0][e], s[1][e]));
        const float m_new = fmaxf(m_run[nn][e], tile_max);
        float a = 1.0f, psum = 0.0f;
        if (m_new != -INFINITY) {
          a = m_run[nn][e] == -INFINITY ? 0.0f : exp2f(m_run[nn][e] - m_new);
          s[0][e] = s[0][e] == -INFINITY ? 0.0f : exp2f(s[0][e] - m_new);
          s[1][e] = s[1][e] == -INFINITY ? 0.0f : exp2f(s[1][e] - m_new);
          psum = s[0][e] + s[1][e];
          m_run[nn][e] = m_new;
        } else {
          s[0][e] = s[1][e] = 0.0f;
        }
        psum = dev::XorSum<4, 16>(psum);
        l_run[nn][e] = l_run[nn][e] * a + psum;
        alpha[nn][e] = a;
        rescale = rescale || a != 1.0f;
      }
      // hi = P rounded to 16 bits, lo = the rest: lane (key g8, columns 2 t4, +1) is an 8 x 8
      // fragment of P[key][column]; its transpose is the B fragment (k = key, n = column).
#pragma unroll
      for (int kh = 0; kh < 2; ++kh) {
        const uint32_t h = dev::PackRn2<E::kIsBf16>(s[kh][0], s[kh][1]);
        float h0, h1;
        dev::Unpack2<E::kIsBf16>(h, h0, h1);
        const uint32_t l = dev::PackRn2<E::kIsBf16>(s[kh][0] - h0, s[kh][1] - h1);
        bh[nn][kh] = dev::MovMatrixTrans(h);
        bl[nn][kh] = dev::MovMatrixTrans(l);
      }
    }
    // A running max that did not move leaves O^T as it is (x 1.0 exactly): skipped where no
    // lane of the warp has a factor other than one.
    if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
      for (int mt = 0; mt < S::kMTiles; ++mt)
#pragma unroll
        for (int nn = 0; nn < NN; ++nn) {
          acc[mt][nn][0] *= alpha[nn][0];
          acc[mt][nn][1] *= alpha[nn][1];
          acc[mt][nn][2] *= alpha[nn][0];
          acc[mt][nn][3] *= alpha[nn][1];
        }
    }

    // ---- O^T += V^T P^T: A (V^T, dims x keys) by transposing loads of V's key rows ----------
    // Matrices: (keys 0-7 | 8-15) x (dims +0 | +8) -> a0 (dims +0, keys 0-7), a1 (dims +8,
    // keys 0-7), a2 (dims +0, keys 8-15), a3 (dims +8, keys 8-15).
    const uint16_t* va = vs + ((lmat >> 1) * 8 + lrow) * LD + dim0 + (lmat & 1) * 8;
#pragma unroll
    for (int mt = 0; mt < S::kMTiles; ++mt) {
      uint32_t a[4];
      dev::LdMatrixX4Trans(a[0], a[1], a[2], a[3], va + 16 * mt);
#pragma unroll
      for (int nn = 0; nn < NN; ++nn) {
        dev::Mma16816<E::kIsBf16>(acc[mt][nn], a, bh[nn][0], bh[nn][1]);
        dev::Mma16816<E::kIsBf16>(acc[mt][nn], a, bl[nn][0], bl[nn][1]);
      }
    }
  }

  // ---- the key groups merged, in group order ------------------------------------------------
  MarkTimeline(p.timeline, kMarkLoopEnd);
  dev::CopyAsyncWait<0>();  // (only empty groups remain; the stages become the merge buffer)
  __syncthreads();
  constexpr int KG = S::kKeyGroups;
  float* ob = reinterpret_cast<float*>(smem);                 // [key group][N][kObLd]
  float* wmax = ob + static_cast<size_t>(KG) * N * S::kObLd;  // [key group][N]
  float* wsum = wmax + KG * N;                                // [key group][N]
#pragma unroll
  for (int mt = 0; mt < S::kMTiles; ++mt)
#pragma unroll
    for (int nn = 0; nn < NN; ++nn)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float* col = ob + (static_cast<size_t>(kg) * N + 8 * nn + 2 * t4 + e) * S::kObLd + dim0;
        col[16 * mt + g8] = acc[mt][nn][e];
        col[16 * mt + g8 + 8] = acc[mt][nn][e + 2];
      }
  if (g8 == 0 && dh == 0) {
#pragma unroll
    for (int nn = 0; nn < NN; ++nn)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        wmax[kg * N + 8 * nn + 2 * t4 + e] = m_run[nn][e];
        wsum[kg * N + 8 * nn + 2 * t4 + e] = l_run[nn][e];
      }
  }
  __syncthreads();
  // Output (column m, 4 dims) k of N x D / 4, by thread k mod kThreads.
  for (int k = tid; k < N * (D / 4); k += S::kThreads) {
    const int m = k / (D / 4), d = k % (D / 4) * 4;
    if (m >= m_rows) continue;
    float mx = -INFINITY;
#pragma unroll
    for (int u = 0; u < KG; ++u) mx = fmaxf(mx, wmax[u * N + m]);
    float den = 0.0f;
    float4 num = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (mx != -INFINITY) {
#pragma unroll
      for (int u = 0; u < KG; ++u) {
        const float wm = wmax[u * N + m];
        const float f = wm == -INFINITY ? 0.0f : exp2f(wm - mx);
        const float4 v =
            *reinterpret_cast<const float4*>(ob + (static_cast<size_t>(u) * N + m) * S::kObLd + d);
        den = fmaf(f, wsum[u * N + m], den);
        num.x = fmaf(f, v.x, num.x), num.y = fmaf(f, v.y, num.y);
        num.z = fmaf(f, v.z, num.z), num.w = fmaf(f, v.w, num.w);
      }
    }
    const int r = m / p.group, g = m % p.group;
    const size_t head = static_cast<size_t>(q_start + row0 + r) * p.q_heads + kvh * p.group + g;
    if (p.write_partial) {
      *reinterpret_cast<float4*>(p.seg_acc + (head * p.segments + seg) * D + d) = num;
      if (d == 0) {
        p.seg_max[head * p.segments + seg] = mx;
        p.seg_sum[head * p.segments + seg] = den;
      }
    } else {
      const uint32_t lo2 =
          E::FromFloat(den > 0.0f ? num.x / den : 0.0f) |
          (static_cast<uint32_t>(E::FromFloat(den > 0.0f ? num.y / den : 0.0f)) << 16);
      const uint32_t hi2 =
          E::FromFloat(den > 0.0f ? num.z / den : 0.0f) |
          (static_cast<uint32_t>(E::FromFloat(den > 0.0f ? num.w / den : 0.0f)) << 16);
      *reinterpret_cast<uint2*>(p.out + head * D + d) = make_uint2(lo2, hi2);
    }
  }
  MarkTimelineExit(p.timeline);
#else
  (void)p;
  LADDER_DEVICE_TRAP();
#endif
}

}  // namespace ladder::kernels::gpu
