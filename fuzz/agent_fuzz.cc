// Fuzzes what the coordinator does with an agent's reports and finishes, in-process: the
// Scheduler's Report and Finish over a real Store holding one run, two leased attempts of two
// sessions and the runners' metric schemas.
//
// Input: a ladder.v1.ReportRequest in protobuf text format (the seeds in fuzz/corpus/agent/ are
// readable). Its attempt and cell ids are folded onto the few that exist (so the fuzzer reaches
// the design checks rather than "unknown attempt"), its session id onto the two sessions.
// Properties, after every input: no crash or sanitizer report; valid_measurements never holds a
// slot twice, a non-finite value, a process or round outside the design, or a cell outside its
// attempt's unit; a done attempt has every required slot filled.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <google/protobuf/text_format.h>
#include <spdlog/spdlog.h>

#include "ladder/coordinator/scheduler.h"
#include "ladder/db/sqlite.h"
#include "ladder/db/store.h"
#include "ladder/v1/agent.pb.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

constexpr const char* kMatrix = R"(
name: agent-fuzz
runner: kernel
axes:
  depth: [64, 128]
  path: [2d, 3d]
pair: [path]
replicates: {sessions: 1, processes: 2, rounds: 2}
)";

const char* const kSessions[] = {"fuzz-session-a", "fuzz-session-b"};

struct World {
  std::string dir;
  std::unique_ptr<ladder::db::Store> store;
  std::unique_ptr<ladder::db::Database> reader;
  std::unique_ptr<ladder::coordinator::Scheduler> scheduler;
  int64_t first_attempt = 0;
  int64_t first_cell = 0;
  int inputs = 0;

  World() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "ladder-fuzz-agent-XXXXXX").string();
    Check(mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
    Open();
  }
  ~World() {
    scheduler.reset();
    reader.reset();
    store.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  // A fresh database: one run, each session holding one of its two units.
  void Open() {
    scheduler.reset();
    reader.reset();
    store.reset();
    const std::string path = dir + "/results.db";
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    auto s = ladder::db::Store::Open(path);
    Check(s.ok());
    store = std::move(*s);
    auto r = ladder::db::Database::Open(path, ladder::db::OpenMode::kReadWrite);
    Check(r.ok());
    reader = std::move(*r);
    auto sched = ladder::coordinator::Scheduler::Create(
        store.get(), &ladder::coordinator::SystemClock(), ladder::coordinator::SchedulerOptions{});
    Check(sched.ok());
    scheduler = std::move(*sched);
    for (const char* id : kSessions) {
      ladder::db::SessionRow row;
      row.id = id;
      row.hostname = row.machine_id = id;
      row.features = {"kernel"};
      Check(scheduler->RegisterSession(row).ok());
    }
    Check(scheduler->Submit(kMatrix, "fuzz.yaml", 0).ok());
    first_attempt = 0;
    for (const char* id : kSessions) {
      auto lease = scheduler->TryLease(id);
      Check(lease.ok() && lease->has_value());
      if (first_attempt == 0) first_attempt = (*lease)->attempt_id;
      if (first_cell == 0) first_cell = (*lease)->cells[0].id;
    }
    inputs = 0;
  }

  int64_t Int(const std::string& sql) {
    auto stmt = reader->Prepare(sql);
    Check(stmt.ok());
    auto row = stmt->Step();
    Check(row.ok() && *row);
    return stmt->Int(0);
  }

  void CheckInvariants() {
    Check(Int("SELECT COUNT(*) FROM (SELECT 1 FROM valid_measurements GROUP BY attempt_id, "
              "cell_id, process, round, metric HAVING COUNT(*) > 1)") == 0);
    Check(Int("SELECT COUNT(*) FROM valid_measurements WHERE process < 0 OR process >= 2 OR "
              "round < 0 OR round >= 2 OR value > 1.7976931348623157e308 OR "
              "value < -1.7976931348623157e308") == 0);
    Check(Int("SELECT COUNT(*) FROM valid_measurements m JOIN attempts a ON a.id = m.attempt_id "
              "WHERE NOT EXISTS (SELECT 1 FROM unit_cells uc WHERE uc.unit_id = a.unit_id AND "
              "uc.cell_id = m.cell_id)") == 0);
    // A done attempt holds 2 cells x 2 processes x 2 rounds x 4 required metrics.
    Check(Int("SELECT COUNT(*) FROM attempts a WHERE a.state = 'done' AND (SELECT COUNT(*) FROM "
              "valid_measurements m WHERE m.attempt_id = a.id AND m.metric IN ('time_us', "
              "'time_us_min', 'bytes_per_s', 'segments')) != 32") == 0);
  }
};

World& TheWorld() {
  static World* world = [] {
    spdlog::set_level(spdlog::level::off);
    return new World();
  }();
  return *world;
}

// Folds a fuzzed id onto [first, first + span) most of the time, leaving some out of range.
int64_t Fold(int64_t id, int64_t first, int64_t span) {
  const uint64_t u = static_cast<uint64_t>(id);
  return u % 8 == 7 ? id : first + static_cast<int64_t>(u % static_cast<uint64_t>(span));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16 * 1024) return -1;
  ladder::v1::ReportRequest request;
  if (!google::protobuf::TextFormat::ParseFromString(
          std::string(reinterpret_cast<const char*>(data), size), &request)) {
    return -1;
  }
  World& world = TheWorld();
  if (++world.inputs > 500) world.Open();
  const std::string session = kSessions[request.session_id().size() % 2];
  ladder::db::ReportIn report;
  report.session_id = session;
  for (const auto& m : request.measurements()) {
    if (m.uuid().empty() || m.uuid().size() > 64) continue;  // the service refuses these
    report.measurements.push_back(
        ladder::db::MeasurementIn{m.uuid(), Fold(m.attempt_id(), world.first_attempt, 3),
                                  Fold(m.cell_id(), world.first_cell, 5), m.process(), m.round(),
                                  m.metric(), m.value(), m.unit(), m.measured_at_ms()});
  }
  for (const auto& e : request.evidence()) {
    if (e.uuid().empty() || e.uuid().size() > 64) continue;
    report.evidence.push_back(
        ladder::db::EvidenceIn{e.uuid(), Fold(e.attempt_id(), world.first_attempt, 3),
                               Fold(e.cell_id(), world.first_cell, 5), e.process(), e.kind(),
                               e.value_json(), e.recorded_at_ms()});
  }
  std::vector<ladder::db::ReportIn> batch;
  batch.push_back(std::move(report));
  for (const auto& outcome : world.scheduler->ReportBatch(std::move(batch))) {
    if (!outcome.ok()) {
      Check(outcome.status().code() == absl::StatusCode::kPermissionDenied ||
            outcome.status().code() == absl::StatusCode::kNotFound);
      Check(outcome.status().message().find("SELECT") == std::string::npos);
    }
  }
  std::vector<ladder::coordinator::FinishIn> finishes;
  for (const auto& f : request.finishes()) {
    finishes.push_back(ladder::coordinator::FinishIn{
        .session_id = session,
        .attempt_id = Fold(f.attempt_id(), world.first_attempt, 3),
        .outcome = f.ok() ? ladder::coordinator::AttemptOutcome::kSucceeded
                          : ladder::coordinator::AttemptOutcome::kFailed,
        .failure_reason = f.failure_reason(),
        .measurement_count = f.measurement_count(),
        .evidence_count = f.evidence_count()});
  }
  for (const auto& result : world.scheduler->FinishBatch(finishes)) {
    if (!result.ok()) Check(!result.status().message().empty());
  }
  world.CheckInvariants();
  return 0;
}
