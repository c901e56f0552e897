#include "ladder/command/output.h"

#include <climits>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ladder::command {
namespace {

using nlohmann::json;

// A recorded output from tests/command/fixtures (README.md there says where each comes from).
std::string Fixture(std::string_view name) {
  const std::string path = std::string(LADDER_COMMAND_FIXTURES) + "/" + std::string(name);
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The samples named `metric`, in output order.
std::vector<Sample> Named(const ParsedOutput& out, std::string_view metric) {
  std::vector<Sample> found;
  for (const Sample& s : out.samples) {
    if (s.metric == metric) found.push_back(s);
  }
  return found;
}

ParsedOutput ParseOk(OutputFormat format, std::string_view text) {
  absl::StatusOr<ParsedOutput> out = ParseOutput(format, text);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : ParsedOutput{};
}

// The message of the InvalidArgument that `text` must give.
std::string ParseError(OutputFormat format, std::string_view text) {
  absl::StatusOr<ParsedOutput> out = ParseOutput(format, text);
  EXPECT_FALSE(out.ok()) << "parsed " << (out.ok() ? out->samples.size() : 0) << " samples";
  if (out.ok()) return "";
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  return std::string(out.status().message());
}

// ---- names and units -------------------------------------------------------------------------

TEST(CommandOutput, FormatNamesRoundTrip) {
  for (OutputFormat f : {OutputFormat::kJsonLines, OutputFormat::kGoogleBenchmark,
                         OutputFormat::kNvbench, OutputFormat::kLlamaBench}) {
    EXPECT_EQ(FormatFromName(FormatName(f)), f) << FormatName(f);
  }
  EXPECT_EQ(FormatName(OutputFormat::kJsonLines), "jsonl");
  EXPECT_EQ(FormatName(OutputFormat::kGoogleBenchmark), "gbench");
  EXPECT_EQ(FormatName(OutputFormat::kNvbench), "nvbench");
  EXPECT_EQ(FormatName(OutputFormat::kLlamaBench), "llama-bench");
  EXPECT_EQ(FormatFromName("json"), std::nullopt);
  EXPECT_EQ(FormatFromName("JSONL"), std::nullopt);
  EXPECT_EQ(FormatFromName(""), std::nullopt);
}

TEST(CommandOutput, ConvertTimeUsesExactFactors) {
  EXPECT_EQ(ConvertTime(1500, "ns", "us"), 1.5);
  EXPECT_EQ(ConvertTime(2, "s", "ns"), 2e9);
  EXPECT_EQ(ConvertTime(812.5, "us", "ms"), 0.8125);
  EXPECT_EQ(ConvertTime(3, "ms", "us"), 3000.0);
  // Dividing by 1e3 is correctly rounded; multiplying by 1e-3 would give 0.30000000000000004.
  EXPECT_EQ(ConvertTime(300, "ms", "s"), 0.3);
  EXPECT_EQ(ConvertTime(7, "ns", "s"), 7e-9);
  EXPECT_EQ(ConvertTime(0.1, "s", "s"), 0.1);
  EXPECT_EQ(ConvertTime(-4, "us", "ns"), -4000.0);
}

TEST(CommandOutput, ConvertTimeRefusesUnitsThatAreNotTime) {
  EXPECT_EQ(ConvertTime(1, "B/s", "s"), std::nullopt);
  EXPECT_EQ(ConvertTime(1, "s", "tok/s"), std::nullopt);
  EXPECT_EQ(ConvertTime(1, "", ""), std::nullopt);
  EXPECT_EQ(ConvertTime(1, "sec", "s"), std::nullopt);
  EXPECT_EQ(ConvertTime(1, "NS", "ns"), std::nullopt);
}

// ---- JSON lines ------------------------------------------------------------------------------

TEST(CommandOutput, JsonLinesReadsSamplesWithUnitAndRound) {
  const ParsedOutput out = ParseOk(OutputFormat::kJsonLines,
                                   "{\"metric\": \"time_us\", \"value\": 812.5, \"round\": 0}\n"
                                   "{\"metric\": \"time_us\", \"value\": 799, \"round\": 1, "
                                   "\"unit\": \"us\"}\n"
                                   "{\"metric\": \"Peak Mem\", \"value\": -3e2}\n");
  ASSERT_EQ(out.samples.size(), 3u);
  EXPECT_EQ(out.samples[0].metric, "time_us");
  EXPECT_EQ(out.samples[0].value, 812.5);
  EXPECT_EQ(out.samples[0].unit, "");
  EXPECT_EQ(out.samples[0].round, 0);
  EXPECT_EQ(out.samples[1].value, 799.0);
  EXPECT_EQ(out.samples[1].unit, "us");
  EXPECT_EQ(out.samples[1].round, 1);
  // Names are kept as given (the runner checks them against the matrix).
  EXPECT_EQ(out.samples[2].metric, "Peak Mem");
  EXPECT_EQ(out.samples[2].value, -300.0);
  EXPECT_EQ(out.samples[2].round, std::nullopt);
  EXPECT_EQ(out.ignored_lines, 0);
  EXPECT_TRUE(out.evidence.empty());
}

TEST(CommandOutput, JsonLinesKeepsEvidenceObjects) {
  const ParsedOutput out = ParseOk(OutputFormat::kJsonLines,
                                   "{\"evidence\": {\"kernel\": \"3d\", \"segments\": 16}}\n"
                                   "{\"metric\": \"t\", \"value\": 1}\n"
                                   "{\"evidence\": {\"path\": {\"taken\": true}}}\n");
  ASSERT_EQ(out.evidence.size(), 2u);
  EXPECT_EQ(out.evidence[0].kind, "program_evidence");
  EXPECT_EQ(out.evidence[0].value, json({{"kernel", "3d"}, {"segments", 16}}));
  EXPECT_EQ(out.evidence[1].value["path"]["taken"], true);
  EXPECT_EQ(out.samples.size(), 1u);
}

TEST(CommandOutput, JsonLinesCountsEverythingElseAsIgnored) {
  const std::string text =
      "starting benchmark\n"                            // plain text
      "[=====>     ] 50%\r[==========>] 100%\n"         // a progress bar
      "\xff\xfe{\"metric\": \"t\"\n"                    // invalid UTF-8
      "{\"metric\": \"t\", \"value\": \"\xc3\x28\"}\n"  // invalid UTF-8 inside a JSON string
      "[1, 2, 3]\n"                                     // JSON, not an object
      "42\n"                                            // JSON, not an object
      "{\"time_us\": 812.5}\n"                          // an object without "metric"
      "{\"evidence\": \"not an object\"}\n"             // evidence that is not an object
      "{\"metric\": \"t\", \"value\": 1\n"              // truncated
      "\n"                                              // blank
      "{\"metric\": \"t\", \"value\": 2}\n";            // the one sample
  const ParsedOutput out = ParseOk(OutputFormat::kJsonLines, text);
  ASSERT_EQ(out.samples.size(), 1u);
  EXPECT_EQ(out.samples[0].value, 2.0);
  EXPECT_EQ(out.ignored_lines, 10);
  EXPECT_TRUE(out.evidence.empty());
}

TEST(CommandOutput, JsonLinesTrimsWhitespaceAndCarriageReturns) {
  const ParsedOutput out = ParseOk(OutputFormat::kJsonLines,
                                   "  {\"metric\": \"a\", \"value\": 1}\t\r\n"
                                   "{\"metric\": \"b\", \"value\": 2}\r\n"
                                   "{\"metric\": \"c\", \"value\": 3}");  // no final newline
  ASSERT_EQ(out.samples.size(), 3u);
  EXPECT_EQ(out.samples[0].metric, "a");
  EXPECT_EQ(out.samples[1].metric, "b");
  EXPECT_EQ(out.samples[2].metric, "c");
  EXPECT_EQ(out.samples[2].value, 3.0);
  EXPECT_EQ(out.ignored_lines, 0);
}

TEST(CommandOutput, JsonLinesMalformedMeasurementIsAnErrorNamingTheLine) {
  struct Case {
    std::string line;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {R"({"metric": "t"})", "no \"value\""},
      {R"({"metric": "t", "value": "1.5"})", "\"value\" is not a number"},
      {R"({"metric": "t", "value": true})", "\"value\" is not a number"},
      {R"({"metric": "t", "value": null})", "\"value\" is not a number"},
      {R"({"metric": "t", "value": NaN})", "NaN or Infinity"},        // Python's json.dumps
      {R"({"metric": "t", "value": Infinity})", "NaN or Infinity"},   // Python's json.dumps
      {R"({"metric": "t", "value": -Infinity})", "NaN or Infinity"},  // Python's json.dumps
      {R"({"metric": 7, "value": 1})", "\"metric\" is not a string"},
      {R"({"metric": "", "value": 1})", "\"metric\" is empty"},
      {R"({"metric": "t", "value": 1, "unit": 3})", "\"unit\" is not a string"},
      {R"({"metric": "t", "value": 1, "round": -1})", "\"round\" is not a non-negative integer"},
      {R"({"metric": "t", "value": 1, "round": 1.5})", "\"round\" is not a non-negative integer"},
      {R"({"metric": "t", "value": 1, "round": 1.0})", "\"round\" is not a non-negative integer"},
      {R"({"metric": "t", "value": 1, "round": "2"})", "\"round\" is not a non-negative integer"},
      {R"({"metric": "t", "value": 1, "round": 2147483648})",
       "\"round\" is not a non-negative integer"},
  };
  for (const Case& c : cases) {
    const std::string text = "hello\n{\"metric\": \"ok\", \"value\": 1}\n" + c.line + "\n";
    const std::string message = ParseError(OutputFormat::kJsonLines, text);
    EXPECT_NE(message.find("line 3"), std::string::npos) << c.line << " -> " << message;
    EXPECT_NE(message.find(c.reason), std::string::npos) << c.line << " -> " << message;
  }
}

TEST(CommandOutput, JsonLinesReadsTheLargestRound) {
  const ParsedOutput out =
      ParseOk(OutputFormat::kJsonLines, R"({"metric": "t", "value": 1, "round": 2147483647})");
  ASSERT_EQ(out.samples.size(), 1u);
  EXPECT_EQ(out.samples[0].round, INT_MAX);
}

TEST(CommandOutput, JsonLinesIgnoresLinesOver64KiB) {
  const std::string pad(64 * 1024, ' ');
  // Padding inside the object: the line is long, not its surrounding whitespace.
  const std::string long_line = "{\"metric\": \"t\"," + pad + "\"value\": 1}";
  const std::string short_line = "{\"metric\": \"t\"," + pad.substr(0, 60000) + "\"value\": 2}";
  const ParsedOutput out = ParseOk(OutputFormat::kJsonLines, long_line + "\n" + short_line + "\n");
  ASSERT_EQ(out.samples.size(), 1u);
  EXPECT_EQ(out.samples[0].value, 2.0);
  EXPECT_EQ(out.ignored_lines, 1);
}

TEST(CommandOutput, JsonLinesIgnoresDeeplyNestedObjects) {
  auto nested = [](int depth) {
    return std::string(static_cast<size_t>(depth), '[') +
           std::string(static_cast<size_t>(depth), ']');
  };
  const std::string text =
      "{\"evidence\": {\"x\": " + nested(40) + "}}\n" +                   // 42 deep: ignored
      "{\"metric\": \"t\", \"value\": 1, \"x\": " + nested(40) + "}\n" +  // ignored, not an error
      "{\"evidence\": {\"x\": " + nested(30) + "}}\n" +                   // 32 deep: kept
      "{\"evidence\": {\"x\": \"" + std::string(100, '[') + "\"}}\n" +    // brackets in a string
      "{" + std::string(60000, '[') + "\n";                               // a parser-stack bomb
  const ParsedOutput out = ParseOk(OutputFormat::kJsonLines, text);
  EXPECT_TRUE(out.samples.empty());
  ASSERT_EQ(out.evidence.size(), 2u);
  EXPECT_EQ(out.evidence[1].value["x"], std::string(100, '['));
  EXPECT_EQ(out.ignored_lines, 3);
}

TEST(CommandOutput, JsonLinesEmptyOutputHasNoSamples) {
  const ParsedOutput out = ParseOk(OutputFormat::kJsonLines, "");
  EXPECT_TRUE(out.samples.empty());
  EXPECT_TRUE(out.evidence.empty());
  EXPECT_EQ(out.ignored_lines, 0);
}

// ---- Google Benchmark ------------------------------------------------------------------------

TEST(CommandOutput, GbenchReadsRepetitionsAndSkipsAggregates) {
  const ParsedOutput out = ParseOk(OutputFormat::kGoogleBenchmark, Fixture("gbench-sum.json"));
  // Three repetitions; the mean, median, stddev and cv entries are not samples.
  const std::vector<Sample> real = Named(out, "real_time");
  const std::vector<Sample> cpu = Named(out, "cpu_time");
  const std::vector<Sample> iterations = Named(out, "iterations");
  ASSERT_EQ(real.size(), 3u);
  ASSERT_EQ(cpu.size(), 3u);
  ASSERT_EQ(iterations.size(), 3u);
  EXPECT_EQ(out.samples.size(), 9u);
  EXPECT_DOUBLE_EQ(real[0].value, 2.4176125153769231e+03);
  EXPECT_DOUBLE_EQ(real[1].value, 2.7086765545563121e+03);
  EXPECT_DOUBLE_EQ(cpu[0].value, 1.7657205626349139e+03);
  EXPECT_EQ(iterations[2].value, 43083.0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(real[static_cast<size_t>(i)].round, i);
    EXPECT_EQ(real[static_cast<size_t>(i)].unit, "ns");
    EXPECT_EQ(cpu[static_cast<size_t>(i)].unit, "ns");
    EXPECT_EQ(iterations[static_cast<size_t>(i)].unit, "1");
  }
}

TEST(CommandOutput, GbenchReadsCountersWithUnits) {
  const ParsedOutput out =
      ParseOk(OutputFormat::kGoogleBenchmark, Fixture("gbench-memcpy-counters.json"));
  const std::vector<Sample> bytes = Named(out, "bytes_per_second");
  const std::vector<Sample> items = Named(out, "items_per_second");
  const std::vector<Sample> lines = Named(out, "cache_lines");  // "Cache Lines" in the output
  ASSERT_EQ(bytes.size(), 3u);
  ASSERT_EQ(items.size(), 3u);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(bytes[1].unit, "B/s");
  EXPECT_DOUBLE_EQ(bytes[1].value, 2.8245219285890212e+09);
  EXPECT_EQ(bytes[1].round, 1);
  EXPECT_EQ(items[1].unit, "1/s");
  EXPECT_DOUBLE_EQ(items[1].value, 4.3098784310745563e+04);
  EXPECT_EQ(lines[2].unit, "");
  EXPECT_EQ(lines[2].value, 1024.0);
  EXPECT_EQ(lines[2].round, 2);
  // real_time, cpu_time, iterations and three counters per repetition; nothing from the fields
  // that are not counters (threads, repetitions, family_index, ...).
  EXPECT_EQ(out.samples.size(), 18u);
  EXPECT_TRUE(Named(out, "threads").empty());
  EXPECT_TRUE(Named(out, "family_index").empty());
}

TEST(CommandOutput, GbenchKeepsTheContextAsEvidence) {
  const ParsedOutput out = ParseOk(OutputFormat::kGoogleBenchmark, Fixture("gbench-sum.json"));
  ASSERT_EQ(out.evidence.size(), 1u);
  EXPECT_EQ(out.evidence[0].kind, "bench_context");
  EXPECT_EQ(out.evidence[0].value["benchmark"], "BM_Sum/4096");
  EXPECT_EQ(out.evidence[0].value["context"]["num_cpus"], 2);
  EXPECT_EQ(out.evidence[0].value["context"]["library_build_type"], "debug");
}

TEST(CommandOutput, GbenchRefusesTwoBenchmarksInOneStart) {
  const std::string message =
      ParseError(OutputFormat::kGoogleBenchmark, Fixture("gbench-two-benchmarks.json"));
  EXPECT_NE(message.find("BM_Sum/4096"), std::string::npos) << message;
  EXPECT_NE(message.find("BM_Memcpy/65536"), std::string::npos) << message;
  EXPECT_NE(message.find("--benchmark_filter"), std::string::npos) << message;
}

TEST(CommandOutput, GbenchReportsABenchmarkThatFailed) {
  const std::string message =
      ParseError(OutputFormat::kGoogleBenchmark, Fixture("gbench-error.json"));
  EXPECT_NE(message.find("BM_Fails"), std::string::npos) << message;
  EXPECT_NE(message.find("input file not found"), std::string::npos) << message;
}

TEST(CommandOutput, GbenchToleratesTextAroundTheDocument) {
  const std::string text =
      "Running ./bench\nwarming up {cache}\n" + Fixture("gbench-sum.json") + "done\n";
  const ParsedOutput out = ParseOk(OutputFormat::kGoogleBenchmark, text);
  EXPECT_EQ(Named(out, "real_time").size(), 3u);
  EXPECT_EQ(out.evidence.size(), 1u);
}

TEST(CommandOutput, GbenchRefusesOutputThatIsNotGbenchJson) {
  EXPECT_NE(ParseError(OutputFormat::kGoogleBenchmark, "BM_Sum/4096  2418 ns  1766 ns  43083")
                .find("not Google Benchmark JSON"),
            std::string::npos);
  EXPECT_NE(ParseError(OutputFormat::kGoogleBenchmark, "{\"context\": {}}")
                .find("no \"benchmarks\" array"),
            std::string::npos);
  EXPECT_NE(ParseError(OutputFormat::kGoogleBenchmark, "[1, 2]").find("not Google Benchmark"),
            std::string::npos);
  EXPECT_NE(ParseError(OutputFormat::kGoogleBenchmark, "").find("not Google Benchmark"),
            std::string::npos);
  EXPECT_NE(ParseError(OutputFormat::kGoogleBenchmark, std::string(100000, '['))
                .find("not Google Benchmark"),
            std::string::npos);
}

// Constructed (not recorded): the shape of Google Benchmark before run_type and repetition_index
// existed (json_reporter.cc of 2017 wrote name, iterations, real_time, cpu_time, time_unit).
TEST(CommandOutput, GbenchOldOutputUsesEntryOrderAsRound) {
  const ParsedOutput out = ParseOk(OutputFormat::kGoogleBenchmark, R"({
    "context": {"num_cpus": 8},
    "benchmarks": [
      {"name": "BM_X", "iterations": 10, "real_time": 5, "cpu_time": 4, "time_unit": "ms"},
      {"name": "BM_X", "iterations": 10, "real_time": 6, "cpu_time": 5, "time_unit": "ms"}
    ]})");
  const std::vector<Sample> real = Named(out, "real_time");
  ASSERT_EQ(real.size(), 2u);
  EXPECT_EQ(real[0].round, 0);
  EXPECT_EQ(real[1].round, 1);
  EXPECT_EQ(real[1].value, 6.0);
  EXPECT_EQ(real[1].unit, "ms");
  EXPECT_EQ(out.evidence.at(0).value["benchmark"], "BM_X");
}

TEST(CommandOutput, GbenchSkipsNonFiniteCountersAndRefusesUnknownTimeUnits) {
  const ParsedOutput out = ParseOk(OutputFormat::kGoogleBenchmark, R"({"benchmarks": [
      {"name": "BM_X", "run_type": "iteration", "repetition_index": 4, "iterations": 1,
       "real_time": 1, "cpu_time": 1, "time_unit": "us", "ratio": NaN, "peak": 2}]})");
  EXPECT_TRUE(Named(out, "ratio").empty());
  ASSERT_EQ(Named(out, "peak").size(), 1u);
  EXPECT_EQ(Named(out, "peak")[0].round, 4);
  EXPECT_NE(ParseError(OutputFormat::kGoogleBenchmark,
                       R"({"benchmarks": [{"name": "BM_X", "real_time": 1, "time_unit": "min"}]})")
                .find("time_unit"),
            std::string::npos);
}

