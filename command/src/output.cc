// Placeholder until the adapters land (issue-55-adapters): JSON lines only.
#include "ladder/command/output.h"

#include <cmath>

namespace ladder::command {

std::string_view FormatName(OutputFormat format) {
  switch (format) {
    case OutputFormat::kJsonLines:
      return "jsonl";
    case OutputFormat::kGoogleBenchmark:
      return "gbench";
    case OutputFormat::kNvbench:
      return "nvbench";
    case OutputFormat::kLlamaBench:
      return "llama-bench";
  }
  return "jsonl";
}

std::optional<OutputFormat> FormatFromName(std::string_view name) {
  for (auto f : {OutputFormat::kJsonLines, OutputFormat::kGoogleBenchmark, OutputFormat::kNvbench,
                 OutputFormat::kLlamaBench}) {
    if (FormatName(f) == name) return f;
  }
  return std::nullopt;
}

std::optional<double> ConvertTime(double value, std::string_view from, std::string_view to) {
  auto scale = [](std::string_view u) -> double {
    if (u == "ns") return 1e-9;
    if (u == "us") return 1e-6;
    if (u == "ms") return 1e-3;
    if (u == "s") return 1;
    return 0;
  };
  if (scale(from) == 0 || scale(to) == 0) return std::nullopt;
  return value * scale(from) / scale(to);
}

absl::StatusOr<ParsedOutput> ParseOutput(OutputFormat format, std::string_view text) {
  if (format != OutputFormat::kJsonLines) return absl::UnimplementedError("not yet");
  ParsedOutput out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    auto line = nlohmann::json::parse(text.substr(start, end - start), nullptr, false);
    start = end + 1;
    if (line.is_object() && line.contains("metric") && line["metric"].is_string() &&
        line.contains("value") && line["value"].is_number()) {
      Sample s{line["metric"].get<std::string>(), line["value"].get<double>(), "", std::nullopt};
      if (line.contains("round") && line["round"].is_number_unsigned()) {
        s.round = line["round"].get<int>();
      }
      out.samples.push_back(std::move(s));
    } else if (line.is_object() && line.contains("evidence") && line["evidence"].is_object()) {
      out.evidence.push_back(EvidenceItem{"program_evidence", line["evidence"]});
    } else {
      ++out.ignored_lines;
    }
  }
  return out;
}

}  // namespace ladder::command
