#include "ladder/kernels/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>

#include "cpu_attention.h"
#include "device_policy.h"
#include "gpu_api.h"
#include "gpu_point.h"
#include "numeric.h"
#include "sm_clock.h"

namespace ladder::kernels {
namespace {

const std::vector<ShapePreset>& PresetList() {
  static const std::vector<ShapePreset> presets = {
      {"gemma4-31b-global", 32, 4, 512, 0, 0.0f,
       "Gemma 4 31B global layers: 32 q / 4 kv heads, head 512"},
      {"gemma4-31b-sliding", 32, 16, 256, 1024, 0.0f,
       "Gemma 4 31B sliding layers: 32 / 16, head 256, window 1024"},
      {"gemma4-31b-global-tp2", 16, 2, 512, 0, 0.0f, "gemma4-31b-global at TP=2 (heads halved)"},
      {"gemma4-31b-sliding-tp2", 16, 8, 256, 1024, 0.0f,
       "gemma4-31b-sliding at TP=2 (heads halved)"},
      {"llama-70b", 64, 8, 128, 0, 0.0f, "Llama 70B: 64 / 8 heads, head 128"},
      {"gemma4-dense-256", 32, 16, 256, 0, 0.0f,
       "32 q / 16 kv heads, head 256, no window (vs torch SDPA)"},
      {"tiny", 8, 2, 64, 0, 0.0f, "8 q / 2 kv heads, head 64: CPU demos and tests"},
  };
  return presets;
}

// Bytes that must move per call: every visible K and V row once, Q read, O written.
double EffectiveBytes(const BenchPoint& p) {
  const double es = static_cast<double>(DTypeBytes(p.dtype));
  const int ctx = p.depth - p.query_rows;
  const int lo = p.window > 0 ? std::max(0, ctx - p.window + 1) : 0;
  const double keys = p.depth - lo;
  const double kv = 2.0 * keys * p.kv_heads * p.head_dim * es;
  const double qo = 2.0 * p.query_rows * p.q_heads * p.head_dim * es;
  return p.num_seqs * (kv + qo);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

AttentionShape ShapeOf(const BenchPoint& p) {
  AttentionShape s;
  s.q_heads = p.q_heads;
  s.kv_heads = p.kv_heads;
  s.head_dim = p.head_dim;
  s.block_size = p.block_size;
  s.window = p.window;
  s.softcap = p.softcap;
  s.dtype = p.dtype;
  return s;
}

std::mutex g_ceiling_mu;
std::map<Backend, double> g_ceiling;  // GUARDED_BY(g_ceiling_mu)

double CpuCopyBytesPerS() {
  const size_t n = 64u << 20;
  std::vector<unsigned char> a(n, 1), b(n, 0);
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), n);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    a[i] = b[n - 1 - i];  // keep the copies observable
  }
  return 2.0 * n / Median(t);
}

Result<double> CopyCeiling(Backend b) {
  std::lock_guard<std::mutex> lock(g_ceiling_mu);
  if (auto it = g_ceiling.find(b); it != g_ceiling.end()) return it->second;
  double v = 0;
  if (b == Backend::kCpu) {
    v = CpuCopyBytesPerS();
  } else {
    LADDER_K_ASSIGN_OR_RETURN(v, gpu::MeasureCopyBytesPerS(size_t{1} << 30, 20));
  }
  g_ceiling[b] = v;
  return v;
}

