// `ladder engine ...`: inference engines run by the agent.
#include "commands.h"
#include "exit_codes.h"

#ifdef LADDER_HAVE_ENGINES
#include "ladder/engines/synthetic_engine.h"
#include "ladder/engines/synthetic_engine_cli.h"
#endif

namespace ladder::cli {

void AddEngineCommand(CLI::App& app) {
#ifdef LADDER_HAVE_ENGINES
  auto* engine = app.add_subcommand(
      "engine",
      "Inference engines. The agent's engine runner starts these itself; run one by "
      "hand to poke at it with curl.");
  engine->require_subcommand(1);
  auto options = std::make_shared<engines::SyntheticEngineOptions>();
  auto* synthetic = engine->add_subcommand(
      "synthetic",
      "An OpenAI-compatible server (completions, streaming, /health, Prometheus /metrics with "
      "vLLM's counter names) whose model is random weights in a real model's shapes; attention "
      "runs through ladder's kernels with the chosen path policy, and speculation is emulated "
      "in cost. Runs until SIGTERM.");
  engines::AddSyntheticEngineFlags(*synthetic, *options);
  synthetic->callback([options] {
    if (auto status = engines::RunSyntheticEngine(*options); !status.ok()) Fail(status);
  });
#else
  auto* cmd = app.add_subcommand("engine", "Inference engines (not built into this binary).");
  cmd->callback([] {
    Fail("this ladder was built without engine support (LADDER_ENGINES=OFF)", ExitCode::kBadInput);
  });
#endif
}

}  // namespace ladder::cli
