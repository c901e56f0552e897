#include "ladder/kernels/tuning.h"

#include <string>

namespace ladder::kernels {

std::string_view ToString(Head512Kernel k) {
  switch (k) {
    case Head512Kernel::kAuto:
      return "auto";
    case Head512Kernel::kGeneric:
      return "generic";
    case Head512Kernel::kTeamByDims:
      return "team-by-dims";
    case Head512Kernel::kTeamByColumn:
      return "team-by-column";
    case Head512Kernel::kTeamSplit:
      return "team-split";
    case Head512Kernel::kTeamSplitWgmma:
      return "team-split-wgmma";
  }
  return "?";
}

std::string_view ToString(Switch s) {
  switch (s) {
    case Switch::kAuto:
      return "auto";
    case Switch::kOff:
      return "off";
    case Switch::kOn:
      return "on";
  }
  return "?";
}

Result<Head512Kernel> ParseHead512Kernel(std::string_view s) {
  for (Head512Kernel k :
       {Head512Kernel::kAuto, Head512Kernel::kGeneric, Head512Kernel::kTeamByDims,
        Head512Kernel::kTeamByColumn, Head512Kernel::kTeamSplit, Head512Kernel::kTeamSplitWgmma})
    if (s == ToString(k)) return k;
  return Error(
      ErrorCode::kInvalidArgument,
      "unknown head-512 kernel '" + std::string(s) +
          "' (known: auto, generic, team-by-dims, team-by-column, team-split, team-split-wgmma)");
}

Result<Switch> ParseSwitch(std::string_view s) {
  if (s == "auto") return Switch::kAuto;
  if (s == "off") return Switch::kOff;
  if (s == "on") return Switch::kOn;
  return Error(ErrorCode::kInvalidArgument,
               "expected auto, off or on, got '" + std::string(s) + "'");
}

Status TuningConfig::Validate() const {
  auto bad = [](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument, "tuning: " + why);
  };
  const bool generic = head512 == Head512Kernel::kGeneric;
  const bool split =
      head512 == Head512Kernel::kTeamSplit || head512 == Head512Kernel::kTeamSplitWgmma;
  if (bulk_copies == Switch::kOn && (generic || split))
    return bad(
        "bulk_copies=on needs a team kernel that has bulk copies (team-by-dims or team-by-column), "
        "not head512=" +
        std::string(kernels::ToString(head512)));
  if (bulk_copies == Switch::kOff && head512 == Head512Kernel::kTeamByColumn)
    return bad(
        "bulk_copies=off with head512=team-by-column: that kernel exists only with bulk copies");
  if (merge_in_kernel == Switch::kOn)
    return bad(
        "merge_in_kernel takes auto or off: only the rule (every work group resident) makes it "
        "correct");
  if (merge_overlap == Switch::kOn)
    return bad(
        "merge_overlap takes auto or off: only the device (compute capability >= 9) can allow it");
  if (attention_overlap == Switch::kOn)
    return bad(
        "attention_overlap takes auto or off: only the device (compute capability >= 9) can "
        "allow it");
  if (split_keys == Switch::kOn && wide_work_groups == Switch::kOn)
    return bad("split_keys=on and wide_work_groups=on ask for two different kernels");
  return OkStatus();
}

std::string TuningConfig::ToString() const {
  std::string s;
  auto add = [&s](std::string_view name, std::string_view value) {
    if (!s.empty()) s += ' ';
    s += std::string(name) + "=" + std::string(value);
  };
  if (head512 != Head512Kernel::kAuto) add("head512", kernels::ToString(head512));
  if (bulk_copies != Switch::kAuto) add("bulk_copies", kernels::ToString(bulk_copies));
  if (merge_in_kernel != Switch::kAuto) add("merge_in_kernel", kernels::ToString(merge_in_kernel));
  if (merge_overlap != Switch::kAuto) add("merge_overlap", kernels::ToString(merge_overlap));
  if (evict_first != Switch::kAuto) add("evict_first", kernels::ToString(evict_first));
  if (attention_overlap != Switch::kAuto)
    add("attention_overlap", kernels::ToString(attention_overlap));
  if (merge_in_cluster != Switch::kAuto)
    add("merge_in_cluster", kernels::ToString(merge_in_cluster));
  if (wide_work_groups != Switch::kAuto)
    add("wide_work_groups", kernels::ToString(wide_work_groups));
  if (split_keys != Switch::kAuto) add("split_keys", kernels::ToString(split_keys));
  return s.empty() ? "defaults" : s;
}

}  // namespace ladder::kernels
