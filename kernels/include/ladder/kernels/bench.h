// Benchmark of unified attention: depth x query rows x policy x shape preset.
//
// Timing: GPU backends time each call with device events (warm-up first, then `repeats`
// timed calls; an optional L2 flush between repeats), the CPU with a steady clock. A
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

struct BenchPoint {
  Backend backend = Backend::kCpu;
  std::string preset;  // informational; the shape fields below are what runs
  int q_heads = 8, kv_heads = 2, head_dim = 64;
  int depth = 1024;     // KV length per sequence, query rows included
  int query_rows = 1;   // rows per sequence
  int num_seqs = 1;
  int block_size = 16;
  int window = 0;
  float softcap = 0.0f;
  DType dtype = DType::kBF16;
  Policy policy = Policy::kAuto;
  int warmup = 2;
  int repeats = 10;
  bool flush_l2 = false;
  uint64_t seed = 0;
  PolicyConfig config;

  static Result<BenchPoint> FromPreset(std::string_view preset, Backend backend);
  Status Validate() const;
};

struct BenchResult {
  BenchPoint point;
  double time_us_median = 0;
  double time_us_min = 0;
  std::vector<double> times_us;
  double bytes_moved = 0;                // bytes per call
  double bytes_per_s = 0;                // bytes_moved / median time
  double copy_ceiling_bytes_per_s = 0;   // 0 when not measured
  double fraction_of_ceiling = 0;        // bytes_per_s / ceiling, 0 when no ceiling
  Path path = Path::k2D;
  int segments = 1;
  std::string grid;
  std::string reason;
  std::string device;
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
  uint64_t seed = 0;
  PolicyConfig config;

  Status Validate() const;
  std::vector<BenchPoint> Points() const;  // the cross product, presets outermost
};

using ProgressFn = std::function<void(const BenchResult&)>;
// Runs every point; stops at the first error. `progress` (may be empty) is called per point.
Result<std::vector<BenchResult>> RunSweep(const SweepOptions& options, const ProgressFn& progress);

// One header line and one line per result, fixed-width columns.
std::string FormatTableHeader();
std::string FormatTableRow(const BenchResult& r);
// What the rows share, after them: the copy ceiling, and the lowest SM clock any point ended at
// (where known). Empty for no results.
std::string FormatTableFooter(std::span<const BenchResult> results);
std::string FormatTable(std::span<const BenchResult> results);
// One JSON object per result (no external JSON library: kernels/ stays dependency free).
std::string FormatJson(const BenchResult& r);
std::string FormatJsonArray(std::span<const BenchResult> results);

}  // namespace ladder::kernels
