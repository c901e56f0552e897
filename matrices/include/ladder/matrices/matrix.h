// The matrix model: a benchmark study declared as axes whose cross product is the set of cells.
//
// A matrix is parsed from YAML (ParseMatrix), checked (the parser validates everything it can
// know without a fleet), and expanded (Expand) into cells and units:
//   - a cell is one point of the cross product plus the `fixed` parameters;
//   - a unit is what one lease hands one agent: the cells that must run in one session (those
//     that differ only in `pair` or `together` axes), for one replicate index. A cell with
//     `replicates.sessions = S` appears in S units, each of which the scheduler sends to a
//     different session.
// Expansion is deterministic: the same YAML always yields the same cells, keys, units and seeds.
//
// Thread safety: all types here are plain values; functions are pure and reentrant.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace ladder::matrices {

// A parameter value: a JSON scalar (integer, number, string or bool).
using Value = nlohmann::json;

struct Axis {
  std::string name;
  std::vector<Value> values;  // non-empty, no duplicates
};

struct Replicates {
  int sessions = 1;   // distinct agent sessions (ideally distinct hosts) per cell
  int processes = 1;  // engine processes per session (kernel runner: independent repeats)
  int rounds = 1;     // rounds per process; paired arms are interleaved within each round
};

// What an agent must have to take this matrix's units. Empty / zero fields match anything.
struct Requirements {
  std::string gpu_vendor;             // "nvidia", "amd", or "" (any, including CPU-only)
  std::string gpu_name_glob;          // fnmatch-style glob on the GPU name, e.g. "*H100*"
  int gpu_count = 0;                  // minimum number of GPUs
  int64_t min_gpu_memory_mib = 0;     // minimum memory of each counted GPU
  std::vector<std::string> features;  // runner features the agent must advertise, e.g. "cuda"
};

// The A/A control option: adds an arm to `axis` that is a copy of `of`, named `as`.
struct AAControl {
  std::string axis;
  Value of;
  std::string as;
};

// Adaptive replication: after the planned sessions of a cell group, the coordinator adds paired
// sessions while any of the group's paired ratios has a 95 % interval wider than asked.
struct Precision {
  double ratio_half_width = 0;  // relative, e.g. 0.02 for "2%"
  int max_sessions = 0;         // budget per cell group, >= replicates.sessions
};

// Adaptive search for a crossover (`locate`): after the planned ladder of a line (cells that
// differ only in `axis` and the pair axis), the coordinator brackets the first depth where the
// ratio of the second arm to the first crosses 1 and probes the log2-midpoint until the bracket
// is narrower than `resolution_octaves`.
// The fewest paired sessions at which a probe can be decided: the decision reads the first
// n − 4 sessions and needs two of them (stats::kMinDecisionSessions + stats::kCommittedSessions;
// coordinator/src/locate.cc asserts the sum). `locate.max_sessions` is at least this.
inline constexpr int kLocateMinSessions = 6;

struct Locate {
  std::string axis;                  // a numeric axis, neither paired nor the A/A axis
  std::string pair_axis;             // the matrix's one pair axis, with exactly two arms
  double resolution_octaves = 0.25;  // stop when the bracket spans fewer octaves
  int64_t min_step = 1;              // probes are multiples of this (the axis's unit)
  int max_sessions = 0;  // paired sessions per probe, at most (>= replicates.sessions and 6)
};

// `runner: command`: one metric the program reports, as the matrix declares it (`metrics:`). The
// store refuses any other metric and any value outside `range`; `report` and `compare` read
// `better` from here instead of guessing it from the unit.
struct MetricDeclaration {
  enum class Better { kLower, kHigher };
  enum class Range { kPositive, kNonNegative, kShare, kAtLeastOne };
  std::string name;  // [a-z][a-z0-9_]{0,63}
  std::string unit;  // 1-16 printable ASCII characters, e.g. "us", "tok/s", "1"
  Better better = Better::kLower;
  Range range = Range::kPositive;
  bool required = true;  // every (cell, process, round) must hold it for an attempt to be done
};

