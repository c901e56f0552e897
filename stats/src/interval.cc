#include "ladder/stats/interval.h"

#include <algorithm>
#include <limits>

namespace ladder::stats {

double Interval::RelativeHalfWidth() const {
  if (bounds == Boundedness::kUnbounded || !(estimate > 0.0)) {
    return std::numeric_limits<double>::infinity();
  }
  return std::max(upper / estimate - 1.0, 1.0 - lower / estimate);
}

}  // namespace ladder::stats
