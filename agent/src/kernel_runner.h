// The built-in `kernel` runner: times unified attention (ladder::kernels) for each cell.
// Private to agent/.
#pragma once

#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "ladder/runner/runner.h"

namespace ladder::agent {

std::unique_ptr<runner::Runner> MakeKernelRunner();

// The agent process's one device turn: the agents of one process (`ladder local` runs one per
// session on one machine) take turns on the device with it, a timed kernel call, an engine
// process or a registered program's start at a time, so no timing shares the GPU (or the CPU
// cores) with another agent's. Held by the kernel, engine and command runners.
std::mutex& DeviceTurn();
absl::Status CheckKernelParams(const nlohmann::json& params);

}  // namespace ladder::agent