// Constructed after json_reporter.cc of google/benchmark at 267a1115 (SkipWithMessage writes
// "skipped": true and "skip_message"; NaN counters are written as NaN): a skipped run is not
// measured and names no benchmark.
TEST(CommandOutput, GbenchIgnoresRunsSkippedWithAMessage) {
  const ParsedOutput out = ParseOk(OutputFormat::kGoogleBenchmark, R"({"benchmarks": [
      {"name": "BM_Gpu", "run_name": "BM_Gpu", "run_type": "iteration", "repetitions": 1,
       "repetition_index": 0, "threads": 1, "skipped": true, "skip_message": "no GPU",
       "iterations": 0, "real_time": 0, "cpu_time": 0, "time_unit": "ns"},
      {"name": "BM_Cpu", "run_name": "BM_Cpu", "run_type": "iteration", "repetitions": 1,
       "repetition_index": 0, "threads": 1, "iterations": 9, "real_time": 3, "cpu_time": 2,
       "time_unit": "ns"}]})");
  ASSERT_EQ(Named(out, "real_time").size(), 1u);
  EXPECT_EQ(Named(out, "real_time")[0].value, 3.0);
  ASSERT_EQ(out.evidence.size(), 1u);
  EXPECT_EQ(out.evidence[0].value["benchmark"], "BM_Cpu");
}