// One line: how RunBenchPoint took the times of `p` (hold_ns: the device spin before each start
// event, 0 for none).
std::string TimingMethod(const BenchPoint& p, unsigned long long hold_ns) {
  char buf[384];
  if (p.backend == Backend::kCpu) {
    std::snprintf(buf, sizeof(buf),
                  "steady clock around each call; %d warm-up calls; median of %d calls", p.warmup,
                  p.repeats);
    return buf;
  }
  char spin[96];
  if (hold_ns > 0)
    std::snprintf(spin, sizeof(spin), "a %.0f us device spin before each start event",
                  hold_ns * 1e-3);
  else
    std::snprintf(spin, sizeof(spin),
                  "no device spin before the start event (host launch gaps included)");
  if (p.timing == Timing::kGraph) {
    std::snprintf(
        buf, sizeof(buf),
        "graph replay: %d calls captured in one %s graph, device events around each replay, %s; "
        "%d warm-up calls and 1 untimed replay; per call = replay / %d; median of %d replays",
        p.graph_calls, p.backend == Backend::kHip ? "HIP" : "CUDA", spin, p.warmup, p.graph_calls,
        p.repeats);
  } else {
    std::snprintf(buf, sizeof(buf),
                  "stream launches: device events around each call, %s%s; %d warm-up calls; median "
                  "of %d calls",
                  spin, p.flush_l2 ? ", L2 flushed before each call" : "", p.warmup, p.repeats);
  }
  return buf;
}

void Finish(BenchResult* r, std::vector<double> times_us) {
  r->times_us = std::move(times_us);
  r->time_us_median = Median(r->times_us);
  r->time_us_min = *std::min_element(r->times_us.begin(), r->times_us.end());
  r->bytes_moved = EffectiveBytes(r->point);
  r->bytes_per_s = r->bytes_moved / (r->time_us_median * 1e-6);
  r->fraction_of_ceiling =
      r->copy_ceiling_bytes_per_s > 0 ? r->bytes_per_s / r->copy_ceiling_bytes_per_s : 0;
}

Result<BenchResult> RunCpuPoint(const BenchPoint& pt) {
  std::vector<SeqSpec> seqs(pt.num_seqs, SeqSpec{pt.query_rows, pt.depth});
  LADDER_K_ASSIGN_OR_RETURN(HostProblem prob, MakeProblem(ShapeOf(pt), seqs, pt.seed));
  const int threads = pt.cpu_threads;
  const PathDecision dec = ChoosePath(pt.policy, pt.config, pt.num_seqs, pt.query_rows,
                                      KeysSeen(ShapeOf(pt), pt.depth, pt.query_rows), pt.kv_heads,
                                      pt.num_seqs * pt.kv_heads, threads);
  HostTensor out(pt.dtype, static_cast<size_t>(prob.num_tokens()) * pt.q_heads * pt.head_dim);
  std::vector<double> times;
  for (int i = 0; i < pt.warmup + pt.repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    internal::RunCpu(prob, dec.path, dec.segments, threads, &out);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (i >= pt.warmup) times.push_back(us);
  }
  BenchResult r;
  r.point = pt;
  r.path = dec.path;
  r.segments = dec.segments;
  r.reason = dec.reason;
  r.grid = "cpu " + std::to_string(pt.num_seqs) + "x" + std::to_string(pt.kv_heads) + "x" +
           std::to_string(dec.segments) + " on " + std::to_string(threads) + " threads";
  r.device = "cpu";
  r.timing_method = TimingMethod(pt, 0);
  LADDER_K_ASSIGN_OR_RETURN(r.copy_ceiling_bytes_per_s, CopyCeiling(Backend::kCpu));
  Finish(&r, std::move(times));
  return r;
}

}  // namespace

