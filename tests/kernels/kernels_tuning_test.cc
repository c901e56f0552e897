// TuningConfig: parsing, validation and its one-line description (host only; the dispatch
// table's answers to each tuning are tested on the GPU in kernels_gpu_test.cc).
#include <gtest/gtest.h>

#include "ladder/kernels/attention.h"
#include "ladder/kernels/tuning.h"

namespace lk = ladder::kernels;

namespace {

TEST(Tuning, DefaultsAreValidAndSayDefaults) {
  const lk::TuningConfig t;
  EXPECT_TRUE(t.Validate().ok());
  EXPECT_EQ(t.ToString(), "defaults");
}

TEST(Tuning, EveryKernelNameParsesBackToItself) {
  for (lk::Head512Kernel k :
       {lk::Head512Kernel::kAuto, lk::Head512Kernel::kGeneric, lk::Head512Kernel::kTeamByDims,
        lk::Head512Kernel::kTeamByColumn, lk::Head512Kernel::kTeamSplit,
        lk::Head512Kernel::kTeamSplitWgmma, lk::Head512Kernel::kTeamColumns}) {
    auto parsed = lk::ParseHead512Kernel(lk::ToString(k));
    ASSERT_TRUE(parsed.ok()) << lk::ToString(k);
    EXPECT_EQ(*parsed, k);
  }
  for (lk::Switch s : {lk::Switch::kAuto, lk::Switch::kOff, lk::Switch::kOn}) {
    auto parsed = lk::ParseSwitch(lk::ToString(s));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s);
  }
}

TEST(Tuning, UnknownNamesAreRefusedListingTheKnownOnes) {
  auto k = lk::ParseHead512Kernel("variant3");
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code, lk::ErrorCode::kInvalidArgument);
  EXPECT_NE(k.error().message.find("team-split-wgmma"), std::string::npos) << k.error().message;
  auto s = lk::ParseSwitch("1");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("auto, off or on"), std::string::npos) << s.error().message;
}

TEST(Tuning, CombinationsNoShapeCanRunAreRefused) {
  lk::TuningConfig forced_merge;
  forced_merge.merge_in_kernel = lk::Switch::kOn;
  EXPECT_NE(forced_merge.Validate().error().message.find("merge_in_kernel"), std::string::npos);

  lk::TuningConfig forced_overlap;
  forced_overlap.merge_overlap = lk::Switch::kOn;
  EXPECT_FALSE(forced_overlap.Validate().ok());

  lk::TuningConfig forced_attention_overlap;
  forced_attention_overlap.attention_overlap = lk::Switch::kOn;
  EXPECT_NE(forced_attention_overlap.Validate().error().message.find("attention_overlap"),
            std::string::npos);

  lk::TuningConfig forced_release;  // (on was the same as auto)
  forced_release.release_next = lk::Switch::kOn;
  EXPECT_EQ(forced_release.Validate().error().code, lk::ErrorCode::kInvalidArgument);
  EXPECT_NE(forced_release.Validate().error().message.find("release_next takes auto or off"),
            std::string::npos)
      << forced_release.Validate().error().message;

  lk::TuningConfig two_kernels;  // the split-keys kernel and the wide generic one
  two_kernels.split_keys = lk::Switch::kOn;
  two_kernels.wide_work_groups = lk::Switch::kOn;
  EXPECT_NE(two_kernels.Validate().error().message.find("split_keys=on and wide_work_groups=on"),
            std::string::npos);
}

TEST(Tuning, ValidCombinationsPassAndAreDescribed) {
  lk::TuningConfig t;
  t.head512 = lk::Head512Kernel::kTeamByDims;
  t.merge_in_kernel = lk::Switch::kOff;
  t.evict_first = lk::Switch::kOff;
  t.attention_overlap = lk::Switch::kOff;
  t.merge_in_cluster = lk::Switch::kOn;   // (auto: on only with a window)
  t.wide_work_groups = lk::Switch::kOff;  // (auto: on at head 128)
  t.split_keys = lk::Switch::kOn;         // (auto: on at head 128 and <= 8 columns)
  EXPECT_TRUE(t.Validate().ok());
  EXPECT_EQ(t.ToString(),
            "head512=team-by-dims merge_in_kernel=off evict_first=off "
            "attention_overlap=off merge_in_cluster=on wide_work_groups=off split_keys=on");
}

