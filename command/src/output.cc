// The adapters follow each tool's own printer; tests/command/fixtures/README.md names the source
// files and commits the field names were checked against, and where each recorded output is from.
#include "ladder/command/output.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/common/json_depth.h"

namespace ladder::command {
namespace {

using nlohmann::json;

// A line longer than this is not a measurement (a progress bar redrawn without newlines, a dump):
// it is counted as ignored without being parsed.
constexpr size_t kMaxLineBytes = 64 * 1024;
// nlohmann's values are destroyed recursively and its parser keeps a frame per level; output
// nested deeper than this is refused before parsing (no format here nests past 10).
constexpr int kMaxNesting = 32;
// How many names an error message lists before "…".
constexpr size_t kMaxNamesListed = 8;

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

// Python's json.dumps and Google Benchmark write NaN, Infinity and -Infinity, which are not JSON.
// Returns `text` with each such literal outside strings replaced by null, or nullopt when it has
// none (then the text's parse failure is its own).
std::optional<std::string> NullNonFiniteLiterals(std::string_view text) {
  static constexpr std::array<std::string_view, 3> kLiterals = {"-Infinity", "Infinity", "NaN"};
  std::string out;
  bool replaced = false;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      out.push_back(c);
      ++i;
      continue;
    }
    if (c == '"') in_string = true;
    bool matched = false;
    for (std::string_view literal : kLiterals) {
      if (text.substr(i, literal.size()) == literal) {
        out += "null";
        i += literal.size();
        replaced = matched = true;
        break;
      }
    }
    if (!matched) {
      out.push_back(c);
      ++i;
    }
  }
  if (!replaced) return std::nullopt;
  return out;
}

struct Parsed {
  json value;
  bool had_non_finite = false;  // NaN/Infinity literals were read as null
};

// Parses one JSON text without exceptions; nullopt when it is not JSON or nests too deep.
std::optional<Parsed> ParseJson(std::string_view text) {
  if (JsonNestsDeeperThan(text, kMaxNesting)) return std::nullopt;
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_discarded()) return Parsed{std::move(value), false};
  std::optional<std::string> nulled = NullNonFiniteLiterals(text);
  if (!nulled) return std::nullopt;
  value = json::parse(*nulled, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return Parsed{std::move(value), true};
}

// A whole-output document (Google Benchmark, nvbench). Lenient about text around it: a program
// may print a banner before the JSON or a line after it. Tries the whole output, then each '{'
// that starts a line (up to 16 of them) through the last '}'.
std::optional<json> ParseDocument(std::string_view text) {
  text = Trim(text);
  if (std::optional<Parsed> whole = ParseJson(text)) return std::move(whole->value);
  const size_t last = text.rfind('}');
  if (last == std::string_view::npos) return std::nullopt;
  int tries = 0;
  for (size_t pos = text.find('{'); pos != std::string_view::npos && pos < last && tries < 16;
       pos = text.find('{', pos + 1)) {
    if (pos != 0 && text[pos - 1] != '\n') continue;
    ++tries;
    if (std::optional<Parsed> doc = ParseJson(text.substr(pos, last + 1 - pos))) {
      return std::move(doc->value);
    }
  }
  return std::nullopt;
}

// A name from the output made safe as a metric name: ASCII lower case, [a-z0-9_] only.
std::string SanitizeName(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c >= 'A' && c <= 'Z') {
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') {
      out.push_back(c);
    } else {
      out.push_back('_');
    }
  }
  return out;
}

std::string ListNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kMaxNamesListed; ++i) {
    if (i > 0) out += ", ";
    out += names[i];
  }
  if (names.size() > kMaxNamesListed) out += ", …";
  return out;
}

// The value at `key` when it is a (finite) number; nlohmann never holds a non-finite number.
std::optional<double> NumberAt(const json& object, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::optional<int64_t> IntegerAt(const json& object, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end()) return std::nullopt;
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (it->is_number_integer()) return it->get<int64_t>();
  return std::nullopt;
}

