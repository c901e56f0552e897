// Subcommand registration. Each Add* function adds one subcommand (its options struct, its
// --help text and its callback) to the app; callbacks throw CLI::RuntimeError(code) to set the
// exit status, so main() stays the only place that exits.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "exit_codes.h"

namespace ladder::cli {

void AddServerCommands(CLI::App& app);    // coordinator, agent, local
void AddClientCommands(CLI::App& app);    // validate, submit, status, watch, cancel, sessions,
                                          // query, export
void AddKernelsCommand(CLI::App& app);    // kernels bench | check
void AddEngineCommand(CLI::App& app);     // engine synthetic
void AddAnalysisCommands(CLI::App& app);  // report, verify, compare
void AddTokenCommands(CLI::App& app);     // token create | list | revoke

// Prints "error: <message>" to stderr and leaves with `exit_code` (ExitWith).
[[noreturn]] void Fail(const absl::Status& status, ExitCode exit_code = ExitCode::kError);
[[noreturn]] void Fail(const std::string& message, ExitCode exit_code = ExitCode::kError);
// Throws CLI::RuntimeError(exit_code), which main() turns into the process's exit status.
[[noreturn]] void ExitWith(ExitCode exit_code);

// The coordinator address: the flag when given, else $LADDER_COORDINATOR, else 127.0.0.1:7400.
std::string DefaultCoordinator();

// Renders the JSON of db::ToJson(QueryResult) as a terminal table.
std::string RenderQueryTable(const nlohmann::json& result);
// The same rows as CSV, with the interval columns, values with round-trip precision
// (query_render.cc); and db::ExportRunJson's measurements as CSV, the same way.
std::string RenderQueryCsv(const nlohmann::json& result);
std::string RenderExportCsv(const nlohmann::json& exported);

// The demo matrix compiled into the binary (matrices/examples/demo-cpu.yaml).
const std::string& EmbeddedDemoMatrix();

// Blocks SIGINT and SIGTERM in every thread created after construction, and calls `on_signal`
// (on a watcher thread) with the signal number when one arrives.
class SignalWatcher {
 public:
  explicit SignalWatcher(std::function<void(int)> on_signal);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace ladder::cli
