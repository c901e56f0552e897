#include "ladder/kernels/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "gpu_api.h"
#include "gpu_point.h"

namespace ladder::kernels {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// A timer whose smallest step is at most this is read as is (see Summarize).
constexpr double kFineTimerNs = 100;

double MedianOf(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double At(const WorkGroupSpan& s, Mark m) { return s.t_us[static_cast<int>(m)]; }

CallPhases PhasesOf(int call, const std::vector<const WorkGroupSpan*>& attention,
                    const std::vector<const WorkGroupSpan*>& merge, double next_ready) {
  CallPhases c;
  c.call = call;
  double ready0 = kNaN, ready_last = kNaN, att_end = kNaN;
  std::vector<double> first_tile, keys, write_out;
  for (const WorkGroupSpan* s : attention) {
    const double ready = At(*s, Mark::kReady), tile = At(*s, Mark::kFirstTile);
    const double loop_end = At(*s, Mark::kLoopEnd), exit = At(*s, Mark::kExit);
    ready0 = std::fmin(ready0, ready);  // (fmin / fmax skip NaN)
    ready_last = std::fmax(ready_last, ready);
    att_end = std::fmax(att_end, exit);
    first_tile.push_back(tile - ready);
    keys.push_back(loop_end - (std::isnan(tile) ? ready : tile));
    write_out.push_back(exit - loop_end);
  }
  c.dispatch_us = ready_last - ready0;
  c.first_tile_us = MedianOf(first_tile);
  c.keys_us = MedianOf(keys);
  c.write_out_us = MedianOf(write_out);
  c.attention_us = att_end - ready0;
  double call_end = att_end;
  c.merge_wait_us = c.merge_us = kNaN;
  if (!merge.empty()) {
    double merge_ready = kNaN, merge_end = kNaN;
    for (const WorkGroupSpan* s : merge) {
      merge_ready = std::fmin(merge_ready, At(*s, Mark::kReady));
      merge_end = std::fmax(merge_end, At(*s, Mark::kExit));
    }
    c.merge_wait_us = merge_ready - att_end;
    c.merge_us = merge_end - merge_ready;
    call_end = merge_end;
  }
  c.to_next_us = next_ready - call_end;
  c.period_us = next_ready - ready0;
  return c;
}

std::string Num(double v, const char* fmt = "%.2f") {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}
std::string JsonNum(double v) {
  if (std::isnan(v) || std::isinf(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f", v);
  return buf;
}

std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", ch);
      o += buf;
      continue;
    }
    o += ch;
  }
  return o;
}

// The phases in the order a call passes them, with the names the table and the JSON use.
struct PhaseField {
  const char* key;
  const char* label;
  double CallPhases::*field;
};
constexpr PhaseField kPhases[] = {
    {"dispatch_us", "attention: first to last work group ready", &CallPhases::dispatch_us},
    {"first_tile_us", "  median work group: ready to first K/V tile", &CallPhases::first_tile_us},
    {"keys_us", "  median work group: key loop", &CallPhases::keys_us},
    {"write_out_us", "  median work group: loop end to exit", &CallPhases::write_out_us},
    {"attention_us", "attention: first ready to last exit", &CallPhases::attention_us},
    {"merge_wait_us", "merge: attention's last exit to first ready", &CallPhases::merge_wait_us},
    {"merge_us", "merge: first ready to last exit", &CallPhases::merge_us},
    {"to_next_us", "end of call to the next call's first ready", &CallPhases::to_next_us},
    {"period_us", "call to call (first attention ready)", &CallPhases::period_us},
};

}  // namespace

