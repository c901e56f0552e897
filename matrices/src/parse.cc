// YAML -> Matrix, with every error located (file:line:column) and named by its field path.
//
// yaml-cpp throws; this file is the boundary where its exceptions become absl::Status. Scalars
// are typed by the YAML 1.2 core schema (not yaml-cpp's YAML 1.1 conversions): `off`, `yes` and
// `on` are strings, only true/false are booleans, and quoted scalars are always strings.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "internal.h"
#include "ladder/common/utf8.h"
#include "ladder/matrices/matrix.h"
#include "ladder/status_macros.h"

namespace ladder::matrices {
namespace {

constexpr std::string_view kTopKeys[] = {
    "name",         "description", "runner",     "axes",     "fixed",   "exclude",
    "pair",         "together",    "replicates", "requires", "metric",  "seed",
    "max_attempts", "aa_control",  "precision",  "locate",   "command", "metrics"};
constexpr std::string_view kReplicateKeys[] = {"sessions", "processes", "rounds"};
constexpr std::string_view kRequiresKeys[] = {"gpu_vendor", "gpu_name", "gpu_count",
                                              "min_gpu_memory_mib", "features"};
constexpr std::string_view kAAControlKeys[] = {"axis", "of", "as"};
constexpr std::string_view kPrecisionKeys[] = {"ratio_half_width", "max_sessions"};
constexpr std::string_view kLocateKeys[] = {"axis", "where", "resolution", "min_step",
                                            "max_sessions"};
constexpr std::string_view kRunners[] = {"kernel", "engine", "command"};
constexpr std::string_view kCommandKeys[] = {"bench",     "args",      "format",        "start",
                                             "timeout_s", "extra_env", "probe_patterns"};
constexpr std::string_view kCommandFormats[] = {"jsonl", "gbench", "nvbench", "llama-bench"};
constexpr std::string_view kCommandStarts[] = {"per_process", "per_round"};
constexpr std::string_view kMetricKeys[] = {"unit", "better", "range", "required"};
constexpr std::string_view kMetricBetter[] = {"lower", "higher"};
constexpr std::string_view kMetricRanges[] = {"positive", "non_negative", "share", "at_least_one"};
constexpr std::string_view kGpuVendors[] = {"nvidia", "amd", "any"};
// Parameters that must be positive integers wherever they appear (axes or fixed).
constexpr std::string_view kPositiveIntegerParams[] = {"depth",      "query_rows", "num_seqs",
                                                       "block_size", "head_dim",   "q_heads",
                                                       "kv_heads",   "processes"};

template <size_t N>
bool Contains(const std::string_view (&list)[N], std::string_view s) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t cost = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                                  std::tolower(static_cast<unsigned char>(b[j - 1]))
                              ? 0
                              : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + cost});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean "x"?)" when one candidate is close to `word`, else "".
template <typename Range>
std::string Suggest(std::string_view word, const Range& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& candidate : candidates) {
    const size_t d = EditDistance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(candidate);
    }
  }
  return best.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", best);
}

bool IsMatrixName(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

bool IsIdentifier(std::string_view s) {
  if (s.empty()) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string Join(const std::vector<std::string>& parts) {
  return fmt::format("{}", fmt::join(parts, ", "));
}

template <size_t N>
std::string Join(const std::string_view (&parts)[N]) {
  return fmt::format("{}", fmt::join(std::begin(parts), std::end(parts), ", "));
}

const char* KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      return "a scalar";
    default:
      return "nothing";
  }
}

// How an error message shows what the user wrote.
std::string Shown(const YAML::Node& node) {
  if (!node.IsScalar()) return KindName(node);
  if (node.Tag() == "!") return fmt::format("\"{}\"", node.Scalar());
  return node.Scalar();
}

// Where an error about `node` points. Null nodes (a key with nothing after it) carry the
// location of whatever follows, so the caller passes the key's location as the fallback.
YAML::Mark Where(const YAML::Node& node, const YAML::Mark& fallback) {
  if (!node.IsDefined() || node.IsNull()) return fallback;
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? fallback : mark;
}

std::string Field(std::string_view parent, std::string_view child) {
  if (parent.empty()) return std::string(child);
  return fmt::format("{}.{}", parent, child);
}

