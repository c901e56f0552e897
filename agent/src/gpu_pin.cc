#include "gpu_pin.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ladder::agent {

absl::StatusOr<std::vector<int>> ParseGpuList(const std::string& text) {
  std::vector<int> devices;
  std::set<int> seen;
  for (absl::string_view piece : absl::StrSplit(text, ',')) {
    int index = -1;
    if (!absl::SimpleAtoi(piece, &index) || index < 0 || index > 1023) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpus: expected device indices such as 0 or 0,1, got '", text, "'"));
    }
    if (!seen.insert(index).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpus: device ", index, " is named twice in '", text, "'"));
    }
    devices.push_back(index);
  }
  return devices;
}

absl::StatusOr<PinnedGpus> PinGpus(const std::vector<GpuInfo>& host_gpus,
                                   const std::vector<GpuLink>& host_links,
                                   const std::vector<int>& devices) {
  const std::string flag = absl::StrCat("--gpus ", absl::StrJoin(devices, ","));
  if (host_gpus.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": this host has no GPU that nvidia-smi or rocm-smi reports"));
  }
  std::set<std::string> vendors;
  for (const auto& gpu : host_gpus) vendors.insert(gpu.vendor);
  if (vendors.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": this host has GPUs of several vendors (", absl::StrJoin(vendors, ", "),
        ") whose device indices overlap; run one agent per vendor without --gpus"));
  }
  const std::string vendor = *vendors.begin();
  if (vendor != "nvidia" && vendor != "amd") {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": cannot pin GPUs of vendor '", vendor, "' (nvidia or amd)"));
  }
  const int count = static_cast<int>(host_gpus.size());
  PinnedGpus pinned;
  std::map<int, int> position;  // host index -> position in pinned.gpus
  for (int device : devices) {
    if (device >= count) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": this host has ", count, count == 1 ? " GPU (device 0)" : " GPUs (devices 0-",
          count == 1 ? "" : absl::StrCat(count - 1, ")")));
    }
    position[device] = static_cast<int>(pinned.gpus.size());
    pinned.gpus.push_back(host_gpus[static_cast<size_t>(device)]);
  }
  for (const auto& link : host_links) {
    auto a = position.find(link.a);
    auto b = position.find(link.b);
    if (a == position.end() || b == position.end()) continue;
    pinned.links.push_back(
        GpuLink{std::min(a->second, b->second), std::max(a->second, b->second), link.kind});
  }
  std::sort(pinned.links.begin(), pinned.links.end(), [](const GpuLink& x, const GpuLink& y) {
    return std::tie(x.a, x.b) < std::tie(y.a, y.b);
  });
  const std::string selected = absl::StrJoin(devices, ",");
  if (vendor == "nvidia") {
    pinned.environment = {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}, {"CUDA_VISIBLE_DEVICES", selected}};
  } else {
    std::vector<int> renumbered(devices.size());
    for (size_t i = 0; i < renumbered.size(); ++i) renumbered[i] = static_cast<int>(i);
    const std::string hip = absl::StrJoin(renumbered, ",");
    pinned.environment = {{"ROCR_VISIBLE_DEVICES", selected},
                          {"HIP_VISIBLE_DEVICES", hip},
                          {"CUDA_VISIBLE_DEVICES", hip}};
  }
  return pinned;
}

Environment BaseEnvironment() { return {{"NCCL_NVLS_ENABLE", "0"}}; }

}  // namespace ladder::agent