namespace internal {
Result<GpuPoint> PrepareGpuPoint(const BenchPoint& pt) {
  GpuPoint g;
  LADDER_K_ASSIGN_OR_RETURN(g.info, QueryDevice(pt.backend));
  const DeviceInfo& info = g.info;
  using gpu::DeviceBuffer;
  const AttentionShape shape = ShapeOf(pt);
  const int pages = (pt.depth + pt.block_size - 1) / pt.block_size;
  const int num_blocks = pages * pt.num_seqs;
  std::vector<int> qs(pt.num_seqs + 1), sl(pt.num_seqs, pt.depth),
      bt(static_cast<size_t>(num_blocks));
  for (int s = 0; s <= pt.num_seqs; ++s) qs[s] = s * pt.query_rows;
  std::iota(bt.begin(), bt.end(), 0);
  for (int i = num_blocks - 1; i > 0; --i)  // shuffled pages, as a real cache would have
    std::swap(bt[i], bt[internal::SplitMix64(pt.seed ^ i) % (i + 1)]);
  const size_t es = DTypeBytes(pt.dtype);
  const size_t q_elems =
      static_cast<size_t>(pt.num_seqs) * pt.query_rows * pt.q_heads * pt.head_dim;
  const size_t kv_elems =
      static_cast<size_t>(num_blocks) * pt.block_size * pt.kv_heads * pt.head_dim;
  LADDER_K_ASSIGN_OR_RETURN(g.d_qs, DeviceBuffer::Alloc(qs.size() * sizeof(int)));
  LADDER_K_ASSIGN_OR_RETURN(g.d_sl, DeviceBuffer::Alloc(sl.size() * sizeof(int)));
  LADDER_K_ASSIGN_OR_RETURN(g.d_bt, DeviceBuffer::Alloc(bt.size() * sizeof(int)));
  LADDER_K_ASSIGN_OR_RETURN(g.d_q, DeviceBuffer::Alloc(q_elems * es));
  LADDER_K_ASSIGN_OR_RETURN(g.d_k, DeviceBuffer::Alloc(kv_elems * es));
  LADDER_K_ASSIGN_OR_RETURN(g.d_v, DeviceBuffer::Alloc(kv_elems * es));
  LADDER_K_ASSIGN_OR_RETURN(g.d_o, DeviceBuffer::Alloc(q_elems * es));
  LADDER_K_TRY(gpu::CopyToDevice(g.d_qs.get(), qs.data(), g.d_qs.size()));
  LADDER_K_TRY(gpu::CopyToDevice(g.d_sl.get(), sl.data(), g.d_sl.size()));
  LADDER_K_TRY(gpu::CopyToDevice(g.d_bt.get(), bt.data(), g.d_bt.size()));
  LADDER_K_TRY(gpu::FillRandom(g.d_q.get(), q_elems, pt.dtype, pt.seed * 3 + 0, 1.0f));
  LADDER_K_TRY(gpu::FillRandom(g.d_k.get(), kv_elems, pt.dtype, pt.seed * 3 + 1, 1.0f));
  LADDER_K_TRY(gpu::FillRandom(g.d_v.get(), kv_elems, pt.dtype, pt.seed * 3 + 2, 1.0f));
  gpu::DeviceProblem& dp = g.dp;
  dp.shape = shape;
  dp.num_seqs = pt.num_seqs;
  dp.num_tokens = pt.num_seqs * pt.query_rows;
  dp.max_query_len = pt.query_rows;
  dp.max_kv_len = pt.depth;
  dp.max_blocks_per_seq = pages;
  dp.query_start = static_cast<const int*>(g.d_qs.get());
  dp.seq_lens = static_cast<const int*>(g.d_sl.get());
  dp.block_table = static_cast<const int*>(g.d_bt.get());
  dp.q = g.d_q.get();
  dp.k = g.d_k.get();
  dp.v = g.d_v.get();
  dp.out = g.d_o.get();
  RunOptions options;
  options.policy = pt.policy;
  options.config = pt.config;
  options.tuning = pt.tuning;
  g.dec = internal::ChooseDevicePath(shape, pt.num_seqs, pt.query_rows, pt.depth, options,
                                     info.sm_count);
  LADDER_K_ASSIGN_OR_RETURN(g.plan, gpu::MakePlan(dp, g.dec.path, g.dec.segments, pt.tuning));
  g.ws_bytes = gpu::WorkspaceBytes(dp, g.plan);
  LADDER_K_ASSIGN_OR_RETURN(g.ws, DeviceBuffer::Alloc(std::max<size_t>(g.ws_bytes, 16)));
  return g;
}
}  // namespace internal

