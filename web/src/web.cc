#include "ladder/web/web.h"

#include <google/protobuf/util/json_util.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ladder/db/query.h"
#include "ladder/db/sqlite.h"
#include "ladder/report/history.h"
#include "ladder/report/report.h"
#include "pages.h"

namespace ladder::web {
namespace {

bool IsLoopbackHost(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]" ||
         host.rfind("127.", 0) == 0;
}

int HttpStatus(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    default:
      return 500;
  }
}

void Fail(httplib::Response& res, const absl::Status& status) {
  res.status = HttpStatus(status.code());
  res.set_content(std::string(status.message()) + "\n", "text/plain; charset=utf-8");
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

// The token of a request: `Authorization: Bearer T`, else the cookie `ladder_token=T`.
std::string RequestToken(const httplib::Request& req) {
  const std::string auth = req.get_header_value("Authorization");
  if (absl::StartsWith(auth, "Bearer ")) return auth.substr(7);
  const std::string cookies = req.get_header_value("Cookie");
  for (absl::string_view part : absl::StrSplit(cookies, ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::StartsWith(part, "ladder_token=")) return std::string(part.substr(13));
  }
  return "";
}

// A query parameter read from the raw target, whole: the httplib in use cuts a value at its
// second '=', and `?cells=depth=4096` is how people type a cell.
std::string RawParam(const httplib::Request& req, const std::string& name) {
  const size_t q = req.target.find('?');
  if (q == std::string::npos) return "";
  for (absl::string_view item : absl::StrSplit(req.target.substr(q + 1), '&')) {
    if (absl::StartsWith(item, name + "=")) {
      return httplib::detail::decode_url(std::string(item.substr(name.size() + 1)), true);
    }
  }
  return "";
}

bool ParseId(const std::string& text, int64_t* id) { return absl::SimpleAtoi(text, id) && *id > 0; }

}  // namespace

struct WebServer::Impl {
  WebOptions options;
  coordinator::Coordinator* coordinator = nullptr;
  std::unique_ptr<httplib::Server> server;
  std::thread thread;
  std::string host;
  int port = 0;
  bool tls = false;
  bool token_required = false;  // beyond loopback: always

  struct CachedReport {
    std::string state;  // each run's state and measurement count when it was built
    std::chrono::steady_clock::time_point built;
    std::string html;
  };
  static constexpr std::chrono::seconds kReportRefresh{10};
  static constexpr size_t kMaxHistoryCells = 48;
  std::mutex cache_mu;
  std::map<std::string, CachedReport> report_cache;  // by run ids

  // Every request: the token check, then the handler.
  bool Admit(const httplib::Request& req, httplib::Response& res) {
    // `?token=` sets the cookie and sends the browser to the same page without it in the URL.
    if (req.has_param("token")) {
      const std::string token = req.get_param_value("token");
      if (auto s = coordinator->CheckAdminToken(token, token_required); !s.ok()) {
        Fail(res, s);
        return false;
      }
      res.set_header("Set-Cookie",
                     absl::StrCat("ladder_token=", token, "; Path=/; HttpOnly; SameSite=Strict",
                                  tls ? "; Secure" : ""));
      res.set_redirect(req.path);
      return false;
    }
    if (auto s = coordinator->CheckAdminToken(RequestToken(req), token_required); !s.ok()) {
      Fail(res, s);
      return false;
    }
    return true;
  }

