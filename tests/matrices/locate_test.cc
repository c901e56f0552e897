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
                             "min_step: 256, max_sessions: 7}\n");
  ASSERT_TRUE(m.locate.has_value());
  EXPECT_EQ(m.locate->axis, "depth");
  EXPECT_EQ(m.locate->pair_axis, "spec");
  EXPECT_DOUBLE_EQ(m.locate->resolution_octaves, 0.25);
  EXPECT_EQ(m.locate->min_step, 256);
  EXPECT_EQ(m.locate->max_sessions, 7);
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

TEST(MatrixLocate, OneSessionStillAllowsAProbeToBeDecided) {
  const Matrix m = MustParse(R"(name: m
runner: kernel
axes: {depth: [256, 4096], path: [2d, 3d]}
pair: [path]
locate: {axis: depth}
)");
  ASSERT_TRUE(m.locate.has_value());
  // A probe is decided from its sixth session on (kLocateMinSessions), however few are planned.
  EXPECT_EQ(m.locate->max_sessions, kLocateMinSessions);
}

TEST(MatrixLocate, ErrorsNameLocationAndField) {
  EXPECT_EQ(ParseError(std::string(kLadder) + "locate: {axis: dept}\n"),
            "m.yaml:10:16: locate.axis: \"dept\" is not an axis (did you mean \"depth\"?); axes: "
            "backend, depth, spec");
  EXPECT_EQ(ParseError(std::string(kLadder) + "locate: {axis: depth, min_step: 0}\n"),
            "m.yaml:10:33: locate.min_step: expected a positive integer, got 0");
  EXPECT_EQ(ParseError(std::string(kLadder) + "locate: {axis: depth, max_sessions: 2}\n"),
            "m.yaml:10:37: locate.max_sessions: expected an integer of at least 6, got 2");
  EXPECT_EQ(ParseError(std::string(kLadder) + "locate: {axis: depth, max_sessions: 5}\n"),
            "m.yaml:10:37: locate.max_sessions: expected an integer of at least 6, got 5");
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

TEST(MatrixLocate, ParseCellKeyInvertsCellKey) {
  const Matrix m = MustParse(R"(name: m
runner: kernel
axes:
  depth: [256, 4096]
  rate: [0.5, 2.0]
  path: [2d, 3d]
fixed: {backend: cpu}
pair: [path]
)");
  const Expansion e = MustExpand(m);
  std::vector<std::string> order;
  for (const Axis& axis : m.axes) order.push_back(axis.name);
  for (const Cell& cell : e.cells) {
    const std::vector<CellKeyPart> parts = ParseCellKey(cell.key);
    ASSERT_EQ(parts.size(), order.size()) << cell.key;
    for (size_t i = 0; i < parts.size(); ++i) {
      EXPECT_EQ(parts[i].axis, order[i]);
      EXPECT_EQ(parts[i].value, ValueToString(cell.axes.at(order[i])));
    }
  }
  EXPECT_TRUE(ParseCellKey("").empty());
  const std::vector<CellKeyPart> odd = ParseCellKey("a=1,,b");
  ASSERT_EQ(odd.size(), 2u);
  EXPECT_EQ(odd[1].axis, "b");
  EXPECT_EQ(odd[1].value, "");
}

TEST(MatrixLocate, CellKeyWithoutDropsTheNamedAxesInOrder) {
  EXPECT_EQ(CellKeyWithout("depth=1024,rate=0.5,path=2d", {"depth", "path"}), "rate=0.5");
  EXPECT_EQ(CellKeyWithout("depth=1024,rate=0.5,path=2d", {"path"}), "depth=1024,rate=0.5");
  EXPECT_EQ(CellKeyWithout("depth=1024,rate=0.5", {}), "depth=1024,rate=0.5");
  EXPECT_EQ(CellKeyWithout("depth=1024", {"depth"}), "");
}

TEST(MatrixLocate, StoredJsonRoundTripsAndTypesProbes) {
  const Matrix m = MustParse(std::string(kLadder) +
                             "locate: {axis: depth, where: ratio = 1, resolution: 0.25 octave, "
                             "min_step: 256, max_sessions: 7}\n");
  const nlohmann::json stored = LocateToJson(m);
  auto c = LocateFromJson(stored);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->axis, "depth");
  EXPECT_EQ(c->pair_axis, "spec");
  EXPECT_EQ(c->arm_a, "off");
  EXPECT_EQ(c->arm_b, "mtp-k1");
  ASSERT_EQ(c->declared.size(), 4u);
  EXPECT_EQ(c->declared[3], nlohmann::json(8192));
  EXPECT_EQ(c->min_step, 256);
  EXPECT_EQ(c->max_sessions, 7);
  EXPECT_DOUBLE_EQ(c->resolution_octaves, 0.25);
  EXPECT_TRUE(c->integer_axis);
  EXPECT_EQ(c->ValueOf(2816.0), nlohmann::json(2816));
  EXPECT_TRUE(c->ValueOf(2816.0).is_number_integer());
}

TEST(MatrixLocate, StoredJsonWithoutLocateOrWithMissingFieldsIsRefused) {
  EXPECT_TRUE(LocateToJson(MustParse(kLadder)).empty());
  EXPECT_EQ(LocateFromJson(nlohmann::json::object()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LocateFromJson(nlohmann::json{{"axis", "depth"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LocateFromJson(nlohmann::json::parse(
                               R"({"axis":"depth","pair_axis":"path","arms":["2d"],"values":[1],)"
                               R"("resolution_octaves":0.25,"min_step":256,"max_sessions":4})"))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ladder::matrices
