#include "ladder/engines/client.h"

#include <httplib.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ladder/common/random.h"
#include "ladder/common/time.h"
#include "ladder/common/utf8.h"
#include "ladder/status_macros.h"
#include "message.h"

namespace ladder::engines {

using internal::Cat;
using internal::ToStd;
namespace {

using Clock = std::chrono::steady_clock;

// Bounds on what an engine can make the client hold: one SSE event, and a non-streamed reply.
constexpr size_t kMaxEventBytes = 16u << 20;
constexpr size_t kMaxPlainBody = 64u << 20;

void SetTimeouts(httplib::Client& client, std::chrono::milliseconds connect,
                 std::chrono::milliseconds read) {
  client.set_connection_timeout(connect);
  client.set_read_timeout(read);
  client.set_write_timeout(read);
}

// The start of what an engine sent, for a message: UTF-8 (messages become JSON evidence and
// protobuf strings), whatever the engine's bytes were.
std::string Snippet(std::string_view body) {
  std::string s = ToValidUtf8(body.substr(0, 300));
  if (body.size() > 300) s += "...";
  return s;
}

// One SSE data payload as JSON. An engine may stream bytes that are not UTF-8 (a byte-fallback
// token is half a character); the event is read with those bytes replaced by U+FFFD and
// counted, so the timing survives and the evidence says what happened.
nlohmann::json ParseEvent(std::string_view payload, int& invalid_utf8_events) {
  nlohmann::json j = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded() || IsValidUtf8(payload)) return j;
  j = nlohmann::json::parse(ToValidUtf8(payload), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) ++invalid_utf8_events;
  return j;
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

absl::StatusOr<SpecCounters> EngineClient::ReadSpecStepCounters(
    const SpecStepCounterNames& names) const {
  if (!names.available()) return absl::NotFoundError("no verify-step counters for this engine");
  ASSIGN_OR_RETURN(std::vector<PrometheusSample> samples, Metrics());
  std::optional<double> steps = SumCounter(samples, names.verify_steps);
  std::optional<double> generated = SumCounter(samples, names.generated_tokens);
  if (!steps.has_value() || !generated.has_value()) {
    return absl::NotFoundError(
        Cat("metrics lack ", names.verify_steps, " or ", names.generated_tokens));
  }
  SpecCounters c;
  c.num_drafts = *steps;
  c.num_accepted_tokens = *generated;
  return c;
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
  CompletionStreamParser parser(url, max_tokens);
  parser.mutable_result().prompt_tokens = static_cast<int>(prompt.size());
  std::string raw_prefix;  // the first bytes, for error messages
  Clock::time_point start;

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
      if (plain_body.size() > kMaxPlainBody) return false;
      plain_body.append(data, length);
      return true;
    }
    return parser.Feed(std::string_view(data, length), MsBetween(start, Clock::now()));
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  start = Clock::now();
  bool ok = client.send(req, response, error);
  const double end_ms = MsBetween(start, Clock::now());
  if (!parser.status().ok()) return parser.status();
  if (!ok && http_status == 0) return TransportError(url, error);
  if (http_status != 200) {
    return absl::InternalError(
        Cat("POST ", url, " returned HTTP ", http_status, ": ", Snippet(raw_prefix)));
  }
  if (plain_body.size() > kMaxPlainBody) {
    return absl::DataLossError(Cat("reply from engine at ", url, " is larger than ",
                                   kMaxPlainBody >> 20, " MiB; received: ", Snippet(raw_prefix)));
  }
  if (!ok) {
    if (raw_prefix.empty()) return TransportError(url, error);
    // The connection broke after the reply began: say so, with what arrived (Unavailable, as
    // an engine that died mid-stream gives).
    return absl::UnavailableError(Cat("stream from engine at ", url, " broke off (",
                                      httplib::to_string(error),
                                      ") without [DONE]; received: ", Snippet(raw_prefix)));
  }
  if (!event_stream) return parser.FinishPlain(plain_body, end_ms);
  return parser.Finish(end_ms);
}

CompletionStreamParser::CompletionStreamParser(std::string url, int max_tokens)
    : url_(std::move(url)), max_tokens_(max_tokens) {
  result_.completion_tokens = max_tokens;
}

bool CompletionStreamParser::Feed(std::string_view data, double now_ms) {
  if (!status_.ok()) return false;
  if (raw_prefix_.size() < 300) raw_prefix_.append(data.substr(0, 300));
  buffer_.append(data);
  size_t pos;
  while ((pos = buffer_.find("\n\n")) != std::string::npos) {
    std::string event = buffer_.substr(0, pos);
    buffer_.erase(0, pos + 2);
    if (!HandleEvent(event, now_ms)) return false;
  }
  if (buffer_.size() > kMaxEventBytes) {
    status_ = absl::DataLossError(Cat("event from engine at ", url_, " is larger than ",
                                      kMaxEventBytes >> 20,
                                      " MiB without an end; starts: ", Snippet(buffer_)));
    return false;
  }
  return true;
}

bool CompletionStreamParser::HandleEvent(std::string_view event, double now_ms) {
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(event.data(), event.size()), '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "data:")) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    if (line == "[DONE]") {
      done_ = true;
      continue;
    }
    nlohmann::json j = ParseEvent(ToStd(line), result_.invalid_utf8_events);
    if (j.is_discarded() || !j.is_object()) {
      status_ = absl::DataLossError(
          Cat("malformed JSON from engine at ", url_, ": ", Snippet(ToStd(line))));
      return false;
    }
    if (j.contains("error")) {
      status_ = absl::InternalError(
          Cat("engine at ", url_, " reported an error: ",
              Snippet(j["error"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))));
      return false;
    }
    if (j.contains("choices") && j["choices"].is_array()) {
      for (const auto& choice : j["choices"]) {
        if (choice.is_object() && choice.contains("text") && choice["text"].is_string() &&
            !choice["text"].get_ref<const std::string&>().empty()) {
          if (!saw_text_) {
            result_.ttft_ms = now_ms;
            saw_text_ = true;
          } else {
            result_.gaps_ms.push_back(now_ms - result_.last_text_ms);
          }
          result_.last_text_ms = now_ms;
          break;
        }
      }
    }
    auto number = [](const nlohmann::json& object, const char* key) -> std::optional<double> {
      auto it = object.find(key);
      if (it == object.end() || !it->is_number()) return std::nullopt;
      return it->get<double>();
    };
    if (auto it = j.find("timings"); it != j.end() && it->is_object()) {
      const nlohmann::json& timings = *it;
      if (auto v = number(timings, "draft_n")) result_.draft_tokens = v;
      if (auto v = number(timings, "draft_n_accepted")) result_.accepted_tokens = v;
      if (auto v = number(timings, "predicted_per_second")) result_.engine_decode_tok_s = v;
      if (auto v = number(timings, "prompt_ms")) result_.engine_prompt_ms = v;
      if (auto v = number(timings, "predicted_ms")) result_.engine_predicted_ms = v;
    }
    // SGLang (sglang#33518): a chunk with empty choices and the request's speculation counts.
    if (auto ext = j.find("sglext"); ext != j.end() && ext->is_object()) {
      auto details = ext->find("spec_tokens_details");
      if (details != ext->end() && details->is_array() && !details->empty()) {
        details = details->begin();  // n > 1 gives a list; ladder asks for one completion
      }
      if (details != ext->end() && details->is_object()) {
        auto first = [&](std::initializer_list<const char*> keys) -> std::optional<double> {
          for (const char* key : keys) {
            if (auto v = number(*details, key)) return v;
          }
          return std::nullopt;
        };
        if (auto v = first({"spec_verify_ct"})) result_.verify_steps = v;
        if (auto v = first(
                {"spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num"})) {
          result_.accepted_tokens = v;
        }
        if (auto v = first(
                {"spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num"})) {
          result_.draft_tokens = v;
        }
      }
    }
    if (auto it = j.find("usage"); it != j.end() && it->is_object()) {
      const nlohmann::json& usage = *it;
      if (auto v = number(usage, "completion_tokens")) {
        // ignore_eos: the engine generates max_tokens; a count far from it is not a count.
        if (*v < 0 || *v > 4.0 * max_tokens_ + 16 || *v != std::floor(*v)) {
          status_ =
              absl::DataLossError(Cat("engine at ", url_, " reported usage.completion_tokens ", *v,
                                      " for max_tokens ", max_tokens_));
          return false;
        }
        result_.completion_tokens = static_cast<int>(*v);
        result_.usage_reported = true;
      }
      if (auto v = number(usage, "prompt_tokens")) {
        if (*v >= 0 && *v < 1e9) result_.reported_prompt_tokens = static_cast<int>(*v);
      }
    }
  }
  return true;
}

