// CPU backend: the reference 2D and 3D algorithms (fp32 accumulation, same tiling as the
// contract describes) and the double-precision reference.
#pragma once

#include "ladder/kernels/attention.h"

namespace ladder::kernels::internal {

// Runs `path` with `segments` (3D) on up to `threads` std::threads. `out` must already have
// num_tokens * q_heads * head_dim elements of the problem's dtype.
void RunCpu(const HostProblem& p, Path path, int segments, int threads, HostTensor* out);

}  // namespace ladder::kernels::internal
