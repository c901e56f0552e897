// A bench point set up on the GPU (inputs filled, the policy's path planned, the workspace
// allocated): what RunBenchPoint times and RunTimeline records, made in one place so that both
// run the same call.
#pragma once

#include "gpu_api.h"
#include "ladder/kernels/bench.h"

namespace ladder::kernels::internal {

struct GpuPoint {
  DeviceInfo info;
  gpu::DeviceBuffer d_qs, d_sl, d_bt, d_q, d_k, d_v, d_o, ws;
  gpu::DeviceProblem dp;  // points into the buffers above
  PathDecision dec;
  gpu::LaunchPlan plan;
  size_t ws_bytes = 0;
};

Result<GpuPoint> PrepareGpuPoint(const BenchPoint& pt);

}  // namespace ladder::kernels::internal
