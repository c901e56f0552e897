// ladder-example-gpu-bench: a GPU benchmark program of ladder's own that meets the command
// runner's result contract, for the one-host bench's GPU arm (docs/statistics.md, "One host: the
// paired design, measured"; matrices/examples/one-host-ab-gpu.yaml).
//
// Each round streams a buffer through the GPU `--launches` times (y = a·x + y over --mib MiB of
// floats per array: memory-bound, like the decode attention it stands in for) and prints the
// rounds' GPU time, measured with CUDA events around the launches:
//   {"metric": "time_us", "value": 812.5, "round": 0}
// plus one {"evidence": {...}} line naming the device and the launches. The planted build
// (LADDER_EXAMPLE_PLANTED_EXTRA_PERCENT=10, ladder-example-gpu-bench-slow10) launches a tenth more
// than asked: 11 where 10 are asked, exactly 10 % more work. Exit 0 on success, 1 on a CUDA error,
// 2 on bad arguments.
//
//   ladder-example-gpu-bench --launches 10 --mib 256 --rounds 3
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

#ifdef LADDER_EXAMPLE_PLANTED_EXTRA_PERCENT
constexpr long long kExtraPercent = LADDER_EXAMPLE_PLANTED_EXTRA_PERCENT;
#else
constexpr long long kExtraPercent = 0;
#endif

__global__ void Axpy(float a, const float* __restrict__ x, float* __restrict__ y, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "ladder-example-gpu-bench: %s\n"
               "usage: ladder-example-gpu-bench [--launches K] [--mib M] [--rounds R]\n",
               why);
  return 2;
}

// Prints the failed call and exits 1: the runner fails the cell with this message.
void Check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "ladder-example-gpu-bench: %s: %s\n", what, cudaGetErrorString(status));
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  long long launches_asked = 10, mib = 256, rounds = 1;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--launches") == 0 && has_value) {
      launches_asked = std::atoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--mib") == 0 && has_value) {
      mib = std::atoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--rounds") == 0 && has_value) {
      rounds = std::atoll(argv[++i]);
    } else {
      return Usage((std::string("unknown argument ") + argv[i]).c_str());
    }
  }
  if (launches_asked < 1 || launches_asked > 10000) return Usage("--launches: 1 to 10000");
  if (mib < 1 || mib > 16384) return Usage("--mib: 1 to 16384");
  if (rounds < 1 || rounds > 100000) return Usage("--rounds: 1 to 100000");
  const long long launches = launches_asked + launches_asked * kExtraPercent / 100;
  const size_t n = static_cast<size_t>(mib) * (1u << 20) / sizeof(float);

  cudaDeviceProp prop{};
  int device = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  Check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::printf("{\"evidence\": {\"device\": \"%s\", \"launches\": %lld, \"mib\": %lld}}\n",
              prop.name, launches, mib);
  float *x = nullptr, *y = nullptr;
  Check(cudaMalloc(&x, n * sizeof(float)), "cudaMalloc");
  Check(cudaMalloc(&y, n * sizeof(float)), "cudaMalloc");
  Check(cudaMemset(x, 0, n * sizeof(float)), "cudaMemset");
  Check(cudaMemset(y, 0, n * sizeof(float)), "cudaMemset");
  const int threads = 256;
  const int blocks = prop.multiProcessorCount * 8;
  Axpy<<<blocks, threads>>>(1.0f, x, y, n);  // first launch: module load, not measured
  Check(cudaDeviceSynchronize(), "warm-up launch");
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  for (long long round = 0; round < rounds; ++round) {
    Check(cudaEventRecord(start), "cudaEventRecord");
    for (long long k = 0; k < launches; ++k) Axpy<<<blocks, threads>>>(0.5f, x, y, n);
    Check(cudaGetLastError(), "launch");
    Check(cudaEventRecord(stop), "cudaEventRecord");
    Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    std::printf("{\"metric\": \"time_us\", \"value\": %.3f, \"round\": %lld}\n", 1000.0 * ms,
                round);
  }
  cudaFree(x);
  cudaFree(y);
  return 0;
}