namespace {
Result<BenchResult> RunGpuPoint(const BenchPoint& pt) {
  LADDER_K_ASSIGN_OR_RETURN(internal::GpuPoint g, internal::PrepareGpuPoint(pt));
  using gpu::DeviceBuffer;
  const DeviceInfo& info = g.info;
  const gpu::DeviceProblem& dp = g.dp;
  const PathDecision& dec = g.dec;
  const gpu::LaunchPlan& plan = g.plan;
  const size_t ws_bytes = g.ws_bytes;
  DeviceBuffer& ws = g.ws;
  DeviceBuffer flush;
  if (pt.flush_l2) {
    LADDER_K_ASSIGN_OR_RETURN(flush,
                              DeviceBuffer::Alloc(std::max<size_t>(2 * info.l2_bytes, 64u << 20)));
  }
  std::vector<double> times;
  if (pt.timing == Timing::kGraph) {
    LADDER_K_ASSIGN_OR_RETURN(times, gpu::TimeGraphReplays(dp, plan, ws.get(), ws_bytes, pt.warmup,
                                                           pt.repeats, pt.graph_calls));
  } else {
    LADDER_K_ASSIGN_OR_RETURN(times, gpu::TimeLaunches(dp, plan, ws.get(), ws_bytes, pt.warmup,
                                                       pt.repeats, flush.get(), flush.size()));
  }
  // Right after the timed calls, before the GPU idles down (NVML reports the present clock).
  const internal::SmClockMhz clock = pt.backend == Backend::kCuda
                                         ? internal::SampleSmClock(info.pci_bus_id)
                                         : internal::SmClockMhz{};
  BenchResult r;
  r.point = pt;
  r.path = plan.path;
  r.segments = plan.segments;
  r.grid = plan.grid;
  // A captured launch cannot merge inside the kernel (Launch): say what the replays ran.
  if (pt.timing == Timing::kGraph && plan.merge_in_kernel)
    r.grid += " [in the graph: merge kernel]";
  r.reason = dec.reason;
  r.device = info.name;
  r.timing_method = TimingMethod(pt, gpu::HoldNs());
  r.sm_clock_mhz = clock.now;
  r.sm_clock_max_mhz = clock.max;
  LADDER_K_ASSIGN_OR_RETURN(r.copy_ceiling_bytes_per_s, CopyCeiling(pt.backend));
  Finish(&r, std::move(times));
  return r;
}

std::string JsonEscape(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      o += buf;
    } else {
      o += c;
    }
  }
  return o;
}

}  // namespace

std::string_view ToString(Timing t) { return t == Timing::kGraph ? "graph" : "stream"; }

std::span<const ShapePreset> Presets() { return PresetList(); }

Result<ShapePreset> FindPreset(std::string_view name) {
  for (const ShapePreset& p : PresetList())
    if (p.name == name) return p;
  std::string known;
  for (const ShapePreset& p : PresetList()) known += (known.empty() ? "" : ", ") + p.name;
  return Error(ErrorCode::kNotFound,
               "unknown shape preset '" + std::string(name) + "' (known: " + known + ")");
}

Result<BenchPoint> BenchPoint::FromPreset(std::string_view preset, Backend backend) {
  LADDER_K_ASSIGN_OR_RETURN(ShapePreset sp, FindPreset(preset));
  BenchPoint p;
  p.backend = backend;
  p.preset = sp.name;
  p.q_heads = sp.q_heads;
  p.kv_heads = sp.kv_heads;
  p.head_dim = sp.head_dim;
  p.window = sp.window;
  p.softcap = sp.softcap;
  return p;
}

Status BenchPoint::Validate() const {
  LADDER_K_TRY(ShapeOf(*this).Validate());
  if (query_rows < 1 || depth < query_rows)
    return Error(ErrorCode::kInvalidArgument, "need 1 <= query_rows <= depth");
  if (num_seqs < 1) return Error(ErrorCode::kInvalidArgument, "num_seqs must be >= 1");
  if (repeats < 1 || warmup < 0)
    return Error(ErrorCode::kInvalidArgument, "repeats >= 1, warmup >= 0");
  if (cpu_threads < 1 || cpu_threads > 1024)
    return Error(ErrorCode::kInvalidArgument, "cpu_threads must be in [1, 1024]");
  if (backend != Backend::kCpu && dtype == DType::kF32)
    return Error(ErrorCode::kUnsupported, "GPU backends take bf16 or f16");
  LADDER_K_TRY(tuning.Validate());
  if (timing == Timing::kGraph) {
    if (backend == Backend::kCpu)
      return Error(ErrorCode::kUnsupported, "graph timing needs a GPU backend");
    if (graph_calls < 1) return Error(ErrorCode::kInvalidArgument, "graph_calls must be >= 1");
    if (flush_l2)
      return Error(ErrorCode::kInvalidArgument,
                   "graph timing replays calls back to back: it does not combine with an L2 flush "
                   "between calls");
  }
  return OkStatus();
}