Result<TimelineSummary> Summarize(const std::vector<WorkGroupStamps>& stamps) {
  auto bad = [](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument, "timeline: " + why);
  };
  if (stamps.empty()) return bad("no work group stamped a mark");
  TimelineSummary out;
  // The timer's step: the smallest gap between two distinct stamps.
  std::vector<uint64_t> timer;
  for (const WorkGroupStamps& s : stamps)
    for (uint64_t t : s.timer_ns)
      if (t != 0) timer.push_back(t);
  std::sort(timer.begin(), timer.end());
  timer.erase(std::unique(timer.begin(), timer.end()), timer.end());
  out.timer_resolution_ns = kNaN;
  for (size_t i = 1; i < timer.size(); ++i)
    out.timer_resolution_ns =
        std::fmin(out.timer_resolution_ns, static_cast<double>(timer[i] - timer[i - 1]));

  // Per multiprocessor, the means of its stamps' timer and cycles (a mark is present where its
  // timer stamp is non-zero); then one rate for all, fitted to the deviations from those means.
  struct Means {
    long double timer = 0, cycles = 0;
    int n = 0;
  };
  std::map<int, Means> sm;
  for (const WorkGroupStamps& s : stamps)
    for (int m = 0; m < kMarkCount; ++m)
      if (s.timer_ns[m] != 0) {
        Means& a = sm[s.sm];
        a.timer += s.timer_ns[m];
        a.cycles += s.cycles[m];
        ++a.n;
      }
  for (auto& [id, a] : sm) a.timer /= a.n, a.cycles /= a.n;
  long double cov = 0, var = 0;
  for (const WorkGroupStamps& s : stamps)
    for (int m = 0; m < kMarkCount; ++m)
      if (s.timer_ns[m] != 0) {
        const Means& a = sm[s.sm];
        const long double dc = static_cast<long double>(s.cycles[m]) - a.cycles;
        cov += dc * (static_cast<long double>(s.timer_ns[m]) - a.timer);
        var += dc * dc;
      }
  if (!(var > 0) || !(cov > 0))
    return bad("no multiprocessor has two stamps far enough apart to fit its clock rate");
  const long double ns_per_cycle = cov / var;
  out.cycles_per_us = static_cast<double>(1000.0L / ns_per_cycle);
  // A fine timer is the axis itself: the SM clock changes under load (H200: the counters'
  // rate over a recording was 1.81-1.89 GHz, lower the longer the call), so cycles converted at
  // one rate drift by a fraction of a microsecond across a recording.
  out.aligned_by_timer = out.timer_resolution_ns <= kFineTimerNs;

  long double origin = std::numeric_limits<long double>::infinity();
  auto aligned = [&](const WorkGroupStamps& s, int m) {
    if (out.aligned_by_timer) return static_cast<long double>(s.timer_ns[m]);
    const Means& a = sm[s.sm];
    return a.timer + (static_cast<long double>(s.cycles[m]) - a.cycles) * ns_per_cycle;
  };
  for (const WorkGroupStamps& s : stamps)
    for (int m = 0; m < kMarkCount; ++m)
      if (s.timer_ns[m] != 0) origin = std::min(origin, aligned(s, m));
  int calls = 0;
  for (const WorkGroupStamps& s : stamps) {
    WorkGroupSpan w;
    w.call = s.call, w.kernel = s.kernel, w.work_group = s.work_group, w.sm = s.sm;
    for (int m = 0; m < kMarkCount; ++m)
      w.t_us[m] =
          s.timer_ns[m] != 0 ? static_cast<double>((aligned(s, m) - origin) / 1000.0L) : kNaN;
    out.spans.push_back(w);
    calls = std::max(calls, s.call + 1);
  }

  std::vector<std::vector<const WorkGroupSpan*>> attention(calls), merge(calls);
  for (const WorkGroupSpan& w : out.spans)
    (w.kernel == 0 ? attention : merge)[w.call].push_back(&w);
  for (int c = 0; c < calls; ++c) {
    out.attention_work_groups =
        std::max(out.attention_work_groups, static_cast<int>(attention[c].size()));
    out.merge_work_groups = std::max(out.merge_work_groups, static_cast<int>(merge[c].size()));
  }
  std::vector<double> first_ready(calls, kNaN);
  for (int c = 0; c < calls; ++c)
    for (const WorkGroupSpan* w : attention[c])
      first_ready[c] = std::fmin(first_ready[c], At(*w, Mark::kReady));
  for (int c = 0; c < calls; ++c) {
    if (attention[c].empty()) continue;
    out.calls.push_back(
        PhasesOf(c, attention[c], merge[c], c + 1 < calls ? first_ready[c + 1] : kNaN));
  }
  if (out.calls.empty()) return bad("no call has an attention work group");

  // The steady state: calls with a neighbour on each side.
  std::vector<const CallPhases*> typical;
  for (const CallPhases& c : out.calls)
    if (out.calls.size() < 3 || (c.call > 0 && c.call + 1 < calls)) typical.push_back(&c);
  out.typical_calls = static_cast<int>(typical.size());
  out.typical.call = -1;
  for (const PhaseField& f : kPhases) {
    std::vector<double> v;
    for (const CallPhases* c : typical) v.push_back(c->*f.field);
    out.typical.*f.field = MedianOf(v);
  }
  return out;
}