  template <typename Handler>
  auto Guarded(Handler handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      if (!Admit(req, res)) return;
      res.set_header("Cache-Control", "no-store");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Content-Security-Policy",
                     "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                     "img-src data:; connect-src 'self'; frame-src 'self'; frame-ancestors 'self'");
      handler(req, res);
    };
  }

  absl::StatusOr<std::unique_ptr<db::Database>> Reader() {
    return db::Database::Open(coordinator->db_path(), db::OpenMode::kReadOnly);
  }

  void Routes() {
    httplib::Server& s = *server;
    s.Get("/metrics", Guarded([this](const httplib::Request&, httplib::Response& res) {
            res.set_content(coordinator->MetricsText(), "text/plain; version=0.0.4; charset=utf-8");
          }));
    if (options.metrics_only) return;
    s.Get("/", Guarded([](const httplib::Request&, httplib::Response& res) {
            res.set_content(RunsPage(), "text/html; charset=utf-8");
          }));
    s.Get("/fleet", Guarded([](const httplib::Request&, httplib::Response& res) {
            res.set_content(FleetPage(), "text/html; charset=utf-8");
          }));
    s.Get(R"(/runs/(\d+))", Guarded([](const httplib::Request& req, httplib::Response& res) {
            int64_t id = 0;
            if (!ParseId(req.matches[1], &id)) return Fail(res, absl::NotFoundError("no such run"));
            res.set_content(RunPage(id), "text/html; charset=utf-8");
          }));
    // A matrix's history (matrix names are [A-Za-z0-9_.-]+), drawn on the server from the
    // database by the report library: the page `ladder report RUN --history` writes.
    s.Get(
        R"(/matrices/([A-Za-z0-9_.-]{1,200}))",
        Guarded([this](const httplib::Request& req, httplib::Response& res) {
          report::HistoryOptions options;
          if (req.has_param("metric")) options.metric = req.get_param_value("metric");
          if (req.has_param("baseline")) options.baseline = req.get_param_value("baseline");
          for (absl::string_view item :
               absl::StrSplit(RawParam(req, "cells"), ',', absl::SkipEmpty())) {
            options.cells.emplace_back(item);
          }
          if (auto s = options.Validate(); !s.ok()) return Fail(res, s);
          auto reader = Reader();
          if (!reader.ok()) return Fail(res, reader.status());
          auto history = report::ReadHistory(**reader, req.matches[1], options);
          if (!history.ok()) return Fail(res, history.status());
          std::vector<std::string> notes;
          // Hundreds of cells of a hundred runs each are megabytes of SVG: the cells where a
          // slowdown was searched for first, then the rest in order, up to kMaxHistoryCells.
          if (history->series.size() > kMaxHistoryCells) {
            std::stable_partition(history->series.begin(), history->series.end(),
                                  [](const report::HistorySeries& s) { return s.change.searched; });
            notes.push_back(absl::StrCat(
                "Showing ", kMaxHistoryCells, " of ", history->series.size(),
                " cells (those whose latest run is slower than the baseline first): narrow "
                "the page with ?cells=axis=value, or see them all with `ladder history ",
                history->matrix_name, "`."));
            history->series.resize(kMaxHistoryCells);
          }
          res.set_content(MatrixPage(history->matrix_name, report::RenderHistoryFragment(*history),
                                     report::HistoryChartStyle(), notes),
                          "text/html; charset=utf-8");
        }));
    s.Get(R"(/sessions/([0-9a-fA-F-]{1,64}))",
          Guarded([](const httplib::Request& req, httplib::Response& res) {
            res.set_content(SessionPage(req.matches[1]), "text/html; charset=utf-8");
          }));
    s.Get("/api/runs", Guarded([this](const httplib::Request&, httplib::Response& res) {
            auto runs = coordinator->ListRuns(200);
            if (!runs.ok()) return Fail(res, runs.status());
            res.set_content(ToJson(*runs), "application/json");
          }));
    s.Get(R"(/api/runs/(\d+))",
          Guarded([this](const httplib::Request& req, httplib::Response& res) {
            int64_t id = 0;
            if (!ParseId(req.matches[1], &id)) return Fail(res, absl::NotFoundError("no such run"));
            auto run = coordinator->GetRun(id);
            if (!run.ok()) return Fail(res, run.status());
            res.set_content(ToJson(*run), "application/json");
          }));
    s.Get("/api/sessions", Guarded([this](const httplib::Request&, httplib::Response& res) {
            auto sessions = coordinator->ListSessions();
            if (!sessions.ok()) return Fail(res, sessions.status());
            res.set_content(ToJson(*sessions), "application/json");
          }));
    s.Get(R"(/api/sessions/([0-9a-fA-F-]{1,64})/attempts)",
          Guarded([this](const httplib::Request& req, httplib::Response& res) {
            auto reader = Reader();
            if (!reader.ok()) return Fail(res, reader.status());
            auto attempts = db::ListSessionAttempts(**reader, req.matches[1], 500);
            if (!attempts.ok()) return Fail(res, attempts.status());
            nlohmann::json out = nlohmann::json::array();
            for (const auto& a : *attempts) {
              out.push_back({{"attempt_id", a.attempt_id},
                             {"run_id", a.run_id},
                             {"unit_index", a.unit_index},
                             {"group_key", a.group_key},
                             {"state", a.state},
                             {"leased_at_ms", a.leased_at_ms},
                             {"ended_at_ms", a.ended_at_ms},
                             {"reason", a.reason}});
            }
            res.set_content(out.dump(), "application/json");
          }));
    // The report library's page for one run (or two, compared): one implementation of every
    // table and chart, with a banner while a run is still running.
    auto report = [this](std::vector<int64_t> ids, httplib::Response& res) {
      std::string key, state;
      std::string banners;
      for (int64_t id : ids) {
        auto run = coordinator->GetRun(id);
        if (!run.ok()) return Fail(res, run.status());
        absl::StrAppend(&key, id, ",");
        absl::StrAppend(&state, run->state(), ":", run->measurements(), ",");
        if (run->state() != "done" && run->state() != "cancelled") {
          banners += ProvisionalBanner(run->cells_done(), run->cells_total());
        }
      }
      // One build per page per kReportRefresh at most while results land, however many
      // viewers: building it reads every measurement of the run.
      const auto now = std::chrono::steady_clock::now();
      {
        std::lock_guard lock(cache_mu);
        auto it = report_cache.find(key);
        if (it != report_cache.end() &&
            (it->second.state == state ||
             (!banners.empty() && now - it->second.built < kReportRefresh))) {
          res.set_content(it->second.html, "text/html; charset=utf-8");
          return;
        }
      }
      auto reader = Reader();
      if (!reader.ok()) return Fail(res, reader.status());
      auto built = report::BuildReport(**reader, ids);
      if (!built.ok()) return Fail(res, built.status());
      std::string html = report::RenderHtml(*built);
      if (const size_t body = html.find("<body>"); !banners.empty() && body != std::string::npos) {
        html.insert(body + 6, banners);
      }
      {
        std::lock_guard lock(cache_mu);
        if (report_cache.size() > 64) report_cache.clear();
        report_cache[key] = CachedReport{state, now, html};
      }
      res.set_content(html, "text/html; charset=utf-8");
    };
    s.Get(R"(/runs/(\d+)/report)",
          Guarded([report](const httplib::Request& req, httplib::Response& res) {
            int64_t id = 0;
            if (!ParseId(req.matches[1], &id)) return Fail(res, absl::NotFoundError("no such run"));
            report({id}, res);
          }));
    s.Get("/compare", Guarded([report](const httplib::Request& req, httplib::Response& res) {
            int64_t a = 0, b = 0;
            if (!ParseId(req.get_param_value("a"), &a) || !ParseId(req.get_param_value("b"), &b)) {
              return Fail(res, absl::InvalidArgumentError(
                                   "compare: give two run ids, /compare?a=RUN_A&b=RUN_B"));
            }
            report({a, b}, res);
          }));
  }
};

