// Test-only stand-in for `ladder engine synthetic`: the same flags, the same engine. The
// EngineRunner tests point RecipeContext::ladder_binary here; the leading "engine synthetic"
// arguments the recipe renders are accepted and skipped.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "ladder/engines/synthetic_engine.h"
#include "ladder/engines/synthetic_engine_cli.h"

int main(int argc, char** argv) {
  CLI::App app("synthetic engine (test main)");
  ladder::engines::SyntheticEngineOptions options;
  std::vector<std::string> words;
  app.add_option("words", words, "engine synthetic");
  ladder::engines::AddSyntheticEngineFlags(app, options);
  CLI11_PARSE(app, argc, argv);
  absl::Status status = ladder::engines::RunSyntheticEngine(options);
  if (!status.ok()) {
    std::fprintf(stderr, "ERROR %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