absl::StatusOr<GenerationResult> CompletionStreamParser::Finish(double end_ms) {
  if (!status_.ok()) return status_;
  if (!buffer_.empty() && !absl::StripAsciiWhitespace(buffer_).empty()) {
    std::string rest = std::move(buffer_);
    buffer_.clear();
    if (!HandleEvent(rest, end_ms)) return status_;
  }
  if (!done_) {
    return absl::DataLossError(Cat("stream from engine at ", url_,
                                   " ended without [DONE]; received: ", Snippet(raw_prefix_)));
  }
  if (!saw_text_) {
    return absl::DataLossError(Cat("stream from engine at ", url_, " carried no text"));
  }
  result_.total_ms = end_ms;
  return result_;
}

absl::StatusOr<GenerationResult> CompletionStreamParser::FinishPlain(std::string_view body,
                                                                     double end_ms) {
  // The server ignored "stream": accept a complete JSON completion, without token timing.
  nlohmann::json j = ParseEvent(body, result_.invalid_utf8_events);
  if (j.is_discarded() || !j.is_object() || !j.contains("choices")) {
    return absl::DataLossError(Cat("malformed JSON from engine at ", url_, ": ", Snippet(body)));
  }
  std::string event =
      Cat("data: ", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
          "\n\ndata: [DONE]");
  if (!HandleEvent(event, end_ms)) return status_;
  // No streaming: the first token is the whole reply.
  result_.ttft_ms = end_ms;
  result_.last_text_ms = end_ms;
  result_.gaps_ms.clear();
  if (!done_ || !saw_text_) {
    return absl::DataLossError(Cat("reply from engine at ", url_, " carried no text"));
  }
  result_.total_ms = end_ms;
  return result_;
}

std::optional<double> StreamDecodeRate(const GenerationResult& g) {
  const double span_ms = g.last_text_ms - g.ttft_ms;
  if (g.completion_tokens < 2 || g.gaps_ms.empty() || span_ms <= 0) return std::nullopt;
  return (g.completion_tokens - 1) / (span_ms / 1000.0);
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
