// Command-line flags of `ladder engine synthetic`, for the CLI owner and test mains.
//
//   auto* sub = app.add_subcommand("synthetic", "...");
//   ladder::engines::SyntheticEngineOptions options;
//   ladder::engines::AddSyntheticEngineFlags(*sub, options);
//   sub->callback([&] { status = ladder::engines::RunSyntheticEngine(options); });
#pragma once

#include <CLI/CLI.hpp>

#include "ladder/engines/synthetic_engine.h"

namespace ladder::engines {

// Adds --preset, --host, --port, --policy, --spec-k, --acceptance, --seed, --attention-backend,
// --force-backend, --log-paths, --threads, --crash-after-requests, --oom-after-requests and
// --malformed, bound to the fields of `options` (which must outlive parsing).
void AddSyntheticEngineFlags(CLI::App& app, SyntheticEngineOptions& options);

}  // namespace ladder::engines
