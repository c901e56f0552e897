// A client for an OpenAI-compatible completions server, built for measurement: prompts are
// token IDs (no tokenizer), decoding is greedy with ignore_eos, and every request is streamed so
// that the time to first token and the inter-token gaps are observed.
//
// Errors: Unavailable when the server cannot be reached or times out; Internal for an HTTP error
// status (with the start of the body); DataLoss for a reply that is not the JSON / SSE expected
// ("malformed JSON from engine: ..."). Each message names the URL.
//
// Thread safety: an EngineClient may be used from several threads (each call opens its own
// connection).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/engines/prometheus.h"
#include "ladder/engines/recipe.h"

namespace ladder::engines {

struct ClientOptions {
  std::chrono::milliseconds request_timeout{600'000};
  std::chrono::milliseconds connect_timeout{5'000};
};

// One timed generation.
struct GenerationResult {
  int prompt_tokens = 0;            // as sent
  int completion_tokens = 0;        // from the final usage block; else max_tokens (ignore_eos)
  bool usage_reported = false;      // false: completion_tokens was assumed
  int reported_prompt_tokens = -1;  // the server's usage.prompt_tokens, -1 when absent
  double total_ms = 0;              // request sent -> last event received
  double ttft_ms = 0;               // request sent -> first event carrying text
  double last_text_ms = 0;          // request sent -> last event carrying text
  std::vector<double> gaps_ms;      // between successive events carrying text
  // Events whose payload was not UTF-8 (an engine streaming half a character); read with the
  // bad bytes replaced, so the timing stands.
  int invalid_utf8_events = 0;
  // llama-server's own `timings` of this request (the last ones it sent), when it sent them:
  // predicted_per_second (its decode rate), prompt_ms, predicted_ms.
  std::optional<double> engine_decode_tok_s;
  std::optional<double> engine_prompt_ms;
  std::optional<double> engine_predicted_ms;
  // The request's own speculation counts, when the reply carried them: llama-server's
  // `timings.draft_n` / `timings.draft_n_accepted`; SGLang's `sglext.spec_tokens_details`
  // (spec_verify_ct as verify_steps, proposed and correct drafts).
  std::optional<double> draft_tokens;
  std::optional<double> accepted_tokens;
  std::optional<double> verify_steps;
};

// The decode rate seen in the stream: (completion tokens - 1) / (last - first event carrying
// text), i.e. the tokens after the first over the time they took to arrive. Unaffected by what
// happens before the first token or after the last (queueing, prefill, the end of the stream).
// nullopt with fewer than 2 tokens or a zero span (a server that did not stream).
std::optional<double> StreamDecodeRate(const GenerationResult& g);

// The speculative-decoding counters at one instant (sums over label sets).
// For SpecStepCounterNames: num_drafts holds the verify steps and num_accepted_tokens the
// generated tokens.
struct SpecCounters {
  double num_drafts = 0;
  double num_draft_tokens = 0;
  double num_accepted_tokens = 0;
};

// Reads one OpenAI-compatible completion reply as its bytes arrive (server-sent events:
// `data: {json}` separated by blank lines, ending with `data: [DONE]`), timing the events that
// carry text. Feed it the bytes in any chunking with the time they arrived (ms since the
// request was sent), then Finish. Whatever the bytes are, it returns a result or a status,
// never throws: invalid UTF-8 is replaced and counted; an event over 16 MiB, malformed JSON, an
// engine's error object, an impossible usage count, a missing [DONE] or a stream without text
// are DataLoss/Internal naming the URL. Not thread-safe (one per request).
class CompletionStreamParser {
 public:
  CompletionStreamParser(std::string url, int max_tokens);
  // false once the stream is known bad (status() says why): stop reading.
  bool Feed(std::string_view data, double now_ms);
  absl::StatusOr<GenerationResult> Finish(double end_ms);
  // A server that ignored "stream" and sent one JSON completion.
  absl::StatusOr<GenerationResult> FinishPlain(std::string_view body, double end_ms);
  const absl::Status& status() const { return status_; }
  GenerationResult& mutable_result() { return result_; }

 private:
  bool HandleEvent(std::string_view event, double now_ms);

  std::string url_;
  int max_tokens_;
  GenerationResult result_;
  std::string buffer_;
  std::string raw_prefix_;
  absl::Status status_;
  bool done_ = false;
  bool saw_text_ = false;
};

class EngineClient {
 public:
  EngineClient(EngineEndpoints endpoints, ClientOptions options = {});

  // OK when GET health_path answers 200 within `timeout`.
  absl::Status Health(std::chrono::milliseconds timeout) const;

  // GET path (relative to the base URL) -> body, for any 200 reply.
  absl::StatusOr<std::string> Get(const std::string& path, std::chrono::milliseconds timeout) const;

  // The engine's version from version_path ({"version": "..."}); NotFound when it has none.
  absl::StatusOr<std::string> Version() const;

  absl::StatusOr<std::vector<PrometheusSample>> Metrics() const;
  // NotFound when the metrics endpoint lacks the drafts or accepted-tokens counter.
  absl::StatusOr<SpecCounters> ReadSpecCounters(const SpecMetricNames& names) const;

  // Verify steps and generated tokens (SGLang); NotFound when either counter is missing.
  absl::StatusOr<SpecCounters> ReadSpecStepCounters(const SpecStepCounterNames& names) const;

  // A streamed, greedy, ignore_eos completion of `prompt` (token IDs) for max_tokens tokens.
  absl::StatusOr<GenerationResult> Generate(std::span<const int32_t> prompt, int max_tokens) const;

  const EngineEndpoints& endpoints() const { return endpoints_; }

 private:
  EngineEndpoints endpoints_;
  ClientOptions options_;
};

// A prompt of exactly `depth` token IDs drawn uniformly from [id_min, id_max) by a generator
// seeded with `seed` (splitmix64): the same seed gives the same prompt, different seeds give
// unrelated prompts (so no prefix cache can serve them).
std::vector<int32_t> MakePrompt(int depth, uint64_t seed, int32_t id_min, int32_t id_max);

// Mixes several values into one seed (for per-request prompt seeds).
uint64_t MixSeed(std::initializer_list<uint64_t> values);

// The p-th percentile (0..100, linear interpolation) of `values`; 0 when empty.
double Percentile(std::vector<double> values, double p);

}  // namespace ladder::engines
