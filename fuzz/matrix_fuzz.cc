// Fuzzes the matrix parser: any byte string is parsed and, when it is a valid matrix, expanded
// under a small cell cap. Properties checked beyond "no crash, no sanitizer report":
//   - a refusal is InvalidArgument with a non-empty message;
//   - an expansion respects the cap, and its units name only existing cells;
//   - parsing is deterministic (same input, same cells and seeds).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ladder/matrices/matrix.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return -1;  // a matrix is a few KiB; larger inputs only slow the search
  const std::string_view yaml(reinterpret_cast<const char*>(data), size);
  ladder::matrices::ParseOptions options;
  options.max_cells = 256;
  auto matrix = ladder::matrices::ParseMatrix(yaml, "fuzz.yaml", options);
  if (!matrix.ok()) {
    Check(matrix.status().code() == absl::StatusCode::kInvalidArgument);
    Check(!matrix.status().message().empty());
    return 0;
  }
  auto expansion = ladder::matrices::Expand(*matrix, options);
  if (!expansion.ok()) {
    Check(expansion.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  Check(static_cast<int64_t>(expansion->cells.size()) <= options.max_cells);
  for (const auto& unit : expansion->units) {
    Check(!unit.cell_indices.empty());
    for (int c : unit.cell_indices) {
      Check(c >= 0 && static_cast<size_t>(c) < expansion->cells.size());
    }
  }
  for (const auto& cell : expansion->cells) {
    for (const auto& [name, value] : cell.axes.items()) {
      (void)ladder::matrices::ValueToString(value);
    }
  }
  auto again = ladder::matrices::Expand(*matrix, options);
  Check(again.ok() && again->cells.size() == expansion->cells.size() &&
        again->units.size() == expansion->units.size());
  for (size_t i = 0; i < again->units.size(); ++i) {
    Check(again->units[i].seed == expansion->units[i].seed);
  }
  return 0;
}
