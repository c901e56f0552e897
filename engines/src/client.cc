#include "ladder/engines/client.h"

#include <httplib.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ladder/common/random.h"
#include "ladder/common/time.h"
#include "ladder/status_macros.h"
#include "message.h"

namespace ladder::engines {

using internal::Cat;
using internal::ToStd;
namespace {

using Clock = std::chrono::steady_clock;

void SetTimeouts(httplib::Client& client, std::chrono::milliseconds connect,
                 std::chrono::milliseconds read) {
  client.set_connection_timeout(connect);
  client.set_read_timeout(read);
  client.set_write_timeout(read);
}

std::string Snippet(std::string_view body) {
  std::string s(body.substr(0, 300));
  if (body.size() > 300) s += "...";
  return s;
}

absl::Status TransportError(const std::string& url, httplib::Error error) {
  return absl::UnavailableError(
      Cat("cannot reach engine at ", url, ": ", httplib::to_string(error)));
}

}  // namespace

EngineClient::EngineClient(EngineEndpoints endpoints, ClientOptions options)
    : endpoints_(std::move(endpoints)), options_(options) {}

absl::StatusOr<std::string> EngineClient::Get(const std::string& path,
                                              std::chrono::milliseconds timeout) const {
  httplib::Client client(endpoints_.base_url);
  SetTimeouts(client, std::min(timeout, options_.connect_timeout), timeout);
  auto result = client.Get(path);
  std::string url = endpoints_.base_url + path;
  if (!result) return TransportError(url, result.error());
  if (result->status != 200) {
    return absl::InternalError(
        Cat("GET ", url, " returned HTTP ", result->status, ": ", Snippet(result->body)));
  }
  return result->body;
}

absl::Status EngineClient::Health(std::chrono::milliseconds timeout) const {
  return Get(endpoints_.health_path, timeout).status();
}

absl::StatusOr<std::string> EngineClient::Version() const {
  if (endpoints_.version_path.empty()) return absl::NotFoundError("engine has no version endpoint");
  ASSIGN_OR_RETURN(std::string body, Get(endpoints_.version_path, std::chrono::seconds(5)));
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("version") && j["version"].is_string()) {
    return j["version"].get<std::string>();
  }
  return absl::DataLossError(Cat("malformed JSON from engine at ", endpoints_.base_url,
                                 endpoints_.version_path, ": ", Snippet(body)));
}

absl::StatusOr<std::vector<PrometheusSample>> EngineClient::Metrics() const {
  if (endpoints_.metrics_path.empty()) return absl::NotFoundError("engine exposes no metrics");
  ASSIGN_OR_RETURN(std::string body, Get(endpoints_.metrics_path, std::chrono::seconds(10)));
  return ParsePrometheusText(body);
}

absl::StatusOr<SpecCounters> EngineClient::ReadSpecCounters(const SpecMetricNames& names) const {
  if (!names.available()) return absl::NotFoundError("no speculation counters for this engine");
  ASSIGN_OR_RETURN(std::vector<PrometheusSample> samples, Metrics());
  std::optional<double> drafts = SumCounter(samples, names.num_drafts);
  std::optional<double> accepted = SumCounter(samples, names.num_accepted_tokens);
  if (!drafts.has_value() || !accepted.has_value()) {
    return absl::NotFoundError(
        Cat("metrics lack ", names.num_drafts, " or ", names.num_accepted_tokens));
  }
  SpecCounters c;
  c.num_drafts = *drafts;
  c.num_accepted_tokens = *accepted;
  c.num_draft_tokens =
      names.num_draft_tokens.empty() ? 0 : SumCounter(samples, names.num_draft_tokens).value_or(0);
  return c;
}

absl::StatusOr<SpecGauges> EngineClient::ReadSpecGauges(const SpecGaugeNames& names) const {
  if (!names.available()) return absl::NotFoundError("no speculation gauges for this engine");
  ASSIGN_OR_RETURN(std::vector<PrometheusSample> samples, Metrics());
  SpecGauges g;
  // A gauge has one sample per label set (per engine rank); their mean is the engine's value.
  auto mean = [&](const std::string& name) -> std::optional<double> {
    double sum = 0;
    int n = 0;
    for (const auto& s : samples) {
      if (s.name == name) {
        sum += s.value;
        ++n;
      }
    }
    if (n == 0) return std::nullopt;
    return sum / n;
  };
  if (!names.accept_length.empty()) g.accept_length = mean(names.accept_length);
  if (!names.accept_rate.empty()) g.accept_rate = mean(names.accept_rate);
  if (!g.accept_length.has_value() && !g.accept_rate.has_value()) {
    return absl::NotFoundError(
        Cat("metrics lack ", names.accept_length, " and ", names.accept_rate));
  }
  return g;
}

