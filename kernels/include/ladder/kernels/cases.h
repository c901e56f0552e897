// The correctness case table: named, seeded, fixed-input cases run on any backend.
//
// For each case and backend: both paths are compared with a double-precision reference
// (tolerance below), 2D and 3D outputs with each other (at most 1 ULP of the output dtype per
// element for 16-bit dtypes; for f32 a relative bound), and each path with itself over
// `repeats` calls (bit-identical).
//
// ULPs are counted as |a - b| / ULP(max(|a|, |b|, floor)) with floor = 2^-6 * max|ref|:
// an output element that cancels to nearly zero carries the *absolute* rounding error of its
// fp32 sum, which is many ULPs of its own tiny magnitude under any reassociation (seen on the
// CPU: 168 raw ULPs on an element of magnitude 1e-5). The raw bit distance is reported too.
//
// Tolerance against the double reference, per element:
//   |out - ref| <= 1 ULP(dtype, ref) + 2^-12 * max|ref|   (and relative L2 error <= 4e-3 for
//   bf16, 1e-3 for f16, 1e-5 for f32).
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "ladder/kernels/attention.h"
#include "ladder/kernels/result.h"

namespace ladder::kernels {

struct CaseSpec {
  std::string name;
  AttentionShape shape;
  std::vector<SeqSpec> seqs;
  uint64_t seed = 1;
  int force_segments = 0;  // > 0: the 3D path uses exactly this many segments
  bool cpu_only = false;   // e.g. f32, which the GPU backends do not support
};

std::span<const CaseSpec> Cases();
// For test frameworks: prints the case name instead of the struct's bytes.
inline void PrintTo(const CaseSpec& c, std::ostream* os) { *os << c.name; }

struct PathOutcome {
  Path path = Path::k2D;
  int segments = 1;
  double max_abs_err = 0;  // vs double reference
  double rel_l2_err = 0;
  int64_t max_ulp_vs_ref = 0;  // ULPs of the dtype vs the reference rounded to it
  bool within_tolerance = false;
  bool deterministic = false;  // bit-identical over the repeats
};

struct CaseResult {
  std::string name;
  Backend backend = Backend::kCpu;
  bool skipped = false;  // e.g. cpu_only case on a GPU backend
  std::string skip_reason;
  PathOutcome p2d, p3d;
  int64_t max_ulp_2d_vs_3d = 0;      // floored, see above: the pass criterion (<= 1)
  int64_t max_raw_ulp_2d_vs_3d = 0;  // raw bit-pattern distance, for the record
  bool passed = false;
  std::string failure;  // empty when passed
  double seconds = 0;

  std::string Line() const;  // one line for the check tool
};

// Runs one case under `tuning` (GPU backends). Errors are for infrastructure failures (device
// errors) and for a tuning the dispatch table has no kernel for (kUnsupported); a failed check
// is a CaseResult with passed == false.
Result<CaseResult> RunCase(Backend backend, const CaseSpec& spec, int repeats = 10,
                           int cpu_threads = 2, const TuningConfig& tuning = {});

}  // namespace ladder::kernels
