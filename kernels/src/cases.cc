#include "ladder/kernels/cases.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace ladder::kernels {
namespace {

AttentionShape Shape(int qh, int kvh, int d, int bs = 16, int window = 0, float softcap = 0,
                     DType dt = DType::kBF16) {
  AttentionShape s;
  s.q_heads = qh;
  s.kv_heads = kvh;
  s.head_dim = d;
  s.block_size = bs;
  s.window = window;
  s.softcap = softcap;
  s.dtype = dt;
  return s;
}

std::vector<CaseSpec> MakeCases() {
  std::vector<CaseSpec> c;
  auto add = [&](std::string name, AttentionShape sh, std::vector<SeqSpec> seqs, int force_seg = 0,
                 bool cpu_only = false) {
    CaseSpec cs;
    cs.name = std::move(name);
    cs.shape = sh;
    cs.seqs = std::move(seqs);
    cs.seed = 1000 + c.size();
    cs.force_segments = force_seg;
    cs.cpu_only = cpu_only;
    c.push_back(std::move(cs));
  };
  add("decode_d64_partial_first_page", Shape(8, 2, 64), {{1, 5}});
  add("decode_d128_gqa8_1k", Shape(16, 2, 128), {{1, 1000}});
  add("spec2_d128_gqa8_2k", Shape(16, 2, 128), {{2, 2048}});
  add("spec4_d128_bs32_3k", Shape(16, 2, 128, 32), {{4, 3000}});
  add("prefill5_d128_777", Shape(16, 2, 128), {{5, 777}});
  add("prefill8_d64_200", Shape(8, 2, 64), {{8, 200}});
  add("decode_d256_window128", Shape(8, 4, 256, 16, 128), {{1, 2000}});
  add("spec2_d256_window100_softcap30", Shape(8, 4, 256, 16, 100, 30.0f), {{2, 1500}});
  add("spec4_d256_softcap50_4k", Shape(8, 4, 256, 16, 0, 50.0f), {{4, 4096}});
  add("decode_d512_gqa8_4k", Shape(16, 2, 512), {{1, 4096}});
  add("spec2_d512_gqa8_2500", Shape(16, 2, 512), {{2, 2500}});
  add("spec4_d512_bs32_1234", Shape(16, 2, 512, 32), {{4, 1234}});
  add("prefill5_d512_window512", Shape(16, 2, 512, 16, 512), {{5, 3000}});
  add("mixed_decode_3seqs", Shape(8, 2, 128), {{1, 17}, {1, 1024}, {1, 300}});
  add("mixed_rows_4seqs", Shape(8, 2, 128), {{1, 100}, {2, 2000}, {4, 513}, {5, 64}});
  add("mixed_window64_softcap20_bs32", Shape(8, 4, 256, 32, 64, 20.0f),
      {{2, 700}, {1, 40}, {4, 1000}});
  add("mha_d64_spec2", Shape(4, 4, 64), {{2, 333}});
  add("gqa16_d128_spec2", Shape(16, 1, 128), {{2, 2048}});
  add("window2_spec4_rows_see_little", Shape(8, 2, 64, 16, 2), {{4, 300}});
  add("empty_segments_forced16", Shape(8, 2, 64), {{2, 40}}, 16);
  add("f16_spec2_d128", Shape(16, 2, 128, 16, 0, 0, DType::kF16), {{2, 1500}});
  add("f32_spec2_d64_cpu", Shape(8, 2, 64, 16, 0, 0, DType::kF32), {{2, 900}}, 0, true);
  add("deep_64k_d64_spec2", Shape(4, 1, 64), {{2, 65536}});
  // Head 512 beyond GQA 8 (the sm_90 team kernel picks 8, 16 or 32 score columns): mixed rows
  // with window and softcap, f16 with 8 query rows of GQA 4 (32 columns) and a partial page, GQA
  // 16 at 2 rows (32 columns) with forced, mostly empty segments.
  add("mixed_d512_window700_softcap30_bs32", Shape(32, 4, 512, 32, 700, 30.0f),
      {{2, 1500}, {1, 9}, {4, 2100}});
  add("f16_d512_gqa4_rows8_partial_page", Shape(8, 2, 512, 16, 0, 0, DType::kF16),
      {{8, 70}, {3, 33}});
  add("d512_gqa16_spec2_empty_segments", Shape(16, 1, 512), {{2, 40}}, 16);
  // Five rows of GQA 8 at head 512 (40 columns: the column-teams kernel on Hopper): shorter
  // queries beside the longest (fewer columns than the kernel's), 8-token pages (a chunk spans
  // two), softcap; nine rows of GQA 4 (36 columns: a part-filled n-tile); f16 with forced,
  // mostly empty segments.
  add("mtp5_d512_gqa8_mixed_bs8_softcap30", Shape(32, 4, 512, 8, 0, 30.0f),
      {{5, 2000}, {3, 77}, {5, 16}});
  add("rows9_d512_gqa4_36_columns", Shape(8, 2, 512), {{9, 1500}});
  add("f16_mtp5_d512_empty_segments", Shape(16, 2, 512, 16, 0, 0, DType::kF16), {{5, 40}}, 16);
  return c;
}

double UlpOf(DType dt, double v) {
  const double a = std::max(std::fabs(v), 1e-30);
  const int bits = dt == DType::kBF16 ? 8 : dt == DType::kF16 ? 11 : 24;
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  double ulp = std::ldexp(1.0, e - bits);
  if (dt == DType::kF16) ulp = std::max(ulp, std::ldexp(1.0, -24));
  return ulp;
}

}  // namespace