// `runner: command`: which registered program a cell runs and how its output is read
// (docs/command-runner.md). Executables never come from the matrix: `bench` names a program the
// agent's operator registered (`ladder agent --bench NAME=PATH`); the matrix gives its arguments.
struct CommandSpec {
  // How program starts map onto the design's processes and rounds.
  enum class Start {
    kPerProcess,  // one start per cell and process; the program reports every round
    kPerRound,    // one start per cell, process and round; the program reports one value each
  };
  // A name the agent registered (IsBenchName), or a template of the cell's parameters that
  // renders to one per cell — `bench: "{build}"` with an axis `build: [base, new]` runs the agent's
  // --bench base=… and --bench new=… as two arms (BenchNames).
  std::string bench;
  // argv after the program, each item rendered per start: "{name}" is the cell's parameter
  // `name` (axes and fixed) or a built-in (process, round, rounds, seed, out); "{{" and "}}" are
  // literal braces. No shell is involved.
  std::vector<std::string> args;
  std::string format = "jsonl";  // jsonl | gbench | nvbench | llama-bench
  Start start = Start::kPerProcess;
  double timeout_s = 600;                        // per start, (0, 86400]
  std::map<std::string, std::string> extra_env;  // values rendered like args
  std::vector<std::string> probe_patterns;       // literal substrings counted in the output
};

// [a-z0-9_.-]{1,57}: a registered program's name. Agents advertise each as the feature
// "bench:NAME" (features are at most 64 characters of [a-z0-9_:.-]).
bool IsBenchName(std::string_view name);

struct Matrix;
// Every program name `matrix.command->bench` renders to over the matrix's cells, sorted and
// distinct (one name when it is not a template). InvalidArgument when a placeholder is not an
// axis or a fixed parameter (built-ins such as {process} vary within a cell), a rendered name is
// not IsBenchName, or there are more than 48 (an agent registers at most 48 programs). An empty
// vector for a matrix without `command`.
absl::StatusOr<std::vector<std::string>> BenchNames(const Matrix& matrix);

// The built-in placeholders of CommandSpec::args and extra_env values.
inline constexpr std::string_view kCommandBuiltins[] = {"process", "round", "rounds", "seed",
                                                        "out"};

// The names of the placeholders in one template, in order ("{depth}" -> "depth"), or
// InvalidArgument for an unclosed "{", a stray "}" or an empty or invalid name.
absl::StatusOr<std::vector<std::string>> TemplatePlaceholders(std::string_view text);
// Renders a template: each "{name}" replaced by `lookup(name)`; NotFound naming the first name
// `lookup` cannot resolve (it returns nullopt).
absl::StatusOr<std::string> RenderTemplate(
    std::string_view text,
    const std::function<std::optional<std::string>(std::string_view name)>& lookup);

// Where a field is written in the matrix document, 1-based.
struct SourceLocation {
  int line = 0;
  int column = 0;
};

struct Matrix {
  std::string name;  // [A-Za-z0-9_.-]+
  std::string description;
  std::string runner;      // "kernel", "engine" or "command"
  std::vector<Axis> axes;  // in declaration order
  std::map<std::string, Value> fixed;
  std::vector<std::map<std::string, Value>> exclude;  // partial cells to drop
  std::vector<std::string> pair;      // axes whose values are compared within one session
  std::vector<std::string> together;  // further axes whose values share one unit (e.g. depth)
  Replicates replicates;
  Requirements requirements;  // the YAML key is `requires`
  std::string metric;         // the primary metric for tables; runner default if empty
  uint64_t seed = 0;          // drives interleaving order; default derived from the name
  int max_attempts = 3;       // attempts per unit before its cells fail
  std::optional<AAControl> aa_control;
  // Note: `axes` holds the declared values only; Expand inserts the A/A arm (`aa_control->as`)
  // right after `aa_control->of`. Exclusions naming `of` on that axis also drop the A/A arm.
  std::optional<Precision> precision;
  std::optional<Locate> locate;
  // `runner: command` only (required there, refused elsewhere): the program and its metrics.
  std::optional<CommandSpec> command;
  std::vector<MetricDeclaration> metrics;  // in declaration order
  // The document the matrix was parsed from (the `filename` of ParseMatrix) and where its
  // fields are written, by path: "runner", "metric", "fixed.NAME", "axes.NAME",
  // "axes.NAME[i]". Lets later checks (the runners' parameter checks) report file:line:col.
  std::string source_name;
  std::map<std::string, SourceLocation> locations;
};

struct ParseOptions {
  int64_t max_cells = 100000;  // cells after exclusion, before replication
};

// Parses and validates a matrix document. `filename` is used only in error messages.
// Errors are InvalidArgument with a message of the form
//   "m.yaml:4:12: axes.depth[2]: expected a positive integer, got -1".
absl::StatusOr<Matrix> ParseMatrix(std::string_view yaml, std::string_view filename,
                                   const ParseOptions& options = {});

// Reads the file and parses it. NotFound when the file cannot be read.
absl::StatusOr<Matrix> ParseMatrixFile(const std::string& path, const ParseOptions& options = {});

struct Cell {
  int index = 0;          // position in the expansion, 0-based, stable
  std::string key;        // canonical "axis=value,axis=value" over the axes, in axis order
  nlohmann::json axes;    // object: axis name -> value for this cell
  nlohmann::json params;  // object: fixed parameters merged with `axes` (axes win)
};