std::string StringAt(const json& object, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

// ---- JSON lines: the result contract ---------------------------------------------------------

absl::Status JsonLineError(int64_t line_no, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("JSON lines: line {}: {}", line_no, what));
}

// A JSON object line with "metric": a sample, or the reason it is not one.
absl::StatusOr<Sample> SampleFromLine(const Parsed& line, int64_t line_no) {
  const json& o = line.value;
  const json& metric = o.at("metric");
  if (!metric.is_string()) return JsonLineError(line_no, "\"metric\" is not a string");
  Sample sample;
  sample.metric = metric.get<std::string>();
  if (sample.metric.empty()) return JsonLineError(line_no, "\"metric\" is empty");

  auto value = o.find("value");
  if (value == o.end()) return JsonLineError(line_no, "the measurement has no \"value\"");
  if (value->is_null() && line.had_non_finite) {
    return JsonLineError(line_no, "\"value\" is NaN or Infinity, not a finite number");
  }
  if (!value->is_number()) return JsonLineError(line_no, "\"value\" is not a number");
  sample.value = value->get<double>();
  if (!std::isfinite(sample.value)) return JsonLineError(line_no, "\"value\" is not finite");

  if (auto unit = o.find("unit"); unit != o.end()) {
    if (!unit->is_string()) return JsonLineError(line_no, "\"unit\" is not a string");
    sample.unit = unit->get<std::string>();
  }
  if (o.contains("round")) {
    const std::optional<int64_t> round = IntegerAt(o, "round");
    if (!round || *round < 0 || *round > INT_MAX) {
      return JsonLineError(line_no, "\"round\" is not a non-negative integer");
    }
    sample.round = static_cast<int>(*round);
  }
  return sample;
}

absl::StatusOr<ParsedOutput> ParseJsonLines(std::string_view text) {
  ParsedOutput out;
  int64_t line_no = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view raw = text.substr(start, end - start);
    start = end + 1;
    ++line_no;

    const std::string_view line = Trim(raw);
    if (line.size() > kMaxLineBytes || line.empty() || line.front() != '{') {
      ++out.ignored_lines;
      continue;
    }
    std::optional<Parsed> parsed = ParseJson(line);
    if (!parsed || !parsed->value.is_object()) {
      ++out.ignored_lines;
      continue;
    }
    const json& o = parsed->value;
    if (o.contains("metric")) {
      absl::StatusOr<Sample> sample = SampleFromLine(*parsed, line_no);
      if (!sample.ok()) return sample.status();
      out.samples.push_back(*std::move(sample));
    } else if (auto evidence = o.find("evidence"); evidence != o.end() && evidence->is_object()) {
      out.evidence.push_back(EvidenceItem{"program_evidence", *evidence});
    } else {
      ++out.ignored_lines;
    }
  }
  return out;
}

// ---- Google Benchmark JSON -------------------------------------------------------------------

bool IsTimeUnit(std::string_view unit) {
  return unit == "ns" || unit == "us" || unit == "ms" || unit == "s";
}

// Fields of a Google Benchmark run that are not user counters.
bool IsGbenchField(std::string_view key) {
  static constexpr std::array<std::string_view, 19> kFields = {
      "name",           "run_name",         "run_type",
      "repetitions",    "repetition_index", "threads",
      "iterations",     "real_time",        "cpu_time",
      "time_unit",      "family_index",     "per_family_instance_index",
      "aggregate_name", "aggregate_unit",   "label",
      "error_occurred", "error_message",    "skipped",
      "skip_message"};
  return std::find(kFields.begin(), kFields.end(), key) != kFields.end();
}

std::string GbenchCounterUnit(std::string_view name) {
  if (name == "bytes_per_second") return "B/s";
  if (name == "items_per_second") return "1/s";
  return "";
}