// ---- nvbench ---------------------------------------------------------------------------------

TEST(CommandOutput, NvbenchReadsTheMeasuredState) {
  const ParsedOutput out = ParseOk(OutputFormat::kNvbench, Fixture("nvbench-simple-device0.json"));
  auto one = [&out](std::string_view metric) {
    const std::vector<Sample> found = Named(out, metric);
    EXPECT_EQ(found.size(), 1u) << metric;
    return found.empty() ? Sample{} : found[0];
  };
  EXPECT_DOUBLE_EQ(one("gpu_time").value, 0.0010034715849794225);
  EXPECT_EQ(one("gpu_time").unit, "s");
  EXPECT_DOUBLE_EQ(one("cpu_time").value, 0.0010094458717434867);
  EXPECT_EQ(one("cpu_time").unit, "s");
  EXPECT_DOUBLE_EQ(one("batch_gpu_time").value, 0.001001475909284053);
  EXPECT_EQ(one("samples").value, 499.0);  // int64, written as a string
  EXPECT_EQ(one("samples").unit, "1");
  // Summaries without a name of ladder's keep their tag, unit from nvbench's hint.
  EXPECT_DOUBLE_EQ(one("nv_cold_walltime").value, 0.51435071);
  EXPECT_EQ(one("nv_cold_walltime").unit, "s");
  EXPECT_EQ(one("nv_cold_time_gpu_stdev_relative").unit, "");
  EXPECT_EQ(one("nv_batch_sample_size").value, 524.0);
  EXPECT_EQ(out.samples.size(), 9u);
  for (const Sample& s : out.samples) EXPECT_EQ(s.round, std::nullopt) << s.metric;

  ASSERT_EQ(out.evidence.size(), 1u);
  EXPECT_EQ(out.evidence[0].kind, "bench_context");
  EXPECT_EQ(out.evidence[0].value["benchmark"], "simple");
  EXPECT_EQ(out.evidence[0].value["state"], "Device=0");
  EXPECT_EQ(out.evidence[0].value["device"], 0);
  EXPECT_TRUE(out.evidence[0].value["axis_values"].is_null());
}