Result<TimelineResult> RunTimeline(const BenchPoint& point, int calls) {
  LADDER_K_TRY(point.Validate());
  if (point.backend == Backend::kCpu)
    return Error(ErrorCode::kUnsupported, "a work-group timeline needs a GPU backend");
  if (calls < 1 || calls > 1000)
    return Error(ErrorCode::kInvalidArgument, "calls must be in 1..1000");
  if (!BackendAvailable(point.backend))
    return Error(ErrorCode::kUnavailable,
                 "backend " + std::string(ToString(point.backend)) + " unavailable here");
  LADDER_K_ASSIGN_OR_RETURN(internal::GpuPoint g, internal::PrepareGpuPoint(point));
  const bool graph = point.timing == Timing::kGraph;
  LADDER_K_ASSIGN_OR_RETURN(
      std::vector<gpu::TimelineStamp> raw,
      gpu::RecordTimeline(g.dp, g.plan, g.ws.get(), g.ws_bytes, point.warmup, calls, graph));
  std::vector<WorkGroupStamps> stamps;
  stamps.reserve(raw.size());
  for (const gpu::TimelineStamp& t : raw) {
    WorkGroupStamps s;
    s.call = t.call, s.kernel = t.kernel, s.work_group = t.work_group, s.sm = t.sm;
    for (int m = 0; m < kMarkCount; ++m) s.timer_ns[m] = t.ns[m], s.cycles[m] = t.cycles[m];
    stamps.push_back(s);
  }
  TimelineResult r;
  r.point = point;
  r.grid = g.plan.grid;
  if (graph && g.plan.merge_in_kernel) r.grid += " [in the graph: merge kernel]";
  r.device = g.info.name;
  r.calls = calls;
  char buf[256];
  const double spin_us = gpu::HoldNs() * 1e-3;
  if (graph)
    std::snprintf(buf, sizeof(buf),
                  "%d calls captured in one graph, recorded in one replay behind a %.0f us device "
                  "spin; %d warm-up calls and 1 unrecorded replay first",
                  calls, spin_us, point.warmup);
  else
    std::snprintf(buf, sizeof(buf),
                  "%d calls launched back to back on a stream behind a %.0f us device spin; %d "
                  "warm-up calls first",
                  calls, spin_us, point.warmup);
  r.method = buf;
  LADDER_K_ASSIGN_OR_RETURN(r.summary, Summarize(stamps));
  return r;
}

std::string FormatTimeline(const TimelineResult& r) {
  const TimelineSummary& s = r.summary;
  const BenchPoint& p = r.point;
  std::string o;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%s, depth %d, %d query row%s x %d sequence%s, %s on %s\n",
                p.preset.empty() ? "custom shape" : p.preset.c_str(), p.depth, p.query_rows,
                p.query_rows == 1 ? "" : "s", p.num_seqs, p.num_seqs == 1 ? "" : "s",
                std::string(ToString(p.dtype)).c_str(), r.device.c_str());
  o += buf;
  o += r.grid + "\n" + r.method + "\n";
  std::snprintf(buf, sizeof(buf),
                "work groups per call: %d attention, %d merge; timer step %s ns (%s); SM "
                "cycle counters advanced %.3f G per timer second\n\n",
                s.attention_work_groups, s.merge_work_groups,
                Num(s.timer_resolution_ns, "%.0f").c_str(),
                s.aligned_by_timer ? "times read from it"
                                   : "coarse: times from the cycle counters, aligned to it",
                s.cycles_per_us / 1000.0);
  o += buf;
  std::snprintf(buf, sizeof(buf), "%-52s %s\n", "phase", "us, median of the calls");
  o += buf;
  std::snprintf(buf, sizeof(buf), "%-52s %s\n", "",
                s.typical_calls == static_cast<int>(s.calls.size())
                    ? "(all calls)"
                    : "(those with a call before and after)");
  o += buf;
  for (const PhaseField& f : kPhases) {
    std::snprintf(buf, sizeof(buf), "%-52s %8s\n", f.label, Num(s.typical.*f.field).c_str());
    o += buf;
  }
  o += "\nper call (us)\n";
  std::snprintf(buf, sizeof(buf), "%5s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "call", "dispatch",
                "1st tile", "keys", "write", "attn", "m.wait", "merge", "to next", "period");
  o += buf;
  for (const CallPhases& c : s.calls) {
    std::snprintf(buf, sizeof(buf), "%5d %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", c.call,
                  Num(c.dispatch_us).c_str(), Num(c.first_tile_us).c_str(), Num(c.keys_us).c_str(),
                  Num(c.write_out_us).c_str(), Num(c.attention_us).c_str(),
                  Num(c.merge_wait_us).c_str(), Num(c.merge_us).c_str(), Num(c.to_next_us).c_str(),
                  Num(c.period_us).c_str());
    o += buf;
  }
  o += "\n(attention ready = the kernel ahead of it complete; a 1st tile of '-': the kernel has no "
       "such mark)\n";
  return o;
}