absl::StatusOr<ParsedOutput> ParseGoogleBenchmark(std::string_view text) {
  std::optional<json> doc = ParseDocument(text);
  if (!doc) {
    return absl::InvalidArgumentError(
        "not Google Benchmark JSON: the output holds no JSON document (run the program with "
        "--benchmark_format=json, or read the file of --benchmark_out_format=json)");
  }
  auto benchmarks = doc->is_object() ? doc->find("benchmarks") : doc->end();
  if (!doc->is_object() || benchmarks == doc->end() || !benchmarks->is_array()) {
    return absl::InvalidArgumentError("not Google Benchmark JSON: no \"benchmarks\" array");
  }

  ParsedOutput out;
  std::vector<std::string> run_names;
  int ordinal = 0;  // the entry's order among the iteration entries
  for (const json& entry : *benchmarks) {
    if (!entry.is_object()) continue;
    if (StringAt(entry, "run_type") == "aggregate") continue;  // mean, median, stddev, cv
    std::string run_name = StringAt(entry, "run_name");
    if (run_name.empty()) run_name = StringAt(entry, "name");

    auto error = entry.find("error_occurred");
    const bool failed = error != entry.end() && error->is_boolean() && error->get<bool>();
    if (failed) {
      std::string message = StringAt(entry, "error_message");
      return absl::InvalidArgumentError(
          fmt::format("Google Benchmark: {} failed: {}", run_name,
                      message.empty() ? "(no error_message)" : message));
    }
    // SkipWithMessage (json_reporter.cc since 1.8: "skipped": true, "skip_message"): the program
    // chose not to measure; nothing to read.
    auto skipped = entry.find("skipped");
    if (skipped != entry.end() && skipped->is_boolean() && skipped->get<bool>()) continue;

    if (std::find(run_names.begin(), run_names.end(), run_name) == run_names.end()) {
      run_names.push_back(run_name);
    }
    std::string unit = "ns";  // every version writes time_unit; ns is its default
    if (entry.contains("time_unit")) {
      unit = StringAt(entry, "time_unit");
      if (!IsTimeUnit(unit)) {
        return absl::InvalidArgumentError(
            fmt::format("Google Benchmark: {}: time_unit is not one of ns, us, ms, s", run_name));
      }
    }
    std::optional<int> round = ordinal;
    if (std::optional<int64_t> index = IntegerAt(entry, "repetition_index");
        index && *index >= 0 && *index <= INT_MAX) {
      round = static_cast<int>(*index);
    }
    ++ordinal;

    if (auto v = NumberAt(entry, "real_time"))
      out.samples.push_back({"real_time", *v, unit, round});
    if (auto v = NumberAt(entry, "cpu_time")) out.samples.push_back({"cpu_time", *v, unit, round});
    if (auto v = NumberAt(entry, "iterations"))
      out.samples.push_back({"iterations", *v, "1", round});
    for (const auto& [key, value] : entry.items()) {
      if (IsGbenchField(key) || !value.is_number()) continue;
      std::string name = SanitizeName(key);
      std::string counter_unit = GbenchCounterUnit(name);
      out.samples.push_back({std::move(name), value.get<double>(), std::move(counter_unit), round});
    }
  }
  if (run_names.size() > 1) {
    return absl::InvalidArgumentError(fmt::format(
        "Google Benchmark: the output holds {} benchmarks ({}); a start must measure one: choose "
        "it with --benchmark_filter",
        run_names.size(), ListNames(run_names)));
  }
  if (!run_names.empty()) {
    auto context = doc->find("context");
    json evidence = {{"context", context != doc->end() ? *context : json(nullptr)},
                     {"benchmark", run_names.front()}};
    out.evidence.push_back(EvidenceItem{"bench_context", std::move(evidence)});
  }
  return out;
}

// ---- nvbench JSON ----------------------------------------------------------------------------

struct NvbenchMetric {
  std::string_view tag;
  std::string_view metric;
  std::string_view unit;
};

