// Every example in matrices/examples/ parses and expands, with the shapes its comments promise.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ladder/matrices/matrix.h"
#include "test_util.h"

namespace ladder::matrices {
namespace {

using testing::MustExpand;

std::string ExamplePath(const std::string& name) {
  return std::string(LADDER_MATRICES_EXAMPLES_DIR) + "/" + name;
}

Matrix MustParseExample(const std::string& name) {
  auto matrix = ParseMatrixFile(ExamplePath(name));
  EXPECT_TRUE(matrix.ok()) << matrix.status();
  return matrix.ok() ? *std::move(matrix) : Matrix{};
}

// What a user copies, each file saying what it studies and how long it takes, and the kernel
// lab's A/B matrices beside the kernels (kernels/ab/).
TEST(MatrixParser, EveryExampleAndLabMatrixParsesAndExpands) {
  for (const std::string dir : {LADDER_MATRICES_EXAMPLES_DIR, LADDER_KERNELS_AB_DIR}) {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".yaml") continue;
      ++count;
      SCOPED_TRACE(entry.path().string());
      auto matrix = ParseMatrixFile(entry.path().string());
      ASSERT_TRUE(matrix.ok()) << matrix.status();
      EXPECT_EQ(matrix->name + ".yaml", entry.path().filename().string())
          << "a matrix's file is named after it";
      auto expansion = Expand(*matrix);
      ASSERT_TRUE(expansion.ok()) << expansion.status();
      EXPECT_FALSE(expansion->units.empty());
    }
    EXPECT_GE(count, 4) << dir;
  }
}

