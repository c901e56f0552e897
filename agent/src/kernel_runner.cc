#include "kernel_runner.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ladder/kernels/bench.h"
#include "ladder/runner/validate.h"
#include "ladder/status_macros.h"

namespace ladder::agent {
namespace {

// Every parameter the kernel runner understands; anything else in a cell is refused so that a
// typo in a matrix fails loudly instead of silently measuring the default.
const std::set<std::string>& KnownParams() {
  static const std::set<std::string> known = [] {
    std::set<std::string> k = {"backend",    "preset", "q_heads",          "kv_heads",
                               "head_dim",   "depth",  "query_rows",       "num_seqs",
                               "block_size", "window", "softcap",          "dtype",
                               "policy",     "path",   "warmup",           "repeats",
                               "flush_l2",   "seed",   "decode_query_len", "seq_threshold_3d",
                               "segments",   "timing", "graph_calls",      "cpu_threads"};
    // kernels::TuningConfig, one parameter per field: an A/B of kernels or launch options is a
    // matrix whose paired axis is one of these.
    for (std::string_view name : kernels::TuningFieldNames()) k.emplace(name);
    return k;
  }();
  return known;
}

// `param` names the parameter at fault so `ladder validate` can point at it ("" for the cell).
absl::Status FromKernel(const kernels::KernelError& error, std::string_view what,
                        std::string_view param = "") {
  const std::string message = absl::StrCat(std::string(what), ": ", error.ToString());
  return param.empty() ? absl::InvalidArgumentError(message) : runner::ParamError(param, message);
}

absl::StatusOr<int> IntParam(const nlohmann::json& params, const char* name, int fallback) {
  if (!params.contains(name)) return fallback;
  const auto& v = params[name];
  if (!v.is_number_integer()) {
    return runner::ParamError(
        name, absl::StrCat("parameter ", name, ": expected an integer, got ", v.dump()));
  }
  return v.get<int>();
}

absl::StatusOr<std::string> StringParam(const nlohmann::json& params, const char* name,
                                        std::string fallback) {
  if (!params.contains(name)) return fallback;
  const auto& v = params[name];
  if (!v.is_string()) {
    return runner::ParamError(
        name, absl::StrCat("parameter ", name, ": expected a string, got ", v.dump()));
  }
  return v.get<std::string>();
}

// The TuningConfig fields given as cell parameters; what is absent keeps its default.
absl::Status TuningFromParams(const nlohmann::json& params, kernels::TuningConfig* tuning) {
  for (std::string_view field : kernels::TuningFieldNames()) {
    const std::string name(field);
    ASSIGN_OR_RETURN(std::string value, StringParam(params, name.c_str(), "auto"));
    if (auto set = kernels::SetTuningField(tuning, name, value); !set.ok())
      return FromKernel(set.error(), absl::StrCat("parameter ", name), name);
  }
  if (auto valid = tuning->Validate(); !valid.ok()) return FromKernel(valid.error(), "cell");
  return absl::OkStatus();
}

absl::StatusOr<kernels::BenchPoint> PointFromParams(const nlohmann::json& params) {
  for (const auto& [key, value] : params.items()) {
    if (!KnownParams().count(key)) {
      // A tuning field the kernels removed says why, rather than "unknown".
      kernels::TuningConfig probe;
      if (auto removed = kernels::SetTuningField(&probe, key, "auto"); !removed.ok()) {
        if (removed.error().ToString().find("was removed") != std::string::npos) {
          return FromKernel(removed.error(), "kernel runner", key);
        }
      }
      return runner::ParamError(key,
                                absl::StrCat("kernel runner: unknown parameter '", key,
                                             "'; known: ", absl::StrJoin(KnownParams(), ", ")));
    }
  }
  ASSIGN_OR_RETURN(std::string backend_name, StringParam(params, "backend", "cpu"));
  auto backend = kernels::ParseBackend(backend_name);
  if (!backend.ok()) return FromKernel(backend.error(), "parameter backend", "backend");
  kernels::BenchPoint point;
  point.backend = *backend;
  ASSIGN_OR_RETURN(std::string preset, StringParam(params, "preset", ""));
  if (!preset.empty()) {
    auto from_preset = kernels::BenchPoint::FromPreset(preset, *backend);
    if (!from_preset.ok()) return FromKernel(from_preset.error(), "parameter preset", "preset");
    point = *from_preset;
  }
  ASSIGN_OR_RETURN(point.q_heads, IntParam(params, "q_heads", point.q_heads));
  ASSIGN_OR_RETURN(point.kv_heads, IntParam(params, "kv_heads", point.kv_heads));
  ASSIGN_OR_RETURN(point.head_dim, IntParam(params, "head_dim", point.head_dim));
  ASSIGN_OR_RETURN(point.depth, IntParam(params, "depth", point.depth));
  ASSIGN_OR_RETURN(point.query_rows, IntParam(params, "query_rows", point.query_rows));
  ASSIGN_OR_RETURN(point.num_seqs, IntParam(params, "num_seqs", point.num_seqs));
  ASSIGN_OR_RETURN(point.block_size, IntParam(params, "block_size", point.block_size));
  ASSIGN_OR_RETURN(point.window, IntParam(params, "window", point.window));
  ASSIGN_OR_RETURN(point.warmup, IntParam(params, "warmup", point.warmup));
  ASSIGN_OR_RETURN(point.repeats, IntParam(params, "repeats", point.repeats));
  ASSIGN_OR_RETURN(point.cpu_threads, IntParam(params, "cpu_threads", point.cpu_threads));
  ASSIGN_OR_RETURN(point.config.decode_query_len,
                   IntParam(params, "decode_query_len", point.config.decode_query_len));
  ASSIGN_OR_RETURN(point.config.seq_threshold_3d,
                   IntParam(params, "seq_threshold_3d", point.config.seq_threshold_3d));
  // The 3D split forced (an A/B of the policy's choice against another); 0: the policy's.
  ASSIGN_OR_RETURN(point.config.force_segments,
                   IntParam(params, "segments", point.config.force_segments));
  if (point.config.force_segments < 0) {
    return runner::ParamError("segments",
                              "parameter segments: expected 0 (the policy's) or a count >= 1");
  }
  if (params.contains("softcap")) {
    if (!params["softcap"].is_number()) {
      return runner::ParamError("softcap", "parameter softcap: expected a number");
    }
    point.softcap = params["softcap"].get<float>();
  }
  if (params.contains("flush_l2")) {
    if (!params["flush_l2"].is_boolean()) {
      return runner::ParamError("flush_l2", "parameter flush_l2: expected true or false");
    }
    point.flush_l2 = params["flush_l2"].get<bool>();
  }
  ASSIGN_OR_RETURN(std::string dtype, StringParam(params, "dtype", ""));
  if (!dtype.empty()) {
    if (dtype == "fp32") dtype = "f32";
    if (dtype == "fp16") dtype = "f16";
    auto parsed = kernels::ParseDType(dtype);
    if (!parsed.ok()) return FromKernel(parsed.error(), "parameter dtype", "dtype");
    point.dtype = *parsed;
  } else if (point.backend == kernels::Backend::kCpu) {
    point.dtype = kernels::DType::kF32;
  }
  // `path: 2d|3d` forces a path; `policy` picks one by rule. Both parse the same way.
  ASSIGN_OR_RETURN(std::string policy, StringParam(params, "policy", ""));
  ASSIGN_OR_RETURN(std::string path, StringParam(params, "path", ""));
  if (!policy.empty() && !path.empty()) {
    return runner::ParamError("path", "give either `policy` or `path`, not both");
  }
  const std::string rule = !path.empty() ? path : policy;
  if (!rule.empty()) {
    auto parsed = kernels::ParsePolicy(rule);
    if (!parsed.ok()) {
      return FromKernel(parsed.error(), path.empty() ? "parameter policy" : "parameter path",
                        path.empty() ? "policy" : "path");
    }
    point.policy = *parsed;
  }
  ASSIGN_OR_RETURN(std::string timing, StringParam(params, "timing", "stream"));
  if (timing == "graph") {
    point.timing = kernels::Timing::kGraph;
  } else if (timing != "stream") {
    return runner::ParamError(
        "timing", absl::StrCat("parameter timing: expected stream or graph, got '", timing, "'"));
  }
  ASSIGN_OR_RETURN(point.graph_calls, IntParam(params, "graph_calls", point.graph_calls));
  RETURN_IF_ERROR(TuningFromParams(params, &point.tuning));
  if (params.contains("seed") && params["seed"].is_number_integer()) {
    point.seed = params["seed"].get<uint64_t>();
  }
  if (auto valid = point.Validate(); !valid.ok()) return FromKernel(valid.error(), "cell");
  return point;
}

// The agents of one process (`ladder local` runs several) take turns on the device a point at a
// time: a timed call must not share the GPU with another agent's, and RunBenchPoint may be called
// from one thread at a time per process (bench.h).
double MicrosBetween(std::chrono::steady_clock::time_point a,
                     std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

class KernelRunner final : public runner::Runner {
 public:
  std::string_view name() const override { return "kernel"; }

  absl::Status Run(const runner::UnitWork& unit, runner::MeasurementSink& sink) override {
    std::vector<kernels::BenchPoint> points;
    for (const auto& cell : unit.cells) {
      auto point = PointFromParams(cell.params);
      if (!point.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("cell ", cell.key, ": ", point.status().message()));
      }
      if (!kernels::BackendAvailable(point->backend)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cell ", cell.key, ": backend ", std::string(kernels::ToString(point->backend)),
            " is not available on this agent (not compiled in, or no device)"));
      }
      points.push_back(*point);
    }
    const int n = static_cast<int>(unit.cells.size());
    using Clock = std::chrono::steady_clock;
    for (int process = 0; process < unit.processes; ++process) {
      const Clock::time_point process_began = Clock::now();
      std::vector<bool> evidence_written(static_cast<size_t>(n), false);
      // The steady-clock cost of each call, µs, per cell: the round cost behind the report's
      // optimal-repeats plan (the results' time stamps have 1 ms resolution, coarser than a
      // CPU demo's round). Waiting for another agent's turn on the device is not counted.
      std::vector<std::vector<double>> call_us(static_cast<size_t>(n));
      double start_us = -1;
      for (int round = 0; round < unit.rounds; ++round) {
        for (int i : runner::InterleavedOrder(n, unit.seed, process, round)) {
          if (sink.Cancelled()) return absl::CancelledError("unit cancelled");
          const runner::CellWork& cell = unit.cells[static_cast<size_t>(i)];
          kernels::BenchPoint point = points[static_cast<size_t>(i)];
          // Fresh data per process, the same data across rounds of one process.
          point.seed = point.seed * 1000003u + static_cast<uint64_t>(process);
          // A process of the kernel runner is a fresh draw of the data inside the agent: its
          // set-up is whatever happens before its first call, which is next to nothing.
          if (start_us < 0) start_us = MicrosBetween(process_began, Clock::now());
          auto result = [&] {
            std::lock_guard<std::mutex> turn(DeviceTurn());
            const Clock::time_point began = Clock::now();
            auto r = kernels::RunBenchPoint(point);
            call_us[static_cast<size_t>(i)].push_back(MicrosBetween(began, Clock::now()));
            return r;
          }();
          if (!result.ok()) {
            return absl::InternalError(
                absl::StrCat("cell ", cell.key, ": ", result.error().ToString()));
          }
          const kernels::BenchResult& r = *result;
          auto record = [&](const char* metric, double value, const char* unit_name) {
            return sink.Record(
                runner::Measurement{cell.cell_id, process, round, metric, value, unit_name});
          };
          RETURN_IF_ERROR(record("time_us", r.time_us_median, "us"));
          RETURN_IF_ERROR(record("time_us_min", r.time_us_min, "us"));
          RETURN_IF_ERROR(record("bytes_per_s", r.bytes_per_s, "B/s"));
          if (r.copy_ceiling_bytes_per_s > 0) {
            RETURN_IF_ERROR(record("fraction_of_copy", r.fraction_of_ceiling, "1"));
          }
          RETURN_IF_ERROR(record("segments", r.segments, "1"));
          // The clock the timed calls ended at, against the SM's maximum as the reference: the
          // report flags a cell `throttled` under 75 % of it (NVIDIA with NVML; else unknown).
          if (r.sm_clock_mhz > 0 && r.sm_clock_max_mhz > 0) {
            RETURN_IF_ERROR(record("gpu_clock_mhz", r.sm_clock_mhz, "MHz"));
            RETURN_IF_ERROR(record("gpu_clock_default_mhz", r.sm_clock_max_mhz, "MHz"));
          }
          if (!evidence_written[static_cast<size_t>(i)]) {
            evidence_written[static_cast<size_t>(i)] = true;
            RETURN_IF_ERROR(sink.RecordEvidence(
                runner::Evidence{cell.cell_id,
                                 process,
                                 "kernel_path",
                                 {{"path", std::string(kernels::ToString(r.path))},
                                  {"segments", r.segments},
                                  {"grid", r.grid},
                                  {"reason", r.reason},
                                  {"device", r.device},
                                  {"tuning", point.tuning.ToString()},
                                  {"timing_method", r.timing_method},
                                  {"policy", std::string(kernels::ToString(point.policy))}}}));
          }
        }
      }
      for (int i = 0; i < n; ++i) {
        RETURN_IF_ERROR(sink.RecordEvidence(
            runner::Evidence{unit.cells[static_cast<size_t>(i)].cell_id,
                             process,
                             "kernel_process",
                             {{"start_us", std::max(0.0, start_us)},
                              {"measure_us", call_us[static_cast<size_t>(i)]}}}));
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

absl::Status CheckKernelParams(const nlohmann::json& params) {
  return PointFromParams(params).status();
}

std::unique_ptr<runner::Runner> MakeKernelRunner() { return std::make_unique<KernelRunner>(); }

std::mutex& DeviceTurn() {
  static std::mutex mu;
  return mu;
}

}  // namespace ladder::agent