// The summaries nvbench's measure_cold.cu, measure_hot.cu and measure_cpu_only.cxx write, by the
// names ladder gives them. Other summaries with a value keep their tag, sanitised (nv_cold_...).
constexpr std::array<NvbenchMetric, 6> kNvbenchMetrics = {{
    {"nv/cold/time/gpu/mean", "gpu_time", "s"},
    {"nv/cold/time/cpu/mean", "cpu_time", "s"},
    {"nv/cpu_only/time/cpu/mean", "cpu_time", "s"},
    {"nv/batch/time/gpu/mean", "batch_gpu_time", "s"},
    {"nv/cold/sample_size", "samples", "1"},
    {"nv/cold/bw/global/bytes_per_second", "global_bytes_per_s", "B/s"},
}};

// The unit of a summary nvbench does not name here, from its "hint" (how nvbench prints it).
std::string NvbenchHintUnit(std::string_view hint) {
  if (hint == "duration") return "s";
  if (hint == "byte_rate") return "B/s";
  if (hint == "bytes") return "B";
  if (hint == "item_rate") return "1/s";
  if (hint == "sample_size") return "1";
  if (hint == "frequency") return "Hz";
  return "";  // "percentage" is a fraction (0.5 = 50 %); others say nothing
}

// A summary's {"name": "value", "type": "float64"|"int64", "value": "1.5e-05"} (nvbench writes
// numbers as strings, so int64 survives); nullopt when absent, not a number or not finite.
std::optional<double> NvbenchSummaryValue(const json& summary) {
  auto data = summary.find("data");
  if (data == summary.end() || !data->is_array()) return std::nullopt;
  for (const json& item : *data) {
    if (!item.is_object() || StringAt(item, "name") != "value") continue;
    const std::string type = StringAt(item, "type");
    if (type != "float64" && type != "int64") return std::nullopt;
    auto value = item.find("value");
    if (value == item.end()) return std::nullopt;
    if (value->is_number()) return value->get<double>();
    if (!value->is_string()) return std::nullopt;
    const std::string& s = value->get_ref<const std::string&>();
    double parsed = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), parsed);
    if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(parsed)) {
      return std::nullopt;
    }
    return parsed;
  }
  return std::nullopt;
}

absl::StatusOr<ParsedOutput> ParseNvbench(std::string_view text) {
  std::optional<json> doc = ParseDocument(text);
  if (!doc) {
    return absl::InvalidArgumentError(
        "not nvbench JSON: the output holds no JSON document (run the program with --json FILE "
        "and read FILE)");
  }
  auto benchmarks = doc->is_object() ? doc->find("benchmarks") : doc->end();
  if (!doc->is_object() || benchmarks == doc->end() || !benchmarks->is_array()) {
    return absl::InvalidArgumentError("not nvbench JSON: no \"benchmarks\" array");
  }

  struct Measured {
    std::string benchmark;
    const json* state;
  };
  std::vector<Measured> measured;
  for (const json& bench : *benchmarks) {
    if (!bench.is_object()) continue;
    auto states = bench.find("states");
    if (states == bench.end() || !states->is_array()) continue;
    for (const json& state : *states) {
      if (!state.is_object()) continue;
      auto skipped = state.find("is_skipped");
      if (skipped != state.end() && skipped->is_boolean() && skipped->get<bool>()) continue;
      measured.push_back({StringAt(bench, "name"), &state});
    }
  }
  if (measured.size() > 1) {
    std::vector<std::string> names;
    for (const Measured& m : measured) {
      names.push_back(fmt::format("{} [{}]", m.benchmark, StringAt(*m.state, "name")));
    }
    return absl::InvalidArgumentError(fmt::format(
        "nvbench: the output holds {} measured states ({}); a start must measure one: select it "
        "with -b/--benchmark, -a/--axis and -d/--devices",
        measured.size(), ListNames(names)));
  }

  ParsedOutput out;
  if (measured.empty()) return out;
  const json& state = *measured.front().state;
  if (auto summaries = state.find("summaries"); summaries != state.end() && summaries->is_array()) {
    for (const json& summary : *summaries) {
      if (!summary.is_object()) continue;
      const std::string tag = StringAt(summary, "tag");
      if (tag.empty()) continue;
      std::optional<double> value = NvbenchSummaryValue(summary);
      if (!value) continue;
      auto known = std::find_if(kNvbenchMetrics.begin(), kNvbenchMetrics.end(),
                                [&](const NvbenchMetric& m) { return m.tag == tag; });
      if (known != kNvbenchMetrics.end()) {
        out.samples.push_back(
            {std::string(known->metric), *value, std::string(known->unit), std::nullopt});
      } else {
        out.samples.push_back(
            {SanitizeName(tag), *value, NvbenchHintUnit(StringAt(summary, "hint")), std::nullopt});
      }
    }
  }
  auto field = [&state](std::string_view key) {
    auto it = state.find(key);
    return it != state.end() ? *it : json(nullptr);
  };
  json evidence = {{"benchmark", measured.front().benchmark},
                   {"state", field("name")},
                   {"device", field("device")},
                   {"axis_values", field("axis_values")}};
  out.evidence.push_back(EvidenceItem{"bench_context", std::move(evidence)});
  return out;
}