struct Unit {
  int index = 0;                  // position in the expansion, 0-based, stable
  int replicate = 0;              // 0 .. replicates.sessions-1
  std::string group_key;          // the key of the non-paired, non-together axes
  std::vector<int> cell_indices;  // cells in this unit (by Cell::index), in expansion order
  uint64_t seed = 0;              // seeds this unit's interleaving order
};

struct Expansion {
  std::vector<Cell> cells;
  std::vector<Unit> units;
};

// Expands a validated matrix. Fails (InvalidArgument) only if the cell cap is exceeded.
absl::StatusOr<Expansion> Expand(const Matrix& matrix, const ParseOptions& options = {});

// The canonical cell key of `axes` (axis name -> value): "axis=value,..." over `axis_order`, values
// rendered by ValueToString. Expand produces exactly these keys; the coordinator uses this for
// cells it adds later (crossover probes). An axis missing from `axes` is skipped.
std::string CellKey(const std::vector<std::string>& axis_order, const nlohmann::json& axes);

// One "axis=value" part of a cell key; the value as ValueToString rendered it.
struct CellKeyPart {
  std::string axis;
  std::string value;
};
// The parts of a cell key (or of a unit group key, which has the same form), in key order. The
// one parser of keys: CellKey's values never contain ',' and axis names never contain '='. A part
// without '=' has an empty value.
std::vector<CellKeyPart> ParseCellKey(std::string_view key);
// `key` without the parts of the axes in `drop` (lines, comparisons and probe groups are keys
// with some axes left out), in key order.
std::string CellKeyWithout(std::string_view key, const std::vector<std::string>& drop);

// Renders a value the way cell keys show it: integers plain, strings unquoted.
// Doubles use the shortest text that reads back to the same double, with ".0" appended when
// that text would otherwise look like an integer (1.0 -> "1.0", 0.25 -> "0.25"); bools are
// "true"/"false".
std::string ValueToString(const Value& value);

// `requires` as stored with a run (runs.requires) and read back by the coordinator: the one
// encoding, both ways. FromJson is lenient about missing fields (older databases) and refuses
// fields of the wrong type.
nlohmann::json RequirementsToJson(const Requirements& requirements);
absl::StatusOr<Requirements> RequirementsFromJson(const nlohmann::json& json);

// A run's `locate` as stored with the run (runs.locate) and read back by the coordinator to step
// its lines without the matrix: the design's Locate plus what it needs of the axes.
struct LocateConfig {
  std::string axis;             // the located axis
  std::string pair_axis;        // the compared arms' axis
  std::string arm_a, arm_b;     // its two values, rendered as in cell keys; the ratio is B / A
  std::vector<Value> declared;  // the declared rungs; other values of the axis are probes
  double resolution_octaves = 0.25;
  int64_t min_step = 1;
  int max_sessions = 2;      // units (paired sessions) per probe, at most
  bool integer_axis = true;  // every declared value is an integer: probes are integers too

  // The axis value for a depth, typed like the declared values.
  Value ValueOf(double depth) const;
};
// The one encoding, both ways. ToJson: `{}` for a matrix without `locate`. FromJson: NotFound
// for `{}` (no locate), InvalidArgument when a field is missing or of the wrong type.
nlohmann::json LocateToJson(const Matrix& matrix);
// What a run of a `runner: command` matrix stores (runs.runner_config) and each lease carries to
// the agent (LeaseResponse.runner_config_json): {"command": {...}, "metrics": [...]}, the one
// encoding, both ways. ToJson: `{}` for the built-in runners. FromJson: NotFound for `{}`,
// InvalidArgument for a field missing or of the wrong type (a config no parser produced).
nlohmann::json RunnerConfigToJson(const Matrix& matrix);
struct RunnerConfig {
  CommandSpec command;
  std::vector<MetricDeclaration> metrics;
};
absl::StatusOr<RunnerConfig> RunnerConfigFromJson(const nlohmann::json& json);
std::string_view BetterName(MetricDeclaration::Better better);  // "lower" | "higher"
std::string_view RangeName(MetricDeclaration::Range range);     // "positive", "non_negative", ...
absl::StatusOr<LocateConfig> LocateFromJson(const nlohmann::json& json);

// The seed a matrix gets when its YAML has no `seed`: the 64-bit FNV-1a hash of its name.
uint64_t DefaultSeed(std::string_view name);

// The seed of one unit: splitmix64 mixing of the matrix seed, the unit's group index (groups
// in order of first appearance) and its replicate index. Stable across versions and platforms.
uint64_t UnitSeed(uint64_t matrix_seed, int group_index, int replicate);

}  // namespace ladder::matrices