TEST(CommandOutput, NvbenchSkipsSkippedStatesAndReadsBandwidth) {
  const ParsedOutput out =
      ParseOk(OutputFormat::kNvbench, Fixture("nvbench-conversion-skipped-state.json"));
  const std::vector<Sample> bw = Named(out, "global_bytes_per_s");
  ASSERT_EQ(bw.size(), 1u);
  EXPECT_DOUBLE_EQ(bw[0].value, 307662050043.9468);
  EXPECT_EQ(bw[0].unit, "B/s");
  ASSERT_EQ(Named(out, "nv_cold_bw_item_rate").size(), 1u);
  EXPECT_EQ(Named(out, "nv_cold_bw_item_rate")[0].unit, "1/s");
  ASSERT_EQ(Named(out, "nv_gmem_writes_outsize").size(), 1u);
  EXPECT_EQ(Named(out, "nv_gmem_writes_outsize")[0].value, 134217728.0);
  EXPECT_EQ(Named(out, "nv_gmem_writes_outsize")[0].unit, "B");
  ASSERT_EQ(out.evidence.size(), 1u);
  const json& ev = out.evidence[0].value;
  EXPECT_EQ(ev["benchmark"], "copy_type_conversion_sweep");
  EXPECT_EQ(ev["state"], "Device=0 In=I8 Out=I16");
  EXPECT_EQ(ev["axis_values"][1]["name"], "Out");
  EXPECT_EQ(ev["axis_values"][1]["value"], "I16");
}

