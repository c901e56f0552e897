// `ladder engine ...`: inference engines run by the agent.
#include "commands.h"

namespace ladder::cli {

void AddEngineCommand(CLI::App& app) {
#ifdef LADDER_HAVE_ENGINES
  AddEngineSubcommands(app);
#else
  auto* cmd = app.add_subcommand("engine", "Inference engines (not built into this binary).");
  cmd->callback([] { Fail("this ladder was built without engine support (LADDER_ENGINES=OFF)", 2); });
#endif
}

}  // namespace ladder::cli
