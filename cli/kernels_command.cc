// `ladder kernels bench|timeline|check`: the attention kernels on this machine, no coordinator.
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "exit_codes.h"
#include "format.h"
#include "ladder/common/size.h"
#include "ladder/kernels/bench.h"
#include "ladder/kernels/cases.h"
#include "ladder/kernels/timeline.h"

namespace ladder::cli {
namespace {

template <typename T>
T OrFail(kernels::Result<T> result, const std::string& what) {
  if (!result.ok()) Fail(what + ": " + result.error().message, ExitCode::kBadInput);
  return std::move(result).value();
}

constexpr const char* kTuningHelp =
    "GPU kernel choices and launch options as name=value pairs, e.g. 'split_keys=off "
    "wide_work_groups=on' (fields: head512, merge_in_kernel, merge_overlap, "
    "evict_first, attention_overlap, merge_in_cluster, wide_work_groups, split_keys, "
    "release_next; each "
    "auto unless named: docs/kernels.md, Tuning). To compare two, prefer a matrix whose paired "
    "axis is the field (kernels/ab/kernels-ab-*.yaml)";

std::vector<int> ParseSizesOrFail(const std::string& text, const std::string& flag) {
  auto sizes = ParseSizeList(text);
  if (!sizes.ok()) Fail(flag + ": " + std::string(sizes.status().message()), ExitCode::kBadInput);
  return *std::move(sizes);
}

}  // namespace

void AddKernelsCommand(CLI::App& app) {
  auto* kernels_cmd =
      app.add_subcommand("kernels",
                         "Run the unified-attention kernels locally: a benchmark sweep or the "
                         "correctness case table. No coordinator involved.");
  kernels_cmd->require_subcommand(1);
  {
    struct Flags {
      std::string backend = "cpu", presets = "tiny", depths = "256,1024,4096", rows = "1,2,4",
                  policies = "2d,3d", dtype, tuning;
      int seqs = 1, block_size = 16, warmup = 2, repeats = 10, graph_calls = 20, cpu_threads = 1,
          segments = 0;
      bool flush_l2 = false, json = false, graph = false;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = kernels_cmd->add_subcommand(
        "bench",
        "Sweep depth x query rows x policy x shape preset and print time per call, effective "
        "bytes/s and the fraction of a device-to-device copy measured in the same run.\n"
        "Example (H200): ladder kernels bench --backend cuda --preset gemma4-31b-global "
        "--depths 1K,8K,32K --rows 1,2,4 --policy legacy,spec-aware");
    cmd->add_option("--backend", flags->backend, "cpu | cuda | hip")->capture_default_str();
    cmd->add_option("--preset", flags->presets, "shape presets, comma-separated")
        ->capture_default_str();
    cmd->add_option("--depths", flags->depths, "KV lengths, e.g. 1K,8K,32K")->capture_default_str();
    cmd->add_option("--rows", flags->rows, "query rows per sequence")->capture_default_str();
    cmd->add_option("--policy", flags->policies, "2d, 3d, legacy, spec-aware, auto")
        ->capture_default_str();
    cmd->add_option("--dtype", flags->dtype, "f32 | f16 | bf16 (default: f32 on cpu, bf16 on GPU)");
    cmd->add_option("--seqs", flags->seqs, "sequences per call")->capture_default_str();
    cmd->add_option("--block-size", flags->block_size, "KV page size in tokens")
        ->capture_default_str();
    cmd->add_option("--warmup", flags->warmup, "untimed calls first")->capture_default_str();
    cmd->add_option("--repeats", flags->repeats, "timed calls per point")->capture_default_str();
    cmd->add_flag("--flush-l2", flags->flush_l2, "flush the L2 cache between timed calls");
    cmd->add_flag("--graph", flags->graph,
                  "time CUDA/HIP graph replays, as engines run decode: --graph-calls calls "
                  "captured in one graph, each sample one replay divided by the calls "
                  "(default: stream launches, one call per sample)");
    cmd->add_option("--graph-calls", flags->graph_calls, "calls captured per graph with --graph")
        ->capture_default_str();
    cmd->add_option("--cpu-threads", flags->cpu_threads,
                    "threads per call on the cpu backend (one keeps other work on a small "
                    "machine out of most timings)")
        ->capture_default_str();
    cmd->add_option("--segments", flags->segments,
                    "force the 3D path's segment count (default: the policy's, from the SM count "
                    "and the depth); a sweep of it with --policy 3d shows where the policy's "
                    "choice sits")
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--tuning", flags->tuning, kTuningHelp);
    cmd->add_flag("--json", flags->json, "print JSON");
    cmd->callback([flags] {
      kernels::SweepOptions options;
      options.config.force_segments = flags->segments;
      options.tuning = OrFail(kernels::ParseTuning(flags->tuning), "--tuning");
      options.backend = OrFail(kernels::ParseBackend(flags->backend), "--backend");
      options.presets = SplitCsv(flags->presets);
      options.depths = ParseSizesOrFail(flags->depths, "--depths");
      options.query_rows = ParseSizesOrFail(flags->rows, "--rows");
      options.policies.clear();
      for (const auto& p : SplitCsv(flags->policies)) {
        options.policies.push_back(OrFail(kernels::ParsePolicy(p), "--policy"));
      }
      std::string dtype = flags->dtype;
      if (dtype.empty()) dtype = options.backend == kernels::Backend::kCpu ? "f32" : "bf16";
      options.dtype = OrFail(kernels::ParseDType(dtype), "--dtype");
      options.num_seqs = flags->seqs;
      options.block_size = flags->block_size;
      options.warmup = flags->warmup;
      options.repeats = flags->repeats;
      options.flush_l2 = flags->flush_l2;
      options.timing = flags->graph ? kernels::Timing::kGraph : kernels::Timing::kStream;
      options.graph_calls = flags->graph_calls;
      options.cpu_threads = flags->cpu_threads;
      if (auto valid = options.Validate(); !valid.ok())
        Fail(valid.error().message, ExitCode::kBadInput);
      if (!kernels::BackendAvailable(options.backend)) {
        Fail("backend " + flags->backend +
                 " is not available here (not compiled in, or no "
                 "device)",
             ExitCode::kBadInput);
      }
      const size_t total = options.Points().size();
      size_t done = 0;
      if (!flags->json) std::cout << kernels::FormatTableHeader() << "\n" << std::flush;
      auto results = kernels::RunSweep(options, [&](const kernels::BenchResult& r) {
        ++done;
        if (!flags->json) {
          std::cout << kernels::FormatTableRow(r) << "\n" << std::flush;
        } else {
          std::cerr << "\r" << done << "/" << total << " points" << std::flush;
        }
      });
      if (flags->json) std::cerr << "\n";
      if (!results.ok()) Fail(results.error().message, ExitCode::kError);
      if (flags->json)
        std::cout << kernels::FormatJsonArray(*results) << "\n";
      else
        std::cout << kernels::FormatTableFooter(*results) << std::flush;
    });
  }
  {
    struct Flags {
      std::string backend = "cpu", tuning, only;
      int repeats = 10;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = kernels_cmd->add_subcommand(
        "check",
        "Run the correctness case table on a backend against a double-precision "
        "reference; exit 1 if any case fails.\n"
        "Example: ladder kernels check --backend cuda --case d512 (the head-512 cases; "
        "`ladder-kernels cases` lists them all)");
    cmd->add_option("--backend", flags->backend, "cpu | cuda | hip")->capture_default_str();
    cmd->add_option("--tuning", flags->tuning, kTuningHelp);
    cmd->add_option("--case", flags->only,
                    "run only the cases whose name contains this (one case under "
                    "compute-sanitizer, say); none matching is bad input");
    cmd->add_option("--repeats", flags->repeats, "calls per path for the determinism check")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    cmd->callback([flags] {
      auto backend = OrFail(kernels::ParseBackend(flags->backend), "--backend");
      const kernels::TuningConfig tuning = OrFail(kernels::ParseTuning(flags->tuning), "--tuning");
      std::vector<kernels::CaseSpec> cases;
      for (const auto& spec : kernels::Cases())
        if (spec.name.find(flags->only) != std::string::npos) cases.push_back(spec);
      if (cases.empty())
        Fail("--case: no case name contains '" + flags->only + "'", ExitCode::kBadInput);
      if (!kernels::BackendAvailable(backend)) {
        Fail("backend " + flags->backend + " is not available here", ExitCode::kBadInput);
      }
      int failed = 0, passed = 0;
      for (const auto& spec : cases) {
        auto result = kernels::RunCase(backend, spec, flags->repeats, /*cpu_threads=*/2, tuning);
        // A forced kernel has no instantiation for some cases' score columns: not a failure.
        if (!result.ok() && result.error().code == kernels::ErrorCode::kUnsupported &&
            tuning.ToString() != "defaults") {
          std::cout << "SKIP " << spec.name << ": " << result.error().message << "\n";
          continue;
        }
        if (!result.ok()) {
          std::cout << "FAIL " << spec.name << ": " << result.error().message << "\n";
          ++failed;
          continue;
        }
        std::cout << result->Line() << "\n" << std::flush;
        if (result->skipped) continue;
        if (result->passed) {
          ++passed;
        } else {
          ++failed;
        }
      }
      std::cout << passed << " passed, " << failed << " failed\n";
      if (failed) ExitWith(ExitCode::kError);
    });
  }
  {
    struct Flags {
      std::string backend = "cuda", preset = "gemma4-dense-256", depth = "1K", policy = "auto",
                  dtype = "bf16", timing = "graph", tuning;
      int rows = 1, seqs = 1, block_size = 16, warmup = 200, calls = 20, segments = 0;
      bool json = false, spans = false;
    };
    auto flags = std::make_shared<Flags>();
    auto* cmd = kernels_cmd->add_subcommand(
        "timeline",
        "Record when every work group of a few calls starts, waits, gets its first K/V tile, "
        "ends its key loop and exits, and where the call's time goes: launch, dispatch, key "
        "loop, write-out, merge, the gap to the next call. One point (GPU only); the stamps of "
        "different multiprocessors are aligned by their cycle counters.\n"
        "Example (H200): ladder kernels timeline --preset gemma4-dense-256 --depth 1K --rows 1");
    cmd->add_option("--backend", flags->backend, "cuda | hip")->capture_default_str();
    cmd->add_option("--preset", flags->preset, "one shape preset")->capture_default_str();
    cmd->add_option("--depth", flags->depth, "KV length, e.g. 1K")->capture_default_str();
    cmd->add_option("--rows", flags->rows, "query rows per sequence")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--seqs", flags->seqs, "sequences per call")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--policy", flags->policy, "2d, 3d, legacy, spec-aware, auto")
        ->capture_default_str();
    cmd->add_option("--dtype", flags->dtype, "f16 | bf16")->capture_default_str();
    cmd->add_option("--block-size", flags->block_size, "KV page size in tokens")
        ->capture_default_str();
    cmd->add_option("--timing", flags->timing,
                    "graph: the calls captured in one CUDA/HIP graph, as engines run decode; "
                    "stream: launched back to back")
        ->capture_default_str()
        ->check(CLI::IsMember({"graph", "stream"}));
    cmd->add_option("--calls", flags->calls, "calls recorded")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    cmd->add_option("--warmup", flags->warmup, "plain calls first")->capture_default_str();
    cmd->add_option("--segments", flags->segments, "force the 3D path's segment count")
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--tuning", flags->tuning, kTuningHelp);
    cmd->add_flag("--json", flags->json, "print JSON: every call's phases and the typical call");
    cmd->add_flag("--spans", flags->spans,
                  "with --json: every work group's marks too (µs on the common axis)");
    cmd->callback([flags] {
      const kernels::Backend backend = OrFail(kernels::ParseBackend(flags->backend), "--backend");
      if (backend == kernels::Backend::kCpu)
        Fail("--backend: a work-group timeline needs a GPU backend (cuda or hip)",
             ExitCode::kBadInput);
      kernels::BenchPoint point =
          OrFail(kernels::BenchPoint::FromPreset(flags->preset, backend), "--preset");
      const std::vector<int> depth = ParseSizesOrFail(flags->depth, "--depth");
      if (depth.size() != 1) Fail("--depth: one KV length", ExitCode::kBadInput);
      point.depth = depth.front();
      point.query_rows = flags->rows;
      point.num_seqs = flags->seqs;
      point.block_size = flags->block_size;
      point.policy = OrFail(kernels::ParsePolicy(flags->policy), "--policy");
      point.dtype = OrFail(kernels::ParseDType(flags->dtype), "--dtype");
      point.tuning = OrFail(kernels::ParseTuning(flags->tuning), "--tuning");
      point.config.force_segments = flags->segments;
      point.warmup = flags->warmup;
      point.timing = flags->timing == "graph" ? kernels::Timing::kGraph : kernels::Timing::kStream;
      if (auto valid = point.Validate(); !valid.ok())
        Fail(valid.error().message, ExitCode::kBadInput);
      if (!kernels::BackendAvailable(backend))
        Fail("backend " + flags->backend + " is not available here (not compiled in, or no device)",
             ExitCode::kBadInput);
      auto r = kernels::RunTimeline(point, flags->calls);
      if (!r.ok()) Fail(r.error().message, ExitCode::kError);
      if (flags->json)
        std::cout << kernels::FormatTimelineJson(*r, flags->spans) << "\n";
      else
        std::cout << kernels::FormatTimeline(*r) << std::flush;
    });
  }
}

}  // namespace ladder::cli
