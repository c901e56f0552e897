// The CUDA model in a build without LADDER_CUDA: unavailable, so `--device auto` stays on the CPU.
#include "model.h"

namespace ladder::engines::synthetic {

bool CudaModelCompiled() { return false; }

absl::StatusOr<std::unique_ptr<Model>> BuildCudaModel(const Preset&, uint64_t, kernels::RunOptions,
                                                      int, Projection) {
  return absl::UnavailableError(
      "synthetic engine: --device cuda: this binary was built without LADDER_CUDA");
}

}  // namespace ladder::engines::synthetic