TEST(CommandOutput, NvbenchRefusesSeveralMeasuredStates) {
  const std::string message =
      ParseError(OutputFormat::kNvbench, Fixture("nvbench-simple-two-devices.json"));
  EXPECT_NE(message.find("2 measured states"), std::string::npos) << message;
  EXPECT_NE(message.find("simple [Device=0]"), std::string::npos) << message;
  EXPECT_NE(message.find("simple [Device=1]"), std::string::npos) << message;
  EXPECT_NE(message.find("--axis"), std::string::npos) << message;
  EXPECT_NE(message.find("--devices"), std::string::npos) << message;
}

TEST(CommandOutput, NvbenchWithOnlySkippedStatesHasNoSamples) {
  json doc = json::parse(Fixture("nvbench-conversion-skipped-state.json"));
  for (json& state : doc["benchmarks"][0]["states"]) state["is_skipped"] = true;
  const ParsedOutput out = ParseOk(OutputFormat::kNvbench, doc.dump());
  EXPECT_TRUE(out.samples.empty());
  EXPECT_TRUE(out.evidence.empty());
}

TEST(CommandOutput, NvbenchRefusesOutputThatIsNotNvbenchJson) {
  EXPECT_NE(ParseError(OutputFormat::kNvbench, "| T | Samples | GPU Time |").find("not nvbench"),
            std::string::npos);
  EXPECT_NE(ParseError(OutputFormat::kNvbench, R"({"meta": {}})").find("no \"benchmarks\" array"),
            std::string::npos);
}

