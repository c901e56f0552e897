#include "ladder/kernels/tuning.h"

#include <algorithm>
#include <set>
#include <string>

namespace ladder::kernels {
namespace {

// The Switch fields, in ToString's order: the one list ToString and ParseTuning walk.
struct SwitchField {
  std::string_view name;
  Switch TuningConfig::*field;
};
constexpr SwitchField kSwitchFields[] = {
    {"merge_in_kernel", &TuningConfig::merge_in_kernel},
    {"merge_overlap", &TuningConfig::merge_overlap},
    {"evict_first", &TuningConfig::evict_first},
    {"attention_overlap", &TuningConfig::attention_overlap},
    {"merge_in_cluster", &TuningConfig::merge_in_cluster},
    {"wide_work_groups", &TuningConfig::wide_work_groups},
    {"split_keys", &TuningConfig::split_keys},
    {"release_next", &TuningConfig::release_next},
};

// Fields that were removed, and why: a matrix or command line that still names one is told so
// instead of "unknown field".
struct RemovedField {
  std::string_view name, why;
};
constexpr RemovedField kRemovedFields[] = {
    {"bulk_copies",
     "was removed: the head-512 team kernel copies by cp.async by dims (<= 8 score columns) and by "
     "bulk copy by column (9-16), the form that won at each; bulk copies by dims won or lost by "
     "depth and preset with no rule (kernels-ab-bulk, kernels-locate-bulk) and were deleted"},
};

}  // namespace

const std::vector<std::string_view>& TuningFieldNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> n = {"head512"};
    for (const SwitchField& f : kSwitchFields) n.push_back(f.name);
    return n;
  }();
  return names;
}

Status SetTuningField(TuningConfig* tuning, std::string_view name, std::string_view value) {
  if (name == "head512") {
    LADDER_K_ASSIGN_OR_RETURN(tuning->head512, ParseHead512Kernel(value));
    return OkStatus();
  }
  for (const SwitchField& f : kSwitchFields) {
    if (f.name != name) continue;
    LADDER_K_ASSIGN_OR_RETURN(tuning->*f.field, ParseSwitch(value));
    return OkStatus();
  }
  for (const RemovedField& f : kRemovedFields)
    if (f.name == name)
      return Error(ErrorCode::kInvalidArgument,
                   "field '" + std::string(name) + "' " + std::string(f.why));
  std::string known;
  for (std::string_view n : TuningFieldNames())
    known += (known.empty() ? "" : ", ") + std::string(n);
  return Error(ErrorCode::kInvalidArgument,
               "unknown field '" + std::string(name) + "' (known: " + known + ")");
}

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
    case Head512Kernel::kTeamColumns:
      return "team-columns";
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
  for (Head512Kernel k : {Head512Kernel::kAuto, Head512Kernel::kGeneric, Head512Kernel::kTeamByDims,
                          Head512Kernel::kTeamByColumn, Head512Kernel::kTeamSplit,
                          Head512Kernel::kTeamSplitWgmma, Head512Kernel::kTeamColumns})
    if (s == ToString(k)) return k;
  return Error(
      ErrorCode::kInvalidArgument,
      "unknown head-512 kernel '" + std::string(s) +
          "' (known: auto, generic, team-by-dims, team-by-column, team-split, team-split-wgmma, "
          "team-columns)");
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
  if (release_next == Switch::kOn)
    return bad(
        "release_next takes auto or off: auto already releases the next kernel at the point the "
        "plan picks (on was the same as auto)");
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
  for (const SwitchField& f : kSwitchFields)
    if (this->*f.field != Switch::kAuto) add(f.name, kernels::ToString(this->*f.field));
  return s.empty() ? "defaults" : s;
}

Result<TuningConfig> ParseTuning(std::string_view text) {
  auto bad = [](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument, "tuning: " + why);
  };
  TuningConfig t;
  std::set<std::string, std::less<>> seen;
  size_t i = 0;
  while (i < text.size()) {
    const size_t end = text.find_first_of(" ,\t", i);
    const std::string_view item = text.substr(i, end == std::string_view::npos ? end : end - i);
    i = end == std::string_view::npos ? text.size() : end + 1;
    if (item.empty() || (item == "defaults" && text.find('=') == std::string_view::npos)) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return bad(
          std::string(1, '\'').append(item).append("' is not name=value (e.g. split_keys=off)"));
    const std::string_view name = item.substr(0, eq), value = item.substr(eq + 1);
    if (!seen.insert(std::string(name)).second) return bad(std::string(name) + " named twice");
    if (Status set = SetTuningField(&t, name, value); !set.ok()) {
      const std::vector<std::string_view>& names = TuningFieldNames();
      const bool known_field = std::find(names.begin(), names.end(), name) != names.end();
      return bad((known_field ? std::string(name) + ": " : std::string()) + set.error().message);
    }
  }
  LADDER_K_TRY(t.Validate());
  return t;
}

}  // namespace ladder::kernels