// ---- llama-bench JSONL -----------------------------------------------------------------------

// llama-bench's own name for a test: pp512, tg128, pp512+tg128, with " @ d4096" for a depth.
std::string LlamaTestName(int64_t n_prompt, int64_t n_gen, int64_t n_depth) {
  std::string name;
  if (n_prompt > 0 && n_gen > 0) {
    name = fmt::format("pp{}+tg{}", n_prompt, n_gen);
  } else if (n_prompt > 0) {
    name = fmt::format("pp{}", n_prompt);
  } else {
    name = fmt::format("tg{}", n_gen);
  }
  if (n_depth > 0) name += fmt::format(" @ d{}", n_depth);
  return name;
}

absl::StatusOr<std::vector<double>> NumberArray(const json& test, std::string_view key,
                                                const std::string& test_name) {
  auto it = test.find(key);
  if (it == test.end()) return std::vector<double>{};
  if (!it->is_array()) {
    return absl::InvalidArgumentError(
        fmt::format("llama-bench: test {}: {} is not an array", test_name, key));
  }
  std::vector<double> values;
  for (const json& v : *it) {
    if (!v.is_number()) {
      return absl::InvalidArgumentError(fmt::format(
          "llama-bench: test {}: {} holds a value that is not a number", test_name, key));
    }
    values.push_back(v.get<double>());
  }
  return values;
}

