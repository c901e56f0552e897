// The spool's promise: a measurement written and not acknowledged survives the agent's death and
// is delivered again by the next process; an acknowledged one is never delivered again. The
// crash is a real one: a child process writes to the spool file and is killed by SIGKILL before
// it acknowledges, and the test reopens the same file in the parent.
#include "spool.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "process.h"

namespace ladder::agent {
namespace {

constexpr char kSession[] = "5b0c2a9e-1d7f-4c2e-9a8b-3f6d1e2c4a70";

SpooledResult Result(const std::string& uuid, int64_t attempt_id, const std::string& payload) {
  return SpooledResult{uuid, kSession, attempt_id, /*is_evidence=*/false, payload};
}

std::vector<std::string> Uuids(const std::vector<SpooledResult>& results) {
  std::vector<std::string> out;
  for (const auto& r : results) out.push_back(r.uuid);
  return out;
}

// Runs `body` in a forked child that then kills itself with SIGKILL: no destructor, no close, no
// checkpoint runs, as when the agent's VM is pulled from under it. The child's exit code says
// which step failed (gtest assertions cannot report from a child).
void RunInChildThenKillIt(const std::function<int()>& body) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << "fork failed";
  if (pid == 0) {
    const int failed_step = body();
    if (failed_step != 0) _exit(failed_step);
    kill(getpid(), SIGKILL);
    _exit(100);  // not reached: SIGKILL cannot be caught
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(wstatus))
      << "the child failed at step " << (WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
  ASSERT_EQ(WTERMSIG(wstatus), SIGKILL);
}

TEST(Spool, ResultsWrittenButNotAckedBeforeACrashAreDeliveredAfterReopening) {
  ladder::testing::TempDir dir;
  const std::string path = dir.File("spool.db");
  // The parent never opens the spool before the fork, so no SQLite handle crosses it.
  RunInChildThenKillIt([&] {
    auto spool = Spool::Open(path);
    if (!spool.ok()) return 1;
    if (!(*spool)->AddResult(Result("u-acked", 7, "payload-acked")).ok()) return 2;
    if (!(*spool)->AddResult(Result("u-lost-1", 7, "payload-1")).ok()) return 3;
    // The coordinator acknowledged the first result only; the crash comes before the others'.
    if (!(*spool)->Remove({"u-acked"}).ok()) return 4;
    if (!(*spool)->AddResult(Result("u-lost-2", 7, "payload-2")).ok()) return 5;
    SpooledFinish finish{kSession, 7, /*ok=*/true, "", /*measurement_count=*/3, 0};
    if (!(*spool)->AddFinish(finish).ok()) return 6;
    spool->release();  // leaked on purpose: the process dies holding the connection open
    return 0;
  });

  auto reopened = Spool::Open(path);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto pending = (*reopened)->PendingResults(100, kSession);
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(Uuids(*pending), (std::vector<std::string>{"u-lost-1", "u-lost-2"}));
  ASSERT_EQ(pending->size(), 2u);
  EXPECT_EQ((*pending)[0].payload, "payload-1");
  EXPECT_EQ((*pending)[0].attempt_id, 7);
  EXPECT_EQ((*pending)[1].payload, "payload-2");
  auto finishes = (*reopened)->PendingFinishes();
  ASSERT_TRUE(finishes.ok()) << finishes.status();
  ASSERT_EQ(finishes->size(), 1u);
  EXPECT_EQ((*finishes)[0].attempt_id, 7);
  EXPECT_EQ((*finishes)[0].measurement_count, 3);
  auto left = (*reopened)->PendingCount(7);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(*left, 2);
}

TEST(Spool, AnAckedResultIsNeverDeliveredAgainAcrossRestarts) {
  ladder::testing::TempDir dir;
  const std::string path = dir.File("spool.db");
  {
    auto spool = Spool::Open(path);
    ASSERT_TRUE(spool.ok()) << spool.status();
    for (const char* uuid : {"a", "b", "c"}) {
      ASSERT_TRUE((*spool)->AddResult(Result(uuid, 3, uuid)).ok());
    }
    ASSERT_TRUE((*spool)->Remove({"a", "c"}).ok());
  }  // dropped without acknowledging "b": a clean stop before the coordinator answered
  for (int restart = 0; restart < 2; ++restart) {
    auto spool = Spool::Open(path);
    ASSERT_TRUE(spool.ok()) << spool.status();
    auto pending = (*spool)->PendingResults(100, kSession);
    ASSERT_TRUE(pending.ok()) << pending.status();
    EXPECT_EQ(Uuids(*pending), std::vector<std::string>{"b"}) << "restart " << restart;
    auto total = (*spool)->TotalPending();
    ASSERT_TRUE(total.ok());
    EXPECT_EQ(*total, 1);
  }
}

TEST(Spool, AResultAckedInTheChildBeforeItDiesIsNotDeliveredAgain) {
  ladder::testing::TempDir dir;
  const std::string path = dir.File("spool.db");
  {
    auto spool = Spool::Open(path);
    ASSERT_TRUE(spool.ok()) << spool.status();
    ASSERT_TRUE((*spool)->AddResult(Result("before", 1, "x")).ok());
  }
  RunInChildThenKillIt([&] {
    auto spool = Spool::Open(path);
    if (!spool.ok()) return 1;
    auto pending = (*spool)->PendingResults(100, kSession);
    if (!pending.ok() || pending->size() != 1) return 2;
    if (!(*spool)->Remove({"before"}).ok()) return 3;
    spool->release();
    return 0;
  });
  auto spool = Spool::Open(path);
  ASSERT_TRUE(spool.ok()) << spool.status();
  auto total = (*spool)->TotalPending();
  ASSERT_TRUE(total.ok());
  EXPECT_EQ(*total, 0);
}

TEST(Spool, WritingTheSameResultTwiceSpoolsItOnce) {
  ladder::testing::TempDir dir;
  auto spool = Spool::Open(dir.File("spool.db"));
  ASSERT_TRUE(spool.ok()) << spool.status();
  ASSERT_TRUE((*spool)->AddResult(Result("same", 1, "first")).ok());
  ASSERT_TRUE((*spool)->AddResult(Result("same", 1, "second")).ok());
  auto pending = (*spool)->PendingResults(100, kSession);
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].payload, "first");
}

