#include "cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "geometry.h"
#include "numeric.h"

namespace ladder::kernels::internal {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Converts `n` elements starting at element `offset` of `t` to floats.
void LoadRow(const HostTensor& t, size_t offset, int n, float* dst) {
  switch (t.dtype()) {
    case DType::kF32:
      std::memcpy(dst, static_cast<const float*>(t.data()) + offset, sizeof(float) * n);
      break;
    case DType::kBF16: {
      const auto* src = static_cast<const uint16_t*>(t.data()) + offset;
      for (int i = 0; i < n; ++i) dst[i] = Bf16ToFloat(src[i]);
      break;
    }
    case DType::kF16: {
      const auto* src = static_cast<const uint16_t*>(t.data()) + offset;
      for (int i = 0; i < n; ++i) dst[i] = HalfToFloat(src[i]);
      break;
    }
  }
}

// Geometry of one sequence's KV walk, shared by the 2D and 3D paths.
struct SeqWalk {
  int q_start = 0, q_len = 0, seq_len = 0, ctx = 0;
  int lo = 0;  // first tile's first key (tile aligned)
  int hi = 0;  // one past the last key any row may see
  int tiles = 0;
};

SeqWalk MakeWalk(const HostProblem& p, int s) {
  SeqWalk w;
  w.q_start = p.query_start[s];
  w.q_len = p.query_start[s + 1] - w.q_start;
  w.seq_len = p.seq_lens[s];
  w.ctx = w.seq_len - w.q_len;
  int lo = 0;
  if (p.shape.window > 0) lo = std::max(0, w.ctx - p.shape.window + 1);
  w.lo = lo / kCpuTile * kCpuTile;
  w.hi = w.seq_len;
  w.tiles = (w.hi - w.lo + kCpuTile - 1) / kCpuTile;
  return w;
}

// Per-thread scratch, sized once for the largest sequence (no per-element allocation).
struct Scratch {
  std::vector<float> q, k, v, s;  // q: [M, D]; k, v: [tile, D]; s: [M, tile]
  void Reserve(int m, int d) {
    q.resize(static_cast<size_t>(m) * d);
    k.resize(static_cast<size_t>(kCpuTile) * d);
    v.resize(static_cast<size_t>(kCpuTile) * d);
    s.resize(static_cast<size_t>(m) * kCpuTile);
  }
};

// Walks tiles [tile_begin, tile_end) of sequence `s`, KV head `kvh`, for all its query rows.
// acc [M, D], mrow [M], lrow [M] are the unnormalised state, with M = q_len * group and row
// m = r * group + g (query row r, head kvh * group + g).
void ProcessTiles(const HostProblem& p, const SeqWalk& w, int s, int kvh, int tile_begin,
                  int tile_end, Scratch& sc, float* acc, float* mrow, float* lrow) {
  const AttentionShape& sh = p.shape;
  const int d = sh.head_dim;
  const int group = sh.q_heads / sh.kv_heads;
  const int m_rows = w.q_len * group;
  const float scale = sh.EffectiveScale();
  const float cap = sh.softcap;

  for (int m = 0; m < m_rows; ++m) {
    const int r = m / group, g = m % group;
    const size_t off = (static_cast<size_t>(w.q_start + r) * sh.q_heads + kvh * group + g) * d;
    LoadRow(p.q, off, d, sc.q.data() + static_cast<size_t>(m) * d);
    mrow[m] = kNegInf;
    lrow[m] = 0.0f;
  }
  std::fill(acc, acc + static_cast<size_t>(m_rows) * d, 0.0f);

  for (int t = tile_begin; t < tile_end; ++t) {
    const int j0 = w.lo + t * kCpuTile;
    const int n_keys = std::min(kCpuTile, w.hi - j0);
    if (n_keys <= 0) break;
    for (int n = 0; n < n_keys; ++n) {
      const int j = j0 + n;
      const int page =
          p.block_table[static_cast<size_t>(s) * p.max_blocks_per_seq + j / sh.block_size];
      const size_t row =
          (static_cast<size_t>(page) * sh.block_size + j % sh.block_size) * sh.kv_heads + kvh;
      LoadRow(p.k_cache, row * d, d, sc.k.data() + static_cast<size_t>(n) * d);
      LoadRow(p.v_cache, row * d, d, sc.v.data() + static_cast<size_t>(n) * d);
    }
    for (int m = 0; m < m_rows; ++m) {
      const int pos = w.ctx + m / group;
      const float* qm = sc.q.data() + static_cast<size_t>(m) * d;
      float* sm = sc.s.data() + static_cast<size_t>(m) * kCpuTile;
      float tile_max = kNegInf;
      for (int n = 0; n < n_keys; ++n) {
        const int j = j0 + n;
        const bool visible = j <= pos && (sh.window <= 0 || pos - j < sh.window);
        if (!visible) {
          sm[n] = kNegInf;
          continue;
        }
        const float* kn = sc.k.data() + static_cast<size_t>(n) * d;
        float dot = 0.0f;
        for (int i = 0; i < d; ++i) dot += qm[i] * kn[i];
        float score = dot * scale;
        if (cap > 0.0f) score = cap * std::tanh(score / cap);
        sm[n] = score;
        tile_max = std::max(tile_max, score);
      }
      if (tile_max == kNegInf) continue;  // nothing visible in this tile for this row
      const float m_new = std::max(mrow[m], tile_max);
      const float alpha = mrow[m] == kNegInf ? 0.0f : std::exp(mrow[m] - m_new);
      float psum = 0.0f;
      for (int n = 0; n < n_keys; ++n) {
        const float pv = sm[n] == kNegInf ? 0.0f : std::exp(sm[n] - m_new);
        sm[n] = pv;
        psum += pv;
      }
      lrow[m] = lrow[m] * alpha + psum;
      mrow[m] = m_new;
      float* am = acc + static_cast<size_t>(m) * d;
      for (int i = 0; i < d; ++i) am[i] *= alpha;
      for (int n = 0; n < n_keys; ++n) {
        const float pv = sm[n];
        if (pv == 0.0f) continue;
        const float* vn = sc.v.data() + static_cast<size_t>(n) * d;
        for (int i = 0; i < d; ++i) am[i] += pv * vn[i];
      }
    }
  }
}

struct Task {
  int seq, kvh, seg;
};

}  // namespace

