// The `command` runner: runs a program the agent's operator registered, once per cell and process
// (or per round), with an argv rendered from the cell, and files what it prints into the design's
// (cell, process, round) slots (docs/command-runner.md).
//
// Who decides what: the agent's operator decides which programs run (`--bench NAME=PATH`; a
// matrix can only name one); the matrix's author (an admin) decides their arguments and
// environment, rendered into an argv vector with no shell in between; the agent keeps the
// variables that pin a program to its GPUs (runner/environment.h).
//
// Each start runs in its own process group (killed with the group on timeout, cancel or agent
// shutdown; the child dies with the agent), with its stdout captured to a file and parsed after
// it exits, its stderr scanned for probe patterns and kept as a tail. A start that fails (exits
// non-zero, times out, prints a metric the matrix does not declare, a value out of range, too
// many or too few values) fails the unit with the reason and the output's tail as evidence.
//
// Thread safety: Run is called from one thread at a time, as runner::Runner requires.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "ladder/runner/runner.h"

namespace ladder::command {

// The programs an agent may run, by name. Filled from `--bench NAME=PATH` flags and bench files.
class BenchRegistry {
 public:
  // "NAME=PATH": NAME per matrices::IsBenchName, PATH a regular executable file (resolved to an
  // absolute path now, so a later change of directory or PATH cannot swap it). InvalidArgument
  // with the reason; AlreadyExists when NAME is registered with another path.
  absl::Status Add(std::string_view name_equals_path);
  // A file of NAME=PATH lines; blank lines and lines starting with '#' are skipped. Errors name
  // the file and line.
  absl::Status AddFile(const std::string& path);

  const std::map<std::string, std::string>& programs() const { return programs_; }

 private:
  std::map<std::string, std::string> programs_;  // name -> absolute path
};

struct CommandRunnerOptions {
  std::map<std::string, std::string> programs;  // BenchRegistry::programs()
  // Per-start scratch folders (the {out} file, the captured stdout) go under this directory,
  // removed after each start. Empty: $TMPDIR, else /tmp.
  std::string scratch_dir;
  std::chrono::milliseconds kill_grace{5000};  // SIGTERM -> SIGKILL of a start's group
  // Lines of a failed start's output kept as `log_tail` evidence.
  size_t tail_lines = 40;
  // When set, held for the whole of each start: agents that share one machine (`ladder local`)
  // take turns, as engines do (EngineRunnerOptions::device_turn), so one program's timing is not
  // another's load. Not owned.
  std::mutex* device_turn = nullptr;
};

std::unique_ptr<runner::Runner> MakeCommandRunner(CommandRunnerOptions options);

}  // namespace ladder::command
