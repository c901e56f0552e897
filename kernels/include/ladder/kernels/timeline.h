// The work-group timeline of a few calls: where a call's time goes between its launches, its
// work groups' waits, their first K/V tile, their key loops, their write-out and the merge.
//
// Each work group of the attention kernel and of the merge kernel stamps five marks (entry,
// ready, first tile, loop end, exit; see Mark) with the GPU's global timer and its
// multiprocessor's cycle counter. The global timer is shared by every multiprocessor; where its
// step is fine (at most 100 ns: 32 ns on the H200) it is the time axis. Where it ticks coarsely
// (1 µs on some GPUs), Summarize places every stamp by the cycle counters instead, which are
// exact but each multiprocessor's has its own origin: the cycle count, converted at the rate
// fitted to all stamps, plus each multiprocessor's offset, the mean of (timer - cycles / rate)
// over its stamps, so that the timer's quantisation averages out over a multiprocessor's stamps.
// That fit assumes a steady SM clock, which a GPU under load does not keep exactly (the H200's
// counters advanced at 1.81-1.89 G per timer second over different recordings): it can be off
// by a fraction of a microsecond across a recording, and says so.
//
// Thread safety: RunTimeline as RunBenchPoint (one caller at a time per process); the rest are
// pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ladder/kernels/bench.h"
#include "ladder/kernels/result.h"

namespace ladder::kernels {

enum class Mark : int {
  kEntry,      // the work group started (it may then wait for the kernel ahead of it: PDL)
  kReady,      // the kernel ahead of it is complete: its own work begins
  kFirstTile,  // its first K/V tile has landed (the head-512 team kernel has no such mark)
  kLoopEnd,    // its last tile is computed
  kExit,       // every thread of it is done
};
constexpr int kMarkCount = 5;

// One work group of one call as its kernel stamped it; 0 where it did not pass a mark.
struct WorkGroupStamps {
  int call = 0;
  int kernel = 0;      // 0: attention, 1: merge
  int work_group = 0;  // in grid order, x fastest
  int sm = 0;
  std::array<uint64_t, kMarkCount> timer_ns{};
  std::array<uint64_t, kMarkCount> cycles{};
};

// A work group's marks on the common axis, in µs from the first stamp of the recording; NaN
// where it did not pass the mark.
struct WorkGroupSpan {
  int call = 0, kernel = 0, work_group = 0, sm = 0;
  std::array<double, kMarkCount> t_us{};
};

// One call, from its spans (µs; NaN where the marks are missing, e.g. no merge kernel).
struct CallPhases {
  int call = 0;
  double dispatch_us = 0;    // attention: first work group ready to last work group ready
  double first_tile_us = 0;  // median work group: ready to first tile landed
  double keys_us = 0;        // median work group: first tile (or ready) to loop end
  double write_out_us = 0;   // median work group: loop end to exit
  double attention_us = 0;   // first attention work group ready to last exit
  double merge_wait_us = 0;  // last attention exit to first merge work group ready
  double merge_us = 0;       // first merge work group ready to last merge exit
  double to_next_us = 0;     // end of the call to the next call's first attention ready
  double period_us = 0;      // first attention ready to the next call's
};

struct TimelineSummary {
  std::vector<WorkGroupSpan> spans;
  std::vector<CallPhases> calls;
  // The medians of every phase over the calls that have a call before and after them (all calls
  // when fewer than three): the steady state of a graph replay.
  CallPhases typical;
  int typical_calls = 0;
  double timer_resolution_ns = 0;  // smallest step seen between two timer stamps
  double cycles_per_us = 0;        // the fitted rate of the cycle counters
  bool aligned_by_timer = false;   // the timer is the axis (fine step), not the cycle fit
  int attention_work_groups = 0;   // per call
  int merge_work_groups = 0;       // per call
};

// Aligns the stamps (see the file comment) and derives every call's phases. InvalidArgument
// when there is nothing to align (no stamps, or no multiprocessor with two distinct stamps).
Result<TimelineSummary> Summarize(const std::vector<WorkGroupStamps>& stamps);

struct TimelineResult {
  BenchPoint point;
  std::string grid;    // as BenchResult::grid
  std::string device;  // GPU name
  std::string method;  // how the calls ran, one line
  int calls = 0;
  TimelineSummary summary;
};

// Runs `point` (a GPU backend) as RunBenchPoint would, then records `calls` calls: captured in
// one graph and replayed behind the device spin (point.timing kGraph), or launched back to back
// behind it (kStream). point.warmup plain calls first; point.repeats is not used.
Result<TimelineResult> RunTimeline(const BenchPoint& point, int calls);

// A table of the typical call's phases and a line per call, to fit 100 columns.
std::string FormatTimeline(const TimelineResult& r);
// The phases of every call, the typical one, and (with spans) every work group's marks.
std::string FormatTimelineJson(const TimelineResult& r, bool spans);

}  // namespace ladder::kernels
