// ladder-kernels: the kernels/ library as a standalone tool (no gRPC, no SQLite), so it builds
// and runs on a GPU machine with nothing but a compiler and the GPU toolkit.
//
//   ladder-kernels bench [--backend cpu|cuda|hip] [--preset P[,P]] [--depths 1K,32K] [--rows 1,2,4]
//                        [--policy 2d,3d,legacy,spec-aware,auto] [--dtype bf16|f16|f32]
//                        [--seqs N] [--block-size 16] [--warmup N] [--repeats N] [--flush-l2]
//                        [--graph [--graph-calls 20]] [--json] [--json-out FILE]
//   ladder-kernels check [--backend cpu|cuda|hip] [--case NAME] [--repeats 10]
//   (both also take the tuning, one flag per field: --head512 K --merge-in-kernel S
//    --merge-overlap S --evict-first S --attention-overlap S --release-next S
//    --merge-in-cluster S --wide-work-groups S --split-keys S; see ladder/kernels/tuning.h)
//   ladder-kernels presets | cases | devices
//
// The argument parser is a small declared table, because kernels/ may use only the standard
// library (the GPU image has no CLI11); the ladder CLI exposes the same as `ladder kernels`.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ladder/kernels/attention.h"
#include "ladder/kernels/bench.h"
#include "ladder/kernels/cases.h"

namespace lk = ladder::kernels;

namespace {

struct Flag {
  std::string name;
  bool takes_value;
  std::string help;
  std::function<lk::Status(std::string_view)> set;
};

std::vector<std::string> Split(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t c = s.find(',', start);
    const std::string_view part =
        s.substr(start, c == std::string_view::npos ? std::string_view::npos : c - start);
    if (!part.empty()) out.emplace_back(part);
    if (c == std::string_view::npos) break;
    start = c + 1;
  }
  return out;
}

lk::Result<int> ParseInt(std::string_view s) {
  if (s.empty()) return lk::Error(lk::ErrorCode::kInvalidArgument, "empty number");
  long mult = 1;
  std::string body(s);
  const char last = body.back();
  if (last == 'k' || last == 'K') mult = 1024, body.pop_back();
  char* end = nullptr;
  const long v = std::strtol(body.c_str(), &end, 10);
  if (end == body.c_str() || *end != '\0' || v < 0)
    return lk::Error(lk::ErrorCode::kInvalidArgument, "not a number: '" + std::string(s) + "'");
  return static_cast<int>(v * mult);
}

lk::Result<std::vector<int>> ParseInts(std::string_view s) {
  std::vector<int> out;
  for (const auto& p : Split(s)) {
    LADDER_K_ASSIGN_OR_RETURN(int v, ParseInt(p));
    out.push_back(v);
  }
  return out;
}

// The TuningConfig fields as flags (tuning.h), shared by bench and check.
void AddTuningFlags(lk::TuningConfig* t, std::vector<Flag>* flags) {
  auto set_switch = [](lk::Switch* field) {
    return [field](std::string_view v) -> lk::Status {
      LADDER_K_ASSIGN_OR_RETURN(*field, lk::ParseSwitch(v));
      return {};
    };
  };
  flags->push_back({"head512", true,
                    "head-512 kernel: auto | generic | team-by-dims | team-by-column | team-split "
                    "| team-split-wgmma | team-columns",
                    [t](std::string_view v) -> lk::Status {
                      LADDER_K_ASSIGN_OR_RETURN(t->head512, lk::ParseHead512Kernel(v));
                      return {};
                    }});
  flags->push_back({"merge-in-kernel", true, "3D merge inside the team kernel: auto | off",
                    set_switch(&t->merge_in_kernel)});
  flags->push_back({"merge-overlap", true,
                    "merge kernel by programmatic dependent launch: auto | off",
                    set_switch(&t->merge_overlap)});
  flags->push_back({"evict-first", true, "K/V under an L2 evict-first policy: auto | on | off",
                    set_switch(&t->evict_first)});
  flags->push_back({"attention-overlap", true,
                    "attention kernel by programmatic dependent launch: auto | off",
                    set_switch(&t->attention_overlap)});
  flags->push_back({"release-next", true,
                    "merge kernel lets the next kernel launch before it ends: auto (where the "
                    "plan picks) | off",
                    set_switch(&t->release_next)});
  flags->push_back({"merge-in-cluster", true,
                    "3D generic kernel: segments merge in their thread block cluster: auto (on "
                    "with a sliding window) | on | off",
                    set_switch(&t->merge_in_cluster)});
  flags->push_back({"wide-work-groups", true,
                    "generic kernel at head 128 / 256 with 256 threads per work group: auto (on "
                    "at head 128) | on | off",
                    set_switch(&t->wide_work_groups)});
  flags->push_back({"split-keys", true,
                    "split-keys decode kernel at head 128 and 256, <= 8 score columns: auto (on "
                    "at <= 8 columns of head 128, <= 4 of head 256) | on | off",
                    set_switch(&t->split_keys)});
}

