// The coordinator's and store's lock: a std::mutex that carries Abseil's thread-safety
// annotations, so clang's -Wthread-safety checks every ABSL_GUARDED_BY and
// ABSL_EXCLUSIVE_LOCKS_REQUIRED, and ThreadSanitizer sees the lock (it intercepts pthread
// mutexes; Debian's Abseil is not built with TSan, so an absl::Mutex is invisible to it and
// every access it guards is reported as a race).
#pragma once

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace ladder {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

  // Waits on `cv` until `done()` is true. Call with the lock held (a MutexLock in scope); it is
  // released while waiting and held again on return.
  template <class Predicate>
  void Wait(std::condition_variable& cv, Predicate done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    cv.wait(lock, done);
    lock.release();  // the caller's MutexLock still owns it
  }

  // Waits on `cv` until `done()` is true or `deadline` passes. Call with the lock held (a
  // MutexLock in scope); it is released while waiting and held again on return.
  template <class Clock, class Duration, class Predicate>
  void WaitUntil(std::condition_variable& cv, std::chrono::time_point<Clock, Duration> deadline,
                 Predicate done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    cv.wait_until(lock, deadline, done);
    lock.release();  // the caller's MutexLock still owns it
  }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace ladder
