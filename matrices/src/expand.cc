// Expansion of a validated matrix into cells and units.
//
// Cells: the cross product of the axes in declaration order (the first axis varies slowest),
// minus exclusions, with the A/A control arm inserted right after its `of` value.
// Units: cells grouped by the values of every axis that is neither paired nor together; one
// unit per (group, replicate), groups in order of first appearance.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "internal.h"
#include "ladder/matrices/matrix.h"

namespace ladder::matrices {
namespace internal {

std::vector<ExpandedAxis> ExpandAxes(const Matrix& matrix) {
  std::vector<ExpandedAxis> result;
  result.reserve(matrix.axes.size());
  for (const Axis& axis : matrix.axes) {
    ExpandedAxis expanded;
    expanded.name = axis.name;
    for (const Value& value : axis.values) {
      expanded.values.push_back(value);
      expanded.param_values.push_back(value);
      expanded.rendered.push_back(ValueToString(value));
      if (matrix.aa_control && matrix.aa_control->axis == axis.name &&
          ValueToString(matrix.aa_control->of) == expanded.rendered.back()) {
        expanded.values.push_back(Value(matrix.aa_control->as));
        expanded.param_values.push_back(value);
        expanded.rendered.push_back(matrix.aa_control->as);
      }
    }
    result.push_back(std::move(expanded));
  }
  return result;
}

std::vector<CompiledExclusion> CompileExclusions(const Matrix& matrix,
                                                 const std::vector<ExpandedAxis>& axes) {
  std::vector<CompiledExclusion> result;
  for (const auto& exclusion : matrix.exclude) {
    CompiledExclusion compiled;
    for (const auto& [axis_name, value] : exclusion) {
      int axis_index = -1;
      for (size_t a = 0; a < axes.size(); ++a) {
        if (axes[a].name == axis_name) axis_index = static_cast<int>(a);
      }
      std::vector<int> matches;
      if (axis_index >= 0) {
        const ExpandedAxis& axis = axes[static_cast<size_t>(axis_index)];
        const std::string rendered = ValueToString(value);
        const bool names_aa_source = matrix.aa_control && matrix.aa_control->axis == axis_name &&
                                     ValueToString(matrix.aa_control->of) == rendered;
        for (size_t v = 0; v < axis.values.size(); ++v) {
          const bool is_aa_arm = matrix.aa_control && matrix.aa_control->axis == axis_name &&
                                 axis.rendered[v] == matrix.aa_control->as;
          if (axis.rendered[v] == rendered || (names_aa_source && is_aa_arm)) {
            matches.push_back(static_cast<int>(v));
          }
        }
      }
      compiled.last_axis = std::max(compiled.last_axis, axis_index);
      compiled.terms.emplace_back(axis_index, std::move(matches));
    }
    result.push_back(std::move(compiled));
  }
  return result;
}

namespace {

// True when `exclusion` matches the partial assignment `chosen` (value index per axis, -1 for
// unassigned), which must assign every axis the exclusion names.
bool Matches(const CompiledExclusion& exclusion, const std::vector<int>& chosen) {
  for (const auto& [axis, values] : exclusion.terms) {
    if (axis < 0) return false;
    const int v = chosen[static_cast<size_t>(axis)];
    if (std::find(values.begin(), values.end(), v) == values.end()) return false;
  }
  return true;
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > std::numeric_limits<int64_t>::max() / b) return std::numeric_limits<int64_t>::max();
  return a * b;
}

// Depth-first walk over the axes in `order` (ascending axis indices), pruning every subtree
// whose prefix an exclusion already matches. Calls `leaf(chosen)` for each kept assignment.
template <typename Leaf>
void Walk(const std::vector<ExpandedAxis>& axes, const std::vector<int>& order,
          const std::vector<CompiledExclusion>& exclusions, size_t depth, std::vector<int>& chosen,
          Leaf& leaf) {
  if (depth == order.size()) {
    leaf(chosen);
    return;
  }
  const int axis = order[depth];
  for (size_t v = 0; v < axes[static_cast<size_t>(axis)].values.size(); ++v) {
    chosen[static_cast<size_t>(axis)] = static_cast<int>(v);
    bool excluded = false;
    for (const CompiledExclusion& exclusion : exclusions) {
      // An exclusion is decided once its last named axis is assigned.
      if (exclusion.last_axis == axis && Matches(exclusion, chosen)) {
        excluded = true;
        break;
      }
    }
    if (!excluded) Walk(axes, order, exclusions, depth + 1, chosen, leaf);
  }
  chosen[static_cast<size_t>(axis)] = -1;
}

}  // namespace

int64_t CountCells(const std::vector<ExpandedAxis>& axes,
                   const std::vector<CompiledExclusion>& exclusions) {
  std::vector<bool> named(axes.size(), false);
  for (const CompiledExclusion& exclusion : exclusions) {
    for (const auto& [axis, values] : exclusion.terms) {
      if (axis >= 0) named[static_cast<size_t>(axis)] = true;
    }
  }
  std::vector<int> order;
  int64_t free_product = 1;
  for (size_t a = 0; a < axes.size(); ++a) {
    if (named[a]) {
      order.push_back(static_cast<int>(a));
    } else {
      free_product = SaturatingMul(free_product, static_cast<int64_t>(axes[a].values.size()));
    }
  }
  int64_t kept = 0;
  std::vector<int> chosen(axes.size(), -1);
  auto count = [&kept](const std::vector<int>&) { ++kept; };
  Walk(axes, order, exclusions, 0, chosen, count);
  return SaturatingMul(kept, free_product);
}

std::string CapMessage(int64_t cells, int64_t cap) {
  return fmt::format("{} cells exceeds the cap of {}; pass --max-cells to raise it", cells, cap);
}

std::string ReplicateCapError(int64_t cells, int sessions) {
  int64_t replicates = 0;
  if (!__builtin_mul_overflow(cells, static_cast<int64_t>(sessions), &replicates) &&
      replicates <= kMaxCellReplicates) {
    return "";
  }
  return fmt::format(
      "{} cells x {} sessions is more than the {} cell replicates one "
      "coordinator holds",
      cells, sessions, kMaxCellReplicates);
}

}  // namespace internal