std::span<const CaseSpec> Cases() {
  static const std::vector<CaseSpec> cases = MakeCases();
  return cases;
}

std::string CaseResult::Line() const {
  char buf[512];
  if (skipped) {
    std::snprintf(buf, sizeof(buf), "SKIP %-34s %s", name.c_str(), skip_reason.c_str());
    return buf;
  }
  std::snprintf(buf, sizeof(buf),
                "%s %-34s 2D rel %.2e det %s | 3D(%3d seg) rel %.2e det %s | 2D~3D %lld ulp (raw "
                "%lld) | %.2fs%s%s",
                passed ? "PASS" : "FAIL", name.c_str(), p2d.rel_l2_err,
                p2d.deterministic ? "y" : "N", p3d.segments, p3d.rel_l2_err,
                p3d.deterministic ? "y" : "N", static_cast<long long>(max_ulp_2d_vs_3d),
                static_cast<long long>(max_raw_ulp_2d_vs_3d), seconds, failure.empty() ? "" : " : ",
                failure.c_str());
  return buf;
}

Result<CaseResult> RunCase(Backend backend, const CaseSpec& spec, int repeats, int cpu_threads,
                           const TuningConfig& tuning) {
  const auto t0 = std::chrono::steady_clock::now();
  CaseResult res;
  res.name = spec.name;
  res.backend = backend;
  if (spec.cpu_only && backend != Backend::kCpu) {
    res.skipped = true;
    res.passed = true;
    res.skip_reason = "dtype " + std::string(ToString(spec.shape.dtype)) + " is CPU-only";
    return res;
  }
  LADDER_K_ASSIGN_OR_RETURN(HostProblem prob, MakeProblem(spec.shape, spec.seqs, spec.seed));
  const std::vector<double> ref = ReferenceAttention(prob);
  double ref_max = 0, ref_sq = 0;
  for (double v : ref) {
    ref_max = std::max(ref_max, std::fabs(v));
    ref_sq += v * v;
  }
  const DType dt = spec.shape.dtype;
  const double rel_tol = dt == DType::kBF16 ? 4e-3 : dt == DType::kF16 ? 1e-3 : 1e-5;
  const double abs_slack = std::ldexp(ref_max, -12);

  std::vector<std::string> failures;
  auto run_path = [&](Path path, PathOutcome* outc, HostTensor* first) -> Status {
    RunOptions opt;
    opt.policy = path == Path::k2D ? Policy::kForce2D : Policy::kForce3D;
    opt.config.force_segments = spec.force_segments;
    // The CPU "device" has 2 threads; ask for more items so the 3D path splits into several
    // segments there too.
    if (backend == Backend::kCpu) opt.config.ctas_per_sm = 8;
    opt.cpu_threads = cpu_threads;
    opt.tuning = tuning;
    HostTensor out;
    outc->path = path;
    outc->deterministic = true;
    for (int rep = 0; rep < std::max(1, repeats); ++rep) {
      LADDER_K_ASSIGN_OR_RETURN(RunInfo info, RunAttention(backend, prob, opt, &out));
      outc->segments = info.segments;
      if (rep == 0) {
        *first = out;
        continue;
      }
      for (size_t i = 0; i < out.numel(); ++i) {
        if (out.Bits(i) != first->Bits(i)) {
          outc->deterministic = false;
          break;
        }
      }
    }
    double err_sq = 0;
    bool within = true;
    for (size_t i = 0; i < first->numel(); ++i) {
      const double o = first->Get(i), r = ref[i];
      if (!std::isfinite(o)) {
        within = false;
        err_sq = INFINITY;
        continue;
      }
      const double e = std::fabs(o - r);
      outc->max_abs_err = std::max(outc->max_abs_err, e);
      err_sq += e * e;
      HostTensor rr(dt, 1);
      rr.Set(0, static_cast<float>(r));
      outc->max_ulp_vs_ref =
          std::max(outc->max_ulp_vs_ref, UlpDistance(dt, first->Bits(i), rr.Bits(0)));
      if (e > UlpOf(dt, r) + abs_slack) within = false;
    }
    outc->rel_l2_err = ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : std::sqrt(err_sq);
    if (outc->rel_l2_err > rel_tol) within = false;
    outc->within_tolerance = within;
    const std::string pn(ToString(path));
    if (!within) failures.push_back(pn + " outside tolerance vs double reference");
    if (!outc->deterministic) failures.push_back(pn + " not bit-identical across repeats");
    return OkStatus();
  };
  HostTensor out2d, out3d;
  LADDER_K_TRY(run_path(Path::k2D, &res.p2d, &out2d));
  LADDER_K_TRY(run_path(Path::k3D, &res.p3d, &out3d));
  const double floor = std::ldexp(ref_max, -6);
  for (size_t i = 0; i < out2d.numel(); ++i) {
    res.max_raw_ulp_2d_vs_3d =
        std::max(res.max_raw_ulp_2d_vs_3d, UlpDistance(dt, out2d.Bits(i), out3d.Bits(i)));
    const double a = out2d.Get(i), b = out3d.Get(i);
    const double u = UlpOf(dt, std::max({std::fabs(a), std::fabs(b), floor}));
    const auto d = static_cast<int64_t>(std::ceil(std::fabs(a - b) / u - 1e-9));
    res.max_ulp_2d_vs_3d = std::max(res.max_ulp_2d_vs_3d, d);
  }
  // 16-bit outputs: at most one ULP apart. f32: rounding differences are many f32 ULPs but tiny.
  if (dt != DType::kF32 && res.max_ulp_2d_vs_3d > 1)
    failures.push_back("2D and 3D differ by more than 1 ULP");
  if (dt == DType::kF32) {
    double md = 0;
    for (size_t i = 0; i < out2d.numel(); ++i)
      md = std::max(md, std::fabs(double(out2d.Get(i)) - out3d.Get(i)));
    if (md > 1e-5 * std::max(1.0, ref_max))
      failures.push_back("2D and 3D differ beyond float rounding");
  }
  res.passed = failures.empty();
  for (size_t i = 0; i < failures.size(); ++i) res.failure += (i ? "; " : "") + failures[i];
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace ladder::kernels