std::string Item(std::string_view parent, size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

// One mapping entry, with the location of its key.
struct Entry {
  std::string key;
  YAML::Mark key_mark;
  YAML::Node value;
  YAML::Mark where() const { return Where(value, key_mark); }
};

class Parser {
 public:
  Parser(std::string_view filename, const ParseOptions& options)
      : filename_(filename), options_(options) {}

  absl::StatusOr<Matrix> Parse(std::string_view yaml);

 private:
  static void Remember(Matrix& m, const std::string& path, const YAML::Mark& mark) {
    if (!mark.is_null()) m.locations[path] = SourceLocation{mark.line + 1, mark.column + 1};
  }
  absl::Status Error(const YAML::Mark& mark, std::string_view path,
                     std::string_view message) const {
    std::string location = filename_;
    if (!mark.is_null())
      location = fmt::format("{}:{}:{}", filename_, mark.line + 1, mark.column + 1);
    if (path.empty()) return absl::InvalidArgumentError(fmt::format("{}: {}", location, message));
    return absl::InvalidArgumentError(fmt::format("{}: {}: {}", location, path, message));
  }

  // Reads a mapping's entries in order, refusing non-scalar keys, duplicate keys and (when
  // `allowed` is non-empty) keys outside `allowed`. `where` names the mapping in messages.
  template <size_t N>
  absl::StatusOr<std::vector<Entry>> ReadMapping(const YAML::Node& node, const YAML::Mark& at,
                                                 std::string_view path,
                                                 const std::string_view (&allowed)[N]) const {
    return ReadMappingImpl(node, at, path,
                           std::vector<std::string_view>(std::begin(allowed), std::end(allowed)));
  }
  absl::StatusOr<std::vector<Entry>> ReadAnyMapping(const YAML::Node& node, const YAML::Mark& at,
                                                    std::string_view path) const {
    return ReadMappingImpl(node, at, path, {});
  }
  absl::StatusOr<std::vector<Entry>> ReadMappingImpl(
      const YAML::Node& node, const YAML::Mark& at, std::string_view path,
      const std::vector<std::string_view>& allowed) const;

  absl::StatusOr<std::string> ReadString(const Entry& entry, std::string_view path) const;
  absl::StatusOr<Value> ReadValue(const YAML::Node& node, const YAML::Mark& at,
                                  std::string_view path) const;
  absl::StatusOr<int64_t> ReadInteger(const YAML::Node& node, const YAML::Mark& at,
                                      std::string_view path, int64_t minimum,
                                      int64_t maximum) const;
  absl::StatusOr<std::vector<std::pair<std::string, YAML::Mark>>> ReadStringList(
      const Entry& entry, std::string_view path) const;
  absl::Status CheckKnownParam(std::string_view name, const Value& value, const YAML::Mark& at,
                               std::string_view path) const;

  absl::Status ParseAxes(const Entry& entry, Matrix& m);
  absl::Status ParseFixed(const Entry& entry, Matrix& m);
  absl::Status ParseExclude(const Entry& entry, Matrix& m);
  absl::Status ParseAxisList(const Entry& entry, std::string_view field, const Matrix& m,
                             std::vector<std::string>& out);
  absl::Status ParseReplicates(const Entry& entry, Matrix& m);
  absl::Status ParseRequires(const Entry& entry, Matrix& m);
  absl::Status ParseAAControl(const Entry& entry, Matrix& m);
  absl::Status ParsePrecision(const Entry& entry, Matrix& m);
  absl::Status ParseLocate(const Entry& entry, Matrix& m);
  absl::Status ParseCommand(const Entry& entry, Matrix& m);
  absl::Status ParseMetrics(const Entry& entry, Matrix& m);
  // Every placeholder of `text` (at `mark`, field `path`) names a parameter or a built-in.
  absl::Status CheckTemplate(const std::string& text, const YAML::Mark& mark,
                             const std::string& path, const Matrix& m) const;
  absl::Status CheckExclusions(const Matrix& m);

  const Axis* FindAxis(const Matrix& m, std::string_view name) const {
    for (const Axis& axis : m.axes) {
      if (axis.name == name) return &axis;
    }
    return nullptr;
  }
  std::vector<std::string> AxisNames(const Matrix& m) const {
    std::vector<std::string> names;
    for (const Axis& axis : m.axes) names.push_back(axis.name);
    return names;
  }

  std::string filename_;
  ParseOptions options_;
  // Locations remembered for cross-field checks.
  std::map<std::string, YAML::Mark> axis_marks_;
  YAML::Mark axes_mark_;
  YAML::Mark exclude_mark_;
  YAML::Mark replicates_mark_;
  bool has_replicates_ = false;
  std::vector<YAML::Mark> exclusion_marks_;
  std::vector<std::map<std::string, std::pair<YAML::Mark, YAML::Mark>>> exclusion_term_marks_;
  YAML::Mark aa_mark_;
};

absl::StatusOr<std::vector<Entry>> Parser::ReadMappingImpl(
    const YAML::Node& node, const YAML::Mark& at, std::string_view path,
    const std::vector<std::string_view>& allowed) const {
  if (!node.IsMap()) {
    return Error(Where(node, at), path, fmt::format("expected a mapping, got {}", Shown(node)));
  }
  const std::string where = path.empty() ? "at the top level" : fmt::format("in {}", path);
  std::vector<Entry> entries;
  for (auto it = node.begin(); it != node.end(); ++it) {
    // A copy, not a reference: yaml-cpp's `it->` returns a temporary proxy, so a reference to
    // its `first` dangles at the end of this statement (ASan: stack-use-after-scope, found by
    // fuzz/matrix_fuzz.cc on the seed corpus).
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      return Error(Where(key, at), path,
                   fmt::format("keys must be plain names, got {}", KindName(key)));
    }
    Entry entry{key.Scalar(), Where(key, at), it->second};
    for (const Entry& seen : entries) {
      if (seen.key == entry.key) {
        return Error(entry.key_mark, "",
                     fmt::format("duplicate key \"{}\" {} (first at {}:{})", entry.key, where,
                                 seen.key_mark.line + 1, seen.key_mark.column + 1));
      }
    }
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), entry.key) == allowed.end()) {
      return Error(entry.key_mark, "",
                   fmt::format("unknown key \"{}\" {}{}; allowed keys: {}", entry.key, where,
                               Suggest(entry.key, allowed), fmt::join(allowed, ", ")));
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

absl::StatusOr<std::string> Parser::ReadString(const Entry& entry, std::string_view path) const {
  if (!entry.value.IsScalar()) {
    return Error(entry.where(), path, fmt::format("expected a string, got {}", Shown(entry.value)));
  }
  return entry.value.Scalar();
}

// Resolves a scalar per the YAML 1.2 core schema. Quoted scalars and !!str are strings.
absl::StatusOr<Value> Parser::ReadValue(const YAML::Node& node, const YAML::Mark& at,
                                        std::string_view path) const {
  const YAML::Mark mark = Where(node, at);
  if (!node.IsScalar()) {
    return Error(mark, path,
                 fmt::format("expected a scalar (number, string or bool), got {}", Shown(node)));
  }
  const std::string& text = node.Scalar();
  const std::string& tag = node.Tag();
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return Value(text);
  const bool plain = tag == "?";
  if (!plain && tag != "tag:yaml.org,2002:int" && tag != "tag:yaml.org,2002:float" &&
      tag != "tag:yaml.org,2002:bool") {
    return Error(mark, path, fmt::format("unsupported tag {}", tag));
  }

  if ((plain || tag == "tag:yaml.org,2002:bool") &&
      (text == "true" || text == "True" || text == "TRUE")) {
    return Value(true);
  }
  if ((plain || tag == "tag:yaml.org,2002:bool") &&
      (text == "false" || text == "False" || text == "FALSE")) {
    return Value(false);
  }

  // Integers: [-+]?[0-9]+, 0x[0-9a-fA-F]+, 0o[0-7]+.
  if (plain || tag == "tag:yaml.org,2002:int") {
    std::string_view digits = text;
    bool negative = false;
    int base = 10;
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
      negative = digits[0] == '-';
      digits.remove_prefix(1);
    } else if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'o')) {
      base = digits[1] == 'x' ? 16 : 8;
      digits.remove_prefix(2);
    }
    const bool all_digits =
        !digits.empty() && std::all_of(digits.begin(), digits.end(), [base](char c) {
          if (base == 16) return std::isxdigit(static_cast<unsigned char>(c)) != 0;
          if (base == 8) return c >= '0' && c <= '7';
          return std::isdigit(static_cast<unsigned char>(c)) != 0;
        });
    if (all_digits) {
      uint64_t magnitude = 0;
      auto [end, ec] =
          std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
      const uint64_t int64_max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      if (ec == std::errc() && end == digits.data() + digits.size()) {
        if (!negative && magnitude <= int64_max) return Value(static_cast<int64_t>(magnitude));
        if (!negative) return Value(magnitude);  // uint64 range: seeds
        if (magnitude <= int64_max + 1) {
          return Value(magnitude == int64_max + 1 ? std::numeric_limits<int64_t>::min()
                                                  : -static_cast<int64_t>(magnitude));
        }
      }
      return Error(mark, path, fmt::format("integer {} is out of range", text));
    }
    if (!plain) return Error(mark, path, fmt::format("expected an integer, got {}", text));
  }

  // Floats: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? and the .inf/.nan family.
  {
    std::string_view s = text;
    if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
    std::string lower(s);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == ".inf" || lower == ".nan") {
      return Error(mark, path, fmt::format("non-finite number {} is not supported", text));
    }
    size_t i = 0;
    size_t int_digits = 0, frac_digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++int_digits;
    if (i < s.size() && s[i] == '.') {
      ++i;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++frac_digits;
    }
    bool ok = int_digits + frac_digits > 0;
    if (ok && i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      ++i;
      if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
      size_t exp_digits = 0;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp_digits;
      ok = exp_digits > 0;
    }
    ok = ok && i == s.size();
    if (ok) {
      std::istringstream in(text);  // classic locale; accepts "1." and ".5"
      in.imbue(std::locale::classic());
      double d = 0;
      in >> d;
      if (in.fail() || !std::isfinite(d)) {
        return Error(mark, path, fmt::format("number {} is out of range", text));
      }
      return Value(d);
    }
    if (!plain) return Error(mark, path, fmt::format("expected a number, got {}", text));
  }
  if (tag == "tag:yaml.org,2002:bool") {
    return Error(mark, path, fmt::format("expected true or false, got {}", text));
  }
  return Value(text);
}

