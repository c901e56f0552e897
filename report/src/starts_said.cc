// What each cell's starts said about themselves (probe counts, a program's evidence lines), and
// what the two arms of each paired comparison said differently: the evidence that a cell is the
// kernel path, backend or configuration it claims, brought to the tables people read.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "internal.h"
#include "ladder/status_macros.h"

namespace ladder::report {
namespace {

// Leaves deeper than this, and arrays longer than kMaxSaidArray, are not listed: a program's
// evidence is free-form, and the table shows what distinguishes cells, not every detail.
constexpr int kMaxSaidDepth = 4;
constexpr size_t kMaxSaidArray = 8;
constexpr size_t kMaxSaidValue = 60;

std::string ScalarText(const nlohmann::json& v) {
  std::string text = v.is_string() ? v.get<std::string>() : v.dump();
  // A program's words go into tables: no control byte (a terminal escape) goes with them.
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  if (text.size() > kMaxSaidValue) text = text.substr(0, kMaxSaidValue - 3) + "...";
  return text;
}

// Scalar leaves and arrays of scalars, as "a.b.c" -> text.
void FlattenSaid(const nlohmann::json& v, const std::string& path, int depth,
                 std::map<std::string, std::string>& out) {
  if (v.is_object()) {
    if (depth >= kMaxSaidDepth) return;
    for (const auto& [key, child] : v.items()) {
      FlattenSaid(child, path.empty() ? key : path + "." + key, depth + 1, out);
    }
  } else if (v.is_array()) {
    if (v.size() > kMaxSaidArray) return;
    std::vector<std::string> items;
    for (const auto& item : v) {
      if (item.is_structured()) return;
      items.push_back(item.is_string() ? item.get<std::string>() : item.dump());
    }
    if (!path.empty()) out[path] = ScalarText(absl::StrJoin(items, ","));
  } else if (!path.empty() && !v.is_null()) {
    out[path] = ScalarText(v);
  }
}

std::string ProbeShare(const StartsSaid& s, const std::string& pattern) {
  auto it = s.probe_starts.find(pattern);
  return absl::StrCat(it == s.probe_starts.end() ? 0 : it->second, "/", s.starts, " starts");
}

}  // namespace

absl::Status AddStartsSaid(db::Database& db, int64_t run_id, RunAnalysis& a) {
  std::map<int64_t, size_t> cell_index;
  for (size_t c = 0; c < a.cells.size(); ++c) cell_index[a.cells[c].cell_id] = c;
  // One start: probe_counts opens it (every command start and engine process records exactly
  // one); a start is its cell, attempt and process (cells of one unit share the process number)
  // and its ordinal among them. Evidence an engine records before its probe counts joins the
  // start before, of the same cell: a cell's leaves are judged over all its starts anyway.
  using StartKey = std::tuple<size_t, int64_t, int64_t, int64_t>;
  std::map<std::tuple<size_t, int64_t, int64_t>, int64_t> ordinal;
  std::map<StartKey, std::map<std::string, std::string>> start_leaves;
  ASSIGN_OR_RETURN(
      db::Statement stmt,
      db.Prepare("SELECT e.cell_id, e.attempt_id, e.process, e.kind, e.value FROM evidence e "
                 "JOIN attempts a ON a.id = e.attempt_id WHERE e.run_id = ?1 AND e.stale = 0 "
                 "AND a.state = 'done' AND e.kind IN ('probe_counts', 'program_evidence', "
                 "'engine_config', 'engine_version', 'engine_backend') "
                 "ORDER BY e.id"));
  stmt.Bind(1, run_id);
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    auto it = cell_index.find(stmt.Int(0));
    if (it == cell_index.end()) continue;
    const std::tuple<size_t, int64_t, int64_t> process{it->second, stmt.Int(1), stmt.Int(2)};
    auto value = nlohmann::json::parse(stmt.Text(4), nullptr, false);
    CellStats& cell = a.cells[it->second];
    if (!cell.said) cell.said.emplace();
    if (stmt.Text(3) == "probe_counts") {
      const StartKey key{it->second, stmt.Int(1), stmt.Int(2), ++ordinal[process]};
      start_leaves[key];
      ++cell.said->starts;
      if (!value.is_object()) continue;
      for (const auto& [pattern, count] : value.items()) {
        if (!count.is_number_integer()) continue;
        cell.said->probe_lines[pattern] += count.get<int64_t>();
        cell.said->probe_starts[pattern] += count.get<int64_t>() > 0 ? 1 : 0;
      }
    } else {
      const StartKey key{it->second, stmt.Int(1), stmt.Int(2), ordinal[process]};
      // A program's evidence by its own keys; what an engine reported under the kind's name
      // (engine_config.reported.n_ctx, engine_version).
      const std::string kind = stmt.Text(3);
      FlattenSaid(value, kind == "program_evidence" ? "" : kind, kind == "program_evidence" ? 0 : 1,
                  start_leaves[key]);
    }
  }
  // A leaf is the cell's when every start of the cell that printed it printed the same value.
  for (const auto& [key, leaves] : start_leaves) {
    StartsSaid& said = *a.cells[std::get<0>(key)].said;
    for (const auto& [leaf, text] : leaves) {
      auto [slot, inserted] = said.program.emplace(leaf, text);
      if (!inserted && slot->second != text) slot->second = StartsSaid::kVaries;
    }
  }
  for (Comparison& cmp : a.comparisons) {
    const CellStats* base = a.FindCell(cmp.baseline_key);
    const CellStats* treated = a.FindCell(cmp.treatment_key);
    if (!base || !treated || !base->said || !treated->said) continue;
    const StartsSaid& sa = *base->said;
    const StartsSaid& sb = *treated->said;
    std::set<std::string> patterns;
    for (const auto& [p, n] : sa.probe_lines) patterns.insert(p);
    for (const auto& [p, n] : sb.probe_lines) patterns.insert(p);
    for (const auto& p : patterns) {
      const std::string share_a = ProbeShare(sa, p), share_b = ProbeShare(sb, p);
      const int64_t in_a = sa.probe_starts.count(p) ? sa.probe_starts.at(p) : 0;
      const int64_t in_b = sb.probe_starts.count(p) ? sb.probe_starts.at(p) : 0;
      if ((in_a > 0) != (in_b > 0))
        cmp.said_differs.push_back(p + ": " + share_a + " -> " + share_b);
    }
    // Leaves both arms printed first (a path taken, a kernel launched), then those one arm
    // alone printed (another implementation's own details).
    std::vector<std::pair<std::string, std::string>> both;  // (A -> B, leaf: A -> B)
    std::vector<std::string> one_sided;
    std::set<std::string> leaves;
    for (const auto& [leaf, text] : sa.program) leaves.insert(leaf);
    for (const auto& [leaf, text] : sb.program) leaves.insert(leaf);
    for (const auto& leaf : leaves) {
      auto ia = sa.program.find(leaf), ib = sb.program.find(leaf);
      const std::string va = ia == sa.program.end() ? "-" : ia->second;
      const std::string vb = ib == sb.program.end() ? "-" : ib->second;
      if (va == StartsSaid::kVaries || vb == StartsSaid::kVaries || va == vb) continue;
      // The program echoing the paired axis (impl: gated -> admitted) says nothing new.
      if (va == cmp.baseline_value && vb == cmp.treatment_value) continue;
      if (va == "-" || vb == "-") {
        one_sided.push_back(leaf + ": " + va + " -> " + vb);
      } else {
        both.emplace_back(va + " -> " + vb, leaf + ": " + va + " -> " + vb);
      }
    }
    // Short values first: a path taken ("2d -> 3d") before a sentence about it.
    std::stable_sort(both.begin(), both.end(),
                     [](const auto& x, const auto& y) { return x.first.size() < y.first.size(); });
    for (auto& [values, item] : both) cmp.said_differs.push_back(std::move(item));
    cmp.said_differs.insert(cmp.said_differs.end(), one_sided.begin(), one_sided.end());
  }
  return absl::OkStatus();
}

}  // namespace ladder::report
