// Collects a synthetic engine's log lines in a test, for counting probe and path lines.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ladder/engines/synthetic_engine.h"

namespace ladder::engines {

class CapturedLog {
 public:
  SyntheticEngine::LogFn Fn() {
    return [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(line);
    };
  }
  // Lines containing `needle`.
  int Count(std::string_view needle) const {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& l : lines_) n += l.find(needle) != std::string::npos ? 1 : 0;
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;  // guarded by mu_
};

}  // namespace ladder::engines
