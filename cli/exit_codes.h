// The `ladder` binary's exit statuses, one per outcome a script may branch on (README, "Exit
// codes"). Values are part of the CLI's contract: never renumber one.
#pragma once

namespace ladder::cli {

enum class ExitCode : int {
  kOk = 0,
  kError = 1,          // anything else: unreachable coordinator, I/O, an internal error
  kBadInput = 2,       // a matrix, flag or argument the command refuses (nothing was changed)
  kRefused = 3,        // the coordinator refused this agent (token, permission)
  kCellsFailed = 4,    // the run finished, and some cells failed
  kVerdict = 5,        // `ladder compare --fail-on` found a cell with the named verdict
  kInterrupted = 130,  // SIGINT/SIGTERM (128 + SIGINT, as shells report it)
};

}  // namespace ladder::cli
