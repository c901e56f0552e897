// Prints a shell part of a deploy file, so tests/deploy/bundle_test.sh can run it as written:
//   deploy_extract key FILE KEY          a top-level string (a SkyPilot task's setup or run)
//   deploy_extract write-file FILE PATH  the content of cloud-init's write_files entry PATH
//   deploy_extract runcmd FILE           cloud-init's runcmd as a script, one command a line
// Exits 1 when the file does not parse or has no such part.
#include <iostream>
#include <string>

#include <yaml-cpp/yaml.h>

namespace {

// Single-quotes a word for bash (cloud-init runs a list entry as argv, without a shell).
std::string Quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int Extract(const std::string& mode, const YAML::Node& doc, const std::string& arg) {
  if (mode == "key") {
    if (!doc[arg] || !doc[arg].IsScalar()) return 1;
    std::cout << doc[arg].as<std::string>();
    return 0;
  }
  if (mode == "write-file") {
    for (const auto& f : doc["write_files"]) {
      if (f["path"].as<std::string>() == arg) {
        std::cout << f["content"].as<std::string>();
        return 0;
      }
    }
    return 1;
  }
  if (mode == "runcmd") {
    if (!doc["runcmd"].IsSequence()) return 1;
    for (const auto& cmd : doc["runcmd"]) {
      if (cmd.IsSequence()) {
        std::string line;
        for (const auto& word : cmd)
          line += (line.empty() ? "" : " ") + Quote(word.as<std::string>());
        std::cout << line << "\n";
      } else {
        std::cout << cmd.as<std::string>() << "\n";  // a string entry runs under sh -c
      }
    }
    return 0;
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: deploy_extract key|write-file|runcmd FILE [KEY|PATH]\n";
    return 2;
  }
  try {
    const int rc = Extract(argv[1], YAML::LoadFile(argv[2]), argc > 3 ? argv[3] : "");
    if (rc == 1)
      std::cerr << "deploy_extract: " << argv[2] << " has no " << argv[1] << " "
                << (argc > 3 ? argv[3] : "") << "\n";
    return rc;
  } catch (const YAML::Exception& e) {
    std::cerr << "deploy_extract: " << argv[2] << ": " << e.what() << "\n";
    return 1;
  }
}