void RunCpu(const HostProblem& p, Path path, int segments, int threads, HostTensor* out) {
  const AttentionShape& sh = p.shape;
  const int d = sh.head_dim;
  const int group = sh.q_heads / sh.kv_heads;
  const int nseg = path == Path::k3D ? std::max(1, segments) : 1;
  const int max_m = p.max_query_len() * group;

  std::vector<Task> tasks;
  for (int s = 0; s < p.num_seqs(); ++s)
    for (int h = 0; h < sh.kv_heads; ++h)
      for (int g = 0; g < nseg; ++g) tasks.push_back({s, h, g});

  // 3D partials, indexed per query token: [token, q_head, segment] (+ head_dim for acc).
  const size_t nt = static_cast<size_t>(p.num_tokens());
  std::vector<float> seg_acc, seg_max, seg_sum;
  if (path == Path::k3D) {
    seg_acc.assign(nt * sh.q_heads * nseg * d, 0.0f);
    seg_max.assign(nt * sh.q_heads * nseg, kNegInf);
    seg_sum.assign(nt * sh.q_heads * nseg, 0.0f);
  }

  auto worker = [&](int tid, int nthreads) {
    Scratch sc;
    sc.Reserve(max_m, d);
    std::vector<float> acc(static_cast<size_t>(max_m) * d), mrow(max_m), lrow(max_m);
    for (size_t ti = tid; ti < tasks.size(); ti += nthreads) {
      const Task& task = tasks[ti];
      const SeqWalk w = MakeWalk(p, task.seq);
      const int per_seg = (w.tiles + nseg - 1) / nseg;
      const int tb = std::min(w.tiles, task.seg * per_seg);
      const int te = std::min(w.tiles, tb + per_seg);
      ProcessTiles(p, w, task.seq, task.kvh, tb, te, sc, acc.data(), mrow.data(), lrow.data());
      for (int m = 0; m < w.q_len * group; ++m) {
        const int r = m / group, g = m % group;
        const size_t tok = static_cast<size_t>(w.q_start + r);
        const int qh = task.kvh * group + g;
        const float* am = acc.data() + static_cast<size_t>(m) * d;
        if (path == Path::k2D) {
          const size_t base = (tok * sh.q_heads + qh) * d;
          for (int i = 0; i < d; ++i) out->Set(base + i, lrow[m] > 0.0f ? am[i] / lrow[m] : 0.0f);
        } else {
          const size_t slot = (tok * sh.q_heads + qh) * nseg + task.seg;
          seg_max[slot] = mrow[m];
          seg_sum[slot] = lrow[m];
          std::memcpy(seg_acc.data() + slot * d, am, sizeof(float) * d);
        }
      }
    }
  };

  const int nthreads = std::max(1, std::min<int>(threads, static_cast<int>(tasks.size())));
  if (nthreads == 1) {
    worker(0, 1);
  } else {
    std::vector<std::thread> pool;
    for (int t = 1; t < nthreads; ++t) pool.emplace_back(worker, t, nthreads);
    worker(0, nthreads);
    for (auto& th : pool) th.join();
  }
  if (path == Path::k2D) return;

  // Merge: segments in order; an empty segment (max -inf, sum 0) contributes nothing.
  std::vector<float> num(d);
  for (size_t tok = 0; tok < nt; ++tok) {
    for (int qh = 0; qh < sh.q_heads; ++qh) {
      const size_t slot0 = (tok * sh.q_heads + qh) * nseg;
      float gmax = kNegInf;
      for (int g = 0; g < nseg; ++g) gmax = std::max(gmax, seg_max[slot0 + g]);
      std::fill(num.begin(), num.end(), 0.0f);
      float den = 0.0f;
      if (gmax != kNegInf) {
        for (int g = 0; g < nseg; ++g) {
          if (seg_max[slot0 + g] == kNegInf) continue;
          const float wgt = std::exp(seg_max[slot0 + g] - gmax);
          den += wgt * seg_sum[slot0 + g];
          const float* a = seg_acc.data() + (slot0 + g) * d;
          for (int i = 0; i < d; ++i) num[i] += wgt * a[i];
        }
      }
      const size_t base = (tok * sh.q_heads + qh) * d;
      for (int i = 0; i < d; ++i) out->Set(base + i, den > 0.0f ? num[i] / den : 0.0f);
    }
  }
}

}  // namespace ladder::kernels::internal

