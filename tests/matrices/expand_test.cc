// Expand: cells (order, keys, params, exclusion, A/A arm), units (grouping by pair/together,
// replicates, seeds), determinism and the cell cap.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ladder/matrices/matrix.h"
#include "test_util.h"

namespace ladder::matrices {
namespace {

using testing::MustExpand;
using testing::MustParse;
using testing::ParseError;

std::vector<std::string> Keys(const Expansion& e) {
  std::vector<std::string> keys;
  for (const Cell& cell : e.cells) keys.push_back(cell.key);
  return keys;
}

TEST(MatrixExpand, CrossProductFirstAxisSlowest) {
  const Expansion e = MustExpand(
      MustParse("name: m\nrunner: kernel\naxes:\n  backend: [cpu]\n  depth: [1024, 4096]\n"
                "  query_rows: [1, 2]\n"));
  EXPECT_EQ(Keys(e), (std::vector<std::string>{
                         "backend=cpu,depth=1024,query_rows=1",
                         "backend=cpu,depth=1024,query_rows=2",
                         "backend=cpu,depth=4096,query_rows=1",
                         "backend=cpu,depth=4096,query_rows=2",
                     }));
  for (size_t i = 0; i < e.cells.size(); ++i) EXPECT_EQ(e.cells[i].index, static_cast<int>(i));
}

TEST(MatrixExpand, KeyFormatRendersEachType) {
  const Expansion e = MustExpand(MustParse(
      "name: m\nrunner: kernel\naxes:\n  s: [TRITON_ATTN]\n  i: [32768]\n  d: [0.5, 2.0]\n"
      "  b: [true]\n"));
  EXPECT_EQ(Keys(e), (std::vector<std::string>{"s=TRITON_ATTN,i=32768,d=0.5,b=true",
                                               "s=TRITON_ATTN,i=32768,d=2.0,b=true"}));
}

TEST(MatrixExpand, ParamsMergeFixedWithAxes) {
  const Expansion e = MustExpand(MustParse(
      "name: m\nrunner: kernel\naxes: {depth: [1024]}\nfixed: {preset: tiny, head_dim: 64}\n"));
  ASSERT_EQ(e.cells.size(), 1u);
  EXPECT_EQ(e.cells[0].axes, (nlohmann::json{{"depth", 1024}}));
  EXPECT_EQ(e.cells[0].params,
            (nlohmann::json{{"depth", 1024}, {"preset", "tiny"}, {"head_dim", 64}}));
}

TEST(MatrixExpand, ExclusionsDropMatchingCells) {
  const Expansion e = MustExpand(MustParse(R"(name: m
runner: kernel
axes:
  depth: [1024, 4096, 16384]
  query_rows: [1, 2]
exclude:
  - {depth: 16384, query_rows: 2}
  - {depth: 1024}
)"));
  EXPECT_EQ(Keys(e), (std::vector<std::string>{"depth=4096,query_rows=1", "depth=4096,query_rows=2",
                                               "depth=16384,query_rows=1"}));
  EXPECT_EQ(e.cells.back().index, 2);
}

TEST(MatrixExpand, NoGroupingAxesMakesOneUnitPerReplicate) {
  const Expansion e = MustExpand(
      MustParse("name: m\nrunner: kernel\naxes: {spec: [off, k1], depth: [1, 2]}\npair: [spec]\n"
                "together: [depth]\n"));
  ASSERT_EQ(e.units.size(), 1u);
  EXPECT_EQ(e.units[0].group_key, "");
  EXPECT_EQ(e.units[0].cell_indices, (std::vector<int>{0, 1, 2, 3}));
}

TEST(MatrixExpand, PairAndTogetherGroupCellsIntoUnits) {
  const Expansion e = MustExpand(MustParse(R"(name: m
runner: engine
axes:
  attention_backend: [TRITON_ATTN, FLASHINFER]
  depth: [1024, 32768]
  spec: [off, mtp-k1]
pair: [spec]
together: [depth]
)"));
  ASSERT_EQ(e.cells.size(), 8u);
  ASSERT_EQ(e.units.size(), 2u);
  EXPECT_EQ(e.units[0].group_key, "attention_backend=TRITON_ATTN");
  EXPECT_EQ(e.units[0].cell_indices, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(e.units[1].group_key, "attention_backend=FLASHINFER");
  EXPECT_EQ(e.units[1].cell_indices, (std::vector<int>{4, 5, 6, 7}));
}

TEST(MatrixExpand, GroupsFollowFirstAppearanceWhenGroupingAxisIsInner) {
  // The paired axis is the slowest one, so a group's cells are not contiguous.
  const Expansion e = MustExpand(
      MustParse("name: m\nrunner: kernel\naxes: {policy: [legacy, spec-aware], depth: [1, 2, 3]}\n"
                "pair: [policy]\n"));
  ASSERT_EQ(e.units.size(), 3u);
  EXPECT_EQ(e.units[0].group_key, "depth=1");
  EXPECT_EQ(e.units[0].cell_indices, (std::vector<int>{0, 3}));
  EXPECT_EQ(e.units[2].group_key, "depth=3");
  EXPECT_EQ(e.units[2].cell_indices, (std::vector<int>{2, 5}));
}

TEST(MatrixExpand, ReplicatesMakeOneUnitPerSession) {
  const Expansion e = MustExpand(
      MustParse("name: m\nrunner: kernel\naxes: {depth: [1, 2], path: [2d, 3d]}\npair: [path]\n"
                "replicates: {sessions: 3, processes: 2, rounds: 4}\n"));
  ASSERT_EQ(e.units.size(), 6u);
  for (size_t i = 0; i < e.units.size(); ++i) {
    EXPECT_EQ(e.units[i].index, static_cast<int>(i));
    EXPECT_EQ(e.units[i].replicate, static_cast<int>(i % 3));
    EXPECT_EQ(e.units[i].group_key, i < 3 ? "depth=1" : "depth=2");
    EXPECT_EQ(e.units[i].cell_indices.size(), 2u);
  }
  std::set<uint64_t> seeds;
  for (const Unit& unit : e.units) seeds.insert(unit.seed);
  EXPECT_EQ(seeds.size(), e.units.size()) << "unit seeds should differ";
  EXPECT_EQ(e.units[4].seed, UnitSeed(DefaultSeed("m"), 1, 1));
}

TEST(MatrixExpand, SeedChangesUnitSeeds) {
  const std::string base = "name: m\nrunner: kernel\naxes: {depth: [1]}\n";
  const Expansion a = MustExpand(MustParse(base + "seed: 1\n"));
  const Expansion b = MustExpand(MustParse(base + "seed: 2\n"));
  EXPECT_NE(a.units[0].seed, b.units[0].seed);
}

TEST(MatrixExpand, AAControlInsertsArmAfterItsSource) {
  const Expansion e = MustExpand(MustParse(R"(name: m
runner: engine
axes:
  depth: [1024, 8192]
  spec: [off, mtp-k1]
pair: [spec]
aa_control: {axis: spec, of: "off", as: off-copy}
exclude:
  - {depth: 8192, spec: "off"}
)"));
  // The exclusion naming `off` drops its copy too.
  EXPECT_EQ(Keys(e),
            (std::vector<std::string>{"depth=1024,spec=off", "depth=1024,spec=off-copy",
                                      "depth=1024,spec=mtp-k1", "depth=8192,spec=mtp-k1"}));
  // The copy runs exactly the configuration of `off`; only its key and axes differ.
  EXPECT_EQ(e.cells[1].axes["spec"], "off-copy");
  EXPECT_EQ(e.cells[1].params, e.cells[0].params);
  ASSERT_EQ(e.units.size(), 2u);
  EXPECT_EQ(e.units[0].cell_indices, (std::vector<int>{0, 1, 2}));
}

TEST(MatrixExpand, ExclusionCanNameTheAAArm) {
  const Expansion e = MustExpand(MustParse(R"(name: m
runner: engine
axes: {depth: [1, 2], spec: [off, k1]}
aa_control: {axis: spec, of: "off", as: copy}
exclude: [{depth: 2, spec: copy}]
)"));
  EXPECT_EQ(e.cells.size(), 5u);
  EXPECT_EQ(e.cells.back().key, "depth=2,spec=k1");
}

TEST(MatrixExpand, IsDeterministic) {
  const std::string yaml = R"(name: det
runner: kernel
axes: {a: [x, y, z], depth: [1, 2, 3], q: [1, 2]}
exclude: [{a: y, q: 2}]
pair: [q]
replicates: {sessions: 2}
)";
  const Expansion first = MustExpand(MustParse(yaml));
  const Expansion second = MustExpand(MustParse(yaml));
  ASSERT_EQ(first.cells.size(), second.cells.size());
  for (size_t i = 0; i < first.cells.size(); ++i) {
    EXPECT_EQ(first.cells[i].key, second.cells[i].key);
    EXPECT_EQ(first.cells[i].params, second.cells[i].params);
  }
  ASSERT_EQ(first.units.size(), second.units.size());
  for (size_t i = 0; i < first.units.size(); ++i) {
    EXPECT_EQ(first.units[i].cell_indices, second.units[i].cell_indices);
    EXPECT_EQ(first.units[i].seed, second.units[i].seed);
    EXPECT_EQ(first.units[i].group_key, second.units[i].group_key);
  }
  // Pinned so a change to the mixing function is a visible, deliberate change.
  EXPECT_EQ(DefaultSeed("det"), 0xca9a2c18f4620362ULL);
  EXPECT_EQ(UnitSeed(0, 0, 0), 0x238275bc38fcbe91ULL);
}

TEST(MatrixExpand, CapExceededAndOverridable) {
  // 100 x 100 x 11 = 110000 cells > 100000.
  std::string yaml = "name: big\nrunner: kernel\naxes:\n";
  for (const char* axis : {"a", "b"}) {
    yaml += std::string("  ") + axis + ": [";
    for (int i = 0; i < 100; ++i) yaml += (i ? ", " : "") + std::to_string(i);
    yaml += "]\n";
  }
  yaml += "  c: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";
  EXPECT_EQ(ParseError(yaml),
            "m.yaml:4:3: axes: 110000 cells exceeds the cap of 100000; pass --max-cells to "
            "raise it");
  // Exclusions count: dropping c=10 leaves exactly 100000 cells.
  const Matrix at_cap = MustParse(yaml + "exclude: [{c: 10}]\n");
  EXPECT_EQ(MustExpand(at_cap).cells.size(), 100000u);

  ParseOptions raised;
  raised.max_cells = 200000;
  const Matrix m = MustParse(yaml, raised);
  EXPECT_EQ(MustExpand(m, raised).cells.size(), 110000u);
  auto capped = Expand(m);  // default cap
  ASSERT_FALSE(capped.ok());
  EXPECT_EQ(capped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(capped.status().message().find("110000 cells exceeds the cap of 100000"),
            std::string::npos);
}

TEST(MatrixExpand, CapIsCheckedWithoutEnumeratingHugeProducts) {
  // 10^12 cells: must fail fast rather than enumerate.
  std::string yaml = "name: huge\nrunner: kernel\naxes:\n";
  for (int a = 0; a < 6; ++a) {
    yaml += "  a" + std::to_string(a) + ": [";
    for (int i = 0; i < 100; ++i) yaml += (i ? ", " : "") + std::to_string(i);
    yaml += "]\n";
  }
  EXPECT_NE(ParseError(yaml).find("1000000000000 cells exceeds the cap of 100000"),
            std::string::npos);
}

}  // namespace
}  // namespace ladder::matrices
