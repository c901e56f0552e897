// Runs every file of tests/matrices/bad/: each must be refused with InvalidArgument and a
// message containing the text of its first line, `# expect: <substring>`.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ladder/matrices/matrix.h"

namespace ladder::matrices {
namespace {

std::vector<std::filesystem::path> BadFiles() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(LADDER_MATRICES_BAD_DIR)) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(MatrixParser, BadCorpusIsLargeEnough) { EXPECT_GE(BadFiles().size(), 20u); }

TEST(MatrixParser, RejectsEveryBadMatrix) {
  constexpr std::string_view kPrefix = "# expect: ";
  for (const auto& path : BadFiles()) {
    SCOPED_TRACE(path.filename().string());
    std::ifstream in(path);
    std::stringstream contents;
    contents << in.rdbuf();
    const std::string text = contents.str();
    const std::string first_line = text.substr(0, text.find('\n'));
    ASSERT_EQ(first_line.rfind(kPrefix, 0), 0u) << "first line must be '# expect: ...'";
    const std::string expected = first_line.substr(kPrefix.size());
    ASSERT_FALSE(expected.empty());

    auto matrix = ParseMatrix(text, path.filename().string());
    if (matrix.ok()) {
      ADD_FAILURE() << "parsed, but should fail with: " << expected;
      continue;
    }
    EXPECT_EQ(matrix.status().code(), absl::StatusCode::kInvalidArgument) << matrix.status();
    EXPECT_NE(matrix.status().message().find(expected), std::string_view::npos)
        << "expected the message to contain: " << expected
        << "\n                          actual: " << matrix.status().message();
  }
}

}  // namespace
}  // namespace ladder::matrices
