// The path and split the GPU backends take for a call, decided in one place for the device
// entry point and the GPU bench, so a bench point measures the split an engine gets.
#pragma once

#include "ladder/kernels/attention.h"

namespace ladder::kernels::internal {

// The policy fed with the launched kernel's occupancy and tile (asked of the backend once per
// kernel and process) and the keys one query block sees (KeysSeen).
PathDecision ChooseDevicePath(const AttentionShape& shape, int num_seqs, int max_query_len,
                              int max_kv_len, const RunOptions& options, int sm_count);

}  // namespace ladder::kernels::internal
