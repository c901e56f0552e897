#include "ladder/kernels/attention.h"

#include "ladder/kernels/device_attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>

#include "cpu_attention.h"
#include "geometry.h"
#include "gpu_api.h"
#include "numeric.h"

namespace ladder::kernels {

using internal::Bf16ToFloat;
using internal::FloatToBf16;
using internal::FloatToHalf;
using internal::HalfToFloat;

std::string_view ToString(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kDeviceError:
      return "device error";
    case ErrorCode::kCheckFailed:
      return "check failed";
  }
  return "?";
}

std::string KernelError::ToString() const {
  return std::string(kernels::ToString(code)) + ": " + message;
}

std::string_view ToString(Backend b) {
  switch (b) {
    case Backend::kCpu:
      return "cpu";
    case Backend::kCuda:
      return "cuda";
    case Backend::kHip:
      return "hip";
  }
  return "?";
}
std::string_view ToString(Path p) { return p == Path::k2D ? "2D" : "3D"; }
std::string_view ToString(Policy p) {
  switch (p) {
    case Policy::kForce2D:
      return "2d";
    case Policy::kForce3D:
      return "3d";
    case Policy::kLegacy:
      return "legacy";
    case Policy::kSpecAware:
      return "spec-aware";
    case Policy::kAuto:
      return "auto";
  }
  return "?";
}
std::string_view ToString(DType d) {
  switch (d) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
  }
  return "?";
}

Result<Backend> ParseBackend(std::string_view s) {
  if (s == "cpu") return Backend::kCpu;
  if (s == "cuda") return Backend::kCuda;
  if (s == "hip") return Backend::kHip;
  return Error(ErrorCode::kInvalidArgument,
               "unknown backend '" + std::string(s) + "' (known: cpu, cuda, hip)");
}
Result<Policy> ParsePolicy(std::string_view s) {
  if (s == "2d" || s == "2D" || s == "force-2d") return Policy::kForce2D;
  if (s == "3d" || s == "3D" || s == "force-3d") return Policy::kForce3D;
  if (s == "legacy") return Policy::kLegacy;
  if (s == "spec-aware" || s == "spec_aware") return Policy::kSpecAware;
  if (s == "auto") return Policy::kAuto;
  return Error(ErrorCode::kInvalidArgument,
               "unknown policy '" + std::string(s) + "' (known: 2d, 3d, legacy, spec-aware, auto)");
}
Result<DType> ParseDType(std::string_view s) {
  if (s == "f32" || s == "float32") return DType::kF32;
  if (s == "f16" || s == "float16" || s == "fp16") return DType::kF16;
  if (s == "bf16" || s == "bfloat16") return DType::kBF16;
  return Error(ErrorCode::kInvalidArgument,
               "unknown dtype '" + std::string(s) + "' (known: f32, f16, bf16)");
}
size_t DTypeBytes(DType d) { return d == DType::kF32 ? 4 : 2; }

bool BackendAvailable(Backend b) {
  if (b == Backend::kCpu) return true;
  if (gpu::CompiledBackend() != b) return false;
  return gpu::QueryDevice().ok();
}

Result<DeviceInfo> QueryDevice(Backend b) {
  if (b == Backend::kCpu) {
    DeviceInfo info;
    info.name = "cpu";
    info.sm_count = 2;
    info.warp_size = 1;
    return info;
  }
  if (gpu::CompiledBackend() != b)
    return Error(ErrorCode::kUnavailable,
                 "backend " + std::string(ToString(b)) +
                     " is not compiled into this binary (configure with -DLADDER_" +
                     (b == Backend::kCuda ? "CUDA" : "HIP") + "=ON)");
  return gpu::QueryDevice();
}

// ---------------------------------------------------------------------------------------------
// HostTensor

HostTensor::HostTensor(DType dtype, size_t numel)
    : dtype_(dtype), numel_(numel), bytes_(numel * DTypeBytes(dtype), 0) {}

