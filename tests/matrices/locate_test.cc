// The `locate` option: what it reads, its defaults, and that the cell keys the coordinator builds
// for probes (CellKey) are the keys Expand gives. Refusals live in tests/matrices/bad/locate-*.
#include <string>

#include <gtest/gtest.h>

#include "ladder/matrices/matrix.h"
#include "test_util.h"

namespace ladder::matrices {
namespace {

using testing::MustExpand;
using testing::MustParse;
using testing::ParseError;

constexpr const char* kLadder = R"(name: m
runner: engine
axes:
  backend: [TRITON_ATTN, FLASHINFER]
  depth: [1024, 2048, 4096, 8192]
  spec: [off, mtp-k1]
pair: [spec]
together: [depth]
replicates: {sessions: 3}
)";

TEST(MatrixLocate, ReadsEveryField) {
  const Matrix m = MustParse(std::string(kLadder) +
                             "locate: {axis: depth, where: ratio = 1, resolution: 0.25 octave, "
                             "min_step: 256, max_sessions: 5}\n");
  ASSERT_TRUE(m.locate.has_value());
  EXPECT_EQ(m.locate->axis, "depth");
  EXPECT_EQ(m.locate->pair_axis, "spec");
  EXPECT_DOUBLE_EQ(m.locate->resolution_octaves, 0.25);
  EXPECT_EQ(m.locate->min_step, 256);
  EXPECT_EQ(m.locate->max_sessions, 5);
}

TEST(MatrixLocate, DefaultsAndSpellings) {
  const Matrix m = MustParse(std::string(kLadder) + "locate: {axis: depth}\n");
  ASSERT_TRUE(m.locate.has_value());
  EXPECT_DOUBLE_EQ(m.locate->resolution_octaves, 0.25);
  EXPECT_EQ(m.locate->min_step, 1);
  EXPECT_EQ(m.locate->max_sessions, 6);  // twice the planned sessions
  EXPECT_DOUBLE_EQ(MustParse(std::string(kLadder) + "locate: {axis: depth, resolution: 0.5}\n")
                       .locate->resolution_octaves,
                   0.5);
  EXPECT_DOUBLE_EQ(
      MustParse(std::string(kLadder) + "locate: {axis: depth, resolution: 1 octaves}\n")
          .locate->resolution_octaves,
      1.0);
  EXPECT_TRUE(MustParse(std::string(kLadder) + "locate: {axis: depth, where: \"ratio=1\"}\n")
                  .locate.has_value());
}

TEST(MatrixLocate, OneSessionStillAllowsTwoPerProbe) {
  const Matrix m = MustParse(R"(name: m
runner: kernel
axes: {depth: [256, 4096], path: [2d, 3d]}
pair: [path]
locate: {axis: depth}
)");
  ASSERT_TRUE(m.locate.has_value());
  EXPECT_EQ(m.locate->max_sessions, 2);  // one session cannot decide a probe
}

TEST(MatrixLocate, ErrorsNameLocationAndField) {
  EXPECT_EQ(ParseError(std::string(kLadder) + "locate: {axis: dept}\n"),
            "m.yaml:10:16: locate.axis: \"dept\" is not an axis (did you mean \"depth\"?); axes: "
            "backend, depth, spec");
  EXPECT_EQ(ParseError(std::string(kLadder) + "locate: {axis: depth, min_step: 0}\n"),
            "m.yaml:10:33: locate.min_step: expected a positive integer, got 0");
  EXPECT_EQ(ParseError(std::string(kLadder) + "locate: {axis: depth, max_sessions: 2}\n"),
            "m.yaml:10:37: locate.max_sessions: expected an integer of at least 3, got 2");
  EXPECT_EQ(ParseError(std::string(kLadder) + "locate: {axis: depth, resolution: 0 octave}\n"),
            "m.yaml:10:35: locate.resolution: expected a resolution in octaves above 0 and at "
            "most 16, such as 0.25 octave, got 0 octave");
}

TEST(MatrixLocate, CellKeyIsTheExpansionsKey) {
  const Matrix m = MustParse(R"(name: m
runner: kernel
axes:
  depth: [256, 4096]
  rate: [0.5, 2.0]
  path: [2d, 3d]
  exact: [true, false]
fixed: {backend: cpu}
pair: [path]
)");
  const Expansion e = MustExpand(m);
  std::vector<std::string> order;
  for (const Axis& axis : m.axes) order.push_back(axis.name);
  ASSERT_EQ(e.cells.size(), 16u);
  for (const Cell& cell : e.cells) EXPECT_EQ(CellKey(order, cell.axes), cell.key);
  nlohmann::json probe = e.cells[0].axes;
  probe["depth"] = 1024;
  EXPECT_EQ(CellKey(order, probe), "depth=1024,rate=0.5,path=2d,exact=true");
}

}  // namespace
}  // namespace ladder::matrices
