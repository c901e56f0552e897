// Benchmark of unified attention: depth x query rows x policy x shape preset.
//
// Timing (BenchPoint::timing; every result states its method in timing_method, the table's
// footer and the JSON): the CPU times each call with a steady clock. GPU backends, after
// `warmup` untimed calls, take `repeats` samples with device events, either
//   Timing::kStream  one call per sample, launched on the stream behind a kernel that spins on
//                    the device for 100 µs (CUDA; gpu::HoldNs), so the host has queued the start
//                    event, the call and the end event before the GPU reaches them: the events
//                    time the GPU's work, not the host's launch calls (an optional L2 flush
//                    before each call, outside the timed region); or
//   Timing::kGraph   the way engines run decode: `graph_calls` calls captured into one CUDA / HIP
//                    graph, one untimed replay, then each sample one replay behind the same spin,
//                    divided by graph_calls (µs per call).
// The reported time is the median of the samples. A
// device-to-device copy is measured once per process as the bandwidth ceiling (bytes read +
// bytes written per second). Effective bytes are those that must move: the K and V rows each
// query block can see (window-limited), plus Q and O.
//
// Thread safety: RunBenchPoint/RunSweep may be called from one thread at a time per process
// (they share the device and the cached copy ceiling).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ladder/kernels/attention.h"
#include "ladder/kernels/result.h"

namespace ladder::kernels {

struct ShapePreset {
  std::string name;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int window = 0;
  float softcap = 0.0f;
  std::string description;
};

// gemma4-31b-global, gemma4-31b-sliding, their -tp2 variants, llama-70b, gemma4-dense-256, tiny.
std::span<const ShapePreset> Presets();
// NotFound error listing the known names when `name` is unknown.
Result<ShapePreset> FindPreset(std::string_view name);

enum class Timing { kStream, kGraph };
std::string_view ToString(Timing t);  // "stream" | "graph"

struct BenchPoint {
  Backend backend = Backend::kCpu;
  std::string preset;  // informational; the shape fields below are what runs
  int q_heads = 8, kv_heads = 2, head_dim = 64;
  int depth = 1024;    // KV length per sequence, query rows included
  int query_rows = 1;  // rows per sequence
  int num_seqs = 1;
  int block_size = 16;
  int window = 0;
  float softcap = 0.0f;
  DType dtype = DType::kBF16;
  Policy policy = Policy::kAuto;
  int warmup = 2;
  int repeats = 10;
  bool flush_l2 = false;  // kStream only
  Timing timing = Timing::kStream;
  int graph_calls = 20;  // kGraph: calls per captured graph
  // kCpu: worker threads per call. One by default: a call spread over two threads waits for the
  // slower one, so anything else runnable on a small machine (the coordinator, other agents, a
  // build) shows up in every timing instead of in a few.
  int cpu_threads = 1;
  uint64_t seed = 0;
  PolicyConfig config;
  TuningConfig tuning;  // GPU backends (tuning.h)

  static Result<BenchPoint> FromPreset(std::string_view preset, Backend backend);
  Status Validate() const;
};

struct BenchResult {
  BenchPoint point;
  double time_us_median = 0;
  double time_us_min = 0;
  std::vector<double> times_us;
  double bytes_moved = 0;               // bytes per call
  double bytes_per_s = 0;               // bytes_moved / median time
  double copy_ceiling_bytes_per_s = 0;  // 0 when not measured
  double fraction_of_ceiling = 0;       // bytes_per_s / ceiling, 0 when no ceiling
  Path path = Path::k2D;
  int segments = 1;
  std::string grid;
  std::string reason;
  std::string device;
  // How the times were taken, in one line: stream launches or graph replays, the device spin
  // before the start event, warm-up calls, what the median is over.
  std::string timing_method;
  // The SM clock right after the timed calls and the SM's maximum clock, in MHz (NVIDIA, read
  // through the driver's NVML where it is installed); 0 where unknown: CPU, HIP, no NVML.
  double sm_clock_mhz = 0;
  double sm_clock_max_mhz = 0;
};

Result<BenchResult> RunBenchPoint(const BenchPoint& point);

struct SweepOptions {
  Backend backend = Backend::kCpu;
  std::vector<std::string> presets = {"tiny"};
  std::vector<int> depths = {256, 1024, 4096};
  std::vector<int> query_rows = {1, 2, 4};
  std::vector<Policy> policies = {Policy::kForce2D, Policy::kForce3D};
  DType dtype = DType::kBF16;
  int num_seqs = 1;
  int block_size = 16;
  int warmup = 2;
  int repeats = 10;
  bool flush_l2 = false;
  Timing timing = Timing::kStream;
  int graph_calls = 20;
  int cpu_threads = 1;  // kCpu (BenchPoint::cpu_threads)
  uint64_t seed = 0;
  PolicyConfig config;
  TuningConfig tuning;

  Status Validate() const;
  std::vector<BenchPoint> Points() const;  // the cross product, presets outermost
};

using ProgressFn = std::function<void(const BenchResult&)>;
// Runs every point; stops at the first error. `progress` (may be empty) is called per point.
Result<std::vector<BenchResult>> RunSweep(const SweepOptions& options, const ProgressFn& progress);

// One header line and one line per result, fixed-width columns.
std::string FormatTableHeader();
std::string FormatTableRow(const BenchResult& r);
// What the rows share, after them: the timing method, the copy ceiling, and the lowest SM clock
// any point ended at (where known). Empty for no results.
std::string FormatTableFooter(std::span<const BenchResult> results);
std::string FormatTable(std::span<const BenchResult> results);
// One JSON object per result (no external JSON library: kernels/ stays dependency free).
std::string FormatJson(const BenchResult& r);
std::string FormatJsonArray(std::span<const BenchResult> results);

}  // namespace ladder::kernels
