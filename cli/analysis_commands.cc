// `ladder report` and `ladder verify`: analysis over a results database.
#include "commands.h"

namespace ladder::cli {

void AddAnalysisCommands(CLI::App& app) { (void)app; }

}  // namespace ladder::cli