// ---- llama-bench -----------------------------------------------------------------------------

TEST(CommandOutput, LlamaBenchReadsPromptAndGenerationTests) {
  const ParsedOutput out =
      ParseOk(OutputFormat::kLlamaBench, Fixture("llama-bench-readme-b5163.jsonl"));
  const std::vector<Sample> pp = Named(out, "prompt_tok_s");
  const std::vector<Sample> pp_ns = Named(out, "prompt_time");
  const std::vector<Sample> tg = Named(out, "gen_tok_s");
  const std::vector<Sample> tg_ns = Named(out, "gen_time");
  ASSERT_EQ(pp.size(), 5u);
  ASSERT_EQ(pp_ns.size(), 5u);
  ASSERT_EQ(tg.size(), 5u);
  ASSERT_EQ(tg_ns.size(), 5u);
  EXPECT_EQ(out.samples.size(), 20u);
  EXPECT_EQ(pp[0].value, 7155.74);
  EXPECT_EQ(pp[0].unit, "tok/s");
  EXPECT_EQ(pp[0].round, 0);
  EXPECT_EQ(pp_ns[4].value, 69909100.0);
  EXPECT_EQ(pp_ns[4].unit, "ns");
  EXPECT_EQ(pp_ns[4].round, 4);
  EXPECT_EQ(tg[2].value, 118.624);
  EXPECT_EQ(tg_ns[2].value, 1079042600.0);
  EXPECT_EQ(tg_ns[2].round, 2);
  EXPECT_EQ(out.ignored_lines, 0);
}