absl::StatusOr<ParsedOutput> ParseLlamaBench(std::string_view text) {
  struct Kind {
    std::string_view label;  // for the error message
    std::string_view tok_s;
    std::string_view time;
  };
  static constexpr std::array<Kind, 3> kKinds = {{{"prompt", "prompt_tok_s", "prompt_time"},
                                                  {"generation", "gen_tok_s", "gen_time"},
                                                  {"prompt+generation", "pg_tok_s", "pg_time"}}};
  std::array<std::vector<std::string>, 3> tests_of_kind;

  ParsedOutput out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = Trim(text.substr(start, end - start));
    start = end + 1;
    if (line.size() > kMaxLineBytes || line.empty() || line.front() != '{') {
      ++out.ignored_lines;
      continue;
    }
    std::optional<Parsed> parsed = ParseJson(line);
    if (!parsed || !parsed->value.is_object() ||
        (!parsed->value.contains("samples_ns") && !parsed->value.contains("avg_ns"))) {
      ++out.ignored_lines;
      continue;
    }
    const json& test = parsed->value;
    const std::optional<int64_t> n_prompt = IntegerAt(test, "n_prompt");
    const std::optional<int64_t> n_gen = IntegerAt(test, "n_gen");
    if (!n_prompt || !n_gen || *n_prompt < 0 || *n_gen < 0 || (*n_prompt == 0 && *n_gen == 0)) {
      return absl::InvalidArgumentError(
          "llama-bench: a test without n_prompt and n_gen (non-negative integers, one of them "
          "positive)");
    }
    const std::string name =
        LlamaTestName(*n_prompt, *n_gen, IntegerAt(test, "n_depth").value_or(0));
    const size_t kind = *n_gen == 0 ? 0 : (*n_prompt == 0 ? 1 : 2);
    tests_of_kind[kind].push_back(name);
    if (tests_of_kind[kind].size() > 1) {
      return absl::InvalidArgumentError(fmt::format(
          "llama-bench: more than one {} test in one start ({}); a start must run one test of "
          "each kind: give -p, -n, -pg, -d, -fa (and the other test parameters) one value each",
          kKinds[kind].label, ListNames(tests_of_kind[kind])));
    }

    if (!test.contains("samples_ns")) {
      return absl::InvalidArgumentError(fmt::format(
          "llama-bench: test {} has avg_ns but no samples_ns (this llama-bench is too old)", name));
    }
    absl::StatusOr<std::vector<double>> ns = NumberArray(test, "samples_ns", name);
    if (!ns.ok()) return ns.status();
    absl::StatusOr<std::vector<double>> ts = NumberArray(test, "samples_ts", name);
    if (!ts.ok()) return ts.status();
    if (!test.contains("samples_ts") || ns->size() != ts->size()) {
      return absl::InvalidArgumentError(
          fmt::format("llama-bench: test {}: samples_ns has {} values and samples_ts {}", name,
                      ns->size(), ts->size()));
    }
    for (size_t i = 0; i < ns->size() && i <= static_cast<size_t>(INT_MAX); ++i) {
      const int round = static_cast<int>(i);
      out.samples.push_back({std::string(kKinds[kind].tok_s), (*ts)[i], "tok/s", round});
      out.samples.push_back({std::string(kKinds[kind].time), (*ns)[i], "ns", round});
    }

    json context = test;
    for (std::string_view key :
         {"samples_ns", "samples_ts", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts"}) {
      context.erase(std::string(key));
    }
    out.evidence.push_back(EvidenceItem{"bench_context", std::move(context)});
  }
  return out;
}

// Powers of ten of the time units, in steps of 1e3.
std::optional<int> TimeExponent(std::string_view unit) {
  if (unit == "ns") return 0;
  if (unit == "us") return 1;
  if (unit == "ms") return 2;
  if (unit == "s") return 3;
  return std::nullopt;
}

}  // namespace

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
  return "unknown";
}

std::optional<OutputFormat> FormatFromName(std::string_view name) {
  for (OutputFormat format : {OutputFormat::kJsonLines, OutputFormat::kGoogleBenchmark,
                              OutputFormat::kNvbench, OutputFormat::kLlamaBench}) {
    if (FormatName(format) == name) return format;
  }
  return std::nullopt;
}

absl::StatusOr<ParsedOutput> ParseOutput(OutputFormat format, std::string_view text) {
  switch (format) {
    case OutputFormat::kJsonLines:
      return ParseJsonLines(text);
    case OutputFormat::kGoogleBenchmark:
      return ParseGoogleBenchmark(text);
    case OutputFormat::kNvbench:
      return ParseNvbench(text);
    case OutputFormat::kLlamaBench:
      return ParseLlamaBench(text);
  }
  return absl::InvalidArgumentError("unknown output format");
}

std::optional<double> ConvertTime(double value, std::string_view from, std::string_view to) {
  const std::optional<int> f = TimeExponent(from);
  const std::optional<int> t = TimeExponent(to);
  if (!f || !t) return std::nullopt;
  // Exact factors: 1e3, 1e6 and 1e9 are doubles exactly; dividing by one (rather than
  // multiplying by 1e-3, which is not exact) keeps ms -> s and the like correctly rounded.
  static constexpr std::array<double, 4> kFactor = {1.0, 1e3, 1e6, 1e9};
  if (*f == *t) return value;
  if (*f > *t) return value * kFactor[static_cast<size_t>(*f - *t)];
  return value / kFactor[static_cast<size_t>(*t - *f)];
}

}  // namespace ladder::command