void PrintHelp(const char* cmd, const std::vector<Flag>& flags) {
  std::fprintf(stderr, "usage: ladder-kernels %s [flags]\n", cmd);
  for (const auto& f : flags)
    std::fprintf(stderr, "  --%-14s %s\n", (f.name + (f.takes_value ? " V" : "")).c_str(),
                 f.help.c_str());
}

// Returns false (after printing) on error or --help.
bool ParseFlags(const char* cmd, int argc, char** argv, int first, const std::vector<Flag>& flags) {
  for (int i = first; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      PrintHelp(cmd, flags);
      return false;
    }
    if (a.substr(0, 2) != "--") {
      std::fprintf(stderr, "unexpected argument '%s'\n", argv[i]);
      PrintHelp(cmd, flags);
      return false;
    }
    a.remove_prefix(2);
    std::string_view value;
    bool has_value = false;
    if (const size_t eq = a.find('='); eq != std::string_view::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    const Flag* f = nullptr;
    for (const auto& cand : flags)
      if (cand.name == a) f = &cand;
    if (f == nullptr) {
      std::fprintf(stderr, "unknown flag --%.*s\n", static_cast<int>(a.size()), a.data());
      PrintHelp(cmd, flags);
      return false;
    }
    if (f->takes_value && !has_value) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "--%s needs a value\n", f->name.c_str());
        return false;
      }
      value = argv[++i];
    }
    if (auto st = f->set(value); !st.ok()) {
      std::fprintf(stderr, "--%s: %s\n", f->name.c_str(), st.error().message.c_str());
      return false;
    }
  }
  return true;
}

