#include "ladder/engines/engine_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ladder/common/utf8.h"

namespace ladder::engines {

namespace {

// Reads Python's repr() of a literal; see ParsePythonLiteral.
class PythonLiteralReader {
 public:
  explicit PythonLiteralReader(std::string_view text) : text_(text) {}

  absl::StatusOr<nlohmann::json> ReadValue() {
    // An engine's log line is the input: nesting is bounded so that no line exhausts the stack.
    if (depth_ >= kMaxDepth) return Error("nested too deeply");
    ++depth_;
    auto value = ReadValueAt();
    --depth_;
    return value;
  }

  size_t pos() const { return pos_; }

 private:
  static constexpr int kMaxDepth = 64;

  absl::StatusOr<nlohmann::json> ReadValueAt() {
    SkipSpace();
    if (pos_ >= text_.size()) return Error("the text ends where a value should be");
    const char c = text_[pos_];
    if (c == '{') return ReadBraces();
    if (c == '[') return ReadSequence('[', ']');
    if (c == '(') return ReadSequence('(', ')');
    if (c == '\'' || c == '"') return ReadString();
    if ((c == 'b' || c == 'r' || c == 'u') && pos_ + 1 < text_.size() &&
        (text_[pos_ + 1] == '\'' || text_[pos_ + 1] == '"')) {
      ++pos_;  // b'...', r'...', u'...': the text between the quotes
      return ReadString();
    }
    return ReadAtom();
  }

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("not a Python literal at character ", pos_, ": ",
                                                   absl::string_view(what.data(), what.size())));
  }

  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  // '{}' is a dict; '{a, b}' a set (an array here); '{k: v, ...}' a dict.
  absl::StatusOr<nlohmann::json> ReadBraces() {
    ++pos_;  // '{'
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return nlohmann::json::object();
    }
    nlohmann::json dict = nlohmann::json::object();
    nlohmann::json set = nlohmann::json::array();
    bool is_dict = false;
    bool first = true;
    while (true) {
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        break;
      }
      auto key = ReadValue();
      if (!key.ok()) return key.status();
      SkipSpace();
      if (first) is_dict = pos_ < text_.size() && text_[pos_] == ':';
      first = false;
      if (is_dict) {
        if (pos_ >= text_.size() || text_[pos_] != ':') return Error("expected ':' in a dict");
        ++pos_;
        auto value = ReadValue();
        if (!value.ok()) return value.status();
        dict[key->is_string() ? key->get<std::string>() : key->dump()] = *std::move(value);
      } else {
        set.push_back(*std::move(key));
      }
      SkipSpace();
      if (pos_ >= text_.size()) return Error("a dict or set is cut off");
      if (text_[pos_] == ',') {
        ++pos_;
      } else if (text_[pos_] != '}') {
        return Error("expected ',' or '}'");
      }
    }
    return is_dict ? dict : set;
  }

  absl::StatusOr<nlohmann::json> ReadSequence(char open, char close) {
    ++pos_;  // open
    nlohmann::json items = nlohmann::json::array();
    while (true) {
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == close) {
        ++pos_;
        return items;
      }
      auto item = ReadValue();
      if (!item.ok()) return item.status();
      items.push_back(*std::move(item));
      SkipSpace();
      if (pos_ >= text_.size())
        return Error(std::string("a ") + open + "..." + close + " is cut off");
      if (text_[pos_] == ',') {
        ++pos_;
      } else if (text_[pos_] != close) {
        return Error(std::string("expected ',' or '") + close + "'");
      }
    }
  }

  // repr() quotes with ' unless the text has one and no ", and escapes \\, the quote, \n, \r,
  // \t, other control bytes as \xNN, and (ascii()) \uNNNN / \UNNNNNNNN.
  absl::StatusOr<nlohmann::json> ReadString() {
    const char quote = text_[pos_++];
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      char c = text_[pos_++];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) break;
      char e = text_[pos_++];
      switch (e) {
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case '0':
          out.push_back('\0');
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + digits > text_.size()) return Error("a cut-off escape");
          uint32_t code = 0;
          for (size_t i = 0; i < digits; ++i) {
            const char h = text_[pos_ + i];
            if (!std::isxdigit(static_cast<unsigned char>(h))) return Error("a bad escape");
            code = code * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                         ? h - '0'
                                                         : std::tolower(h) - 'a' + 10);
          }
          pos_ += digits;
          AppendUtf8(out, code);
          break;
        }
        default:
          out.push_back(e);
          break;  // \\, \', \"
      }
    }
    if (pos_ >= text_.size()) return Error("a string is cut off");
    ++pos_;  // the closing quote
    return ToValidUtf8(out);
  }

  static void AppendUtf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out.push_back(static_cast<char>(code));
    } else if (code < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (code >> 6)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else if (code < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (code >> 12)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (code >> 18)));
      out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
    }
  }

  // True, False, None, a number, or anything else up to the next ',' ':' or closing bracket
  // at its own depth (an object's repr): its text.
  absl::StatusOr<nlohmann::json> ReadAtom() {
    const size_t start = pos_;
    int depth = 0;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\'' || c == '"') {
        auto skipped = ReadString();
        if (!skipped.ok()) return skipped.status();
        continue;
      }
      if (c == '(' || c == '[' || c == '{' || c == '<') {
        ++depth;
      } else if (c == ')' || c == ']' || c == '}' || c == '>') {
        if (depth == 0) break;
        --depth;
      } else if ((c == ',' || c == ':') && depth == 0) {
        break;
      }
      ++pos_;
    }
    if (depth != 0) return Error("unbalanced brackets");
    std::string_view atom = text_.substr(start, pos_ - start);
    while (!atom.empty() && std::isspace(static_cast<unsigned char>(atom.back()))) {
      atom.remove_suffix(1);
    }
    if (atom.empty()) return Error("an empty value");
    if (atom == "True") return nlohmann::json(true);
    if (atom == "False") return nlohmann::json(false);
    if (atom == "None") return nlohmann::json(nullptr);
    int64_t i = 0;
    if (absl::SimpleAtoi(absl::string_view(atom.data(), atom.size()), &i)) return nlohmann::json(i);
    double d = 0;
    const bool numeric = atom.find_first_not_of("0123456789+-.eE") == std::string_view::npos &&
                         absl::SimpleAtod(absl::string_view(atom.data(), atom.size()), &d) &&
                         std::isfinite(d);
    if (numeric) return nlohmann::json(d);
    return nlohmann::json(ToValidUtf8(atom));
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// A copy of `from[key]` into `out[name]` unless it is absent or null.
void CopyIf(const nlohmann::json& from, std::string_view key, nlohmann::json& out,
            std::string_view name) {
  if (!from.is_object()) return;
  auto it = from.find(std::string(key));
  if (it == from.end() || it->is_null()) return;
  out[std::string(name)] = *it;
}

}  // namespace