absl::StatusOr<int64_t> Parser::ReadInteger(const YAML::Node& node, const YAML::Mark& at,
                                            std::string_view path, int64_t minimum,
                                            int64_t maximum) const {
  const std::string expected =
      minimum == 1 ? "a positive integer"
                   : (minimum == 0 ? "a non-negative integer"
                                   : fmt::format("an integer of at least {}", minimum));
  const YAML::Mark mark = Where(node, at);
  if (!node.IsScalar() || node.Tag() == "!") {
    return Error(mark, path, fmt::format("expected {}, got {}", expected, Shown(node)));
  }
  auto value = ReadValue(node, at, path);
  if (!value.ok() || !value->is_number_integer()) {
    return Error(mark, path, fmt::format("expected {}, got {}", expected, Shown(node)));
  }
  if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(maximum)) {
    return Error(mark, path, fmt::format("{} is too large (at most {})", node.Scalar(), maximum));
  }
  const int64_t v = value->get<int64_t>();
  if (v < minimum)
    return Error(mark, path, fmt::format("expected {}, got {}", expected, Shown(node)));
  if (v > maximum) {
    return Error(mark, path, fmt::format("{} is too large (at most {})", node.Scalar(), maximum));
  }
  return v;
}

absl::StatusOr<std::vector<std::pair<std::string, YAML::Mark>>> Parser::ReadStringList(
    const Entry& entry, std::string_view path) const {
  if (!entry.value.IsSequence()) {
    return Error(entry.where(), path,
                 fmt::format("expected a list, got {}{}", Shown(entry.value),
                             entry.value.IsScalar() ? fmt::format(" (write [{}] for a list of one)",
                                                                  entry.value.Scalar())
                                                    : ""));
  }
  std::vector<std::pair<std::string, YAML::Mark>> items;
  for (size_t i = 0; i < entry.value.size(); ++i) {
    const YAML::Node item = entry.value[i];
    const YAML::Mark mark = Where(item, entry.where());
    if (!item.IsScalar()) {
      return Error(mark, Item(path, i), fmt::format("expected a string, got {}", Shown(item)));
    }
    for (const auto& [seen, seen_mark] : items) {
      if (seen == item.Scalar()) {
        return Error(mark, Item(path, i), fmt::format("\"{}\" is listed twice", seen));
      }
    }
    items.emplace_back(item.Scalar(), mark);
  }
  return items;
}

absl::Status Parser::CheckKnownParam(std::string_view name, const Value& value,
                                     const YAML::Mark& at, std::string_view path) const {
  if (!Contains(kPositiveIntegerParams, name)) return absl::OkStatus();
  if (value.is_number_integer() && (value.is_number_unsigned() || value.get<int64_t>() > 0)) {
    return absl::OkStatus();
  }
  const std::string shown = value.is_string() ? value.dump() : ValueToString(value);
  return Error(at, path, fmt::format("expected a positive integer, got {}", shown));
}