std::string FormatTimelineJson(const TimelineResult& r, bool spans) {
  const TimelineSummary& s = r.summary;
  const BenchPoint& p = r.point;
  auto phases = [](const CallPhases& c) {
    std::string o = "{\"call\":" + std::to_string(c.call);
    for (const PhaseField& f : kPhases)
      o += ",\"" + std::string(f.key) + "\":" + JsonNum(c.*f.field);
    return o + "}";
  };
  std::string o = "{\"preset\":\"" + JsonEscape(p.preset) + "\",\"backend\":\"" +
                  std::string(ToString(p.backend)) + "\",\"depth\":" + std::to_string(p.depth) +
                  ",\"query_rows\":" + std::to_string(p.query_rows) +
                  ",\"num_seqs\":" + std::to_string(p.num_seqs) + ",\"dtype\":\"" +
                  std::string(ToString(p.dtype)) + "\",\"policy\":\"" +
                  std::string(ToString(p.policy)) + "\",\"tuning\":\"" +
                  JsonEscape(p.tuning.ToString()) + "\",\"timing\":\"" +
                  std::string(ToString(p.timing)) + "\",\"device\":\"" + JsonEscape(r.device) +
                  "\",\"grid\":\"" + JsonEscape(r.grid) + "\",\"method\":\"" +
                  JsonEscape(r.method) + "\",\"calls\":" + std::to_string(r.calls) +
                  ",\"timer_resolution_ns\":" + JsonNum(s.timer_resolution_ns) +
                  ",\"cycles_per_us\":" + JsonNum(s.cycles_per_us) + ",\"aligned_by\":\"" +
                  (s.aligned_by_timer ? "timer" : "cycle counters") + "\"" +
                  ",\"attention_work_groups\":" + std::to_string(s.attention_work_groups) +
                  ",\"merge_work_groups\":" + std::to_string(s.merge_work_groups) +
                  ",\"typical_calls\":" + std::to_string(s.typical_calls) +
                  ",\"typical\":" + phases(s.typical) + ",\"per_call\":[";
  for (size_t i = 0; i < s.calls.size(); ++i) o += (i ? "," : "") + phases(s.calls[i]);
  o += "]";
  if (spans) {
    o += ",\"marks\":[\"entry\",\"ready\",\"first_tile\",\"loop_end\",\"exit\"],\"spans\":[";
    for (size_t i = 0; i < s.spans.size(); ++i) {
      const WorkGroupSpan& w = s.spans[i];
      o += std::string(i ? "," : "") + "{\"call\":" + std::to_string(w.call) + ",\"kernel\":\"" +
           (w.kernel == 0 ? "attention" : "merge") +
           "\",\"work_group\":" + std::to_string(w.work_group) + ",\"sm\":" + std::to_string(w.sm) +
           ",\"t_us\":[";
      for (int m = 0; m < kMarkCount; ++m) o += (m ? "," : "") + JsonNum(w.t_us[m]);
      o += "]}";
    }
    o += "]";
  }
  return o + "}";
}

}  // namespace ladder::kernels