absl::StatusOr<Expansion> Expand(const Matrix& matrix, const ParseOptions& options) {
  const std::vector<internal::ExpandedAxis> axes = internal::ExpandAxes(matrix);
  const std::vector<internal::CompiledExclusion> exclusions =
      internal::CompileExclusions(matrix, axes);
  const int64_t count = internal::CountCells(axes, exclusions);
  if (count > options.max_cells) {
    return absl::InvalidArgumentError(
        fmt::format("matrix {}: {}", matrix.name, internal::CapMessage(count, options.max_cells)));
  }
  if (const std::string error = internal::ReplicateCapError(count, matrix.replicates.sessions);
      !error.empty() || matrix.replicates.sessions < 1) {
    return absl::InvalidArgumentError(fmt::format("matrix {}: replicates.sessions: {}", matrix.name,
                                                  error.empty() ? "must be at least 1" : error));
  }

  nlohmann::json fixed = nlohmann::json::object();
  for (const auto& [key, value] : matrix.fixed) fixed[key] = value;

  // Axes that define a unit's group: neither paired nor together.
  std::vector<bool> grouping(axes.size(), true);
  for (size_t a = 0; a < axes.size(); ++a) {
    const std::string& name = axes[a].name;
    if (std::find(matrix.pair.begin(), matrix.pair.end(), name) != matrix.pair.end() ||
        std::find(matrix.together.begin(), matrix.together.end(), name) != matrix.together.end()) {
      grouping[a] = false;
    }
  }

  Expansion expansion;
  expansion.cells.reserve(static_cast<size_t>(count));
  std::vector<std::string> group_keys;        // by group index
  std::vector<std::vector<int>> group_cells;  // by group index
  std::unordered_map<std::string, size_t> group_index_of_key;

  std::vector<int> order(axes.size());
  for (size_t a = 0; a < axes.size(); ++a) order[a] = static_cast<int>(a);
  std::vector<int> chosen(axes.size(), -1);
  auto emit = [&](const std::vector<int>& picked) {
    Cell cell;
    cell.index = static_cast<int>(expansion.cells.size());
    cell.axes = nlohmann::json::object();
    cell.params = fixed;
    std::string group_key;
    for (size_t a = 0; a < axes.size(); ++a) {
      const size_t v = static_cast<size_t>(picked[a]);
      const std::string part = axes[a].name + "=" + axes[a].rendered[v];
      if (!cell.key.empty()) cell.key += ",";
      cell.key += part;
      if (grouping[a]) {
        if (!group_key.empty()) group_key += ",";
        group_key += part;
      }
      cell.axes[axes[a].name] = axes[a].values[v];
      cell.params[axes[a].name] = axes[a].param_values[v];
    }
    auto [it, inserted] = group_index_of_key.emplace(group_key, group_keys.size());
    if (inserted) {
      group_keys.push_back(group_key);
      group_cells.emplace_back();
    }
    group_cells[it->second].push_back(cell.index);
    expansion.cells.push_back(std::move(cell));
  };
  internal::Walk(axes, order, exclusions, 0, chosen, emit);

  for (size_t g = 0; g < group_keys.size(); ++g) {
    for (int r = 0; r < matrix.replicates.sessions; ++r) {
      Unit unit;
      unit.index = static_cast<int>(expansion.units.size());
      unit.replicate = r;
      unit.group_key = group_keys[g];
      unit.cell_indices = group_cells[g];
      unit.seed = UnitSeed(matrix.seed, static_cast<int>(g), r);
      expansion.units.push_back(std::move(unit));
    }
  }
  return expansion;
}

}  // namespace ladder::matrices