// The CPU backend ignores tunings, but an invalid one is still refused: a matrix that runs on the
// CPU in CI must not hide a tuning that every GPU would refuse.
TEST(Tuning, RunAttentionRefusesAnInvalidTuningOnEveryBackend) {
  lk::AttentionShape shape;
  shape.dtype = lk::DType::kF32;
  auto problem = lk::MakeProblem(shape, {{1, 64}}, 1);
  ASSERT_TRUE(problem.ok());
  lk::RunOptions options;
  lk::HostTensor out;
  ASSERT_TRUE(lk::RunAttention(lk::Backend::kCpu, *problem, options, &out).ok());
  options.tuning.merge_overlap = lk::Switch::kOn;
  auto refused = lk::RunAttention(lk::Backend::kCpu, *problem, options, &out);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, lk::ErrorCode::kInvalidArgument);
}

}  // namespace

namespace {

// ParseTuning reads what ToString writes, every field included, and "defaults".
TEST(Tuning, ParseReadsWhatToStringWrites) {
  lk::TuningConfig t;
  t.head512 = lk::Head512Kernel::kTeamSplit;
  t.merge_in_kernel = lk::Switch::kOff;
  t.merge_overlap = lk::Switch::kOff;
  t.evict_first = lk::Switch::kOn;
  t.attention_overlap = lk::Switch::kOff;
  t.merge_in_cluster = lk::Switch::kOn;
  t.wide_work_groups = lk::Switch::kOff;
  t.split_keys = lk::Switch::kOn;
  t.release_next = lk::Switch::kOff;
  auto parsed = lk::ParseTuning(t.ToString());
  ASSERT_TRUE(parsed.ok()) << parsed.error().ToString();
  EXPECT_EQ(parsed->ToString(), t.ToString());
  lk::TuningConfig by_dims;
  by_dims.head512 = lk::Head512Kernel::kTeamByDims;
  auto by_dims_parsed = lk::ParseTuning(by_dims.ToString());
  ASSERT_TRUE(by_dims_parsed.ok()) << by_dims_parsed.error().ToString();
  EXPECT_EQ(by_dims_parsed->head512, lk::Head512Kernel::kTeamByDims);
  for (const char* none : {"", "defaults", "  "}) {
    auto d = lk::ParseTuning(none);
    ASSERT_TRUE(d.ok()) << none;
    EXPECT_EQ(d->ToString(), "defaults");
  }
  auto commas = lk::ParseTuning("split_keys=off,wide_work_groups=on");
  ASSERT_TRUE(commas.ok()) << commas.error().ToString();
  EXPECT_EQ(commas->split_keys, lk::Switch::kOff);
  EXPECT_EQ(commas->wide_work_groups, lk::Switch::kOn);
}

// What it cannot read is refused, naming the part at fault.
TEST(Tuning, ParseRefusesWhatItCannotReadByName) {
  struct Bad {
    const char* text;
    const char* says;
  };
  for (const Bad& b :
       {Bad{"split_keys", "is not name=value"}, Bad{"split_key=on", "unknown field 'split_key'"},
        Bad{"split_keys=yes", "split_keys: expected auto, off or on"},
        Bad{"head512=team", "head512: unknown head-512 kernel"},
        Bad{"evict_first=on evict_first=off", "evict_first named twice"},
        Bad{"split_keys=on wide_work_groups=on", "two different kernels"},
        Bad{"release_next=on", "release_next takes auto or off"}}) {
    auto r = lk::ParseTuning(b.text);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.error().code, lk::ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(b.says), std::string::npos) << r.error().message;
  }
}

// A removed field is refused saying that it was removed and why, by SetTuningField and
// ParseTuning (--tuning), whatever its value; it is no longer a field name (so the kernel runner
// does not take it as a cell parameter).
TEST(Tuning, ARemovedFieldIsRefusedSayingItWasRemoved) {
  for (const char* value : {"on", "off", "auto"}) {
    lk::TuningConfig t;
    const lk::Status set = lk::SetTuningField(&t, "bulk_copies", value);
    ASSERT_FALSE(set.ok()) << value;
    EXPECT_EQ(set.error().code, lk::ErrorCode::kInvalidArgument);
    EXPECT_NE(set.error().message.find("'bulk_copies' was removed"), std::string::npos)
        << set.error().message;
    EXPECT_EQ(set.error().message.find("unknown field"), std::string::npos) << set.error().message;
  }
  auto parsed = lk::ParseTuning("bulk_copies=on");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message.rfind("tuning: field 'bulk_copies' was removed", 0), 0u)
      << parsed.error().message;
  for (std::string_view name : lk::TuningFieldNames()) EXPECT_NE(name, "bulk_copies");
}

}  // namespace
