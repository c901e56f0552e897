#include "sm_clock.h"

#include <dlfcn.h>

#include <string>

namespace ladder::kernels::internal {
namespace {

// The few NVML entry points used, with the types of nvml.h (which is not on every build host).
using NvmlReturn = int;          // nvmlReturn_t: 0 = NVML_SUCCESS
using NvmlDevice = void*;        // nvmlDevice_t
constexpr int kNvmlClockSm = 1;  // nvmlClockType_t NVML_CLOCK_SM
constexpr NvmlReturn kNvmlSuccess = 0;

struct Nvml {
  NvmlReturn (*device_by_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  bool ok = false;
};

const Nvml& LoadNvml() {
  static const Nvml nvml = [] {
    Nvml n;
    // Never unloaded: NVML keeps driver state for the process's lifetime.
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return n;
    auto init = reinterpret_cast<NvmlReturn (*)()>(dlsym(lib, "nvmlInit_v2"));
    n.device_by_bus_id = reinterpret_cast<NvmlReturn (*)(const char*, NvmlDevice*)>(
        dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.clock = reinterpret_cast<NvmlReturn (*)(NvmlDevice, int, unsigned*)>(
        dlsym(lib, "nvmlDeviceGetClockInfo"));
    n.max_clock = reinterpret_cast<NvmlReturn (*)(NvmlDevice, int, unsigned*)>(
        dlsym(lib, "nvmlDeviceGetMaxClockInfo"));
    n.ok = init != nullptr && n.device_by_bus_id != nullptr && n.clock != nullptr &&
           n.max_clock != nullptr && init() == kNvmlSuccess;
    return n;
  }();
  return nvml;
}

}  // namespace

SmClockMhz SampleSmClock(std::string_view pci_bus_id) {
  SmClockMhz out;
  if (pci_bus_id.empty()) return out;
  const Nvml& nvml = LoadNvml();
  if (!nvml.ok) return out;
  const std::string bus(pci_bus_id);
  NvmlDevice dev = nullptr;
  if (nvml.device_by_bus_id(bus.c_str(), &dev) != kNvmlSuccess) return out;
  unsigned now = 0, max = 0;
  if (nvml.clock(dev, kNvmlClockSm, &now) == kNvmlSuccess) out.now = now;
  if (nvml.max_clock(dev, kNvmlClockSm, &max) == kNvmlSuccess) out.max = max;
  return out;
}

}  // namespace ladder::kernels::internal
