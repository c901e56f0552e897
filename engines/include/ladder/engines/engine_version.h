// Which build of an engine is installed: the recipes choose flag spellings by it.
//
// Each engine prints its version its own way (confirmed against the engines' sources and
// reports; docs/engines.md has the table):
//   vllm --version                 "0.15.1"                                  -> "0.15.1"
//   python3 -c 'import sglang ...' "0.5.4.post1"                             -> "0.5.4.post1"
//   llama-server --version         "version: 7100 (c49daff5b)"               -> "b7100"
//                                  "version: 0.1.2-dev (build 10513, ...)"   -> "b10513"
// llama.cpp's flags change by build number, so its version is the build, spelled as its
// release tags are ("b7100").
//
// Thread safety: all functions are reentrant.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "ladder/engines/capabilities.h"
#include "ladder/engines/recipe.h"

namespace ladder::engines {

// The version in `output` (the program's stdout and stderr together). NotFound when the output
// carries none; the message quotes its start.
absl::StatusOr<std::string> ParseEngineVersion(std::string_view engine, std::string_view output);

// The command that prints the installed version of `engine` (one of vllm, sglang, llama.cpp),
// from the executables in `context`; nullopt for engines whose version is not probed.
std::optional<LaunchSpec> VersionCommand(std::string_view engine, const RecipeContext& context);

// Runs VersionCommand and parses its output. Unavailable when the program cannot be started,
// does not exit within `timeout`, or prints no version.
absl::StatusOr<std::string> DetectEngineVersion(std::string_view engine,
                                                const RecipeContext& context,
                                                std::chrono::milliseconds timeout);

// llama.cpp's build number in "b7100" or "7100"; nullopt otherwise.
std::optional<int> LlamaCppBuild(std::string_view version);

// The build number a recipe may rely on: LlamaCppBuild, except 0 and 1. A llama.cpp built
// without its git history (a source tarball, a Docker build that ignores .git) reports
// "version: 0 (unknown)", and a shallow clone (`git clone --depth 1`) counts one commit: neither
// says how old the build is, so both are unknown, never "the oldest build".
std::optional<int> KnownLlamaCppBuild(std::string_view version);

// The command that prints `engine`'s options: `llama-server --help`, `vllm serve --help=all`
// (DetectCapabilities falls back to `vllm serve --help` for a vLLM without "=all"),
// `python3 -m sglang.launch_server --help`; nullopt for other engines.
std::optional<LaunchSpec> HelpCommand(std::string_view engine, const RecipeContext& context);

// Runs HelpCommand and parses its output (capabilities.h). Unavailable when the program cannot
// be started, does not exit within `timeout`, or prints no options.
absl::StatusOr<EngineCapabilities> DetectCapabilities(std::string_view engine,
                                                      const RecipeContext& context,
                                                      std::chrono::milliseconds timeout);

}  // namespace ladder::engines