std::string BackendName(std::string_view name) {
  if (!name.empty() && name.front() == '<') name.remove_prefix(1);
  if (size_t colon = name.find(':'); colon != std::string_view::npos) name = name.substr(0, colon);
  if (size_t gt = name.find('>'); gt != std::string_view::npos) name = name.substr(0, gt);
  if (size_t dot = name.rfind('.'); dot != std::string_view::npos) name = name.substr(dot + 1);
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

absl::StatusOr<nlohmann::json> ParsePythonLiteral(std::string_view text) {
  PythonLiteralReader reader(text);
  return reader.ReadValue();
}

absl::StatusOr<nlohmann::json> ParseVllmNonDefaultArgs(std::string_view line) {
  constexpr std::string_view kMarker = "non-default args: ";
  const size_t at = line.find(kMarker);
  if (at == std::string_view::npos) {
    return absl::NotFoundError("no \"non-default args: \" in the line");
  }
  std::string_view dict = line.substr(at + kMarker.size());
  if (dict.empty() || dict.front() != '{') {
    return absl::InvalidArgumentError("\"non-default args: \" is not followed by a dict");
  }
  auto parsed = ParsePythonLiteral(dict);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) {
    return absl::InvalidArgumentError("\"non-default args: \" is not followed by a dict");
  }
  return parsed;
}