// An example says, in its opening comment, how long it takes (a user picks one by it).
TEST(MatrixParser, EveryExampleSaysHowLongItTakes) {
  for (const auto& entry : std::filesystem::directory_iterator(LADDER_MATRICES_EXAMPLES_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    std::ifstream in(entry.path());
    std::string line, comment;
    while (std::getline(in, line) && line.rfind("#", 0) == 0) comment += line + "\n";
    EXPECT_NE(comment.find("Takes "), std::string::npos)
        << entry.path().filename() << ": its opening comment has no \"Takes ...\" line";
  }
}

TEST(MatrixExpand, DemoCpuExample) {
  const Matrix m = MustParseExample("demo-cpu.yaml");
  EXPECT_EQ(m.runner, "kernel");
  EXPECT_EQ(m.fixed.at("backend"), "cpu");
  EXPECT_TRUE(m.requirements.gpu_vendor.empty());
  const Expansion e = MustExpand(m);
  EXPECT_EQ(e.cells.size(), 12u);
  EXPECT_EQ(e.units.size(), 18u);  // 6 (depth, query_rows) groups x 3 sessions
  EXPECT_EQ(e.units[0].group_key, "depth=256,query_rows=1");
  EXPECT_EQ(e.cells[e.units[0].cell_indices[1]].key, "depth=256,query_rows=1,path=3d");
  EXPECT_EQ(e.cells[0].params["preset"], "tiny");
}

TEST(MatrixExpand, Gemma4MtpLadderExample) {
  const Matrix m = MustParseExample("gemma4-mtp-ladder.yaml");
  EXPECT_EQ(m.runner, "engine");
  EXPECT_EQ(m.fixed.at("model"), "google/gemma-4-31B-it-qat-w4a16-ct");
  EXPECT_EQ(m.fixed.at("tensor_parallel_size"), 2);
  EXPECT_EQ(m.requirements.gpu_vendor, "nvidia");
  EXPECT_EQ(m.requirements.gpu_count, 2);
  EXPECT_EQ(m.replicates.sessions, 3);
  EXPECT_EQ(m.replicates.processes, 2);
  EXPECT_EQ(m.replicates.rounds, 3);
  const Expansion e = MustExpand(m);
  EXPECT_EQ(e.cells.size(), 16u);
  ASSERT_EQ(e.units.size(), 6u);  // 2 backends x 3 sessions, each the whole paired ladder
  EXPECT_EQ(e.units[0].group_key, "attention_backend=TRITON_ATTN");
  EXPECT_EQ(e.units[0].cell_indices.size(), 8u);
  EXPECT_EQ(e.cells[7].key, "attention_backend=TRITON_ATTN,depth=32768,spec=mtp:1");
}

// Load examples: concurrency is an axis shared by one unit with depth, spec is paired.
TEST(MatrixExpand, LoadExamples) {
  const Matrix cpu = MustParseExample("synthetic-load-cpu.yaml");
  EXPECT_EQ(cpu.runner, "engine");
  EXPECT_TRUE(cpu.requirements.gpu_vendor.empty());  // runs anywhere
  EXPECT_EQ(cpu.fixed.at("device"), "cpu");
  const Expansion ce = MustExpand(cpu);
  EXPECT_EQ(ce.cells.size(), 6u);
  ASSERT_EQ(ce.units.size(), 1u);  // one session measures every concurrency, both arms

  const Matrix vllm = MustParseExample("gemma4-mtp-load.yaml");
  EXPECT_EQ(vllm.fixed.at("engine"), "vllm");
  const Expansion ve = MustExpand(vllm);
  EXPECT_EQ(ve.cells.size(), 2u * 3 * 4 * 2);
  EXPECT_EQ(ve.units.size(), 2u * 3);  // per backend and session
  EXPECT_EQ(ve.units[0].cell_indices.size(), 24u);

  const Matrix twin = MustParseExample("gemma4-synthetic-load.yaml");
  EXPECT_EQ(twin.requirements.gpu_vendor, "nvidia");
  const Expansion te = MustExpand(twin);
  EXPECT_EQ(te.cells.size(), 2u * (2 * 4 - 1) * 2);  // 64 only at 1K
}

TEST(MatrixExpand, Gemma4MtpLocateExample) {
  const Matrix m = MustParseExample("gemma4-mtp-locate.yaml");
  ASSERT_TRUE(m.locate.has_value());
  EXPECT_EQ(m.locate->axis, "depth");
  EXPECT_EQ(m.locate->pair_axis, "spec");
  EXPECT_DOUBLE_EQ(m.locate->resolution_octaves, 0.25);
  EXPECT_EQ(m.locate->min_step, 256);
  EXPECT_EQ(m.locate->max_sessions, 6);
  const Expansion e = MustExpand(m);
  EXPECT_EQ(e.cells.size(), 24u);
  EXPECT_EQ(e.units.size(), 6u);  // the planned ladder; probes are added by the coordinator
}

TEST(MatrixExpand, Gemma4SyntheticLadderExample) {
  const Matrix m = MustParseExample("gemma4-synthetic-ladder.yaml");
  EXPECT_EQ(m.fixed.at("engine"), "synthetic");
  EXPECT_EQ(m.fixed.at("preset"), "gemma4-31b");
  const Expansion e = MustExpand(m);
  EXPECT_EQ(e.cells.size(), 16u);
  EXPECT_EQ(e.units[0].group_key, "policy=legacy");
}

TEST(MatrixExpand, KernelH200Example) {
  const Matrix m = MustParseExample("kernel-h200.yaml");
  EXPECT_EQ(m.fixed.at("backend"), "cuda");
  EXPECT_EQ(m.requirements.gpu_vendor, "nvidia");
  const Expansion e = MustExpand(m);
  EXPECT_EQ(e.cells.size(), 3u * 6u * 3u * 2u);
  EXPECT_EQ(e.units.size(), 3u * 6u * 3u);
  for (const Unit& unit : e.units) EXPECT_EQ(unit.cell_indices.size(), 2u);
}

TEST(MatrixExpand, DocumentedExampleExpandsAsDescribed) {
  // The first ```yaml block of docs/matrix-format.md is the complete example.
  std::ifstream in(LADDER_MATRIX_FORMAT_DOC);
  ASSERT_TRUE(in) << LADDER_MATRIX_FORMAT_DOC;
  std::stringstream contents;
  contents << in.rdbuf();
  const std::string doc = contents.str();
  const size_t start = doc.find("```yaml\n");
  ASSERT_NE(start, std::string::npos);
  const size_t body = start + 8;
  const size_t end = doc.find("```", body);
  ASSERT_NE(end, std::string::npos);
  auto matrix = ParseMatrix(doc.substr(body, end - body), "matrix-format.md");
  ASSERT_TRUE(matrix.ok()) << matrix.status();
  const Expansion e = MustExpand(*matrix);
  EXPECT_EQ(e.cells.size(), 21u);
  EXPECT_EQ(e.units.size(), 6u);
  EXPECT_EQ(e.cells[1].key, "attention_backend=TRITON_ATTN,depth=1024,spec=off-copy");
}

}  // namespace
}  // namespace ladder::matrices
