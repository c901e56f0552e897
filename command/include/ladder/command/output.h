// Reading what a benchmark program printed: the result contract's JSON lines and the formats
// people's benchmarks already emit (Google Benchmark JSON, nvbench JSON, llama-bench JSONL).
//
// Each format turns one program start's output (its stdout, or the file it wrote to `{out}`)
// into samples: (metric, value, unit, round). The command runner then keeps the samples whose
// metric the matrix declares, converts time units to the declared one, and files each sample into
// its (cell, process, round) slot (docs/command-runner.md says how rounds map).
//
// Pure functions of their input: no I/O, thread-safe, never throw. Invalid UTF-8 and garbage in
// the output do not stop a parse; they are counted or kept, never echoed into a metric name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace ladder::command {

enum class OutputFormat {
  kJsonLines,        // the result contract: {"metric": "time_us", "value": 812.5, "round": 0}
  kGoogleBenchmark,  // --benchmark_format=json (or --benchmark_out=FILE
                     // --benchmark_out_format=json)
  kNvbench,          // nvbench's --json FILE
  kLlamaBench,       // llama-bench -o jsonl
};

// "jsonl" | "gbench" | "nvbench" | "llama-bench": the names a matrix uses (command.format).
std::string_view FormatName(OutputFormat format);
std::optional<OutputFormat> FormatFromName(std::string_view name);

struct Sample {
  std::string metric;        // as the program or the adapter names it
  double value = 0;          // in `unit`
  std::string unit;          // "" when the output does not say (JSON lines without "unit")
  std::optional<int> round;  // the program's own round index, when it gives one (0-based)
};

// A non-numeric fact from the output, kept as evidence: a JSON-lines {"evidence": {...}} object,
// or what an adapter knows about the run (llama-bench's build, backend, flash_attn; nvbench's
// device and state; Google Benchmark's context).
struct EvidenceItem {
  std::string kind;  // "program_evidence", "bench_context", ...
  nlohmann::json value;
};

struct ParsedOutput {
  std::vector<Sample> samples;  // in output order
  std::vector<EvidenceItem> evidence;
  int64_t ignored_lines = 0;  // lines that were neither samples nor evidence (JSON lines)
};

// Parses one start's output. InvalidArgument, with a reason a user can act on, when the output is
// not in the format at all (e.g. "Google Benchmark JSON: no \"benchmarks\" array") or is
// ambiguous about what was measured (e.g. two different llama-bench tests in one start).
// An output with no samples is not an error here: the runner decides (a required metric missing).
absl::StatusOr<ParsedOutput> ParseOutput(OutputFormat format, std::string_view text);

// Converts `value` from time unit `from` to `to` ("ns", "us", "ms", "s"); nullopt when either is
// not a time unit (then the units must be equal).
std::optional<double> ConvertTime(double value, std::string_view from, std::string_view to);

}  // namespace ladder::command