TEST(CommandOutput, LlamaBenchReadsOlderBuilds) {
  const ParsedOutput out =
      ParseOk(OutputFormat::kLlamaBench, Fixture("llama-bench-readme-b1275.jsonl"));
  ASSERT_EQ(Named(out, "prompt_tok_s").size(), 5u);
  ASSERT_EQ(Named(out, "gen_time").size(), 5u);
  EXPECT_EQ(Named(out, "prompt_tok_s")[1].value, 2419.25);
  EXPECT_EQ(Named(out, "gen_time")[4].value, 967548060.0);
  ASSERT_EQ(out.evidence.size(), 2u);
  EXPECT_EQ(out.evidence[0].value["build_number"], 1275);
}

TEST(CommandOutput, LlamaBenchEvidenceIsTheTestWithoutItsTimings) {
  const ParsedOutput out =
      ParseOk(OutputFormat::kLlamaBench, Fixture("llama-bench-readme-b5163.jsonl"));
  ASSERT_EQ(out.evidence.size(), 2u);
  const json& ev = out.evidence[0].value;
  EXPECT_EQ(out.evidence[0].kind, "bench_context");
  EXPECT_EQ(ev["build_commit"], "8cf427ff");
  EXPECT_EQ(ev["build_number"], 5163);
  EXPECT_EQ(ev["flash_attn"], -1);
  EXPECT_EQ(ev["n_depth"], 0);
  EXPECT_EQ(ev["gpu_info"], "NVIDIA GeForce RTX 4080");
  EXPECT_EQ(ev["n_prompt"], 512);
  for (const char* key :
       {"samples_ns", "samples_ts", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts"}) {
    EXPECT_FALSE(ev.contains(key)) << key;
  }
  EXPECT_EQ(out.evidence[1].value["n_gen"], 128);
}

TEST(CommandOutput, LlamaBenchIgnoresLogLines) {
  const std::vector<std::string> tests = Lines(Fixture("llama-bench-readme-b5163.jsonl"));
  ASSERT_EQ(tests.size(), 2u);
  const std::string text =
      "ggml_cuda_init: found 1 CUDA devices:\n"
      "  Device 0: NVIDIA H100 80GB HBM3, compute capability 9.0, VMM: yes\n"
      "llama_model_loader: loaded meta data with 26 key-value pairs\n" +
      tests[0] + "\n{\"progress\": 0.5}\n" + tests[1] + "\n" + "\xc3\x28 done\n";
  const ParsedOutput out = ParseOk(OutputFormat::kLlamaBench, text);
  EXPECT_EQ(out.samples.size(), 20u);
  EXPECT_EQ(out.evidence.size(), 2u);
  EXPECT_EQ(out.ignored_lines, 5);
}

TEST(CommandOutput, LlamaBenchRefusesTwoTestsOfOneKind) {
  const std::vector<std::string> tests = Lines(Fixture("llama-bench-readme-b5163.jsonl"));
  json second = json::parse(tests.at(0));
  second["n_prompt"] = 1024;
  second["n_depth"] = 4096;
  const std::string message =
      ParseError(OutputFormat::kLlamaBench, tests[0] + "\n" + second.dump() + "\n");
  EXPECT_NE(message.find("prompt"), std::string::npos) << message;
  EXPECT_NE(message.find("pp512"), std::string::npos) << message;
  EXPECT_NE(message.find("pp1024 @ d4096"), std::string::npos) << message;
}

TEST(CommandOutput, LlamaBenchCombinedTestGivesPgMetrics) {
  json pg = json::parse(Lines(Fixture("llama-bench-readme-b5163.jsonl")).at(0));
  pg["n_gen"] = 128;
  const ParsedOutput out = ParseOk(OutputFormat::kLlamaBench, pg.dump());
  ASSERT_EQ(Named(out, "pg_tok_s").size(), 5u);
  ASSERT_EQ(Named(out, "pg_time").size(), 5u);
  EXPECT_EQ(Named(out, "pg_time")[3].value, 69439100.0);
  EXPECT_TRUE(Named(out, "prompt_tok_s").empty());
  EXPECT_TRUE(Named(out, "gen_tok_s").empty());
}

TEST(CommandOutput, LlamaBenchRefusesInconsistentSamples) {
  const json test = json::parse(Lines(Fixture("llama-bench-readme-b5163.jsonl")).at(0));
  json shorter = test;
  shorter["samples_ts"].erase(shorter["samples_ts"].size() - 1);
  EXPECT_NE(ParseError(OutputFormat::kLlamaBench, shorter.dump()).find("samples_ts 4"),
            std::string::npos);
  json no_samples = test;
  no_samples.erase("samples_ns");
  EXPECT_NE(ParseError(OutputFormat::kLlamaBench, no_samples.dump()).find("no samples_ns"),
            std::string::npos);
  json no_ts = test;
  no_ts.erase("samples_ts");
  EXPECT_NE(ParseError(OutputFormat::kLlamaBench, no_ts.dump()).find("samples_ts 0"),
            std::string::npos);
  json text_sample = test;
  text_sample["samples_ns"][0] = "71551000";
  EXPECT_NE(ParseError(OutputFormat::kLlamaBench, text_sample.dump()).find("not a number"),
            std::string::npos);
  json no_kind = test;
  no_kind.erase("n_prompt");
  EXPECT_NE(ParseError(OutputFormat::kLlamaBench, no_kind.dump()).find("n_prompt"),
            std::string::npos);
}

// ---- every format ----------------------------------------------------------------------------

// Truncated at every cut, garbage bytes, nothing: each parser returns (a result or
// InvalidArgument) and never throws or crashes.
TEST(CommandOutput, ParsersSurviveTruncatedAndGarbageOutput) {
  struct Input {
    OutputFormat format;
    std::string text;
  };
  const std::vector<Input> inputs = {
      {OutputFormat::kGoogleBenchmark, Fixture("gbench-memcpy-counters.json")},
      {OutputFormat::kNvbench, Fixture("nvbench-conversion-skipped-state.json")},
      {OutputFormat::kLlamaBench, Fixture("llama-bench-readme-b5163.jsonl")},
      {OutputFormat::kJsonLines,
       "{\"metric\": \"t\", \"value\": 1, \"round\": 0}\n"
       "{\"evidence\": {\"a\": [1, {\"b\": null}]}}\n"},
  };
  std::string garbage;
  uint32_t state = 12345;
  for (int i = 0; i < 4096; ++i) {
    state = state * 1103515245u + 12345u;
    garbage.push_back(static_cast<char>(state >> 16));
  }
  for (const Input& input : inputs) {
    for (size_t cut = 0; cut <= input.text.size(); cut += 61) {
      absl::StatusOr<ParsedOutput> out = ParseOutput(input.format, input.text.substr(0, cut));
      EXPECT_TRUE(out.ok() || out.status().code() == absl::StatusCode::kInvalidArgument);
    }
    for (const std::string& text : {garbage, garbage + input.text, input.text + garbage,
                                    std::string(1, '\0'), std::string()}) {
      absl::StatusOr<ParsedOutput> out = ParseOutput(input.format, text);
      EXPECT_TRUE(out.ok() || out.status().code() == absl::StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace ladder::command
