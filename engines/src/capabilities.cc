#include "ladder/engines/capabilities.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_split.h"
#include "ladder/common/utf8.h"
#include "message.h"

namespace ladder::engines {

using internal::Cat;

namespace {

// common_arg::to_string pads the spellings and hint to this column, then the help text.
constexpr size_t kHelpColumn = 40;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// "-fa,   --flash-attn [on|off|auto]" -> spellings {-fa, --flash-attn}, hint "[on|off|auto]".
// Every spelling but the last ends with a comma; what follows the last is the hint.
EngineOption ParseHead(std::string_view head) {
  EngineOption option;
  std::vector<std::string_view> words;
  for (absl::string_view w :
       absl::StrSplit(absl::string_view(head.data(), head.size()), ' ', absl::SkipEmpty())) {
    words.emplace_back(w.data(), w.size());
  }
  size_t i = 0;
  for (; i < words.size(); ++i) {
    std::string_view w = words[i];
    if (w.empty() || w[0] != '-') break;
    const bool more = w.back() == ',';
    if (more) w.remove_suffix(1);
    option.spellings.emplace_back(w);
    if (!more) {
      ++i;
      break;
    }
  }
  std::string hint;
  for (; i < words.size(); ++i) {
    if (!hint.empty()) hint.push_back(' ');
    hint.append(words[i]);
  }
  option.value_hint = std::move(hint);
  return option;
}

std::string HelpTextStart(std::string_view text) {
  std::string s = ToValidUtf8(text.substr(0, 120));
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

}  // namespace

const EngineOption* EngineCapabilities::Find(std::string_view spelling) const {
  for (const EngineOption& option : options) {
    for (const std::string& s : option.spellings) {
      if (s == spelling) return &option;
    }
  }
  return nullptr;
}

bool EngineCapabilities::Has(std::string_view spelling) const {
  const EngineOption* option = Find(spelling);
  return option != nullptr && !option->removed;
}

std::optional<std::string> EngineCapabilities::FirstOffered(
    std::initializer_list<std::string_view> spellings) const {
  for (std::string_view s : spellings) {
    if (Has(s)) return std::string(s);
  }
  return std::nullopt;
}

std::vector<std::string> EngineCapabilities::Values(std::string_view spelling) const {
  const EngineOption* option = Find(spelling);
  if (option == nullptr) return {};
  std::string_view hint = option->value_hint;
  if (hint.size() >= 2 && (hint.front() == '[' || hint.front() == '{' || hint.front() == '<')) {
    hint = hint.substr(1, hint.size() - 2);
  }
  if (hint.find_first_of("|,") == std::string_view::npos) return {};
  std::vector<std::string> values;
  for (absl::string_view v : absl::StrSplit(absl::string_view(hint.data(), hint.size()),
                                            absl::ByAnyChar("|,"), absl::SkipEmpty())) {
    values.emplace_back(v.data(), v.size());
  }
  return values;
}

absl::StatusOr<EngineCapabilities> ParseLlamaServerHelp(std::string_view help) {
  EngineCapabilities caps;
  caps.source = "llama-server --help";
  EngineOption* current = nullptr;
  auto add_help = [&](std::string_view text) {
    text = Trim(text);
    if (current == nullptr || text.empty()) return;
    if (!current->help.empty()) current->help.push_back(' ');
    current->help.append(text);
  };
  for (absl::string_view raw : absl::StrSplit(absl::string_view(help.data(), help.size()), '\n')) {
    std::string_view line(raw.data(), raw.size());
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (line[0] == '-' && line.rfind("-----", 0) != 0) {
      // An option: spellings and hint up to column 40 and the help after them, or (spellings
      // longer than 37 columns) the whole line, with the help on the lines below.
      std::string_view head = line;
      std::string_view text;
      if (line.size() > kHelpColumn && line[kHelpColumn - 1] == ' ' &&
          line[kHelpColumn - 2] == ' ') {
        head = line.substr(0, kHelpColumn);
        text = line.substr(kHelpColumn);
      }
      caps.options.push_back(ParseHead(Trim(head)));
      current = &caps.options.back();
      add_help(text);
    } else if (line.rfind(std::string(kHelpColumn, ' '), 0) == 0) {
      add_help(line);
    } else {
      current = nullptr;  // a section header or the usage's prose
    }
  }
  for (EngineOption& option : caps.options) {
    option.removed = option.help.rfind("the argument has been removed", 0) == 0;
  }
  if (caps.options.empty()) {
    return absl::InvalidArgumentError(
        Cat("llama-server --help listed no options: \"", HelpTextStart(help), "\""));
  }
  return caps;
}

namespace {

// "-tp TENSOR_PARALLEL_SIZE, --tensor-parallel-size TENSOR_PARALLEL_SIZE" or
// "--enable-prefix-caching, --no-enable-prefix-caching" or "-h, --help": each comma-separated
// part is a spelling, then (optionally) the metavar, a choices set "{a,b}" or "[N ...]".
EngineOption ParseArgparseInvocation(std::string_view invocation) {
  EngineOption option;
  for (absl::string_view raw_part : absl::StrSplit(
           absl::string_view(invocation.data(), invocation.size()), ", ", absl::SkipEmpty())) {
    std::string_view part = Trim(std::string_view(raw_part.data(), raw_part.size()));
    if (part.empty()) continue;
    const size_t space = part.find(' ');
    std::string_view spelling = part.substr(0, space);
    if (spelling.empty() || spelling[0] != '-') {
      // A choices set with ", " in it would be no spelling: keep it with the hint.
      if (!option.value_hint.empty()) option.value_hint.append(", ");
      option.value_hint.append(part);
      continue;
    }
    option.spellings.emplace_back(spelling);
    if (space != std::string_view::npos) {
      option.value_hint = std::string(Trim(part.substr(space + 1)));
    }
  }
  return option;
}

}  // namespace

absl::StatusOr<EngineCapabilities> ParseArgparseHelp(std::string_view help,
                                                     std::string_view source) {
  EngineCapabilities caps;
  caps.source = std::string(source);
  EngineOption* current = nullptr;
  bool in_usage = false;
  auto add_help = [&](std::string_view text) {
    text = Trim(text);
    if (current == nullptr || text.empty()) return;
    if (!current->help.empty()) current->help.push_back(' ');
    current->help.append(text);
  };
  for (absl::string_view raw : absl::StrSplit(absl::string_view(help.data(), help.size()), '\n')) {
    std::string_view line(raw.data(), raw.size());
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (Trim(line).empty()) {
      current = nullptr;
      in_usage = false;
      continue;
    }
    size_t indent = 0;
    while (indent < line.size() && line[indent] == ' ') ++indent;
    std::string_view rest = line.substr(indent);
    if (indent == 0) {
      // "usage: ..." (its continuation lines are indented), a section title, a log line.
      current = nullptr;
      in_usage = rest.rfind("usage:", 0) == 0;
      continue;
    }
    if (in_usage) continue;
    // argparse indents an action by 2 per nesting level (2 in a group); its help lines start
    // at the help column (24 by default, more with a wider formatter).
    if (rest[0] == '-' && indent <= 6) {
      std::string_view invocation = rest;
      std::string_view text;
      if (size_t gap = rest.find("  "); gap != std::string_view::npos) {
        invocation = rest.substr(0, gap);
        text = rest.substr(gap);
      }
      caps.options.push_back(ParseArgparseInvocation(invocation));
      if (caps.options.back().spellings.empty()) {
        caps.options.pop_back();
        current = nullptr;
        continue;
      }
      current = &caps.options.back();
      add_help(text);
    } else if (current != nullptr && indent > 6) {
      add_help(rest);
    } else {
      current = nullptr;  // a group's description
    }
  }
  int real_options = 0;
  for (const EngineOption& option : caps.options) {
    const bool only_help =
        option.spellings.size() <= 2 &&
        std::all_of(option.spellings.begin(), option.spellings.end(),
                    [](const std::string& s) { return s == "-h" || s == "--help"; });
    if (!only_help) ++real_options;
  }
  if (real_options == 0) {
    return absl::InvalidArgumentError(
        Cat(source, " listed no options: \"", HelpTextStart(help), "\""));
  }
  return caps;
}

}  // namespace ladder::engines