namespace ladder::kernels {

std::vector<double> ReferenceAttention(const HostProblem& p) {
  const AttentionShape& sh = p.shape;
  const int d = sh.head_dim;
  const int group = sh.q_heads / sh.kv_heads;
  const double scale = sh.EffectiveScale();
  std::vector<double> out(static_cast<size_t>(p.num_tokens()) * sh.q_heads * d, 0.0);
  std::vector<double> q(d), scores, acc(d);
  for (int s = 0; s < p.num_seqs(); ++s) {
    const int q0 = p.query_start[s], q_len = p.query_start[s + 1] - q0;
    const int ctx = p.seq_lens[s] - q_len;
    for (int r = 0; r < q_len; ++r) {
      const int pos = ctx + r;
      const int lo = sh.window > 0 ? std::max(0, pos - sh.window + 1) : 0;
      for (int qh = 0; qh < sh.q_heads; ++qh) {
        const int kvh = qh / group;
        const size_t qoff = (static_cast<size_t>(q0 + r) * sh.q_heads + qh) * d;
        for (int i = 0; i < d; ++i) q[i] = p.q.Get(qoff + i);
        scores.assign(pos - lo + 1, 0.0);
        double mx = -std::numeric_limits<double>::infinity();
        auto row_of = [&](int j) {
          const int page =
              p.block_table[static_cast<size_t>(s) * p.max_blocks_per_seq + j / sh.block_size];
          return ((static_cast<size_t>(page) * sh.block_size + j % sh.block_size) * sh.kv_heads +
                  kvh) *
                 d;
        };
        for (int j = lo; j <= pos; ++j) {
          const size_t koff = row_of(j);
          double dot = 0;
          for (int i = 0; i < d; ++i) dot += q[i] * static_cast<double>(p.k_cache.Get(koff + i));
          double sc = dot * scale;
          if (sh.softcap > 0) sc = sh.softcap * std::tanh(sc / sh.softcap);
          scores[j - lo] = sc;
          mx = std::max(mx, sc);
        }
        double den = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int j = lo; j <= pos; ++j) {
          const double w = std::exp(scores[j - lo] - mx);
          den += w;
          const size_t voff = row_of(j);
          for (int i = 0; i < d; ++i) acc[i] += w * static_cast<double>(p.v_cache.Get(voff + i));
        }
        for (int i = 0; i < d; ++i) out[qoff + i] = acc[i] / den;
      }
    }
  }
  return out;
}

}  // namespace ladder::kernels
