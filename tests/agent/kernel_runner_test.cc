// The built-in kernel runner on the CPU backend, through its factory, against a sink of the
// test's own: the order it visits cells in, the slots it fills, cancellation and bad cells.
#include "kernel_runner.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "ladder/runner/schema.h"

namespace ladder::agent {
namespace {

// Keeps everything recorded; reports cancellation once `cancel_after_cells` cells have started.
class RecordingSink final : public runner::MeasurementSink {
 public:
  absl::Status Record(const runner::Measurement& m) override {
    // time_us is the first metric of a cell: its arrival marks a cell visit.
    if (m.metric == "time_us") visits.push_back(m.cell_id);
    measurements.push_back(m);
    return absl::OkStatus();
  }
  absl::Status RecordEvidence(const runner::Evidence& e) override {
    evidence.push_back(e);
    return absl::OkStatus();
  }
  bool Cancelled() const override {
    return cancel_after_cells >= 0 && static_cast<int>(visits.size()) >= cancel_after_cells;
  }

  int cancel_after_cells = -1;
  std::vector<int64_t> visits;
  std::vector<runner::Measurement> measurements;
  std::vector<runner::Evidence> evidence;
};

// Small enough that a unit of a few cells runs in milliseconds on the CPU backend.
runner::CellWork Cell(int64_t cell_id, int depth, const std::string& path) {
  return runner::CellWork{cell_id,
                          "depth=" + std::to_string(depth) + ",path=" + path,
                          {{"backend", "cpu"},
                           {"preset", "tiny"},
                           {"dtype", "fp32"},
                           {"depth", depth},
                           {"path", path},
                           {"repeats", 2},
                           {"warmup", 0}}};
}

runner::UnitWork Unit(std::vector<runner::CellWork> cells, int processes, int rounds,
                      uint64_t seed) {
  runner::UnitWork unit;
  unit.attempt_id = 11;
  unit.unit_id = 5;
  unit.run_id = 1;
  unit.runner = "kernel";
  unit.cells = std::move(cells);
  unit.processes = processes;
  unit.rounds = rounds;
  unit.seed = seed;
  return unit;
}

std::vector<runner::CellWork> FourCells() {
  return {Cell(101, 64, "2d"), Cell(102, 64, "3d"), Cell(103, 128, "2d"), Cell(104, 128, "3d")};
}

TEST(KernelRunner, VisitsCellsInTheSeededInterleavedOrder) {
  const runner::UnitWork unit = Unit(FourCells(), /*processes=*/2, /*rounds=*/3, /*seed=*/20260);
  std::vector<int64_t> expected;
  bool some_round_is_shuffled = false;
  for (int p = 0; p < unit.processes; ++p) {
    for (int r = 0; r < unit.rounds; ++r) {
      const std::vector<int> order = runner::InterleavedOrder(4, unit.seed, p, r);
      some_round_is_shuffled |= order != std::vector<int>{0, 1, 2, 3};
      for (int i : order) expected.push_back(unit.cells[static_cast<size_t>(i)].cell_id);
    }
  }
  // Otherwise a runner visiting cells in listed order would pass too.
  ASSERT_TRUE(some_round_is_shuffled);

  auto kernel = MakeKernelRunner();
  EXPECT_EQ(kernel->name(), "kernel");
  RecordingSink sink;
  ASSERT_TRUE(kernel->Run(unit, sink).ok());
  EXPECT_EQ(sink.visits, expected);
}

TEST(KernelRunner, FillsEveryRequiredSlotOfTheDesignExactlyOnce) {
  const runner::UnitWork unit = Unit(FourCells(), /*processes=*/2, /*rounds=*/2, /*seed=*/7);
  auto kernel = MakeKernelRunner();
  RecordingSink sink;
  ASSERT_TRUE(kernel->Run(unit, sink).ok());

  const runner::RunnerSchema* schema = runner::BuiltinMetricSchemas().Find("kernel");
  ASSERT_NE(schema, nullptr);
  std::map<std::tuple<int64_t, int, int, std::string>, int> filled;
  for (const auto& m : sink.measurements) {
    const runner::MetricSpec* spec = schema->FindMetric(m.metric);
    ASSERT_NE(spec, nullptr) << "undeclared metric " << m.metric;
    EXPECT_EQ(m.unit, spec->unit) << m.metric;
    EXPECT_GE(m.process, 0);
    EXPECT_LT(m.process, unit.processes);
    EXPECT_GE(m.round, 0);
    EXPECT_LT(m.round, unit.rounds);
    ++filled[{m.cell_id, m.process, m.round, m.metric}];
  }
  int required = 0;
  for (const auto& cell : unit.cells) {
    for (int p = 0; p < unit.processes; ++p) {
      for (int r = 0; r < unit.rounds; ++r) {
        for (const auto& spec : schema->metrics) {
          if (!spec.required) continue;
          ++required;
          EXPECT_EQ((filled[{cell.cell_id, p, r, spec.name}]), 1)
              << "cell " << cell.key << " process " << p << " round " << r << " " << spec.name;
        }
      }
    }
  }
  EXPECT_EQ(required, 4 * 2 * 2 * schema->required_metric_count());
  for (const auto& [slot, count] : filled) EXPECT_EQ(count, 1) << std::get<3>(slot);
  // Per cell and process: one kernel_path evidence naming the path the cell forced, and one
  // kernel_process with the steady-clock cost of each round.
  ASSERT_EQ(sink.evidence.size(), 4u * 2u * 2u);
  std::map<std::pair<int64_t, int>, int> costs_seen;
  for (const auto& e : sink.evidence) {
    if (e.kind == "kernel_process") {
      ++costs_seen[{e.cell_id, e.process}];
      ASSERT_EQ(e.value.at("measure_us").size(), static_cast<size_t>(unit.rounds));
      for (const auto& us : e.value.at("measure_us")) EXPECT_GT(us.get<double>(), 0.0);
      EXPECT_GE(e.value.at("start_us").get<double>(), 0.0);
      continue;
    }
    EXPECT_EQ(e.kind, "kernel_path");
    const auto cell = std::find_if(unit.cells.begin(), unit.cells.end(),
                                   [&](const auto& c) { return c.cell_id == e.cell_id; });
    ASSERT_NE(cell, unit.cells.end());
    EXPECT_EQ(e.value.at("policy"), cell->params.at("path")) << cell->key;
    // A forced path is the path taken ("2D" for `path: 2d`).
    EXPECT_EQ(absl::AsciiStrToLower(e.value.at("path").get<std::string>()),
              cell->params.at("path").get<std::string>())
        << cell->key;
  }
  EXPECT_EQ(costs_seen.size(), 4u * 2u);
  for (const auto& [slot, count] : costs_seen) EXPECT_EQ(count, 1);
}

TEST(KernelRunner, StopsAtTheNextCellOnceCancelled) {
  const runner::UnitWork unit = Unit(FourCells(), /*processes=*/1, /*rounds=*/3, /*seed=*/3);
  auto kernel = MakeKernelRunner();
  RecordingSink sink;
  sink.cancel_after_cells = 5;  // mid-way through the second round
  const absl::Status status = kernel->Run(unit, sink);
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_EQ(sink.visits.size(), 5u) << "no cell starts after cancellation";
  for (const auto& m : sink.measurements) EXPECT_LE(m.round, 1);
}

TEST(KernelRunner, AnUnknownParameterFailsTheUnitBeforeMeasuringAnything) {
  std::vector<runner::CellWork> cells = FourCells();
  cells[2].params["depht"] = 256;  // a typo must not silently measure the default depth
  auto kernel = MakeKernelRunner();
  RecordingSink sink;
  const absl::Status status = kernel->Run(Unit(cells, 1, 1, 1), sink);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(cells[2].key), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("depht"), absl::string_view::npos) << status;
  EXPECT_TRUE(sink.measurements.empty());
  EXPECT_TRUE(sink.evidence.empty());
}

TEST(KernelRunner, AValueOfTheWrongTypeIsRefusedNamingTheParameter) {
  for (const auto& [param, value] :
       std::vector<std::pair<std::string, nlohmann::json>>{{"depth", "4K"},
                                                           {"path", "4d"},
                                                           {"dtype", "int3"},
                                                           {"flush_l2", 1},
                                                           {"segments", -2},
                                                           {"segments", "many"}}) {
    std::vector<runner::CellWork> cells = {Cell(1, 64, "2d")};
    cells[0].params[param] = value;
    auto kernel = MakeKernelRunner();
    RecordingSink sink;
    const absl::Status status = kernel->Run(Unit(cells, 1, 1, 1), sink);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << param << ": " << status;
    EXPECT_NE(status.message().find(param), absl::string_view::npos) << status;
    EXPECT_TRUE(sink.measurements.empty()) << param;
    // The same check `ladder validate` and the coordinator run before a unit is leased.
    EXPECT_FALSE(CheckKernelParams(cells[0].params).ok()) << param;
  }
  EXPECT_TRUE(CheckKernelParams(Cell(1, 64, "2d").params).ok());
}

// `segments` forces the 3D split (an A/B of the policy's choice against another): the cell's
// recorded segment count is the forced one, and 0 leaves the policy's.
TEST(KernelRunner, ASegmentsParameterForcesTheSplitThatRuns) {
  std::vector<runner::CellWork> cells = {Cell(1, 128, "3d"), Cell(2, 128, "3d")};
  cells[0].params["segments"] = 3;
  cells[1].params["segments"] = 0;
  auto kernel = MakeKernelRunner();
  RecordingSink sink;
  ASSERT_TRUE(kernel->Run(Unit(cells, 1, 1, 1), sink).ok());
  std::map<int64_t, double> segments;
  for (const auto& m : sink.measurements)
    if (m.metric == "segments") segments[m.cell_id] = m.value;
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[1], 3.0);
  EXPECT_NE(segments[2], 3.0);
  EXPECT_GE(segments[2], 1.0);
}

}  // namespace
}  // namespace ladder::agent