Result<BenchResult> RunBenchPoint(const BenchPoint& point) {
  LADDER_K_TRY(point.Validate());
  if (!BackendAvailable(point.backend)) {
    auto info = QueryDevice(point.backend);
    return Error(ErrorCode::kUnavailable,
                 "backend " + std::string(ToString(point.backend)) + " unavailable: " +
                     (info.ok() ? std::string("no device") : info.error().message));
  }
  if (point.backend == Backend::kCpu) return RunCpuPoint(point);
  return RunGpuPoint(point);
}

Status SweepOptions::Validate() const {
  if (presets.empty() || depths.empty() || query_rows.empty() || policies.empty())
    return Error(ErrorCode::kInvalidArgument,
                 "presets, depths, query_rows and policies must be non-empty");
  for (const auto& p : presets) LADDER_K_TRY(FindPreset(p));
  for (const BenchPoint& pt : Points()) LADDER_K_TRY(pt.Validate());
  return OkStatus();
}

std::vector<BenchPoint> SweepOptions::Points() const {
  std::vector<BenchPoint> pts;
  for (const auto& name : presets) {
    auto base = BenchPoint::FromPreset(name, backend);
    if (!base.ok()) continue;
    for (int depth : depths)
      for (int rows : query_rows)
        for (Policy pol : policies) {
          BenchPoint p = base.value();
          p.depth = depth;
          p.query_rows = rows;
          p.policy = pol;
          p.dtype = dtype;
          p.num_seqs = num_seqs;
          p.block_size = block_size;
          p.warmup = warmup;
          p.repeats = repeats;
          p.flush_l2 = flush_l2;
          p.timing = timing;
          p.graph_calls = graph_calls;
          p.cpu_threads = cpu_threads;
          p.seed = seed;
          p.config = config;
          p.tuning = tuning;
          pts.push_back(p);
        }
  }
  return pts;
}

Result<std::vector<BenchResult>> RunSweep(const SweepOptions& options, const ProgressFn& progress) {
  LADDER_K_TRY(options.Validate());
  std::vector<BenchResult> out;
  for (const BenchPoint& p : options.Points()) {
    LADDER_K_ASSIGN_OR_RETURN(BenchResult r, RunBenchPoint(p));
    if (progress) progress(r);
    out.push_back(std::move(r));
  }
  return out;
}

std::string FormatTableHeader() {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%-5s %-24s %7s %4s %-10s %-4s %4s %11s %11s %9s %7s  %s", "back",
                "preset", "depth", "rows", "policy", "path", "seg", "median_us", "min_us", "GB/s",
                "%ceil", "grid");
  return buf;
}

std::string FormatTableRow(const BenchResult& r) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "%-5s %-24s %7d %4d %-10s %-4s %4d %11.2f %11.2f %9.1f %6.1f%%  %s",
                std::string(ToString(r.point.backend)).c_str(), r.point.preset.c_str(),
                r.point.depth, r.point.query_rows, std::string(ToString(r.point.policy)).c_str(),
                std::string(ToString(r.path)).c_str(), r.segments, r.time_us_median, r.time_us_min,
                r.bytes_per_s / 1e9, 100.0 * r.fraction_of_ceiling, r.grid.c_str());
  return buf;
}

