// The runner interface: what an agent calls to execute one leased unit.
//
// A runner receives a UnitWork (the cells of one unit, with the replication design) and reports
// every number it measures through a MeasurementSink. The sink writes each measurement to the
// agent's spool before Record returns, so a measurement is never lost once recorded.
//
// Contract for runners:
//   - Run all `processes` x `rounds`; within each round visit the unit's cells in the order
//     given by InterleavedOrder(cells.size(), seed, process, round), so paired arms are
//     interleaved in a seeded random order.
//   - Check sink.Cancelled() between measurements and return absl::CancelledError promptly.
//   - Return a non-ok status (with a reason a user can act on) when the unit cannot complete;
//     the attempt then fails and the coordinator's retry policy applies.
//   - Never execute a string received from the coordinator: parameters are validated values.
// Thread safety: Run is called from one thread at a time per runner instance.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace ladder::runner {

struct CellWork {
  int64_t cell_id = 0;
  std::string key;        // canonical "axis=value,..." key
  nlohmann::json params;  // fixed + axes parameters, validated by the matrix parser
};

struct UnitWork {
  int64_t attempt_id = 0;
  int64_t unit_id = 0;
  int64_t run_id = 0;
  std::string runner;  // "kernel", "engine" or "command"
  // runner "command": matrices::RunnerConfigToJson's text (the program and its metrics); else "".
  std::string runner_config;
  std::vector<CellWork> cells;
  int processes = 1;
  int rounds = 1;
  uint64_t seed = 0;
};

struct Measurement {
  int64_t cell_id = 0;
  int process = 0;     // engine process index within this session (0-based)
  int round = 0;       // round index within the process (0-based)
  std::string metric;  // e.g. "time_us", "decode_tok_s"
  double value = 0;
  std::string unit;  // e.g. "us", "B/s", "tok/s", "1"
};

// Non-numeric facts about a cell: the path a kernel took, the backend an engine logged, probe
// counts, the tail of a crashed engine's log. `value` is any JSON.
struct Evidence {
  int64_t cell_id = 0;
  int process = 0;
  std::string kind;  // e.g. "kernel_path", "engine_backend", "probe_counts", "log_tail"
  nlohmann::json value;
};

class MeasurementSink {
 public:
  virtual ~MeasurementSink() = default;
  // Durably records one measurement (spooled before returning).
  virtual absl::Status Record(const Measurement& measurement) = 0;
  virtual absl::Status RecordEvidence(const Evidence& evidence) = 0;
  // True once the coordinator cancelled the run or the agent is shutting down.
  virtual bool Cancelled() const = 0;
};

class Runner {
 public:
  virtual ~Runner() = default;
  virtual std::string_view name() const = 0;
  virtual absl::Status Run(const UnitWork& unit, MeasurementSink& sink) = 0;
};

// The visiting order of `cell_count` cells in one round: a permutation of 0..cell_count-1,
// deterministic in (seed, process, round).
std::vector<int> InterleavedOrder(int cell_count, uint64_t seed, int process, int round);

}  // namespace ladder::runner