nlohmann::json ReportedConfig(std::string_view engine, const nlohmann::json& report,
                              const nlohmann::json& logged) {
  nlohmann::json out = nlohmann::json::object();
  if (engine == "vllm") {
    // vllm/entrypoints/openai/protocol.py (later .../models/protocol.py), class ModelCard:
    // id, object "model", created, owned_by "vllm", root, parent, max_model_len, permission.
    if (logged.is_object()) {
      for (std::string_view key :
           {"max_model_len", "tensor_parallel_size", "seed", "gpu_memory_utilization", "dtype",
            "quantization", "enforce_eager", "enable_prefix_caching", "attention_backend"}) {
        CopyIf(logged, key, out, key);
      }
      nlohmann::json spec = logged.is_object() && logged.contains("speculative_config")
                                ? logged["speculative_config"]
                                : nlohmann::json();
      if (spec.is_string()) {
        // Releases that took the JSON text as a string print it so.
        spec = nlohmann::json::parse(spec.get<std::string>(), nullptr, false);
      }
      if (spec.is_object()) {
        for (std::string_view key : {"method", "model", "num_speculative_tokens"}) {
          CopyIf(spec, key, out, "speculative_config." + std::string(key));
        }
      }
    }
    if (report.is_object() && report.contains("data") && report["data"].is_array()) {
      for (const nlohmann::json& card : report["data"]) {
        if (card.is_object() && card.contains("max_model_len") &&
            card["max_model_len"].is_number()) {
          out["max_model_len"] = card["max_model_len"];
          break;
        }
      }
    }
    if (out.contains("attention_backend") && out["attention_backend"].is_string()) {
      out["attention_backend"] = BackendName(out["attention_backend"].get<std::string>());
    }
    return out;
  }
  if (!report.is_object()) return out;
  if (engine == "sglang") {
    // python/sglang/srt/entrypoints/http_server.py at 0025436e, get_server_info:
    //   {**dataclasses.asdict(_global_state.tokenizer_manager.server_args),
    //    **_global_state.scheduler_info, "internal_states": internal_states,
    //    "version": __version__}
    const nlohmann::json* scheduler = nullptr;
    if (auto states = report.find("internal_states"); states != report.end() &&
                                                      states->is_array() && !states->empty() &&
                                                      (*states)[0].is_object()) {
      scheduler = &(*states)[0];
    }
    for (std::string_view key :
         {"context_length", "attention_backend", "speculative_algorithm", "speculative_num_steps",
          "speculative_eagle_topk", "speculative_num_draft_tokens", "speculative_draft_model_path",
          "tp_size", "mem_fraction_static", "random_seed", "disable_radix_cache"}) {
      CopyIf(report, key, out, key);
      if (scheduler != nullptr) CopyIf(*scheduler, key, out, key);
    }
    CopyIf(report, "version", out, "version");
    if (out.contains("attention_backend") && out["attention_backend"].is_string()) {
      out["attention_backend"] = BackendName(out["attention_backend"].get<std::string>());
    }
    return out;
  }
  if (engine == "llama.cpp") {
    // tools/server/server-context.cpp at 82bb48500 (b10309), get_props:
    //   {"default_generation_settings", {{"params", ...}, {"n_ctx", meta->slot_n_ctx}}},
    //   {"total_slots", params.n_parallel}, ..., {"build_info", meta->build_info}
    // The speculative settings under params are the task defaults, not the server's flags,
    // so they are not read.
    if (auto dgs = report.find("default_generation_settings");
        dgs != report.end() && dgs->is_object()) {
      if (auto n_ctx = dgs->find("n_ctx"); n_ctx != dgs->end() && n_ctx->is_number()) {
        out["n_ctx"] = *n_ctx;
      }
    }
    if (auto slots = report.find("total_slots"); slots != report.end() && slots->is_number()) {
      out["total_slots"] = *slots;
    }
    if (auto build = report.find("build_info"); build != report.end() && build->is_string()) {
      out["build_info"] = *build;
    }
  }
  return out;
}

namespace {

bool Equal(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>();
    const double y = b.get<double>();
    return std::fabs(x - y) <= 1e-6 * std::max(1.0, std::fabs(x));
  }
  return a == b;
}

bool Matches(const nlohmann::json& expected, const nlohmann::json& reported) {
  if (expected.is_object() && expected.contains("min") && expected.contains("max")) {
    if (!reported.is_number()) return false;
    const double v = reported.get<double>();
    return v >= expected["min"].get<double>() && v <= expected["max"].get<double>();
  }
  return Equal(expected, reported);
}

}  // namespace

ConfigCheck CheckConfig(const nlohmann::json& expected, const nlohmann::json& reported) {
  ConfigCheck check;
  if (!expected.is_object()) return check;
  for (const auto& [name, want] : expected.items()) {
    auto got = reported.is_object() ? reported.find(name) : reported.end();
    if (!reported.is_object() || got == reported.end()) {
      check.not_verifiable.push_back(name);
      continue;
    }
    if (!Matches(want, *got)) {
      check.mismatches.push_back({{"name", name}, {"expected", want}, {"reported", *got}});
    }
  }
  return check;
}

}  // namespace ladder::engines
