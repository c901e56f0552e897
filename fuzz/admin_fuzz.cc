// Fuzzes the admin API's request handling in-process: what AdminService Validate, Submit and
// Query do with a request, over a real Store in a temp folder.
//
// Input: `YAML [\0 MAX_CELLS \n BY,BY,... \n METRIC]`. The YAML goes to Scheduler::Validate
// with MAX_CELLS (any integer, as a client could send); when it is valid and small it is
// submitted, and db::QueryRun then runs on the new run with the fuzzed group-by axes and metric
// (strings a client chooses freely). Properties: no crash or sanitizer report; Validate and
// Submit agree; errors are statuses, never exceptions.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_split.h"
#include "ladder/coordinator/scheduler.h"
#include "ladder/db/query.h"
#include "ladder/db/sqlite.h"
#include "ladder/db/store.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

struct World {
  std::string dir;
  std::unique_ptr<ladder::db::Store> store;
  std::unique_ptr<ladder::db::Database> reader;
  std::unique_ptr<ladder::coordinator::Scheduler> scheduler;
  int submitted = 0;

  World() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "ladder-fuzz-admin-XXXXXX").string();
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
  void Open() {
    scheduler.reset();
    reader.reset();
    store.reset();
    const std::string path = dir + "/results.db";
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
    auto s = ladder::db::Store::Open(path);
    Check(s.ok());
    store = std::move(*s);
    auto r = ladder::db::Database::Open(path, ladder::db::OpenMode::kReadWrite);
    Check(r.ok());
    reader = std::move(*r);
    ladder::coordinator::SchedulerOptions options;
    options.max_cells = 512;
    auto sched = ladder::coordinator::Scheduler::Create(
        store.get(), &ladder::coordinator::SystemClock(), options);
    Check(sched.ok());
    scheduler = std::move(*sched);
    submitted = 0;
  }
};

World& TheWorld() {
  static World* world = [] {
    spdlog::set_level(spdlog::level::off);
    return new World();
  }();
  return *world;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return -1;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string yaml = input.substr(0, nul);
  int64_t max_cells = 0;
  std::vector<std::string> by;
  std::string metric;
  if (nul != std::string::npos) {
    std::vector<std::string> lines = absl::StrSplit(input.substr(nul + 1), '\n');
    if (!lines.empty()) max_cells = std::strtoll(lines[0].c_str(), nullptr, 10);
    if (lines.size() > 1 && !lines[1].empty()) by = absl::StrSplit(lines[1], ',');
    if (lines.size() > 2) metric = lines[2];
  }

  World& world = TheWorld();
  auto validated = world.scheduler->Validate(yaml, "fuzz.yaml", max_cells);
  if (!validated.ok()) {
    Check(!validated.status().message().empty());
    return 0;
  }
  if (validated->cells > 64) return 0;  // keep the database small and executions fast
  if (world.submitted >= 2000) world.Open();
  auto submitted = world.scheduler->Submit(yaml, "fuzz.yaml", max_cells);
  Check(submitted.ok());
  Check(submitted->cells == validated->cells && submitted->units == validated->units);
  world.submitted++;

  ladder::db::QueryOptions query;
  query.run_id = submitted->run_id;
  query.by = by;
  query.metric = metric;
  auto result = ladder::db::QueryRun(*world.reader, query);
  if (result.ok()) (void)ladder::db::ToJson(*result).dump();
  // Leave the run cancelled so the scheduler's memory does not grow with every input.
  Check(world.scheduler->Cancel(submitted->run_id).ok());
  return 0;
}
