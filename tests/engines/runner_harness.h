// What the EngineRunner tests share: a sink that keeps what the runner reports, and cells and
// units run against the synthetic engine as a child process (synthetic_engine_main).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ladder/engines/engine_runner.h"

namespace ladder::engines::harness {

using runner::CellWork;
using runner::Evidence;
using runner::Measurement;
using runner::UnitWork;

class FakeSink final : public runner::MeasurementSink {
 public:
  absl::Status Record(const Measurement& m) override {
    std::lock_guard<std::mutex> lock(mu_);
    measurements.push_back(m);
    if (cancel_after_records > 0 && static_cast<int>(measurements.size()) >= cancel_after_records) {
      cancelled = true;
    }
    return absl::OkStatus();
  }
  absl::Status RecordEvidence(const Evidence& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    evidence.push_back(e);
    return absl::OkStatus();
  }
  bool Cancelled() const override { return cancelled; }

  std::vector<double> Values(int64_t cell, std::string_view metric) const {
    std::vector<double> out;
    for (const auto& m : measurements) {
      if (m.cell_id == cell && m.metric == metric) out.push_back(m.value);
    }
    return out;
  }
  const Evidence* Find(int64_t cell, std::string_view kind) const {
    for (const auto& e : evidence) {
      if (e.cell_id == cell && e.kind == kind) return &e;
    }
    return nullptr;
  }

  std::mutex mu_;
  std::vector<Measurement> measurements;
  std::vector<Evidence> evidence;
  std::atomic<bool> cancelled{false};
  int cancel_after_records = 0;
};

inline EngineRunnerOptions Options() {
  EngineRunnerOptions o;
  o.recipe_context.ladder_binary = LADDER_SYNTHETIC_ENGINE_MAIN;
  o.health_poll_interval = std::chrono::milliseconds(50);
  o.process.kill_grace = std::chrono::milliseconds(2000);
  return o;
}

inline CellWork Cell(int64_t id, nlohmann::json params) {
  CellWork c;
  c.cell_id = id;
  std::string key;
  for (const auto& [k, v] : params.items()) {
    if (k == "engine") continue;
    key += (key.empty() ? "" : ",") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  }
  c.key = key;
  if (!params.contains("engine")) params["engine"] = "synthetic";
  c.params = std::move(params);
  return c;
}

inline UnitWork Unit(std::vector<CellWork> cells, int processes = 1, int rounds = 1) {
  UnitWork u;
  u.attempt_id = 1;
  u.unit_id = 1;
  u.runner = "engine";
  u.cells = std::move(cells);
  u.processes = processes;
  u.rounds = rounds;
  u.seed = 42;
  return u;
}

}  // namespace ladder::engines::harness
