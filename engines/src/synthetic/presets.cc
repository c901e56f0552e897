// Presets (model shapes) and the acceptance curve.
#include <algorithm>
#include <cstdlib>

#include "../message.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "model.h"

namespace ladder::engines::synthetic {
namespace {

using internal::Cat;

// `groups` repetitions of (`sliding_per_group` sliding layers, then one global layer).
std::vector<LayerSpec> Alternating(int groups, int sliding_per_group, LayerSpec sliding,
                                   LayerSpec global) {
  std::vector<LayerSpec> layers;
  for (int g = 0; g < groups; ++g) {
    for (int s = 0; s < sliding_per_group; ++s) layers.push_back(sliding);
    layers.push_back(global);
  }
  return layers;
}

std::vector<Preset> AllPresets() {
  std::vector<Preset> out;
  {
    // Gemma 4 31B: 60 layers, 5 sliding (32 q / 16 kv heads, head 256, window 1024) then one
    // global (32 q / 4 kv heads, head 512), hidden 5376. The MLP width (4 x hidden) and the
    // drafter's attention geometry (the target's, as its KV is shared) are assumptions.
    Preset p;
    p.name = "gemma4-31b";
    LayerSpec sliding{LayerKind::kSliding, 32, 16, 256, 1024};
    LayerSpec global{LayerKind::kGlobal, 32, 4, 512, 0};
    p.target = {"gemma4-31b", 5376, 21504, 262144, Alternating(10, 5, sliding, global)};
    p.drafter = {"gemma4-31b-assistant", 1024, 4096, 262144, Alternating(1, 3, sliding, global)};
    p.max_model_len = 131072;
    out.push_back(p);
  }
  {
    // A small model of the same structure for CPU tests (head sizes are the smallest the
    // kernels support).
    Preset p;
    p.name = "tiny";
    LayerSpec sliding{LayerKind::kSliding, 4, 2, 64, 128};
    LayerSpec global{LayerKind::kGlobal, 2, 1, 128, 0};
    p.target = {"tiny", 128, 256, 1024, Alternating(1, 5, sliding, global)};
    p.drafter = {"tiny-assistant", 64, 128, 1024, Alternating(1, 1, sliding, global)};
    p.max_model_len = 32768;
    out.push_back(p);
  }
  return out;
}

}  // namespace

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const auto& p : AllPresets()) names.push_back(p.name);
  return names;
}

absl::StatusOr<Preset> FindPreset(std::string_view name) {
  for (auto& p : AllPresets()) {
    if (p.name == name) return p;
  }
  std::string known;
  for (const auto& n : PresetNames()) known += (known.empty() ? "" : ", ") + n;
  return absl::InvalidArgumentError(
      Cat("synthetic engine: unknown preset \"", name, "\" (known: ", known, ")"));
}

absl::StatusOr<AcceptanceCurve> AcceptanceCurve::Parse(std::string_view text) {
  AcceptanceCurve curve;
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        Cat("synthetic engine: --acceptance \"", text, "\": ", why,
            " (expected RATE or DEPTH:RATE,DEPTH:RATE,... with rates in [0, 1])"));
  };
  std::string owned(text);
  for (absl::string_view piece : absl::StrSplit(owned, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> parts = absl::StrSplit(piece, ':');
    int depth = 0;
    double rate = 0;
    if (parts.size() == 1) {
      if (!absl::SimpleAtod(parts[0], &rate)) return bad("not a number");
    } else if (parts.size() == 2) {
      if (!absl::SimpleAtoi(parts[0], &depth) || depth < 0) return bad("bad depth");
      if (!absl::SimpleAtod(parts[1], &rate)) return bad("bad rate");
    } else {
      return bad("too many ':'");
    }
    if (rate < 0 || rate > 1) return bad("rate out of range");
    curve.points_.emplace_back(depth, rate);
  }
  if (curve.points_.empty()) return bad("empty");
  std::sort(curve.points_.begin(), curve.points_.end());
  return curve;
}

double AcceptanceCurve::At(int depth) const {
  if (points_.size() == 1) return points_[0].second;
  if (depth <= points_.front().first) return points_.front().second;
  if (depth >= points_.back().first) return points_.back().second;
  for (size_t i = 1; i < points_.size(); ++i) {
    if (depth <= points_[i].first) {
      auto [d0, r0] = points_[i - 1];
      auto [d1, r1] = points_[i];
      if (d1 == d0) return r1;
      double t = static_cast<double>(depth - d0) / static_cast<double>(d1 - d0);
      return r0 + (r1 - r0) * t;
    }
  }
  return points_.back().second;
}

}  // namespace ladder::engines::synthetic