TEST(Spool, AFileThatIsNotASpoolGivesAnErrorNamingIt) {
  ladder::testing::TempDir dir;
  const std::string path = dir.File("spool.db");
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 512; ++i) out << "this is not an SQLite database ";
  }
  auto spool = Spool::Open(path);
  ASSERT_FALSE(spool.ok());
  EXPECT_NE(spool.status().message().find(path), absl::string_view::npos) << spool.status();
  EXPECT_NE(spool.status().message().find("not a database"), absl::string_view::npos)
      << spool.status();
}

TEST(Spool, APathThatCannotBeCreatedGivesAnErrorNamingIt) {
  ladder::testing::TempDir dir;
  const std::string path = dir.File("no-such-folder/spool.db");
  auto spool = Spool::Open(path);
  ASSERT_FALSE(spool.ok());
  EXPECT_EQ(spool.status().code(), absl::StatusCode::kPermissionDenied) << spool.status();
  EXPECT_NE(spool.status().message().find(path), absl::string_view::npos) << spool.status();
}

TEST(Spool, AFolderInPlaceOfTheFileGivesAnErrorNamingIt) {
  ladder::testing::TempDir dir;
  auto spool = Spool::Open(dir.path());
  ASSERT_FALSE(spool.ok());
  EXPECT_NE(spool.status().message().find(dir.path()), absl::string_view::npos) << spool.status();
}

}  // namespace
}  // namespace ladder::agent
