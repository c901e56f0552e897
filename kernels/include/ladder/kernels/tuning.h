// Tuning of the GPU attention kernels: which kernel of the dispatch table runs, and how its 3D
// merge and copies are launched. Every field's `auto` is the policy, and each value it takes
// somewhere is there because it won an A/B run (the matrices in kernels/ab/; docs/kernels.md,
// "The dispatch table" and "Tuning", says which value `auto` takes where and why). A caller sets
// a field only to compare against `auto`: `off` is the optimisation left out, `on` (where a field
// takes it) forces the same code path at shapes where `auto` declines it.
// The library reads no environment variable: a tuning reaches the kernels through
// RunOptions::tuning (attention.h) or BenchPoint::tuning (bench.h), and the kernel runner takes
// it as cell parameters, so an A/B of tunings is a matrix whose paired axis is the tuning.
//
// A tuning is a request: a combination the dispatch table has no kernel for (e.g. team kernel
// by dims at 16 score columns) fails at plan time with kUnsupported naming the combination;
// Validate() refuses only what no shape could ever run.
//
// Every field is ignored by the CPU backend.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ladder/kernels/result.h"

namespace ladder::kernels {

// The head-512 kernel. Score columns = query rows x q heads per KV head in one work item.
enum class Head512Kernel {
  // The team kernel wherever a work group may hold its ~210 KB of shared memory (Hopper):
  // by dims at <= 8 score columns, by column at <= 16, split scores with the O^T product by
  // warpgroup MMA above 16 where the sm_90a machine code runs (split scores without it);
  // at 33..40 the column-teams kernel (kTeamColumns); elsewhere (Ampere, HIP) the generic
  // kernel.
  kAuto,
  kGeneric,         // the one kernel body every head dim uses (attention_kernel.h)
  kTeamByDims,      // team kernel scoring by dims, cp.async copies: <= 8 score columns only
  kTeamByColumn,    // team kernel scoring by column, bulk copies: 9..16 score columns only
  kTeamSplit,       // team kernel, scores by dims, softmax by column: 17..32 columns
  kTeamSplitWgmma,  // kTeamSplit with O^T by wgmma: 17..32 columns, sm_90a only
  // 33..40 columns (five query rows of GQA 8) in one query block, its two teams splitting the
  // columns 24 / 16 and both taking every 16-key chunk, so K and V are read once. (Without it
  // the call is two query blocks, each reading all of K and V.)
  kTeamColumns,
};

// A choice the defaults make by rule, forced one way for an A/B run.
enum class Switch { kAuto, kOff, kOn };

struct TuningConfig {
  Head512Kernel head512 = Head512Kernel::kAuto;
  // (bulk_copies, which chose the team kernels' copy form, is gone: the by-dims kernel copies by
  // cp.async and the by-column kernel by bulk copy, each the form that won at its columns.)
  // 3D with a team kernel: the work groups merge the segments themselves (a cooperative
  // launch) instead of a merge kernel. kAuto: where every work group is resident and each
  // merges at most its kernel's merge units; kOff: always the merge kernel. (kOn is kAuto:
  // the conditions are what makes the merge inside the kernel correct.)
  Switch merge_in_kernel = Switch::kAuto;
  // The merge kernel launched by programmatic dependent launch, overlapping the attention
  // kernel's tail. kAuto: on compute capability 9 and newer (CUDA); kOff: a plain launch.
  Switch merge_overlap = Switch::kAuto;
  // The attention kernel itself launched by programmatic dependent launch: its launch and work
  // group set-up overlap the end of the kernel ahead of it in the stream (the previous call's
  // merge, an engine's projection), and it waits for that kernel's results (griddepcontrol.wait)
  // before reading anything. kAuto: on compute capability 9 and newer (CUDA); kOff: a plain
  // launch.
  Switch attention_overlap = Switch::kAuto;
  // The merge kernel lets the kernel after it in the stream launch as soon as the merge starts
  // (griddepcontrol.launch_dependents) instead of when its last work group exits: a kernel
  // launched by programmatic dependent launch after it (the next call's attention kernel under
  // attention_overlap) is then resident and waiting (griddepcontrol.wait: the merge complete and
  // its writes visible) when the merge ends, instead of being launched then. The work-group
  // timeline showed that launch: the next call's attention work groups entered 0.3-0.5 µs after
  // the merge's last exit (H200, graph replays). kAuto: the plan picks the point (as the merge
  // starts, after its wait, or at its end where the next grid would land packed; a no-op before
  // compute capability 9 and on HIP); kOff: always at the merge's end. (kOn, the same as kAuto,
  // is refused.) Evidence: kernels-ab-release-next, kernels-ab-release-next-25.
  Switch release_next = Switch::kAuto;
  // 3D with the generic kernel: the segments of one (query block, KV head) run as one thread
  // block cluster and merge their partials over distributed shared memory before they exit, in
  // the merge kernel's order (the same bits), so no merge kernel runs and no partial goes
  // through global memory. kOn: on compute capability 9.0 (CUDA, sm_90a machine code) where the
  // split has 2-16 segments and all its clusters run at once, else the merge kernel. kAuto: on
  // for sliding-window layers (a window keeps every call short, its time mostly fixed cost, of
  // which the merge kernel is a part), off without a window: against the merge kernel at the
  // same split it won by 4-16 % at some (split, clusters) and lost by 3-25 % at others, with no
  // rule found that holds across shapes (docs/kernel-experiments.md).
  Switch merge_in_cluster = Switch::kAuto;
  // The generic kernel at head 128 and 256 with work groups of 256 threads (eight warps) instead
  // of 128. A K/V tile's time is the chain of its scores, softmax and P V in each warp, not the
  // copies (a third copy stage changed nothing but the shared memory), and eight warps halve each
  // warp's share. kAuto: on at head 128 (CUDA; H200, llama-70b: 2-24 % faster at every depth and
  // row count). At head 256 once the split is made, where a query block sees at most 16K keys and
  // the segments do not merge in their clusters (the eight warps won 7-15 % at 1K, on the sliding
  // window's merge kernel and at TP=2, and lost 1-9 % on the cluster merge and from 32K up), and
  // only where the wide kernel's occupancy equals the narrow one's, so the split stays the one
  // the policy chose for it (docs/kernel-experiments.md). kOn where no wide kernel exists (head 64,
  // head 512's generic kernel) fails at plan time.
  Switch wide_work_groups = Switch::kAuto;
  // The split-keys decode kernel (gpu/split_keys_kernel.h) at head 128 and 256 and at most 8
  // score columns (one 8-column n-tile; CUDA): its warps split each tile's keys (at head 256 in
  // two pairs that split the dims of the output), with scores, softmax and P in registers and
  // one barrier per tile, instead of the generic kernel's warps taking a slice of the output's
  // dims behind three barriers. kAuto, on compute capability 8.0 and newer unless
  // wide_work_groups=on asks for the generic kernel: on at head 128 up to 8 score columns (one
  // decode row of GQA 8; H200, llama-70b, default / split keys through ladder: 1.07-1.17 from
  // 8K, 0.995 at 1K) and at head 256 up to 4 (two rows of GQA 2: 1.00-1.19; at 8 columns, which
  // kOn still takes, 0.90-0.98; kernels-ab-split-keys, kernels-ab-split-keys-head256). Its form
  // for 9-16 columns (two n-tiles per warp) lost to the generic kernel, 0.85-0.99, and was
  // deleted. kOn where it has no kernel (other head dims, more than 8 columns, HIP) fails at
  // plan time, as does kOn with wide_work_groups=on (two different kernels).
  Switch split_keys = Switch::kAuto;
  // K/V copies under an L2 evict-first policy (CUDA). kAuto: where the K/V a call reads is
  // larger than L2, so the stream would evict the 3D partials before the merge reads them
  // (kernels-ab-evict: 1.5-5.7 % faster at 32K); kOn forces the hint where the K/V fits L2,
  // where it cost the sliding preset 0.7 µs (back-to-back calls no longer find K/V in L2).
  Switch evict_first = Switch::kAuto;

