// WorkSignal: a generation counter that long polls wait on without holding the scheduler's mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "ladder/common/mutex.h"

namespace ladder::coordinator {

// Signalled by every change that may let a session lease (new units, re-queued units, new
// sessions, shutdown). Its own mutex, taken after the scheduler's when both are held, so long
// polls can wait on it without the scheduler's; the generation makes a signal between two waits
// impossible to miss. Thread-safe.
class WorkSignal {
 public:
  // Bumps the generation, wakes every waiter, then calls the listener (outside the lock: the
  // listener may read generation()).
  void NotifyAll() ABSL_LOCKS_EXCLUDED(mu_) {
    std::function<void()> listener;
    {
      MutexLock lock(&mu_);
      ++generation_;
      listener = listener_;
    }
    cv_.notify_all();
    if (listener) listener();
  }
  void SetListener(std::function<void()> listener) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    listener_ = std::move(listener);
  }
  uint64_t generation() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return generation_;
  }
  // Blocks until the generation differs from `seen` or `deadline` passes; the generation then.
  uint64_t WaitUntil(uint64_t seen, std::chrono::steady_clock::time_point deadline)
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    mu_.WaitUntil(cv_, deadline, [this, seen]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return generation_ != seen;  // called with mu_ held, inside the wait
    });
    return generation_;
  }

 private:
  mutable Mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> listener_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ladder::coordinator
