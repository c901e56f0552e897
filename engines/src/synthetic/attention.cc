// The one boundary between the synthetic engine and ladder::kernels: every attention call of
// the model goes through here, and the kernels error type becomes an absl::Status once.
#include "../message.h"
#include "model.h"

namespace ladder::engines::synthetic {

absl::StatusOr<kernels::RunInfo> RunKernelAttention(const kernels::HostProblem& problem,
                                                    const kernels::RunOptions& options,
                                                    kernels::HostTensor* out) {
  kernels::Result<kernels::RunInfo> result =
      kernels::RunAttention(kernels::Backend::kCpu, problem, options, out);
  if (!result.ok()) {
    return absl::InternalError(
        internal::Cat("synthetic engine: attention failed: ", result.error().ToString()));
  }
  return std::move(result).value();
}

}  // namespace ladder::engines::synthetic
