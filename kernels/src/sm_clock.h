// The SM clock of an NVIDIA GPU, read through the driver's NVML (libnvidia-ml.so.1, loaded at
// run time: the library ships with the driver, not with the toolkit, and a binary that links it
// would not start on a machine without one). So that a measurement can say whether the GPU ran
// at its clock or throttled (docs/report.md: `throttled`).
#pragma once

#include <string_view>

namespace ladder::kernels::internal {

struct SmClockMhz {
  double now = 0;  // the SM clock at the call; 0 = unknown
  double max = 0;  // the SM's maximum clock; 0 = unknown
};

// `pci_bus_id` as DeviceInfo::pci_bus_id. Both 0 where NVML is missing, fails, or has no GPU
// at that address. Thread-safe; NVML is initialised once per process.
SmClockMhz SampleSmClock(std::string_view pci_bus_id);

}  // namespace ladder::kernels::internal
