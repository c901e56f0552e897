// The recordings of real engines in tests/engines/fixtures/ (each folder's README says how and
// from which build they were recorded), read byte for byte.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace ladder::engines {

// fixtures/<recording>/<name>, e.g. ("llama.cpp-b10309-cuda", "version.txt"); a missing file
// fails the calling test.
inline std::string ReadFixture(const std::string& recording, const std::string& name) {
  std::ifstream in(std::string(LADDER_ENGINE_FIXTURES) + "/" + recording + "/" + name,
                   std::ios::binary);
  EXPECT_TRUE(in.good()) << recording << "/" << name;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace ladder::engines
