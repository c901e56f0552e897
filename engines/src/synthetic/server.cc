// The synthetic engine's HTTP server and generation loop.
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "../message.h"
#include "absl/base/thread_annotations.h"
#include "ladder/common/mutex.h"
#include "ladder/common/random.h"
#include "ladder/engines/synthetic_engine.h"
#include "ladder/status_macros.h"
#include "model.h"

namespace ladder::engines {
namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace
namespace {

using internal::Cat;
using synthetic::AcceptanceCurve;
using synthetic::AttentionEvent;
using synthetic::LayerKind;
using synthetic::Model;
using synthetic::Sequence;

constexpr char kVersion[] = "ladder-synthetic 0.1.0";
constexpr size_t kServerThreads = 160;

std::string ErrorBody(std::string_view message) {
  return nlohmann::json{{"error", {{"message", message}, {"type", "invalid_request_error"}}}}
      .dump();
}

std::string TokenText(int32_t token) { return Cat(" t", token); }

uint64_t PromptHash(const std::vector<int32_t>& prompt) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the token ids
  for (int32_t t : prompt) {
    h ^= static_cast<uint32_t>(t);
    h *= 0x100000001b3ULL;
  }
  return MixSeeds(h, prompt.size());
}

}  // namespace

absl::Status SyntheticEngineOptions::Validate() const {
  auto bad = [](std::string_view field, std::string_view why) {
    return absl::InvalidArgumentError(Cat("synthetic engine: ", field, ": ", why));
  };
  RETURN_IF_ERROR(synthetic::FindPreset(preset).status());
  if (policy != "legacy" && policy != "spec-aware") {
    return bad("--policy", Cat("expected legacy or spec-aware, got \"", policy, "\""));
  }
  if (spec_k < 0 || spec_k > 16) return bad("--spec-k", "must be in 0..16");
  RETURN_IF_ERROR(AcceptanceCurve::Parse(acceptance).status());
  if (log_paths != "once" && log_paths != "every" && log_paths != "none") {
    return bad("--log-paths", Cat("expected once, every or none, got \"", log_paths, "\""));
  }
  if (port < 0 || port > 65535) return bad("--port", "must be in 0..65535");
  if (threads < 1) return bad("--threads", "must be >= 1");
  if (max_batch < 1 || max_batch > 1024) return bad("--max-batch", "must be in 1..1024");
  if (attention_backend.empty()) return bad("--attention-backend", "must not be empty");
  if (stall_ms < 0) return bad("--stall-ms", "must be >= 0");
  if (slow_steps_percent < 0 || slow_steps_percent > 1000) {
    return bad("--slow-steps-percent", "must be in 0..1000");
  }
  if (device != "cpu" && device != "cuda" && device != "auto") {
    return bad("--device", Cat("expected cpu, cuda or auto, got \"", device, "\""));
  }
  RETURN_IF_ERROR(synthetic::ParseProjection(projection).status());
  return absl::OkStatus();
}

std::vector<std::string> SyntheticPresetNames() { return synthetic::PresetNames(); }

class SyntheticEngine::Impl {
 public:
  Impl(SyntheticEngineOptions options, LogFn log, std::function<void(int)> on_fatal)
      : options_(std::move(options)), log_(std::move(log)), on_fatal_(std::move(on_fatal)) {}

  ~Impl() { Stop(); }

