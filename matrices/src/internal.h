// Private helpers shared by the parser and the expander. Not part of the public API.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ladder/matrices/matrix.h"

namespace ladder::matrices::internal {

// The axis values a matrix expands over: the declared values with the A/A control arm inserted
// right after its `of` value. `param_values` is what the runner receives for each displayed value
// (identical to `values` except for the A/A arm, whose parameter is the `of` value).
struct ExpandedAxis {
  std::string name;
  std::vector<Value> values;          // what cell keys and Cell::axes show
  std::vector<Value> param_values;    // what Cell::params carries
  std::vector<std::string> rendered;  // ValueToString(values[i])
};
std::vector<ExpandedAxis> ExpandAxes(const Matrix& matrix);

// One exclusion compiled against expanded axes: for each named axis, the value indices it
// matches. An exclusion naming `of` on the A/A axis also matches the A/A arm. A term with no
// indices (unknown axis or value) makes the exclusion match nothing.
struct CompiledExclusion {
  std::vector<std::pair<int, std::vector<int>>> terms;  // (axis index, matching value indices)
  int last_axis = -1;                                   // largest axis index named
};
std::vector<CompiledExclusion> CompileExclusions(const Matrix& matrix,
                                                 const std::vector<ExpandedAxis>& axes);

// The number of cells after exclusion, saturating at INT64_MAX. Cheap even when the raw cross
// product is astronomically large: only the axes named by exclusions are enumerated.
int64_t CountCells(const std::vector<ExpandedAxis>& axes,
                   const std::vector<CompiledExclusion>& exclusions);

// The cap error message, shared by the parser and Expand.
std::string CapMessage(int64_t cells, int64_t cap);

// Whatever --max-cells says, no expansion may hold more cell replicates (cells x
// replicates.sessions, i.e. the cells of all units) than this: each one is a unit member in the
// coordinator's memory and a row in the database, and a request could otherwise make the
// coordinator allocate without bound (replicates: {sessions: 100000000} aborted with
// std::bad_alloc after 40 s).
inline constexpr int64_t kMaxCellReplicates = 2'000'000;
inline constexpr int64_t kMaxSessions = 1000;  // replicates.sessions: distinct VMs per cell
// Empty when `cells` cells, each in `sessions` units, fit kMaxCellReplicates; else the error.
std::string ReplicateCapError(int64_t cells, int sessions);

uint64_t Fnv1a64(std::string_view bytes);

}  // namespace ladder::matrices::internal