int Bench(int argc, char** argv) {
  lk::SweepOptions o;
  o.presets = {"tiny"};
  o.depths = {256, 1024, 4096};
  o.query_rows = {1, 2, 4};
  o.policies = {lk::Policy::kForce2D, lk::Policy::kForce3D};
  bool json = false;
  std::string json_out;
  std::vector<Flag> flags = {
      {"backend", true, "cpu | cuda | hip (default cpu)",
       [&](std::string_view v) -> lk::Status {
         LADDER_K_ASSIGN_OR_RETURN(o.backend, lk::ParseBackend(v));
         return {};
       }},
      {"preset", true, "shape presets, comma separated (see `presets`)",
       [&](std::string_view v) -> lk::Status {
         o.presets = Split(v);
         return {};
       }},
      {"depths", true, "KV lengths, e.g. 1K,8K,32K",
       [&](std::string_view v) -> lk::Status {
         LADDER_K_ASSIGN_OR_RETURN(o.depths, ParseInts(v));
         return {};
       }},
      {"rows", true, "query rows per sequence, e.g. 1,2,4",
       [&](std::string_view v) -> lk::Status {
         LADDER_K_ASSIGN_OR_RETURN(o.query_rows, ParseInts(v));
         return {};
       }},
      {"policy", true, "2d, 3d, legacy, spec-aware, auto (comma separated)",
       [&](std::string_view v) -> lk::Status {
         o.policies.clear();
         for (const auto& p : Split(v)) {
           LADDER_K_ASSIGN_OR_RETURN(lk::Policy pol, lk::ParsePolicy(p));
           o.policies.push_back(pol);
         }
         return {};
       }},
      {"dtype", true, "bf16 (default) | f16 | f32 (cpu only)",
       [&](std::string_view v) -> lk::Status {
         LADDER_K_ASSIGN_OR_RETURN(o.dtype, lk::ParseDType(v));
         return {};
       }},
      {"seqs", true, "sequences per call (default 1)",
       [&](std::string_view v) -> lk::Status {
         LADDER_K_ASSIGN_OR_RETURN(o.num_seqs, ParseInt(v));
         return {};
       }},
      {"block-size", true, "KV page size in tokens (default 16)",
       [&](std::string_view v) -> lk::Status {
         LADDER_K_ASSIGN_OR_RETURN(o.block_size, ParseInt(v));
         return {};
       }},
      {"warmup", true, "untimed calls per point (default 2)",
       [&](std::string_view v) -> lk::Status {
         LADDER_K_ASSIGN_OR_RETURN(o.warmup, ParseInt(v));
         return {};
       }},
      {"repeats", true, "timed calls per point (default 10)",
       [&](std::string_view v) -> lk::Status {
         LADDER_K_ASSIGN_OR_RETURN(o.repeats, ParseInt(v));
         return {};
       }},
      {"segments", true, "force the 3D segment count (default: from SM count and depth)",
       [&](std::string_view v) -> lk::Status {
         LADDER_K_ASSIGN_OR_RETURN(o.config.force_segments, ParseInt(v));
         return {};
       }},
      {"flush-l2", false, "overwrite the L2 between timed calls (stream timing only)",
       [&](std::string_view) -> lk::Status {
         o.flush_l2 = true;
         return {};
       }},
      {"graph", false,
       "time graph replays, as engines run decode: --graph-calls calls captured in one graph, each "
       "sample one replay / calls (default: stream launches, one call per sample)",
       [&](std::string_view) -> lk::Status {
         o.timing = lk::Timing::kGraph;
         return {};
       }},
      {"graph-calls", true, "calls captured per graph with --graph (default 20)",
       [&](std::string_view v) -> lk::Status {
         LADDER_K_ASSIGN_OR_RETURN(o.graph_calls, ParseInt(v));
         return {};
       }},
      {"json", false, "print a JSON array instead of the table",
       [&](std::string_view) -> lk::Status {
         json = true;
         return {};
       }},
      {"json-out", true, "also write the JSON array to this file",
       [&](std::string_view v) -> lk::Status {
         json_out = v;
         return {};
       }},
  };
  AddTuningFlags(&o.tuning, &flags);
  if (!ParseFlags("bench", argc, argv, 2, flags)) return 2;
  if (!json) std::printf("%s\n", lk::FormatTableHeader().c_str());
  auto results = lk::RunSweep(o, [&](const lk::BenchResult& r) {
    if (!json) {
      std::printf("%s\n", lk::FormatTableRow(r).c_str());
      std::fflush(stdout);
    }
  });
  if (!results.ok()) {
    std::fprintf(stderr, "bench failed: %s\n", results.error().ToString().c_str());
    return 1;
  }
  if (json)
    std::printf("%s", lk::FormatJsonArray(results.value()).c_str());
  else
    std::printf("%s", lk::FormatTableFooter(results.value()).c_str());
  if (!json_out.empty()) {
    std::ofstream f(json_out);
    f << lk::FormatJsonArray(results.value());
    if (!f) {
      std::fprintf(stderr, "could not write %s\n", json_out.c_str());
      return 1;
    }
  }
  return 0;
}

