// The header-only helpers every library shares: sizes as users type them, and the clocks.
#include <gtest/gtest.h>

#include <thread>

#include "ladder/common/size.h"
#include "ladder/common/time.h"

namespace ladder {
namespace {

TEST(ParseSize, ReadsDigitsAndTheKSuffix) {
  EXPECT_EQ(*ParseSize("4096"), 4096);
  EXPECT_EQ(*ParseSize("32K"), 32768);
  EXPECT_EQ(*ParseSize("1k"), 1024);
}

TEST(ParseSize, RefusesWhatIsNotAPositiveSizeAndSaysWhy) {
  for (const char* bad :
       {"", "K", "0", "-1", "1.5K", "12KB", "1M", " 1", "99999999999", "2097152K"}) {
    absl::StatusOr<int> size = ParseSize(bad);
    ASSERT_FALSE(size.ok()) << bad;
    EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(size.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << size.status();
  }
  EXPECT_EQ(*ParseSize("2097151"), 2097151);
}

TEST(ParseSizeList, ReadsACommaSeparatedListAndRefusesEmptyItems) {
  EXPECT_EQ(*ParseSizeList("1K,8K,32768"), (std::vector<int>{1024, 8192, 32768}));
  EXPECT_EQ(*ParseSizeList("7"), (std::vector<int>{7}));
  EXPECT_FALSE(ParseSizeList("1K,,2K").ok());
  EXPECT_FALSE(ParseSizeList("1K,").ok());
  EXPECT_FALSE(ParseSizeList("").ok());
}

TEST(Clocks, WallTimeIsUnixMillisecondsAndSteadyTimeMoves) {
  // 2020-01-01 and 2100-01-01 in Unix milliseconds: a seconds or microseconds clock fails.
  EXPECT_GT(UnixNowMs(), 1577836800000);
  EXPECT_LT(UnixNowMs(), 4102444800000);
  const int64_t before = SteadyNowMs();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(SteadyNowMs() - before, 20);
}

}  // namespace
}  // namespace ladder