std::string FormatTableFooter(std::span<const BenchResult> results) {
  if (results.empty()) return "";
  std::string s;
  // Each distinct method once (a sweep shares one; a caller may format results of several).
  std::vector<std::string> methods;
  for (const BenchResult& r : results)
    if (std::find(methods.begin(), methods.end(), r.timing_method) == methods.end())
      methods.push_back(r.timing_method);
  for (const std::string& m : methods) s += "timing: " + m + "\n";
  char buf[256];
  std::snprintf(buf, sizeof(buf), "copy ceiling: %.1f GB/s (device-to-device, read+write)\n",
                results.front().copy_ceiling_bytes_per_s / 1e9);
  s += buf;
  // The lowest clock any point ended at: a throttled GPU shows here before it shows as noise.
  const BenchResult* slowest = nullptr;
  for (const BenchResult& r : results)
    if (r.sm_clock_mhz > 0 && (slowest == nullptr || r.sm_clock_mhz < slowest->sm_clock_mhz))
      slowest = &r;
  if (slowest != nullptr) {
    std::snprintf(buf, sizeof(buf),
                  "SM clock after the timed calls: lowest %.0f MHz, maximum %.0f (NVML)\n",
                  slowest->sm_clock_mhz, slowest->sm_clock_max_mhz);
    s += buf;
  }
  return s;
}

std::string FormatTable(std::span<const BenchResult> results) {
  std::string s = FormatTableHeader() + "\n";
  for (const auto& r : results) s += FormatTableRow(r) + "\n";
  return s + FormatTableFooter(results);
}

std::string FormatJson(const BenchResult& r) {
  std::string times;
  for (double t : r.times_us) {
    char b[32];
    std::snprintf(b, sizeof(b), "%s%.3f", times.empty() ? "" : ",", t);
    times += b;
  }
  const BenchPoint& p = r.point;
  char buf[4096];
  std::snprintf(
      buf, sizeof(buf),
      "{\"backend\":\"%s\",\"device\":\"%s\",\"preset\":\"%s\",\"q_heads\":%d,\"kv_heads\":%d,"
      "\"head_dim\":%d,\"depth\":%d,\"query_rows\":%d,\"num_seqs\":%d,\"block_size\":%d,\"window\":"
      "%d,"
      "\"softcap\":%g,\"dtype\":\"%s\",\"policy\":\"%s\",\"path\":\"%s\",\"segments\":%d,"
      "\"grid\":\"%s\",\"tuning\":\"%s\",\"reason\":\"%s\",\"warmup\":%d,\"repeats\":%d,\"flush_"
      "l2\":%s,"
      "\"timing\":\"%s\",\"graph_calls\":%d,\"timing_method\":\"%s\","
      "\"time_us_median\":%.3f,\"time_us_min\":%.3f,\"bytes_moved\":%.0f,\"bytes_per_s\":%.6g,"
      "\"copy_ceiling_bytes_per_s\":%.6g,\"fraction_of_ceiling\":%.4f,\"sm_clock_mhz\":%.0f,"
      "\"sm_clock_max_mhz\":%.0f,\"times_us\":[",
      std::string(ToString(p.backend)).c_str(), JsonEscape(r.device).c_str(),
      JsonEscape(p.preset).c_str(), p.q_heads, p.kv_heads, p.head_dim, p.depth, p.query_rows,
      p.num_seqs, p.block_size, p.window, p.softcap, std::string(ToString(p.dtype)).c_str(),
      std::string(ToString(p.policy)).c_str(), std::string(ToString(r.path)).c_str(), r.segments,
      JsonEscape(r.grid).c_str(), JsonEscape(p.tuning.ToString()).c_str(),
      JsonEscape(r.reason).c_str(), p.warmup, p.repeats, p.flush_l2 ? "true" : "false",
      std::string(ToString(p.timing)).c_str(), p.timing == Timing::kGraph ? p.graph_calls : 0,
      JsonEscape(r.timing_method).c_str(), r.time_us_median, r.time_us_min, r.bytes_moved,
      r.bytes_per_s, r.copy_ceiling_bytes_per_s, r.fraction_of_ceiling, r.sm_clock_mhz,
      r.sm_clock_max_mhz);
  return std::string(buf) + times + "]}";
}

std::string FormatJsonArray(std::span<const BenchResult> results) {
  std::string s = "[\n";
  for (size_t i = 0; i < results.size(); ++i)
    s += "  " + FormatJson(results[i]) + (i + 1 < results.size() ? ",\n" : "\n");
  return s + "]\n";
}

}  // namespace ladder::kernels