  // InvalidArgument for combinations no shape can run (kOn for merge_in_kernel / merge_overlap /
  // attention_overlap, which only kAuto can decide safely, or for release_next, which is kAuto;
  // split_keys=on beside wide_work_groups=on).
  Status Validate() const;
  // "head512=team-by-dims split_keys=off" -- the non-default fields; "defaults" when none.
  std::string ToString() const;
};

std::string_view ToString(Head512Kernel k);  // "auto" | "generic" | "team-by-dims" | ...
std::string_view ToString(Switch s);         // "auto" | "off" | "on"
Result<Head512Kernel> ParseHead512Kernel(std::string_view s);
Result<Switch> ParseSwitch(std::string_view s);
// TuningConfig's fields by the names ToString writes (head512 first, then the switches): the one
// list the parsers below and the kernel runner's cell parameters use.
// (A vector, not a span: the header is also read by the GPU compilers, in C++17.)
const std::vector<std::string_view>& TuningFieldNames();
// Sets the field `name` from `value` ("auto" restores its default); InvalidArgument for a name
// that is no field (a removed field, e.g. bulk_copies, says so and why) or a value the field does
// not take (saying what it takes). No Validate().
Status SetTuningField(TuningConfig* tuning, std::string_view name, std::string_view value);
// The inverse of TuningConfig::ToString: name=value pairs separated by spaces or commas (e.g.
// "split_keys=off wide_work_groups=on"); "" or "defaults" is every field at its default. Fields
// not named keep their defaults; an unknown field, a bad value, a field named twice or a
// combination Validate() refuses is InvalidArgument naming it.
Result<TuningConfig> ParseTuning(std::string_view text);

}  // namespace ladder::kernels