absl::StatusOr<GenerationResult> EngineClient::Generate(std::span<const int32_t> prompt,
                                                        int max_tokens) const {
  nlohmann::json body = endpoints_.extra_request_fields.is_object()
                            ? endpoints_.extra_request_fields
                            : nlohmann::json::object();
  if (!endpoints_.model.empty()) body["model"] = endpoints_.model;
  body["prompt"] = std::vector<int32_t>(prompt.begin(), prompt.end());
  body["max_tokens"] = max_tokens;
  body["temperature"] = 0;
  body["ignore_eos"] = true;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};

  std::string url = endpoints_.base_url + endpoints_.completions_path;
  GenerationResult result;
  result.prompt_tokens = static_cast<int>(prompt.size());
  result.completion_tokens = max_tokens;

  std::string buffer;
  std::string raw_prefix;  // the first bytes, for error messages
  absl::Status stream_status;
  bool done = false;
  bool saw_text = false;
  Clock::time_point start;
  Clock::time_point last_text;

  auto handle_event = [&](const std::string& event) -> bool {
    for (absl::string_view line : absl::StrSplit(event, '\n')) {
      line = absl::StripTrailingAsciiWhitespace(line);
      if (!absl::ConsumePrefix(&line, "data:")) continue;
      line = absl::StripLeadingAsciiWhitespace(line);
      if (line == "[DONE]") {
        done = true;
        continue;
      }
      nlohmann::json j =
          nlohmann::json::parse(std::string(line), nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) {
        stream_status = absl::DataLossError(
            Cat("malformed JSON from engine at ", url, ": ", Snippet(ToStd(line))));
        return false;
      }
      if (j.contains("error")) {
        stream_status = absl::InternalError(
            Cat("engine at ", url, " reported an error: ", Snippet(j["error"].dump())));
        return false;
      }
      auto now = Clock::now();
      if (j.contains("choices") && j["choices"].is_array()) {
        for (const auto& choice : j["choices"]) {
          if (choice.is_object() && choice.contains("text") && choice["text"].is_string() &&
              !choice["text"].get_ref<const std::string&>().empty()) {
            if (!saw_text) {
              result.ttft_ms = MsBetween(start, now);
              saw_text = true;
            } else {
              result.gaps_ms.push_back(MsBetween(last_text, now));
            }
            last_text = now;
            break;
          }
        }
      }
      if (j.contains("timings") && j["timings"].is_object()) {
        const auto& timings = j["timings"];
        if (timings.contains("draft_n") && timings["draft_n"].is_number()) {
          result.draft_tokens = timings["draft_n"].get<double>();
        }
        if (timings.contains("draft_n_accepted") && timings["draft_n_accepted"].is_number()) {
          result.accepted_tokens = timings["draft_n_accepted"].get<double>();
        }
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        const auto& usage = j["usage"];
        if (usage.contains("completion_tokens") && usage["completion_tokens"].is_number_integer()) {
          result.completion_tokens = usage["completion_tokens"].get<int>();
          result.usage_reported = true;
        }
        if (usage.contains("prompt_tokens") && usage["prompt_tokens"].is_number_integer()) {
          result.reported_prompt_tokens = usage["prompt_tokens"].get<int>();
        }
      }
    }
    return true;
  };

  httplib::Client client(endpoints_.base_url);
  SetTimeouts(client, options_.connect_timeout, options_.request_timeout);
  httplib::Request req;
  req.method = "POST";
  req.path = endpoints_.completions_path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  int http_status = 0;
  bool event_stream = false;
  std::string plain_body;  // a reply that is not an event stream
  req.response_handler = [&](const httplib::Response& response) {
    http_status = response.status;
    event_stream =
        response.get_header_value("Content-Type").find("text/event-stream") != std::string::npos;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    if (raw_prefix.size() < 300) raw_prefix.append(data, std::min<size_t>(length, 300));
    if (http_status != 200) return true;  // collect the error body below
    if (!event_stream) {
      if (plain_body.size() < (64u << 20)) plain_body.append(data, length);
      return true;
    }
    buffer.append(data, length);
    size_t pos;
    while ((pos = buffer.find("\n\n")) != std::string::npos) {
      std::string event = buffer.substr(0, pos);
      buffer.erase(0, pos + 2);
      if (!handle_event(event)) return false;
    }
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  start = Clock::now();
  bool ok = client.send(req, response, error);
  Clock::time_point end = Clock::now();
  if (!stream_status.ok()) return stream_status;
  if (!ok && http_status == 0) return TransportError(url, error);
  if (http_status != 200) {
    return absl::InternalError(
        Cat("POST ", url, " returned HTTP ", http_status, ": ", Snippet(raw_prefix)));
  }
  if (!ok) return TransportError(url, error);
  if (!event_stream) {
    // The server ignored "stream": accept a complete JSON completion, without token timing.
    nlohmann::json j = nlohmann::json::parse(plain_body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("choices")) {
      return absl::DataLossError(
          Cat("malformed JSON from engine at ", url, ": ", Snippet(plain_body)));
    }
    plain_body = Cat("data: ", j.dump(), "\n\ndata: [DONE]");
    if (!handle_event(plain_body)) return stream_status;
    result.ttft_ms = MsBetween(start, end);  // no streaming: the first token is the whole reply
    result.gaps_ms.clear();
  }
  if (!buffer.empty() && !absl::StripAsciiWhitespace(buffer).empty()) {
    if (!handle_event(buffer)) return stream_status;
  }
  if (!done) {
    return absl::DataLossError(Cat("stream from engine at ", url,
                                   " ended without [DONE]; received: ", Snippet(raw_prefix)));
  }
  if (!saw_text) {
    return absl::DataLossError(Cat("stream from engine at ", url, " carried no text"));
  }
  result.total_ms = MsBetween(start, end);
  return result;
}

std::vector<int32_t> MakePrompt(int depth, uint64_t seed, int32_t id_min, int32_t id_max) {
  std::vector<int32_t> out(static_cast<size_t>(std::max(depth, 0)));
  uint64_t state = seed;
  uint64_t span = static_cast<uint64_t>(std::max(id_max - id_min, 1));
  for (auto& id : out) id = id_min + static_cast<int32_t>(SplitMix64Next(state) % span);
  return out;
}

uint64_t MixSeed(std::initializer_list<uint64_t> values) {
  uint64_t state = 0x6c6164646572ULL;  // "ladder"
  uint64_t out = 0;
  for (uint64_t v : values) {
    state ^= v;
    out = SplitMix64Next(state);
    state = out;
  }
  return out;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = static_cast<size_t>(std::ceil(rank));
  double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

}  // namespace ladder::engines
