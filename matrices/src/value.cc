#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "internal.h"
#include "ladder/common/random.h"
#include "ladder/matrices/matrix.h"

namespace ladder::matrices {

std::string ValueToString(const Value& value) {
  switch (value.type()) {
    case Value::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Value::value_t::number_integer:
      return std::to_string(value.get<int64_t>());
    case Value::value_t::number_unsigned:
      return std::to_string(value.get<uint64_t>());
    case Value::value_t::number_float: {
      char buffer[64];
      const double d = value.get<double>();
      auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), d);
      if (ec != std::errc()) return value.dump();
      std::string text(buffer, end);
      // Keep a double distinguishable from an integer in keys: 1.0 renders "1.0", not "1".
      if (text.find_first_of(".eEni") == std::string::npos) text += ".0";
      return text;
    }
    case Value::value_t::string:
      return value.get<std::string>();
    case Value::value_t::null:
      return "null";
    default:
      return value.dump();
  }
}

std::string CellKey(const std::vector<std::string>& axis_order, const nlohmann::json& axes) {
  std::string key;
  for (const std::string& name : axis_order) {
    if (!axes.is_object() || !axes.contains(name)) continue;
    if (!key.empty()) key += ",";
    key += name + "=" + ValueToString(axes.at(name));
  }
  return key;
}

std::vector<CellKeyPart> ParseCellKey(std::string_view key) {
  std::vector<CellKeyPart> parts;
  size_t start = 0;
  while (start < key.size()) {
    size_t end = key.find(',', start);
    if (end == std::string_view::npos) end = key.size();
    const std::string_view part = key.substr(start, end - start);
    start = end + 1;
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      parts.push_back(CellKeyPart{std::string(part), ""});
    } else {
      parts.push_back(
          CellKeyPart{std::string(part.substr(0, eq)), std::string(part.substr(eq + 1))});
    }
  }
  return parts;
}

std::string CellKeyWithout(std::string_view key, const std::vector<std::string>& drop) {
  std::string out;
  for (const CellKeyPart& part : ParseCellKey(key)) {
    if (std::find(drop.begin(), drop.end(), part.axis) != drop.end()) continue;
    if (!out.empty()) out += ",";
    out += part.axis + "=" + part.value;
  }
  return out;
}

uint64_t DefaultSeed(std::string_view name) { return internal::Fnv1a64(name); }

uint64_t UnitSeed(uint64_t matrix_seed, int group_index, int replicate) {
  uint64_t s = SplitMix64(matrix_seed);
  s = SplitMix64(s ^ static_cast<uint64_t>(group_index));
  s = SplitMix64(s ^ static_cast<uint64_t>(replicate));
  return s;
}

nlohmann::json RequirementsToJson(const Requirements& r) {
  return {{"gpu_vendor", r.gpu_vendor},
          {"gpu_name", r.gpu_name_glob},
          {"gpu_count", r.gpu_count},
          {"min_gpu_memory_mib", r.min_gpu_memory_mib},
          {"features", r.features}};
}

absl::StatusOr<Requirements> RequirementsFromJson(const nlohmann::json& j) {
  Requirements r;
  if (j.is_null()) return r;
  if (!j.is_object()) return absl::InvalidArgumentError("requires: expected a JSON object");
  try {
    r.gpu_vendor = j.value("gpu_vendor", "");
    r.gpu_name_glob = j.value("gpu_name", "");
    r.gpu_count = j.value("gpu_count", 0);
    r.min_gpu_memory_mib = j.value("min_gpu_memory_mib", int64_t{0});
    if (j.contains("features")) r.features = j["features"].get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(std::string("requires: ") + e.what());
  }
  return r;
}

Value LocateConfig::ValueOf(double depth) const {
  if (integer_axis) return static_cast<int64_t>(std::llround(depth));
  return depth;
}

nlohmann::json LocateToJson(const Matrix& matrix) {
  if (!matrix.locate) return nlohmann::json::object();
  const Locate& l = *matrix.locate;
  nlohmann::json arms = nlohmann::json::array();
  nlohmann::json values = nlohmann::json::array();
  for (const auto& axis : matrix.axes) {
    if (axis.name == l.pair_axis) {
      for (const auto& v : axis.values) arms.push_back(ValueToString(v));
    }
    if (axis.name == l.axis) {
      for (const auto& v : axis.values) values.push_back(v);
    }
  }
  return {{"axis", l.axis},
          {"pair_axis", l.pair_axis},
          {"arms", arms},      // rendered as in cell keys; the ratio is arms[1] / arms[0]
          {"values", values},  // the declared rungs; any other value of the axis is a probe
          {"resolution_octaves", l.resolution_octaves},
          {"min_step", l.min_step},
          {"max_sessions", l.max_sessions}};
}

absl::StatusOr<LocateConfig> LocateFromJson(const nlohmann::json& json) {
  if (!json.is_object() || json.empty()) return absl::NotFoundError("the run has no locate");
  LocateConfig c;
  try {
    c.axis = json.at("axis").get<std::string>();
    c.pair_axis = json.at("pair_axis").get<std::string>();
    const auto& arms = json.at("arms");
    if (!arms.is_array() || arms.size() != 2) {
      return absl::InvalidArgumentError("locate.arms must name two arms");
    }
    c.arm_a = arms[0].get<std::string>();
    c.arm_b = arms[1].get<std::string>();
    for (const auto& v : json.at("values")) {
      c.declared.push_back(v);
      if (!v.is_number_integer()) c.integer_axis = false;
    }
    c.resolution_octaves = json.at("resolution_octaves").get<double>();
    c.min_step = json.at("min_step").get<int64_t>();
    c.max_sessions = json.at("max_sessions").get<int>();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(std::string("runs.locate: ") + e.what());
  }
  return c;
}

namespace internal {

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV offset basis
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;  // FNV prime
  }
  return hash;
}

}  // namespace internal
}  // namespace ladder::matrices