absl::Status Parser::ParseAxes(const Entry& entry, Matrix& m) {
  axes_mark_ = entry.where();
  if (entry.value.IsNull())
    return Error(entry.key_mark, "axes", "expected a mapping of axes, got nothing");
  ASSIGN_OR_RETURN(const std::vector<Entry> axes,
                   ReadAnyMapping(entry.value, entry.key_mark, "axes"));
  if (axes.empty()) {
    return Error(entry.where(), "axes", "a matrix needs at least one axis");
  }
  for (const Entry& axis_entry : axes) {
    const std::string path = Field("axes", axis_entry.key);
    if (!IsIdentifier(axis_entry.key)) {
      return Error(axis_entry.key_mark, path,
                   fmt::format("\"{}\" is not a valid axis name; names match "
                               "[A-Za-z_][A-Za-z0-9_]*",
                               axis_entry.key));
    }
    if (!axis_entry.value.IsSequence()) {
      return Error(axis_entry.where(), path,
                   fmt::format("expected a list of values, got {}{}", Shown(axis_entry.value),
                               axis_entry.value.IsScalar()
                                   ? fmt::format(" (write [{}] for an axis of one value)",
                                                 axis_entry.value.Scalar())
                                   : ""));
    }
    if (axis_entry.value.size() == 0) {
      return Error(axis_entry.where(), path, "an axis needs at least one value");
    }
    Axis axis;
    axis.name = axis_entry.key;
    std::vector<std::string> rendered;
    for (size_t i = 0; i < axis_entry.value.size(); ++i) {
      const YAML::Node item = axis_entry.value[i];
      const std::string item_path = Item(path, i);
      const YAML::Mark mark = Where(item, axis_entry.where());
      ASSIGN_OR_RETURN(Value value, ReadValue(item, axis_entry.where(), item_path));
      RETURN_IF_ERROR(CheckKnownParam(axis.name, value, mark, item_path));
      std::string text = ValueToString(value);
      if (text.find_first_of(",=") != std::string::npos) {
        return Error(mark, item_path,
                     fmt::format("\"{}\": axis values may not contain ',' or '=' (they appear "
                                 "in cell keys)",
                                 text));
      }
      const auto dup = std::find(rendered.begin(), rendered.end(), text);
      if (dup != rendered.end()) {
        return Error(
            mark, item_path,
            fmt::format("duplicate value {} (same as {}[{}])", text, path, dup - rendered.begin()));
      }
      rendered.push_back(std::move(text));
      axis.values.push_back(std::move(value));
      Remember(m, item_path, mark);
    }
    axis_marks_[axis.name] = axis_entry.key_mark;
    Remember(m, path, axis_entry.key_mark);
    m.axes.push_back(std::move(axis));
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseFixed(const Entry& entry, Matrix& m) {
  ASSIGN_OR_RETURN(const std::vector<Entry> fixed,
                   ReadAnyMapping(entry.value, entry.key_mark, "fixed"));
  for (const Entry& param : fixed) {
    const std::string path = Field("fixed", param.key);
    if (!IsIdentifier(param.key)) {
      return Error(param.key_mark, path,
                   fmt::format("\"{}\" is not a valid parameter name; names match "
                               "[A-Za-z_][A-Za-z0-9_]*",
                               param.key));
    }
    ASSIGN_OR_RETURN(Value value, ReadValue(param.value, param.key_mark, path));
    RETURN_IF_ERROR(CheckKnownParam(param.key, value, param.where(), path));
    m.fixed[param.key] = std::move(value);
    Remember(m, path, param.where());
  }
  // Cross-check with the axes (parsed first, whatever the key order in the document).
  for (const Entry& param : fixed) {
    if (FindAxis(m, param.key) != nullptr) {
      const YAML::Mark axis_mark = axis_marks_[param.key];
      return Error(param.key_mark, Field("fixed", param.key),
                   fmt::format("\"{}\" is also an axis (axes.{} at {}:{}); a parameter is either "
                               "fixed or an axis",
                               param.key, param.key, axis_mark.line + 1, axis_mark.column + 1));
    }
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseExclude(const Entry& entry, Matrix& m) {
  exclude_mark_ = entry.where();
  if (!entry.value.IsSequence()) {
    return Error(entry.where(), "exclude",
                 fmt::format("expected a list of partial cells, got {}", Shown(entry.value)));
  }
  for (size_t i = 0; i < entry.value.size(); ++i) {
    const std::string path = Item("exclude", i);
    const YAML::Node item = entry.value[i];
    const YAML::Mark mark = Where(item, entry.where());
    ASSIGN_OR_RETURN(const std::vector<Entry> terms, ReadAnyMapping(item, mark, path));
    if (terms.empty()) {
      return Error(mark, path,
                   "an exclusion must name at least one axis (an empty one would "
                   "exclude every cell)");
    }
    std::map<std::string, Value> exclusion;
    std::map<std::string, std::pair<YAML::Mark, YAML::Mark>> marks;
    for (const Entry& term : terms) {
      ASSIGN_OR_RETURN(Value value, ReadValue(term.value, term.key_mark, Field(path, term.key)));
      exclusion[term.key] = std::move(value);
      marks[term.key] = {term.key_mark, term.where()};
    }
    m.exclude.push_back(std::move(exclusion));
    exclusion_marks_.push_back(mark);
    exclusion_term_marks_.push_back(std::move(marks));
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseAxisList(const Entry& entry, std::string_view field, const Matrix& m,
                                   std::vector<std::string>& out) {
  ASSIGN_OR_RETURN(const auto items, ReadStringList(entry, field));
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& [name, mark] = items[i];
    if (FindAxis(m, name) == nullptr) {
      return Error(mark, Item(field, i),
                   fmt::format("\"{}\" is not an axis{}; axes: {}", name,
                               Suggest(name, AxisNames(m)), Join(AxisNames(m))));
    }
    out.push_back(name);
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseReplicates(const Entry& entry, Matrix& m) {
  ASSIGN_OR_RETURN(const std::vector<Entry> fields,
                   ReadMapping(entry.value, entry.key_mark, "replicates", kReplicateKeys));
  replicates_mark_ = entry.where();
  has_replicates_ = true;
  for (const Entry& field : fields) {
    const int64_t maximum = field.key == "sessions" ? internal::kMaxSessions : INT_MAX;
    ASSIGN_OR_RETURN(const int64_t v, ReadInteger(field.value, field.key_mark,
                                                  Field("replicates", field.key), 1, maximum));
    if (field.key == "sessions") m.replicates.sessions = static_cast<int>(v);
    if (field.key == "processes") m.replicates.processes = static_cast<int>(v);
    if (field.key == "rounds") m.replicates.rounds = static_cast<int>(v);
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseRequires(const Entry& entry, Matrix& m) {
  ASSIGN_OR_RETURN(const std::vector<Entry> fields,
                   ReadMapping(entry.value, entry.key_mark, "requires", kRequiresKeys));
  Requirements& r = m.requirements;
  for (const Entry& field : fields) {
    const std::string path = Field("requires", field.key);
    if (field.key == "gpu_vendor") {
      ASSIGN_OR_RETURN(std::string vendor, ReadString(field, path));
      if (!Contains(kGpuVendors, vendor)) {
        return Error(field.where(), path,
                     fmt::format("unknown GPU vendor \"{}\"; expected one of: {}", vendor,
                                 Join(kGpuVendors)));
      }
      r.gpu_vendor = vendor == "any" ? "" : vendor;
    } else if (field.key == "gpu_name") {
      ASSIGN_OR_RETURN(r.gpu_name_glob, ReadString(field, path));
      if (r.gpu_name_glob.empty()) return Error(field.where(), path, "the glob is empty");
    } else if (field.key == "gpu_count") {
      ASSIGN_OR_RETURN(const int64_t v, ReadInteger(field.value, field.key_mark, path, 0, INT_MAX));
      r.gpu_count = static_cast<int>(v);
    } else if (field.key == "min_gpu_memory_mib") {
      ASSIGN_OR_RETURN(r.min_gpu_memory_mib, ReadInteger(field.value, field.key_mark, path, 0,
                                                         std::numeric_limits<int64_t>::max()));
    } else if (field.key == "features") {
      ASSIGN_OR_RETURN(const auto items, ReadStringList(field, path));
      for (size_t i = 0; i < items.size(); ++i) {
        if (!IsMatrixName(items[i].first)) {
          return Error(items[i].second, Item(path, i),
                       fmt::format("\"{}\" is not a valid feature name; names match "
                                   "[A-Za-z0-9_.-]+",
                                   items[i].first));
        }
        r.features.push_back(items[i].first);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Parser::ParsePrecision(const Entry& entry, Matrix& m) {
  ASSIGN_OR_RETURN(const std::vector<Entry> fields,
                   ReadMapping(entry.value, entry.key_mark, "precision", kPrecisionKeys));
  if (m.pair.empty()) {
    return Error(entry.where(), "precision",
                 "precision targets paired ratios: the matrix needs `pair`");
  }
  Precision precision;
  precision.max_sessions = m.replicates.sessions;
  bool has_width = false;
  for (const Entry& field : fields) {
    const std::string path = Field("precision", field.key);
    if (field.key == "ratio_half_width") {
      std::string text = field.value.IsScalar() ? field.value.Scalar() : "";
      double scale = 1;
      if (!text.empty() && text.back() == '%') {
        text.pop_back();
        scale = 0.01;
      }
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(v * scale > 0) || v * scale >= 1) {
        return Error(field.where(), path,
                     fmt::format("expected a relative half-width such as 2% or 0.02, got {}",
                                 Shown(field.value)));
      }
      precision.ratio_half_width = v * scale;
      has_width = true;
    } else if (field.key == "max_sessions") {
      ASSIGN_OR_RETURN(const int64_t v, ReadInteger(field.value, field.key_mark, path,
                                                    m.replicates.sessions, internal::kMaxSessions));
      precision.max_sessions = static_cast<int>(v);
    }
  }
  if (!has_width) {
    return Error(entry.where(), "precision", "missing required key \"ratio_half_width\"");
  }
  m.precision = precision;
  return absl::OkStatus();
}

absl::Status Parser::CheckTemplate(const std::string& text, const YAML::Mark& mark,
                                   const std::string& path, const Matrix& m) const {
  auto names = TemplatePlaceholders(text);
  if (!names.ok()) return Error(mark, path, std::string(names.status().message()));
  for (const std::string& name : *names) {
    const bool builtin = std::find(std::begin(kCommandBuiltins), std::end(kCommandBuiltins),
                                   name) != std::end(kCommandBuiltins);
    if (builtin) {
      if (name == "round" && m.command->start == CommandSpec::Start::kPerProcess) {
        return Error(mark, path,
                     "{round} is known only with start: per_round (with per_process one start "
                     "reports every round: pass {rounds})");
      }
      continue;
    }
    if (FindAxis(m, name) != nullptr || m.fixed.count(name) > 0) continue;
    std::vector<std::string> known = AxisNames(m);
    for (const auto& [key, value] : m.fixed) known.push_back(key);
    for (std::string_view b : kCommandBuiltins) known.emplace_back(b);
    return Error(mark, path,
                 fmt::format("{{{}}} is neither an axis, a fixed parameter nor a built-in{}; "
                             "known: {}",
                             name, Suggest(name, known), Join(known)));
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseCommand(const Entry& entry, Matrix& m) {
  ASSIGN_OR_RETURN(const std::vector<Entry> fields,
                   ReadMapping(entry.value, entry.key_mark, "command", kCommandKeys));
  m.command = CommandSpec{};
  CommandSpec& c = *m.command;
  Remember(m, "command", entry.key_mark);
  const Entry* args = nullptr;
  const Entry* env = nullptr;
  const Entry* bench = nullptr;  // a template ("{build}") is checked once the axes are known
  bool has_bench = false;
  for (const Entry& field : fields) {
    const std::string path = Field("command", field.key);
    Remember(m, path, field.where());
    if (field.key == "bench") {
      ASSIGN_OR_RETURN(c.bench, ReadString(field, path));
      if (c.bench.find_first_of("{}") != std::string::npos) {
        bench = &field;
      } else if (!IsBenchName(c.bench)) {
        return Error(field.where(), path,
                     fmt::format("\"{}\" is not a bench name; names match [a-z0-9_.-]{{1,57}} "
                                 "(the NAME of the agent's --bench NAME=PATH), or a template "
                                 "of axes that renders to such names (\"{{build}}\")",
                                 c.bench));
      }
      has_bench = true;
    } else if (field.key == "args") {
      args = &field;
    } else if (field.key == "format" || field.key == "start") {
      ASSIGN_OR_RETURN(std::string value, ReadString(field, path));
      const bool is_format = field.key == "format";
      const std::vector<std::string_view> allowed =
          is_format
              ? std::vector<std::string_view>(std::begin(kCommandFormats),
                                              std::end(kCommandFormats))
              : std::vector<std::string_view>(std::begin(kCommandStarts), std::end(kCommandStarts));
      if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
        return Error(field.where(), path,
                     fmt::format("unknown {} \"{}\"{}; expected one of: {}", field.key, value,
                                 Suggest(value, allowed), fmt::join(allowed, ", ")));
      }
      if (is_format) {
        c.format = value;
      } else {
        c.start =
            value == "per_round" ? CommandSpec::Start::kPerRound : CommandSpec::Start::kPerProcess;
      }
    } else if (field.key == "timeout_s") {
      ASSIGN_OR_RETURN(const Value v, ReadValue(field.value, field.key_mark, path));
      if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > 86400) {
        return Error(field.where(), path,
                     fmt::format("expected seconds in (0, 86400], got {}", Shown(field.value)));
      }
      c.timeout_s = v.get<double>();
    } else if (field.key == "extra_env") {
      env = &field;
    } else if (field.key == "probe_patterns") {
      ASSIGN_OR_RETURN(const auto items, ReadStringList(field, path));
      for (size_t i = 0; i < items.size(); ++i) {
        if (items[i].first.empty() || items[i].first.size() > 256) {
          return Error(items[i].second, Item(path, i), "a probe pattern is 1 to 256 bytes");
        }
        c.probe_patterns.push_back(items[i].first);
      }
    }
  }
  if (!has_bench) {
    return Error(entry.where(), "command",
                 "missing required key \"bench\" (the NAME of a program an agent registered "
                 "with --bench NAME=PATH)");
  }
  if (bench != nullptr) {
    if (auto names = BenchNames(m); !names.ok()) {
      return Error(bench->where(), "command.bench", std::string(names.status().message()));
    }
  }
  // Templates are checked once the start policy is known ({round} depends on it).
  if (args != nullptr) {
    if (!args->value.IsSequence()) {
      return Error(args->where(), "command.args",
                   fmt::format("expected a list of arguments, got {}", Shown(args->value)));
    }
    for (size_t i = 0; i < args->value.size(); ++i) {
      const YAML::Node item = args->value[i];
      const YAML::Mark mark = Where(item, args->where());
      const std::string path = Item("command.args", i);
      if (!item.IsScalar()) {
        return Error(mark, path,
                     fmt::format("expected an argument (a scalar), got {}", KindName(item)));
      }
      if (item.Scalar().size() > 4096)
        return Error(mark, path, "an argument is at most 4096 bytes");
      RETURN_IF_ERROR(CheckTemplate(item.Scalar(), mark, path, m));
      Remember(m, path, mark);
      c.args.push_back(item.Scalar());
    }
  }
  if (env != nullptr) {
    ASSIGN_OR_RETURN(const std::vector<Entry> vars,
                     ReadAnyMapping(env->value, env->key_mark, "command.extra_env"));
    for (const Entry& var : vars) {
      const std::string path = Field("command.extra_env", var.key);
      if (!IsIdentifier(var.key)) {
        return Error(var.key_mark, path, "environment names match [A-Za-z_][A-Za-z0-9_]*");
      }
      if (!var.value.IsScalar()) {
        return Error(var.where(), path,
                     fmt::format("expected a value (a scalar), got {}", KindName(var.value)));
      }
      RETURN_IF_ERROR(CheckTemplate(var.value.Scalar(), var.where(), path, m));
      Remember(m, path, var.key_mark);
      c.extra_env[var.key] = var.value.Scalar();
    }
  }
  if (c.format == "nvbench" && c.start == CommandSpec::Start::kPerProcess &&
      m.replicates.rounds > 1) {
    return Error(entry.where(), "command",
                 fmt::format("format nvbench reports one value per start (nvbench summarises its "
                             "samples): with {} rounds give start: per_round",
                             m.replicates.rounds));
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseMetrics(const Entry& entry, Matrix& m) {
  ASSIGN_OR_RETURN(const std::vector<Entry> names,
                   ReadAnyMapping(entry.value, entry.key_mark, "metrics"));
  Remember(m, "metrics", entry.key_mark);
  for (const Entry& named : names) {
    const std::string path = Field("metrics", named.key);
    const std::string& name = named.key;
    const bool valid_name =
        !name.empty() && name.size() <= 64 && name[0] >= 'a' && name[0] <= 'z' &&
        std::all_of(name.begin(), name.end(), [](char ch) {
          return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
        });
    if (!valid_name) {
      return Error(
          named.key_mark, path,
          fmt::format("\"{}\" is not a metric name; names match [a-z][a-z0-9_]{{0,63}}", name));
    }
    ASSIGN_OR_RETURN(const std::vector<Entry> fields,
                     ReadMapping(named.value, named.key_mark, path, kMetricKeys));
    MetricDeclaration d;
    d.name = name;
    bool has_unit = false, has_better = false;
    for (const Entry& field : fields) {
      const std::string fpath = Field(path, field.key);
      if (field.key == "unit") {
        ASSIGN_OR_RETURN(d.unit, ReadString(field, fpath));
        const bool printable = std::all_of(d.unit.begin(), d.unit.end(), [](char ch) {
          return ch > ' ' && ch < 0x7f && ch != ',' && ch != '"';
        });
        if (d.unit.empty() || d.unit.size() > 16 || !printable) {
          return Error(field.where(), fpath,
                       "a unit is 1 to 16 printable ASCII characters without spaces, commas or "
                       "quotes, e.g. us, tok/s, 1");
        }
        has_unit = true;
      } else if (field.key == "better" || field.key == "range") {
        ASSIGN_OR_RETURN(std::string value, ReadString(field, fpath));
        const bool is_better = field.key == "better";
        const std::vector<std::string_view> allowed =
            is_better
                ? std::vector<std::string_view>(std::begin(kMetricBetter), std::end(kMetricBetter))
                : std::vector<std::string_view>(std::begin(kMetricRanges), std::end(kMetricRanges));
        const auto it = std::find(allowed.begin(), allowed.end(), value);
        if (it == allowed.end()) {
          return Error(field.where(), fpath,
                       fmt::format("unknown {} \"{}\"{}; expected one of: {}", field.key, value,
                                   Suggest(value, allowed), fmt::join(allowed, ", ")));
        }
        const auto index = it - allowed.begin();
        if (is_better) {
          d.better =
              index == 0 ? MetricDeclaration::Better::kLower : MetricDeclaration::Better::kHigher;
          has_better = true;
        } else {
          d.range = static_cast<MetricDeclaration::Range>(index);
        }
      } else if (field.key == "required") {
        ASSIGN_OR_RETURN(const Value v, ReadValue(field.value, field.key_mark, fpath));
        if (!v.is_boolean()) {
          return Error(field.where(), fpath,
                       fmt::format("expected true or false, got {}", Shown(field.value)));
        }
        d.required = v.get<bool>();
      }
    }
    if (!has_unit || !has_better) {
      return Error(named.where(), path,
                   fmt::format("missing required key \"{}\" (every metric says its unit and "
                               "which way is better: {{unit: us, better: lower}})",
                               has_unit ? "better" : "unit"));
    }
    Remember(m, path, named.key_mark);
    m.metrics.push_back(std::move(d));
  }
  if (m.metrics.empty()) {
    return Error(entry.where(), "metrics", "declare at least one metric");
  }
  if (m.metrics.size() > 64) return Error(entry.where(), "metrics", "at most 64 metrics");
  if (std::none_of(m.metrics.begin(), m.metrics.end(),
                   [](const MetricDeclaration& d) { return d.required; })) {
    return Error(entry.where(), "metrics",
                 "at least one metric must be required: an attempt is done when every "
                 "(cell, process, round) holds its required metrics");
  }
  return absl::OkStatus();
}

// `locate` needs what a crossover search needs: one pair axis with exactly the two arms whose
// ratio is tracked, and a numeric axis (values > 0, since probes are log2-midpoints) with at least
// two rungs to bracket between.
absl::Status Parser::ParseLocate(const Entry& entry, Matrix& m) {
  ASSIGN_OR_RETURN(const std::vector<Entry> fields,
                   ReadMapping(entry.value, entry.key_mark, "locate", kLocateKeys));
  if (m.pair.size() != 1) {
    return Error(entry.where(), "locate",
                 fmt::format("locate follows the ratio of two arms: the matrix needs `pair` with "
                             "exactly one axis, got {}",
                             m.pair.empty() ? std::string("none") : Join(m.pair)));
  }
  Locate locate;
  locate.pair_axis = m.pair.front();
  const Axis* pair_axis = FindAxis(m, locate.pair_axis);
  if (pair_axis->values.size() != 2) {
    return Error(entry.where(), "locate",
                 fmt::format("locate compares exactly two arms, but pair axis {} has {} values",
                             locate.pair_axis, pair_axis->values.size()));
  }
  if (m.aa_control && m.aa_control->axis == locate.pair_axis) {
    return Error(entry.where(), "locate",
                 fmt::format("locate compares exactly two arms, but aa_control adds a third "
                             "(\"{}\") to pair axis {}",
                             m.aa_control->as, locate.pair_axis));
  }
  locate.max_sessions = static_cast<int>(std::min<int64_t>(
      internal::kMaxSessions, std::max<int64_t>(kLocateMinSessions, 2 * m.replicates.sessions)));
  const Entry* axis_field = nullptr;
  for (const Entry& field : fields) {
    const std::string path = Field("locate", field.key);
    if (field.key == "axis") {
      axis_field = &field;
      ASSIGN_OR_RETURN(locate.axis, ReadString(field, path));
      const Axis* axis = FindAxis(m, locate.axis);
      if (axis == nullptr) {
        return Error(field.where(), path,
                     fmt::format("\"{}\" is not an axis{}; axes: {}", locate.axis,
                                 Suggest(locate.axis, AxisNames(m)), Join(AxisNames(m))));
      }
      if (locate.axis == locate.pair_axis) {
        return Error(field.where(), path,
                     fmt::format("\"{}\" is the pair axis; locate searches along another axis "
                                 "(e.g. depth)",
                                 locate.axis));
      }
      if (m.aa_control && m.aa_control->axis == locate.axis) {
        return Error(field.where(), path,
                     fmt::format("\"{}\" carries the A/A arm, so it is not numeric", locate.axis));
      }
      for (size_t i = 0; i < axis->values.size(); ++i) {
        const Value& v = axis->values[i];
        if (!v.is_number() || !(v.get<double>() > 0)) {
          return Error(field.where(), path,
                       fmt::format("axis {} must be numeric with values > 0 to be located "
                                   "along; axes.{}[{}] is {}",
                                   locate.axis, locate.axis, i,
                                   v.is_string() ? v.dump() : ValueToString(v)));
        }
      }
      if (axis->values.size() < 2) {
        return Error(
            field.where(), path,
            fmt::format("axis {} has one value; a crossing is bracketed between two", locate.axis));
      }
    } else if (field.key == "where") {
      ASSIGN_OR_RETURN(const std::string where, ReadString(field, path));
      std::string compact;
      for (char c : where) {
        if (!std::isspace(static_cast<unsigned char>(c))) compact += c;
      }
      if (compact != "ratio=1" && compact != "ratio=1.0") {
        return Error(field.where(), path,
                     fmt::format("only \"ratio = 1\" (the arms break even) is supported, got "
                                 "\"{}\"",
                                 where));
      }
    } else if (field.key == "resolution") {
      // "0.25 octave", "0.5 octaves" or a bare number of octaves.
      std::string text = field.value.IsScalar() ? field.value.Scalar() : "";
      for (std::string_view suffix : {"octaves", "octave"}) {
        if (text.size() > suffix.size() &&
            text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0) {
          text.resize(text.size() - suffix.size());
          break;
        }
      }
      while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
        text.pop_back();
      }
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(v > 0) || !(v <= 16)) {
        return Error(field.where(), path,
                     fmt::format("expected a resolution in octaves above 0 and at most 16, such "
                                 "as 0.25 octave, got {}",
                                 Shown(field.value)));
      }
      locate.resolution_octaves = v;
    } else if (field.key == "min_step") {
      ASSIGN_OR_RETURN(locate.min_step,
                       ReadInteger(field.value, field.key_mark, path, 1, int64_t{1} << 40));
    } else if (field.key == "max_sessions") {
      // Fewer than kLocateMinSessions could never decide a probe.
      ASSIGN_OR_RETURN(const int64_t v,
                       ReadInteger(field.value, field.key_mark, path,
                                   std::max<int64_t>(m.replicates.sessions, kLocateMinSessions),
                                   internal::kMaxSessions));
      locate.max_sessions = static_cast<int>(v);
    }
  }
  if (axis_field == nullptr) {
    return Error(entry.where(), "locate",
                 "missing required key \"axis\" (the axis to locate the crossover along)");
  }
  m.locate = std::move(locate);
  return absl::OkStatus();
}

absl::Status Parser::ParseAAControl(const Entry& entry, Matrix& m) {
  aa_mark_ = entry.where();
  ASSIGN_OR_RETURN(const std::vector<Entry> fields,
                   ReadMapping(entry.value, entry.key_mark, "aa_control", kAAControlKeys));
  const Entry* axis_field = nullptr;
  const Entry* of_field = nullptr;
  const Entry* as_field = nullptr;
  for (const Entry& field : fields) {
    if (field.key == "axis") axis_field = &field;
    if (field.key == "of") of_field = &field;
    if (field.key == "as") as_field = &field;
  }
  const std::pair<const Entry*, std::string_view> required[] = {
      {axis_field, "axis"}, {of_field, "of"}, {as_field, "as"}};
  for (const auto& [field, name] : required) {
    if (field == nullptr) {
      return Error(
          entry.where(), "aa_control",
          fmt::format("missing required key \"{}\"; aa_control needs axis, of and as", name));
    }
  }
  AAControl aa;
  ASSIGN_OR_RETURN(aa.axis, ReadString(*axis_field, "aa_control.axis"));
  const Axis* axis = FindAxis(m, aa.axis);
  if (axis == nullptr) {
    return Error(axis_field->where(), "aa_control.axis",
                 fmt::format("\"{}\" is not an axis{}; axes: {}", aa.axis,
                             Suggest(aa.axis, AxisNames(m)), Join(AxisNames(m))));
  }
  std::vector<std::string> rendered;
  for (const Value& v : axis->values) rendered.push_back(ValueToString(v));

  ASSIGN_OR_RETURN(const Value of, ReadValue(of_field->value, of_field->key_mark, "aa_control.of"));
  const auto found = std::find(rendered.begin(), rendered.end(), ValueToString(of));
  if (found == rendered.end()) {
    return Error(of_field->where(), "aa_control.of",
                 fmt::format("{} is not a value of axis {} (its values: {})", ValueToString(of),
                             aa.axis, Join(rendered)));
  }
  aa.of = axis->values[static_cast<size_t>(found - rendered.begin())];

  ASSIGN_OR_RETURN(aa.as, ReadString(*as_field, "aa_control.as"));
  if (aa.as.empty() || aa.as.find_first_of(",=") != std::string::npos) {
    return Error(as_field->where(), "aa_control.as",
                 fmt::format("\"{}\" is not a usable arm name: it must be non-empty and may not "
                             "contain ',' or '='",
                             aa.as));
  }
  if (std::find(rendered.begin(), rendered.end(), aa.as) != rendered.end()) {
    return Error(as_field->where(), "aa_control.as",
                 fmt::format("\"{}\" is already a value of axis {}; the A/A arm needs a new name",
                             aa.as, aa.axis));
  }
  m.aa_control = std::move(aa);
  return absl::OkStatus();
}

// Exclusions: keys must be axes, values must be values of that axis (the A/A arm included),
// no exclusion may be subsumed by another, and something must be left.
absl::Status Parser::CheckExclusions(const Matrix& m) {
  for (size_t i = 0; i < m.exclude.size(); ++i) {
    const std::string path = Item("exclude", i);
    for (const auto& [key, value] : m.exclude[i]) {
      const auto& [key_mark, value_mark] = exclusion_term_marks_[i].at(key);
      const Axis* axis = FindAxis(m, key);
      if (axis == nullptr) {
        return Error(key_mark, path,
                     fmt::format("\"{}\" is not an axis{}; an exclusion names axes ({})", key,
                                 Suggest(key, AxisNames(m)), Join(AxisNames(m))));
      }
      std::vector<std::string> rendered;
      for (const Value& v : axis->values) rendered.push_back(ValueToString(v));
      if (m.aa_control && m.aa_control->axis == key) rendered.push_back(m.aa_control->as);
      if (std::find(rendered.begin(), rendered.end(), ValueToString(value)) == rendered.end()) {
        return Error(value_mark, Field(path, key),
                     fmt::format("{} is not a value of axis {} (its values: {}), so this "
                                 "exclusion matches no cell",
                                 ValueToString(value), key, Join(rendered)));
      }
    }
  }
  // Exclusion j is redundant when some other exclusion i names a subset of j's terms: every
  // cell j matches, i matches too. (Identical exclusions: the later one is reported.)
  auto subset = [&](size_t i, size_t j) {
    for (const auto& [key, value] : m.exclude[i]) {
      auto it = m.exclude[j].find(key);
      if (it == m.exclude[j].end() || ValueToString(it->second) != ValueToString(value)) {
        return false;
      }
    }
    return true;
  };
  for (size_t j = 0; j < m.exclude.size(); ++j) {
    for (size_t i = 0; i < m.exclude.size(); ++i) {
      if (i == j || !subset(i, j)) continue;
      if (subset(j, i) && i > j) continue;  // identical: report the later one
      return Error(exclusion_marks_[j], Item("exclude", j),
                   fmt::format("matches no cell that exclude[{}] does not already remove", i));
    }
  }
  return absl::OkStatus();
}

// Counts documents, stopping at `limit`. yaml-cpp 0.7's LoadAll never returns on some inputs
// (", a": a flow indicator at the top level yields an endless run of empty documents, and memory
// grows until the process is killed; found by fuzz/matrix_fuzz.cc), so the documents are counted
// with the event parser, bounded, before LoadAll builds them.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (count++ == 1) second = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  int count = 0;
  YAML::Mark second;
};

absl::StatusOr<Matrix> Parser::Parse(std::string_view yaml) {
  std::vector<YAML::Node> documents;
  try {
    constexpr int kMaxDocuments = 8;
    std::istringstream stream{std::string(yaml)};
    YAML::Parser events(stream);
    DocumentCounter counter;
    while (counter.count < kMaxDocuments && events.HandleNextDocument(counter)) {
    }
    if (counter.count >= kMaxDocuments) {
      return Error(counter.second, "",
                   fmt::format("expected one YAML document, found {} or more (a stray ',', ']' "
                               "or '}}' at the top level?)",
                               kMaxDocuments));
    }
    documents = YAML::LoadAll(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Error(e.mark, "", fmt::format("YAML syntax error: {}", e.msg));
  }
  const YAML::Mark start{};  // line 0, column 0 -> "1:1"
  if (documents.empty() || (documents.size() == 1 && documents[0].IsNull())) {
    return Error(start, "", "the document is empty; a matrix needs at least name, runner and axes");
  }
  if (documents.size() > 1) {
    return Error(Where(documents[1], start), "",
                 fmt::format("expected one YAML document, found {}", documents.size()));
  }
  const YAML::Node& root = documents[0];
  if (!root.IsMap()) {
    return Error(Where(root, start), "",
                 fmt::format("the top level must be a mapping (name: ..., runner: ..., axes: "
                             "...), got {}",
                             Shown(root)));
  }
  ASSIGN_OR_RETURN(const std::vector<Entry> entries, ReadMapping(root, start, "", kTopKeys));
  auto find = [&entries](std::string_view key) -> const Entry* {
    for (const Entry& e : entries) {
      if (e.key == key) return &e;
    }
    return nullptr;
  };
  // An optional key with an empty value (`exclude:`) is the same as leaving it out.
  auto optional = [&find](std::string_view key) -> const Entry* {
    const Entry* e = find(key);
    return e != nullptr && e->value.IsNull() ? nullptr : e;
  };
  for (std::string_view key : {"name", "runner", "axes"}) {
    const Entry* e = find(key);
    if (e == nullptr) {
      return Error(Where(root, start), "", fmt::format("missing required key \"{}\"", key));
    }
    if (e->value.IsNull()) {
      return Error(e->key_mark, key, "expected a value, got nothing");
    }
  }

  Matrix m;
  m.max_attempts = 3;
  m.source_name = filename_;
  Remember(m, "runner", find("runner")->where());
  if (const Entry* e = find("metric")) Remember(m, "metric", e->where());
  ASSIGN_OR_RETURN(m.name, ReadString(*find("name"), "name"));
  if (!IsMatrixName(m.name)) {
    return Error(
        find("name")->where(), "name",
        fmt::format("\"{}\" is not a valid matrix name; names match [A-Za-z0-9_.-]+", m.name));
  }
  if (const Entry* e = optional("description")) {
    ASSIGN_OR_RETURN(m.description, ReadString(*e, "description"));
  }
  {
    const Entry& e = *find("runner");
    ASSIGN_OR_RETURN(m.runner, ReadString(e, "runner"));
    if (!Contains(kRunners, m.runner)) {
      return Error(e.where(), "runner",
                   fmt::format("unknown runner \"{}\"{}; expected one of: {}", m.runner,
                               Suggest(m.runner, kRunners), Join(kRunners)));
    }
  }
  RETURN_IF_ERROR(ParseAxes(*find("axes"), m));
  if (const Entry* e = optional("fixed")) RETURN_IF_ERROR(ParseFixed(*e, m));
  if (const Entry* e = optional("exclude")) RETURN_IF_ERROR(ParseExclude(*e, m));
  if (const Entry* e = optional("pair")) RETURN_IF_ERROR(ParseAxisList(*e, "pair", m, m.pair));
  if (const Entry* e = optional("together")) {
    RETURN_IF_ERROR(ParseAxisList(*e, "together", m, m.together));
    for (size_t i = 0; i < m.together.size(); ++i) {
      if (std::find(m.pair.begin(), m.pair.end(), m.together[i]) != m.pair.end()) {
        return Error(Where(e->value[i], e->where()), Item("together", i),
                     fmt::format("axis \"{}\" is also in pair; an axis is either paired or "
                                 "together, not both",
                                 m.together[i]));
      }
    }
  }
  if (const Entry* e = optional("replicates")) RETURN_IF_ERROR(ParseReplicates(*e, m));
  if (const Entry* e = optional("requires")) RETURN_IF_ERROR(ParseRequires(*e, m));
  if (const Entry* e = optional("metric")) {
    ASSIGN_OR_RETURN(m.metric, ReadString(*e, "metric"));
    if (!IsMatrixName(m.metric)) {
      return Error(
          e->where(), "metric",
          fmt::format("\"{}\" is not a valid metric name; names match [A-Za-z0-9_.-]+", m.metric));
    }
  }
  m.seed = DefaultSeed(m.name);
  if (const Entry* e = optional("seed")) {
    const YAML::Node& node = e->value;
    auto value = node.IsScalar() && node.Tag() != "!" ? ReadValue(node, e->key_mark, "seed")
                                                      : absl::StatusOr<Value>(Value());
    if (!value.ok() || !value->is_number_integer() ||
        (!value->is_number_unsigned() && value->get<int64_t>() < 0)) {
      return Error(
          e->where(), "seed",
          fmt::format("expected a non-negative integer (at most 2^64-1), got {}", Shown(node)));
    }
    m.seed = value->is_number_unsigned() ? value->get<uint64_t>()
                                         : static_cast<uint64_t>(value->get<int64_t>());
  }
  if (const Entry* e = optional("max_attempts")) {
    ASSIGN_OR_RETURN(const int64_t v,
                     ReadInteger(e->value, e->key_mark, "max_attempts", 1, INT_MAX));
    m.max_attempts = static_cast<int>(v);
  }
  if (const Entry* e = optional("aa_control")) RETURN_IF_ERROR(ParseAAControl(*e, m));
  if (const Entry* e = optional("precision")) RETURN_IF_ERROR(ParsePrecision(*e, m));
  if (const Entry* e = optional("locate")) RETURN_IF_ERROR(ParseLocate(*e, m));
  for (std::string_view key : {"command", "metrics"}) {
    const Entry* e = optional(key);
    if (m.runner == "command" && e == nullptr) {
      return Error(find("runner")->where(), "runner",
                   fmt::format("runner: command needs `{}` (docs/command-runner.md)", key));
    }
    if (m.runner != "command" && e != nullptr) {
      return Error(e->key_mark, key,
                   fmt::format("`{}` belongs to runner: command; the {} runner has its own "
                               "metrics and parameters",
                               key, m.runner));
    }
  }
  if (m.runner == "command") {
    RETURN_IF_ERROR(ParseMetrics(*optional("metrics"), m));
    RETURN_IF_ERROR(ParseCommand(*optional("command"), m));
  }
  RETURN_IF_ERROR(CheckExclusions(m));

  // Canonicalise exclusion values to the axis's own values (e.g. "1024" quoted -> 1024).
  for (auto& exclusion : m.exclude) {
    for (auto& [key, value] : exclusion) {
      const Axis* axis = FindAxis(m, key);
      for (const Value& v : axis->values) {
        if (ValueToString(v) == ValueToString(value)) value = v;
      }
    }
  }

  const auto axes = internal::ExpandAxes(m);
  const int64_t cells = internal::CountCells(axes, internal::CompileExclusions(m, axes));
  if (cells == 0) {
    return Error(exclude_mark_, "exclude", "the exclusions remove every cell of the matrix");
  }
  if (cells > options_.max_cells) {
    return Error(axes_mark_, "axes", internal::CapMessage(cells, options_.max_cells));
  }
  if (const std::string error = internal::ReplicateCapError(cells, m.replicates.sessions);
      !error.empty()) {
    return Error(has_replicates_ ? replicates_mark_ : axes_mark_, "replicates.sessions", error);
  }
  return m;
}

}  // namespace

absl::StatusOr<Matrix> ParseMatrix(std::string_view yaml, std::string_view filename,
                                   const ParseOptions& options) {
  if (const size_t bad = InvalidUtf8At(yaml); bad != std::string_view::npos) {
    const std::string_view before = yaml.substr(0, bad);
    const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
    const size_t line_start = before.rfind('\n');
    const size_t column = bad - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
    return absl::InvalidArgumentError(
        fmt::format("{}:{}:{}: not valid UTF-8 (byte 0x{:02X}); a matrix is UTF-8 text", filename,
                    line, column, static_cast<unsigned char>(yaml[bad])));
  }
  Parser parser(filename, options);
  try {
    return parser.Parse(yaml);
  } catch (const YAML::Exception& e) {
    // Accessors throw only on misuse; report rather than escape.
    std::string location(filename);
    if (!e.mark.is_null()) {
      location = fmt::format("{}:{}:{}", filename, e.mark.line + 1, e.mark.column + 1);
    }
    return absl::InvalidArgumentError(fmt::format("{}: {}", location, e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        fmt::format("{}: cannot read the matrix: {}", filename, e.what()));
  }
}

absl::StatusOr<Matrix> ParseMatrixFile(const std::string& path, const ParseOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        fmt::format("cannot read matrix file {}: {}", path,
                    std::error_code(errno, std::generic_category()).message()));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::NotFoundError(fmt::format("cannot read matrix file {}", path));
  return ParseMatrix(contents.str(), path, options);
}

}  // namespace ladder::matrices
