// The built-in `kernel` runner: times unified attention (ladder::kernels) for each cell.
// Private to agent/.
#pragma once

#include <memory>

#include "ladder/runner/runner.h"

namespace ladder::agent {

std::unique_ptr<runner::Runner> MakeKernelRunner();
absl::Status CheckKernelParams(const nlohmann::json& params);

}  // namespace ladder::agent