  absl::Status Init() {
    RETURN_IF_ERROR(options_.Validate());
    ASSIGN_OR_RETURN(synthetic::Preset preset, synthetic::FindPreset(options_.preset));
    ASSIGN_OR_RETURN(acceptance_, AcceptanceCurve::Parse(options_.acceptance));
    kernels::RunOptions attention;
    attention.policy =
        options_.policy == "legacy" ? kernels::Policy::kLegacy : kernels::Policy::kSpecAware;
    attention.config.decode_query_len = options_.spec_k + 1;
    attention.cpu_threads = options_.threads;
    int sliding = 0;
    for (const auto& l : preset.target.layers) sliding += l.kind == LayerKind::kSliding ? 1 : 0;
    Log(Cat("INFO ladder-synthetic: ", kVersion, ": preset ", preset.name, ": ",
            preset.target.layers.size(), " layers (", sliding, " sliding, ",
            preset.target.layers.size() - sliding, " global), hidden ", preset.target.hidden,
            "; drafter ", preset.drafter.layers.size(), " layers, hidden ", preset.drafter.hidden,
            "; policy ", options_.policy, "; spec_k ", options_.spec_k, "; acceptance ",
            options_.acceptance));
    ASSIGN_OR_RETURN(synthetic::ModelDevice device, synthetic::ResolveModelDevice(options_.device));
    ASSIGN_OR_RETURN(synthetic::Projection projection,
                     synthetic::ParseProjection(options_.projection));
    ASSIGN_OR_RETURN(model_, Model::Build(preset, options_.seed, attention, device,
                                          options_.max_batch, projection));
    Log(Cat("INFO ladder-synthetic: model on ", model_->Describe(),
            "; continuous batching of up "
            "to ",
            options_.max_batch, " requests"));
    scheduler_ = std::thread([this] { ScheduleLoop(); });
    if (!options_.force_backend.empty()) {
      Log(Cat("WARNING ladder-synthetic: Forcing ", options_.force_backend, " backend (requested ",
              options_.attention_backend, "; --force-backend)"));
      backend_ = options_.force_backend;
    } else {
      backend_ = options_.attention_backend;
    }
    Log(Cat("INFO ladder-synthetic: Using ", backend_, " backend."));

    server_.set_socket_options([](socket_t sock) {
      int yes = 1;  // SO_REUSEADDR only: never share a port with another listener
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    // One pool thread per open request: a load cell keeps up to its concurrency in flight, and a
    // request waiting for a thread would count its wait as latency (httplib's default pool is
    // the number of cores).
    server_.new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
    server_.set_read_timeout(std::chrono::seconds(600));
    server_.set_write_timeout(std::chrono::seconds(600));
    server_.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("OK", "text/plain");
    });
    server_.Get("/version", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(nlohmann::json{{"version", kVersion}}.dump(), "application/json");
    });
    server_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      nlohmann::json model = {{"id", options_.preset},
                              {"object", "model"},
                              {"owned_by", "ladder"},
                              {"max_model_len", model_->preset().max_model_len}};
      res.set_content(nlohmann::json{{"object", "list"}, {"data", {model}}}.dump(),
                      "application/json");
    });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(Metrics(), "text/plain; version=0.0.4");
    });
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Completions(req, res);
    });

    if (options_.port == 0) {
      port_ = server_.bind_to_any_port(options_.host);
      if (port_ < 0) {
        return absl::FailedPreconditionError(
            Cat("synthetic engine: cannot bind ", options_.host, ":0"));
      }
    } else {
      if (!server_.bind_to_port(options_.host, options_.port)) {
        return absl::FailedPreconditionError(Cat("synthetic engine: cannot bind ", options_.host,
                                                 ":", options_.port,
                                                 ": address already in use or not available"));
      }
      port_ = options_.port;
    }
    thread_ = std::thread([this] {
      server_.listen_after_bind();
      listen_done_ = true;
    });
    // httplib's stop() is a no-op until the listen loop has marked itself running, so a Stop()
    // that came before would leave the loop (and the join) running forever: seen as a hung test.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!server_.is_running()) {
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::InternalError(
            "synthetic engine: the HTTP server did not start listening in 10 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    Log(Cat("INFO ladder-synthetic: serving on http://", options_.host, ":", port_));
    return absl::OkStatus();
  }

  int port() const { return port_; }

  void Stop() noexcept {
    MutexLock lock(&stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    StopScheduler();
    if (!thread_.joinable()) return;
    // Stop only a running loop (httplib's stop() does nothing before it runs), then wait for it.
    bool asked = false;
    while (!listen_done_) {
      if (!asked && server_.is_running()) {
        server_.stop();
        asked = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    thread_.join();
  }

 private:
  void Log(std::string_view line) {
    MutexLock lock(&log_mu_);
    if (log_) {
      log_(line);
    } else {
      std::fwrite(line.data(), 1, line.size(), stderr);
      std::fputc('\n', stderr);
      std::fflush(stderr);
    }
  }

  void Fatal(int status, std::string_view line) {
    Log(line);
    if (on_fatal_) {
      on_fatal_(status);
    } else {
      std::_Exit(status);
    }
  }

  std::string Metrics() {
    MutexLock lock(&metrics_mu_);
    std::string label = Cat("{model_name=\"", options_.preset, "\"}");
    std::string out;
    auto counter = [&](std::string_view name, std::string_view help, double value) {
      out += Cat("# HELP ", name, " ", help, "\n# TYPE ", name, " counter\n", name, label, " ",
                 value, "\n");
    };
    counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", drafts_);
    counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", draft_tokens_);
    counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.",
            accepted_tokens_);
    counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", prompt_tokens_);
    counter("ladder:batch_steps_total", "Target steps run (each reads the weights once).",
            batch_steps_);
    counter("ladder:batch_sequences_total",
            "Sequences summed over target steps (/ steps = mean batch size).", batch_sequences_);
    counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
            generation_tokens_);
    out +=
        "# HELP ladder:attention_calls_total Attention calls by path.\n"
        "# TYPE ladder:attention_calls_total counter\n";
    for (const auto& [key, count] : attention_calls_) {
      const auto& [model, layer, path, rows] = key;
      out += Cat("ladder:attention_calls_total{model=\"", model, "\",layer=\"", layer, "\",path=\"",
                 path, "\",q_rows=\"", rows, "\"} ", count, "\n");
    }
    return out;
  }

  void OnAttention(const AttentionEvent& e) {
    const bool is_3d = e.info.path == kernels::Path::k3D;
    std::string model = e.drafter ? "drafter" : "target";
    std::string layer = e.kind == LayerKind::kGlobal ? "global" : "sliding";
    std::string path = is_3d ? "3d" : "2d";
    bool first = false;
    {
      MutexLock lock(&metrics_mu_);
      int64_t& count = attention_calls_[{model, layer, path, e.q_rows}];
      first = count == 0;
      ++count;
    }
    if (options_.log_paths == "none" || (options_.log_paths == "once" && !first)) return;
    Log(Cat(is_3d && e.q_rows > 1 ? "PROBE_3D_SPEC_ACTIVE" : "ATTN_PATH", " model=", model,
            " layer=", e.layer, " kind=", layer, " path=", path, " q_rows=", e.q_rows, " kv_len=",
            e.kv_len, " segments=", e.info.segments, " reason=\"", e.info.reason, "\""));
  }

  void Completions(const httplib::Request& req, httplib::Response& res) {
    int request_index = requests_.fetch_add(1);
    if (request_index == options_.stall_request && options_.stall_ms > 0) {
      // Outside any engine lock: a stuck client connection, not a stuck engine.
      std::this_thread::sleep_for(std::chrono::milliseconds(options_.stall_ms));
    }
    if (options_.malformed) {
      res.set_content("{\"id\": \"cmpl-malformed\", \"choices\": [{\"text\": ", "application/json");
      return;
    }
    nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      res.status = 400;
      res.set_content(ErrorBody("request body is not a JSON object"), "application/json");
      return;
    }
    std::vector<int32_t> prompt;
    const nlohmann::json& p = body.contains("prompt") ? body["prompt"] : nlohmann::json();
    if (p.is_array()) {
      for (const auto& t : p) {
        if (!t.is_number_integer()) {
          res.status = 400;
          res.set_content(ErrorBody("prompt must be a list of token ids or a string"),
                          "application/json");
          return;
        }
        prompt.push_back(t.get<int32_t>());
      }
    } else if (p.is_string()) {
      std::string s = p.get<std::string>();
      size_t i = 0;
      while (i < s.size()) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (i >= s.size()) break;
        size_t start = i;
        while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        prompt.push_back(static_cast<int32_t>(std::hash<std::string>{}(s.substr(start, i - start)) %
                                              static_cast<size_t>(model_->preset().target.vocab)));
      }
    }
    int max_tokens = body.value("max_tokens", 16);
    const int max_len = model_->preset().max_model_len;
    if (prompt.empty() || max_tokens < 1 ||
        static_cast<int>(prompt.size()) + max_tokens + options_.spec_k + 1 > max_len) {
      res.status = 400;
      res.set_content(ErrorBody(Cat("need a non-empty prompt, max_tokens >= 1 and prompt + "
                                    "max_tokens within max_model_len ",
                                    max_len, " (got ", prompt.size(), " + ", max_tokens, ")")),
                      "application/json");
      return;
    }
    const bool stream = body.value("stream", false);
    bool include_usage = false;
    if (body.contains("stream_options") && body["stream_options"].is_object()) {
      include_usage = body["stream_options"].value("include_usage", false);
    }
    const bool crash =
        options_.crash_after_requests >= 0 && request_index >= options_.crash_after_requests;
    const bool oom =
        options_.oom_after_requests >= 0 && request_index >= options_.oom_after_requests;
    std::string id = Cat("cmpl-", request_index);
    int64_t created = static_cast<int64_t>(std::time(nullptr));
    const std::string model_name = options_.preset;
    auto chunk_json = [id, created, model_name](const std::string& text, const char* finish) {
      nlohmann::json choice = {{"index", 0},
                               {"text", text},
                               {"logprobs", nullptr},
                               {"finish_reason", finish ? nlohmann::json(finish) : nullptr}};
      return nlohmann::json{{"id", id},
                            {"object", "text_completion"},
                            {"created", created},
                            {"model", model_name},
                            {"choices", {choice}}};
    };
    const int prompt_tokens = static_cast<int>(prompt.size());
    auto usage = [prompt_tokens](int completion) {
      return nlohmann::json{{"prompt_tokens", prompt_tokens},
                            {"completion_tokens", completion},
                            {"total_tokens", prompt_tokens + completion}};
    };

    if (!stream) {
      std::string text;
      int produced = 0;
      absl::Status s = Generate(prompt, max_tokens, request_index, crash, oom,
                                [&](const std::vector<int32_t>& tokens) {
                                  for (int32_t t : tokens) text += TokenText(t);
                                  produced += static_cast<int>(tokens.size());
                                  return true;
                                });
      if (!s.ok()) {
        res.status = 500;
        res.set_content(ErrorBody(internal::ToStd(s.message())), "application/json");
        return;
      }
      nlohmann::json reply = chunk_json(text, "length");
      reply["usage"] = usage(produced);
      res.set_content(reply.dump(), "application/json");
      return;
    }
    res.set_chunked_content_provider("text/event-stream", [this, prompt, max_tokens, request_index,
                                                           crash, oom, include_usage, chunk_json,
                                                           usage](size_t, httplib::DataSink& sink) {
      int produced = 0;
      absl::Status s = Generate(
          prompt, max_tokens, request_index, crash, oom, [&](const std::vector<int32_t>& tokens) {
            std::string text;
            for (int32_t t : tokens) text += TokenText(t);
            produced += static_cast<int>(tokens.size());
            std::string event = Cat("data: ", chunk_json(text, nullptr).dump(), "\n\n");
            return sink.write(event.data(), event.size());
          });
      if (!s.ok()) {
        std::string event = Cat("data: ", ErrorBody(internal::ToStd(s.message())), "\n\n");
        sink.write(event.data(), event.size());
      } else {
        std::string event = Cat("data: ", chunk_json("", "length").dump(), "\n\n");
        if (include_usage) {
          nlohmann::json u = {{"id", Cat("cmpl-", request_index)},
                              {"object", "text_completion"},
                              {"choices", nlohmann::json::array()},
                              {"usage", usage(produced)}};
          event += Cat("data: ", u.dump(), "\n\n");
        }
        event += "data: [DONE]\n\n";
        sink.write(event.data(), event.size());
      }
      sink.done();
      return true;
    });
  }

  // One request in the scheduler.
  struct Job {
    std::vector<int32_t> prompt;
    int max_tokens = 0;
    int request_index = 0;
    bool crash = false, oom = false;
    // The scheduler thread's alone:
    std::optional<Sequence> seq;
    bool started = false;  // has taken its first (prefill) step
    int produced = 0;
    int32_t last = 0;
    uint64_t draw_state = 0;
    // Shared with the request's handler thread:
    Mutex mu;
    std::condition_variable cv;
    // Steps' tokens not yet sent.
    std::deque<std::vector<int32_t>> ready ABSL_GUARDED_BY(mu);
    bool finished ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
    std::atomic<bool> abandoned{false};  // the client went away
  };

  // Generates max_tokens tokens for `prompt`, calling emit with each step's new tokens, as the
  // scheduler produces them. emit returns false when the client went away.
  absl::Status Generate(const std::vector<int32_t>& prompt, int max_tokens, int request_index,
                        bool crash, bool oom,
                        const std::function<bool(const std::vector<int32_t>&)>& emit) {
    auto job = std::make_shared<Job>();
    job->prompt = prompt;
    job->max_tokens = max_tokens;
    job->request_index = request_index;
    job->crash = crash;
    job->oom = oom;
    {
      MutexLock lock(&queue_mu_);
      if (scheduler_stopping_) return absl::UnavailableError("synthetic engine: shutting down");
      pending_.push_back(job);
    }
    queue_cv_.notify_one();
    while (true) {
      std::deque<std::vector<int32_t>> ready;
      bool finished = false;
      absl::Status status;
      {
        MutexLock lock(&job->mu);
        job->mu.Wait(job->cv, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return !job->ready.empty() || job->finished;  // called with job->mu held
        });
        ready.swap(job->ready);
        finished = job->finished;
        status = job->status;
      }
      for (const auto& tokens : ready) {
        if (!emit(tokens)) {
          job->abandoned = true;
          return absl::OkStatus();
        }
      }
      if (finished) return status;
    }
  }

  void Finish(Job& job, absl::Status status) {
    {
      MutexLock lock(&job.mu);
      job.finished = true;
      job.status = std::move(status);
    }
    job.cv.notify_all();
  }

  void Deliver(Job& job, std::vector<int32_t> tokens) {
    if (static_cast<int>(tokens.size()) > job.max_tokens - job.produced) {
      tokens.resize(static_cast<size_t>(job.max_tokens - job.produced));
    }
    job.produced += static_cast<int>(tokens.size());
    job.last = tokens.empty() ? job.last : tokens.back();
    {
      MutexLock mlock(&metrics_mu_);
      generation_tokens_ += static_cast<double>(tokens.size());
    }
    {
      MutexLock lock(&job.mu);
      job.ready.push_back(std::move(tokens));
      if (job.produced >= job.max_tokens) job.finished = true;
    }
    job.cv.notify_all();
  }

  // Continuous batching: every iteration admits waiting requests (up to max_batch in all) and
  // runs one step for every active one, new ones taking their first (prefill) step alongside
  // the others' decode or speculative steps.
  void ScheduleLoop() {
    std::vector<std::shared_ptr<Job>> active;
    while (true) {
      {
        MutexLock lock(&queue_mu_);
        queue_mu_.Wait(queue_cv_, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          // Called with queue_mu_ held.
          return scheduler_stopping_ || !pending_.empty() || !active.empty();
        });
        if (scheduler_stopping_) break;
        while (!pending_.empty() && static_cast<int>(active.size()) < options_.max_batch) {
          active.push_back(std::move(pending_.front()));
          pending_.pop_front();
        }
      }
      if (absl::Status s = Step(active); !s.ok()) {
        for (auto& job : active) Finish(*job, s);
        active.clear();
      }
      std::erase_if(active, [](const std::shared_ptr<Job>& job) {
        MutexLock lock(&job->mu);
        return job->finished || job->abandoned;
      });
    }
    MutexLock lock(&queue_mu_);
    for (auto& job : active)
      Finish(*job, absl::UnavailableError("synthetic engine: shutting down"));
    for (auto& job : pending_)
      Finish(*job, absl::UnavailableError("synthetic engine: shutting down"));
    pending_.clear();
  }

  void StopScheduler() noexcept {
    {
      MutexLock lock(&queue_mu_);
      scheduler_stopping_ = true;
    }
    queue_cv_.notify_all();
    if (scheduler_.joinable()) scheduler_.join();
  }

  // One batched step for `active`.
  absl::Status Step(std::vector<std::shared_ptr<Job>>& active) {
    const double step_cpu_start = ThreadCpuSeconds();
    const int k = options_.spec_k;
    auto observer = [this](const AttentionEvent& e) { OnAttention(e); };
    // Admit: the approximated prefill (random KV up to depth - 1) for requests new this step.
    for (auto& job : active) {
      if (job->seq.has_value() || job->abandoned) continue;
      const int depth = static_cast<int>(job->prompt.size());
      // Seeded by the prompt, not the arrival order: a request's KV fill and acceptance draws
      // (so its tokens) are the same whatever else is in the batch.
      uint64_t seed = MixSeeds(options_.seed, PromptHash(job->prompt));
      job->draw_state = seed ^ 0xacce97ULL;
      auto seq = model_->Prefill(depth, depth + job->max_tokens + k + 2, seed);
      if (!seq.ok()) {
        Finish(*job, seq.status());
        continue;
      }
      job->seq = std::move(*seq);
      job->last = job->prompt.back();
      MutexLock mlock(&metrics_mu_);
      prompt_tokens_ += depth;
    }
    std::vector<Job*> jobs;
    for (auto& job : active) {
      bool finished;
      {
        MutexLock lock(&job->mu);
        finished = job->finished;
      }
      if (finished || job->abandoned || !job->seq.has_value()) continue;
      if (job->started && job->produced * 2 >= job->max_tokens) {
        if (job->crash)
          Fatal(3, "ERROR ladder-synthetic: crashing on purpose (--crash-after-requests)");
        if (job->oom) {
          Fatal(1,
                "ERROR ladder-synthetic: torch.OutOfMemoryError: CUDA out of memory. Tried to "
                "allocate 2.00 GiB (synthetic fault: --oom-after-requests)");
        }
      }
      jobs.push_back(job.get());
    }
    if (jobs.empty()) return absl::OkStatus();
    // Speculating requests draft k tokens first, one batched drafter step per token.
    std::vector<Job*> drafting;
    if (k > 0) {
      for (Job* job : jobs) {
        if (job->started) drafting.push_back(job);
      }
    }
    std::vector<std::vector<int32_t>> drafts(drafting.size());
    std::vector<int> bases(drafting.size());
    if (!drafting.empty()) {
      std::vector<Sequence*> seqs;
      std::vector<int32_t> tokens;
      for (size_t i = 0; i < drafting.size(); ++i) {
        seqs.push_back(&*drafting[i]->seq);
        tokens.push_back(drafting[i]->last);
        bases[i] = drafting[i]->seq->length();
      }
      for (int step = 0; step < k; ++step) {
        std::vector<int> positions(drafting.size());
        for (size_t i = 0; i < drafting.size(); ++i) positions[i] = bases[i] + step;
        ASSIGN_OR_RETURN(std::vector<int32_t> next,
                         model_->DrafterStepBatch(seqs, tokens, positions, observer));
        for (size_t i = 0; i < drafting.size(); ++i) drafts[i].push_back(next[i]);
        tokens = std::move(next);
      }
    }
    // The target step: one row for a new or non-speculating request, k + 1 to verify.
    std::vector<Sequence*> seqs;
    std::vector<std::vector<int32_t>> rows;
    size_t d = 0;
    std::vector<int> draft_of(jobs.size(), -1);
    for (size_t j = 0; j < jobs.size(); ++j) {
      seqs.push_back(&*jobs[j]->seq);
      std::vector<int32_t> r = {jobs[j]->last};
      if (d < drafting.size() && drafting[d] == jobs[j]) {
        r.insert(r.end(), drafts[d].begin(), drafts[d].end());
        draft_of[j] = static_cast<int>(d++);
      }
      rows.push_back(std::move(r));
    }
    ASSIGN_OR_RETURN(auto verified, model_->TargetStepBatch(seqs, rows, observer));
    if (options_.slow_steps_percent > 0) {
      // A planted slowdown, as a slower build would be: more work on this thread's CPU, in
      // proportion to the step's own CPU time. Counted in CPU time, not wall time, so that on a
      // busy machine it is slowed by contention as the step itself is, and not more.
      const double work = ThreadCpuSeconds() - step_cpu_start;
      const double until = step_cpu_start + work * (1.0 + options_.slow_steps_percent / 100.0);
      while (ThreadCpuSeconds() < until) {
      }
    }
    {
      MutexLock mlock(&metrics_mu_);
      batch_steps_ += 1;
      batch_sequences_ += static_cast<double>(jobs.size());
    }
    for (size_t j = 0; j < jobs.size(); ++j) {
      Job& job = *jobs[j];
      if (draft_of[j] < 0) {
        job.started = true;
        Deliver(job, {verified[j][0]});
        continue;
      }
      const int base = bases[static_cast<size_t>(draft_of[j])];
      const double rate = acceptance_.At(base);
      int accepted = 0;
      while (accepted < k) {
        job.draw_state = MixSeeds(job.draw_state, 0x5bd1e995);
        double u = static_cast<double>(job.draw_state >> 11) * (1.0 / 9007199254740992.0);
        if (u >= rate) break;
        ++accepted;
      }
      model_->Rewind(*job.seq, base + accepted + 1);
      {
        MutexLock mlock(&metrics_mu_);
        drafts_ += 1;
        draft_tokens_ += k;
        accepted_tokens_ += accepted;
      }
      Deliver(job, std::vector<int32_t>(verified[j].begin(), verified[j].begin() + accepted + 1));
    }
    return absl::OkStatus();
  }

  const SyntheticEngineOptions options_;
  const LogFn log_;
  const std::function<void(int)> on_fatal_;
  AcceptanceCurve acceptance_;
  std::unique_ptr<Model> model_;
  std::string backend_;

  httplib::Server server_;
  std::thread thread_;                    // runs server_.listen_after_bind()
  std::atomic<bool> listen_done_{false};  // set by thread_ when the listen loop has returned
  int port_ = 0;
  Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
  Mutex log_mu_;
  std::thread scheduler_;  // runs ScheduleLoop(): the model is stepped on this thread only
  Mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::shared_ptr<Job>> pending_ ABSL_GUARDED_BY(queue_mu_);
  bool scheduler_stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::atomic<int> requests_{0};

  Mutex metrics_mu_;
  double drafts_ ABSL_GUARDED_BY(metrics_mu_) = 0;
  double draft_tokens_ ABSL_GUARDED_BY(metrics_mu_) = 0;
  double accepted_tokens_ ABSL_GUARDED_BY(metrics_mu_) = 0;
  double prompt_tokens_ ABSL_GUARDED_BY(metrics_mu_) = 0;
  double generation_tokens_ ABSL_GUARDED_BY(metrics_mu_) = 0;
  double batch_steps_ ABSL_GUARDED_BY(metrics_mu_) = 0;
  double batch_sequences_ ABSL_GUARDED_BY(metrics_mu_) = 0;
  std::map<std::tuple<std::string, std::string, std::string, int>, int64_t> attention_calls_
      ABSL_GUARDED_BY(metrics_mu_);
};

SyntheticEngine::SyntheticEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SyntheticEngine::~SyntheticEngine() { Stop(); }
int SyntheticEngine::port() const { return impl_->port(); }
void SyntheticEngine::Stop() noexcept { impl_->Stop(); }

absl::StatusOr<std::unique_ptr<SyntheticEngine>> SyntheticEngine::Start(
    const SyntheticEngineOptions& options, LogFn log, std::function<void(int)> on_fatal) {
  auto impl = std::make_unique<Impl>(options, std::move(log), std::move(on_fatal));
  RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<SyntheticEngine>(new SyntheticEngine(std::move(impl)));
}

absl::Status RunSyntheticEngine(const SyntheticEngineOptions& options) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &signals, &previous);  // inherited by the server's threads
  absl::StatusOr<std::unique_ptr<SyntheticEngine>> engine = SyntheticEngine::Start(options);
  if (!engine.ok()) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    return engine.status();
  }
  int received = 0;
  sigwait(&signals, &received);
  std::fprintf(stderr, "INFO ladder-synthetic: received signal %d, shutting down\n", received);
  std::fflush(stderr);
  (*engine)->Stop();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return absl::OkStatus();
}

}  // namespace ladder::engines