absl::StatusOr<std::unique_ptr<WebServer>> WebServer::Start(const WebOptions& options,
                                                            coordinator::Coordinator* coordinator) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->coordinator = coordinator;
  std::string listen = options.listen;
  if (listen.find(':') == std::string::npos) listen = "127.0.0.1:" + listen;
  const size_t colon = listen.rfind(':');
  impl->host = listen.substr(0, colon);
  if (impl->host.size() > 2 && impl->host.front() == '[') {
    impl->host = impl->host.substr(1, impl->host.size() - 2);
  }
  int port = 0;
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http: expected HOST:PORT or PORT, got '", options.listen, "'"));
  }
  const bool loopback = IsLoopbackHost(impl->host);
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--http: TLS needs both a certificate and a key");
  }
  if (!loopback && options.tls_cert_file.empty() && !options.insecure) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http ", options.listen,
        " is beyond loopback: give the coordinator's --tls-cert and --tls-key (or --insecure "
        "behind a tunnel you trust)"));
  }
  impl->token_required = !loopback;
  impl->tls = !options.tls_cert_file.empty();
  if (impl->tls) {
    impl->server = std::make_unique<httplib::SSLServer>(options.tls_cert_file.c_str(),
                                                        options.tls_key_file.c_str());
  } else {
    impl->server = std::make_unique<httplib::Server>();
  }
  if (!impl->server->is_valid()) {
    return absl::InvalidArgumentError("--http: cannot load the TLS certificate or key");
  }
  impl->server->set_read_timeout(10, 0);
  impl->server->set_write_timeout(10, 0);
  impl->server->set_payload_max_length(64 * 1024);
  impl->Routes();
  impl->port = port == 0 ? impl->server->bind_to_any_port(impl->host)
                         : (impl->server->bind_to_port(impl->host, port) ? port : -1);
  if (impl->port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("--http: cannot listen on ", listen, " (address in use or not local?)"));
  }
  impl->thread = std::thread([raw = impl->server.get()] { raw->listen_after_bind(); });
  auto server = std::unique_ptr<WebServer>(new WebServer(std::move(impl)));
  spdlog::info("web pages on {}{}", server->url(),
               options.metrics_only ? "metrics (metrics only)" : "");
  return server;
}

WebServer::WebServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WebServer::~WebServer() {
  if (!impl_) return;
  impl_->server->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int WebServer::port() const { return impl_->port; }

std::string WebServer::url() const {
  std::string host = impl_->host;
  if (host == "0.0.0.0" || host == "::" || host.empty()) host = "127.0.0.1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return absl::StrCat(impl_->tls ? "https" : "http", "://", host, ":", impl_->port, "/");
}

}  // namespace ladder::web
