// Helpers shared by the offline analysis subcommands (report, verify, compare): opening a results
// database read-only, naming a run, writing an output file. Private to cli/.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ladder/db/sqlite.h"

namespace ladder::cli {

// Opens `path` read-only; empty: $LADDER_DB, else ./ladder.db when it exists. Fails (exit 2)
// with a message naming the file when it cannot be read.
std::unique_ptr<db::Database> OpenDatabase(std::string path);

// A run id, or `latest` for the highest run id in `database`. Fails (exit 2) otherwise.
int64_t RunIdIn(db::Database& database, const std::string& text);

// Writes `text` to `path` through a temporary and a rename ("" or "-": stdout).
void WriteOutput(const std::string& path, const std::string& text);

// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> SplitList(const std::string& text);

// `ladder compare A B` (compare_command.cc).
void AddCompareCommand(CLI::App& app);

}  // namespace ladder::cli
