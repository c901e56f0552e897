#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "ladder/common/random.h"
#include "ladder/runner/runner.h"

namespace ladder::runner {
namespace {}  // namespace

std::vector<int> InterleavedOrder(int cell_count, uint64_t seed, int process, int round) {
  std::vector<int> order(static_cast<size_t>(std::max(0, cell_count)));
  for (int i = 0; i < cell_count; ++i) order[static_cast<size_t>(i)] = i;
  uint64_t state = SplitMix64(
      seed ^ SplitMix64(static_cast<uint64_t>(process) << 32 | static_cast<uint32_t>(round)));
  // Fisher-Yates with our own generator (not <random>'s distributions, whose results differ
  // between standard libraries), so one seed gives one order on every platform and in every
  // runner.
  for (int i = cell_count - 1; i > 0; --i) {
    state = SplitMix64(state);
    const int j = static_cast<int>(state % static_cast<uint64_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

}  // namespace ladder::runner