int Check(int argc, char** argv) {
  lk::Backend backend = lk::Backend::kCpu;
  std::string only;
  int repeats = 10;
  lk::TuningConfig tuning;
  std::vector<Flag> flags = {
      {"backend", true, "cpu | cuda | hip (default cpu)",
       [&](std::string_view v) -> lk::Status {
         LADDER_K_ASSIGN_OR_RETURN(backend, lk::ParseBackend(v));
         return {};
       }},
      {"case", true, "run only cases whose name contains this",
       [&](std::string_view v) -> lk::Status {
         only = v;
         return {};
       }},
      {"repeats", true, "calls per path for the determinism check (default 10)",
       [&](std::string_view v) -> lk::Status {
         LADDER_K_ASSIGN_OR_RETURN(repeats, ParseInt(v));
         return {};
       }},
  };
  AddTuningFlags(&tuning, &flags);
  if (!ParseFlags("check", argc, argv, 2, flags)) return 2;
  if (auto valid = tuning.Validate(); !valid.ok()) {
    std::fprintf(stderr, "%s\n", valid.error().message.c_str());
    return 2;
  }
  if (!lk::BackendAvailable(backend)) {
    auto info = lk::QueryDevice(backend);
    std::fprintf(stderr, "backend %s unavailable: %s\n", std::string(lk::ToString(backend)).c_str(),
                 info.ok() ? "no device" : info.error().message.c_str());
    return 1;
  }
  if (auto info = lk::QueryDevice(backend); info.ok())
    std::printf("device: %s (%d SMs/threads, warp %d), tuning: %s\n", info->name.c_str(),
                info->sm_count, info->warp_size, tuning.ToString().c_str());
  int failed = 0, run = 0;
  for (const lk::CaseSpec& c : lk::Cases()) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    auto r = lk::RunCase(backend, c, repeats, /*cpu_threads=*/2, tuning);
    ++run;
    // A forced kernel has no instantiation for some cases' score columns: not a failure.
    if (!r.ok() && r.error().code == lk::ErrorCode::kUnsupported &&
        tuning.ToString() != "defaults") {
      std::printf("SKIP  %-34s %s\n", c.name.c_str(), r.error().message.c_str());
      --run;
      continue;
    }
    if (!r.ok()) {
      std::printf("ERROR %-34s %s\n", c.name.c_str(), r.error().ToString().c_str());
      ++failed;
      continue;
    }
    std::printf("%s\n", r->Line().c_str());
    std::fflush(stdout);
    if (!r->passed) ++failed;
  }
  std::printf("%d cases, %d failed\n", run, failed);
  return failed == 0 && run > 0 ? 0 : 1;
}

int Presets() {
  for (const auto& p : lk::Presets())
    std::printf("%-24s q %3d kv %3d head %4d window %5d  %s\n", p.name.c_str(), p.q_heads,
                p.kv_heads, p.head_dim, p.window, p.description.c_str());
  return 0;
}

int ListCases() {
  for (const auto& c : lk::Cases()) {
    std::string seqs;
    // (Appended piece by piece: GCC 12 warns -Wrestrict, falsely, on "(" + std::string&& at -O3.)
    for (const auto& s : c.seqs) {
      seqs += '(';
      seqs += std::to_string(s.q_len);
      seqs += ',';
      seqs += std::to_string(s.kv_len);
      seqs += ')';
    }
    std::printf("%-34s q %2d kv %2d d %3d bs %2d win %4d cap %4.0f %-4s seqs %s\n", c.name.c_str(),
                c.shape.q_heads, c.shape.kv_heads, c.shape.head_dim, c.shape.block_size,
                c.shape.window, c.shape.softcap, std::string(lk::ToString(c.shape.dtype)).c_str(),
                seqs.c_str());
  }
  return 0;
}

int Devices() {
  for (lk::Backend b : {lk::Backend::kCpu, lk::Backend::kCuda, lk::Backend::kHip}) {
    auto info = lk::QueryDevice(b);
    if (info.ok())
      std::printf("%-4s %s: %d SMs, warp %d, L2 %zu KiB, cc %d.%d\n",
                  std::string(lk::ToString(b)).c_str(), info->name.c_str(), info->sm_count,
                  info->warp_size, info->l2_bytes / 1024, info->cc_major, info->cc_minor);
    else
      std::printf("%-4s unavailable: %s\n", std::string(lk::ToString(b)).c_str(),
                  info.error().message.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view cmd = argc > 1 ? argv[1] : "";
  if (cmd == "bench") return Bench(argc, argv);
  if (cmd == "check") return Check(argc, argv);
  if (cmd == "presets") return Presets();
  if (cmd == "cases") return ListCases();
  if (cmd == "devices") return Devices();
  std::fprintf(
      stderr,
      "ladder-kernels: unified attention over a paged KV cache (CPU, CUDA, HIP)\n"
      "commands:\n"
      "  bench    sweep depth x rows x policy x preset; prints µs, bytes/s, %% of copy ceiling\n"
      "  check    run the correctness case table on a backend (non-zero exit on failure)\n"
      "  presets  list shape presets\n"
      "  cases    list correctness cases\n"
      "  devices  list backends compiled in and their devices\n"
      "run `ladder-kernels <command> --help` for flags\n");
  return cmd.empty() || cmd == "--help" || cmd == "help" ? 0 : 2;
}
