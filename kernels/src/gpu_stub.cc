// GPU backend for builds with neither LADDER_CUDA nor LADDER_HIP: everything is unavailable.
#include "gpu_api.h"

namespace ladder::kernels::gpu {
namespace {
KernelError NoGpu() {
  return Error(
      ErrorCode::kUnavailable,
      "this binary has no GPU backend (configure with -DLADDER_CUDA=ON or -DLADDER_HIP=ON)");
}
}  // namespace

Backend CompiledBackend() { return Backend::kCpu; }
Result<DeviceInfo> QueryDevice() { return NoGpu(); }
Result<KernelFacts> FactsOfKernel(const AttentionShape&, int, const TuningConfig&, bool) {
  return NoGpu();
}
Result<DeviceBuffer> DeviceBuffer::Alloc(size_t) { return NoGpu(); }
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  p_ = std::exchange(o.p_, nullptr);
  n_ = std::exchange(o.n_, 0);
  return *this;
}
DeviceBuffer::~DeviceBuffer() = default;
Status CopyToDevice(void*, const void*, size_t) { return NoGpu(); }
Status CopyToHost(void*, const void*, size_t) { return NoGpu(); }
Status FillRandom(void*, size_t, DType, uint64_t, float) { return NoGpu(); }
Result<LaunchPlan> MakePlan(const DeviceProblem&, Path, int, const TuningConfig&) {
  return NoGpu();
}
size_t WorkspaceBytes(const DeviceProblem&, const LaunchPlan&) { return 0; }
Status Launch(const DeviceProblem&, const LaunchPlan&, void*, size_t, void*, unsigned long long*) {
  return NoGpu();
}
Status Synchronize() { return NoGpu(); }
Result<std::vector<double>> TimeLaunches(const DeviceProblem&, const LaunchPlan&, void*, size_t,
                                         int, int, void*, size_t) {
  return NoGpu();
}
Result<std::vector<double>> TimeGraphReplays(const DeviceProblem&, const LaunchPlan&, void*, size_t,
                                             int, int, int) {
  return NoGpu();
}
Result<std::vector<TimelineStamp>> RecordTimeline(const DeviceProblem&, const LaunchPlan&, void*,
                                                  size_t, int, int, bool) {
  return NoGpu();
}
unsigned long long HoldNs() { return 0; }
Result<double> MeasureCopyBytesPerS(size_t, int) { return NoGpu(); }

}  // namespace ladder::kernels::gpu