float HostTensor::Get(size_t i) const {
  switch (dtype_) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, bytes_.data() + i * 4, 4);
      return v;
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, bytes_.data() + i * 2, 2);
      return Bf16ToFloat(h);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, bytes_.data() + i * 2, 2);
      return HalfToFloat(h);
    }
  }
  return 0.0f;
}

void HostTensor::Set(size_t i, float v) {
  switch (dtype_) {
    case DType::kF32:
      std::memcpy(bytes_.data() + i * 4, &v, 4);
      break;
    case DType::kBF16: {
      const uint16_t h = FloatToBf16(v);
      std::memcpy(bytes_.data() + i * 2, &h, 2);
      break;
    }
    case DType::kF16: {
      const uint16_t h = FloatToHalf(v);
      std::memcpy(bytes_.data() + i * 2, &h, 2);
      break;
    }
  }
}

uint32_t HostTensor::Bits(size_t i) const {
  if (dtype_ == DType::kF32) {
    uint32_t v;
    std::memcpy(&v, bytes_.data() + i * 4, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, bytes_.data() + i * 2, 2);
  return h;
}

// ---------------------------------------------------------------------------------------------
// Shapes and problems

float AttentionShape::EffectiveScale() const {
  return scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

Status AttentionShape::Validate() const {
  if (q_heads <= 0 || kv_heads <= 0 || q_heads % kv_heads != 0)
    return Error(ErrorCode::kInvalidArgument, "q_heads (" + std::to_string(q_heads) +
                                                  ") must be a positive multiple of kv_heads (" +
                                                  std::to_string(kv_heads) + ")");
  if (head_dim != 64 && head_dim != 128 && head_dim != 256 && head_dim != 512)
    return Error(ErrorCode::kInvalidArgument,
                 "head_dim " + std::to_string(head_dim) + " not supported (64, 128, 256, 512)");
  if (block_size <= 0 || (block_size & (block_size - 1)) != 0)
    return Error(ErrorCode::kInvalidArgument, "block_size must be a power of two");
  if (window < 0) return Error(ErrorCode::kInvalidArgument, "window must be >= 0");
  if (softcap < 0) return Error(ErrorCode::kInvalidArgument, "softcap must be >= 0");
  return OkStatus();
}

int HostProblem::max_query_len() const {
  int m = 0;
  for (size_t s = 0; s + 1 < query_start.size(); ++s)
    m = std::max(m, query_start[s + 1] - query_start[s]);
  return m;
}
int HostProblem::max_kv_len() const {
  return seq_lens.empty() ? 0 : *std::max_element(seq_lens.begin(), seq_lens.end());
}

Status HostProblem::Validate() const {
  LADDER_K_TRY(shape.Validate());
  const int ns = num_seqs();
  if (ns <= 0) return Error(ErrorCode::kInvalidArgument, "no sequences");
  if (static_cast<int>(query_start.size()) != ns + 1 || query_start[0] != 0)
    return Error(ErrorCode::kInvalidArgument,
                 "query_start must have num_seqs + 1 entries starting at 0");
  for (int s = 0; s < ns; ++s) {
    const int ql = query_start[s + 1] - query_start[s];
    if (ql < 1)
      return Error(ErrorCode::kInvalidArgument,
                   "sequence " + std::to_string(s) + " has no query rows");
    if (seq_lens[s] < ql)
      return Error(ErrorCode::kInvalidArgument,
                   "sequence " + std::to_string(s) + ": seq_len < query rows");
    if ((seq_lens[s] + shape.block_size - 1) / shape.block_size > max_blocks_per_seq)
      return Error(ErrorCode::kInvalidArgument,
                   "sequence " + std::to_string(s) + " needs more pages than the block table has");
  }
  if (static_cast<int>(block_table.size()) != ns * max_blocks_per_seq)
    return Error(ErrorCode::kInvalidArgument, "block_table size != num_seqs * max_blocks_per_seq");
  for (int b : block_table)
    if (b < 0 || b >= num_blocks)
      return Error(ErrorCode::kInvalidArgument, "block table entry out of range");
  const size_t row = static_cast<size_t>(shape.head_dim);
  if (q.numel() != static_cast<size_t>(num_tokens()) * shape.q_heads * row ||
      q.dtype() != shape.dtype)
    return Error(ErrorCode::kInvalidArgument, "q has the wrong size or dtype");
  const size_t kv = static_cast<size_t>(num_blocks) * shape.block_size * shape.kv_heads * row;
  if (k_cache.numel() != kv || v_cache.numel() != kv || k_cache.dtype() != shape.dtype ||
      v_cache.dtype() != shape.dtype)
    return Error(ErrorCode::kInvalidArgument, "k/v cache has the wrong size or dtype");
  return OkStatus();
}

Result<HostProblem> MakeProblem(const AttentionShape& shape, const std::vector<SeqSpec>& seqs,
                                uint64_t seed, float q_scale) {
  LADDER_K_TRY(shape.Validate());
  if (seqs.empty()) return Error(ErrorCode::kInvalidArgument, "no sequences");
  HostProblem p;
  p.shape = shape;
  p.query_start.push_back(0);
  int max_pages = 0, total_pages = 0;
  for (const SeqSpec& s : seqs) {
    if (s.q_len < 1 || s.kv_len < s.q_len)
      return Error(ErrorCode::kInvalidArgument, "each sequence needs 1 <= q_len <= kv_len");
    p.query_start.push_back(p.query_start.back() + s.q_len);
    p.seq_lens.push_back(s.kv_len);
    const int pages = (s.kv_len + shape.block_size - 1) / shape.block_size;
    max_pages = std::max(max_pages, pages);
    total_pages += pages;
  }
  p.max_blocks_per_seq = max_pages;
  p.num_blocks = total_pages;
  // Physical pages in a seeded shuffled order, so paging is exercised.
  std::vector<int> perm(total_pages);
  std::iota(perm.begin(), perm.end(), 0);
  for (int i = total_pages - 1; i > 0; --i) {
    const auto j = static_cast<int>(internal::SplitMix64(seed ^ (0xb10cull << 32) ^ i) % (i + 1));
    std::swap(perm[i], perm[j]);
  }
  p.block_table.assign(static_cast<size_t>(seqs.size()) * max_pages, 0);
  int next = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int pages = (seqs[s].kv_len + shape.block_size - 1) / shape.block_size;
    for (int b = 0; b < pages; ++b) p.block_table[s * max_pages + b] = perm[next++];
  }
  const size_t d = shape.head_dim;
  p.q = HostTensor(shape.dtype, static_cast<size_t>(p.num_tokens()) * shape.q_heads * d);
  const size_t kv = static_cast<size_t>(p.num_blocks) * shape.block_size * shape.kv_heads * d;
  p.k_cache = HostTensor(shape.dtype, kv);
  p.v_cache = HostTensor(shape.dtype, kv);
  for (size_t i = 0; i < p.q.numel(); ++i)
    p.q.Set(i, internal::HashToValue(seed * 3 + 0, i) * q_scale);
  for (size_t i = 0; i < kv; ++i) p.k_cache.Set(i, internal::HashToValue(seed * 3 + 1, i));
  for (size_t i = 0; i < kv; ++i) p.v_cache.Set(i, internal::HashToValue(seed * 3 + 2, i));
  return p;
}

// ---------------------------------------------------------------------------------------------
// Policy

int ChooseSegments(const PolicyConfig& config, int work_units, int max_kv_len, int sm_count) {
  if (config.force_segments > 0) return config.force_segments;
  const int target = std::max(1, config.ctas_per_sm) * std::max(1, sm_count);
  // Round down: one more segment than fits leaves a second, nearly empty wave.
  int seg = target / std::max(1, work_units);
  const int by_len = std::max(1, max_kv_len / std::max(1, config.min_tokens_per_segment));
  seg = std::max(1, std::min({seg, by_len, std::max(1, config.max_segments)}));
  // No segment without keys: split into the kernel's whole tiles, only
  // ceil(tiles / ceil(tiles / seg)) segments get any, and launching the others costs empty work
  // groups and merge slots (H200, TP=2 at 8K: 66 launched, 64 with keys, +0.6 us against 64).
  const int tile_keys = std::max(1, config.tile_keys);
  const int tiles = (std::max(1, max_kv_len) + tile_keys - 1) / tile_keys;
  const int per = (tiles + seg - 1) / seg;
  return std::max(1, (tiles + per - 1) / per);
}

int KeysSeen(const AttentionShape& shape, int max_kv_len, int max_query_len) {
  if (shape.window <= 0) return max_kv_len;
  return std::min(max_kv_len, shape.window + std::max(1, max_query_len) - 1);
}

PathDecision ChoosePath(Policy policy, const PolicyConfig& config, int num_seqs, int max_query_len,
                        int max_kv_len, int kv_heads, int work_units, int sm_count) {
  PathDecision d;
  const int threshold = config.seq_threshold_3d > 0 ? config.seq_threshold_3d
                                                    : std::max(1, 128 / std::max(1, kv_heads));
  auto three_d = [&](std::string reason) {
    d.path = Path::k3D;
    d.segments = ChooseSegments(config, work_units, max_kv_len, sm_count);
    d.reason = std::move(reason);
  };
  auto two_d = [&](std::string reason) {
    d.path = Path::k2D;
    d.segments = 1;
    d.reason = std::move(reason);
  };
  switch (policy) {
    case Policy::kForce2D:
      two_d("forced 2D");
      break;
    case Policy::kForce3D:
      three_d("forced 3D");
      break;
    case Policy::kLegacy:
      if (max_query_len > 1)
        two_d("legacy: max_seqlen_q " + std::to_string(max_query_len) + " > 1");
      else if (num_seqs > threshold)
        two_d("legacy: num_seqs " + std::to_string(num_seqs) + " > threshold " +
              std::to_string(threshold));
      else
        three_d("legacy: decode, num_seqs <= threshold");
      break;
    case Policy::kSpecAware:
    case Policy::kAuto:
      if (max_query_len > config.decode_query_len)
        two_d("spec-aware: max_seqlen_q " + std::to_string(max_query_len) + " > decode_query_len " +
              std::to_string(config.decode_query_len) + " (prefill)");
      else if (num_seqs > threshold)
        two_d("spec-aware: num_seqs " + std::to_string(num_seqs) + " > threshold " +
              std::to_string(threshold));
      else
        three_d("spec-aware: max_seqlen_q " + std::to_string(max_query_len) +
                " <= decode_query_len");
      break;
  }
  return d;
}

// ---------------------------------------------------------------------------------------------
// Running on host data

namespace {

// Copies the problem in, runs it through the device-resident entry point (the same policy and
// launcher an engine uses) and copies the output back.
Result<RunInfo> RunOnGpu(Backend backend, const HostProblem& p, const RunOptions& options,
                         HostTensor* out) {
  using gpu::DeviceBuffer;
  LADDER_K_ASSIGN_OR_RETURN(DeviceBuffer qs,
                            DeviceBuffer::Alloc(p.query_start.size() * sizeof(int)));
  LADDER_K_ASSIGN_OR_RETURN(DeviceBuffer sl, DeviceBuffer::Alloc(p.seq_lens.size() * sizeof(int)));
  LADDER_K_ASSIGN_OR_RETURN(
      DeviceBuffer bt,
      DeviceBuffer::Alloc(std::max<size_t>(1, p.block_table.size()) * sizeof(int)));
  LADDER_K_ASSIGN_OR_RETURN(DeviceBuffer q, DeviceBuffer::Alloc(p.q.bytes()));
  LADDER_K_ASSIGN_OR_RETURN(DeviceBuffer k, DeviceBuffer::Alloc(p.k_cache.bytes()));
  LADDER_K_ASSIGN_OR_RETURN(DeviceBuffer v, DeviceBuffer::Alloc(p.v_cache.bytes()));
  LADDER_K_ASSIGN_OR_RETURN(DeviceBuffer o, DeviceBuffer::Alloc(out->bytes()));
  LADDER_K_TRY(gpu::CopyToDevice(qs.get(), p.query_start.data(), qs.size()));
  LADDER_K_TRY(gpu::CopyToDevice(sl.get(), p.seq_lens.data(), sl.size()));
  LADDER_K_TRY(
      gpu::CopyToDevice(bt.get(), p.block_table.data(), p.block_table.size() * sizeof(int)));
  LADDER_K_TRY(gpu::CopyToDevice(q.get(), p.q.data(), q.size()));
  LADDER_K_TRY(gpu::CopyToDevice(k.get(), p.k_cache.data(), k.size()));
  LADDER_K_TRY(gpu::CopyToDevice(v.get(), p.v_cache.data(), v.size()));
  DeviceAttentionArgs args;
  args.shape = p.shape;
  args.num_seqs = p.num_seqs();
  args.num_tokens = p.num_tokens();
  args.max_query_len = p.max_query_len();
  args.max_kv_len = p.max_kv_len();
  args.max_blocks_per_seq = p.max_blocks_per_seq;
  args.query_start = static_cast<const int*>(qs.get());
  args.seq_lens = static_cast<const int*>(sl.get());
  args.block_table = static_cast<const int*>(bt.get());
  args.q = q.get();
  args.k_cache = k.get();
  args.v_cache = v.get();
  args.out = o.get();
  LADDER_K_ASSIGN_OR_RETURN(DeviceAttentionPlan plan, PlanDeviceAttention(backend, args, options));
  LADDER_K_ASSIGN_OR_RETURN(DeviceBuffer ws,
                            DeviceBuffer::Alloc(std::max<size_t>(plan.workspace_bytes, 16)));
  LADDER_K_TRY(LaunchDeviceAttention(backend, args, plan, nullptr, ws.get(), ws.size()));
  LADDER_K_TRY(gpu::Synchronize());
  LADDER_K_TRY(gpu::CopyToHost(out->data(), o.get(), out->bytes()));
  return plan.info;
}

}  // namespace

Result<RunInfo> RunAttention(Backend backend, const HostProblem& problem, const RunOptions& options,
                             HostTensor* out) {
  if (out == nullptr) return Error(ErrorCode::kInvalidArgument, "out is null");
  LADDER_K_TRY(problem.Validate());
  LADDER_K_TRY(options.tuning.Validate());
  *out = HostTensor(problem.shape.dtype, static_cast<size_t>(problem.num_tokens()) *
                                             problem.shape.q_heads * problem.shape.head_dim);
  if (backend != Backend::kCpu) return RunOnGpu(backend, problem, options, out);

  const int threads = std::max(1, options.cpu_threads);
  const int units = problem.num_seqs() * problem.shape.kv_heads;
  const PathDecision dec =
      ChoosePath(options.policy, options.config, problem.num_seqs(), problem.max_query_len(),
                 KeysSeen(problem.shape, problem.max_kv_len(), problem.max_query_len()),
                 problem.shape.kv_heads, units, threads);
  internal::RunCpu(problem, dec.path, dec.segments, threads, out);
  RunInfo info;
  info.path = dec.path;
  info.segments = dec.segments;
  info.reason = dec.reason;
  info.grid = "cpu " + std::to_string(problem.num_seqs()) + "x" +
              std::to_string(problem.shape.kv_heads) + "x" + std::to_string(dec.segments) +
              " items on " + std::to_string(threads) + " threads";
  return info;
}

int64_t UlpDistance(DType dtype, uint32_t a, uint32_t b) {
  auto ordered = [dtype](uint32_t bits) -> int64_t {
    if (dtype == DType::kF32) {
      const int64_t mag = bits & 0x7fffffffu;
      return (bits & 0x80000000u) ? -mag : mag;
    }
    const int64_t mag = bits & 0x7fffu;
    return (bits & 0x8000u) ? -mag : mag;
  };
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

}  // namespace ladder::kernels
